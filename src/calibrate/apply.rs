//! Using a calibration: next to NCCL's model in `explain` (one call or a
//! sweep), and as the predictor that re-scores a `verify` result file.
//!
//! Nothing here refits: a calibration is evaluated as it was saved
//! (`PairParams::time_us`, a few floating-point operations per pair).

use super::file::{topology_hash_of_root, Calibration};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::select::{Call, Evaluation};
use crate::model::sweep::Sweep;
use crate::model::Pair;
use crate::model::{Algo, Coll, Model, Proto};
use crate::predict::Predictor;
use crate::result_file::VerifyRun;
use crate::topo::Cluster;
use serde::Serialize;

impl Calibration {
    /// `check_applies` where the topology may be unknown (a result file
    /// without its XML): then only the GPU count is compared.
    pub(crate) fn check_applies_to(
        &self,
        topology_hash: Option<&str>,
        gpu_count: usize,
        force: bool,
    ) -> Result<()> {
        match topology_hash {
            Some(h) => self.check_applies(h, gpu_count, force),
            None => {
                let mut unknown = self.clone();
                unknown.machine.topology_hash = None;
                unknown.check_applies("", gpu_count, force)
            }
        }
    }

    /// The collectives it has fitted pairs for, in NCCL's spelling.
    fn collectives(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.pairs.iter().map(|p| p.coll.nccl_name()).collect();
        names.dedup();
        names
    }

    fn name(&self) -> &str {
        if self.source.is_empty() {
            "the calibration"
        } else {
            &self.source
        }
    }

    /// Refuse a collective the calibration has no pair of.
    fn check_collective(&self, coll: Coll) -> Result<()> {
        if self.pairs.iter().any(|p| p.coll == coll) {
            return Ok(());
        }
        Err(Error::bad_input(format!(
            "{} has no fitted pair for {} (it calibrates {})",
            self.name(),
            coll.nccl_name(),
            self.collectives().join(", ")
        )))
    }
}

/// Read CAL.json for `explain` on `cluster`: it must have been measured on
/// this topology and GPU count (unless `force`), fit `coll`, and the call must
/// be one op (a calibration times single calls, not aggregated groups).
pub fn load_for_cluster(
    path: &str,
    cluster: &Cluster,
    coll: Coll,
    ops: usize,
    force: bool,
) -> Result<Calibration> {
    let cal = Calibration::load(path)?;
    let hash = topology_hash_of_root(&cluster.node.xml);
    let gpus = cluster.node.gpu_count() * cluster.n_nodes.max(1);
    cal.check_applies(&hash, gpus, force)?;
    cal.check_collective(coll)?;
    if ops != 1 {
        return Err(Error::bad_input(format!(
            "--calibration with --ops {ops}: {path} was measured one call at a time, not in aggregated groups"
        )));
    }
    Ok(cal)
}

/// The calibrated view of one `Evaluation`.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibratedCall {
    /// Where the calibration came from, and whose times it fits.
    pub(crate) source: String,
    pub(crate) backend: Backend,
    /// Per candidate of the evaluation (same order): the calibrated time, µs;
    /// None where NCCL's model masks the pair or the calibration lacks it.
    pub(crate) times_us: Vec<Option<f64>>,
    /// Index of the calibrated pick among the candidates.
    pub pick: Option<usize>,
}

impl CalibratedCall {
    pub(crate) fn pick_us(&self) -> Option<f64> {
        self.pick.and_then(|i| self.times_us[i])
    }
}

/// Calibrated time of every pair NCCL's model lets run at this call, and the
/// fastest of them (ties: NCCL's scan order).
pub fn calibrate_call(cal: &Calibration, eval: &Evaluation) -> CalibratedCall {
    let coll = eval.call.coll;
    let times_us: Vec<Option<f64>> = eval
        .candidates
        .iter()
        .map(|c| {
            if c.usable() {
                cal.predict_us(coll, c.algo, c.proto, eval.call.size)
            } else {
                None
            }
        })
        .collect();
    let mut pick: Option<usize> = None;
    for (i, t) in times_us.iter().enumerate() {
        if let Some(t) = t {
            if pick.and_then(|p| times_us[p]).is_none_or(|best| *t < best) {
                pick = Some(i);
            }
        }
    }
    CalibratedCall {
        source: cal.source.clone(),
        backend: cal.backend,
        times_us,
        pick,
    }
}

/// Consecutive sweep sizes with the same calibrated pick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CalibratedBand {
    /// First and last sweep size in the band.
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) algo: Algo,
    pub(crate) proto: Proto,
    /// Smallest size where this band's pick is the calibrated pick, found
    /// between the sweep points; equals `from` for the first band.
    pub(crate) starts_at: u64,
    /// Calibrated time of the pick at `from` and at `to`, µs.
    pub(crate) from_time_us: f64,
    pub(crate) to_time_us: f64,
}

/// The calibrated crossover map of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibratedSweep {
    pub(crate) calibration: String,
    pub(crate) backend: Backend,
    pub(crate) bands: Vec<CalibratedBand>,
    /// Sweep sizes where no pair NCCL's model allows is in the calibration.
    pub(crate) uncalibrated_sizes: Vec<u64>,
}

/// The calibrated pick at `bytes` among `pairs`.
fn pick_among(cal: &Calibration, coll: Coll, bytes: u64, pairs: &[Pair]) -> Option<(Pair, f64)> {
    // `Calibration::pick` treats an empty list as "every pair".
    if pairs.is_empty() {
        return None;
    }
    cal.pick(coll, bytes, pairs)
}

/// The calibrated crossover map over the sizes of NCCL's `sweep`: at each size
/// the fastest calibrated pair among those NCCL's model allows there; where
/// the pick changes, the exact crossover by bisection on the calibrated times.
pub fn calibrate_sweep(cal: &Calibration, model: &Model, sweep: &Sweep) -> Result<CalibratedSweep> {
    let coll = sweep.coll;
    let mut bands: Vec<CalibratedBand> = Vec::new();
    let mut uncalibrated = Vec::new();
    let mut prev: Option<u64> = None;
    for point in &sweep.points {
        let call = Call::new(coll, point.size, model.input.n_ranks, sweep.ops)?;
        let eval = model.evaluate(&call)?;
        let allowed: Vec<Pair> = eval
            .candidates
            .iter()
            .filter(|c| c.usable())
            .map(|c| Pair::new(c.algo, c.proto))
            .collect();
        // `allowed` holds NCCL's candidates only, so the pick is one of NCCL's pairs.
        let picked = pick_among(cal, coll, point.size, &allowed);
        let Some((pick, time, (algo, proto))) = picked.and_then(|(p, t)| Some((p, t, p.nccl()?)))
        else {
            uncalibrated.push(point.size);
            prev = None;
            continue;
        };
        match bands.last_mut() {
            Some(b) if prev.is_some() && b.algo == algo && b.proto == proto => {
                b.to = point.size;
                b.to_time_us = time;
            }
            _ => {
                let starts_at = match prev {
                    Some(lo) => {
                        // Smallest size in (lo, hi] where `pick` wins.
                        let (mut lo, mut hi) = (lo, point.size);
                        while hi - lo > 1 {
                            let mid = lo + (hi - lo) / 2;
                            match pick_among(cal, coll, mid, &allowed) {
                                Some((p, _)) if p == pick => hi = mid,
                                _ => lo = mid,
                            }
                        }
                        hi
                    }
                    None => point.size,
                };
                bands.push(CalibratedBand {
                    from: point.size,
                    to: point.size,
                    algo,
                    proto,
                    starts_at,
                    from_time_us: time,
                    to_time_us: time,
                });
            }
        }
        prev = Some(point.size);
    }
    Ok(CalibratedSweep {
        calibration: cal.source.clone(),
        backend: cal.backend,
        bands,
        uncalibrated_sizes: uncalibrated,
    })
}

// ---------------------------------------------------------------------------
// verify --load --calibration

/// A calibration as the predictor of verify's scoring: its time for a pair
/// and size, and its pick (the fastest fitted pair).
#[derive(Debug, Clone)]
pub struct CalibratedPredictor {
    pub(crate) calibration: Calibration,
}

impl Predictor for CalibratedPredictor {
    fn label(&self) -> String {
        format!(
            "calibrated model of the {} backend ({})",
            self.calibration.backend,
            self.calibration.name()
        )
    }
    fn predict_us(&self, collective: Coll, pair: Pair, bytes: u64) -> Option<f64> {
        self.calibration
            .predict_us(collective, pair.algo, pair.proto, bytes)
    }
    fn pick(&self, collective: Coll, bytes: u64) -> Option<Pair> {
        self.calibration
            .pick(collective, bytes, &[])
            .map(|(p, _)| p)
    }
}

/// The topology hash of a result file, as `calibrate` computes it for the
/// file's rows: NCCL's own dump when the run took one, else the planner's view.
pub(crate) fn run_topology_hash(run: &VerifyRun, source: &str) -> Result<Option<String>> {
    let m = &run.machine;
    match m.nccl_topology_xml.as_ref().or(m.topology_xml.as_ref()) {
        Some(xml) => super::file::topology_hash(xml, source).map(Some),
        None => Ok(None),
    }
}

/// What `verify --load FILE --calibration CAL.json` scores.
pub struct VerifyRescore {
    /// The rows of the calibration's backend only (its times are that
    /// backend's; the other backend's rows would be scored against the wrong
    /// machine model).
    pub(crate) run: VerifyRun,
    pub(crate) predictor: CalibratedPredictor,
    /// For stderr: what was left out, what could not be checked.
    pub(crate) notes: Vec<String>,
}

/// Check that CAL.json applies to the result file `run` (read from `source`)
/// and keep the rows of its backend.
pub fn rescore_verify(
    cal_path: &str,
    run: &VerifyRun,
    source: &str,
    force: bool,
) -> Result<VerifyRescore> {
    let cal = Calibration::load(cal_path)?;
    let mut notes = Vec::new();
    let hash = run_topology_hash(run, source)?;
    if hash.is_none() && cal.machine.topology_hash.is_some() {
        notes.push(format!(
            "{source} carries no topology: only the GPU count of {cal_path} was checked"
        ));
    }
    cal.check_applies_to(hash.as_deref(), run.machine.world_size, force)?;
    cal.check_collective(run.options.collective)?;
    let mut kept = run.clone();
    kept.rows.retain(|r| r.backend == cal.backend);
    let left_out = run.rows.len() - kept.rows.len();
    if kept.rows.is_empty() {
        return Err(Error::bad_input(format!(
            "{source} has no {} rows to score with {cal_path}, a calibration of the {} backend",
            cal.backend, cal.backend
        )));
    }
    if left_out > 0 {
        notes.push(format!(
            "{cal_path} calibrates the {} backend: scoring its {} rows, {left_out} other row(s) left out",
            cal.backend,
            kept.rows.len()
        ));
    }
    Ok(VerifyRescore {
        run: kept,
        predictor: CalibratedPredictor { calibration: cal },
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::file::{ModelDescription, PairFit};
    use crate::calibrate::input::MachineInfo;
    use crate::calibrate::model::PairParams;

    fn cal_with(pairs: &[(Algo, Proto, f64, f64)]) -> Calibration {
        let fits = pairs
            .iter()
            .map(|&(algo, proto, lat, bw)| PairFit {
                coll: Coll::AllReduce,
                algo: algo.into(),
                proto,
                params: PairParams::stock_form(lat, bw),
                physical: None,
                measured_ratio: Vec::new(),
                terms: vec!["latency".into(), "bandwidth".into()],
                sizes: 2,
                min_bytes: 8,
                max_bytes: 1 << 30,
                fit: None,
                cv: None,
            })
            .collect();
        Calibration::new(
            Backend::Nccl,
            MachineInfo {
                gpu_count: Some(2),
                topology_hash: Some("abc".into()),
                ..Default::default()
            },
            ModelDescription::current(),
            Vec::new(),
            fits,
            None,
            Vec::new(),
        )
    }

    #[test]
    fn predictor_times_and_picks_the_fitted_pairs() {
        // Ring/LL: 10 µs + bytes / 100 GB/s; Ring/Simple: 20 µs + bytes / 400 GB/s.
        // They cross where 10 + b/1e5 = 20 + b/4e5: b = 1333333 bytes.
        let p = CalibratedPredictor {
            calibration: cal_with(&[
                (Algo::Ring, Proto::Ll, 10.0, 100.0),
                (Algo::Ring, Proto::Simple, 20.0, 400.0),
            ]),
        };
        let ll = Pair::new(Algo::Ring, Proto::Ll);
        let simple = Pair::new(Algo::Ring, Proto::Simple);
        let t = p.predict_us(Coll::AllReduce, ll, 1_000_000).unwrap();
        assert!((t - 20.0).abs() < 1e-9, "{t}");
        assert_eq!(
            p.predict_us(Coll::AllReduce, Pair::new(Algo::Tree, Proto::Ll), 8),
            None
        );
        assert_eq!(p.predict_us(Coll::AllGather, ll, 8), None);
        assert_eq!(p.pick(Coll::AllReduce, 1_333_000), Some(ll));
        assert_eq!(p.pick(Coll::AllReduce, 1_334_000), Some(simple));
        assert_eq!(p.pick(Coll::AllGather, 1 << 20), None);
        assert!(p.label().contains("nccl backend"), "{}", p.label());
    }

    #[test]
    fn unknown_topology_checks_the_gpu_count_only() {
        let cal = cal_with(&[(Algo::Ring, Proto::Ll, 10.0, 100.0)]);
        cal.check_applies_to(None, 2, false).unwrap();
        let e = cal.check_applies_to(None, 4, false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("measured on 2 GPUs"), "{e}");
        let e = cal.check_applies_to(Some("def"), 2, false).unwrap_err();
        assert!(e.to_string().contains("topology abc"), "{e}");
        cal.check_applies_to(Some("def"), 4, true).unwrap();
        let e = cal.check_collective(Coll::AllGather).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the calibration has no fitted pair for AllGather (it calibrates AllReduce)"
        );
    }
}
