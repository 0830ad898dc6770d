//! One algorithm x protocol pair, the unit every stage after the model speaks of.

use super::{Algo, AnyAlgo, OwnAlgo, Proto};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One algorithm x protocol pair, written `Ring/LL128`: NCCL's algorithm or
/// one of planner's own (`AnyAlgo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pair {
    pub algo: AnyAlgo,
    pub proto: Proto,
}

impl Pair {
    pub fn new(algo: impl Into<AnyAlgo>, proto: Proto) -> Self {
        Pair {
            algo: algo.into(),
            proto,
        }
    }

    /// `ALGO/PROTO`, either NCCL spelling of the algorithm, any case, with or
    /// without `_` / `-` (`ring/ll128`, `NVLS_TREE/SIMPLE`, `nvls-tree/simple`),
    /// or one of planner's pairs beyond NCCL (`OneShot/LL`, `TwoShot/Simple`,
    /// `model::beyond`), each with the one protocol its kernel uses.
    pub fn parse(text: &str) -> Result<Pair> {
        let bad = || {
            Error::bad_input(format!(
                "invalid pair '{text}': expected ALGO/PROTO such as Ring/LL128 (algorithms: {}; protocols: {})",
                Algo::ALL.map(|a| a.nccl_name()).join(", "),
                Proto::ALL.map(|p| p.nccl_name()).join(", ")
            ))
        };
        let (a, p) = text.trim().split_once('/').ok_or_else(bad)?;
        if let Some(algo) = OwnAlgo::parse(a.trim()) {
            let proto = Proto::parse(p.trim()).map_err(|_| bad())?;
            if proto != algo.protocol() {
                return Err(Error::bad_input(format!(
                    "invalid pair '{text}': {} runs with one protocol only ({})",
                    algo.name(),
                    Pair::new(algo, algo.protocol())
                )));
            }
            return Ok(Pair::new(algo, proto));
        }
        let algo = Algo::parse(&a.trim().replace(['_', '-'], "")).map_err(|_| bad())?;
        let proto = Proto::parse(p.trim()).map_err(|_| bad())?;
        Ok(Pair::new(algo, proto))
    }

    /// Whether the pair is one of planner's own beyond NCCL's menu.
    pub fn is_beyond_nccl(&self) -> bool {
        self.algo.is_beyond_nccl()
    }

    /// The pair as NCCL's (algorithm, protocol), None for planner's own.
    pub(crate) fn nccl(&self) -> Option<(Algo, Proto)> {
        self.algo.nccl().map(|a| (a, self.proto))
    }

    /// The pairs `--pairs all` covers: Ring and Tree with each protocol.
    /// (NVLS and NVLSTree are never run here: multicast stays off; CollNet
    /// needs a SHARP network and PAT one GPU per node, which NCCL reports as
    /// unavailable when asked.)
    pub fn ring_tree_all() -> Vec<Pair> {
        let mut pairs = Vec::new();
        for algo in [Algo::Ring, Algo::Tree] {
            for proto in Proto::ALL {
                pairs.push(Pair::new(algo, proto));
            }
        }
        pairs
    }
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.algo.name(), self.proto.nccl_name())
    }
}
