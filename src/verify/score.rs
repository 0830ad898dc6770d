//! Scoring a verify run: predicted against measured for every row, the
//! model's pick against the measured best at every size, and the summaries.
//!
//! Definitions (all per backend):
//! - error % = (predicted - measured) / measured x 100, measured = median.
//! - measured best at a size = the pinned pair with the lowest median, of the rows without wrong elements.
//! - the model's pick = the model's argmin at that size (over every pair the
//!   model enables, not only the measured ones).
//! - regret = measured(model's pick) / measured(best), >= 1; undefined when
//!   the pick was not measured (then the size counts as a miss).
//! - hit rate = sizes where the pick is the measured best / sizes with a best.
//! - native/NCCL ratio = native median / NCCL median of the same pair and
//!   size (below 1: ours is faster).

use super::Regime;
use crate::dtype::Dtype;
use crate::measure::median;
use crate::measure::Backend;
use crate::measure::{algbw_gbs, coll_label_serde, NcclChoice, Row, RowStatus};
use crate::model::Coll;
use crate::model::Pair;
use crate::predict::{predict_row, ModelPredictor, Predictor, SymmetricPrediction};
use crate::result_file::VerifyRun;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The predictions a result file recorded at measurement time. Its pick is
/// the argmin over the recorded pairs only (the file does not know the pairs
/// that were not measured). Indexed once (`Recorded::new`, linear in the rows), so
/// scoring asks it per row and per size without scanning every row each time.
pub struct Recorded<'a> {
    pub run: &'a VerifyRun,
    /// The first recorded prediction of each (pair, size).
    predicted: HashMap<(Pair, u64), f64>,
    /// The pair with the lowest recorded prediction at each size (the first on a tie).
    picks: HashMap<u64, (f64, Pair)>,
    /// The first symmetric-kernel row at each size.
    symmetric: HashMap<u64, &'a Row>,
}

impl<'a> Recorded<'a> {
    pub fn new(run: &'a VerifyRun) -> Recorded<'a> {
        let mut predicted = HashMap::new();
        let mut picks: HashMap<u64, (f64, Pair)> = HashMap::new();
        let mut symmetric = HashMap::new();
        for row in &run.rows {
            if row.backend == Backend::NcclSymm {
                symmetric.entry(row.bytes).or_insert(row);
            }
            if let (Some(pair), Some(t)) = (row.pair, row.predicted_us) {
                predicted.entry((pair, row.bytes)).or_insert(t);
                let best = picks.entry(row.bytes).or_insert((t, pair));
                if t < best.0 {
                    *best = (t, pair);
                }
            }
        }
        Recorded {
            run,
            predicted,
            picks,
            symmetric,
        }
    }
}

impl Predictor for Recorded<'_> {
    fn label(&self) -> String {
        match &self.run.options.model {
            Some(m) => format!("{m} (as recorded in the file)"),
            None => "predictions recorded in the file".into(),
        }
    }
    fn predict_us(&self, _: Coll, pair: Pair, bytes: u64) -> Option<f64> {
        self.predicted.get(&(pair, bytes)).copied()
    }
    fn pick(&self, _: Coll, bytes: u64) -> Option<Pair> {
        self.picks.get(&bytes).map(|&(_, p)| p)
    }
    fn predict_symmetric(&self, _: Coll, _: Dtype, bytes: u64) -> Option<SymmetricPrediction> {
        let row = self.symmetric.get(&bytes)?;
        Some(SymmetricPrediction {
            kernel: row
                .predicted_kernel
                .clone()
                .unwrap_or_else(|| "recorded".into()),
            time_us: row.predicted_us?,
        })
    }
    fn symmetric_label(&self) -> Option<String> {
        Some("the symmetric-kernel predictions recorded in the file".into())
    }
}

/// One row with everything derived from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredRow {
    #[serde(flatten)]
    pub row: Row,
    /// "Ring/LL", or "auto" for NCCL's free choice.
    pub(crate) label: String,
    pub algbw_gbs: Option<f64>,
    pub busbw_gbs: Option<f64>,
    /// Re-scored prediction (the current model), µs.
    pub predicted_us: Option<f64>,
    pub error_pct: Option<f64>,
    /// The model's pick at this size.
    pub model_pick: bool,
    /// Lowest measured median of its backend at this size.
    pub measured_best: bool,
    /// NCCL's free choice ran this pair at this size.
    pub nccl_pick: bool,
    /// The `symm` row: the kernel the current model says NCCL picks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model_kernel: Option<String>,
}

/// The verdict at one size of one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeVerdict {
    pub backend: Backend,
    pub bytes: u64,
    pub(crate) measured_best: Option<Pair>,
    pub(crate) best_us: Option<f64>,
    pub(crate) model_pick: Option<Pair>,
    /// measured(model pick) / measured(best).
    pub(crate) regret: Option<f64>,
    pub(crate) hit: bool,
    /// NCCL's free choice at this size and its regret (NCCL backend only).
    pub nccl_choice: Option<NcclChoice>,
    pub(crate) nccl_regret: Option<f64>,
}

/// |error| statistics of one regime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegimeError {
    pub regime: Regime,
    pub(crate) label: &'static str,
    /// Rows with both a prediction and a measurement.
    pub rows: usize,
    pub median_abs_error_pct: Option<f64>,
    pub worst_abs_error_pct: Option<f64>,
    /// Where the worst one is.
    pub worst_pair: Option<Pair>,
    pub worst_bytes: Option<u64>,
}

/// The summary of one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendSummary {
    pub backend: Backend,
    pub regimes: Vec<RegimeError>,
    pub sizes_with_best: usize,
    pub hits: usize,
    pub hit_rate: Option<f64>,
    pub worst_regret: Option<f64>,
    pub worst_regret_bytes: Option<u64>,
    pub worst_regret_pick: Option<Pair>,
    pub worst_regret_best: Option<Pair>,
    /// NCCL's own tuner on the same sizes (NCCL backend with a free-choice run).
    pub nccl_hits: usize,
    pub nccl_sizes: usize,
    pub nccl_worst_regret: Option<f64>,
    /// Sizes where the model's pick equals NCCL's choice (algorithm and protocol).
    pub agrees_with_nccl: usize,
    pub rows_ok: usize,
    pub rows_unavailable: usize,
    pub rows_failed: usize,
    /// Elements wrong, all rows together.
    pub wrong: u64,
}

/// native / NCCL for one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRatio {
    pub pair: Pair,
    /// Sizes where both backends measured the pair.
    pub sizes: usize,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Median per regime (Small, Medium, Large).
    pub by_regime: Vec<(Regime, Option<f64>)>,
}

/// One of NCCL's other free-choice runs against its default (`auto`), per
/// size both measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeComparison {
    /// `tuned` (the tuner plugin) or `symm` (symmetric windows).
    pub label: String,
    pub sizes: Vec<ComparedSize>,
    /// Geometric mean of the ratios over all sizes, and over 1-16 MiB.
    pub geomean_ratio: Option<f64>,
    pub geomean_ratio_1_16mib: Option<f64>,
    /// Sizes in the 1-16 MiB mean.
    pub sizes_1_16mib: usize,
    /// The size where the run does worst against `auto` (largest ratio), and best.
    pub worst_ratio: Option<f64>,
    pub worst_bytes: Option<u64>,
    pub(crate) best_ratio: Option<f64>,
    pub best_bytes: Option<u64>,
}

/// One size of a `FreeComparison`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparedSize {
    pub(crate) bytes: u64,
    /// Medians: NCCL's default, and the other run.
    pub(crate) auto_us: f64,
    pub(crate) other_us: f64,
    /// other / auto: below 1 the other run is faster.
    pub ratio: f64,
    /// What each ran (from NCCL's log): a pair, a symmetric kernel, or `classic ALGO/PROTO`.
    pub auto_ran: Option<String>,
    pub other_ran: Option<String>,
}

/// A scored run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scored {
    pub predictor: String,
    #[serde(with = "coll_label_serde")]
    pub collective: Coll,
    pub world_size: usize,
    pub rows: Vec<ScoredRow>,
    pub sizes: Vec<SizeVerdict>,
    pub summaries: Vec<BackendSummary>,
    pub ratios: Vec<PairRatio>,
    /// Where the `symm` rows' predictions come from (runs with nccl-symm rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symmetric_predictor: Option<String>,
    /// `tuned` and `symm` against `auto` (runs that have them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<FreeComparison>,
}

/// What NCCL ran for a free-choice row, from its log: the symmetric kernel,
/// `classic ALGO/PROTO` where a `symm` row took NCCL's classic path, or the pair.
pub(crate) fn ran_label(row: &Row) -> Option<String> {
    if let Some(launch) = &row.symmetric {
        return Some(launch.kernel.clone());
    }
    let pair = row.nccl_choice?.pair;
    Some(if row.backend == Backend::NcclSymm {
        format!("classic {pair}")
    } else {
        pair.to_string()
    })
}

fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// `tuned` and `symm` against `auto` at every size both measured.
fn compare_free_runs(run: &VerifyRun) -> Vec<FreeComparison> {
    let auto: Vec<&Row> = run.rows.iter().filter(|r| r.is_auto()).collect();
    let mut out = Vec::new();
    type IsRun = fn(&Row) -> bool;
    let others: [(&str, IsRun); 2] = [
        ("tuned", |r| r.pair.is_none() && r.tuned),
        ("symm", |r| {
            r.pair.is_none() && r.backend == Backend::NcclSymm
        }),
    ];
    for (label, is_other) in others {
        let rows: Vec<&Row> = run.rows.iter().filter(|r| is_other(r)).collect();
        if rows.is_empty() || auto.is_empty() {
            continue;
        }
        let mut sizes = Vec::new();
        for other in rows {
            let base = auto.iter().find(|a| a.bytes == other.bytes);
            let (Some(base), Some(other_us)) = (base, measured(other)) else {
                continue;
            };
            let Some(auto_us) = measured(base).filter(|t| *t > 0.0) else {
                continue;
            };
            sizes.push(ComparedSize {
                bytes: other.bytes,
                auto_us,
                other_us,
                ratio: other_us / auto_us,
                auto_ran: ran_label(base),
                other_ran: ran_label(other),
            });
        }
        sizes.sort_by_key(|c| c.bytes);
        let ratios: Vec<f64> = sizes.iter().map(|c| c.ratio).collect();
        let mid: Vec<f64> = sizes
            .iter()
            .filter(|c| (1 << 20..=16 << 20).contains(&c.bytes))
            .map(|c| c.ratio)
            .collect();
        let worst = sizes.iter().max_by(|a, b| a.ratio.total_cmp(&b.ratio));
        let best = sizes.iter().min_by(|a, b| a.ratio.total_cmp(&b.ratio));
        out.push(FreeComparison {
            label: label.to_string(),
            geomean_ratio: geomean(&ratios),
            geomean_ratio_1_16mib: geomean(&mid),
            sizes_1_16mib: mid.len(),
            worst_ratio: worst.map(|c| c.ratio),
            worst_bytes: worst.map(|c| c.bytes),
            best_ratio: best.map(|c| c.ratio),
            best_bytes: best.map(|c| c.bytes),
            sizes,
        });
    }
    out
}

fn measured(row: &Row) -> Option<f64> {
    if row.status == RowStatus::Ok {
        row.median_us.or_else(|| median(&row.times_us))
    } else {
        None
    }
}

/// The rows of one backend at one size, in file order.
type RowsBySize<'a> = BTreeMap<(Backend, u64), Vec<&'a Row>>;

/// Score `run` with `predictor`. Linear in the rows, but for the ordered maps (log n per look-up) and
/// the predictor's own cost per row and per size.
pub fn score(run: &VerifyRun, predictor: &dyn Predictor) -> Scored {
    let coll = run.options.collective;
    let world = run.machine.world_size.max(1);
    let mut backends: Vec<Backend> = run.rows.iter().map(|r| r.backend).collect();
    backends.sort();
    backends.dedup();
    let mut by_size: RowsBySize = BTreeMap::new();
    for r in &run.rows {
        by_size.entry((r.backend, r.bytes)).or_default().push(r);
    }
    let verdicts = size_verdicts(&by_size, predictor, coll);
    let scored_rows = score_rows(run, predictor, &verdicts, world);
    let summaries = backends
        .iter()
        .map(|&backend| backend_summary(backend, &scored_rows, &verdicts))
        .collect();
    let ratios = if backends.contains(&Backend::Native) && backends.contains(&Backend::Nccl) {
        pair_ratios(run)
    } else {
        Vec::new()
    };
    let has_symm = backends.contains(&Backend::NcclSymm);
    Scored {
        predictor: predictor.label(),
        collective: coll,
        world_size: world,
        rows: scored_rows,
        sizes: verdicts,
        summaries,
        ratios,
        symmetric_predictor: if has_symm {
            predictor.symmetric_label()
        } else {
            None
        },
        comparisons: compare_free_runs(run),
    }
}

/// Per backend and size (in that order): the measured best pinned pair, the model's pick and NCCL's choice.
fn size_verdicts(by_size: &RowsBySize, predictor: &dyn Predictor, coll: Coll) -> Vec<SizeVerdict> {
    let mut verdicts = Vec::new();
    for (&(backend, bytes), rows) in by_size {
        if backend == Backend::NcclSymm {
            continue; // no pinned pairs: nothing to pick among
        }
        let time_of = |pair: Pair| {
            rows.iter()
                .find(|r| r.pair == Some(pair))
                .and_then(|r| measured(r))
        };
        let mut best: Option<(f64, Pair)> = None;
        for r in rows {
            // A row whose result had wrong elements is no candidate: it may be fast because it is wrong.
            if r.wrong.is_some_and(|w| w > 0) {
                continue;
            }
            if let (Some(pair), Some(t)) = (r.pair, measured(r)) {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, pair));
                }
            }
        }
        let pick = predictor.pick(coll, bytes);
        let regret = match (pick.and_then(time_of), best) {
            (Some(t), Some((b, _))) if b > 0.0 => Some(t / b),
            _ => None,
        };
        let nccl_choice = if backend == Backend::Nccl {
            rows.iter()
                .find(|r| r.is_auto())
                .and_then(|r| r.nccl_choice)
        } else {
            None
        };
        let nccl_regret = match (nccl_choice.and_then(|c| time_of(c.pair)), best) {
            (Some(t), Some((b, _))) if b > 0.0 => Some(t / b),
            _ => None,
        };
        verdicts.push(SizeVerdict {
            backend,
            bytes,
            measured_best: best.map(|(_, p)| p),
            best_us: best.map(|(t, _)| t),
            model_pick: pick,
            regret,
            hit: pick.is_some() && pick == best.map(|(_, p)| p),
            nccl_choice,
            nccl_regret,
        });
    }
    verdicts
}

/// Every row with its prediction, error, bandwidths and the verdict of its size.
fn score_rows(
    run: &VerifyRun,
    predictor: &dyn Predictor,
    verdicts: &[SizeVerdict],
    world: usize,
) -> Vec<ScoredRow> {
    let coll = run.options.collective;
    let verdict_of: HashMap<(Backend, u64), &SizeVerdict> =
        verdicts.iter().map(|v| ((v.backend, v.bytes), v)).collect();
    let mut scored_rows = Vec::with_capacity(run.rows.len());
    for row in &run.rows {
        let mut row = row.clone();
        row.derive_stats();
        let time = measured(&row);
        let (predicted, model_kernel) = predict_row(predictor, coll, run.options.dtype, &row);
        let verdict = verdict_of.get(&(row.backend, row.bytes));
        let error_pct = match (predicted, time) {
            (Some(p), Some(m)) if m > 0.0 => Some((p - m) / m * 100.0),
            _ => None,
        };
        let algbw = time.map(|t| algbw_gbs(row.bytes, t));
        scored_rows.push(ScoredRow {
            label: row.pair_label(),
            algbw_gbs: algbw,
            busbw_gbs: algbw.map(|a| a * coll.nccl_tests_bus_factor(world)),
            predicted_us: predicted,
            error_pct,
            model_pick: row.pair.is_some() && verdict.is_some_and(|v| v.model_pick == row.pair),
            measured_best: row.pair.is_some()
                && verdict.is_some_and(|v| v.measured_best == row.pair),
            nccl_pick: row.pair.is_some()
                && verdict.is_some_and(|v| v.nccl_choice.map(|c| c.pair) == row.pair),
            model_kernel,
            row,
        });
    }
    scored_rows
}

/// The prediction error of one backend's rows in each size regime (pinned pairs, and the `symm` row).
fn regime_errors(mine: &[&ScoredRow]) -> Vec<RegimeError> {
    let mut regimes = Vec::new();
    for regime in Regime::ALL {
        let errs: Vec<(f64, Option<Pair>, u64)> = mine
            .iter()
            .filter(|r| Regime::of(r.row.bytes) == regime)
            .filter_map(|r| Some((r.error_pct?.abs(), r.row.pair, r.row.bytes)))
            .collect();
        let abs: Vec<f64> = errs.iter().map(|e| e.0).collect();
        let worst = errs.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0));
        regimes.push(RegimeError {
            regime,
            label: regime.label(),
            rows: errs.len(),
            median_abs_error_pct: median(&abs),
            worst_abs_error_pct: worst.map(|w| w.0),
            worst_pair: worst.and_then(|w| w.1),
            worst_bytes: worst.map(|w| w.2),
        });
    }
    regimes
}

/// One backend's summary: errors by regime, hit rate and regret of the model's pick and of NCCL's choice.
fn backend_summary(
    backend: Backend,
    scored_rows: &[ScoredRow],
    verdicts: &[SizeVerdict],
) -> BackendSummary {
    let mine: Vec<&ScoredRow> = scored_rows
        .iter()
        .filter(|r| r.row.backend == backend)
        .collect();
    let vs: Vec<&SizeVerdict> = verdicts.iter().filter(|v| v.backend == backend).collect();
    let with_best: Vec<&&SizeVerdict> = vs
        .iter()
        .filter(|v| v.measured_best.is_some() && v.model_pick.is_some())
        .collect();
    let hits = with_best.iter().filter(|v| v.hit).count();
    let worst = vs
        .iter()
        .filter(|v| v.regret.is_some())
        .max_by(|a, b| a.regret.unwrap_or(0.0).total_cmp(&b.regret.unwrap_or(0.0)));
    let nccl_rated: Vec<&&SizeVerdict> = vs.iter().filter(|v| v.nccl_regret.is_some()).collect();
    let nccl_hits = nccl_rated
        .iter()
        .filter(|v| v.nccl_choice.map(|c| c.pair) == v.measured_best)
        .count();
    let nccl_worst = nccl_rated
        .iter()
        .filter_map(|v| v.nccl_regret)
        .max_by(|a, b| a.total_cmp(b));
    let agrees = vs
        .iter()
        .filter(|v| v.model_pick.is_some() && v.nccl_choice.map(|c| c.pair) == v.model_pick)
        .count();
    let count = |s: RowStatus| mine.iter().filter(|r| r.row.status == s).count();
    BackendSummary {
        backend,
        regimes: regime_errors(&mine),
        sizes_with_best: with_best.len(),
        hits,
        hit_rate: if with_best.is_empty() {
            None
        } else {
            Some(hits as f64 / with_best.len() as f64)
        },
        worst_regret: worst.and_then(|v| v.regret),
        worst_regret_bytes: worst.map(|v| v.bytes),
        worst_regret_pick: worst.and_then(|v| v.model_pick),
        worst_regret_best: worst.and_then(|v| v.measured_best),
        nccl_hits,
        nccl_sizes: nccl_rated.len(),
        nccl_worst_regret: nccl_worst,
        agrees_with_nccl: agrees,
        rows_ok: count(RowStatus::Ok),
        rows_unavailable: count(RowStatus::Unavailable),
        rows_failed: count(RowStatus::Failed),
        // Counts from a file: saturating, so two huge counts never wrap to "#wrong 0".
        wrong: mine
            .iter()
            .filter_map(|r| r.row.wrong)
            .fold(0u64, u64::saturating_add),
    }
}

/// native / NCCL per pinned pair, over the sizes both measured (first row of each backend, pair and size).
fn pair_ratios(run: &VerifyRun) -> Vec<PairRatio> {
    let mut time_of: HashMap<(Backend, Pair, u64), Option<f64>> = HashMap::new();
    for r in &run.rows {
        if let Some(pair) = r.pair {
            time_of
                .entry((r.backend, pair, r.bytes))
                .or_insert_with(|| measured(r));
        }
    }
    let mut pairs: Vec<Pair> = run.rows.iter().filter_map(|r| r.pair).collect();
    pairs.sort();
    pairs.dedup();
    let mut sizes: Vec<u64> = run.rows.iter().map(|r| r.bytes).collect();
    sizes.sort();
    sizes.dedup();
    let mut ratios = Vec::new();
    for pair in pairs {
        let mut per_size: Vec<(u64, f64)> = Vec::new();
        for &bytes in &sizes {
            let find = |b: Backend| time_of.get(&(b, pair, bytes)).copied().flatten();
            if let (Some(n), Some(c)) = (find(Backend::Native), find(Backend::Nccl)) {
                if c > 0.0 {
                    per_size.push((bytes, n / c));
                }
            }
        }
        let all: Vec<f64> = per_size.iter().map(|x| x.1).collect();
        let by_regime = Regime::ALL
            .iter()
            .map(|&g| {
                let v: Vec<f64> = per_size
                    .iter()
                    .filter(|x| Regime::of(x.0) == g)
                    .map(|x| x.1)
                    .collect();
                (g, median(&v))
            })
            .collect();
        ratios.push(PairRatio {
            pair,
            sizes: all.len(),
            median: median(&all),
            min: all.iter().copied().min_by(|a, b| a.total_cmp(b)),
            max: all.iter().copied().max_by(|a, b| a.total_cmp(b)),
            by_regime,
        });
    }
    ratios
}

/// The topology a result file carries, as a cluster: the planner's record,
/// else NCCL's own dump.
pub(crate) fn cluster_of_run(run: &VerifyRun) -> crate::error::Result<crate::topo::Cluster> {
    use crate::topo::{build, Cluster};
    use crate::xml;
    let m = &run.machine;
    let (text, source) = match (&m.topology_xml, &m.nccl_topology_xml) {
        (Some(t), _) => (t, m.topology_source.clone()),
        (None, Some(t)) => (t, "NCCL's topology dump in the result file".to_string()),
        (None, None) => {
            return Err(crate::error::Error::bad_input(
                "the result file carries no topology",
            ))
        }
    };
    let root = xml::parse(text, &source)?;
    let node = build::from_xml(&root, &source)?;
    Ok(Cluster {
        node,
        n_nodes: m.nodes.max(1),
        net_latency_us: m.net_latency_us,
    })
}

/// For `verify --load`: the current model on the topology the file carries;
/// where that is not possible, the predictions the file recorded (said on stderr).
pub fn predictor_for_run(run: &VerifyRun) -> Box<dyn Predictor + '_> {
    let built = cluster_of_run(run).and_then(|cluster| {
        ModelPredictor::new(
            &cluster,
            run.machine.nccl_graph_xml.as_deref(),
            run.machine.nccl_version.as_deref(),
        )
    });
    match built {
        Ok(p) => Box::new(p),
        Err(e) => {
            eprintln!("planner: cannot run the current model on this file ({e}); using the predictions it recorded");
            Box::new(Recorded::new(run))
        }
    }
}
