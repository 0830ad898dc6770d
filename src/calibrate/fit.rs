//! From measurements to a `Calibration`: group, fit each pair, score.
//!
//! Rows of one backend are grouped by (collective, pair, size); a free-choice
//! row whose pair NCCL reported (verify's `nccl_choice`) joins that pair. A
//! group's time is the median of its rows (repeats of a size across files,
//! nccl-tests' out-of-place and in-place columns). Each pair is then fitted
//! with the terms its sizes can carry (`terms_for`).

use super::cv;
use super::file::{Calibration, ModelDescription, PairFit, SourceRef};
use super::input::{MachineInfo, Measurement, Measurements};
use super::model::PairParams;
use super::solver::{self, Terms};
use super::stats::{abs_rel_error, ErrorStats};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::Coll;
use crate::model::Pair;
use std::collections::BTreeMap;

/// How to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Which rows: NCCL's (the reference for NCCL's model) or the native
    /// kernels'.
    pub backend: Backend,
    /// Size bands of the k-fold cross-validation stored in the file; 0 skips it.
    pub cv_folds: usize,
    /// Fit inputs from machines whose topology hash or GPU count differ.
    pub force: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            backend: Backend::Nccl,
            cv_folds: 5,
            force: false,
        }
    }
}

/// The measurements of one (collective, pair, size).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cell {
    pub(crate) times_us: Vec<f64>,
    pub(crate) stock_us: Vec<f64>,
}

impl Cell {
    pub(crate) fn measured_us(&self) -> Option<f64> {
        crate::measure::median(&self.times_us)
    }
    pub(crate) fn stock_us(&self) -> Option<f64> {
        crate::measure::median(&self.stock_us)
    }
}

pub(crate) type PairKey = (Coll, Pair);

/// One backend's rows, grouped.
#[derive(Debug, Clone, Default)]
pub(crate) struct PointSet {
    pub(crate) pairs: BTreeMap<PairKey, BTreeMap<u64, Cell>>,
    /// NCCL's free choice where the file does not say what it ran.
    pub(crate) auto: Vec<Measurement>,
}

impl PointSet {
    pub(crate) fn of(inputs: &[&Measurements], backend: Backend) -> PointSet {
        let mut set = PointSet::default();
        for m in inputs {
            for row in m.rows.iter().filter(|r| r.backend == backend) {
                match row.fit_pair() {
                    Some(pair) => {
                        let cell = set
                            .pairs
                            .entry((row.coll, pair))
                            .or_default()
                            .entry(row.bytes)
                            .or_default();
                        cell.times_us.push(row.time_us);
                        if let Some(s) = row.stock_us {
                            cell.stock_us.push(s);
                        }
                    }
                    None => set.auto.push(row.clone()),
                }
            }
        }
        set
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.auto.is_empty()
    }

    /// Every size measured, ascending.
    pub(crate) fn sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .pairs
            .values()
            .flat_map(|cells| cells.keys().copied())
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }
}

/// The terms a pair's data can carry: each parameter needs a few sizes of
/// its own. NCCL's latency + bandwidth from 2 sizes, the overlap from 5, the
/// ramp (2 parameters) from 10; the second ramp (2) and the L2 step (3) are
/// tried from 20 and kept only where they pay for their parameters.
pub(crate) fn terms_for(sizes: usize) -> Option<Terms> {
    match sizes {
        0 | 1 => None,
        2..=4 => Some(Terms::base(false, false)),
        5..=9 => Some(Terms::base(false, true)),
        10..=19 => Some(Terms::base(true, true)),
        _ => Some(Terms {
            ramp2: true,
            cache: true,
            ..Terms::base(true, true)
        }),
    }
}

pub(crate) struct FittedPair {
    pub(crate) params: PairParams,
    pub(crate) terms: Terms,
    /// (bytes, measured µs) it was fitted on.
    pub(crate) points: Vec<(u64, f64)>,
}

/// Fit every pair of `set`, leaving out the sizes `held_out` says.
pub(crate) fn fit_pairs(
    set: &PointSet,
    held_out: &dyn Fn(u64) -> bool,
) -> BTreeMap<PairKey, FittedPair> {
    let mut out = BTreeMap::new();
    for (key, cells) in &set.pairs {
        let points: Vec<(u64, f64)> = cells
            .iter()
            .filter(|(b, _)| !held_out(**b))
            .filter_map(|(b, c)| Some((*b, c.measured_us()?)))
            .collect();
        let Some(terms) = terms_for(points.len()) else {
            continue;
        };
        let xy: Vec<(f64, f64)> = points.iter().map(|&(b, t)| (b as f64, t)).collect();
        if let Some(solution) = solver::fit_points(&xy, terms) {
            out.insert(
                *key,
                FittedPair {
                    params: solution.params,
                    terms: solution.terms,
                    points,
                },
            );
        }
    }
    out
}

fn term_names(terms: Terms) -> Vec<String> {
    let mut names = vec!["latency".to_string(), "bandwidth".to_string()];
    if terms.ramp {
        names.push("ramp".into());
    }
    if terms.overlap {
        names.push("overlap".into());
    }
    if terms.ramp2 {
        names.push("ramp2".into());
    }
    if terms.cache {
        names.push("cache".into());
    }
    names
}

/// Machine facts common to the inputs; differing topology hashes or GPU
/// counts are bad input unless `force`.
fn merge_machines(inputs: &[&Measurements], force: bool) -> Result<(MachineInfo, Vec<String>)> {
    let mut machine = MachineInfo::default();
    let mut seen_hosts = std::collections::HashSet::new();
    let mut notes = Vec::new();
    let mut hash_from: Option<(&str, &str)> = None;
    let mut count_from: Option<(usize, &str)> = None;
    for m in inputs {
        let info = &m.machine;
        if let Some(h) = &info.topology_hash {
            match hash_from {
                Some((prev, src)) if prev != h => {
                    let msg = format!(
                        "{}: topology hash {h} differs from {prev} of {src}: measurements of different machines",
                        m.source
                    );
                    if !force {
                        return Err(Error::bad_input(format!(
                            "{msg} (force to fit them together)"
                        )));
                    }
                    notes.push(msg);
                }
                Some(_) => {}
                None => hash_from = Some((h, &m.source)),
            }
        }
        if let Some(n) = info.gpu_count {
            match count_from {
                Some((prev, src)) if prev != n => {
                    let msg = format!("{}: {n} GPUs, but {src} has {prev}", m.source);
                    if !force {
                        return Err(Error::bad_input(format!(
                            "{msg} (force to fit them together)"
                        )));
                    }
                    notes.push(msg);
                }
                Some(_) => {}
                None => count_from = Some((n, &m.source)),
            }
        }
        for h in &info.hosts {
            machine.add_host(&mut seen_hosts, h);
        }
        if machine.gpus.is_empty() {
            machine.gpus = info.gpus.clone();
        }
        machine.driver_version = machine
            .driver_version
            .take()
            .or(info.driver_version.clone());
        machine.cuda_version = machine.cuda_version.take().or(info.cuda_version.clone());
        machine.nccl_version = machine.nccl_version.take().or(info.nccl_version.clone());
    }
    machine.topology_hash = hash_from.map(|(h, _)| h.to_string());
    machine.gpu_count = count_from.map(|(n, _)| n);
    Ok((machine, notes))
}

/// Fit the model of `options.backend` to every pair the inputs measured.
pub fn fit(inputs: &[Measurements], options: &FitOptions) -> Result<Calibration> {
    let refs: Vec<&Measurements> = inputs.iter().collect();
    fit_refs(&refs, options)
}

pub(crate) fn fit_refs(inputs: &[&Measurements], options: &FitOptions) -> Result<Calibration> {
    if inputs.is_empty() {
        return Err(Error::bad_input("calibrate: no input file"));
    }
    let set = PointSet::of(inputs, options.backend);
    let names: Vec<&str> = inputs.iter().map(|m| m.source.as_str()).collect();
    if set.pairs.is_empty() {
        return Err(Error::bad_input(format!(
            "{}: no {} measurement of a known algorithm/protocol pair to fit{}",
            names.join(", "),
            options.backend,
            if set.auto.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} rows are NCCL's free choice without the pair it ran; give the pair with --pair if the run was pinned)",
                    set.auto.len()
                )
            }
        )));
    }
    let (machine, mut notes) = merge_machines(inputs, options.force)?;
    let fitted = fit_pairs(&set, &|_| false);
    for (key, cells) in &set.pairs {
        if !fitted.contains_key(key) {
            notes.push(format!(
                "{} {}: {} size(s), too few to fit",
                key.0.nccl_name(),
                key.1,
                cells.len()
            ));
        }
    }
    let kfold = if options.cv_folds > 0 {
        cv::kfold_section(&set, options.cv_folds, &names)
    } else {
        None
    };
    let mut pairs = Vec::new();
    for ((coll, pair), f) in &fitted {
        let errors: Vec<f64> = f
            .points
            .iter()
            .map(|&(b, t)| abs_rel_error(f.params.time_us(b as f64), t))
            .collect();
        let cv_stats = kfold.as_ref().and_then(|k| {
            k.per_pair
                .iter()
                .find(|p| p.collective == *coll && p.pair == *pair)
                .and_then(|p| p.calibrated.clone())
        });
        pairs.push(PairFit {
            coll: *coll,
            algo: pair.algo,
            proto: pair.proto,
            params: f.params,
            terms: term_names(f.terms),
            sizes: f.points.len(),
            min_bytes: f.points.first().map(|p| p.0).unwrap_or(0),
            max_bytes: f.points.last().map(|p| p.0).unwrap_or(0),
            fit: ErrorStats::of(&errors),
            cv: cv_stats,
        });
    }
    let sources = inputs
        .iter()
        .map(|m| SourceRef {
            path: m.source.clone(),
            format: m.format.name().to_string(),
            fnv1a64: m.fnv1a64.clone(),
            rows: m.rows.len(),
            rows_used: m
                .rows
                .iter()
                .filter(|r| r.backend == options.backend && r.fit_pair().is_some())
                .count(),
        })
        .collect();
    for m in inputs {
        for n in &m.notes {
            notes.push(format!("{}: {n}", m.source));
        }
    }
    Ok(Calibration::new(
        options.backend,
        machine,
        ModelDescription::current(),
        sources,
        pairs,
        kfold.map(|k| k.regimes),
        notes,
    ))
}
