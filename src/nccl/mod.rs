//! The NCCL backend of `planner verify`: libnccl (through cudarc's
//! `dynamic-loading`) as the reference the model and our kernels are checked
//! against.
//!
//! Each algorithm/protocol pair runs in its own child process (our own binary
//! re-executed with a hidden subcommand) whose environment pins it with
//! `NCCL_ALGO`/`NCCL_PROTO`; with one algorithm and one protocol enabled NCCL
//! can run nothing else, and a pair it cannot run fails the first call
//! ("no algorithm/protocol available"), which we report as unavailable.
//! NCCL's free choice runs twice: once timed, once with
//! `NCCL_DEBUG_SUBSYS=TUNING` so that its per-call lines say which pair it
//! picked (the logging is kept out of the timed run because it costs about a
//! microsecond per call). Two more free-choice runs, timed and logged the
//! same way: with the planner tuner plugin steering NCCL by a plan
//! (`TunerSetting::Plan`, the `tuned` row; its per-call lines say what the
//! plugin decided), and on buffers registered as symmetric windows
//! (`ChildSpec::symmetric`, backend nccl-symm; NCCL's `[Symmetric]` lines say
//! which kernel ran).
//!
//! Safety rule: every child environment switches NVLink multicast off
//! (`MULTICAST_OFF`), whatever the parent's environment says, and NVLS /
//! NVLSTree pairs are never run.
//!
//! This file holds what needs no GPU: names, environments, the TUNING-line
//! parser, the child's job description and its report lines. The GPU side is
//! `child.rs`; its data and checking kernels are the executor's too
//! (`crate::gpu::pattern`, `kernels/pattern.cu`).

pub(crate) mod child;
pub(crate) mod spawn;
pub(crate) mod tuner_plugin;

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::measure::{
    coll_label_serde, logged_bytes, GpuInfo, IterPlan, NcclChoice, RowStatus, SymmetricLaunch,
    TunerDecision,
};
use crate::model::{Algo, Coll, Pair};
use crate::nccl_log::{symmetric_line, PluginOutcome};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in every child process we start, overriding the parent's values:
/// NVLink multicast (NVLS) must stay off on shared machines.
pub(crate) const MULTICAST_OFF: [(&str, &str); 3] = [
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
];

/// Prefix of the child's report lines on stdout; anything else there (NCCL's
/// own log) is not ours.
pub(crate) const CHILD_MARK: &str = "@@planner-child ";

/// Environment variable carrying the child's job (JSON).
pub(crate) const CHILD_SPEC_ENV: &str = "PLANNER_NCCL_CHILD_SPEC";

/// Hidden subcommand that runs one child job.
pub(crate) const CHILD_SUBCOMMAND: &str = "__nccl-child";

/// The variable the planner tuner plugin reads its plan from (tuner/README.md).
pub(crate) const TUNER_PLAN_ENV: &str = "PLANNER_TUNER_PLAN";

/// Why a pair is never run here, if it is one of those.
pub(crate) fn refused_pair(pair: Pair) -> Option<String> {
    if pair.algo.nccl().is_some_and(Algo::is_nvls) {
        Some(format!(
            "{pair}: needs NVLink multicast, which planner keeps off (NCCL_NVLS_ENABLE=0)"
        ))
    } else {
        None
    }
}

/// True when this process's environment has multicast off as required.
/// The child refuses to start otherwise (a second line of defence behind
/// `child_command`).
pub(crate) fn multicast_is_off(get: impl Fn(&str) -> Option<String>) -> bool {
    MULTICAST_OFF
        .iter()
        .all(|(key, value)| get(key).as_deref() == Some(*value))
}

/// What one child process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum ChildMode {
    /// Timed, with `NCCL_ALGO`/`NCCL_PROTO` pinned to this pair.
    Pinned { pair: Pair },
    /// Timed, NCCL chooses.
    Free,
    /// One call per size with NCCL's TUNING log on, to read its choices.
    Choices,
}

/// NCCL's tuner plugin in one child.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum TunerSetting {
    /// The environment as the user left it (every run without `--tuner`).
    #[default]
    Inherit,
    /// No tuner plugin at all (`NCCL_TUNER_PLUGIN=none`, NCCL's own check,
    /// `src/plugin/tuner.cc:56-59` v2.28.3-1): NCCL's default beside a tuned run.
    Off,
    /// The planner tuner plugin (`tuner/`) steering NCCL with this plan.
    Plan { plugin: PathBuf, plan: PathBuf },
}

/// Which ranks the child drives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum ChildRanks {
    /// Every rank is a GPU of this process (GPUs 0..gpus), each driven by
    /// its own thread with its own communicator (ncclCommInitRank on one id).
    Local { gpus: usize },
    /// One rank of a multi-process communicator (ncclCommInitRank); the
    /// unique id comes from rank 0 through the rendezvous, hex encoded.
    Rank {
        rank: usize,
        world: usize,
        local_rank: usize,
        id_hex: String,
    },
}

/// The job of one child process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChildSpec {
    #[serde(with = "coll_label_serde")]
    pub(crate) collective: Coll,
    pub(crate) dtype: Dtype,
    pub(crate) sizes: Vec<u64>,
    pub(crate) plan: IterPlan,
    pub(crate) graph: bool,
    pub(crate) mode: ChildMode,
    pub(crate) ranks: ChildRanks,
    /// Buffers from `ncclMemAlloc` registered as symmetric windows with
    /// `ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)` (the nccl-symm
    /// backend, as nccl-tests `-R 2`).
    #[serde(default)]
    pub(crate) symmetric: bool,
    #[serde(default)]
    pub(crate) tuner: TunerSetting,
}

/// One report line of a child (after `CHILD_MARK`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum ChildEvent {
    /// The communicator is up.
    Init {
        nccl_version: String,
        cuda_version: String,
        world_size: usize,
        /// The GPUs of this process.
        gpus: Vec<GpuInfo>,
    },
    /// One size is done.
    Size {
        bytes: u64,
        status: RowStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        iters: u32,
        repeats: u32,
        times_us: Vec<f64>,
        wrong: Option<u64>,
    },
    /// A failure that ends the child; the sizes not reported did not run.
    Fatal { message: String },
    /// Every size is reported.
    Done,
}

impl ChildEvent {
    pub(crate) fn to_line(&self) -> String {
        // Serialising these plain structs cannot fail; keep a fallback anyway.
        let json = serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"event\":\"fatal\",\"message\":\"{e}\"}}"));
        format!("{CHILD_MARK}{json}")
    }

    /// Parse one stdout line; None for lines that are not ours.
    pub fn from_line(line: &str) -> Option<Result<ChildEvent>> {
        let json = line.strip_prefix(CHILD_MARK)?;
        Some(serde_json::from_str(json.trim()).map_err(|e| {
            Error::runtime(format!("NCCL child sent a bad report line ({e}): {line}"))
        }))
    }
}

/// The command that runs `spec` in a child: our binary `exe` with the hidden
/// subcommand, the job in the environment, multicast off, and the pair pinned.
pub(crate) fn child_command(exe: &Path, spec: &ChildSpec) -> Result<Command> {
    if let ChildMode::Pinned { pair } = spec.mode {
        if let Some(why) = refused_pair(pair) {
            return Err(Error::bad_input(why));
        }
    }
    let json = serde_json::to_string(spec)
        .map_err(|e| Error::runtime(format!("cannot serialise the NCCL child job: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_SUBCOMMAND);
    cmd.env(CHILD_SPEC_ENV, json);
    for (key, value) in MULTICAST_OFF {
        cmd.env(key, value);
    }
    match spec.mode {
        ChildMode::Pinned { pair } => {
            cmd.env("NCCL_ALGO", pair.algo.name());
            cmd.env("NCCL_PROTO", pair.proto.nccl_name());
        }
        ChildMode::Free | ChildMode::Choices => {
            cmd.env_remove("NCCL_ALGO");
            cmd.env_remove("NCCL_PROTO");
        }
    }
    match &spec.tuner {
        TunerSetting::Inherit => {}
        TunerSetting::Off => {
            cmd.env("NCCL_TUNER_PLUGIN", "none");
            cmd.env_remove(TUNER_PLAN_ENV);
        }
        TunerSetting::Plan { plugin, plan } => {
            cmd.env("NCCL_TUNER_PLUGIN", plugin);
            cmd.env(TUNER_PLAN_ENV, plan);
        }
    }
    match spec.mode {
        ChildMode::Choices => {
            // The per-call lines go to stdout, where the parent reads them.
            cmd.env("NCCL_DEBUG", "INFO");
            cmd.env("NCCL_DEBUG_SUBSYS", "TUNING");
            cmd.env_remove("NCCL_DEBUG_FILE");
        }
        ChildMode::Pinned { .. } | ChildMode::Free => {
            // Warnings only (why a pair is refused), unless the user asked for more.
            if std::env::var_os("NCCL_DEBUG").is_none() {
                cmd.env("NCCL_DEBUG", "WARN");
            }
        }
    }
    Ok(cmd)
}

// ---------------------------------------------------------------------------
// NCCL's per-call TUNING line.

/// One `NCCL_DEBUG_SUBSYS=TUNING` per-call line:
/// `host:pid:tid [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}`
/// (format of `enqueue.cc` in NCCL 2.28 and 2.30; `bytes` is count x type
/// size, which for all-gather and reduce-scatter is one rank's share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuningLine {
    pub(crate) collective: Coll,
    pub(crate) bytes: u64,
    pub(crate) choice: NcclChoice,
}

/// Parse one TUNING line; None for any other line.
pub fn parse_tuning_line(line: &str) -> Option<TuningLine> {
    let call = crate::nccl_log::tuning_line(line)?;
    let (lo, hi) = call.channels?;
    Some(TuningLine {
        collective: call.coll?,
        bytes: call.bytes,
        choice: NcclChoice {
            pair: Pair::new(call.algo, call.proto),
            channel_lo: u32::try_from(lo).ok()?,
            channel_hi: u32::try_from(hi).ok()?,
        },
    })
}

/// NCCL's choice for each requested size, from a log: the first TUNING line
/// of `collective` whose byte count matches the size as NCCL logs it.
pub(crate) fn choices_from_log<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    collective: Coll,
    sizes: &[u64],
    n_ranks: usize,
) -> Vec<(u64, Option<NcclChoice>)> {
    let parsed: Vec<TuningLine> = lines
        .into_iter()
        .filter_map(parse_tuning_line)
        .filter(|t| t.collective == collective)
        .collect();
    sizes
        .iter()
        .map(|&size| {
            let logged = logged_bytes(collective, size, n_ranks);
            let choice = parsed.iter().find(|t| t.bytes == logged).map(|t| t.choice);
            (size, choice)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The tuner plugin's per-call line and NCCL's symmetric-kernel line.

/// One per-call line of the planner tuner plugin (format: tuner/README.md,
/// "Log line formats"): `... NCCL INFO planner-tuner: AllReduce 2097152 bytes
/// nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)`. `bytes` is NCCL's
/// `nBytes` as the tuner gets it: for all-gather and reduce-scatter all
/// ranks' bytes (`ncclFuncMaxSendRecvCount`, `src/enqueue.cc:1906` v2.28.3-1),
/// which is the size verify requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunerLine {
    pub(crate) collective: Coll,
    pub(crate) bytes: u64,
    pub(crate) n_ranks: u32,
    pub(crate) n_nodes: u32,
    pub(crate) decision: TunerDecision,
}

/// The plugin's mark in its messages.
const TUNER_MARK: &str = "planner-tuner: ";

/// Parse one per-call decision line of the plugin; None for any other line
/// (including the plugin's init lines and collectives verify does not know).
pub fn parse_tuner_line(line: &str) -> Option<TunerLine> {
    let d = crate::nccl_log::tuner_line(line)?;
    let decision = match d.outcome {
        PluginOutcome::Kept(why) => TunerDecision::Kept { why },
        PluginOutcome::Steered {
            algo,
            proto,
            channels,
            rule,
        } => TunerDecision::Steered {
            pair: Pair::new(algo, proto),
            channels,
            rule,
        },
    };
    Some(TunerLine {
        collective: d.coll?,
        bytes: d.n_bytes,
        n_ranks: u32::try_from(d.n_ranks).ok()?,
        n_nodes: u32::try_from(d.n_nodes).ok()?,
        decision,
    })
}

/// The plugin's decision for each requested size: the first decision line of
/// `collective` with that size (every rank logs one; they agree).
pub(crate) fn tuner_decisions_from_log<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    collective: Coll,
    sizes: &[u64],
) -> Vec<(u64, Option<TunerDecision>)> {
    let parsed: Vec<TunerLine> = lines
        .into_iter()
        .filter_map(parse_tuner_line)
        .filter(|t| t.collective == collective)
        .collect();
    sizes
        .iter()
        .map(|&size| {
            let decision = parsed
                .iter()
                .find(|t| t.bytes == size)
                .map(|t| t.decision.clone());
            (size, decision)
        })
        .collect()
}

/// What the log says about the tuner plugin itself, once each: NCCL's
/// loading lines (`NCCL_TUNER_PLUGIN set by environment to ...`,
/// `Successfully loaded external tuner plugin ...`, `src/plugin/tuner.cc:57,86`
/// v2.28.3-1) and the plugin's init lines
/// (`plan ... applies: ...` or the WARN why it changes nothing), without the
/// log prefix. The per-call lines are left out.
pub(crate) fn tuner_status_from_log<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    const MAX_LINES: usize = 8;
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let is_plugin = line.contains(TUNER_MARK) && parse_tuner_line(line).is_none();
        let is_nccl = ["tuner plugin", "TUNER/Plugin", "NCCL_TUNER_PLUGIN"]
            .iter()
            .any(|mark| line.contains(mark));
        if !(is_plugin || is_nccl) {
            continue;
        }
        let message = ["NCCL INFO ", "NCCL WARN "]
            .iter()
            .find_map(|tag| line.find(tag).map(|at| &line[at + tag.len()..]))
            .unwrap_or(line)
            .trim()
            .to_string();
        if !message.is_empty() && !out.contains(&message) && out.len() < MAX_LINES {
            out.push(message);
        }
    }
    out
}

/// The symmetric kernel NCCL ran for each requested size, from its
/// `[Symmetric]` lines (`crate::nccl_log::symmetric_line`;
/// bytes as NCCL logs them, one rank's share for all-gather and
/// reduce-scatter). None where NCCL took its classic path.
pub(crate) fn symmetric_from_log<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    collective: Coll,
    sizes: &[u64],
    n_ranks: usize,
) -> Vec<(u64, Option<SymmetricLaunch>)> {
    let parsed: Vec<_> = lines
        .into_iter()
        .filter_map(symmetric_line)
        .filter(|l| l.coll == collective)
        .collect();
    sizes
        .iter()
        .map(|&size| {
            let logged = logged_bytes(collective, size, n_ranks);
            let launch = parsed
                .iter()
                .find(|l| l.bytes == logged)
                .map(|l| SymmetricLaunch {
                    kernel: l.kernel.clone(),
                    channels: l.channels,
                    threads: l.threads,
                });
            (size, launch)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The library.

/// NCCL result codes as text (`ncclGetErrorString` needs the library; these
/// are NCCL's fixed numbers, `nccl.h`).
pub(crate) fn nccl_result_name(code: u32) -> &'static str {
    match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => "unknown NCCL result",
    }
}

/// "2.28.3" from NCCL's version code (22803 since 2.9: major*10000 + minor*100 + patch).
pub fn version_string(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Fail with a clear message unless the CUDA driver can be loaded (what a
/// native-only verify needs).
pub(crate) fn check_driver() -> Result<()> {
    // SAFETY: is_culib_present only tries to dlopen the library by name and
    // reports whether that worked; it calls nothing inside it.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        return Err(Error::runtime(
            "no CUDA driver (libcuda.so.1 cannot be loaded): verify needs GPUs; \
             `planner verify --load FILE` studies saved results without them",
        ));
    }
    Ok(())
}

/// Fail with a clear message unless the CUDA driver and libnccl can be loaded
/// (cudarc panics on the first call otherwise).
pub(crate) fn check_libraries() -> Result<()> {
    check_driver()?;
    // SAFETY: as above, a dlopen probe only.
    let nccl = unsafe { cudarc::nccl::sys::is_culib_present() };
    if !nccl {
        return Err(Error::runtime(
            "libnccl cannot be loaded: the loader looks for libnccl.so (not libnccl.so.2); \
             put a directory holding a `libnccl.so -> libnccl.so.2` link on LD_LIBRARY_PATH",
        ));
    }
    Ok(())
}

/// The loaded libnccl's version ("2.28.3").
pub(crate) fn library_version() -> Result<String> {
    check_libraries()?;
    let code = cudarc::nccl::result::get_nccl_version().map_err(|e| {
        Error::runtime(format!(
            "ncclGetVersion failed: {}",
            nccl_result_name(e.0 as u32)
        ))
    })?;
    Ok(version_string(code))
}

/// A new NCCL unique id (rank 0 of a multi-process run), hex encoded. The
/// calling process hosts NCCL's bootstrap root until every rank has joined.
pub(crate) fn new_unique_id_hex() -> Result<String> {
    check_libraries()?;
    let id = cudarc::nccl::result::get_uniqueid().map_err(|e| {
        Error::runtime(format!(
            "ncclGetUniqueId failed: {} (no usable network interface for NCCL's bootstrap?)",
            nccl_result_name(e.0 as u32)
        ))
    })?;
    Ok(id_to_hex(&id.internal.map(|c| c as u8)))
}

/// Hex form of an NCCL unique id (128 bytes -> 256 hex digits).
pub(crate) fn id_to_hex(bytes: &[u8; 128]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Back from `id_to_hex`.
pub(crate) fn id_from_hex(text: &str) -> Result<[u8; 128]> {
    let bad = || {
        Error::runtime(format!(
            "bad NCCL unique id from the rendezvous: expected 256 hex digits, got {} characters",
            text.len()
        ))
    };
    if text.len() != 256 || !text.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 128];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algo, Proto};
    use std::collections::HashMap;

    fn envs_of(cmd: &Command) -> HashMap<String, Option<String>> {
        cmd.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    fn spec(mode: ChildMode) -> ChildSpec {
        ChildSpec {
            collective: Coll::AllReduce,
            dtype: Dtype::F32,
            sizes: vec![8, 1024],
            plan: IterPlan::default(),
            graph: false,
            mode,
            ranks: ChildRanks::Local { gpus: 2 },
            symmetric: false,
            tuner: TunerSetting::Inherit,
        }
    }

    #[test]
    fn the_tuner_plugin_reaches_only_the_tuned_child() {
        let exe = Path::new("/bin/true");
        let plan = TunerSetting::Plan {
            plugin: PathBuf::from("/opt/p/libnccl_tuner_planner.so"),
            plan: PathBuf::from("/tmp/plan.json"),
        };
        let mut tuned = spec(ChildMode::Free);
        tuned.tuner = plan.clone();
        let envs = envs_of(&child_command(exe, &tuned).unwrap());
        assert_eq!(
            envs["NCCL_TUNER_PLUGIN"],
            Some("/opt/p/libnccl_tuner_planner.so".into())
        );
        assert_eq!(envs[TUNER_PLAN_ENV], Some("/tmp/plan.json".into()));
        // free choice: nothing pins NCCL, so the plugin decides
        assert_eq!(envs["NCCL_ALGO"], None);
        for (key, value) in MULTICAST_OFF {
            assert_eq!(envs.get(key), Some(&Some(value.to_string())), "{key}");
        }
        // the spec travels with its settings
        let json = envs[CHILD_SPEC_ENV].clone().unwrap();
        assert_eq!(serde_json::from_str::<ChildSpec>(&json).unwrap(), tuned);

        // beside a tuned run, every other child is NCCL alone: `none` is NCCL's off switch
        let mut off = spec(ChildMode::Pinned {
            pair: Pair::new(Algo::Ring, Proto::Ll),
        });
        off.tuner = TunerSetting::Off;
        let envs = envs_of(&child_command(exe, &off).unwrap());
        assert_eq!(envs["NCCL_TUNER_PLUGIN"], Some("none".into()));
        assert_eq!(envs[TUNER_PLAN_ENV], None);
        // without --tuner the environment is left alone
        let envs = envs_of(&child_command(exe, &spec(ChildMode::Free)).unwrap());
        assert!(!envs.contains_key("NCCL_TUNER_PLUGIN"));
        assert!(!envs.contains_key(TUNER_PLAN_ENV));

        // a job description of an older planner (no symmetric, no tuner) still reads
        let old = r#"{"collective":"allreduce","dtype":"f32","sizes":[8],"plan":{"iters":20,"warmup":5,"repeats":5,"loop_bytes_cap":4294967296},"graph":false,"mode":{"kind":"free"},"ranks":{"kind":"local","gpus":2}}"#;
        let back: ChildSpec = serde_json::from_str(old).unwrap();
        assert!(!back.symmetric);
        assert_eq!(back.tuner, TunerSetting::Inherit);
    }

    #[test]
    fn tuner_decision_lines_parse() {
        // the formats of tuner/README.md, with NCCL's log prefix
        let steered = "h:1:2 [0] NCCL INFO planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)";
        let t = parse_tuner_line(steered).unwrap();
        assert_eq!(
            (t.collective, t.bytes, t.n_ranks, t.n_nodes),
            (Coll::AllReduce, 2097152, 2, 1)
        );
        assert_eq!(
            t.decision,
            TunerDecision::Steered {
                pair: Pair::new(Algo::Ring, Proto::Ll),
                channels: None,
                rule: 3
            }
        );
        assert_eq!(t.decision.to_string(), "rule 3: Ring/LL");
        let channels = "planner-tuner: AllGather 65536 bytes nRanks 8 nNodes 2 -> NVLSTree/LL128 channels 16 (rule 0)";
        assert_eq!(
            parse_tuner_line(channels).unwrap().decision,
            TunerDecision::Steered {
                pair: Pair::new(Algo::NvlsTree, Proto::Ll128),
                channels: Some(16),
                rule: 0
            }
        );
        let masked = "h:1:2 [1] NCCL INFO planner-tuner: ReduceScatter 1024 bytes nRanks 2 nNodes 1 -> kept (rule 2 Tree/LL masked)";
        let t = parse_tuner_line(masked).unwrap();
        assert_eq!(t.collective, Coll::ReduceScatter);
        assert_eq!(
            t.decision,
            TunerDecision::Kept {
                why: "rule 2 Tree/LL masked".into()
            }
        );
        assert_eq!(t.decision.to_string(), "kept: rule 2 Tree/LL masked");
        let no_rule = "planner-tuner: AllReduce 8 bytes nRanks 2 nNodes 1 -> kept (no rule)";
        assert_eq!(
            parse_tuner_line(no_rule).unwrap().decision,
            TunerDecision::Kept {
                why: "no rule".into()
            }
        );
        for other in [
            // the init lines, NCCL's own per-call line, collectives verify does not run
            "h:1:2 [0] NCCL INFO planner-tuner: plan /tmp/p.json applies: 3 of 5 rules for nRanks 2 nNodes 1 (from verify x.json, made with NCCL 2.28.3, running NCCL 2.28.3)",
            "h:1:2 [0] NCCL WARN planner-tuner: PLANNER_TUNER_PLAN is not set; NCCL's own choices stay in place",
            "h:1:2 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}",
            "planner-tuner: func7 8 bytes nRanks 2 nNodes 1 -> kept (unsupported collective)",
            "planner-tuner: AllReduce 8 bytes nRanks 2 nNodes 1 -> Ring/LL channels x (rule 3)",
            "planner-tuner: AllReduce 8 bytes nRanks 2 nNodes 1 -> Ring/LL64 channels - (rule 3)",
            "planner-tuner: AllReduce 8 bytes nRanks 2 -> kept (no rule)",
            "planner-tuner: AllReduce 8 bytes nRanks 2 nNodes 1 -> kept (no rule",
            "",
        ] {
            assert_eq!(parse_tuner_line(other), None, "{other}");
        }
    }

    /// A tuned choices pass as NCCL 2.28 writes it (two ranks, one file):
    /// NCCL's loading line, the plugin's init lines, then per size the plugin's
    /// decision on both ranks and NCCL's per-call line on rank 0.
    const TUNED_LOG: &str = "\
h:9:9 [0] NCCL INFO NCCL_TUNER_PLUGIN set by environment to /opt/p/libnccl_tuner_planner.so\n\
h:9:9 [0] NCCL INFO Successfully loaded external tuner plugin /opt/p/libnccl_tuner_planner.so\n\
h:9:9 [0] NCCL INFO planner-tuner: plan /tmp/plan.json applies: 2 of 2 rules for nRanks 2 nNodes 1 (from verify verify.json, made with NCCL 2.28.3, running NCCL 2.28.3)\n\
h:9:8 [1] NCCL INFO Successfully loaded external tuner plugin /opt/p/libnccl_tuner_planner.so\n\
h:9:8 [1] NCCL INFO planner-tuner: plan /tmp/plan.json applies: 2 of 2 rules for nRanks 2 nNodes 1 (from verify verify.json, made with NCCL 2.28.3, running NCCL 2.28.3)\n\
h:9:9 [0] NCCL INFO planner-tuner: AllReduce 1048576 bytes nRanks 2 nNodes 1 -> kept (no rule)\n\
h:9:8 [1] NCCL INFO planner-tuner: AllReduce 1048576 bytes nRanks 2 nNodes 1 -> kept (no rule)\n\
h:9:9 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}\n\
h:9:9 [0] NCCL INFO planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 1)\n\
h:9:8 [1] NCCL INFO planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 1)\n\
h:9:9 [0] NCCL INFO AllReduce: 2097152 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}\n\
";

    #[test]
    fn a_tuned_log_says_what_the_plugin_did_and_what_nccl_ran() {
        let sizes = [1 << 20, 2 << 20, 4 << 20];
        let decisions = tuner_decisions_from_log(TUNED_LOG.lines(), Coll::AllReduce, &sizes);
        assert_eq!(
            decisions[0].1,
            Some(TunerDecision::Kept {
                why: "no rule".into()
            })
        );
        assert_eq!(
            decisions[1].1,
            Some(TunerDecision::Steered {
                pair: Pair::new(Algo::Ring, Proto::Ll),
                channels: None,
                rule: 1
            })
        );
        assert_eq!(decisions[2].1, None, "4 MiB never ran");
        // NCCL's own line agrees: Ring/LL at 2 MiB, where it alone picks Ring/Simple
        let choices = choices_from_log(TUNED_LOG.lines(), Coll::AllReduce, &sizes, 2);
        assert_eq!(choices[1].1.unwrap().pair, Pair::new(Algo::Ring, Proto::Ll));
        // the plugin's status: once each, without the prefix, no per-call lines
        let status = tuner_status_from_log(TUNED_LOG.lines());
        assert_eq!(
            status,
            vec![
                "NCCL_TUNER_PLUGIN set by environment to /opt/p/libnccl_tuner_planner.so".to_string(),
                "Successfully loaded external tuner plugin /opt/p/libnccl_tuner_planner.so".to_string(),
                "planner-tuner: plan /tmp/plan.json applies: 2 of 2 rules for nRanks 2 nNodes 1 (from verify verify.json, made with NCCL 2.28.3, running NCCL 2.28.3)".to_string(),
            ]
        );
    }

    #[test]
    fn symmetric_lines_give_the_kernel_and_classic_lines_the_pair() {
        // NCCL 2.28's format (symmetric_sched.cc:225-226 v2.28.3-1); the 2 x H200
        // kernels of issue 13's table; 64 MiB took the classic path here
        let log = "\
h:1:2 [0] NCCL INFO AllReduce [Symmetric]: 8 Bytes -> Kernel AllReduce_AGxLL_R nchannels 1 nthreads 512 nWorks 1\n\
h:1:2 [0] NCCL INFO AllReduce [Symmetric]: 2097152 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels 16 nthreads 512 nWorks 1\n\
h:1:2 [0] NCCL INFO AllReduce: 67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
h:1:2 [0] NCCL INFO AllGather [Symmetric]: 4096 Bytes -> Kernel AllGather_LL nchannels 1 nthreads 512 nWorks 1\n";
        let sizes = [8, 2 << 20, 64 << 20];
        let launches = symmetric_from_log(log.lines(), Coll::AllReduce, &sizes, 2);
        let first = launches[0].1.clone().unwrap();
        assert_eq!(
            (first.kernel.as_str(), first.channels, first.threads),
            ("AllReduce_AGxLL_R", 1, 512)
        );
        assert_eq!(
            launches[1].1.as_ref().unwrap().kernel,
            "AllReduce_RSxLD_AGxST"
        );
        assert_eq!(launches[2].1, None);
        let classic = choices_from_log(log.lines(), Coll::AllReduce, &sizes, 2);
        assert_eq!(
            classic[2].1.unwrap().pair,
            Pair::new(Algo::Ring, Proto::Simple)
        );
        // all-gather logs one rank's share: 8 KiB on 2 ranks is the 4096-byte line
        let ag = symmetric_from_log(log.lines(), Coll::AllGather, &[8192], 2);
        assert_eq!(ag[0].1.as_ref().unwrap().kernel, "AllGather_LL");
    }

    #[test]
    fn every_child_has_multicast_off_and_the_pair_pinned() {
        let exe = Path::new("/bin/true");
        let ring_ll = Pair::new(Algo::Ring, Proto::Ll);
        for mode in [
            ChildMode::Pinned { pair: ring_ll },
            ChildMode::Free,
            ChildMode::Choices,
        ] {
            let cmd = child_command(exe, &spec(mode)).unwrap();
            let envs = envs_of(&cmd);
            for (key, value) in MULTICAST_OFF {
                assert_eq!(
                    envs.get(key),
                    Some(&Some(value.to_string())),
                    "{key} in {mode:?}"
                );
            }
            let json = envs[CHILD_SPEC_ENV].clone().unwrap();
            let back: ChildSpec = serde_json::from_str(&json).unwrap();
            assert_eq!(back.mode, mode);
            match mode {
                ChildMode::Pinned { .. } => {
                    assert_eq!(envs["NCCL_ALGO"], Some("Ring".into()));
                    assert_eq!(envs["NCCL_PROTO"], Some("LL".into()));
                }
                // explicitly removed: a user's NCCL_ALGO must not leak into NCCL's free choice
                _ => {
                    assert_eq!(envs["NCCL_ALGO"], None);
                    assert_eq!(envs["NCCL_PROTO"], None);
                }
            }
        }
        let choices = envs_of(&child_command(exe, &spec(ChildMode::Choices)).unwrap());
        assert_eq!(choices["NCCL_DEBUG_SUBSYS"], Some("TUNING".into()));
    }

    #[test]
    fn nvls_pairs_are_never_run() {
        for algo in [Algo::Nvls, Algo::NvlsTree] {
            for proto in Proto::ALL {
                let pair = Pair::new(algo, proto);
                assert!(refused_pair(pair).unwrap().contains("NCCL_NVLS_ENABLE=0"));
                let err = child_command(Path::new("/bin/true"), &spec(ChildMode::Pinned { pair }))
                    .unwrap_err();
                assert!(err.to_string().contains("multicast"), "{err}");
            }
        }
        for pair in Pair::ring_tree_all() {
            assert_eq!(refused_pair(pair), None);
        }
    }

    #[test]
    fn the_child_checks_its_own_environment() {
        let good: HashMap<&str, &str> = MULTICAST_OFF.into_iter().collect();
        assert!(multicast_is_off(|k| good.get(k).map(|v| v.to_string())));
        let mut on = good.clone();
        on.insert("NCCL_NVLS_ENABLE", "1");
        assert!(!multicast_is_off(|k| on.get(k).map(|v| v.to_string())));
        let mut missing = good.clone();
        missing.remove("NVSHMEM_DISABLE_NVLS");
        assert!(!multicast_is_off(|k| missing.get(k).map(|v| v.to_string())));
    }

    #[test]
    fn tuning_lines_parse() {
        let line = "myhost:1234:1240 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}";
        let t = parse_tuning_line(line).unwrap();
        assert_eq!(t.collective, Coll::AllReduce);
        assert_eq!(t.bytes, 4096);
        assert_eq!(t.choice.pair, Pair::new(Algo::Ring, Proto::Ll));
        assert_eq!((t.choice.channel_lo, t.choice.channel_hi), (0, 7));

        let tree = "h:1:2 [1] NCCL INFO ReduceScatter: 1048576 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..23}";
        let t = parse_tuning_line(tree).unwrap();
        assert_eq!(t.collective, Coll::ReduceScatter);
        assert_eq!(t.choice.pair, Pair::new(Algo::Tree, Proto::Simple));
        assert_eq!(t.choice.channel_hi, 23);

        let nvls = "AllReduce: 64 Bytes -> Algo NVLS_TREE proto LL128 channel{Lo..Hi}={2..3}";
        assert_eq!(
            parse_tuning_line(nvls).unwrap().choice.pair,
            Pair::new(Algo::NvlsTree, Proto::Ll128)
        );

        for other in [
            "h:1:2 [0] NCCL INFO Channel 00/24 : 0 1",
            "h:1:2 [0] NCCL INFO     AllReduce |     8.0/  61.1 |",
            "AllReduce: x Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}",
            "AllReduce: 8 Bytes -> Algo BUS proto LL channel{Lo..Hi}={0..0}",
            "AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={3..1}",
            "AllReduce: 8 Bytes -> Algo RING proto LL",
            "",
        ] {
            assert_eq!(parse_tuning_line(other), None, "{other}");
        }
    }

    /// The capture `h200x2-nvswitch-vm/nccl-allreduce-choices.txt` (NCCL 2.28.9,
    /// 2 x H200): the TUNING lines of one all-reduce per size with the log prefix removed.
    const CAPTURE_CHOICES: &str = "\
AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 16 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 32 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 64 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 128 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 256 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 512 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 2048 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 8192 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n\
AllReduce: 16384 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n\
AllReduce: 32768 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}\n\
AllReduce: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}\n\
AllReduce: 131072 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..15}\n\
AllReduce: 262144 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..21}\n\
AllReduce: 524288 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}\n\
AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}\n\
AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 16777216 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 33554432 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 134217728 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 268435456 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 536870912 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 2147483648 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
AllReduce: 4294967296 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n\
";

    #[test]
    fn every_line_of_the_capture_parses() {
        // The capture's choices file holds the TUNING lines of a 2 x H200 run
        // (NCCL 2.28.9) from 4 B to 4 GiB with the log prefix removed.
        let lines: Vec<&str> = CAPTURE_CHOICES.lines().collect();
        assert_eq!(lines.len(), 31);
        let sizes: Vec<u64> = (2..=32).map(|p| 1u64 << p).collect();
        let choices = choices_from_log(lines.iter().copied(), Coll::AllReduce, &sizes, 2);
        let ring_ll = Pair::new(Algo::Ring, Proto::Ll);
        let ring_simple = Pair::new(Algo::Ring, Proto::Simple);
        for (size, choice) in &choices {
            let c = choice.unwrap_or_else(|| panic!("no choice for {size}"));
            // the file: Ring/LL up to 1 MiB, Ring/Simple from 2 MiB
            let expected = if *size <= 1 << 20 {
                ring_ll
            } else {
                ring_simple
            };
            assert_eq!(c.pair, expected, "{size}");
        }
        // 64 KiB used channels 0..7, 4 GiB 0..23 (lines 15 and 31 of the file)
        let at = |s: u64| choices.iter().find(|(b, _)| *b == s).unwrap().1.unwrap();
        assert_eq!(at(65536).channel_hi, 7);
        assert_eq!(at(1 << 32).channel_hi, 23);
        // all-gather sizes are logged per rank: 8 KiB total on 2 ranks is a 4096-byte line
        let ag = choices_from_log(
            ["AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}"],
            Coll::AllGather,
            &[8192],
            2,
        );
        assert_eq!(ag[0].1.unwrap().pair, ring_ll);
    }

    #[test]
    fn child_report_lines_round_trip() {
        let ev = ChildEvent::Size {
            bytes: 1024,
            status: RowStatus::Ok,
            note: None,
            iters: 20,
            repeats: 3,
            times_us: vec![10.5, 11.0, 10.75],
            wrong: Some(0),
        };
        let line = ev.to_line();
        assert!(line.starts_with(CHILD_MARK));
        assert_eq!(ChildEvent::from_line(&line).unwrap().unwrap(), ev);
        assert!(ChildEvent::from_line("h:1:2 [0] NCCL INFO x").is_none());
        assert!(ChildEvent::from_line("@@planner-child {bad")
            .unwrap()
            .is_err());
    }

    #[test]
    fn ids_and_versions() {
        let mut id = [0u8; 128];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 37 % 256) as u8;
        }
        let hex = id_to_hex(&id);
        assert_eq!(hex.len(), 256);
        assert_eq!(id_from_hex(&hex).unwrap(), id);
        assert!(id_from_hex("abc").is_err());
        assert!(id_from_hex(&"zz".repeat(128)).is_err());
        assert_eq!(version_string(22803), "2.28.3");
        assert_eq!(version_string(23007), "2.30.7");
        assert_eq!(nccl_result_name(5), "ncclInvalidUsage");
    }
}
