//! Measurement files -> one vocabulary (`Measurement`).
//!
//! Four formats, told apart by their content (never by the file name):
//! * planner verify result files (`"format": "planner-verify"`): both
//!   backends, NCCL's free choice with the pair NCCL chose, the stock model's
//!   prediction at measurement time;
//! * nccl-tests text output (`all_reduce_perf` and siblings, nccl-tests
//!   2.19.6 layout, `src/util.cu:454-525,739-790`): an out-of-place and an
//!   in-place time per size; the pinned pair from the `NCCL_ALGO` /
//!   `NCCL_PROTO` "set by environment" lines of an `NCCL_DEBUG=INFO` log in the
//!   same file (NCCL `src/graph/tuning.cc:421,426`) or from `ReadOptions::pair`;
//! * nccl-tests `-J` JSON (the same rows, the environment in `env`);
//! * NCCL Inspector JSONL (profiler plugin, format v4.0: one object per rank
//!   per collective, no algorithm or protocol, so its rows are NCCL's free
//!   choice, "auto").
//!
//! Anything else, or a malformed row, is bad input naming the file and line.

use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::measure::RowStatus;
use crate::model::Pair;
use crate::model::{Algo, Coll, Proto};
use crate::verify::{VerifyRun, RESULT_FORMAT};
use nccl_tuner_planner::plan::fnv1a64;
use serde::Serialize;
use std::collections::BTreeMap;

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
    pub fn name(self) -> &'static str {
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
    /// `Ring/LL`, or `auto` for a free-choice row whose choice is unknown.
    pub fn pair_label(&self) -> String {
        match self.fit_pair() {
            Some(p) => p.to_string(),
            None => "auto".into(),
        }
    }
}

/// What a file says about the machine it was measured on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MachineInfo {
    pub hosts: Vec<String>,
    /// GPU names by rank, where the file lists them.
    pub gpus: Vec<String>,
    pub gpu_count: Option<usize>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub nccl_version: Option<String>,
    /// `file::topology_hash` of the topology XML the file carries.
    pub topology_hash: Option<String>,
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
    let format = detect(text, source)?;
    let mut m = match format {
        InputFormat::PlannerVerify => read_verify(text, source, options)?,
        InputFormat::NcclTestsText => read_nccl_tests_text(text, source, options)?,
        InputFormat::NcclTestsJson => read_nccl_tests_json(text, source, options)?,
        InputFormat::NcclInspector => read_inspector(text, source, options)?,
    };
    m.fnv1a64 = format!("{:016x}", fnv1a64(text.as_bytes()));
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

fn new_measurements(source: &str, format: InputFormat) -> Measurements {
    Measurements {
        source: source.to_string(),
        format,
        fnv1a64: String::new(),
        machine: MachineInfo::default(),
        rows: Vec::new(),
        notes: Vec::new(),
    }
}

/// The format from the content: JSON documents by their keys, JSONL by its
/// first line, nccl-tests text by its header or rows.
fn detect(text: &str, source: &str) -> Result<InputFormat> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(Error::bad_input(format!("{source}: the file is empty")));
    }
    if trimmed.starts_with('{') {
        let whole = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => return detect_json(&value, source, 1),
            Err(e) => e,
        };
        // Not one document: JSON Lines, judged by the first non-empty line.
        let (number, first) = text
            .lines()
            .enumerate()
            .find(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
            .unwrap_or((1, ""));
        return match serde_json::from_str::<serde_json::Value>(first) {
            Ok(value) => detect_json(&value, source, number),
            // One document after all (pretty-printed): its own error position.
            Err(_) => Err(Error::bad_input(format!(
                "{source}:{}:{}: not valid JSON: {whole}",
                whole.line(),
                whole.column()
            ))),
        };
    }
    for line in text.lines() {
        let t = strip_launcher_tag(line.trim());
        if t.starts_with("# nccl-tests version")
            || t.starts_with("# Collective test starting")
            || (t.starts_with('#') && t.contains("out-of-place"))
            || header_columns(t).is_some()
        {
            return Ok(InputFormat::NcclTestsText);
        }
    }
    let (number, first) = text
        .lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .unwrap_or((1, ""));
    Err(Error::bad_input(format!(
        "{source}:{number}: unknown format (expected a planner verify result file, nccl-tests output as text \
         or -J JSON, or NCCL Inspector JSONL); the line starts `{}`",
        first.trim().chars().take(60).collect::<String>()
    )))
}

fn detect_json(value: &serde_json::Value, source: &str, line: usize) -> Result<InputFormat> {
    if let Some(format) = value.get("format").and_then(|f| f.as_str()) {
        return match format {
            RESULT_FORMAT => Ok(InputFormat::PlannerVerify),
            super::file::CALIBRATION_FORMAT => Err(Error::bad_input(format!(
                "{source}: is a calibration file, not measurements"
            ))),
            other => Err(Error::bad_input(format!(
                "{source}: unknown JSON format \"{other}\" (expected \"{}\")",
                RESULT_FORMAT
            ))),
        };
    }
    if value.get("results").is_some() && value.get("config").is_some() {
        return Ok(InputFormat::NcclTestsJson);
    }
    if value.get("coll_perf").is_some() || value.get("p2p_perf").is_some() {
        return Ok(InputFormat::NcclInspector);
    }
    Err(Error::bad_input(format!(
        "{source}:{line}: unknown JSON input: no \"format\" (planner verify), \"results\"+\"config\" \
         (nccl-tests -J) or \"coll_perf\" (NCCL Inspector) key"
    )))
}

// ---------------------------------------------------------------------------
// planner verify result files

fn read_verify(text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
    let run = VerifyRun::from_json(text, source)?;
    if let Some(p) = options.pair {
        return Err(Error::bad_input(format!(
            "{source}: --pair {p} does not apply to a planner verify result, which records the pair of every row"
        )));
    }
    if let Some(c) = options.coll.filter(|c| *c != run.options.collective) {
        return Err(Error::bad_input(format!(
            "{source}: --coll {} contradicts the file, which ran {}",
            c.cli_name(),
            run.options.collective.cli_name()
        )));
    }
    let lines = array_element_lines(text, "rows");
    let mut out = new_measurements(source, InputFormat::PlannerVerify);
    let m = &run.machine;
    out.machine = MachineInfo {
        hosts: m.hosts.clone(),
        gpus: m.gpus.iter().map(|g| g.name.clone()).collect(),
        gpu_count: Some(m.world_size),
        driver_version: m.driver_version.clone(),
        cuda_version: m.cuda_version.clone(),
        nccl_version: m.nccl_version.clone(),
        topology_hash: None,
    };
    // NCCL's own dump when the run took one (what NCCL used), else the
    // planner's view; both hash alike when they agree.
    if let Some(xml) = m.nccl_topology_xml.as_ref().or(m.topology_xml.as_ref()) {
        out.machine.topology_hash = Some(super::file::topology_hash(xml, source)?);
    }
    let mut skipped = 0;
    for (i, row) in run.rows.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or(0);
        // A `tuned` row measures NCCL steered by a plugin and a `symm` row NCCL on symmetric windows: neither is
        // NCCL's default configuration, which is what the calibration models.
        if row.tuned || row.backend == crate::measure::Backend::NcclSymm {
            skipped += 1;
            continue;
        }
        let median = match (row.status, row.median_us) {
            (RowStatus::Ok, Some(t)) if t > 0.0 => t,
            _ => {
                skipped += 1;
                continue;
            }
        };
        let spread_pct = match (
            row.times_us.iter().copied().reduce(f64::max),
            row.times_us.iter().copied().reduce(f64::min),
        ) {
            (Some(hi), Some(lo)) if row.times_us.len() > 1 => Some((hi - lo) / median * 100.0),
            _ => None,
        };
        out.rows.push(Measurement {
            backend: row.backend,
            coll: run.options.collective,
            pair: row.pair,
            nccl_choice: row.nccl_choice.map(|c| c.pair),
            bytes: row.bytes,
            time_us: median,
            repeats: Some(row.times_us.len() as u32),
            spread_pct,
            stock_us: row.predicted_us.filter(|p| p.is_finite() && *p > 0.0),
            in_place: None,
            source: source.to_string(),
            line,
        });
    }
    if skipped > 0 {
        out.notes.push(format!(
            "{skipped} row(s) not ok (failed, skipped or unavailable) left out"
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// nccl-tests

/// nccl-tests program name -> the model's collective; None for tests the
/// model has no tuner for (alltoall, sendrecv, gather, scatter, hypercube).
fn coll_of_program(program: &str) -> Option<Coll> {
    let base = program.rsplit(['/', '\\']).next().unwrap_or(program);
    let base = base.strip_suffix("_mpi").unwrap_or(base);
    let base = base.strip_suffix("_perf").unwrap_or(base);
    match base {
        "all_reduce" => Some(Coll::AllReduce),
        "all_gather" => Some(Coll::AllGather),
        "reduce_scatter" => Some(Coll::ReduceScatter),
        "broadcast" => Some(Coll::Broadcast),
        "reduce" => Some(Coll::Reduce),
        _ => None,
    }
}

/// NCCL's `NCCL_VERSION_CODE` (major*10000 + minor*100 + patch since 2.9)
/// as `2.28.3`.
fn nccl_version_of_code(code: u64) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// A pinned pair from NCCL_ALGO / NCCL_PROTO values: only a single algorithm
/// and a single protocol pin a pair; lists, exclusions (`^LL128`) and
/// per-collective forms (`allreduce:ring`) leave NCCL a choice.
fn pinned_pair(algo: Option<&str>, proto: Option<&str>) -> Option<Pair> {
    let algo = Algo::parse(&algo?.trim().replace(['_', '-'], "")).ok()?;
    let proto = Proto::parse(proto?.trim()).ok()?;
    Some(Pair::new(algo, proto))
}

/// Merge the pair a file pins with `--pair`.
fn resolve_pair(
    from_file: Option<Pair>,
    file_says: Option<(String, String)>,
    options: &ReadOptions,
    source: &str,
) -> Result<Option<Pair>> {
    match (from_file, options.pair) {
        (Some(f), Some(o)) if f != o => Err(Error::bad_input(format!(
            "{source}: --pair {o} contradicts the file, which ran {f} (NCCL_ALGO/NCCL_PROTO)"
        ))),
        (Some(f), _) => Ok(Some(f)),
        (None, Some(o)) => {
            if let Some((a, p)) = file_says {
                return Err(Error::bad_input(format!(
                    "{source}: --pair {o} contradicts the file, whose NCCL_ALGO={a} NCCL_PROTO={p} leave NCCL a choice"
                )));
            }
            Ok(Some(o))
        }
        (None, None) => Ok(None),
    }
}

fn resolve_coll(from_file: Option<Coll>, options: &ReadOptions, source: &str) -> Result<Coll> {
    match (from_file, options.coll) {
        (Some(f), Some(o)) if f != o => Err(Error::bad_input(format!(
            "{source}: --coll {} contradicts the file, which ran {}",
            o.cli_name(),
            f.cli_name()
        ))),
        (Some(f), _) | (None, Some(f)) => Ok(f),
        (None, None) => Err(Error::bad_input(format!(
            "{source}: the file does not say which collective it ran (no `# Collective test starting:` line); give --coll"
        ))),
    }
}

/// Column names of an nccl-tests header line (`#  size  count  type  redop
/// root  time  algbw ...`), after the `#`.
fn header_columns(line: &str) -> Option<Vec<String>> {
    let rest = line.trim().strip_prefix('#')?;
    let cols: Vec<String> = rest.split_whitespace().map(|s| s.to_string()).collect();
    if cols.len() >= 6 && cols[..5] == ["size", "count", "type", "redop", "root"] {
        Some(cols)
    } else {
        None
    }
}

/// `mpirun --tag-output` prefixes every line with `[job,rank]<stdout>:`.
fn strip_launcher_tag(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((tag, after)) = rest.split_once(']') {
            if tag.split(',').all(|t| t.trim().parse::<u64>().is_ok()) {
                for stream in ["<stdout>:", "<stderr>:"] {
                    if let Some(body) = after.strip_prefix(stream) {
                        return body.trim();
                    }
                }
            }
        }
    }
    line
}

struct TextLayout {
    /// Tokens per half (out-of-place, in-place): 4, or 8 with `-I`.
    half: usize,
    cpu_time: bool,
}

fn read_nccl_tests_text(text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
    let mut out = new_measurements(source, InputFormat::NcclTestsText);
    let mut program_coll: Option<(Coll, usize)> = None;
    let mut layout = TextLayout {
        half: 4,
        cpu_time: false,
    };
    let mut env: BTreeMap<&str, (String, usize)> = BTreeMap::new();
    let mut rank_lines = 0usize;
    let mut per_process_gpus: Option<usize> = None;
    // (bytes, out-of-place, in-place, line)
    let mut rows: Vec<(u64, Option<f64>, Option<f64>, usize)> = Vec::new();
    let mut wrong_rows = 0usize;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = strip_launcher_tag(raw.trim());
        if line.is_empty() {
            continue;
        }
        if line.contains("NCCL INFO") || line.contains("NCCL WARN") {
            let setting = crate::nccl_log::env_setting(line)
                .filter(|(name, _)| matches!(*name, "NCCL_ALGO" | "NCCL_PROTO"));
            if let Some((name, value)) = setting {
                if let Some((prev, at)) = env.get(name) {
                    if prev != value {
                        return Err(Error::bad_input(format!(
                            "{source}:{number}: {name} set to {value} here but to {prev} on line {at}"
                        )));
                    }
                } else {
                    env.insert(name, (value.to_string(), number));
                }
            }
            if out.machine.nccl_version.is_none() {
                if let Some(v) = line.split("NCCL version ").nth(1) {
                    let v: String = v
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == '.')
                        .collect();
                    if !v.is_empty() {
                        out.machine.nccl_version = Some(v);
                    }
                }
            }
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(program) = comment.strip_prefix("Collective test starting:") {
                let program = program.trim();
                match coll_of_program(program) {
                    Some(c) => program_coll = Some((c, number)),
                    None => {
                        return Err(Error::bad_input(format!(
                            "{source}:{number}: `{program}` measures a collective NCCL's tuner does not model \
                             (supported: all_reduce, all_gather, reduce_scatter, broadcast, reduce)"
                        )))
                    }
                }
            } else if let Some(rest) = comment.strip_prefix("nccl-tests version") {
                if let Some(code) = rest
                    .split_whitespace()
                    .find_map(|t| t.strip_prefix("nccl-library="))
                    .and_then(|c| c.parse::<u64>().ok())
                {
                    out.machine.nccl_version = Some(nccl_version_of_code(code));
                }
            } else if comment.starts_with("nThread") {
                let tokens: Vec<&str> = comment.split_whitespace().collect();
                let get = |key: &str| {
                    tokens
                        .iter()
                        .position(|t| *t == key)
                        .and_then(|i| tokens.get(i + 1))
                        .and_then(|v| v.parse::<usize>().ok())
                };
                if let (Some(t), Some(g)) = (get("nThread"), get("nGpus")) {
                    // Untrusted counts: their product is checked against the rank limit, not overflowed.
                    let max = crate::limits::MAX_RANKS;
                    match t.checked_mul(g).filter(|n| *n <= max) {
                        Some(n) => per_process_gpus = Some(n),
                        None => {
                            return Err(Error::bad_input(format!(
                                "{source}:{number}: nThread {t} x nGpus {g} is more than planner's limit of {max} ranks"
                            )))
                        }
                    }
                }
            } else if comment.starts_with("Rank") {
                // `#  Rank  0 Group  0 Pid   1412 on         vm device  0 [0000:00:06] NVIDIA H200`
                rank_lines += 1;
                if let Some((_, name)) = comment.split_once(']') {
                    out.machine.gpus.push(name.trim().to_string());
                }
                if let Some(host) = comment.split_whitespace().skip_while(|t| *t != "on").nth(1) {
                    if !out.machine.hosts.iter().any(|h| h == host) {
                        out.machine.hosts.push(host.to_string());
                    }
                }
            } else if let Some(cols) = header_columns(line) {
                if cols[5] == "time" || cols[5] == "cputime" {
                    layout.cpu_time = cols[5] == "cputime";
                    let after_root = cols.len() - 5;
                    let stamps = usize::from(cols.last().is_some_and(|c| c == "timestamp"));
                    layout.half = ((after_root - stamps) / 2).max(4);
                }
            }
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Ok(bytes) = tokens[0].parse::<u64>() else {
            // Launcher or application noise between the rows: not ours to judge.
            continue;
        };
        let bad = |what: &str| {
            Error::bad_input(format!(
                "{source}:{number}: malformed nccl-tests row ({what}): `{}`",
                line.chars().take(100).collect::<String>()
            ))
        };
        if tokens.len() < 5 + layout.half {
            return Err(bad("too few columns"));
        }
        let time_at = |i: usize| -> Result<Option<f64>> {
            match tokens.get(i) {
                None => Ok(None),
                Some(t) => match t.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                    _ => Err(bad(&format!("time `{t}` is not a positive number"))),
                },
            }
        };
        let wrong_at = |i: usize| -> bool {
            tokens
                .get(i)
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(|w| w > 0.0)
        };
        let (oop, ip) = if tokens.len() >= 5 + 2 * layout.half {
            (time_at(5)?, time_at(5 + layout.half)?)
        } else {
            // Trace replay prints only the in-place half.
            (None, time_at(5)?)
        };
        if tokens.len() >= 5 + 2 * layout.half && (wrong_at(8) || wrong_at(8 + layout.half)) {
            wrong_rows += 1;
            continue;
        }
        rows.push((bytes, oop, ip, number));
    }
    if rows.is_empty() {
        return Err(Error::bad_input(format!(
            "{source}: nccl-tests output without result rows"
        )));
    }
    let coll = resolve_coll(program_coll.map(|(c, _)| c), options, source)?;
    let algo = env.get("NCCL_ALGO").map(|(v, _)| v.as_str());
    let proto = env.get("NCCL_PROTO").map(|(v, _)| v.as_str());
    let from_file = pinned_pair(algo, proto);
    let file_says = if from_file.is_none() && (algo.is_some() || proto.is_some()) {
        Some((
            algo.unwrap_or("(unset)").to_string(),
            proto.unwrap_or("(unset)").to_string(),
        ))
    } else {
        None
    };
    let pair = resolve_pair(from_file, file_says, options, source)?;
    out.machine.gpu_count = if rank_lines > 0 {
        Some(rank_lines)
    } else {
        per_process_gpus
    };
    if layout.cpu_time {
        out.notes
            .push("times are CPU times (nccl-tests -C 1), not GPU times".into());
    }
    if wrong_rows > 0 {
        out.notes
            .push(format!("{wrong_rows} row(s) with #wrong > 0 left out"));
    }
    for (bytes, oop, ip, line) in rows {
        for (time, in_place) in [(oop, false), (ip, true)] {
            if let Some(t) = time {
                out.rows
                    .push(nccl_tests_row(coll, pair, bytes, t, in_place, source, line));
            }
        }
    }
    Ok(out)
}

fn nccl_tests_row(
    coll: Coll,
    pair: Option<Pair>,
    bytes: u64,
    time_us: f64,
    in_place: bool,
    source: &str,
    line: usize,
) -> Measurement {
    Measurement {
        backend: Backend::Nccl,
        coll,
        pair,
        nccl_choice: None,
        bytes,
        time_us,
        repeats: None,
        spread_pct: None,
        stock_us: None,
        in_place: Some(in_place),
        source: source.to_string(),
        line,
    }
}

fn read_nccl_tests_json(text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::bad_input(format!("{source}:{}:{}: {e}", e.line(), e.column())))?;
    let mut out = new_measurements(source, InputFormat::NcclTestsJson);
    let program = value
        .get("args")
        .and_then(|a| a.get(0))
        .and_then(|a| a.as_str());
    let program_coll = match program {
        Some(p) => Some(coll_of_program(p).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}: `{p}` measures a collective NCCL's tuner does not model \
                 (supported: all_reduce, all_gather, reduce_scatter, broadcast, reduce)"
            ))
        })?),
        None => None,
    };
    let coll = resolve_coll(program_coll, options, source)?;
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for item in value
        .get("env")
        .and_then(|e| e.as_array())
        .into_iter()
        .flatten()
    {
        if let Some((k, v)) = item.as_str().and_then(|s| s.split_once('=')) {
            env.insert(k.to_string(), v.to_string());
        }
    }
    let algo = env.get("NCCL_ALGO").map(|s| s.as_str());
    let proto = env.get("NCCL_PROTO").map(|s| s.as_str());
    let from_file = pinned_pair(algo, proto);
    let file_says = if from_file.is_none() && (algo.is_some() || proto.is_some()) {
        Some((
            algo.unwrap_or("(unset)").to_string(),
            proto.unwrap_or("(unset)").to_string(),
        ))
    } else {
        None
    };
    let pair = resolve_pair(from_file, file_says, options, source)?;
    out.machine.nccl_version = value
        .get("nccl_version")
        .and_then(|v| v.as_u64())
        .map(nccl_version_of_code);
    let config = value.get("config");
    let devices: Vec<&serde_json::Value> = config
        .and_then(|c| c.get("devices"))
        .and_then(|d| d.as_array())
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    // nccl-tests lists one device per process (the first of its GPUs). Untrusted counts, as in the text reader:
    // nthreads x ngpus x devices is checked against the rank limit, not overflowed.
    let counts =
        config.and_then(|c| Some((c.get("nthreads")?.as_u64()?, c.get("ngpus")?.as_u64()?)));
    out.machine.gpu_count = match counts {
        None => None,
        Some((threads, gpus)) => {
            let processes = devices.len().max(1) as u64;
            let max = crate::limits::MAX_RANKS;
            match threads
                .checked_mul(gpus)
                .and_then(|n| n.checked_mul(processes))
                .filter(|n| *n <= max as u64)
            {
                Some(n) => Some(n as usize),
                None => {
                    return Err(Error::bad_input(format!(
                        "{source}: config nthreads {threads} x ngpus {gpus} x {processes} devices is more than planner's limit of {max} ranks"
                    )))
                }
            }
        }
    };
    for d in &devices {
        if let Some(name) = d.get("device_info").and_then(|v| v.as_str()) {
            out.machine.gpus.push(name.to_string());
        }
        if let Some(host) = d.get("hostname").and_then(|v| v.as_str()) {
            if !out.machine.hosts.iter().any(|h| h == host) {
                out.machine.hosts.push(host.to_string());
            }
        }
    }
    let results = value
        .get("results")
        .and_then(|r| r.as_array())
        .ok_or_else(|| Error::bad_input(format!("{source}: \"results\" is not a list")))?;
    let lines = array_element_lines(text, "results");
    let mut wrong_rows = 0;
    for (i, result) in results.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or(0);
        let bad = |what: &str| Error::bad_input(format!("{source}:{line}: results[{i}]: {what}"));
        let bytes = result
            .get("size")
            .and_then(|s| s.as_u64())
            .ok_or_else(|| bad("no integer \"size\""))?;
        let mut halves = Vec::new();
        for (key, in_place) in [("out_of_place", false), ("in_place", true)] {
            let Some(half) = result.get(key).filter(|h| !h.is_null()) else {
                continue;
            };
            if half.get("cpu_time").is_some() && out.notes.is_empty() {
                out.notes
                    .push("times are CPU times (nccl-tests -C 1), not GPU times".into());
            }
            let time = half
                .get("time")
                .or_else(|| half.get("cpu_time"))
                .and_then(|t| t.as_f64())
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| bad(&format!("{key}: no positive \"time\"")))?;
            let wrong = half.get("nwrong").and_then(|w| w.as_f64()).unwrap_or(0.0);
            halves.push((time, in_place, wrong > 0.0));
        }
        if halves.is_empty() {
            return Err(bad("neither \"out_of_place\" nor \"in_place\" times"));
        }
        if halves.iter().any(|h| h.2) {
            wrong_rows += 1;
            continue;
        }
        for (time, in_place, _) in halves {
            out.rows.push(nccl_tests_row(
                coll, pair, bytes, time, in_place, source, line,
            ));
        }
    }
    if wrong_rows > 0 {
        out.notes
            .push(format!("{wrong_rows} row(s) with nwrong > 0 left out"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// NCCL Inspector JSONL

/// One collective of one rank.
struct InspectorRecord {
    comm: String,
    sn: u64,
    rank: u64,
    n_ranks: u64,
    coll: Coll,
    bytes: u64,
    time_us: f64,
    pair: Option<Pair>,
    line: usize,
}

/// NCCL Inspector output (`ext-profiler/inspector`, v2.28.3-1;
/// `plugins/profiler/inspector` since 2.30): one JSON object per line with
/// `header` (comm id, rank, n_ranks), `metadata` and `coll_perf` (`coll`,
/// `coll_sn`, `coll_msg_size_bytes`, `coll_exec_time_us` in whole µs). A
/// collective's time is the slowest rank's (as nccl-tests and verify take
/// it); a size's time is the median over its collectives, using those that
/// every rank reported when there are any. Algorithm and protocol: format
/// v4.0 has neither; an `algo_proto` field (`Ring_ll`, the spelling of the
/// plugin's Prometheus output) is read where present.
fn read_inspector(text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
    let mut out = new_measurements(source, InputFormat::NcclInspector);
    let mut records = Vec::new();
    let mut p2p = 0usize;
    let mut other: BTreeMap<String, usize> = BTreeMap::new();
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(raw)
            .map_err(|e| Error::bad_input(format!("{source}:{number}: not a JSON object: {e}")))?;
        let bad = |what: &str| Error::bad_input(format!("{source}:{number}: {what}"));
        if value.get("p2p_perf").is_some() {
            p2p += 1;
            continue;
        }
        let perf = value
            .get("coll_perf")
            .ok_or_else(|| bad("no \"coll_perf\" or \"p2p_perf\": not NCCL Inspector output"))?;
        let header = value.get("header").ok_or_else(|| bad("no \"header\""))?;
        let metadata = value.get("metadata");
        if out.machine.nccl_version.is_none() {
            // git_rev "v2.28.3-1" -> 2.28.3
            out.machine.nccl_version = metadata
                .and_then(|m| m.get("git_rev"))
                .and_then(|g| g.as_str())
                .map(|g| g.trim_start_matches('v'))
                .map(|g| g.split('-').next().unwrap_or(g).to_string());
        }
        if let Some(host) = metadata
            .and_then(|m| m.get("hostname"))
            .and_then(|h| h.as_str())
        {
            if !out.machine.hosts.iter().any(|h| h == host) {
                out.machine.hosts.push(host.to_string());
            }
        }
        let name = perf
            .get("coll")
            .and_then(|c| c.as_str())
            .ok_or_else(|| bad("coll_perf has no \"coll\""))?;
        let Ok(coll) = Coll::parse(name) else {
            *other.entry(name.to_string()).or_default() += 1;
            continue;
        };
        let uint = |v: Option<&serde_json::Value>, key: &str| -> Result<u64> {
            v.and_then(|x| x.as_u64())
                .ok_or_else(|| bad(&format!("no integer \"{key}\"")))
        };
        let n_ranks = uint(header.get("n_ranks"), "n_ranks")?.max(1);
        let msg = uint(perf.get("coll_msg_size_bytes"), "coll_msg_size_bytes")?;
        // AG/RS report one rank's share (inspector.cc:1363-1369 of v2.28.3-1
        // multiply it by nranks for the bandwidth); the model counts all of it.
        let bytes = if coll.is_ag_rs() {
            msg.checked_mul(n_ranks).ok_or_else(|| {
                bad(&format!(
                    "coll_msg_size_bytes {msg} x n_ranks {n_ranks} overflows a byte count"
                ))
            })?
        } else {
            msg
        };
        let time_us = perf
            .get("coll_exec_time_us")
            .and_then(|t| t.as_f64())
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| bad("no non-negative \"coll_exec_time_us\""))?;
        if let Some(s) = perf.get("coll_timing_source").and_then(|s| s.as_str()) {
            *sources.entry(s.to_string()).or_default() += 1;
        }
        let pair = match perf.get("algo_proto").and_then(|a| a.as_str()) {
            Some(ap) => {
                let (a, p) = ap
                    .split_once('_')
                    .ok_or_else(|| bad(&format!("algo_proto `{ap}` is not ALGO_PROTO")))?;
                Some(pinned_pair(Some(a), Some(p)).ok_or_else(|| {
                    bad(&format!(
                        "algo_proto `{ap}` names no known algorithm/protocol"
                    ))
                })?)
            }
            None => None,
        };
        records.push(InspectorRecord {
            comm: header.get("id").map(|i| i.to_string()).unwrap_or_default(),
            sn: uint(perf.get("coll_sn"), "coll_sn")?,
            rank: uint(header.get("rank"), "rank")?,
            n_ranks,
            coll,
            bytes,
            time_us,
            pair,
            line: number,
        });
    }
    if p2p > 0 {
        out.notes
            .push(format!("{p2p} point-to-point record(s) left out"));
    }
    for (name, n) in &other {
        out.notes.push(format!(
            "{n} {name} record(s) left out (not a collective NCCL's tuner models)"
        ));
    }
    if sources.len() > 1 || sources.keys().any(|s| s != "kernel_gpu") {
        let list: Vec<String> = sources.iter().map(|(s, n)| format!("{s} x{n}")).collect();
        out.notes
            .push(format!("timing sources: {}", list.join(", ")));
    }
    if let Some(o) = options.coll {
        records.retain(|r| r.coll == o);
    }
    // One collective = (communicator, sequence number): the slowest rank.
    struct Call {
        coll: Coll,
        bytes: u64,
        time_us: f64,
        ranks: Vec<u64>,
        n_ranks: u64,
        pair: Option<Pair>,
        line: usize,
    }
    let mut calls: BTreeMap<(String, u64), Call> = BTreeMap::new();
    for r in records {
        let call = calls.entry((r.comm.clone(), r.sn)).or_insert(Call {
            coll: r.coll,
            bytes: r.bytes,
            time_us: r.time_us,
            ranks: Vec::new(),
            n_ranks: r.n_ranks,
            pair: r.pair,
            line: r.line,
        });
        if call.bytes != r.bytes || call.coll != r.coll {
            return Err(Error::bad_input(format!(
                "{source}:{}: collective {} of communicator {} has {} {} B here but {} {} B on line {}",
                r.line, r.sn, r.comm, r.coll.nccl_name(), r.bytes, call.coll.nccl_name(), call.bytes, call.line
            )));
        }
        call.time_us = call.time_us.max(r.time_us);
        if !call.ranks.contains(&r.rank) {
            call.ranks.push(r.rank);
        }
        call.line = call.line.min(r.line);
    }
    out.machine.gpu_count = calls.values().map(|c| c.n_ranks as usize).max();
    // Per (collective, pair, size): median over complete calls, else over all.
    // (complete calls' times, partial calls' times, first line)
    type Group = (Vec<f64>, Vec<f64>, usize);
    let mut groups: BTreeMap<(Coll, Option<Pair>, u64), Group> = BTreeMap::new();
    for c in calls.values() {
        let g =
            groups
                .entry((c.coll, c.pair, c.bytes))
                .or_insert((Vec::new(), Vec::new(), usize::MAX));
        if c.ranks.len() as u64 >= c.n_ranks {
            g.0.push(c.time_us);
        } else {
            g.1.push(c.time_us);
        }
        g.2 = g.2.min(c.line);
    }
    for ((coll, pair, bytes), (complete, partial, line)) in groups {
        let times = if complete.is_empty() {
            partial
        } else {
            complete
        };
        let Some(median) = crate::measure::median(&times) else {
            continue;
        };
        if median <= 0.0 {
            continue;
        }
        let spread_pct = if times.len() > 1 {
            let hi = times.iter().copied().fold(f64::MIN, f64::max);
            let lo = times.iter().copied().fold(f64::MAX, f64::min);
            Some((hi - lo) / median * 100.0)
        } else {
            None
        };
        out.rows.push(Measurement {
            backend: Backend::Nccl,
            coll,
            pair,
            nccl_choice: None,
            bytes,
            time_us: median,
            repeats: Some(times.len() as u32),
            spread_pct,
            stock_us: None,
            in_place: None,
            source: source.to_string(),
            line,
        });
    }
    if let Some(p) = options.pair {
        // --pair on an Inspector file: every call ran that pair.
        for r in &mut out.rows {
            match r.pair {
                Some(q) if q != p => {
                    return Err(Error::bad_input(format!(
                        "{source}:{}: --pair {p} contradicts the file's algo_proto {q}",
                        r.line
                    )))
                }
                _ => r.pair = Some(p),
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------

/// The 1-based line on which each element of the top-level array `key`
/// starts, so messages about a JSON row can name its line.
pub(crate) fn array_element_lines(text: &str, key: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut line = 1usize;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut current = String::new();
    let mut last_string: Option<String> = None;
    let mut in_target = false;
    let mut want_element = false;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
        }
        if in_string {
            if escaped {
                escaped = false;
                current.push(c);
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if depth == 1 {
                    last_string = Some(std::mem::take(&mut current));
                }
            } else if depth == 1 {
                current.push(c);
            }
            continue;
        }
        if want_element && !c.is_whitespace() && c != ']' {
            lines.push(line);
            want_element = false;
        }
        match c {
            '"' => {
                in_string = true;
                current.clear();
            }
            '{' | '[' => {
                depth += 1;
                if c == '[' && depth == 2 && last_string.as_deref() == Some(key) {
                    in_target = true;
                    want_element = true;
                }
            }
            '}' | ']' => {
                if in_target && depth == 2 {
                    return lines;
                }
                depth = depth.saturating_sub(1);
            }
            ',' => {
                if in_target && depth == 2 {
                    want_element = true;
                }
                if depth == 1 {
                    last_string = None;
                }
            }
            _ => {}
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_lines_of_a_nested_array() {
        let text = "{\n  \"a\": \"rows\",\n  \"rows\": [\n    {\"x\": \"}\\\"\"},\n    {\"y\": [1, 2]}\n  ],\n  \"z\": [0]\n}";
        assert_eq!(array_element_lines(text, "rows"), vec![4, 5]);
        assert_eq!(array_element_lines(text, "z"), vec![7]);
        assert_eq!(array_element_lines(text, "missing"), Vec::<usize>::new());
    }

    #[test]
    fn launcher_tags_are_stripped() {
        assert_eq!(
            strip_launcher_tag("[1,0]<stdout>:  8  2 float"),
            "8  2 float"
        );
        assert_eq!(strip_launcher_tag("[1,0]<stderr>:x"), "x");
        // a NCCL log line's `[0]` is not a launcher tag
        assert_eq!(strip_launcher_tag("[0] NCCL INFO x"), "[0] NCCL INFO x");
    }

    #[test]
    fn version_codes_and_programs() {
        assert_eq!(nccl_version_of_code(22803), "2.28.3");
        assert_eq!(nccl_version_of_code(2708), "2.7.8");
        assert_eq!(
            coll_of_program("./build/all_reduce_perf"),
            Some(Coll::AllReduce)
        );
        assert_eq!(
            coll_of_program("reduce_scatter_perf_mpi"),
            Some(Coll::ReduceScatter)
        );
        assert_eq!(coll_of_program("alltoall_perf"), None);
    }

    #[test]
    fn only_single_values_pin_a_pair() {
        assert_eq!(
            pinned_pair(Some("Ring"), Some("LL")),
            Some(Pair::new(Algo::Ring, Proto::Ll))
        );
        assert_eq!(
            pinned_pair(Some("tree"), Some("simple")),
            Some(Pair::new(Algo::Tree, Proto::Simple))
        );
        assert_eq!(pinned_pair(Some("Ring,Tree"), Some("LL")), None);
        assert_eq!(pinned_pair(Some("Ring"), Some("^LL128")), None);
        assert_eq!(pinned_pair(Some("Ring"), None), None);
    }
}
