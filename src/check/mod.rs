//! `planner check FILE...`: is this what the machine should deliver, and if not, why.
//!
//! Reads measurements anyone already has (nccl-tests text with or without an `NCCL_DEBUG=INFO` log, nccl-tests
//! `-J` JSON, NCCL Inspector JSONL, planner verify result files: the readers of `calibrate::input`), compares each
//! collective and size with the expected model's band on the machine (`--topo`/`--fixture`/`--nodes` or the live
//! probe; what the files say about ranks, nodes and version overrides guesses, and a contradiction is named), and
//! names the likely causes from the log's lines and the topology (`evidence`, `machine`, `causes`).
//!
//! One call: `check(&CheckRequest) -> CheckReport`; `report::check` renders it (table, JSON, Prometheus).

pub mod causes;
pub mod evidence;
pub(crate) mod expectation;
pub(crate) mod machine;

use crate::calibrate::{self, InputFormat, Measurements, ReadOptions};
use crate::error::{Error, Result};
use crate::model::{Coll, Pair};
use crate::nccl_env::NcclEnv;
use crate::pipeline::Source;
pub use causes::{Cause, CauseKind, Evidence};
pub use evidence::LogEvidence;
pub use expectation::{BandSource, ExpectedBand};
pub use machine::MachineFacts;
use serde::Serialize;

/// The default `--tolerance`, %.
pub(crate) const DEFAULT_TOLERANCE_PCT: f64 = 15.0;

/// What to check, as the CLI parsed it.
#[derive(Debug, Clone)]
pub(crate) struct CheckRequest {
    pub(crate) files: Vec<String>,
    pub(crate) read: ReadOptions,
    /// Where the machine comes from; its `nodes` is a guess unless `nodes_given`.
    pub(crate) source: Source,
    /// `--nodes` was on the command line (else the files' node count is used).
    pub(crate) nodes_given: bool,
    /// A size is slow when its measured busbw is below the band's low edge by more than this, %.
    pub(crate) tolerance_pct: f64,
}

/// One size's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Inside the band (or below it by no more than the tolerance).
    Ok,
    /// Below the band's low edge by more than the tolerance.
    Slow,
    /// Above the band's high edge by more than the tolerance: faster than the machine should be (a timing
    /// artefact, a wrong byte count, or another machine than the one named).
    Suspicious,
    /// The expected model has no figure for it.
    NoExpectation,
}

impl Status {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Slow => "slow",
            Status::Suspicious => "faster than expected: suspicious",
            Status::NoExpectation => "no expectation",
        }
    }
}

/// One collective and size of one file: measured beside expected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeCheck {
    pub(crate) source: String,
    pub(crate) line: usize,
    #[serde(serialize_with = "calibrate::input::serialize_coll_name")]
    pub(crate) coll: Coll,
    /// `Ring/LL` when the run pinned it, else `auto` (NCCL's choice).
    pub(crate) pair: String,
    #[serde(rename = "size_bytes")]
    pub(crate) bytes: u64,
    /// Measured: the faster of the file's columns for this size (nccl-tests' out-of-place and in-place).
    pub(crate) measured_time_us: f64,
    pub(crate) measured_busbw_gbs: f64,
    pub(crate) expected: Option<ExpectedBand>,
    /// (measured busbw / expected busbw - 1) x 100.
    pub(crate) deviation_pct: Option<f64>,
    pub(crate) status: Status,
    /// nccl-tests' per-iteration statistics of the measured column (`-I 1`), where the file has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_iteration: Option<calibrate::input::IterStats>,
}

/// Something the files say that the machine named on the command line does not (or the reverse).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Contradiction {
    pub(crate) what: String,
    pub(crate) file_says: String,
    pub(crate) machine_says: String,
    pub(crate) source: String,
    pub(crate) line: Option<usize>,
}

/// What the files say about the run, merged over all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunFacts {
    pub(crate) ranks: Option<usize>,
    pub(crate) nodes: Option<usize>,
    pub(crate) nccl_version: Option<String>,
    pub(crate) hosts: Vec<String>,
    pub(crate) gpus: Vec<String>,
    /// nccl-tests' `nGpus` (its `-g`), and its `graph:` (`-G`), from the first file whose header gives them.
    pub(crate) gpus_per_thread: Option<usize>,
    pub(crate) cuda_graph: Option<bool>,
}

/// One input file as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CheckInput {
    pub(crate) source: String,
    /// `nccl-tests-text`, `nccl-tests-json`, `nccl-inspector`, `planner-verify`, `planner-doctor`, `nccl-log`.
    pub(crate) format: &'static str,
    pub(crate) rows: usize,
    pub(crate) notes: Vec<String>,
    /// The NCCL log lines found in it (0: none).
    pub(crate) nccl_log_lines: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every size inside its band.
    Healthy,
    /// Some size below its band by more than the tolerance.
    Slow,
    /// No size slow, some faster than the machine should be.
    Suspicious,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CheckReport {
    pub(crate) inputs: Vec<CheckInput>,
    pub(crate) run: RunFacts,
    pub(crate) machine: MachineFacts,
    /// Which model the bands come from.
    pub(crate) expectation: String,
    pub(crate) tolerance_pct: f64,
    pub(crate) sizes: Vec<SizeCheck>,
    pub(crate) verdict: Verdict,
    /// Likely causes first.
    pub(crate) causes: Vec<Cause>,
    pub(crate) contradictions: Vec<Contradiction>,
    pub(crate) notes: Vec<String>,
}

impl CheckReport {
    /// 0 every size in its band (or only suspicious ones), 1 some size slow.
    pub(crate) fn exit_code(&self) -> i32 {
        i32::from(self.verdict == Verdict::Slow)
    }
    pub(crate) fn slow(&self) -> impl Iterator<Item = &SizeCheck> {
        self.sizes.iter().filter(|s| s.status == Status::Slow)
    }
}

/// Read every file, build the machine, compare, find causes.
pub(crate) fn check(request: &CheckRequest) -> Result<CheckReport> {
    let tol = request.tolerance_pct;
    if !(tol.is_finite() && (0.0..100.0).contains(&tol)) {
        return Err(Error::bad_input(format!(
            "invalid --tolerance {tol}: expected a percentage from 0 to below 100"
        )));
    }
    if request.files.is_empty() {
        return Err(Error::bad_input("check needs at least one FILE"));
    }
    let read = read_files(request)?;
    let run = run_facts(&read);
    let mut notes = Vec::new();
    let mut contradictions = Vec::new();

    let (source, cluster) = check_machine(request, &read, &run, &mut contradictions)?;
    let n_ranks = cluster.n_ranks();
    if let Some(r) = run.ranks.filter(|r| *r != n_ranks) {
        contradictions.push(Contradiction {
            what: "ranks".into(),
            file_says: r.to_string(),
            machine_says: format!(
                "{n_ranks} ({} GPUs x {} nodes of {})",
                cluster.node.gpu_count(),
                cluster.n_nodes,
                cluster.node.source
            ),
            source: first_source(&read),
            line: read
                .iter()
                .find_map(|r| r.evidence.n_ranks.as_ref().map(|s| s.line)),
        });
    }
    let facts = MachineFacts::of_cluster(&cluster, &NcclEnv::default())?;
    contradictions.extend(nic_contradictions(&read, &facts));

    // NCCL's pick under the run's own NCCL_ALGO / NCCL_PROTO (a log line or the printed command line).
    let pins = run_pins(&read);
    if !pins.is_empty() {
        let list: Vec<String> = pins.iter().map(|(k, v)| format!("{k}={v}")).collect();
        notes.push(format!("expected with the run's {}", list.join(" ")));
    }
    // nccl-tests' header says how its calls were launched: under eager launch a thread driving N GPUs enqueues N
    // kernels per call, and a CUDA graph (-G 1) leaves the device's share only.
    let node_gpus = cluster.node.gpu_count().max(1);
    let launch_options = crate::expect::ExpectOptions {
        launch: if run.cuda_graph == Some(true) {
            crate::expect::Launch::Graph
        } else {
            crate::expect::Launch::Eager
        },
        net_kind: None,
        gpus_per_thread: run.gpus_per_thread.unwrap_or(1).min(node_gpus),
    };
    let expectation = expectation::for_machine(
        &cluster,
        run.nccl_version.as_deref(),
        &pins,
        &launch_options,
    )?;
    let mut sizes = Vec::new();
    for input in &read {
        sizes.extend(size_checks(
            &input.measurements,
            n_ranks,
            expectation.as_ref(),
            tol,
        )?);
    }
    if sizes.iter().all(|s| s.status == Status::NoExpectation) {
        notes.push("the expected model has no figure for any size of these files".into());
    }
    let verdict = if sizes.iter().any(|s| s.status == Status::Slow) {
        Verdict::Slow
    } else if sizes.iter().any(|s| s.status == Status::Suspicious) {
        Verdict::Suspicious
    } else {
        Verdict::Healthy
    };
    let evidence: Vec<(&str, &LogEvidence)> = read
        .iter()
        .map(|r| (r.measurements.source.as_str(), &r.evidence))
        .collect();
    let slow: Vec<&SizeCheck> = sizes.iter().filter(|s| s.status == Status::Slow).collect();
    let found = causes::find(&causes::CauseInput {
        evidence: &evidence,
        machine: &facts,
        cluster: &cluster,
        run: &run,
        source: &source,
        slow: &slow,
    })?;
    for r in &read {
        for n in &r.measurements.notes {
            notes.push(format!("{}: {n}", r.measurements.source));
        }
    }
    Ok(CheckReport {
        inputs: read
            .iter()
            .map(|r| CheckInput {
                source: r.measurements.source.clone(),
                format: r.format,
                rows: r.measurements.rows.len(),
                notes: r.measurements.notes.clone(),
                nccl_log_lines: r.evidence.nccl_lines,
            })
            .collect(),
        run,
        machine: facts,
        expectation: expectation.name(),
        tolerance_pct: tol,
        sizes,
        verdict,
        causes: found,
        contradictions,
        notes,
    })
}

/// Every file of the request; Err when none holds a measurement (only NCCL log lines).
fn read_files(request: &CheckRequest) -> Result<Vec<ReadInput>> {
    let mut read = Vec::new();
    for path in &request.files {
        read.push(read_input(path, &request.read)?);
    }
    if read.iter().all(|r| r.measurements.rows.is_empty()) {
        return Err(Error::bad_input(format!(
            "{}: no measurements in the file(s), only NCCL log lines; give the nccl-tests output (or Inspector / verify files) too",
            request.files.join(", ")
        )));
    }
    Ok(read)
}

/// The machine: the named topology (or the probe), with the files' node count unless --nodes was given (a
/// different count in the files is a contradiction). The source it was loaded from, and the cluster.
fn check_machine(
    request: &CheckRequest,
    read: &[ReadInput],
    run: &RunFacts,
    contradictions: &mut Vec<Contradiction>,
) -> Result<(Source, crate::topo::Cluster)> {
    let mut source = request.source.clone();
    source.nccl_env = NcclEnv::default();
    let probe_node = {
        let mut one = source.clone();
        one.nodes = 1;
        one.load_machine()?.ok_or_else(|| {
            Error::bad_input(
                "no GPU found here and no --topo/--fixture given: check compares with the machine the files were \
                 measured on; name it with --fixture NAME or --topo FILE (and --nodes N)",
            )
        })?
    };
    let gpus_per_node = probe_node.node.gpu_count().max(1);
    let file_nodes = run.nodes.or_else(|| {
        run.ranks
            .filter(|r| *r > gpus_per_node && r % gpus_per_node == 0)
            .map(|r| r / gpus_per_node)
    });
    if !request.nodes_given {
        if let Some(n) = file_nodes {
            source.nodes = n;
        }
    } else if let Some(n) = file_nodes.filter(|n| *n != source.nodes) {
        contradictions.push(Contradiction {
            what: "nodes".into(),
            file_says: n.to_string(),
            machine_says: format!("--nodes {}", source.nodes),
            source: first_source(read),
            line: read
                .iter()
                .find_map(|r| r.evidence.n_nodes.as_ref().map(|s| s.line)),
        });
    }
    let cluster = if source.nodes == 1 {
        probe_node
    } else {
        source.load()?
    };
    Ok((source, cluster))
}

/// The run's own NCCL_ALGO / NCCL_PROTO (a log line or the printed command line), as (name, value).
fn run_pins(read: &[ReadInput]) -> Vec<(String, String)> {
    ["NCCL_ALGO", "NCCL_PROTO"]
        .iter()
        .filter_map(|name| {
            read.iter()
                .find_map(|r| r.evidence.env_value(name))
                .map(|v| (name.to_string(), v.value.clone()))
        })
        .collect()
}

/// One file: its measurements and its log's evidence.
pub struct ReadInput {
    pub measurements: Measurements,
    pub evidence: LogEvidence,
    /// The reader it went through (see `CheckInput::format`).
    pub(crate) format: &'static str,
}

/// Read one file of any supported format; the log lines of text files and the `env` of `-J` JSON are evidence.
pub(crate) fn read_input(path: &str, options: &ReadOptions) -> Result<ReadInput> {
    let text = crate::units::read_input_file(path)?;
    read_input_text(&text, path, options)
}

/// `read_input` on text already read; `source` names it. A file of NCCL log lines alone (no nccl-tests output, no
/// JSON) is evidence without measurements (a job's log beside its nccl-tests output).
pub fn read_input_text(text: &str, source: &str, options: &ReadOptions) -> Result<ReadInput> {
    // Lines of the file are quoted back (versions, settings, evidence): nothing in them may drive the terminal.
    let text = crate::fsio::printable_lines(text);
    let text = strip_rank_labels(&text);
    let trimmed = text.trim_start();
    let mut evidence = if trimmed.starts_with('{') {
        LogEvidence::default()
    } else {
        evidence::scan(&text)
    };
    if !trimmed.starts_with('{') && evidence.nccl_lines > 0 && !looks_like_nccl_tests(&text) {
        return Ok(ReadInput {
            measurements: Measurements {
                source: source.to_string(),
                format: InputFormat::NcclTestsText,
                fnv1a64: String::new(),
                machine: Default::default(),
                rows: Vec::new(),
                notes: vec!["an NCCL log without measurements: read for its evidence".into()],
            },
            evidence,
            format: "nccl-log",
        });
    }
    if trimmed.starts_with('{') && is_doctor_file(&text) {
        return read_doctor(&text, source);
    }
    let measurements = calibrate::read_text(&text, source, options)?;
    if measurements.format == InputFormat::NcclTestsJson {
        json_env(&text, &mut evidence);
    }
    if evidence.nccl_version.is_none() {
        if let Some(v) = &measurements.machine.nccl_version {
            evidence.nccl_version = Some(evidence::Seen {
                value: v.clone(),
                line: 0,
            });
        }
    }
    let format = measurements.format.name();
    Ok(ReadInput {
        measurements,
        evidence,
        format,
    })
}

/// A `planner doctor` result file (`"format": "planner-doctor"`).
fn is_doctor_file(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("format")
                .and_then(|f| f.as_str())
                .map(|f| f == crate::doctor::DOCTOR_FORMAT)
        })
        .unwrap_or(false)
}

/// A doctor run's NCCL all-reduce sweep as measurements (NCCL's free choice; the median of its repeats), its
/// machine as the run saw it.
fn read_doctor(text: &str, source: &str) -> Result<ReadInput> {
    let run = crate::doctor::DoctorRun::from_json(text, source)?;
    let lines = calibrate::input::array_element_lines(text, "nccl");
    let mut rows = Vec::new();
    let mut skipped = 0;
    for (i, p) in run.nccl.iter().enumerate() {
        let median = crate::measure::median(&p.times_us).filter(|t| t.is_finite() && *t > 0.0);
        match (p.status.as_str(), median) {
            ("ok", Some(t)) => rows.push(calibrate::Measurement {
                backend: crate::measure::Backend::Nccl,
                coll: Coll::AllReduce,
                pair: None,
                nccl_choice: p.nccl_choice.as_deref().and_then(|c| Pair::parse(c).ok()),
                bytes: p.bytes,
                time_us: t,
                repeats: Some(p.times_us.len() as u32),
                spread_pct: None,
                stock_us: None,
                in_place: None,
                per_iteration: None,
                source: source.to_string(),
                line: lines.get(i).copied().unwrap_or(0),
            }),
            _ => skipped += 1,
        }
    }
    let mut notes = Vec::new();
    if skipped > 0 {
        notes.push(format!(
            "{skipped} NCCL size(s) of the doctor run not ok, left out"
        ));
    }
    notes.push("link tests of a doctor run: see `planner doctor --load`".into());
    let m = &run.machine;
    let mut evidence = LogEvidence::default();
    if let Some(v) = &m.nccl_version {
        evidence.nccl_version = Some(evidence::Seen {
            value: v.clone(),
            line: 0,
        });
    }
    if m.nccl_ranks > 0 {
        evidence.n_ranks = Some(evidence::Seen {
            value: m.nccl_ranks,
            line: 0,
        });
    }
    Ok(ReadInput {
        measurements: Measurements {
            source: source.to_string(),
            format: InputFormat::PlannerVerify,
            fnv1a64: String::new(),
            machine: calibrate::input::MachineInfo {
                hosts: m.hosts.clone(),
                nccl_version: m.nccl_version.clone(),
                gpu_count: (m.nccl_ranks > 0).then_some(m.nccl_ranks),
                ..Default::default()
            },
            rows,
            notes,
        },
        evidence,
        format: "planner-doctor",
    })
}

/// nccl-tests output: its header, its column line or its `#  Rank` lines.
fn looks_like_nccl_tests(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim();
        t.starts_with("# nccl-tests version")
            || t.starts_with("# Collective test starting")
            || t.starts_with("# nThread")
            || (t.starts_with('#') && (t.contains("out-of-place") || t.contains(" redop ")))
    })
}

/// `srun --label` prefixes every line with the task number (` 0: # nThread ...`): removed where a line starts with
/// it, so the readers see nccl-tests' own layout (line numbers unchanged).
fn strip_rank_labels(text: &str) -> std::borrow::Cow<'_, str> {
    fn label_len(line: &str) -> Option<usize> {
        let start = line.len() - line.trim_start().len();
        let rest = &line[start..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        (digits > 0 && digits <= 6 && rest[digits..].starts_with(": "))
            .then_some(start + digits + 2)
    }
    let labelled = text.lines().filter_map(label_len).count();
    if labelled == 0 || labelled * 2 < text.lines().filter(|l| !l.trim().is_empty()).count() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match label_len(line) {
            Some(n) => out.push_str(&line[n..]),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    std::borrow::Cow::Owned(out)
}

/// nccl-tests `-J`: `"env": ["NCCL_P2P_DISABLE=1", ...]` (the process environment, `util.cu` `jsonOutputInit`).
fn json_env(text: &str, ev: &mut LogEvidence) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let lines = calibrate::input::array_element_lines(text, "env");
    for (i, item) in value
        .get("env")
        .and_then(|e| e.as_array())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some((k, v)) = item.as_str().and_then(|s| s.split_once('=')) {
            if k.starts_with("NCCL_") {
                ev.env.push((
                    k.to_string(),
                    evidence::Seen {
                        value: v.to_string(),
                        line: lines.get(i).copied().unwrap_or(0),
                    },
                ));
            }
        }
    }
}

fn first_source(read: &[ReadInput]) -> String {
    read.first()
        .map(|r| r.measurements.source.clone())
        .unwrap_or_default()
}

/// Ranks, nodes, version, hosts over all files (the first file that says wins; later ones that differ are noted by
/// the caller through contradictions of the machine).
fn run_facts(read: &[ReadInput]) -> RunFacts {
    let mut run = RunFacts::default();
    for r in read {
        let m = &r.measurements.machine;
        let ev = &r.evidence;
        run.ranks = run
            .ranks
            .or(ev.n_ranks.as_ref().map(|s| s.value))
            // nccl-tests text without `#  Rank` lines counts only one process's GPUs.
            .or(m.gpu_count.filter(|_| {
                r.measurements.format != InputFormat::NcclTestsText || !m.gpus.is_empty()
            }));
        run.nodes = run
            .nodes
            .or(ev.n_nodes.as_ref().map(|s| s.value))
            .or((m.hosts.len() > 1).then_some(m.hosts.len()));
        run.nccl_version = run
            .nccl_version
            .clone()
            .or(ev.nccl_version.as_ref().map(|v| v.value.clone()))
            .or(m.nccl_version.clone());
        for h in &m.hosts {
            if !run.hosts.contains(h) {
                run.hosts.push(h.clone());
            }
        }
        if run.gpus.is_empty() {
            run.gpus = m.gpus.clone();
        }
        run.gpus_per_thread = run
            .gpus_per_thread
            .or(ev.gpus_per_thread.as_ref().map(|s| s.value));
        run.cuda_graph = run.cuda_graph.or(ev.cuda_graph.as_ref().map(|s| s.value));
    }
    run
}

/// The NICs the log's network plugin listed against the topology's.
fn nic_contradictions(read: &[ReadInput], facts: &MachineFacts) -> Vec<Contradiction> {
    let mut out = Vec::new();
    for r in read {
        for (plugin, seen) in &r.evidence.nics_listed {
            if plugin == "Socket" || facts.nics.is_empty() {
                continue;
            }
            if seen.value.len() != facts.nics.len() {
                out.push(Contradiction {
                    what: format!("NICs of one node (NET/{plugin})"),
                    file_says: format!("{} ({})", seen.value.len(), seen.value.join(" ")),
                    machine_says: format!(
                        "{} ({})",
                        facts.nics.len(),
                        facts
                            .nics
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                    source: r.measurements.source.clone(),
                    line: Some(seen.line),
                });
            }
        }
    }
    out
}

/// The measured rows of one file, one per (collective, pair, size): the faster column, beside the expectation.
fn size_checks(
    m: &Measurements,
    n_ranks: usize,
    expectation: &dyn BandSource,
    tolerance_pct: f64,
) -> Result<Vec<SizeCheck>> {
    use std::collections::BTreeMap;
    type Best = (f64, usize, Option<calibrate::input::IterStats>);
    let mut best: BTreeMap<(Coll, Option<Pair>, u64), Best> = BTreeMap::new();
    for row in m
        .rows
        .iter()
        .filter(|r| r.backend == crate::measure::Backend::Nccl)
    {
        let key = (row.coll, row.pair, row.bytes);
        let e = best
            .entry(key)
            .or_insert((row.time_us, row.line, row.per_iteration.clone()));
        if row.time_us < e.0 {
            *e = (row.time_us, row.line, row.per_iteration.clone());
        }
    }
    let mut out = Vec::new();
    for ((coll, pair, bytes), (time_us, line, per_iteration)) in best {
        if bytes == 0 {
            continue;
        }
        let busbw = bytes as f64 / (time_us * 1e3) * coll.nccl_tests_bus_factor(n_ranks);
        let expected = expectation.expected(coll, bytes, pair)?;
        let (status, deviation) = match &expected {
            Some(e) if e.busbw_gbs > 0.0 => {
                let dev = (busbw / e.busbw_gbs - 1.0) * 100.0;
                let tol = tolerance_pct / 100.0;
                let status = if busbw < e.low_busbw_gbs * (1.0 - tol) {
                    Status::Slow
                } else if busbw > e.high_busbw_gbs * (1.0 + tol) {
                    Status::Suspicious
                } else {
                    Status::Ok
                };
                (status, Some(dev))
            }
            _ => (Status::NoExpectation, None),
        };
        out.push(SizeCheck {
            source: m.source.clone(),
            line,
            coll,
            pair: pair.map_or_else(|| "auto".to_string(), |p| p.to_string()),
            bytes,
            measured_time_us: time_us,
            measured_busbw_gbs: busbw,
            expected,
            deviation_pct: deviation,
            status,
            per_iteration,
        });
    }
    Ok(out)
}
