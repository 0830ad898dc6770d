//! NCCL's cost-table shape, `[NCCL_NUM_FUNCTIONS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]`
//! (`comm.h`: `latencies`, `bandwidths`), as one type indexed by name.

use super::{Algo, Coll, Proto};
use serde::Serialize;
use std::ops::{Deref, DerefMut, Index, IndexMut};

/// `NCCL_NUM_FUNCTIONS`: the collectives of NCCL's tables (`Coll::ALL`).
pub const NUM_FUNCTIONS: usize = 5;
/// `NCCL_NUM_ALGORITHMS`: NCCL's menu (`Algo::ALL`).
pub const NUM_ALGORITHMS: usize = 7;
/// `NCCL_NUM_PROTOCOLS` (`Proto::ALL`).
pub const NUM_PROTOCOLS: usize = 3;
/// `NCCL_NUM_HW_LINKS`: the hardware latency classes (`tune::Hw`: NVLink, PCI, network).
pub const NUM_HW_LINKS: usize = 3;

/// One value per (algorithm, protocol), NCCL's `[algo][proto]` rows.
pub(crate) type AlgoProto<T> = [[T; NUM_PROTOCOLS]; NUM_ALGORITHMS];

/// One value per (function, algorithm, protocol). Indexed by
/// `cells[(coll, algo, proto)]`; the raw `[func][algo][proto]` array stays
/// reachable (and serializes as before) for the tables printed by index.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Cells<T>(pub [AlgoProto<T>; NUM_FUNCTIONS]);

impl<T: Copy> Cells<T> {
    /// Every cell set to `value`.
    pub fn splat(value: T) -> Self {
        Cells([[[value; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_FUNCTIONS])
    }
}

impl<T> Cells<T> {
    /// Every cell from `f(coll, algo, proto)`.
    pub(crate) fn from_fn(mut f: impl FnMut(Coll, Algo, Proto) -> T) -> Self {
        Cells(std::array::from_fn(|c| {
            std::array::from_fn(|a| {
                std::array::from_fn(|p| f(Coll::ALL[c], Algo::ALL[a], Proto::ALL[p]))
            })
        }))
    }
    pub(crate) fn of_mut(&mut self, coll: Coll) -> &mut AlgoProto<T> {
        &mut self.0[coll as usize]
    }
}

impl<T> Index<(Coll, Algo, Proto)> for Cells<T> {
    type Output = T;
    fn index(&self, (c, a, p): (Coll, Algo, Proto)) -> &T {
        &self.0[c as usize][a as usize][p as usize]
    }
}

impl<T> IndexMut<(Coll, Algo, Proto)> for Cells<T> {
    fn index_mut(&mut self, (c, a, p): (Coll, Algo, Proto)) -> &mut T {
        &mut self.0[c as usize][a as usize][p as usize]
    }
}

/// `cells[func]`: the raw `[algo][proto]` rows, for tables walked by index.
impl<T> Index<usize> for Cells<T> {
    type Output = AlgoProto<T>;
    fn index(&self, func: usize) -> &AlgoProto<T> {
        &self.0[func]
    }
}

impl<T> IndexMut<usize> for Cells<T> {
    fn index_mut(&mut self, func: usize) -> &mut AlgoProto<T> {
        &mut self.0[func]
    }
}

impl<T> Deref for Cells<T> {
    type Target = [AlgoProto<T>; NUM_FUNCTIONS];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T> DerefMut for Cells<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<T: Copy + Default> Default for Cells<T> {
    fn default() -> Self {
        Cells::splat(T::default())
    }
}
