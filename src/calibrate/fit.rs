//! From measurements to a `Calibration`: group, fit each pair, score.
//!
//! Rows of one backend are grouped by (collective, pair, size); a free-choice
//! row whose pair NCCL reported (verify's `nccl_choice`) joins that pair. A
//! group's time is the median of its rows (repeats of a size across files,
//! nccl-tests' out-of-place and in-place columns). Each pair is then fitted
//! with the terms its sizes can carry (`terms_for`).

use super::cv;
use super::expected::{self, FormBasis, FormPoints, Physical};
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
    /// The measured machine on the expected model's form; None: the empirical form.
    pub basis: Option<FormBasis>,
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
    /// The empirical form's parameters; on the expected form its residual terms (the rest neutral) with
    /// `latency_us` and `bandwidth_gbs` the form's time at 8 B and its asymptotic rate (for tables).
    pub(crate) params: PairParams,
    /// The expected form's constants (None: the empirical form).
    pub physical: Option<Physical>,
    /// On the expected form: measured / form at the fitted sizes (`expected::ratio_at`).
    pub ratio: Vec<[f64; 2]>,
    pub terms: Vec<String>,
    /// (bytes, measured µs) it was fitted on.
    pub(crate) points: Vec<(u64, f64)>,
}

impl FittedPair {
    /// The fitted time of `key` at `bytes`, µs.
    pub fn time_us(&self, key: &PairKey, bytes: u64, basis: Option<&FormBasis>) -> Option<f64> {
        match (self.physical, basis) {
            (Some(phys), Some(b)) => {
                b.time_us(key.0, key.1, &phys, &self.params, &self.ratio, bytes)
            }
            (Some(_), None) => None,
            (None, _) => Some(self.params.time_us(bytes as f64)),
        }
    }
}

/// At most this many points per pair reach the solver: beyond it the sizes are merged into this many bins of
/// equal width in log2(bytes), each its median size and median time (`bin_points`), so a file of 30,000 sizes
/// costs what one of 256 does. Below it every size is fitted as measured.
pub(crate) const MAX_FIT_SIZES: usize = 256;

/// `points` (ascending bytes) reduced to at most `MAX_FIT_SIZES`: O(n) (each point visits one bin; the medians are
/// found by selection within a bin).
pub(crate) fn bin_points(points: &[(u64, f64)]) -> Vec<(u64, f64)> {
    if points.len() <= MAX_FIT_SIZES {
        return points.to_vec();
    }
    let lo = (points[0].0.max(1) as f64).log2();
    let hi = (points[points.len() - 1].0.max(1) as f64).log2();
    let width = ((hi - lo) / MAX_FIT_SIZES as f64).max(1e-12);
    let mut bins: Vec<Vec<(u64, f64)>> = vec![Vec::new(); MAX_FIT_SIZES];
    for &(b, t) in points {
        let i = (((b.max(1) as f64).log2() - lo) / width) as usize;
        bins[i.min(MAX_FIT_SIZES - 1)].push((b, t));
    }
    bins.into_iter()
        .filter(|bin| !bin.is_empty())
        .map(|mut bin| {
            // bytes ascending within the bin already (the input is); the median time by selection
            let bytes = bin[bin.len() / 2].0;
            let mid = bin.len() / 2;
            bin.select_nth_unstable_by(mid, |a, b| a.1.total_cmp(&b.1));
            (bytes, bin[mid].1)
        })
        .collect()
}

/// Fit one pair's points (ascending bytes): on the expected form where `basis` holds the pair, else the empirical
/// one.
fn fit_one(
    key: &PairKey,
    points: Vec<(u64, f64)>,
    basis: Option<&FormBasis>,
) -> Option<FittedPair> {
    let fitted = bin_points(&points);
    if let Some(b) = basis {
        let prepared: Option<Vec<(f64, f64, expected::Shaped)>> = fitted
            .iter()
            .map(|&(bytes, t)| Some((bytes as f64, t, b.prepared(key.0, key.1, bytes)?)))
            .collect();
        if let Some(prepared) = prepared.filter(|p| !p.is_empty()) {
            let prior = b.prior(&prepared[0].2);
            let data = FormPoints {
                basis: b,
                points: prepared,
                prior,
            };
            if let Some(f) = expected::fit_form(&data) {
                // What the form misses at each fitted size: measured / form.
                let ratio: Vec<[f64; 2]> = data
                    .points
                    .iter()
                    .filter_map(|(bytes, t, pp)| {
                        let e = b.time_prepared(pp, &f.physical, &f.residual, *bytes)?;
                        Some([*bytes, t / e]).filter(|k| k[1].is_finite() && k[1] > 0.0)
                    })
                    .collect();
                let mut params = f.residual;
                params.latency_us = b
                    .time_us(key.0, key.1, &f.physical, &f.residual, &ratio, 8)
                    .unwrap_or(f.physical.launch_us);
                let (b1, b2) = (1u64 << 39, 1u64 << 40);
                params.bandwidth_gbs = match (
                    b.time_us(key.0, key.1, &f.physical, &f.residual, &ratio, b1),
                    b.time_us(key.0, key.1, &f.physical, &f.residual, &ratio, b2),
                ) {
                    (Some(t1), Some(t2)) if t2 > t1 => (b2 - b1) as f64 / (1000.0 * (t2 - t1)),
                    _ => f.physical.channel_gbs,
                };
                return Some(FittedPair {
                    params,
                    physical: Some(f.physical),
                    ratio,
                    terms: f.terms,
                    points,
                });
            }
        }
    }
    let terms = terms_for(fitted.len())?;
    let xy: Vec<(f64, f64)> = fitted.iter().map(|&(b, t)| (b as f64, t)).collect();
    let solution = solver::fit_points(&xy, terms)?;
    Some(FittedPair {
        params: solution.params,
        physical: None,
        ratio: Vec::new(),
        terms: term_names(solution.terms),
        points,
    })
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
        if points.len() < 2 {
            continue;
        }
        if let Some(f) = fit_one(key, points, set.basis.as_ref()) {
            out.insert(*key, f);
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
///
/// On the expected model's form when the inputs carry the machine's topology (a planner verify file's own dump),
/// else on the empirical form (`fit_with_basis` names the machine for inputs without one).
pub fn fit(inputs: &[Measurements], options: &FitOptions) -> Result<Calibration> {
    let refs: Vec<&Measurements> = inputs.iter().collect();
    let basis = expected::basis_of_inputs(&refs);
    fit_refs(&refs, options, basis.as_ref())
}

/// `fit` on the form of `basis` (None: the empirical form).
pub fn fit_with_basis(
    inputs: &[Measurements],
    options: &FitOptions,
    basis: Option<&FormBasis>,
) -> Result<Calibration> {
    let refs: Vec<&Measurements> = inputs.iter().collect();
    fit_refs(&refs, options, basis)
}

pub(crate) fn fit_refs(
    inputs: &[&Measurements],
    options: &FitOptions,
    basis: Option<&FormBasis>,
) -> Result<Calibration> {
    if inputs.is_empty() {
        return Err(Error::bad_input("calibrate: no input file"));
    }
    let mut set = PointSet::of(inputs, options.backend);
    set.basis = basis.cloned();
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
        let key = (*coll, *pair);
        let errors: Vec<f64> = f
            .points
            .iter()
            .filter_map(|&(b, t)| Some(abs_rel_error(f.time_us(&key, b, basis)?, t)))
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
            physical: f.physical,
            measured_ratio: f.ratio.clone(),
            terms: f.terms.clone(),
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
    let mut cal = Calibration::new(
        options.backend,
        machine,
        if basis.is_some() {
            ModelDescription::expected()
        } else {
            ModelDescription::current()
        },
        sources,
        pairs,
        kfold.map(|k| k.regimes),
        notes,
    );
    if let Some(b) = basis {
        cal.form = super::file::FORM_EXPECTED.to_string();
        cal.expected_form = Some(b.clone());
    }
    Ok(cal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_256_sizes_fit_as_measured_beyond_them_256_bins() {
        let few: Vec<(u64, f64)> = (0..256u64).map(|i| (8 + 4 * i, 1.0 + i as f64)).collect();
        assert_eq!(bin_points(&few), few);
        // 1000 sizes 1..=1000 B: log2 from 0 to 9.97, 256 bins of 0.039 octave; the first bins hold 1 B, 2 B, ...
        // (the small sizes are far apart in log2), so fewer than 256 are occupied; each keeps its median
        let many: Vec<(u64, f64)> = (1..=1000u64).map(|b| (b, b as f64)).collect();
        let binned = bin_points(&many);
        assert!(
            binned.len() <= MAX_FIT_SIZES && binned.len() > 100,
            "{}",
            binned.len()
        );
        assert_eq!(binned[0], (1, 1.0));
        assert!(binned.windows(2).all(|w| w[0].0 < w[1].0));
        // the last bin: log2 in [9.93, 9.97], sizes 974..=1000: its median size 987 and time 987
        assert_eq!(*binned.last().unwrap(), (987, 987.0));
        assert_eq!(binned.len(), 159);
    }
}
