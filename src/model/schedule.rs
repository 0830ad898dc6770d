//! How NCCL groups tasks and spreads them over channels
//! (`ncclPrepareTasks` and `scheduleCollTasksToPlan`, `src/enqueue.cc`): the
//! channel range of NCCL's per-call TUNING line.

use super::select::{Call, Choice};
use super::{div_up, Algo, Model, Proto};
use crate::error::Result;
use serde::Serialize;

/// One task of a group, placed on channels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Placement {
    /// Bytes as NCCL's per-call line prints them.
    pub(crate) bytes: u64,
    pub(crate) algo: Algo,
    pub(crate) proto: Proto,
    pub(crate) channel_lo: usize,
    pub(crate) channel_hi: usize,
    /// Elements on the first, each middle and the last channel.
    pub(crate) count_lo: u64,
    pub(crate) count_mid: u64,
    pub(crate) count_hi: u64,
    pub(crate) warps: usize,
}

impl Placement {
    /// NCCL's line: `AllReduce: 16384 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}`.
    pub(crate) fn nccl_line(&self, coll: super::Coll) -> String {
        format!(
            "{}: {} Bytes -> Algo {} proto {} channel{{Lo..Hi}}={{{}..{}}}",
            coll.nccl_name(),
            self.bytes,
            self.algo.log_name(),
            self.proto.log_name(),
            self.channel_lo,
            self.channel_hi
        )
    }
}

/// A group of `ops` identical calls: NCCL's choice for the aggregate and the
/// channels each task lands on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupPlan {
    pub(crate) call: Call,
    pub choice: Choice,
    pub(crate) tasks: Vec<Placement>,
}

impl Model {
    /// Plan a group of `call.ops` identical calls. Identical tasks are within
    /// NCCL's 4x aggregation window, so they form one aggregate that gets one
    /// choice; then each task is spread over channels in order.
    pub fn plan(&self, call: &Call) -> Result<GroupPlan> {
        let input = &self.input;
        let ops = call.ops;
        let group_bytes = call.model_bytes * ops as u64;
        let choice = self.choose(call.coll, group_bytes, self.num_pipe_ops(ops))?;
        let is_nvls = choice.algo.is_nvls();
        let is_collnet =
            choice.algo.is_collnet() || (choice.algo == Algo::Nvls && input.n_nodes > 1);
        let kind = 2 * is_collnet as usize + is_nvls as usize;
        let comm_channels = input.channels as u64;
        let nvls_channels = input.nvls_channels as u64;
        let kind_max_channels = [
            comm_channels,
            nvls_channels,
            comm_channels,
            comm_channels.min(nvls_channels),
        ][kind];
        let n_ranks = input.n_ranks;
        let mut traffic = call.traffic_bytes(n_ranks);
        if choice.proto == Proto::Ll {
            traffic *= 4;
        }
        let sched = &self.table.scheduler;
        let min_traffic = sched.min_traffic_per_channel;

        // First pass: total traffic and channels of this kind.
        let mut kind_traffic = 0u64;
        let mut kind_channels = 0u64;
        for _ in 0..ops {
            kind_traffic += min_traffic.max(traffic);
            kind_channels = (kind_channels + choice.channels as u64).min(kind_max_channels);
        }
        let per_channel = if sched.round_traffic_per_channel_to_16 {
            div_up(kind_traffic / kind_channels.max(1), 16) * 16
        } else {
            min_traffic.max(kind_traffic / kind_channels.max(1))
        };

        let mut tasks = Vec::with_capacity(ops);
        let mut channel_id = 0u64;
        let mut current = 0u64;
        let warps = choice.threads / self.table.threads.warp_size.max(1) as usize;
        for _ in 0..ops {
            if is_collnet {
                tasks.push(Placement {
                    bytes: call.log_bytes,
                    algo: choice.algo,
                    proto: choice.proto,
                    channel_lo: 0,
                    channel_hi: choice.channels.saturating_sub(1),
                    count_lo: call.count,
                    count_mid: 0,
                    count_hi: 0,
                    warps,
                });
                continue;
            }
            let elem = call.elem_size;
            let mut traffic_per_byte = call.coll.traffic_per_byte(n_ranks);
            if choice.proto == Proto::Ll {
                traffic_per_byte *= 4;
            }
            let cell_size = div_up(div_up(min_traffic, traffic_per_byte), 16) * 16;
            let elements_per_cell = cell_size / elem;
            let cells = div_up(call.count * elem, cell_size);
            let traffic_per_element = elem * traffic_per_byte;
            let traffic_per_cell = cell_size * traffic_per_byte;
            let mut cells_per_channel = cells.min(div_up(per_channel, traffic_per_cell)).max(1);
            let mut cells_lo = if channel_id + 1 == kind_max_channels {
                // The last channel takes everything.
                cells
            } else {
                cells.min(div_up(
                    per_channel.saturating_sub(current),
                    traffic_per_cell,
                ))
            };
            let mut n_mid = ((cells - cells_lo) / cells_per_channel) as i64;
            let mut cells_hi = (cells - cells_lo) % cells_per_channel;
            let n_channels = (cells_lo != 0) as i64 + n_mid + (cells_hi != 0) as i64;
            if (kind_max_channels as i64) < channel_id as i64 + n_channels {
                // Overflowed the channels: squeeze the rest into the remaining ones.
                n_mid = kind_max_channels as i64 - channel_id as i64 - 2;
                let divisor = (n_mid + 1).max(1) as u64;
                cells_per_channel = (cells - cells_lo) / divisor;
                cells_hi = cells_per_channel + (cells - cells_lo) % divisor;
            }
            if cells_hi == 0 && n_mid != 0 {
                cells_hi = cells_per_channel;
                n_mid -= 1;
            }
            if cells_lo == 0 {
                // The first channel is full: start on the next one.
                channel_id += 1;
                if n_mid == 0 {
                    cells_lo = cells_hi;
                    cells_hi = 0;
                } else {
                    cells_lo = cells_per_channel;
                    n_mid -= 1;
                }
            }
            let count_mid = if n_mid != 0 {
                cells_per_channel * elements_per_cell
            } else {
                0
            };
            let mut count_lo = cells_lo * elements_per_cell;
            let mut count_hi = cells_hi * elements_per_cell;
            let excess = cells * elements_per_cell - call.count;
            if count_hi != 0 {
                count_hi -= excess.min(count_hi);
            } else {
                count_lo -= excess.min(count_lo);
            }
            let n_channels = (count_lo != 0) as i64 + n_mid + (cells_hi != 0) as i64;
            let lo = channel_id;
            let hi = (channel_id as i64 + n_channels - 1).max(lo as i64) as u64;
            tasks.push(Placement {
                bytes: call.log_bytes,
                algo: choice.algo,
                proto: choice.proto,
                channel_lo: lo as usize,
                channel_hi: hi as usize,
                count_lo,
                count_mid,
                count_hi,
                warps,
            });
            // Advance the current channel and its remaining traffic budget.
            if count_hi != 0 {
                channel_id += (n_channels - 1).max(0) as u64;
                current = cells_hi * elements_per_cell * traffic_per_element;
            } else if n_mid != 0 {
                channel_id += n_channels.max(0) as u64;
                current = 0;
            } else {
                current += cells_lo * elements_per_cell * traffic_per_element;
            }
            if current >= per_channel && channel_id + 1 != kind_max_channels {
                channel_id += 1;
                current = 0;
            }
        }
        Ok(GroupPlan {
            call: *call,
            choice,
            tasks,
        })
    }
}
