//! Loads the BUILT plugin library (what NCCL dlopens) and gives NCCL-shaped helpers: a capturing logger, cost
//! tables, NCCL's own argmin, plan files.
#![allow(dead_code)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nccl_tuner_planner::abi::{
    NcclDebugLogger, NcclTunerV5, NcclTunerV6, NUM_ALGORITHMS, NUM_PROTOCOLS,
};

pub type InitWithPlanFn = unsafe extern "C" fn(
    *mut *mut c_void,
    usize,
    usize,
    NcclDebugLogger,
    *const c_char,
    c_int,
    c_int,
) -> c_int;

pub struct Api {
    pub v5: &'static NcclTunerV5,
    pub v6: &'static NcclTunerV6,
    pub init_with_plan: InitWithPlanFn,
}

/// `target/<profile>/libnccl_tuner_planner.so` (or the copy in `deps/`), found from this test executable, which
/// lives in `target/<profile>/deps/`.
pub fn library_path() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a directory");
    let name = format!(
        "{}nccl_tuner_planner{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    // deps/ first: `cargo test` rebuilds the library there but does not always copy it up to target/<profile>/.
    let candidates = [Some(deps.join(&name)), deps.parent().map(|p| p.join(&name))];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found next to {}; build the workspace first",
                exe.display()
            )
        })
}

fn library() -> &'static libloading::Library {
    static LIBRARY: OnceLock<libloading::Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let path = library_path();
        // SAFETY: loading the plugin runs no initialisers beyond Rust's std (no constructors of our own).
        unsafe { libloading::Library::new(&path) }
            .unwrap_or_else(|e| panic!("dlopen {}: {e}", path.display()))
    })
}

/// The exported symbols, as NCCL looks them up (`dlsym(lib, "ncclTunerPlugin_v5")`).
pub fn api() -> Api {
    let lib = library();
    // SAFETY: the symbols are the statics/function declared in tuner/src/plugin.rs with these exact types; the
    // library stays loaded for the whole process (static OnceLock).
    unsafe {
        let v5 = *lib
            .get::<*const NcclTunerV5>(b"ncclTunerPlugin_v5\0")
            .expect("ncclTunerPlugin_v5 exported");
        let v6 = *lib
            .get::<*const NcclTunerV6>(b"ncclTunerPlugin_v6\0")
            .expect("ncclTunerPlugin_v6 exported");
        let init_with_plan = *lib
            .get::<InitWithPlanFn>(b"planner_tuner_init_with_plan\0")
            .expect("planner_tuner_init_with_plan exported");
        Api {
            v5: &*v5,
            v6: &*v6,
            init_with_plan,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub level: c_int,
    pub flags: c_ulong,
    pub text: String,
}

thread_local! {
    /// The plugin calls the logger synchronously on the calling thread, so per-thread capture keeps parallel tests
    /// apart.
    static LINES: RefCell<Vec<LogLine>> = const { RefCell::new(Vec::new()) };
}

/// A logger with the fixed arguments the plugin always passes: `(level, flags, file, line, "%s", message)`.
/// Stable Rust cannot define a C-variadic function, so this one is non-variadic and is cast to NCCL's variadic
/// `ncclDebugLogger_t` in [`logger`].
unsafe extern "C" fn capture_logger(
    level: c_int,
    flags: c_ulong,
    file: *const c_char,
    _line: c_int,
    fmt: *const c_char,
    message: *const c_char,
) {
    // SAFETY: the plugin passes 'static C strings for file and fmt and a live NUL-terminated message.
    let (file, fmt, message) = unsafe {
        (
            CStr::from_ptr(file).to_string_lossy().into_owned(),
            CStr::from_ptr(fmt).to_string_lossy().into_owned(),
            CStr::from_ptr(message).to_string_lossy().into_owned(),
        )
    };
    assert_eq!(fmt, "%s", "the plugin always logs through \"%s\"");
    assert_eq!(file, "planner_tuner");
    LINES.with(|l| {
        l.borrow_mut().push(LogLine {
            level,
            flags,
            text: message,
        })
    });
}

/// [`capture_logger`] as NCCL's `ncclDebugLogger_t`.
pub fn logger() -> NcclDebugLogger {
    type Fixed =
        unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, *const c_char);
    // SAFETY: on x86-64 SysV and AArch64 Linux (the targets NCCL supports) a variadic call passes its integer and
    // pointer arguments exactly like a non-variadic call with the same argument types, and the plugin always
    // passes exactly these six arguments; so calling this function through the variadic pointer type is sound
    // there. (Not on Apple AArch64, where variadic arguments go on the stack; NCCL does not run there.)
    Some(unsafe {
        std::mem::transmute::<
            Fixed,
            unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...),
        >(capture_logger)
    })
}

/// Lines logged on this thread since the last call.
pub fn take_lines() -> Vec<LogLine> {
    LINES.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

pub const TABLE_LEN: usize = NUM_ALGORITHMS * NUM_PROTOCOLS;

/// A cost table like NCCL's for a 2-GPU NVLink node (µs; CollNet, NVLS, NVLSTree masked with -1, PAT masked for
/// AllReduce): Tree and Ring, LL/LL128/Simple. NCCL's own pick on it is Ring/LL128 (7.0).
pub fn nccl_like_table() -> [f32; TABLE_LEN] {
    let mut t = [-1.0f32; TABLE_LEN];
    // Tree
    t[0] = 9.0;
    t[1] = 8.0;
    t[2] = 20.0;
    // Ring
    t[3] = 7.5;
    t[4] = 7.0;
    t[5] = 15.0;
    t
}

pub fn idx(algo: usize, proto: usize) -> usize {
    algo * NUM_PROTOCOLS + proto
}

/// NCCL's selection (`topoGetAlgoInfo`): the strict minimum over entries >= 0 in (algo, proto) scan order.
pub fn nccl_pick(table: &[f32; TABLE_LEN]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &t) in table.iter().enumerate() {
        if t >= 0.0 && best.is_none_or(|(_, b)| t < b) {
            best = Some((i, t));
        }
    }
    best.map(|(i, _)| (i / NUM_PROTOCOLS, i % NUM_PROTOCOLS))
}

/// A plan for AllReduce on 2 ranks / 1 node plus an any-shape AllGather band, written to a temp file:
/// rule 0: AllReduce 2x1 [0, 65535] Ring/LL; rule 1: AllReduce 2x1 [65536, 1048575] Tree/Simple channels 4;
/// rule 2: AllReduce 2x1 [1048576, max] Ring/Simple; rule 3: AllGather any [0, max] Ring/LL128 channels 2.
pub const PLAN_2X1: &str = r#"{
  "format": "planner-tuner-plan",
  "version": 1,
  "provenance": {
    "planner_version": "0.1.0", "created_unix": 1764547200, "machine": "2x NVIDIA H200",
    "nccl_version": "2.28.3", "topology_hash": "9f3a0c", "source_kind": "verify",
    "source_file": "results.json", "source_hash": "cbf29ce484222325", "margin_percent": 2.0
  },
  "rules": [
    {"collective": "AllReduce", "n_ranks": 2, "n_nodes": 1, "min_bytes": 0, "max_bytes": 65535,
     "algorithm": "Ring", "protocol": "LL", "channels": null, "predicted_us": 7.1, "measured_us": 6.9},
    {"collective": "AllReduce", "n_ranks": 2, "n_nodes": 1, "min_bytes": 65536, "max_bytes": 1048575,
     "algorithm": "Tree", "protocol": "Simple", "channels": 4, "predicted_us": null, "measured_us": null},
    {"collective": "AllReduce", "n_ranks": 2, "n_nodes": 1, "min_bytes": 1048576, "max_bytes": 18446744073709551615,
     "algorithm": "Ring", "protocol": "Simple", "channels": null, "predicted_us": null, "measured_us": null},
    {"collective": "AllGather", "n_ranks": null, "n_nodes": null, "min_bytes": 0, "max_bytes": 18446744073709551615,
     "algorithm": "Ring", "protocol": "LL128", "channels": 2, "predicted_us": null, "measured_us": null}
  ]
}"#;

/// Writes `text` to a fresh file under the target tmp dir and returns its path.
pub fn write_plan(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tuner-plans");
    std::fs::create_dir_all(&dir).expect("create plan dir");
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("{}-{n}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("write plan");
    path
}

pub fn c_path(path: &Path) -> CString {
    CString::new(path.to_str().expect("utf-8 temp path")).expect("no NUL in temp path")
}
