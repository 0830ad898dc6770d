//! One tuner context per communicator: the plan's rules for its (nRanks, nNodes), NCCL's logger, and the decision
//! logic behind `getCollInfo`. Immutable after `init`, so any number of threads may use one context at once.
//!
//! Log lines (the exact formats are documented in `tuner/README.md`; `planner audit` parses them):
//! * at init, exactly one of the WARN lines ending in "NCCL's own choices stay in place", or one INFO line
//!   "planner-tuner: plan PATH applies: ..." (plus one WARN line when the NCCL versions differ);
//! * per `getCollInfo` of an active context, with `NCCL_DEBUG=INFO` and `TUNING` in `NCCL_DEBUG_SUBSYS`, one line
//!   "planner-tuner: COLL BYTES bytes nRanks R nNodes N -> OUTCOME".

use std::ffi::{c_char, c_int, c_ulong, CString};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::abi::{NcclDebugLogger, NCCL_ALL, NCCL_INIT, NCCL_LOG_INFO, NCCL_LOG_WARN, NCCL_TUNING};
use crate::plan::{parse_nccl_version, printable, Coll, Pick, Plan, ShapeIndex};

/// The environment variable naming the plan file.
pub const PLAN_ENV: &str = "PLANNER_TUNER_PLAN";
/// Plans larger than this are refused (a plan has one small object per band).
pub const MAX_PLAN_BYTES: u64 = 16 << 20;
/// Cost tables with more algorithms or protocols than this are treated as garbage (NCCL passes 7 x 3).
pub const MAX_TABLE_ALGORITHMS: usize = 16;
pub const MAX_TABLE_PROTOCOLS: usize = 8;

const KEPT: &str = "NCCL's own choices stay in place";

/// What `init` works from besides NCCL's arguments; [`InitSettings::from_environment`] is what NCCL's `init` uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitSettings {
    /// The plan file; None = `PLANNER_TUNER_PLAN` not set (or empty).
    pub plan_path: Option<PathBuf>,
    /// The NCCL that loaded the plugin, None = the plugin cannot tell.
    pub nccl_version: Option<(u32, u32, u32)>,
    /// Whether NCCL prints INFO lines of the TUNING subsystem (decision lines are only formatted then).
    pub log_decisions: bool,
}

impl InitSettings {
    /// `PLANNER_TUNER_PLAN`, NCCL's version (through the library that holds `logger`), `NCCL_DEBUG` and
    /// `NCCL_DEBUG_SUBSYS` (NCCL has copied `nccl.conf` settings into the environment by the time it calls `init`).
    pub fn from_environment(logger: NcclDebugLogger) -> InitSettings {
        InitSettings {
            plan_path: std::env::var_os(PLAN_ENV)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            nccl_version: loaded_nccl_version(logger),
            log_decisions: nccl_prints_tuning_info(
                std::env::var("NCCL_DEBUG").ok().as_deref(),
                std::env::var("NCCL_DEBUG_SUBSYS").ok().as_deref(),
            ),
        }
    }
}

/// The outcome of one `getCollInfo` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No plan for this communicator: nothing looked at, nothing logged.
    Inactive,
    /// The pick's entry was set to 0.0 (and `*nChannels` when the rule has channels).
    Applied(Pick),
    /// The plan's pair was masked by NCCL (-1.0, or not a number >= 0): table untouched.
    Masked(Pick),
    /// The plan's pair lies outside the table NCCL passed (numAlgo/numProto smaller than its index).
    NotInTable(Pick),
    /// No band covers this size.
    NoRule,
    /// Arguments the plugin does not act on: "collective", "size", "null pointer", "table shape".
    Unsupported(&'static str),
}

/// One communicator's state.
#[derive(Debug)]
pub struct TunerContext {
    n_ranks: u64,
    n_nodes: u64,
    logger: NcclDebugLogger,
    log_decisions: bool,
    index: Option<ShapeIndex>,
}

impl TunerContext {
    /// Reads the plan (if any) and logs the one init line (WARN or INFO). Never fails: any problem leaves the
    /// context inactive.
    pub fn new(
        n_ranks: usize,
        n_nodes: usize,
        logger: NcclDebugLogger,
        settings: &InitSettings,
    ) -> TunerContext {
        let n_ranks = n_ranks as u64;
        let n_nodes = n_nodes as u64;
        let mut context = TunerContext {
            n_ranks,
            n_nodes,
            logger,
            log_decisions: settings.log_decisions,
            index: None,
        };
        let Some(path) = &settings.plan_path else {
            context.warn(
                line!(),
                &format!("planner-tuner: {PLAN_ENV} is not set; {KEPT}"),
            );
            return context;
        };
        let shown = path.display();
        let text = match read_plan_file(path) {
            Ok(text) => text,
            Err(reason) => {
                context.warn(
                    line!(),
                    &format!("planner-tuner: cannot read plan {shown}: {reason}; {KEPT}"),
                );
                return context;
            }
        };
        let plan = match Plan::from_json(&text) {
            Ok(plan) => plan,
            Err(error) => {
                context.warn(
                    line!(),
                    &format!("planner-tuner: invalid plan {shown}: {error}; {KEPT}"),
                );
                return context;
            }
        };
        let index = plan.index_for_shape(n_ranks, n_nodes);
        if index.is_empty() {
            context.warn(
                line!(),
                &format!(
                    "planner-tuner: plan {shown} has no rule for nRanks {n_ranks} nNodes {n_nodes}; {KEPT}"
                ),
            );
            return context;
        }
        let planned = plan.provenance.nccl_version.as_deref();
        let loaded = settings.nccl_version;
        if let (Some(planned_text), Some(loaded)) = (planned, loaded) {
            if parse_nccl_version(planned_text) != Some(loaded) {
                context.warn(
                    line!(),
                    &format!(
                        "planner-tuner: plan {shown} was made with NCCL {planned_text}, this is NCCL {}; applying it anyway",
                        version_text(Some(loaded))
                    ),
                );
            }
        }
        context.info(
            NCCL_INIT | NCCL_TUNING,
            line!(),
            &format!(
                "planner-tuner: plan {shown} applies: {} of {} rules for nRanks {n_ranks} nNodes {n_nodes} (from {} {}, made with NCCL {}, running NCCL {})",
                index.len(),
                plan.rules.len(),
                plan.provenance.source_kind.name(),
                plan.provenance.source_file,
                planned.unwrap_or("unknown"),
                version_text(loaded)
            ),
        );
        context.index = Some(index);
        context
    }

    /// Whether a plan applies to this communicator.
    pub fn is_active(&self) -> bool {
        self.index.is_some()
    }

    /// The `getCollInfo` logic: steers `table` (contiguous `float[num_algo][num_proto]`) towards the plan's pair and
    /// sets `*n_channels` when the rule has channels; logs one decision line when NCCL prints TUNING INFO lines.
    ///
    /// # Safety
    /// `table` must be null or valid for reads and writes of `num_algo * num_proto` floats, and `n_channels` null
    /// or valid for a write, for the duration of the call (what NCCL passes).
    pub unsafe fn get_coll_info(
        &self,
        coll_type: c_int,
        n_bytes: usize,
        table: *mut f32,
        num_algo: c_int,
        num_proto: c_int,
        n_channels: *mut c_int,
    ) -> Decision {
        let Some(index) = &self.index else {
            return Decision::Inactive;
        };
        // SAFETY: forwarded from this function's contract.
        let decision = unsafe {
            decide(
                index, coll_type, n_bytes, table, num_algo, num_proto, n_channels,
            )
        };
        if self.log_decisions {
            let line = decision_line(coll_type, n_bytes, self.n_ranks, self.n_nodes, decision);
            self.info(NCCL_TUNING, line!(), &line);
        }
        decision
    }

    fn warn(&self, line: u32, message: &str) {
        emit(self.logger, NCCL_LOG_WARN, NCCL_ALL, line, message);
    }

    fn info(&self, flags: c_ulong, line: u32, message: &str) {
        emit(self.logger, NCCL_LOG_INFO, flags, line, message);
    }
}

/// # Safety
/// As [`TunerContext::get_coll_info`].
unsafe fn decide(
    index: &ShapeIndex,
    coll_type: c_int,
    n_bytes: usize,
    table: *mut f32,
    num_algo: c_int,
    num_proto: c_int,
    n_channels: *mut c_int,
) -> Decision {
    let Some(coll) = Coll::from_nccl_index(coll_type) else {
        return Decision::Unsupported("collective");
    };
    if n_bytes == 0 || n_bytes == usize::MAX {
        return Decision::Unsupported("size");
    }
    if table.is_null() || n_channels.is_null() {
        return Decision::Unsupported("null pointer");
    }
    let (Ok(num_algo), Ok(num_proto)) = (usize::try_from(num_algo), usize::try_from(num_proto))
    else {
        return Decision::Unsupported("table shape");
    };
    if !(1..=MAX_TABLE_ALGORITHMS).contains(&num_algo)
        || !(1..=MAX_TABLE_PROTOCOLS).contains(&num_proto)
    {
        return Decision::Unsupported("table shape");
    }
    let Some(pick) = index.pick(coll, n_bytes as u64) else {
        return Decision::NoRule;
    };
    let (algo, proto) = (pick.algorithm as usize, pick.protocol as usize);
    if algo >= num_algo || proto >= num_proto {
        return Decision::NotInTable(pick);
    }
    // SAFETY: algo < num_algo and proto < num_proto, so the offset is inside the num_algo x num_proto table the
    // caller guarantees (NCCL's contiguous `float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]`).
    let entry = unsafe { table.add(algo * num_proto + proto) };
    // SAFETY: in bounds (above); NCCL's table is float-aligned.
    let cost = unsafe { entry.read() };
    // A masked entry (-1.0) or a NaN is never touched: making it >= 0 would make NCCL run an unavailable pair.
    let usable = cost >= 0.0; // false for -1.0 and for NaN
    if !usable {
        return Decision::Masked(pick);
    }
    // SAFETY: as for the read.
    unsafe { entry.write(0.0) };
    if let Some(channels) = pick.channels {
        // Plan validation keeps channels in 1..=64, so the conversion cannot fail; never write otherwise.
        if let Ok(channels) = c_int::try_from(channels) {
            // SAFETY: non-null (checked above) and valid for a write by the caller's guarantee.
            unsafe { n_channels.write(channels) };
        }
    }
    Decision::Applied(pick)
}

/// The decision line, e.g. `planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)`.
pub fn decision_line(
    coll_type: c_int,
    n_bytes: usize,
    n_ranks: u64,
    n_nodes: u64,
    decision: Decision,
) -> String {
    let coll = Coll::from_nccl_index(coll_type)
        .map_or_else(|| format!("func{coll_type}"), |c| c.nccl_name().to_string());
    let pair = |p: &Pick| format!("{}/{}", p.algorithm.nccl_name(), p.protocol.nccl_name());
    let outcome = match decision {
        Decision::Applied(p) => format!(
            "{} channels {} (rule {})",
            pair(&p),
            p.channels
                .map_or_else(|| "-".to_string(), |c| c.to_string()),
            p.rule_index
        ),
        Decision::Masked(p) => format!("kept (rule {} {} masked)", p.rule_index, pair(&p)),
        Decision::NotInTable(p) => {
            format!("kept (rule {} {} not in table)", p.rule_index, pair(&p))
        }
        Decision::NoRule => "kept (no rule)".to_string(),
        Decision::Unsupported(what) => format!("kept (unsupported {what})"),
        Decision::Inactive => "kept (no plan)".to_string(),
    };
    format!("planner-tuner: {coll} {n_bytes} bytes nRanks {n_ranks} nNodes {n_nodes} -> {outcome}")
}

/// Whether NCCL would print an INFO line with the TUNING flag, by NCCL's own parsing of `NCCL_DEBUG` and
/// `NCCL_DEBUG_SUBSYS` (`src/debug.cc`, `ncclDebugInit` at v2.28.3-1: level INFO, ABORT or TRACE; subsystem list
/// split on ',', case-insensitive, `^` inverts, default INIT,BOOTSTRAP,ENV).
pub fn nccl_prints_tuning_info(nccl_debug: Option<&str>, nccl_debug_subsys: Option<&str>) -> bool {
    let level_ok = nccl_debug.is_some_and(|level| {
        ["INFO", "ABORT", "TRACE"]
            .iter()
            .any(|l| level.eq_ignore_ascii_case(l))
    });
    if !level_ok {
        return false;
    }
    let Some(subsys) = nccl_debug_subsys else {
        return false; // default mask INIT|BOOTSTRAP|ENV
    };
    let (invert, list) = match subsys.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, subsys),
    };
    let names_tuning = list
        .split(',')
        .any(|s| s.eq_ignore_ascii_case("TUNING") || s.eq_ignore_ascii_case("ALL"));
    names_tuning != invert
}

/// The plan's text. NCCL calls `init` while it creates a communicator, so this must never block: the file is
/// opened with `O_NONBLOCK` (a FIFO without a writer would otherwise hang the open, and NCCL with it) and must be a
/// regular file (a FIFO, socket or device has no bounded read).
fn read_plan_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if meta.len() > MAX_PLAN_BYTES {
        return Err(format!("larger than {MAX_PLAN_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PLAN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        return Err(format!("larger than {MAX_PLAN_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

fn version_text(version: Option<(u32, u32, u32)>) -> String {
    version.map_or_else(|| "unknown".to_string(), |(a, b, c)| format!("{a}.{b}.{c}"))
}

/// `NCCL_VERSION_CODE` -> (major, minor, patch): X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before
/// (`NCCL_VERSION` in `nccl.h.in`).
pub fn decode_nccl_version_code(code: c_int) -> Option<(u32, u32, u32)> {
    let code = u32::try_from(code).ok().filter(|&c| c > 0)?;
    Some(if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    })
}

/// Asks the NCCL that loaded us for its version: the library holding `logger` (NCCL's `ncclDebugLog`) is looked up
/// with `dladdr`, re-opened with `RTLD_NOLOAD` (which never loads anything, only references what is loaded) and
/// asked for `ncclGetVersion` (`nccl.h.in:148`, which only stores `NCCL_VERSION_CODE`). None when any step fails:
/// e.g. a logger that does not live in NCCL, or NCCL linked statically without exporting `ncclGetVersion`.
#[cfg(target_os = "linux")]
pub fn loaded_nccl_version(logger: NcclDebugLogger) -> Option<(u32, u32, u32)> {
    let address = logger? as *const libc::c_void;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only inspects the address and fills `info` (zero-initialised, so valid either way).
    if unsafe { libc::dladdr(address, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: zero-initialised above and possibly filled by dladdr; every field is a plain pointer.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader; RTLD_NOLOAD only returns a new reference to
    // an already loaded object (or null), it runs no constructors.
    let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: handle is valid (non-null from dlopen); the name is a C string literal.
    let symbol = unsafe { libc::dlsym(handle, c"ncclGetVersion".as_ptr()) };
    let version = if symbol.is_null() {
        None
    } else {
        // SAFETY: `ncclGetVersion` is `ncclResult_t ncclGetVersion(int* version)` in every NCCL 2.x; the library
        // stays loaded while we hold `handle`.
        let get_version: unsafe extern "C" fn(*mut c_int) -> c_int =
            unsafe { std::mem::transmute::<*mut libc::c_void, _>(symbol) };
        let mut code: c_int = 0;
        // SAFETY: a valid pointer to a local int.
        let result = unsafe { get_version(&mut code) };
        if result == 0 {
            decode_nccl_version_code(code)
        } else {
            None
        }
    };
    // SAFETY: releases the reference taken by dlopen above; NCCL still holds its own.
    unsafe { libc::dlclose(handle) };
    version
}

#[cfg(not(target_os = "linux"))]
pub fn loaded_nccl_version(_logger: NcclDebugLogger) -> Option<(u32, u32, u32)> {
    None
}

/// Sends one line through NCCL's logger as `(level, flags, "planner_tuner", line, "%s", message)`.
fn emit(logger: NcclDebugLogger, level: c_int, flags: c_ulong, line: u32, message: &str) {
    let Some(log) = logger else {
        return;
    };
    // One message is one log line: a newline or escape sequence from the plan (its path, provenance, an error
    // quoting it) could otherwise forge a line `planner audit` reads, or drive the terminal.
    let Ok(text) = CString::new(printable(message)) else {
        return;
    };
    let file: *const c_char = c"planner_tuner".as_ptr();
    let line = c_int::try_from(line).unwrap_or(0);
    // SAFETY: NCCL's logger is printf-like: the format "%s" consumes exactly one `const char*`, which is passed and
    // NUL-terminated; `file` and the format are 'static C strings; `text` lives until the call returns.
    unsafe { log(level, flags, file, line, c"%s".as_ptr(), text.as_ptr()) };
}
