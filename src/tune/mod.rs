//! `planner tune`: a plan for the NCCL tuner plugin (`tuner/`, `nccl_tuner_planner::plan`), made from measurements
//! or from a calibration, so that NCCL runs the pair that is fastest on this machine.
//!
//! * [`measured`]: a verify result file's NCCL rows -> one pick per measured size (the measured best, where it
//!   beats NCCL's own choice by more than the margin and its repeats do not overlap NCCL's).
//! * [`calibrated`]: a calibration -> one pick per size of a fine log2 grid (the calibrated best, where its
//!   calibrated time beats the stock NCCL model's pick by more than the margin).
//! * [`expected`]: no measurement: planner's expected model of the topology -> one pick per size of the same grid
//!   (the expected fastest pair NCCL can run, where it beats NCCL's own pick by more than the margin).
//! * [`bands`]: picks -> size bands with log2-midpoint edges, covering 0 ..= u64::MAX.
//! * [`make`]: the one call `planner tune` makes: file in, validated [`Plan`] plus every decision out.
//! * [`render`]: the decision and band tables, and their JSON.
//!
//! The default margin, 5 %, comes from the committed 2x H200 runs: with it the three NCCL runs of
//! `bench/results/verify-h200x2-*` give the same plan; at 3 % the large sizes flip between Ring/Simple and
//! Tree/Simple from run to run (Tree/Simple is 1.5-4.4 % faster there; run-to-run noise above 1 MiB is up to
//! 5.9 %, `bench/results/calibration-cv-2026-12-01/README.md`).

pub(crate) mod bands;
pub(crate) mod calibrated;
pub(crate) mod expected;
pub(crate) mod measured;
pub(crate) mod render;

use crate::calibrate::{self, Calibration};
use crate::error::{Error, Result};
use crate::model::{Algo, Coll, Pair, Proto};
use crate::pipeline::Source;
use crate::predict::{ModelPredictor, Predictor};
use crate::result_file::VerifyRun;
use crate::verify::score;
use serde::Serialize;

pub use nccl_tuner_planner::plan::{
    fnv1a64_hex, parse_nccl_version, Plan, PlanError, Provenance, Rule, SourceKind,
};

/// `--margin` when not given, percent.
pub(crate) const DEFAULT_MARGIN_PERCENT: f64 = 5.0;

/// Why a size got its pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Reason {
    /// Another pair beat NCCL's choice by more than the margin (measured: with repeats apart).
    Faster,
    /// NCCL's choice is the fastest pair.
    NcclIsBest,
    /// Another pair is faster, but by no more than the margin.
    WithinMargin,
    /// Another pair's median is faster by more than the margin, but its repeats overlap NCCL's.
    RepeatsOverlap,
    /// NCCL's choice is known but has no time (not measured / not calibrated): kept.
    NcclChoiceUnmeasured,
    /// NCCL's choice is not known (no auto row and no stock model): the fastest pair is taken as it is.
    NcclChoiceUnknown,
}

impl Reason {
    pub fn describe(self) -> &'static str {
        match self {
            Reason::Faster => "faster beyond the margin",
            Reason::NcclIsBest => "NCCL's choice is the fastest",
            Reason::WithinMargin => "within the margin: NCCL's kept",
            Reason::RepeatsOverlap => "repeats overlap: NCCL's kept",
            Reason::NcclChoiceUnmeasured => "NCCL's choice has no time: kept",
            Reason::NcclChoiceUnknown => "NCCL's choice unknown: fastest taken",
        }
    }
}

/// The pick at one size, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Decision {
    #[serde(rename = "collective")]
    pub(crate) coll: Coll,
    pub(crate) bytes: u64,
    /// NCCL's own choice, and where it is known from ("auto row", "stock model").
    pub(crate) nccl: Option<Pair>,
    pub(crate) nccl_from: Option<&'static str>,
    /// NCCL's choice's time (measured, or calibrated), µs.
    pub(crate) nccl_us: Option<f64>,
    /// The fastest pair and its time (measured median, or calibrated), µs.
    pub(crate) best: Option<Pair>,
    pub(crate) best_us: Option<f64>,
    /// (nccl_us - best_us) / nccl_us x 100.
    pub(crate) gain_percent: Option<f64>,
    /// What the plan runs at this size.
    pub(crate) pick: Pair,
    pub(crate) reason: Reason,
    /// The pick's measured median (verify input), µs.
    pub(crate) measured_us: Option<f64>,
    /// The pick's time by the stock model (verify input) or the calibrated model (calibration input), µs.
    pub(crate) predicted_us: Option<f64>,
}

/// What a plan is made from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TuneInput {
    /// A `planner verify` result file.
    Verify(String),
    /// A calibration file.
    Calibration(String),
}

impl TuneInput {
    /// The file the plan is made from.
    pub(crate) fn path(&self) -> &str {
        match self {
            TuneInput::Verify(path) | TuneInput::Calibration(path) => path,
        }
    }
}

/// Everything `planner tune` needs to make a plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TuneRequest {
    pub(crate) input: TuneInput,
    pub(crate) margin_percent: f64,
    /// Ranks of the communicator, for input that does not say (a calibration from nccl-tests text).
    pub(crate) ranks: Option<u32>,
    /// Calibration input: the topology for the stock NCCL model, when given with `--topo`/`--fixture` (otherwise
    /// the calibration's verify source files, where they are still in place).
    pub(crate) topology: Option<Source>,
}

/// A plan and how it came about.
#[derive(Debug, Clone, Serialize)]
pub struct Tuned {
    pub(crate) plan: Plan,
    pub(crate) decisions: Vec<Decision>,
    /// Where NCCL's choices came from where the data does not say ("stock model (...)"), if anywhere.
    pub(crate) stock_model: Option<String>,
    /// Remarks for stderr (unused rows, missing topology, ...).
    pub(crate) notes: Vec<String>,
}

/// Reads the input, decides per size, merges into bands and returns a validated plan.
pub(crate) fn make(request: &TuneRequest) -> Result<Tuned> {
    let margin = request.margin_percent;
    if !(margin.is_finite() && (0.0..=100.0).contains(&margin)) {
        return Err(Error::bad_input(format!(
            "invalid --margin {margin}: give a percentage from 0 to 100"
        )));
    }
    match &request.input {
        TuneInput::Verify(path) => from_verify(path, request),
        TuneInput::Calibration(path) => from_calibration(path, request),
    }
}

/// Reads and validates a plan file; anything wrong is bad input naming the file.
/// Its free-text provenance is made printable (`fsio::printable`): `--show` echoes it on the terminal, where a
/// newline would forge a line and an escape sequence would drive the terminal.
pub(crate) fn load_plan(path: &str) -> Result<Plan> {
    let text = crate::units::read_input_file(path)?;
    let mut plan = Plan::from_json(&text)
        .map_err(|e| Error::bad_input(format!("{path}: invalid plan: {e}")))?;
    let p = &mut plan.provenance;
    for text in [
        &mut p.planner_version,
        &mut p.machine,
        &mut p.source_file,
        &mut p.source_hash,
    ] {
        *text = crate::fsio::printable(text);
    }
    for text in [&mut p.nccl_version, &mut p.topology_hash]
        .into_iter()
        .flatten()
    {
        *text = crate::fsio::printable(text);
    }
    Ok(plan)
}

/// A named input file, capped at `limits::MAX_INPUT_FILE_BYTES` like every other.
fn read_bytes(path: &str) -> Result<Vec<u8>> {
    crate::units::read_input_bytes(path)
}

fn utf8(bytes: Vec<u8>, path: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        Error::bad_input(format!(
            "{path}: not a text file (invalid UTF-8 at byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn from_verify(path: &str, request: &TuneRequest) -> Result<Tuned> {
    let bytes = read_bytes(path)?;
    let source_hash = fnv1a64_hex(&bytes);
    let run = VerifyRun::from_json(&utf8(bytes, path)?, path)?;
    let coll = run.options.collective;
    let m = &run.machine;
    let data_ranks = match (m.world_size, m.gpus.len()) {
        (0, 0) => None,
        (0, gpus) => Some(gpus),
        (world, _) => Some(world),
    };
    let shape = shape(path, data_ranks, m.nodes.max(1), request.ranks)?;
    let mut notes = Vec::new();
    let stock = score::predictor_for_run(&run);
    let stock_label = stock.label();
    let (decisions, row_notes) =
        measured::decide(coll, &run.rows, stock.as_ref(), request.margin_percent);
    notes.extend(row_notes);
    if decisions.is_empty() {
        return Err(Error::bad_input(format!(
            "{path}: no usable NCCL rows (planner tune needs a result of `planner verify --backend nccl` or `both`)"
        )));
    }
    let topology_xml = m.topology_xml.as_deref().or(m.nccl_topology_xml.as_deref());
    let topology_hash = topology_xml.and_then(|xml| calibrate::topology_hash(xml, path).ok());
    let provenance = Provenance {
        planner_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: created_unix(),
        machine: machine_text(
            &m.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>(),
            &m.hosts,
        ),
        nccl_version: checked_nccl_version(m.nccl_version.as_deref(), &mut notes),
        topology_hash,
        source_kind: SourceKind::Verify,
        source_file: path.to_string(),
        source_hash,
        margin_percent: request.margin_percent,
    };
    let plan = plan_of(provenance, shape, &decisions)?;
    Ok(Tuned {
        plan,
        decisions,
        stock_model: Some(stock_label),
        notes,
    })
}

fn from_calibration(path: &str, request: &TuneRequest) -> Result<Tuned> {
    let bytes = read_bytes(path)?;
    let source_hash = fnv1a64_hex(&bytes);
    let cal = Calibration::from_json(&utf8(bytes, path)?, path)?;
    let m = &cal.machine;
    let mut hosts = m.hosts.clone();
    hosts.sort();
    hosts.dedup();
    let shape = shape(path, m.gpu_count, hosts.len().max(1), request.ranks)?;
    let mut notes = Vec::new();
    let stock = stock_for_calibration(&cal, request.topology.as_ref(), shape, &mut notes)?;
    let colls = calibrated::collectives(&cal);
    if colls.is_empty() {
        return Err(Error::bad_input(format!(
            "{path}: the calibration has no fitted pairs"
        )));
    }
    let mut decisions = Vec::new();
    for coll in colls {
        let sizes = calibrated::grid_for(&cal, coll);
        let stock_ref = stock.as_ref().map(|s| s as &dyn Predictor);
        decisions.extend(calibrated::decide(
            &cal,
            coll,
            &sizes,
            stock_ref,
            request.margin_percent,
        ));
    }
    if decisions.is_empty() {
        return Err(Error::bad_input(format!(
            "{path}: the calibration's pairs cover no sizes"
        )));
    }
    let provenance = Provenance {
        planner_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: created_unix(),
        machine: machine_text(&m.gpus, &m.hosts),
        nccl_version: checked_nccl_version(m.nccl_version.as_deref(), &mut notes),
        topology_hash: m
            .topology_hash
            .clone()
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit())),
        source_kind: SourceKind::Calibration,
        source_file: path.to_string(),
        source_hash,
        margin_percent: request.margin_percent,
    };
    let plan = plan_of(provenance, shape, &decisions)?;
    Ok(Tuned {
        plan,
        decisions,
        stock_model: stock.map(|s| s.label()),
        notes,
    })
}

/// The communicator shape the plan's rules name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) n_ranks: u32,
    pub(crate) n_nodes: u32,
}

fn shape(
    path: &str,
    data_ranks: Option<usize>,
    nodes: usize,
    flag_ranks: Option<u32>,
) -> Result<Shape> {
    let n_ranks = match (data_ranks, flag_ranks) {
        (Some(data), Some(flag)) if data != flag as usize => {
            return Err(Error::bad_input(format!(
                "--ranks {flag} disagrees with {path}, which was measured on {data} ranks"
            )))
        }
        (Some(data), _) => data,
        (None, Some(flag)) => flag as usize,
        (None, None) => {
            return Err(Error::bad_input(format!(
                "{path} does not say how many ranks it was measured on: give --ranks N"
            )))
        }
    };
    let n_ranks = u32::try_from(n_ranks)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{path}: {n_ranks} ranks is not a communicator size"
            ))
        })?;
    let n_nodes = u32::try_from(nodes)
        .ok()
        .filter(|n| *n <= n_ranks)
        .ok_or_else(|| Error::bad_input(format!("{path}: {nodes} nodes for {n_ranks} ranks")))?;
    Ok(Shape { n_ranks, n_nodes })
}

/// The stock NCCL model on the calibration's topology: `--topo`/`--fixture` when given, else the first verify
/// source of the calibration that is still in place and unchanged. None (with a note) when there is none.
fn stock_for_calibration(
    cal: &Calibration,
    explicit: Option<&Source>,
    shape: Shape,
    notes: &mut Vec<String>,
) -> Result<Option<ModelPredictor>> {
    let nccl_version = cal.machine.nccl_version.as_deref();
    let built = match explicit {
        Some(source) => Some(stock_from_source(cal, source, nccl_version, notes)?),
        None => stock_from_sources(cal, nccl_version, notes),
    };
    Ok(match built {
        Some((predictor, n_ranks)) if n_ranks == shape.n_ranks as usize => Some(predictor),
        Some((_, n_ranks)) => {
            notes.push(format!(
                "the topology for the stock NCCL model has {n_ranks} ranks, the calibration {}; the plan takes \
                 the calibrated pick at every size, without the margin rule",
                shape.n_ranks
            ));
            None
        }
        None => {
            notes.push(
                "no topology for the stock NCCL model (give --topo or --fixture, or keep the calibration's verify \
                 files in place): the plan takes the calibrated pick at every size, without the margin rule"
                    .to_string(),
            );
            None
        }
    })
}

/// The stock model on a topology the user named: a topology that cannot be read or searched is bad input, as in
/// every other command.
fn stock_from_source(
    cal: &Calibration,
    source: &Source,
    nccl_version: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(ModelPredictor, usize)> {
    let cluster = source.load()?;
    let (xml, what) = match (&source.topo, &source.fixture) {
        (Some(path), _) => (Some(crate::units::read_input_file(path)?), path.clone()),
        (None, Some(name)) => (
            crate::topo::fixtures::find(name).map(|f| f.xml.to_string()),
            format!("fixture {name}"),
        ),
        (None, None) => (None, String::new()),
    };
    if let (Some(xml), Some(expected)) = (&xml, &cal.machine.topology_hash) {
        let hash = calibrate::topology_hash(xml, &what)?;
        if &hash != expected {
            notes.push(format!(
                "{what} (topology {hash}) is not the topology the calibration was measured on ({expected})"
            ));
        }
    }
    Ok((
        ModelPredictor::new(&cluster, None, nccl_version)?,
        cluster.n_ranks(),
    ))
}

fn stock_from_sources(
    cal: &Calibration,
    nccl_version: Option<&str>,
    notes: &mut Vec<String>,
) -> Option<(ModelPredictor, usize)> {
    for source in cal.sources.iter().filter(|s| s.format == "planner-verify") {
        let Ok(bytes) = crate::units::read_input_bytes(&source.path) else {
            continue;
        };
        if fnv1a64_hex(&bytes) != source.fnv1a64 {
            notes.push(format!(
                "{} changed since the calibration was made; not used for the stock NCCL model",
                source.path
            ));
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let built = VerifyRun::from_json(&text, &source.path).and_then(|run| {
            let cluster = score::cluster_of_run(&run)?;
            let predictor = ModelPredictor::new(
                &cluster,
                run.machine.nccl_graph_xml.as_deref(),
                nccl_version.or(run.machine.nccl_version.as_deref()),
            )?;
            Ok((predictor, cluster.n_ranks()))
        });
        match built {
            Ok(b) => return Some(b),
            Err(e) => notes.push(format!(
                "cannot build the stock NCCL model from {}: {e}",
                source.path
            )),
        }
    }
    None
}

/// The plan: per collective (in NCCL's order), the bands of its decisions, for exactly `shape`.
fn plan_of(provenance: Provenance, shape: Shape, decisions: &[Decision]) -> Result<Plan> {
    let mut rules = Vec::new();
    for coll in Coll::ALL {
        let picks: Vec<bands::SizePick> = decisions
            .iter()
            .filter(|d| d.coll == coll)
            .map(|d| bands::SizePick {
                bytes: d.bytes,
                pair: d.pick,
                measured_us: d.measured_us,
                predicted_us: d.predicted_us,
            })
            .collect();
        for band in bands::merge(&picks) {
            let algorithm = band.pair.algo.nccl().map(plan_algo).ok_or_else(|| {
                Error::bad_input(format!(
                    "the pick at {}..{} bytes is {}, which NCCL cannot run: make the plan from NCCL measurements",
                    band.min_bytes, band.max_bytes, band.pair
                ))
            })?;
            rules.push(Rule {
                collective: plan_coll(coll),
                n_ranks: Some(shape.n_ranks),
                n_nodes: Some(shape.n_nodes),
                min_bytes: band.min_bytes,
                max_bytes: band.max_bytes,
                algorithm,
                protocol: plan_proto(band.pair.proto),
                channels: None,
                predicted_us: band.predicted_us.filter(|t| t.is_finite() && *t >= 0.0),
                measured_us: band.measured_us.filter(|t| t.is_finite() && *t >= 0.0),
            });
        }
    }
    let plan = Plan::new(provenance, rules);
    plan.validate().map_err(|e| {
        Error::runtime(format!(
            "planner made an invalid plan ({e}); please report this"
        ))
    })?;
    Ok(plan)
}

/// `SOURCE_DATE_EPOCH` when set (reproducible files), else now.
fn created_unix() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        })
}

/// "2x NVIDIA H200 on vm", "1x NVIDIA A100, 1x NVIDIA H100 on a, b", "unknown GPUs".
fn machine_text(gpus: &[String], hosts: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for name in gpus {
        match counts.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c += 1,
            None => counts.push((name.clone(), 1)),
        }
    }
    let mut text = if counts.is_empty() {
        "unknown GPUs".to_string()
    } else {
        counts
            .iter()
            .map(|(n, c)| format!("{c}x {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut hosts = hosts.to_vec();
    hosts.dedup();
    if !hosts.is_empty() {
        text.push_str(" on ");
        text.push_str(&hosts.join(", "));
    }
    text
}

/// The NCCL version as the plan accepts it ("2.28.3", "2.28.3+cuda12.9"); anything else is dropped, with a note.
fn checked_nccl_version(version: Option<&str>, notes: &mut Vec<String>) -> Option<String> {
    let version = version?.trim();
    if parse_nccl_version(version).is_some() {
        Some(version.to_string())
    } else {
        notes.push(format!(
            "NCCL version {version:?} is not of the form 2.28.3; the plan records none"
        ));
        None
    }
}

/// The model's collective as the plan names it.
pub(crate) fn plan_coll(coll: Coll) -> nccl_tuner_planner::Coll {
    use nccl_tuner_planner::Coll as P;
    match coll {
        Coll::Broadcast => P::Broadcast,
        Coll::Reduce => P::Reduce,
        Coll::AllGather => P::AllGather,
        Coll::ReduceScatter => P::ReduceScatter,
        Coll::AllReduce => P::AllReduce,
    }
}

/// The model's algorithm as the plan names it (NCCL's menu only: planner's own algorithms, which NCCL cannot
/// run, never reach a plan).
pub(crate) fn plan_algo(algo: Algo) -> nccl_tuner_planner::Algo {
    use nccl_tuner_planner::Algo as P;
    match algo {
        Algo::Tree => P::Tree,
        Algo::Ring => P::Ring,
        Algo::CollNetDirect => P::CollNetDirect,
        Algo::CollNetChain => P::CollNetChain,
        Algo::Nvls => P::Nvls,
        Algo::NvlsTree => P::NvlsTree,
        Algo::Pat => P::Pat,
    }
}

/// The model's protocol as the plan names it.
pub(crate) fn plan_proto(proto: Proto) -> nccl_tuner_planner::Proto {
    use nccl_tuner_planner::Proto as P;
    match proto {
        Proto::Ll => P::Ll,
        Proto::Ll128 => P::Ll128,
        Proto::Simple => P::Simple,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_agree_between_the_model_and_the_plan() {
        for coll in Coll::ALL {
            assert_eq!(plan_coll(coll).nccl_name(), coll.nccl_name());
            assert_eq!(plan_coll(coll) as usize, coll as usize, "ncclFunc_t index");
        }
        for algo in Algo::ALL {
            let planned = plan_algo(algo);
            assert_eq!(planned.nccl_name(), algo.nccl_name());
            assert_eq!(planned as usize, algo as usize);
        }
        for proto in Proto::ALL {
            assert_eq!(plan_proto(proto).nccl_name(), proto.nccl_name());
            assert_eq!(plan_proto(proto) as usize, proto as usize);
        }
    }

    #[test]
    fn machine_text_counts_gpus_by_name() {
        let h200 = "NVIDIA H200".to_string();
        assert_eq!(
            machine_text(&[h200.clone(), h200], &["vm".into()]),
            "2x NVIDIA H200 on vm"
        );
        assert_eq!(
            machine_text(&["A".into(), "B".into(), "A".into()], &[]),
            "2x A, 1x B"
        );
        assert_eq!(machine_text(&[], &[]), "unknown GPUs");
    }

    #[test]
    fn shapes_come_from_the_data_or_the_flag() {
        assert_eq!(
            shape("f", Some(2), 1, None),
            Ok(Shape {
                n_ranks: 2,
                n_nodes: 1
            })
        );
        assert_eq!(
            shape("f", None, 1, Some(8)),
            Ok(Shape {
                n_ranks: 8,
                n_nodes: 1
            })
        );
        let e = shape("f", Some(2), 1, Some(4)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--ranks 4 disagrees with f, which was measured on 2 ranks"
        );
        assert!(shape("f", None, 1, None).is_err());
        assert!(
            shape("f", Some(2), 3, None).is_err(),
            "more nodes than ranks"
        );
    }

    #[test]
    fn versions_the_plan_cannot_hold_are_dropped_with_a_note() {
        let mut notes = Vec::new();
        assert_eq!(
            checked_nccl_version(Some("2.28.3"), &mut notes),
            Some("2.28.3".to_string())
        );
        assert_eq!(checked_nccl_version(Some("2.28"), &mut notes), None);
        assert_eq!(notes.len(), 1);
    }
}
