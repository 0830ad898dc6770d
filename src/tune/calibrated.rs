//! A calibration -> one pick per size of a fine log2 grid.
//!
//! At each grid size the challenger is the fitted pair with the lowest calibrated time. NCCL's own choice is the
//! stock NCCL model's pick on the calibration's topology; its time is the calibrated time of that pair. The
//! challenger replaces NCCL's choice when its calibrated time is lower by more than the margin. Without a stock
//! model (no topology for it), every size takes the calibrated pick.

use super::{Decision, Reason};
use crate::calibrate::Calibration;
use crate::model::{Coll, Pair};
use crate::predict::Predictor;

/// Grid points per doubling of the size.
pub(crate) const GRID_STEPS_PER_OCTAVE: u32 = 8;

/// `round(2^(k / steps))` for every k with `lo <= size <= hi` (lo at least 1), without repeats. Powers of two are
/// exact grid points.
pub(crate) fn log2_grid(lo: u64, hi: u64, steps_per_octave: u32) -> Vec<u64> {
    let lo = lo.max(1);
    let steps = f64::from(steps_per_octave.max(1));
    let first = ((lo as f64).log2() * steps).floor() as i64;
    let last = ((hi as f64).log2() * steps).ceil() as i64;
    let mut grid: Vec<u64> = (first..=last)
        .map(|k| (k as f64 / steps).exp2().round())
        .filter(|s| *s >= lo as f64 && *s <= hi as f64)
        .map(|s| s as u64)
        .collect();
    grid.dedup();
    grid
}

/// The collectives the calibration has fitted pairs for, in NCCL's order.
pub(crate) fn collectives(cal: &Calibration) -> Vec<Coll> {
    Coll::ALL
        .into_iter()
        .filter(|c| cal.pairs.iter().any(|p| p.coll == *c))
        .collect()
}

/// The sizes to evaluate for `coll`: the grid over the fitted sizes of all its pairs.
pub(crate) fn grid_for(cal: &Calibration, coll: Coll) -> Vec<u64> {
    let fits = cal.pairs.iter().filter(|p| p.coll == coll);
    let lo = fits.clone().map(|p| p.min_bytes).min();
    let hi = fits.map(|p| p.max_bytes).max();
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo <= hi => log2_grid(lo, hi, GRID_STEPS_PER_OCTAVE),
        _ => Vec::new(),
    }
}

/// Decisions for `coll` at every size of `sizes`. `stock`: the stock NCCL model for NCCL's own choice (None: only
/// calibrated picks).
pub(crate) fn decide(
    cal: &Calibration,
    coll: Coll,
    sizes: &[u64],
    stock: Option<&dyn Predictor>,
    margin_percent: f64,
) -> Vec<Decision> {
    sizes
        .iter()
        .filter_map(|&bytes| decide_size(cal, coll, bytes, stock, margin_percent))
        .collect()
}

fn decide_size(
    cal: &Calibration,
    coll: Coll,
    bytes: u64,
    stock: Option<&dyn Predictor>,
    margin_percent: f64,
) -> Option<Decision> {
    let (best, best_us) = cal.pick(coll, bytes, &[])?;
    let calibrated = |pair: Pair| cal.predict_us(coll, pair.algo, pair.proto, bytes);
    let nccl = stock.and_then(|s| s.pick(coll, bytes));
    let mut decision = Decision {
        coll,
        bytes,
        nccl,
        nccl_from: nccl.map(|_| "stock model"),
        nccl_us: None,
        best: Some(best),
        best_us: Some(best_us),
        gain_percent: None,
        pick: best,
        reason: Reason::Faster,
        measured_us: None,
        predicted_us: Some(best_us),
    };
    let Some(nccl) = nccl else {
        decision.reason = Reason::NcclChoiceUnknown;
        return Some(decision);
    };
    decision.pick = nccl;
    let Some(nccl_us) = calibrated(nccl) else {
        // NCCL would run a pair the calibration has no fit for: nothing says another is faster.
        decision.reason = Reason::NcclChoiceUnmeasured;
        decision.predicted_us = None;
        return Some(decision);
    };
    decision.nccl_us = Some(nccl_us);
    decision.predicted_us = Some(nccl_us);
    if best == nccl {
        decision.gain_percent = Some(0.0);
        decision.reason = Reason::NcclIsBest;
        return Some(decision);
    }
    let gain = if nccl_us > 0.0 {
        (nccl_us - best_us) / nccl_us * 100.0
    } else {
        0.0
    };
    decision.gain_percent = Some(gain);
    if gain > margin_percent {
        decision.pick = best;
        decision.predicted_us = Some(best_us);
        decision.reason = Reason::Faster;
    } else {
        decision.reason = Reason::WithinMargin;
    }
    Some(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algo, Proto};

    /// Two AllReduce fits in NCCL's additive form: Ring/LL 10 µs + 100 GB/s, Ring/Simple 20 µs + 400 GB/s.
    /// Equal at 10 + b/1e5 = 20 + b/4e5 -> b = 1333333 bytes.
    fn calibration() -> Calibration {
        let pair = |algo: &str, proto: &str, lat: f64, bw: f64| {
            format!(
                r#"{{"collective":"AllReduce","algorithm":"{algo}","protocol":"{proto}","latency_us":{lat},
                "bandwidth_gbs":{bw},"ramp_bytes":0,"ramp_exponent":1,"overlap":1,"terms":["latency","bandwidth"],
                "sizes":2,"min_bytes":1024,"max_bytes":1073741824,"fit":null,"cv":null}}"#
            )
        };
        let text = format!(
            r#"{{"format":"planner-calibration","version":1,"planner_version":"0.1.0","created_unix":0,
            "backend":"nccl","machine":{{"hosts":["h"],"gpus":[],"gpu_count":2,"driver_version":null,
            "cuda_version":null,"nccl_version":"2.28.3","topology_hash":null,"topology_hash_covers":""}},
            "model":{{"time_us":"","transfer_us":"","fit":"","terms":""}},"sources":[],
            "pairs":[{},{}],"cross_validation":null}}"#,
            pair("Ring", "LL", 10.0, 100.0),
            pair("Ring", "Simple", 20.0, 400.0)
        );
        Calibration::from_json(&text, "test.json").expect("valid calibration")
    }

    struct Always(Pair);
    impl Predictor for Always {
        fn label(&self) -> String {
            "test".into()
        }
        fn predict_us(&self, _: Coll, _: Pair, _: u64) -> Option<f64> {
            None
        }
        fn pick(&self, _: Coll, _: u64) -> Option<Pair> {
            Some(self.0)
        }
    }

    #[test]
    fn grid_has_eight_points_per_doubling_and_exact_powers_of_two() {
        let grid = log2_grid(1024, 2048, 8);
        // 2^(10 + k/8): 1024, 1117, 1218, 1328, 1448, 1579, 1722, 1878, 2048
        assert_eq!(grid, [1024, 1117, 1218, 1328, 1448, 1579, 1722, 1878, 2048]);
        // 8 B .. 4 GiB: 29 doublings, 29 x 8 + 1 points less one repeat (2^3.25 = 9.5 and 2^3.375 = 10.4 both
        // round to 10)
        let grid = log2_grid(8, 4 << 30, 8);
        assert_eq!(grid.len(), 29 * 8);
        assert!(grid.windows(2).all(|w| w[0] < w[1]));
        assert!((3..=32).all(|k| grid.contains(&(1u64 << k))));
        // tiny sizes round onto the same integers: no repeats
        let small = log2_grid(0, 4, 8);
        assert_eq!(small, [1, 2, 3, 4]);
    }

    #[test]
    fn calibrated_picks_without_a_stock_model() {
        let cal = calibration();
        assert_eq!(collectives(&cal), [Coll::AllReduce]);
        let d = decide(&cal, Coll::AllReduce, &[1 << 20, 2 << 20], None, 5.0);
        // 1 MiB: Ring/LL 10 + 10.49 = 20.49 < Ring/Simple 20 + 2.62 = 22.62
        assert_eq!(d[0].pick, Pair::new(Algo::Ring, Proto::Ll));
        assert_eq!(d[0].reason, Reason::NcclChoiceUnknown);
        assert!((d[0].predicted_us.unwrap() - 20.48576).abs() < 1e-9);
        // 2 MiB: Ring/LL 30.97 > Ring/Simple 25.24
        assert_eq!(d[1].pick, Pair::new(Algo::Ring, Proto::Simple));
    }

    #[test]
    fn the_margin_keeps_nccls_pick_near_the_crossover() {
        let cal = calibration();
        let nccl = Always(Pair::new(Algo::Ring, Proto::Ll));
        // 1.5 MiB: Ring/LL 10 + 15.73 = 25.73, Ring/Simple 20 + 3.93 = 23.93: 7.0 % faster
        // 1.4 MiB (1468006): Ring/LL 24.68, Ring/Simple 23.67: 4.1 % faster
        let sizes = [1_468_006, 1_572_864];
        let d = decide(&cal, Coll::AllReduce, &sizes, Some(&nccl), 5.0);
        assert_eq!(d[0].pick, Pair::new(Algo::Ring, Proto::Ll));
        assert_eq!(d[0].reason, Reason::WithinMargin);
        let gain = d[0].gain_percent.unwrap();
        assert!((gain - 4.1).abs() < 0.1, "{gain}");
        assert_eq!(d[1].pick, Pair::new(Algo::Ring, Proto::Simple));
        assert_eq!(d[1].reason, Reason::Faster);
        // NCCL's pick without a fit: kept
        let nvls = Always(Pair::new(Algo::Nvls, Proto::Simple));
        let d = decide(&cal, Coll::AllReduce, &[8 << 20], Some(&nvls), 5.0);
        assert_eq!(d[0].pick, Pair::new(Algo::Nvls, Proto::Simple));
        assert_eq!(d[0].reason, Reason::NcclChoiceUnmeasured);
        // a collective without fits has no decisions
        assert!(decide(&cal, Coll::AllGather, &[1024], Some(&nccl), 5.0).is_empty());
        assert!(grid_for(&cal, Coll::AllGather).is_empty());
    }
}
