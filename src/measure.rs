//! What a backend (our kernels, NCCL) is asked to measure and what it reports: the collective's label and byte
//! counts, the per-size iteration plan, the statistics over repeats, and one measurement row.
//!
//! Timing method (the same for every backend so that they compare directly):
//! for each repeat, a loop of `iters` back-to-back collectives is timed with
//! device events on every GPU; the repeat's time is the loop's mean per call,
//! taken as the slowest GPU's. A row's measured time is the median over
//! repeats, its tail the slowest repeat (`max_us`); a p99 (`p99_us`, nearest
//! rank) only with at least `P99_MIN_SAMPLES` repeats, since below that the
//! nearest-rank p99 is the maximum under another name.

use crate::error::{Error, Result};
use crate::model::{Coll, Pair};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Verify measures the model's collectives (`Coll`). Sizes follow
/// nccl-tests: the bytes of the largest buffer of one rank (the output of
/// all-gather, the input of reduce-scatter), which is also the byte count
/// NCCL's cost model uses.
///
/// Result files and report titles spell a collective as NCCL's name in lower
/// case (`allreduce`).
pub fn coll_label(coll: Coll) -> String {
    coll.nccl_name().to_ascii_lowercase()
}

/// `#[serde(with = "coll_label_serde")]`: a `Coll` as `coll_label` spells it,
/// the result file's format.
pub mod coll_label_serde {
    use super::coll_label;
    use crate::model::Coll;
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(coll: &Coll, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&coll_label(*coll))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Coll, D::Error> {
        let text = String::deserialize(deserializer)?;
        Coll::ALL
            .into_iter()
            .find(|c| coll_label(*c) == text)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "unknown collective `{text}`, expected one of {}",
                    Coll::ALL.map(coll_label).join(", ")
                ))
            })
    }
}

/// How NCCL's per-call TUNING line counts bytes: all-gather logs the
/// per-rank send size and reduce-scatter the per-rank receive size, so the
/// line shows `size / n_ranks` for those two.
pub fn logged_bytes(coll: Coll, size: u64, n_ranks: usize) -> u64 {
    if coll.is_ag_rs() {
        size / n_ranks.max(1) as u64
    } else {
        size
    }
}

/// Which executor produced a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The planner's own kernels (`crate::exec`).
    Native,
    /// libnccl, each pair pinned with NCCL_ALGO/NCCL_PROTO.
    Nccl,
    /// libnccl on buffers from `ncclMemAlloc` registered as symmetric windows
    /// (`ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)`, as nccl-tests
    /// `-R 2`), NCCL's free choice: its symmetric kernels where it takes them.
    #[serde(rename = "nccl-symm")]
    NcclSymm,
}

impl Backend {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Nccl => "nccl",
            Backend::NcclSymm => "nccl-symm",
        }
    }
    /// `--backend native|nccl|nccl-symm|both`, or a comma list of those
    /// (`nccl,nccl-symm`); `both` is native and nccl. In the enum's order, once each.
    pub fn parse_list(text: &str) -> Result<Vec<Backend>> {
        let mut out = Vec::new();
        for part in text.split(',') {
            let found: &[Backend] = match part.trim().to_ascii_lowercase().as_str() {
                "native" => &[Backend::Native],
                "nccl" => &[Backend::Nccl],
                "nccl-symm" => &[Backend::NcclSymm],
                "both" => &[Backend::Native, Backend::Nccl],
                _ => {
                    return Err(Error::bad_input(format!(
                        "unknown backend '{}'; known: native, nccl, nccl-symm, both, or a list such as nccl,nccl-symm",
                        if text.contains(',') { part.trim() } else { text }
                    )))
                }
            };
            out.extend_from_slice(found);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------
// The measurement plan.

/// How many iterations, warm-ups and repeats one (pair, size) gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterPlan {
    /// `--iters`: calls per timed loop at small sizes.
    pub(crate) iters: u32,
    /// `--warmup`: untimed calls before the first loop.
    pub(crate) warmup: u32,
    /// `--repeats`: timed loops; the median and the maximum (and from 100 on, the p99) are over these.
    pub(crate) repeats: u32,
    /// Fewer iterations at large sizes: a loop moves at most this many bytes
    /// (but always at least one call), so a sweep to 4 GiB fits its budget.
    pub(crate) loop_bytes_cap: u64,
}

impl Default for IterPlan {
    fn default() -> Self {
        IterPlan {
            iters: 20,
            warmup: 5,
            repeats: 5,
            loop_bytes_cap: 4 << 30,
        }
    }
}

impl IterPlan {
    /// Calls per timed loop at `bytes`: `iters`, capped so the loop moves at
    /// most `loop_bytes_cap` bytes, and never below 1.
    pub(crate) fn iters_at(&self, bytes: u64) -> u32 {
        let by_cap = self.loop_bytes_cap / bytes.max(1);
        (self.iters as u64).min(by_cap).max(1) as u32
    }
    /// Warm-up calls at `bytes`: at most as many as one loop, at least 1.
    pub(crate) fn warmup_at(&self, bytes: u64) -> u32 {
        self.warmup.min(self.iters_at(bytes)).max(1)
    }
    pub(crate) fn check(&self) -> Result<()> {
        if self.iters == 0 || self.repeats == 0 {
            return Err(Error::bad_input(format!(
                "invalid --iters {} / --repeats {}: both must be at least 1",
                self.iters, self.repeats
            )));
        }
        if self.iters > 1_000_000 || self.repeats > 10_000 || self.warmup > 1_000_000 {
            return Err(Error::bad_input(format!(
                "invalid --iters {} / --warmup {} / --repeats {}: too large",
                self.iters, self.warmup, self.repeats
            )));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Statistics.

/// Median (mean of the middle two for an even count); None when empty or
/// when a value is not finite.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted_finite(values)?;
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// Percentile by nearest rank: the smallest value with at least `p` percent
/// of the values at or below it. With 5 repeats p99 is the slowest one.
pub(crate) fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let sorted = sorted_finite(values)?;
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

fn sorted_finite(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    Some(sorted)
}

/// Fewest samples for which a row carries a p99: with fewer, the nearest-rank
/// p99 is the slowest sample (ceil(0.99 n) = n for n < 100), so it is called
/// `max`.
pub(crate) const P99_MIN_SAMPLES: usize = 100;

/// Algorithm bandwidth in GB/s (10^9 bytes per second) for `bytes` in `time_us`.
pub fn algbw_gbs(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuInfo {
    pub rank: usize,
    pub host: String,
    pub name: String,
    pub bus_id: String,
    /// Compute capability, "9.0".
    pub compute_capability: String,
    pub memory_bytes: u64,
}

/// What happened to one (backend, pair, size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    /// Measured.
    Ok,
    /// The library or executor does not offer this pair for this collective:
    /// not a failure.
    Unavailable,
    /// It ran and broke (error, timeout); `note` says how.
    Failed,
    /// Not run (too small for the data type and rank count, or an earlier
    /// failure in the same process).
    Skipped,
}

/// NCCL's own choice for one call, from its `NCCL_DEBUG_SUBSYS=TUNING` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclChoice {
    pub pair: Pair,
    pub channel_lo: u32,
    pub channel_hi: u32,
}

/// What the planner tuner plugin decided for one call, from its per-call
/// line (`planner-tuner: COLL BYTES bytes nRanks R nNodes N -> OUTCOME`,
/// tuner/README.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum TunerDecision {
    /// The plugin steered NCCL to the plan's pair; `channels` when the rule
    /// sets them; `rule` is the 0-based index into the plan's rules.
    Steered {
        pair: Pair,
        channels: Option<u32>,
        rule: usize,
    },
    /// NCCL's own choice stood; `why` as the plugin logged it
    /// (`no rule`, `rule 2 Tree/LL masked`, `unsupported size`).
    Kept { why: String },
}

impl fmt::Display for TunerDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunerDecision::Steered {
                pair,
                channels: Some(c),
                rule,
            } => write!(f, "rule {rule}: {pair}, {c} channels"),
            TunerDecision::Steered { pair, rule, .. } => write!(f, "rule {rule}: {pair}"),
            TunerDecision::Kept { why } => write!(f, "kept: {why}"),
        }
    }
}

/// The symmetric kernel NCCL launched for one call, from its
/// `COLL [Symmetric]: N Bytes -> Kernel K nchannels C nthreads T nWorks W` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymmetricLaunch {
    /// NCCL's kernel name (`AllReduce_AGxLL_R`).
    pub kernel: String,
    /// Blocks launched.
    pub channels: u32,
    pub threads: u32,
}

/// One measurement row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub backend: Backend,
    /// The pinned pair; None for NCCL's free choice.
    pub pair: Option<Pair>,
    /// Requested size (see `coll_label`).
    pub bytes: u64,
    pub status: RowStatus,
    /// Why a row is not `ok`, or a remark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Calls per timed loop and timed loops actually used.
    pub iters: u32,
    pub repeats: u32,
    /// Per repeat: the loop's mean time per call in µs (slowest GPU).
    pub times_us: Vec<f64>,
    /// Median, slowest and (from `P99_MIN_SAMPLES` repeats on) p99 of
    /// `times_us`: derived, kept for readers of the file. Files written before
    /// `max_us` existed carry a `p99_us` over 5 repeats (their maximum); the
    /// reader recomputes all three from `times_us`.
    pub median_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) p99_us: Option<f64>,
    /// Elements that differed from the expected result (all ranks together).
    pub wrong: Option<u64>,
    /// For NCCL's free choice: what NCCL ran at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_choice: Option<NcclChoice>,
    /// Runtime channels the executor used, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) channels: Option<u32>,
    /// The model's prediction when measured, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_us: Option<f64>,
    /// NCCL's free choice with the planner tuner plugin loaded
    /// (`verify --tuner`): the `tuned` row beside NCCL's `auto` row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tuned: bool,
    /// For the `tuned` row: what the plugin decided at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuner_decision: Option<TunerDecision>,
    /// For the `symm` row: the symmetric kernel NCCL ran (None where it ran
    /// its classic path, then `nccl_choice` says which pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symmetric: Option<SymmetricLaunch>,
    /// For the `symm` row: the kernel the model said NCCL would pick, when
    /// measured (with `predicted_us` its time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_kernel: Option<String>,
}

impl Row {
    /// A row for `bytes` with no measurement yet.
    pub fn empty(backend: Backend, pair: Option<Pair>, bytes: u64, status: RowStatus) -> Row {
        Row {
            backend,
            pair,
            bytes,
            status,
            note: None,
            iters: 0,
            repeats: 0,
            times_us: Vec::new(),
            median_us: None,
            max_us: None,
            p99_us: None,
            wrong: None,
            nccl_choice: None,
            channels: None,
            predicted_us: None,
            tuned: false,
            tuner_decision: None,
            symmetric: None,
            predicted_kernel: None,
        }
    }

    /// Fill `median_us`, `max_us` and `p99_us` (enough samples only) from `times_us`.
    pub fn derive_stats(&mut self) {
        self.median_us = median(&self.times_us);
        self.max_us = percentile(&self.times_us, 100.0);
        self.p99_us = if self.times_us.len() >= P99_MIN_SAMPLES {
            percentile(&self.times_us, 99.0)
        } else {
            None
        };
    }

    /// "Ring/LL" for a pinned pair; for NCCL's free choice "auto", "tuned"
    /// (with the tuner plugin) or "symm" (on symmetric windows).
    pub(crate) fn pair_label(&self) -> String {
        match self.pair {
            Some(p) => p.to_string(),
            None if self.backend == Backend::NcclSymm => "symm".to_string(),
            None if self.tuned => "tuned".to_string(),
            None => "auto".to_string(),
        }
    }

    /// NCCL's plain free choice (the `auto` row): no pair pinned, no tuner
    /// plugin, ordinary buffers.
    pub(crate) fn is_auto(&self) -> bool {
        self.backend == Backend::Nccl && self.pair.is_none() && !self.tuned
    }
}

/// This host's name (for fingerprints and messages).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

// ---------------------------------------------------------------------------
// Stopping a measurement: Ctrl-C (SIGINT), SIGTERM or SIGHUP (a dropped ssh connection), and the child process
// being waited on.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Set by the first SIGINT/SIGTERM/SIGHUP: finish the current size, keep what was measured, stop.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);
/// The signal that asked (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The NCCL child being waited on (0: none), so a second signal can kill it before exiting.
static CHILD_PID: AtomicI32 = AtomicI32::new(0);

/// The signal number when the user asked the measurement to stop.
pub(crate) fn stop_requested() -> Option<i32> {
    STOP_REQUESTED
        .load(Ordering::SeqCst)
        .then(|| STOP_SIGNAL.load(Ordering::SeqCst))
}

/// "SIGINT (Ctrl-C)" for the signals the stop handler takes, else "signal N".
pub(crate) fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT (Ctrl-C)".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP (terminal or ssh connection closed)".into(),
        n => format!("signal {n}"),
    }
}

/// The child a second signal must kill (None: no child now).
pub(crate) fn set_child_pid(pid: Option<u32>) {
    let pid = pid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    CHILD_PID.store(pid, Ordering::SeqCst);
}

extern "C" fn on_stop_signal(signal: libc::c_int) {
    if STOP_REQUESTED.swap(true, Ordering::SeqCst) {
        // The second signal: kill the child and leave now. The result file already holds every
        // finished size (it is rewritten after each one).
        let pid = CHILD_PID.load(Ordering::SeqCst);
        // SAFETY: kill and _exit are async-signal-safe (signal-safety(7)); pid is a child of
        // ours or 0, which is skipped.
        unsafe {
            if pid > 0 {
                libc::kill(pid, libc::SIGKILL);
            }
            libc::_exit(128 + signal);
        }
    }
    STOP_SIGNAL.store(signal, Ordering::SeqCst);
    let text = b"\nplanner: stopping after the current size and keeping the result file (again to quit at once)\n";
    // SAFETY: write(2) is async-signal-safe; the buffer is a static byte string.
    unsafe {
        libc::write(2, text.as_ptr().cast(), text.len());
    }
}

/// Install the SIGINT/SIGTERM/SIGHUP handler of a measurement: the first signal sets a flag the loops
/// read between sizes, the second kills the running child and exits with 128 + the signal. SIGHUP (the
/// terminal or ssh connection went away) would otherwise kill planner before it marks its result file.
pub(crate) fn install_stop_handler() {
    let handler = on_stop_signal as extern "C" fn(libc::c_int);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches atomics and calls async-signal-safe functions
        // (write, kill, _exit); installing it has no other effect on memory.
        unsafe {
            libc::signal(signal, handler as libc::sighandler_t);
        }
    }
}

// ---------------------------------------------------------------------------
// The hidden fake backend for CPU-only tests.

/// `PLANNER_FAKE_BACKEND=1`: `planner verify` runs without GPU or libnccl, both backends
/// replaced by deterministic rows, one size every `PLANNER_FAKE_DELAY_MS` (default 50) ms; the
/// NCCL side still runs in child processes (`planner __nccl-child`), so
/// `PLANNER_FAKE_FAULT=crash:N` (each NCCL child aborts before its size N+1) and `hang:N` (it
/// stops reporting, until --timeout kills it) exercise the real crash and timeout handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FakeBackend {
    pub(crate) delay_ms: u64,
    pub(crate) fault: Option<FakeFault>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FakeFault {
    /// The NCCL child aborts (SIGABRT) after this many sizes.
    Crash { after: usize },
    /// The NCCL child stops reporting after this many sizes.
    Hang { after: usize },
}

pub(crate) const FAKE_BACKEND_ENV: &str = "PLANNER_FAKE_BACKEND";

impl FakeBackend {
    /// The fake backend when `PLANNER_FAKE_BACKEND=1`; a malformed setting is bad input.
    pub(crate) fn from_env() -> Result<Option<FakeBackend>> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<FakeBackend>> {
        if var(FAKE_BACKEND_ENV).as_deref() != Some("1") {
            return Ok(None);
        }
        let delay_ms = match var("PLANNER_FAKE_DELAY_MS") {
            None => 50,
            Some(v) => v.trim().parse().map_err(|_| {
                Error::bad_input(format!(
                    "PLANNER_FAKE_DELAY_MS={v}: give milliseconds, such as 50"
                ))
            })?,
        };
        let fault = match var("PLANNER_FAKE_FAULT").as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                let bad = || {
                    Error::bad_input(format!(
                        "PLANNER_FAKE_FAULT={text}: expected crash:N or hang:N (N sizes first)"
                    ))
                };
                let (kind, n) = text.split_once(':').ok_or_else(bad)?;
                let after: usize = n.trim().parse().map_err(|_| bad())?;
                match kind {
                    "crash" => Some(FakeFault::Crash { after }),
                    "hang" => Some(FakeFault::Hang { after }),
                    _ => return Err(bad()),
                }
            }
        };
        Ok(Some(FakeBackend { delay_ms, fault }))
    }

    /// Per repeat, the fake loop time in µs of `what` (a row label) at `bytes`: 5 µs plus the
    /// bytes at 100-149 GB/s (by label), each repeat 1 % slower than the one before.
    pub(crate) fn times_us(what: &str, bytes: u64, repeats: u32) -> Vec<f64> {
        let hash = what.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        let gbs = 100.0 + (hash % 50) as f64;
        let base = 5.0 + bytes as f64 / (gbs * 1e3);
        (0..repeats)
            .map(|i| (base * (1.0 + 0.01 * i as f64) * 1000.0).round() / 1000.0)
            .collect()
    }
}
