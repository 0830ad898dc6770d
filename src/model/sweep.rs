//! NCCL's pick over a range of sizes, as bands of one algorithm/protocol with
//! the exact size where the pick changes.

use super::select::Call;
use super::{Algo, Coll, Model, Proto};
use crate::error::Result;
use serde::Serialize;

/// NCCL's pick at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Point {
    pub(crate) size: u64,
    pub(crate) algo: Algo,
    pub(crate) proto: Proto,
    pub(crate) channels: usize,
    pub(crate) threads: usize,
    pub(crate) time_us: f32,
}

/// Consecutive sweep sizes with the same algorithm and protocol.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Band {
    /// First and last sweep size in the band.
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) algo: Algo,
    pub(crate) proto: Proto,
    pub(crate) min_channels: usize,
    pub(crate) max_channels: usize,
    /// Smallest size (bytes, as `--size` reads it) where this band's pick wins,
    /// found between the sweep points; equals `from` for the first band.
    pub(crate) starts_at: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    pub(crate) coll: Coll,
    pub(crate) ops: usize,
    pub(crate) points: Vec<Point>,
    pub(crate) bands: Vec<Band>,
    /// Sizes skipped because they are too small for this collective (see `Call::new`).
    pub(crate) skipped: Vec<u64>,
}

impl Model {
    /// The pick (algorithm, protocol) at one size, or None if the size is too small.
    fn pick_at(&self, coll: Coll, size: u64, ops: usize) -> Result<Option<(Algo, Proto)>> {
        let call = match Call::new(coll, size, self.input.n_ranks, ops) {
            Ok(c) => c,
            Err(_) => return Ok(None),
        };
        let choice = self.choose(coll, call.model_bytes * ops as u64, self.num_pipe_ops(ops))?;
        Ok(Some((choice.algo, choice.proto)))
    }

    /// Sweep `sizes` (ascending). Sizes too small for the collective are skipped.
    pub(crate) fn sweep(&self, coll: Coll, sizes: &[u64], ops: usize) -> Result<Sweep> {
        // Bad sizes and --ops are errors; sizes too small for the collective are skipped.
        for &size in sizes {
            Call::check(size, ops)?;
        }
        let mut points = Vec::with_capacity(sizes.len());
        let mut skipped = Vec::new();
        for &size in sizes {
            let Ok(call) = Call::new(coll, size, self.input.n_ranks, ops) else {
                skipped.push(size);
                continue;
            };
            let choice =
                self.choose(coll, call.model_bytes * ops as u64, self.num_pipe_ops(ops))?;
            points.push(Point {
                size,
                algo: choice.algo,
                proto: choice.proto,
                channels: choice.channels,
                threads: choice.threads,
                time_us: choice.time_us,
            });
        }
        let mut bands: Vec<Band> = Vec::new();
        for (i, pt) in points.iter().enumerate() {
            match bands.last_mut() {
                Some(b) if b.algo == pt.algo && b.proto == pt.proto => {
                    b.to = pt.size;
                    b.min_channels = b.min_channels.min(pt.channels);
                    b.max_channels = b.max_channels.max(pt.channels);
                }
                _ => {
                    let starts_at = if i == 0 {
                        pt.size
                    } else {
                        self.crossover(coll, ops, points[i - 1].size, pt.size, (pt.algo, pt.proto))?
                    };
                    bands.push(Band {
                        from: pt.size,
                        to: pt.size,
                        algo: pt.algo,
                        proto: pt.proto,
                        min_channels: pt.channels,
                        max_channels: pt.channels,
                        starts_at,
                    });
                }
            }
        }
        Ok(Sweep {
            coll,
            ops,
            points,
            bands,
            skipped,
        })
    }

    /// Smallest size in (lo, hi] where `next` is picked, by bisection
    /// (assumes one change between the two sweep points).
    fn crossover(
        &self,
        coll: Coll,
        ops: usize,
        lo: u64,
        hi: u64,
        next: (Algo, Proto),
    ) -> Result<u64> {
        let (mut lo, mut hi) = (lo, hi);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match self.pick_at(coll, mid, ops)? {
                Some(p) if p == next => hi = mid,
                _ => lo = mid,
            }
        }
        Ok(hi)
    }
}
