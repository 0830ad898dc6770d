//! One collective call as NCCL sizes, costs and launches it: the per-call
//! cost table (`updateCollCostTable`, `ncclTopoGetAlgoTime`), the argmin in
//! NCCL's tie order, and channels and threads for the winner
//! (`topoGetAlgoInfo`, `src/enqueue.cc`).

use super::cells::{AlgoProto, NUM_ALGORITHMS, NUM_PROTOCOLS};
use super::rules::Rule;
use super::tune::MaskReason;
use super::{div_up, log2i, Algo, Coll, Model, Proto};
use crate::error::{Error, Result};
use crate::topo::CpuArch;
use crate::units::{format_size, MAX_SIZE};
use serde::Serialize;

/// Size of the element type the planner models (nccl-tests' default, float32).
pub(crate) const FLOAT_BYTES: u64 = 4;

/// One call (or `ops` identical calls in one group), in NCCL's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Call {
    pub(crate) coll: Coll,
    /// The size asked for, as nccl-tests reads it (the whole buffer for AllGather/ReduceScatter).
    pub(crate) size: u64,
    /// Task count in elements of the task's type (bytes for AllGather/Broadcast,
    /// which NCCL retypes to int8; float32 otherwise).
    pub(crate) count: u64,
    pub(crate) elem_size: u64,
    /// Bytes in NCCL's per-call line (`count * typeSize`: per rank for AllGather/ReduceScatter).
    pub(crate) log_bytes: u64,
    /// Bytes the model costs for one op (`nBytes`: all ranks' data for AllGather/ReduceScatter).
    pub model_bytes: u64,
    /// Identical ops in one group (`--ops`).
    pub(crate) ops: usize,
}

/// Largest `--ops`: bigger groups may need several kernel plans, which the
/// planner does not model.
pub(crate) const MAX_OPS: usize = 64;

impl Call {
    /// Map a size to NCCL's task the way nccl-tests does (float32 elements;
    /// AllGather/ReduceScatter give each rank `size/n` rounded down to 16 bytes).
    pub fn new(coll: Coll, size: u64, n_ranks: usize, ops: usize) -> Result<Call> {
        Call::check(size, ops)?;
        Call::build(coll, size, n_ranks.max(1) as u64, ops)
    }

    /// The limits on every size and on `--ops`.
    pub(crate) fn check(size: u64, ops: usize) -> Result<()> {
        if size == 0 {
            return Err(Error::bad_input("invalid size 0: must be at least 1 byte"));
        }
        if size > MAX_SIZE {
            return Err(Error::bad_input(format!(
                "invalid size {size}: larger than the 1 TiB (2^40 bytes) limit"
            )));
        }
        if ops == 0 || ops > MAX_OPS {
            return Err(Error::bad_input(format!(
                "invalid --ops {ops}: must be between 1 and {MAX_OPS}"
            )));
        }
        Ok(())
    }

    fn build(coll: Coll, size: u64, n: u64, ops: usize) -> Result<Call> {
        let floats = size / FLOAT_BYTES;
        let (log_bytes, model_bytes) = if coll.is_ag_rs() {
            let per_rank = (floats / n) & !(16 / FLOAT_BYTES - 1);
            (per_rank * FLOAT_BYTES, per_rank * FLOAT_BYTES * n)
        } else {
            (floats * FLOAT_BYTES, floats * FLOAT_BYTES)
        };
        if log_bytes == 0 {
            // Both rules in the message: why 3 is refused while 1001 runs (as 1000).
            let why = if coll.is_ag_rs() {
                format!(
                    "{} on {n} ranks gives each rank size/{n} rounded down to 16 bytes, so give at least {} B",
                    coll.nccl_name(),
                    16 * n
                )
            } else {
                "sizes are counts of float32 elements (4 bytes), rounded down as nccl-tests does (1001 B runs as 1000 B), so give at least 4 B".to_string()
            };
            return Err(Error::bad_input(format!(
                "size {} is too small: {why}",
                format_size(size)
            )));
        }
        let (count, elem_size) = match coll {
            Coll::AllGather | Coll::Broadcast => (log_bytes, 1),
            _ => (log_bytes / FLOAT_BYTES, FLOAT_BYTES),
        };
        Ok(Call {
            coll,
            size,
            count,
            elem_size,
            log_bytes,
            model_bytes,
            ops,
        })
    }

    /// `trafficBytes` of one task before the LL x4.
    pub(crate) fn traffic_bytes(&self, n_ranks: usize) -> u64 {
        self.count * self.elem_size * self.coll.traffic_per_byte(n_ranks)
    }
}

/// One algorithm x protocol for one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub algo: Algo,
    pub proto: Proto,
    /// Why it cannot run (init layers, then per call); empty = usable.
    pub masks: Vec<MaskReason>,
    /// Latency term, µs (`lat * latCount`, after the ring plateau factor).
    pub(crate) latency_us: f32,
    /// Algorithm bandwidth used, GB/s (after the tree correction).
    pub(crate) bandwidth: f32,
    /// Bandwidth term, µs (`nBytes / (1000 * bw)`).
    pub(crate) bandwidth_term_us: f32,
    /// NCCL's predicted time for the whole group, µs (`-1` when masked).
    pub time_us: f32,
    /// Channels and threads NCCL would launch if this pair won.
    pub(crate) channels: usize,
    pub(crate) threads: usize,
}

impl Candidate {
    pub fn usable(&self) -> bool {
        self.masks.is_empty() && self.time_us >= 0.0
    }
}

/// All 21 pairs for one call and NCCL's pick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub(crate) call: Call,
    /// Bytes of the aggregate (`ops * model_bytes`).
    pub(crate) group_bytes: u64,
    /// `numPipeOps`: ceil(ops / channels).
    pub(crate) num_pipe_ops: u64,
    /// In NCCL's scan order (algorithm, then protocol).
    pub candidates: Vec<Candidate>,
    /// Index into `candidates`.
    pub(crate) winner: usize,
}

impl Evaluation {
    pub fn winner(&self) -> &Candidate {
        &self.candidates[self.winner]
    }
}

/// NCCL's choice for one aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Choice {
    pub algo: Algo,
    pub proto: Proto,
    pub time_us: f32,
    pub channels: usize,
    pub threads: usize,
}

impl Model {
    /// Per-call masks (`updateCollCostTable`): the algorithm is skipped for this function.
    pub(crate) fn call_mask(&self, coll: Coll, algo: Algo) -> Option<MaskReason> {
        let input = &self.input;
        if input.n_ranks == 1 {
            return (algo != Algo::Ring).then_some(MaskReason::SingleRank);
        }
        let table = &self.table;
        let max_local = table.max_direct_arity + 1;
        if algo.is_collnet() {
            // collNetSupport: collnet on, and the plugin supports this (float32, sum).
            if !input.collnet_enable {
                return Some(MaskReason::CollnetUnsupported);
            }
            // CollNetDirect from 2.23, CollNetChain from 2.28.
            let limited = match algo {
                Algo::CollNetDirect => table.has(Rule::CollnetDirectLocalRanksMask),
                _ => table.has(Rule::CollnetChainLocalRanksMask),
            };
            if limited && input.local_ranks > max_local {
                return Some(MaskReason::CollnetTooManyLocalRanks(input.local_ranks));
            }
        }
        if algo.is_nvls() {
            if !input.nvls_state.supported() {
                return Some(MaskReason::NvlsUnsupported(input.nvls_state.why()));
            }
            if coll != Coll::AllReduce
                && input.local_ranks > table.max_nvls_arity
                && table.has(Rule::NvlsLocalRankLimitOutsideAllReduce)
            {
                return Some(MaskReason::NvlsArity(input.local_ranks));
            }
            if algo == Algo::Nvls && coll.is_ag_rs() {
                if input.n_nodes > 1 && table.has(Rule::NvlsAllGatherReduceScatterOneNodeOnly) {
                    return Some(MaskReason::NvlsOneNodeOnly);
                }
                if input.n_ranks > table.max_nvls_arity
                    && table.has(Rule::NvlsAllGatherReduceScatterRankLimit)
                {
                    return Some(MaskReason::NvlsRankLimit(input.n_ranks));
                }
            }
        }
        if algo == Algo::Nvls && !input.collnet_enable && input.n_nodes > 1 {
            return Some(MaskReason::NvlsMultiNodeNeedsCollnet);
        }
        None
    }

    /// `ncclTopoGetAlgoTime` without the per-call masks: (time, latency term,
    /// bandwidth used), or None when the bandwidth is 0.
    pub fn algo_time(
        &self,
        coll: Coll,
        algo: Algo,
        proto: Proto,
        n_bytes: u64,
        num_pipe_ops: u64,
    ) -> Option<(f32, f32, f32)> {
        let (c, a, p) = (coll as usize, algo as usize, proto as usize);
        let mut bw = self.tuned.bandwidth[c][a][p];
        let mut lat = self.tuned.latency[c][a][p];
        if bw == 0.0 {
            return None;
        }
        let input = &self.input;
        let log_size = log2i(n_bytes >> 6);
        if algo == Algo::Tree && coll == Coll::AllReduce && (0..23).contains(&log_size) {
            if let Some(k) = self.table.tree_correction(proto, log_size) {
                bw *= k as f32;
            }
        }
        if algo == Algo::NvlsTree
            && coll == Coll::AllReduce
            && self.table.behaviour.nvls_tree_correction_sm100_x86
            && (0..24).contains(&log_size)
            && input.min_sm >= 100
            && input.cpu_arch == CpuArch::X86
        {
            if let Some(k) = self.table.tree_correction(proto, log_size) {
                bw *= k as f32;
            }
        }
        if algo == Algo::Ring {
            lat = self.ring_plateau(coll, proto, n_bytes, lat);
        }
        // Tree pipelining saves latency when ops are aggregated.
        let lat_count = if algo == Algo::Ring {
            num_pipe_ops
        } else {
            div_up(num_pipe_ops, self.table.max_dev_work_batch_colls as u64)
        };
        let lat_term = lat * lat_count as f32;
        let bw_term = n_bytes as f32 / (1000.0f32 * bw);
        Some((lat_term + bw_term, lat_term, bw))
    }

    /// Ring/Simple AllReduce across nodes: the plateau factor on the latency.
    fn ring_plateau(&self, coll: Coll, proto: Proto, n_bytes: u64, lat: f32) -> f32 {
        let input = &self.input;
        let f = &self.table.factors;
        if proto == Proto::Simple
            && input.n_nodes > 1
            && coll == Coll::AllReduce
            && n_bytes / (input.channels as u64 * input.n_ranks as u64).max(1)
                >= f.ring_simple_plateau_min_bytes_per_rank_channel
        {
            // Plateau effect of multi-node rings.
            let k = if input.min_sm < 80 {
                f.ring_simple_plateau_latency_pre_sm80
            } else {
                f.ring_simple_plateau_latency
            };
            return (lat as f64 * k) as f32;
        }
        lat
    }

    /// Fill a masked Ring candidate that won as NCCL's backup (2.19-2.23).
    fn backup_candidate(
        &self,
        c: &mut Candidate,
        coll: Coll,
        n_bytes: u64,
        num_pipe_ops: u64,
        time_us: f32,
    ) {
        let Some(backup) = &self.tuned.ring_backup else {
            return;
        };
        let bw = backup[coll as usize][c.proto as usize];
        let lat = self.tuned.latency[coll as usize][Algo::Ring as usize][c.proto as usize];
        c.latency_us = self.ring_plateau(coll, c.proto, n_bytes, lat) * num_pipe_ops as f32;
        c.bandwidth = bw;
        c.bandwidth_term_us = n_bytes as f32 / (1000.0 * bw);
        c.time_us = time_us;
        c.masks.clear();
    }

    /// The per-call cost table (`-1` = ignored), as NCCL fills it.
    pub fn cost_table(&self, coll: Coll, n_bytes: u64, num_pipe_ops: u64) -> AlgoProto<f32> {
        let mut table = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
        if self.input.n_ranks == 1 {
            table[Algo::Ring as usize][Proto::Simple as usize] = 0.0;
            return table;
        }
        for a in Algo::ALL {
            if self.call_mask(coll, a).is_some() {
                continue;
            }
            for p in Proto::ALL {
                table[a as usize][p as usize] =
                    match self.algo_time(coll, a, p, n_bytes, num_pipe_ops) {
                        Some((t, _, _)) => t,
                        None => -1.0,
                    };
            }
        }
        table
    }

    /// `topoGetAlgoInfo`'s argmin: strictly smallest non-negative time, scanning
    /// algorithms then protocols in index order (ties go to the first).
    pub fn argmin(table: &AlgoProto<f32>) -> Option<(Algo, Proto, f32)> {
        Model::argmin_below(table, f32::MAX)
    }

    /// The argmin as this table's family runs it: up to 2.28 it starts at one
    /// hour, so nothing slower is picked (v2.28.9-1 src/enqueue.cc:1828).
    pub fn argmin_for_family(&self, table: &AlgoProto<f32>) -> Option<(Algo, Proto, f32)> {
        let start = if self.table.has(Rule::ArgminOneHourLimit) {
            3_600_000_000.0
        } else {
            f32::MAX
        };
        Model::argmin_below(table, start)
    }

    /// The argmin with `min_time` as the starting bound (exclusive).
    pub(crate) fn argmin_below(table: &AlgoProto<f32>, start: f32) -> Option<(Algo, Proto, f32)> {
        let mut best: Option<(Algo, Proto, f32)> = None;
        let mut min_time = start;
        for a in Algo::ALL {
            for p in Proto::ALL {
                let t = table[a as usize][p as usize];
                if t == -1.0 {
                    continue;
                }
                if t >= 0.0 && t < min_time {
                    min_time = t;
                    best = Some((a, p, t));
                }
            }
        }
        best
    }

    /// Channels and threads NCCL launches for `algo`/`proto` at `n_bytes`. The per-thread thresholds come from
    /// `NCCL_THREAD_THRESHOLDS` (any `long`): their products saturate (NCCL's int64 arithmetic would overflow),
    /// so a huge threshold means "fewest channels and threads", in debug and release alike.
    pub fn channels_threads(&self, algo: Algo, proto: Proto, n_bytes: u64) -> (usize, usize) {
        let input = &self.input;
        let (a, p) = (algo as usize, proto as usize);
        let mut nc = input.channels as i64;
        let mut nt = self.tuned.max_threads[a][p];
        let mut threshold = self.tuned.thread_thresholds[a][p];
        let bytes = i64::try_from(n_bytes).unwrap_or(i64::MAX);
        let work = |factors: &[i64]| factors.iter().fold(1i64, |p, f| p.saturating_mul(*f));
        match algo {
            Algo::CollNetDirect => {
                let heads = input.collnet_heads as i64;
                let mut switch = 16i64;
                let mut more = true;
                while switch >= 1 && more {
                    loop {
                        more = bytes < work(&[nc, nt, heads, threshold]);
                        if !(more && nc > switch) {
                            break;
                        }
                        if nc == switch + switch / 2 {
                            threshold /= 2;
                        }
                        nc -= 1;
                    }
                    switch /= 2;
                }
            }
            Algo::Nvls | Algo::NvlsTree => {
                nc = if input.n_nodes > 1
                    && algo == Algo::Nvls
                    && self.table.has(Rule::NvlsMultiNodeChannelsMin)
                {
                    (input.nvls_channels as i64).min(input.channels as i64)
                } else {
                    input.nvls_channels as i64
                };
            }
            _ => {
                while bytes < work(&[nc, nt, threshold]) && nc >= 2 {
                    nc -= 1;
                }
            }
        }
        if !matches!(algo, Algo::Nvls | Algo::NvlsTree | Algo::CollNetDirect) {
            while bytes < work(&[nc, nt, threshold]) && nt % 128 == 0 && nt > 0 {
                nt /= 2;
            }
        }
        let warp = self.table.threads.warp_size;
        if proto == Proto::Simple {
            if algo == Algo::Ring {
                nt += warp; // extra warp for sync
            }
            if algo == Algo::Tree {
                nt += 4 * warp;
            }
        }
        if nt / warp < 3 {
            nt = 3 * warp;
        }
        if (algo == Algo::Tree && self.table.has(Rule::TreeAllThreads)) || algo == Algo::Pat {
            // Tree (from 2.22) and PAT always use all threads.
            nt = self.table.threads.max_nthreads;
        }
        (nc.max(0) as usize, nt.max(0) as usize)
    }

    /// Ring on its backup bandwidths (`comm->ringbdw`, NCCL 2.19-2.23): NCCL's
    /// pick when every entry is masked, or None.
    pub(crate) fn ring_backup(
        &self,
        coll: Coll,
        n_bytes: u64,
        num_pipe_ops: u64,
    ) -> Option<(Algo, Proto, f32)> {
        let backup = self.tuned.ring_backup.as_ref()?;
        if self.input.n_ranks == 1 {
            return None;
        }
        let mut table = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
        for p in Proto::ALL {
            let bw = backup[coll as usize][p as usize];
            if self.tuned.bandwidth[coll as usize][Algo::Ring as usize][p as usize] == 0.0
                && bw != 0.0
            {
                let lat = self.tuned.latency[coll as usize][Algo::Ring as usize][p as usize];
                let lat = self.ring_plateau(coll, p, n_bytes, lat);
                table[Algo::Ring as usize][p as usize] =
                    lat * num_pipe_ops as f32 + n_bytes as f32 / (1000.0f32 * bw);
            }
        }
        self.argmin_for_family(&table)
    }

    /// The argmin, then the Ring backup where the family has one.
    fn pick(
        &self,
        table: &AlgoProto<f32>,
        coll: Coll,
        n_bytes: u64,
        num_pipe_ops: u64,
    ) -> Result<(Algo, Proto, f32)> {
        self.argmin_for_family(table)
            .or_else(|| self.ring_backup(coll, n_bytes, num_pipe_ops))
            .ok_or_else(|| self.nothing_left(coll))
    }

    /// NCCL's pick for an aggregate of `n_bytes` (`getAlgoInfo` without a tuner plugin).
    pub fn choose(&self, coll: Coll, n_bytes: u64, num_pipe_ops: u64) -> Result<Choice> {
        let table = self.cost_table(coll, n_bytes, num_pipe_ops);
        let (algo, proto, time_us) = self.pick(&table, coll, n_bytes, num_pipe_ops)?;
        let (channels, threads) = self.channels_threads(algo, proto, n_bytes);
        Ok(Choice {
            algo,
            proto,
            time_us,
            channels,
            threads,
        })
    }

    /// NCCL's error when every entry is masked: a usage error when the user
    /// lists did it, an internal error otherwise.
    fn nothing_left(&self, coll: Coll) -> Error {
        let mut msg = format!(
            "no algorithm/protocol available for function {} with datatype ncclFloat32",
            coll.nccl_name()
        );
        if let Some(a) = &self.env.algo {
            msg.push_str(&format!(". NCCL_ALGO was set to {a}"));
        }
        if let Some(p) = &self.env.proto {
            msg.push_str(&format!(". NCCL_PROTO was set to {p}"));
        }
        if self.env.user_lists_set() {
            Error::bad_input(msg)
        } else {
            Error::runtime(format!("{msg} (NCCL would report an internal error)"))
        }
    }

    /// `numPipeOps` for a group of `ops` collectives: `ceil(ops / nChannels)`
    /// from 2.22, 1 in 2.20-2.21. (2.18-2.19 give an aggregate its own channel
    /// count, rule `aggregate_channels_2_18`, not modelled: the 2.22 rule is used.)
    pub fn num_pipe_ops(&self, ops: usize) -> u64 {
        if self.table.has(Rule::PipeOpsOne) {
            return 1;
        }
        div_up(ops as u64, self.input.channels.max(1) as u64)
    }

    /// Every pair for one call, with terms, masks and channels, and NCCL's pick.
    pub fn evaluate(&self, call: &Call) -> Result<Evaluation> {
        let group_bytes = call.model_bytes * call.ops as u64;
        let num_pipe_ops = self.num_pipe_ops(call.ops);
        let table = self.cost_table(call.coll, group_bytes, num_pipe_ops);
        let (win_algo, win_proto, win_time) =
            self.pick(&table, call.coll, group_bytes, num_pipe_ops)?;
        // The winner came from the Ring backup (2.19-2.23) when it is masked in the table.
        let from_backup = table[win_algo as usize][win_proto as usize] < 0.0;
        let mut candidates = Vec::with_capacity(21);
        let mut winner = 0;
        for a in Algo::ALL {
            let call_mask = self.call_mask(call.coll, a);
            for p in Proto::ALL {
                let mut masks: Vec<MaskReason> = self.tuned.masks_of(call.coll, a, p).to_vec();
                if let Some(m) = &call_mask {
                    if masks.is_empty() {
                        masks.push(m.clone());
                    }
                }
                let timing = if self.input.n_ranks == 1 {
                    // One rank: NCCL only copies, Ring/Simple at time 0.
                    (a == Algo::Ring && p == Proto::Simple).then_some((0.0, 0.0, 0.0))
                } else {
                    self.algo_time(call.coll, a, p, group_bytes, num_pipe_ops)
                };
                let (time_us, latency_us, bandwidth) = match (&timing, masks.is_empty()) {
                    (Some((t, l, b)), true) => (*t, *l, *b),
                    (Some((_, l, b)), false) => (-1.0, *l, *b),
                    (None, _) => (-1.0, 0.0, 0.0),
                };
                if masks.is_empty() && timing.is_none() {
                    masks.push(MaskReason::ZeroBandwidth);
                }
                let bandwidth_term_us = if bandwidth > 0.0 {
                    group_bytes as f32 / (1000.0 * bandwidth)
                } else {
                    0.0
                };
                let (channels, threads) = self.channels_threads(a, p, group_bytes);
                let mut candidate = Candidate {
                    algo: a,
                    proto: p,
                    masks,
                    latency_us,
                    bandwidth,
                    bandwidth_term_us,
                    time_us,
                    channels,
                    threads,
                };
                if a == win_algo && p == win_proto {
                    winner = candidates.len();
                    if from_backup {
                        self.backup_candidate(
                            &mut candidate,
                            call.coll,
                            group_bytes,
                            num_pipe_ops,
                            win_time,
                        );
                    }
                }
                candidates.push(candidate);
            }
        }
        Ok(Evaluation {
            call: *call,
            group_bytes,
            num_pipe_ops,
            candidates,
            winner,
        })
    }

    /// Bus-bandwidth factor of an algorithm, the inverse of the ratio NCCL's
    /// model uses to turn bus into algorithm bandwidth: rings `nsteps/nRanks`,
    /// NVLS the same from 2.28 (6/5 before), trees and CollNet 2 (AllReduce),
    /// 1 where NCCL does not convert.
    pub fn bus_factor(&self, coll: Coll, algo: Algo) -> f64 {
        let n = self.input.n_ranks as f64;
        let table = &self.table;
        // The same exceptions as the model's conversion (`tune`): before 2.23
        // only CollNetDirect AllGather/ReduceScatter keep bus bandwidth.
        let kept = if table.has(Rule::AlgbwSkipNonRingAllGatherReduceScatter) {
            algo != Algo::Ring && coll.is_ag_rs()
        } else {
            algo == Algo::CollNetDirect && coll.is_ag_rs()
        };
        if kept {
            return 1.0;
        }
        match algo {
            Algo::Ring => coll.ring_steps(self.input.n_ranks) as f64 / n,
            Algo::Nvls | Algo::NvlsTree if table.has(Rule::NvlsEfficiency) => {
                coll.ring_steps(self.input.n_ranks) as f64 / n
            }
            Algo::NvlsTree if table.has(Rule::NvlsModel2_18) => {
                // Inverse of 0.7*nNodes/(2(nNodes-1)) (v2.18.6-1 src/graph/tuning.cc:198).
                let nodes = self.input.n_nodes as f64;
                2.0 * (nodes - 1.0) / (0.7 * nodes)
            }
            // Inverse of 5/6 (v2.18.6-1 :197, v2.19.4-1 :199).
            Algo::Nvls | Algo::NvlsTree => 6.0 / 5.0,
            _ => 2.0,
        }
    }
}
