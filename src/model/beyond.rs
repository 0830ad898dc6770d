//! planner's own all-reduce algorithms outside NCCL's menu (`OwnAlgo`):
//! a latency + bytes/bandwidth model of the executor's `OneShot/LL` and
//! `TwoShot/Simple` kernels (`kernels/beyond.cu`), kept apart from NCCL's
//! tables (which have no cell for them). `explain` shows them under
//! "beyond NCCL"; the calibration stage may replace the defaults with fitted
//! values.
//!
//! Bytes each rank moves over NVLink for an all-reduce of `S` bytes on `n` ranks:
//! * OneShot/LL: every rank pushes its whole input to each of the n-1 peers
//!   as LL lines (8 data bytes per 16-byte line with two flags), so
//!   (n-1)·S of payload and 2·(n-1)·S on the wire.
//! * TwoShot/Simple: every rank reads the n-1 peers' 1/n slices of its own
//!   slice (reduce-scatter) and writes its reduced slice to the n-1 peers
//!   (all-gather): 2·(n-1)/n·S, plain 16-byte loads and stores.
//!
//! The time is `latency + wire bytes / (efficiency · nvlink_bw)`; the defaults
//! and where they come from are on `Defaults`.

use super::{Coll, Pair, Proto};
use serde::{Deserialize, Serialize};

/// planner's own algorithms, outside NCCL's menu (`super::Algo`): no NCCL
/// table has a cell for them, `NCCL_ALGO` never names them; `Pair::parse`
/// (`--pair`, `--pairs`), the executor and this module know them, as
/// `AnyAlgo::Own`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OwnAlgo {
    /// Every rank reads every peer's input and writes its whole output
    /// (planner's `OneShot/LL` kernel, `kernels/beyond.cu`).
    OneShot,
    /// Reduce-scatter of 1/n per rank over peer memory, then all-gather
    /// (planner's `TwoShot/Simple` kernel, `kernels/beyond.cu`).
    TwoShot,
}

impl OwnAlgo {
    pub const ALL: [OwnAlgo; 2] = [OwnAlgo::OneShot, OwnAlgo::TwoShot];
    /// planner's name, as `Pair` prints it and JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            OwnAlgo::OneShot => "OneShot",
            OwnAlgo::TwoShot => "TwoShot",
        }
    }
    /// By name, case-insensitive, with or without `_` / `-` (`OneShot`,
    /// `one-shot`, `TWO_SHOT`); None for anything else, NCCL's algorithms
    /// included.
    pub fn parse(text: &str) -> Option<OwnAlgo> {
        let key: String = text.chars().filter(|c| *c != '-' && *c != '_').collect();
        OwnAlgo::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(&key))
    }
    /// The one protocol its kernel runs with: OneShot packs data with flags
    /// (LL lines, no separate barrier), TwoShot uses barriers and plain
    /// loads (Simple).
    pub fn protocol(self) -> Proto {
        match self {
            OwnAlgo::OneShot => Proto::Ll,
            OwnAlgo::TwoShot => Proto::Simple,
        }
    }
    /// The model's constants.
    pub(crate) fn defaults(self) -> Defaults {
        match self {
            OwnAlgo::OneShot => ONE_SHOT,
            OwnAlgo::TwoShot => TWO_SHOT,
        }
    }
}

/// The model's constants for one algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Defaults {
    /// Fixed time per call, µs (launch or graph node, flag round trips).
    pub(crate) latency_us: f64,
    /// Fraction of the NVLink bandwidth the kernel's stores and loads reach.
    pub(crate) efficiency: f64,
}

/// OneShot/LL. Latency 3.5 µs: NCCL 2.28's symmetric `AllReduce_AGxLL_R`
/// kernel, the same LL all-gather-then-reduce pattern, measured 3.5-4.4 µs
/// from 8 B to 16 KiB on the 2x H200 with CUDA graphs (issue 13's table).
/// Efficiency as TwoShot's (not yet measured for LL; to be calibrated).
pub(crate) const ONE_SHOT: Defaults = Defaults {
    latency_us: 3.5,
    efficiency: 0.88,
};

/// TwoShot/Simple. A straight-line fit of PyTorch's symmetric-memory
/// two-shot all-reduce on the 2x H200 (issue 13's table: 13.6 / 20.4 / 32.8 /
/// 58.7 µs at 2 / 4 / 8 / 16 MiB, bf16): about 3.2 µs per MiB moved on 2
/// ranks (S bytes per rank on the wire), i.e. 325 GB/s = 0.88 x the 370.8
/// GB/s NCCL counts for 18 NVLinks of an sm_90 GPU (`topo::build::nvlink_bw`),
/// and an intercept of 7 µs.
pub(crate) const TWO_SHOT: Defaults = Defaults {
    latency_us: 7.0,
    efficiency: 0.88,
};

/// The pairs beyond NCCL, each algorithm with the one protocol its kernel uses.
pub fn pairs() -> Vec<Pair> {
    OwnAlgo::ALL
        .into_iter()
        .map(|a| Pair::new(a, a.protocol()))
        .collect()
}

/// Bytes one rank sends or receives over NVLink per call (the wire format
/// included: LL lines are half data), None for anything but all-reduce.
pub(crate) fn wire_bytes(algo: OwnAlgo, coll: Coll, bytes: u64, n_ranks: usize) -> Option<f64> {
    if coll != Coll::AllReduce || n_ranks == 0 {
        return None;
    }
    let (s, n) = (bytes as f64, n_ranks as f64);
    Some(match algo {
        OwnAlgo::OneShot => 2.0 * (n - 1.0) * s,
        OwnAlgo::TwoShot => 2.0 * (n - 1.0) / n * s,
    })
}

/// One prediction with its terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prediction {
    pub(crate) pair: Pair,
    pub(crate) latency_us: f64,
    /// Bytes per rank over NVLink (`wire_bytes`).
    pub(crate) wire_bytes: f64,
    /// The bandwidth the bytes move at, GB/s (efficiency x NVLink).
    pub(crate) bw_gbs: f64,
    pub(crate) time_us: f64,
}

/// The prediction for `algo` running `coll` of `bytes`
/// per rank on `n_ranks` ranks whose GPUs have `nvlink_bw_gbs` of NVLink
/// bandwidth per direction (NCCL's count: links x per-link GB/s, 370.8 on
/// H100/H200). None for other collectives than all-reduce, no rank, or a
/// bandwidth that is not a positive number.
pub(crate) fn predict(
    algo: OwnAlgo,
    coll: Coll,
    bytes: u64,
    n_ranks: usize,
    nvlink_bw_gbs: f64,
) -> Option<Prediction> {
    let d = algo.defaults();
    if !(nvlink_bw_gbs.is_finite() && nvlink_bw_gbs > 0.0) {
        return None;
    }
    let wire = wire_bytes(algo, coll, bytes, n_ranks)?;
    let bw = d.efficiency * nvlink_bw_gbs;
    // GB/s = 1e3 bytes per µs.
    let time_us = d.latency_us + wire / (bw * 1e3);
    Some(Prediction {
        pair: Pair::new(algo, algo.protocol()),
        latency_us: d.latency_us,
        wire_bytes: wire,
        bw_gbs: bw,
        time_us,
    })
}

/// Predicted time in µs (`predict`'s total).
#[cfg(test)]
fn predict_us(
    algo: OwnAlgo,
    coll: Coll,
    bytes: u64,
    n_ranks: usize,
    nvlink_bw_gbs: f64,
) -> Option<f64> {
    predict(algo, coll, bytes, n_ranks, nvlink_bw_gbs).map(|p| p.time_us)
}

/// Every algorithm beyond NCCL that applies, fastest first (empty for
/// collectives they do not run).
pub(crate) fn list(coll: Coll, bytes: u64, n_ranks: usize, nvlink_bw_gbs: f64) -> Vec<Prediction> {
    let mut out: Vec<Prediction> = OwnAlgo::ALL
        .into_iter()
        .filter_map(|a| predict(a, coll, bytes, n_ranks, nvlink_bw_gbs))
        .collect();
    out.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algo, AnyAlgo};

    #[test]
    fn bytes_on_the_wire_by_hand() {
        // 8 ranks, 1 MiB: OneShot 2 x 7 x 1 MiB; TwoShot 2 x 7/8 x 1 MiB.
        let mib = (1u64 << 20) as f64;
        assert_eq!(
            wire_bytes(OwnAlgo::OneShot, Coll::AllReduce, 1 << 20, 8),
            Some(14.0 * mib)
        );
        assert_eq!(
            wire_bytes(OwnAlgo::TwoShot, Coll::AllReduce, 1 << 20, 8),
            Some(1.75 * mib)
        );
        // NCCL's algorithms have no model here: an `AnyAlgo` reaches it only through `own()`.
        assert_eq!(AnyAlgo::from(Algo::Ring).own(), None);
        assert_eq!(
            wire_bytes(OwnAlgo::OneShot, Coll::AllGather, 1 << 20, 8),
            None
        );
    }

    #[test]
    fn two_shot_reproduces_the_fit_it_came_from() {
        // 2 ranks, 8 MiB: 7 µs + 8 MiB / (0.88 x 370.8 GB/s) = 7 + 25.71 = 32.7 µs
        // (PyTorch two-shot measured 32.8 µs).
        let t = predict_us(OwnAlgo::TwoShot, Coll::AllReduce, 8 << 20, 2, 370.8).unwrap();
        assert!((t - 32.71).abs() < 0.05, "{t}");
        // Small sizes are the latency.
        let t = predict_us(OwnAlgo::OneShot, Coll::AllReduce, 8, 2, 370.8).unwrap();
        assert!((t - 3.5).abs() < 1e-3, "{t}");
    }

    #[test]
    fn the_list_is_sorted_and_knows_only_its_algorithms() {
        let small = list(Coll::AllReduce, 4096, 8, 370.8);
        assert_eq!(small.len(), 2);
        assert_eq!(small[0].pair, Pair::new(OwnAlgo::OneShot, Proto::Ll));
        // OneShot moves n = 8 times the bytes of TwoShot: TwoShot wins large.
        let large = list(Coll::AllReduce, 256 << 20, 8, 370.8);
        assert_eq!(large[0].pair, Pair::new(OwnAlgo::TwoShot, Proto::Simple));
        assert!(list(Coll::Broadcast, 4096, 8, 370.8).is_empty());
        assert_eq!(AnyAlgo::from(Algo::Tree).own(), None);
        assert_eq!(
            predict_us(OwnAlgo::OneShot, Coll::AllReduce, 4096, 8, 0.0),
            None
        );
        assert_eq!(
            predict_us(OwnAlgo::OneShot, Coll::AllReduce, 4096, 8, f64::NAN),
            None
        );
        assert_eq!(
            pairs(),
            vec![
                Pair::new(OwnAlgo::OneShot, Proto::Ll),
                Pair::new(OwnAlgo::TwoShot, Proto::Simple)
            ]
        );
    }
}
