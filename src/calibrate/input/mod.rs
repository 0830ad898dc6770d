//! Measurement files -> one vocabulary (`Measurement`).
//!
//! Four formats, told apart by their content (never by the file name, `detect`), one file per format behind the
//! `Reader` trait (as hyperfine's `export/` has one file per format behind `Exporter`):
//! * `planner_verify`: planner verify result files (`"format": "planner-verify"`);
//! * `nccl_tests_text`: nccl-tests text output (`all_reduce_perf` and siblings);
//! * `nccl_tests_json`: nccl-tests `-J` JSON (the same rows, the environment in `env`);
//! * `inspector`: NCCL Inspector JSONL (profiler plugin, format v4.0).
//!
//! Anything else, or a malformed row, is bad input naming the file and line.

mod detect;
mod inspector;
mod json_lines;
mod nccl_tests;
mod nccl_tests_json;
mod nccl_tests_text;
mod planner_verify;

pub(crate) use json_lines::array_element_lines;

use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::{Coll, Pair};
use nccl_tuner_planner::plan::fnv1a64;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Which reader a file went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    PlannerVerify,
    NcclTestsText,
    NcclTestsJson,
    NcclInspector,
}

impl InputFormat {
    pub(crate) fn name(self) -> &'static str {
        match self {
            InputFormat::PlannerVerify => "planner-verify",
            InputFormat::NcclTestsText => "nccl-tests-text",
            InputFormat::NcclTestsJson => "nccl-tests-json",
            InputFormat::NcclInspector => "nccl-inspector",
        }
    }
}

/// What the user says about a file that the file may not say itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// `--pair Ring/LL`: every row of the file ran this pair (nccl-tests runs
    /// pinned with NCCL_ALGO/NCCL_PROTO but without a log in the file). It
    /// must agree with the file's own log lines where there are any.
    pub pair: Option<Pair>,
    /// `--coll`: the collective, for nccl-tests text without its
    /// `# Collective test starting:` line. Must agree with the file.
    pub coll: Option<Coll>,
}

/// One measured (collective, pair, size): the vocabulary every reader produces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    pub backend: Backend,
    #[serde(serialize_with = "serialize_coll_name")]
    pub coll: Coll,
    /// The pinned pair; None for NCCL's free choice ("auto").
    pub pair: Option<Pair>,
    /// For a free-choice row: the pair NCCL ran, when the file knows it.
    pub nccl_choice: Option<Pair>,
    /// The model's byte count (nccl-tests' `size`: the largest buffer of one
    /// rank, all ranks' data for all-gather / reduce-scatter).
    pub bytes: u64,
    /// Median time per call, µs.
    pub time_us: f64,
    /// Timed repeats behind the median, when known.
    pub repeats: Option<u32>,
    /// (slowest - fastest repeat) / median x 100, when the repeats are known.
    pub spread_pct: Option<f64>,
    /// The stock NCCL model's prediction recorded with the measurement, µs.
    pub stock_us: Option<f64>,
    /// nccl-tests: the in-place column (true) or the out-of-place one.
    pub in_place: Option<bool>,
    /// nccl-tests' per-iteration statistics (`-I 1`, nccl-tests 2.19.2+), where the file has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_iteration: Option<IterStats>,
    /// Where it came from, for messages.
    pub source: String,
    pub line: usize,
}

pub(crate) fn serialize_coll_name<S: serde::Serializer>(
    coll: &Coll,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(coll.nccl_name())
}

impl Measurement {
    /// The pair this row measures: the pinned one, or NCCL's choice.
    pub fn fit_pair(&self) -> Option<Pair> {
        self.pair.or(self.nccl_choice)
    }
}

/// nccl-tests' per-iteration statistics of one half (out-of-place or in-place) of one row (`-I 1`:
/// `writePerIterReport`, src/util.cu of nccl-tests v2.19.6): the text columns `i_min i_max i_p99 i_cv%`, and in `-J`
/// JSON the object `out_of_place_per_iter`/`in_place_per_iter` with the iteration times and, with several processes,
/// each process's. Each iteration's time is the slowest GPU's (nccl-tests: "i_* uses max over process rows").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterStats {
    /// Iterations the statistics cover (after `skipped_iterations`); None in text, which does not say.
    pub iterations: Option<u32>,
    pub skipped_iterations: Option<u32>,
    pub min_us: f64,
    pub max_us: f64,
    /// JSON only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    pub p99_us: f64,
    /// JSON only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdev_us: Option<f64>,
    pub cv_pct: f64,
    /// JSON with several processes: the median of each process's iteration times (a slow process stands out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_process_median_us: Vec<f64>,
}

impl IterStats {
    /// (slowest - fastest iteration) / the row's time x 100: the spread `Measurement::spread_pct` records.
    pub fn spread_pct(&self, time_us: f64) -> Option<f64> {
        (time_us > 0.0).then(|| (self.max_us - self.min_us) / time_us * 100.0)
    }
}

/// The machine measurements were taken on: what one input file says about it, and in a calibration file the
/// facts its inputs share (the one machine-description type of calibrate).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub(crate) hosts: Vec<String>,
    /// GPU names by rank, where the file (the inputs) list them.
    pub gpus: Vec<String>,
    pub gpu_count: Option<usize>,
    pub driver_version: Option<String>,
    pub(crate) cuda_version: Option<String>,
    pub nccl_version: Option<String>,
    /// `file::topology_hash` of the topology XML the file (the inputs) carry; None: none carried one.
    pub topology_hash: Option<String>,
    /// What `topology_hash` covers (`file::TOPOLOGY_HASH_COVERS`): written into every calibration file, empty
    /// (and not written) for one input file's facts.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) topology_hash_covers: String,
}

impl MachineInfo {
    /// Add `host` unless `seen` holds it: first-seen order, one hash look-up per host, so a reader stays linear
    /// in its lines (not a scan of the hosts per line).
    pub(crate) fn add_host(&mut self, seen: &mut HashSet<String>, host: &str) {
        if seen.insert(host.to_string()) {
            self.hosts.push(host.to_string());
        }
    }
}

/// Everything one input file measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurements {
    pub source: String,
    pub format: InputFormat,
    /// FNV-1a 64 of the file's bytes, hex.
    pub fnv1a64: String,
    pub machine: MachineInfo,
    pub rows: Vec<Measurement>,
    /// What was left out and why (failed rows, other collectives, ...).
    pub notes: Vec<String>,
}

/// Read one measurement file of any supported format.
pub fn read_file(path: &str, options: &ReadOptions) -> Result<Measurements> {
    let text = crate::units::read_input_file(path)?;
    read_text(&text, path, options)
}

/// Read measurements from `text`; `source` names it in messages.
pub fn read_text(text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
    let format = detect::detect(text, source)?;
    let mut m = reader_of(format).read(text, source, options)?;
    m.fnv1a64 = format!("{:016x}", fnv1a64(text.as_bytes()));
    leave_out_unfittable(&mut m);
    // What the file says of its machine is echoed and written into the calibration: printable (JSON inputs may
    // carry escape sequences as \u001b, which a text filter would not see).
    let info = &mut m.machine;
    for s in info
        .hosts
        .iter_mut()
        .chain(info.gpus.iter_mut())
        .chain(m.notes.iter_mut())
    {
        *s = crate::fsio::printable(s);
    }
    for s in [
        &mut info.driver_version,
        &mut info.cuda_version,
        &mut info.nccl_version,
    ]
    .into_iter()
    .flatten()
    {
        *s = crate::fsio::printable(s);
    }
    if m.rows.is_empty() {
        let why = if m.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", m.notes.join("; "))
        };
        return Err(Error::bad_input(format!(
            "{source}: no usable measurement in this {} file{why}",
            format.name()
        )));
    }
    Ok(m)
}

/// Rows no model can place are left out with a note naming the first: 0 bytes (nccl-tests' `-b 0` prints such
/// rows; nothing moves, and the fit works in log bytes) and times that are not positive normal numbers (nccl-tests
/// prints "0.00" below 5 ns). Kept, one such row made the fit of its whole pair fail, and calibrate said the pair
/// had too few sizes.
fn leave_out_unfittable(m: &mut Measurements) {
    let fittable = |r: &Measurement| r.bytes > 0 && r.time_us.is_normal() && r.time_us > 0.0;
    let Some(first) = m.rows.iter().find(|r| !fittable(r)) else {
        return;
    };
    let first = format!(
        "{}:{} ({} B, {} µs)",
        first.source, first.line, first.bytes, first.time_us
    );
    let before = m.rows.len();
    m.rows.retain(fittable);
    m.notes.push(format!(
        "{} row(s) of 0 bytes or with a time that is not above 0 left out (the first: {first})",
        before - m.rows.len()
    ));
}

/// One measurement file format: its text (named `source` in messages) -> `Measurements`.
pub(crate) trait Reader {
    fn read(&self, text: &str, source: &str, options: &ReadOptions) -> Result<Measurements>;
}

/// The reader of `format`.
fn reader_of(format: InputFormat) -> &'static dyn Reader {
    match format {
        InputFormat::PlannerVerify => &planner_verify::PlannerVerifyReader,
        InputFormat::NcclTestsText => &nccl_tests_text::NcclTestsTextReader,
        InputFormat::NcclTestsJson => &nccl_tests_json::NcclTestsJsonReader,
        InputFormat::NcclInspector => &inspector::InspectorReader,
    }
}

impl Measurements {
    /// Nothing read yet from `source`.
    fn new(source: &str, format: InputFormat) -> Measurements {
        Measurements {
            source: source.to_string(),
            format,
            fnv1a64: String::new(),
            machine: MachineInfo::default(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }
}
