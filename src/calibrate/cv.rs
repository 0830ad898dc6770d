//! Honest evaluation: how well does a calibration predict sizes and runs it
//! was not fitted on?
//!
//! * k-fold by size: the measured sizes are split into `folds` contiguous
//!   bands; each band is predicted by a fit on the other bands (so a held-out
//!   band is a stretch of sizes the model never saw, not scattered rows).
//! * train on one, test on another: with two or more inputs, fit on one file
//!   and score on each other file, next to the run-to-run spread (the same
//!   pair and size measured in the two files).
//!
//! Errors are |predicted - measured| / measured per (collective, pair, size),
//! summarised per size regime (< 64 KiB, 64 KiB - 1 MiB, >= 1 MiB, and all
//! sizes from 64 KiB) for the calibrated model and, where the files recorded it, the
//! stock NCCL model. Regret at a size = measured time of the pick / measured
//! time of the fastest pair measured there - 1.

use super::expected::{self, FormBasis};
use super::fit::{fit_pairs, FittedPair, PairKey, PointSet};
use super::input::Measurements;
use super::stats::{abs_rel_error, spread_about_median, ErrorStats};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::Coll;
use crate::model::Pair;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

fn pair_name<S: Serializer>(pair: &Pair, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&pair.to_string())
}

fn opt_pair_name<S: Serializer>(pair: &Option<Pair>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match pair {
        Some(p) => s.serialize_str(&p.to_string()),
        None => s.serialize_none(),
    }
}

/// The size regimes of the summaries: (label, from, to exclusive).
pub(crate) const REGIMES: [(&str, u64, u64); 4] = [
    ("< 64 KiB", 0, 64 << 10),
    ("64 KiB - 1 MiB", 64 << 10, 1 << 20),
    (">= 1 MiB", 1 << 20, u64::MAX),
    (">= 64 KiB", 64 << 10, u64::MAX),
];

/// One regime of a section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegimeRow {
    pub regime: String,
    pub calibrated: Option<ErrorStats>,
    pub stock: Option<ErrorStats>,
    /// |test / train - 1| of the measurements themselves (train-on-one only).
    pub run_to_run: Option<ErrorStats>,
    /// (slowest - fastest) / median of a (pair, size) measured more than once
    /// in the test input(s): NCCL's free choice next to the pinned pair (each
    /// in its own process), or several files.
    pub(crate) repeat_spread: Option<ErrorStats>,
    pub calibrated_regret_worst_pct: Option<f64>,
    pub stock_regret_worst_pct: Option<f64>,
}

/// Errors of one pair over all its test sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairErrorRow {
    #[serde(serialize_with = "super::input::serialize_coll_name")]
    pub(crate) collective: Coll,
    #[serde(serialize_with = "pair_name")]
    pub(crate) pair: Pair,
    pub(crate) calibrated: Option<ErrorStats>,
    pub(crate) stock: Option<ErrorStats>,
    pub(crate) run_to_run: Option<ErrorStats>,
}

/// The calibrated (and stock) pick against the measured best at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegretRow {
    #[serde(serialize_with = "super::input::serialize_coll_name")]
    pub(crate) collective: Coll,
    pub(crate) bytes: u64,
    #[serde(serialize_with = "pair_name")]
    pub(crate) best: Pair,
    pub(crate) best_us: f64,
    #[serde(serialize_with = "opt_pair_name")]
    pub(crate) calibrated_pick: Option<Pair>,
    pub(crate) calibrated_regret_pct: Option<f64>,
    #[serde(serialize_with = "opt_pair_name")]
    pub(crate) stock_pick: Option<Pair>,
    pub(crate) stock_regret_pct: Option<f64>,
}

/// One test point with a large error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointError {
    #[serde(serialize_with = "super::input::serialize_coll_name")]
    pub(crate) collective: Coll,
    #[serde(serialize_with = "pair_name")]
    pub(crate) pair: Pair,
    pub(crate) bytes: u64,
    pub(crate) measured_us: f64,
    pub(crate) calibrated_us: f64,
    pub(crate) error_pct: f64,
    pub(crate) train_measured_us: Option<f64>,
}

/// NCCL's free choice (pair unknown) against the calibrated best.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoRow {
    #[serde(serialize_with = "super::input::serialize_coll_name")]
    pub(crate) collective: Coll,
    pub(crate) bytes: u64,
    pub(crate) measured_us: f64,
    #[serde(serialize_with = "pair_name")]
    pub(crate) calibrated_pick: Pair,
    pub(crate) calibrated_us: f64,
    pub(crate) source: String,
    pub(crate) line: usize,
}

/// One target of issue 11, checked on a section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCheck {
    pub(crate) target: String,
    pub(crate) limit_pct: f64,
    pub achieved_pct: Option<f64>,
    pub met: Option<bool>,
}

/// One evaluation: what was fitted, what was predicted, how well.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CvSection {
    pub method: String,
    pub train: Vec<String>,
    pub test: Vec<String>,
    pub points: usize,
    pub regimes: Vec<RegimeRow>,
    pub per_pair: Vec<PairErrorRow>,
    pub regret: Vec<RegretRow>,
    pub largest_errors: Vec<PointError>,
    pub auto: Vec<AutoRow>,
    pub targets: Vec<TargetCheck>,
}

impl CvSection {
    /// The row of `regime` (a label of `REGIMES`).
    pub fn regime(&self, regime: &str) -> Option<&RegimeRow> {
        self.regimes.iter().find(|r| r.regime == regime)
    }
}

/// Every evaluation of one backend's calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CvReport {
    pub backend: Backend,
    pub sections: Vec<CvSection>,
}

impl CvReport {
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| {
            Error::runtime(format!("cannot serialise the cross-validation report: {e}"))
        })
    }
}

#[derive(Debug, Clone)]
struct TestPoint {
    key: PairKey,
    bytes: u64,
    measured_us: f64,
    calibrated_us: Option<f64>,
    stock_us: Option<f64>,
    train_measured_us: Option<f64>,
    /// (max - min) / median of the cell, when it has several measurements.
    spread: Option<f64>,
}

fn in_regime(bytes: u64, regime: (&str, u64, u64)) -> bool {
    bytes >= regime.1 && bytes < regime.2
}

fn predict(
    models: &BTreeMap<PairKey, FittedPair>,
    key: &PairKey,
    bytes: u64,
    basis: Option<&FormBasis>,
) -> Option<f64> {
    models.get(key)?.time_us(key, bytes, basis)
}

fn regret_rows(points: &[TestPoint]) -> Vec<RegretRow> {
    let mut by_size: BTreeMap<(Coll, u64), Vec<&TestPoint>> = BTreeMap::new();
    for p in points {
        by_size.entry((p.key.0, p.bytes)).or_default().push(p);
    }
    let mut rows = Vec::new();
    for ((coll, bytes), pts) in by_size {
        if pts.len() < 2 {
            continue;
        }
        let Some(best) = pts
            .iter()
            .min_by(|a, b| a.measured_us.total_cmp(&b.measured_us))
        else {
            continue;
        };
        let pick = |f: &dyn Fn(&TestPoint) -> Option<f64>| {
            pts.iter()
                .filter_map(|p| Some((p, f(p)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(p, _)| (p.key.1, (p.measured_us / best.measured_us - 1.0) * 100.0))
        };
        let calibrated = pick(&|p| p.calibrated_us);
        let stock = pick(&|p| p.stock_us);
        rows.push(RegretRow {
            collective: coll,
            bytes,
            best: best.key.1,
            best_us: best.measured_us,
            calibrated_pick: calibrated.map(|c| c.0),
            calibrated_regret_pct: calibrated.map(|c| c.1),
            stock_pick: stock.map(|s| s.0),
            stock_regret_pct: stock.map(|s| s.1),
        });
    }
    rows
}

fn section(
    method: String,
    train: Vec<String>,
    test: Vec<String>,
    points: Vec<TestPoint>,
    auto: Vec<AutoRow>,
) -> CvSection {
    let regret = regret_rows(&points);
    let regimes = REGIMES
        .iter()
        .map(|&r| {
            let pts: Vec<&TestPoint> = points.iter().filter(|p| in_regime(p.bytes, r)).collect();
            let worst_regret = |f: &dyn Fn(&RegretRow) -> Option<f64>| {
                regret
                    .iter()
                    .filter(|g| in_regime(g.bytes, r))
                    .filter_map(f)
                    .reduce(f64::max)
            };
            RegimeRow {
                regime: r.0.to_string(),
                calibrated: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.calibrated_us?, p.measured_us)))
                        .collect::<Vec<_>>(),
                ),
                stock: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.stock_us?, p.measured_us)))
                        .collect::<Vec<_>>(),
                ),
                run_to_run: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.measured_us, p.train_measured_us?)))
                        .collect::<Vec<_>>(),
                ),
                repeat_spread: ErrorStats::of(
                    &pts.iter().filter_map(|p| p.spread).collect::<Vec<_>>(),
                ),
                calibrated_regret_worst_pct: worst_regret(&|g| g.calibrated_regret_pct),
                stock_regret_worst_pct: worst_regret(&|g| g.stock_regret_pct),
            }
        })
        .collect::<Vec<_>>();
    let mut keys: Vec<PairKey> = points.iter().map(|p| p.key).collect();
    keys.sort();
    keys.dedup();
    let per_pair = keys
        .iter()
        .map(|key| {
            let pts: Vec<&TestPoint> = points.iter().filter(|p| p.key == *key).collect();
            PairErrorRow {
                collective: key.0,
                pair: key.1,
                calibrated: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.calibrated_us?, p.measured_us)))
                        .collect::<Vec<_>>(),
                ),
                stock: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.stock_us?, p.measured_us)))
                        .collect::<Vec<_>>(),
                ),
                run_to_run: ErrorStats::of(
                    &pts.iter()
                        .filter_map(|p| Some(abs_rel_error(p.measured_us, p.train_measured_us?)))
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    let mut largest: Vec<PointError> = points
        .iter()
        .filter_map(|p| {
            let c = p.calibrated_us?;
            Some(PointError {
                collective: p.key.0,
                pair: p.key.1,
                bytes: p.bytes,
                measured_us: p.measured_us,
                calibrated_us: c,
                error_pct: (c / p.measured_us - 1.0) * 100.0,
                train_measured_us: p.train_measured_us,
            })
        })
        .collect();
    largest.sort_by(|a, b| b.error_pct.abs().total_cmp(&a.error_pct.abs()));
    largest.truncate(8);
    let mut s = CvSection {
        method,
        train,
        test,
        points: points.len(),
        regimes,
        per_pair,
        regret,
        largest_errors: largest,
        auto,
        targets: Vec::new(),
    };
    s.targets = targets(&s);
    s
}

/// Issue 11's targets, on the calibrated model.
fn targets(s: &CvSection) -> Vec<TargetCheck> {
    let stat = |regime: &str, f: fn(&ErrorStats) -> f64| {
        s.regime(regime).and_then(|r| r.calibrated.as_ref()).map(f)
    };
    let checks: [(&str, f64, Option<f64>); 5] = [
        (
            "median |error| from 64 KiB",
            5.0,
            stat(">= 64 KiB", |e| e.median_abs_error_pct),
        ),
        (
            "p95 |error| from 64 KiB",
            15.0,
            stat(">= 64 KiB", |e| e.p95_abs_error_pct),
        ),
        (
            "worst |error| from 1 MiB",
            15.0,
            stat(">= 1 MiB", |e| e.worst_abs_error_pct),
        ),
        (
            "worst regret of the calibrated pick from 1 MiB",
            2.0,
            s.regime(">= 1 MiB")
                .and_then(|r| r.calibrated_regret_worst_pct),
        ),
        (
            "median |error| below 64 KiB",
            10.0,
            stat("< 64 KiB", |e| e.median_abs_error_pct),
        ),
    ];
    checks
        .into_iter()
        .map(|(target, limit, achieved)| TargetCheck {
            target: target.to_string(),
            limit_pct: limit,
            achieved_pct: achieved,
            met: achieved.map(|a| a <= limit),
        })
        .collect()
}

/// k-fold by size over one point set; None with fewer than 3 sizes.
pub(crate) fn kfold_section(set: &PointSet, folds: usize, names: &[&str]) -> Option<CvSection> {
    let sizes = set.sizes();
    let n = sizes.len();
    if n < 3 || folds < 2 {
        return None;
    }
    let folds = folds.min(n);
    let mut points = Vec::new();
    for i in 0..folds {
        let band = &sizes[i * n / folds..(i + 1) * n / folds];
        let models = fit_pairs(set, &|b| band.binary_search(&b).is_ok());
        for (key, cells) in &set.pairs {
            for (bytes, cell) in cells.range(band[0]..=band[band.len() - 1]) {
                let Some(measured_us) = cell.measured_us() else {
                    continue;
                };
                points.push(TestPoint {
                    key: *key,
                    bytes: *bytes,
                    measured_us,
                    calibrated_us: predict(&models, key, *bytes, set.basis.as_ref()),
                    stock_us: cell.stock_us(),
                    train_measured_us: None,
                    spread: spread_about_median(&cell.times_us),
                });
            }
        }
    }
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    Some(section(
        format!(
            "k-fold by size: {folds} contiguous size bands, each predicted by a fit on the others"
        ),
        names.clone(),
        names,
        points,
        Vec::new(),
    ))
}

/// Fit on `train`, score on `test`.
fn cross_section(
    train: &Measurements,
    test: &Measurements,
    backend: Backend,
    basis: Option<&FormBasis>,
) -> Option<CvSection> {
    let mut train_set = PointSet::of(&[train], backend);
    train_set.basis = basis.cloned();
    let test_set = PointSet::of(&[test], backend);
    if train_set.pairs.is_empty() || test_set.is_empty() {
        return None;
    }
    let models = fit_pairs(&train_set, &|_| false);
    let mut points = Vec::new();
    for (key, cells) in &test_set.pairs {
        for (bytes, cell) in cells {
            let Some(measured_us) = cell.measured_us() else {
                continue;
            };
            points.push(TestPoint {
                key: *key,
                bytes: *bytes,
                measured_us,
                calibrated_us: predict(&models, key, *bytes, basis),
                stock_us: cell.stock_us(),
                train_measured_us: train_set
                    .pairs
                    .get(key)
                    .and_then(|c| c.get(bytes))
                    .and_then(|c| c.measured_us()),
                spread: spread_about_median(&cell.times_us),
            });
        }
    }
    let auto = test_set
        .auto
        .iter()
        .filter_map(|row| {
            let (pick, us) = models
                .iter()
                .filter(|(k, _)| k.0 == row.coll)
                .filter_map(|(k, m)| Some((k.1, m.time_us(k, row.bytes, basis)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))?;
            Some(AutoRow {
                collective: row.coll,
                bytes: row.bytes,
                measured_us: row.time_us,
                calibrated_pick: pick,
                calibrated_us: us,
                source: row.source.clone(),
                line: row.line,
            })
        })
        .collect();
    Some(section(
        "train on one input, test on another".into(),
        vec![train.source.clone()],
        vec![test.source.clone()],
        points,
        auto,
    ))
}

/// k-fold by size over all inputs together, then, with two or more inputs,
/// every ordered (train, test) pair of them.
///
/// On the expected model's form when the inputs carry the machine's topology (as `fit`), else the empirical one.
pub fn cross_validate(inputs: &[Measurements], options: &super::FitOptions) -> Result<CvReport> {
    let refs: Vec<&Measurements> = inputs.iter().collect();
    let basis = expected::basis_of_inputs(&refs);
    cross_validate_with(inputs, options, basis.as_ref())
}

/// `cross_validate` on the form of `basis` (None: the empirical form).
pub fn cross_validate_with(
    inputs: &[Measurements],
    options: &super::FitOptions,
    basis: Option<&FormBasis>,
) -> Result<CvReport> {
    let with_rows: Vec<&Measurements> = inputs
        .iter()
        .filter(|m| m.rows.iter().any(|r| r.backend == options.backend))
        .collect();
    if with_rows.is_empty() {
        return Err(Error::bad_input(format!(
            "{}: no {} measurements to cross-validate",
            inputs
                .iter()
                .map(|m| m.source.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            options.backend
        )));
    }
    let mut sections = Vec::new();
    let mut set = PointSet::of(&with_rows, options.backend);
    set.basis = basis.cloned();
    let names: Vec<&str> = with_rows.iter().map(|m| m.source.as_str()).collect();
    if let Some(k) = kfold_section(&set, options.cv_folds.max(2), &names) {
        sections.push(k);
    }
    for train in &with_rows {
        for test in &with_rows {
            if std::ptr::eq(*train, *test) {
                continue;
            }
            if let Some(s) = cross_section(train, test, options.backend, basis) {
                sections.push(s);
            }
        }
    }
    Ok(CvReport {
        backend: options.backend,
        sections,
    })
}
