//! The init TUNING table NCCL printed, turned into the model's cells, so that a model can
//! use the latency and bandwidth NCCL itself computed on the machine that wrote the log
//! (for an NCCL family planner does not model, or a machine whose graphs it cannot search).
//!
//! NCCL prints latency and bandwidth with one decimal (`%8.1f/%6.1f`, v2.28.9-1
//! src/graph/tuning.cc:580), so the cells are NCCL's rounded to 0.05 µs and 0.05 GB/s;
//! channels, threads and the per-call rules stay the model's.

use super::NcclLog;
use crate::error::{Error, Result};
use crate::model::cells::{AlgoProto, NUM_ALGORITHMS, NUM_PROTOCOLS};
use crate::model::{Algo, Cells, Coll, MaskReason, Model, Proto};
use serde::Serialize;

/// Latency and algorithm bandwidth per function x algorithm x protocol, as the log printed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoggedCells {
    /// `[func][algo][proto]`, µs.
    pub latency: Cells<f32>,
    /// `[func][algo][proto]`, GB/s of algorithm bandwidth; 0 where NCCL disabled the entry.
    pub bandwidth: Cells<f32>,
    /// `[algo][proto]` (the `Max NThreads` row).
    pub(crate) max_threads: AlgoProto<i64>,
    /// Algorithms with a block in the log (no PAT up to 2.22); the others are 0.
    pub algorithms: Vec<Algo>,
    /// The log line where the table starts.
    pub(crate) line: usize,
}

/// The table NCCL printed at init, as cells; a log without one is a bad input.
pub fn table_from_log(log: &NcclLog) -> Result<LoggedCells> {
    let table = log.table.as_ref().ok_or_else(|| {
        Error::bad_input(format!(
            "{}: no init tuning table (run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING; only rank 0 prints it)",
            log.source
        ))
    })?;
    let mut out = LoggedCells {
        latency: Cells::splat(0.0),
        bandwidth: Cells::splat(0.0),
        max_threads: [[0; NUM_PROTOCOLS]; NUM_ALGORITHMS],
        algorithms: table.algorithms.clone(),
        line: table.line,
    };
    let number = |text: &str, what: String| -> Result<f32> {
        text.parse::<f32>().map_err(|_| {
            Error::bad_input(format!(
                "{}:{}: {what} '{text}' is not a number",
                log.source, table.line
            ))
        })
    };
    for a in &table.algorithms {
        for p in Proto::ALL {
            out.max_threads[*a as usize][p as usize] =
                table.max_threads[*a as usize][p as usize].unwrap_or(0);
            for c in Coll::ALL {
                let Some(cell) = &table.cells[c as usize][*a as usize][p as usize] else {
                    continue;
                };
                let what = format!("{} {} {}", c.nccl_name(), a.nccl_name(), p.nccl_name());
                out.latency[c as usize][*a as usize][p as usize] =
                    number(&cell.latency, format!("{what} latency"))?;
                out.bandwidth[c as usize][*a as usize][p as usize] =
                    number(&cell.bandwidth, format!("{what} bandwidth"))?;
            }
        }
    }
    Ok(out)
}

impl LoggedCells {
    /// Replace the model's init tables by NCCL's: latency, bandwidth and maximum threads.
    /// An entry NCCL enabled (bandwidth > 0) loses the model's masks; an entry NCCL printed
    /// as 0 keeps the model's reasons, or gets `ZeroBandwidth` when the model had none.
    /// Per-call rules (NVLS and CollNet masks, channels, threads) stay the model's.
    pub fn apply(&self, model: &mut Model) {
        let tuned = &mut model.tuned;
        tuned.latency = self.latency;
        tuned.bandwidth = self.bandwidth;
        tuned.model_bandwidth = self.bandwidth;
        for a in &self.algorithms {
            tuned.max_threads[*a as usize] = self.max_threads[*a as usize];
        }
        for c in Coll::ALL {
            for a in Algo::ALL {
                for p in Proto::ALL {
                    let masks = &mut tuned.masks[c as usize][a as usize][p as usize];
                    if self.bandwidth[c as usize][a as usize][p as usize] > 0.0 {
                        masks.clear();
                    } else if masks.is_empty() {
                        masks.push(MaskReason::ZeroBandwidth);
                    }
                }
            }
        }
    }
}
