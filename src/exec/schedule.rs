//! The step schedule of every kernel, written once more on the CPU: how a
//! buffer is cut into channels and chunks, and which operation each rank's CTA
//! does at each step (receive from whom, reduce with which input slice, write
//! which output slice, send to whom). `kernels/collectives.cu` runs the same
//! loops; `simulate` plays them through 8-slot FIFOs with exact integer data,
//! so tests can check every rank count, channel count and ragged size without
//! a GPU. Sizes and offsets here are in elements unless a name says bytes.

use crate::exec::plan::{tree_split_threads, ExecPlan};
use crate::model::{Algo, AnyAlgo, Coll, Proto};
use std::collections::{HashMap, VecDeque};

/// NCCL_STEPS: slots per connection FIFO (`device.h:26`).
pub const FIFO_STEPS: usize = 8;

/// Per-connection FIFO bytes (all 8 slots) per protocol, NCCL's defaults
/// (`init.cc:810-828`).
pub(crate) const LL_BUFF_BYTES: usize = 8 * 512 * 8 * 16; // lines/thread x threads x steps x 16 B = 512 KiB
pub(crate) const LL128_BUFF_BYTES: usize = 120 * 640 * 8 * 8; // 4915200 B
pub const SIMPLE_BUFF_BYTES: usize = 1 << 22; // 4 MiB

/// Chunk grain per protocol (`device.h:328-334`): LL 16 B, LL128 1920 B, Simple 512 B.
pub(crate) fn grain_bytes(protocol: Proto) -> usize {
    match protocol {
        Proto::Ll => 16,
        Proto::Ll128 => 1920,
        Proto::Simple => 512,
    }
}

pub(crate) fn buff_bytes(protocol: Proto) -> usize {
    match protocol {
        Proto::Ll => LL_BUFF_BYTES,
        Proto::Ll128 => LL128_BUFF_BYTES,
        Proto::Simple => SIMPLE_BUFF_BYTES,
    }
}

/// How one channel's data is cut into operations and FIFO steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// Bytes of one FIFO slot (wire format).
    pub step_bytes: usize,
    /// Most elements one operation moves (a chunk).
    pub chunk_elems: usize,
    /// Simple only: an operation is cut into this many slices, each posted on its own.
    pub slices_per_chunk: usize,
    /// FIFO slots one slice occupies (1 for LL and LL128).
    pub steps_per_slice: usize,
}

/// NCCL's chunk size (`calcCollChunking`, `enqueue.cc`)
/// for a plan running on `n_channels` channels.
pub fn chunking(plan: &ExecPlan) -> Chunking {
    let protocol = plan.protocol;
    let step_bytes = buff_bytes(protocol) / FIFO_STEPS;
    // CHUNKSTEPS / SLICESTEPS (collectives.h:19-35) apply to Ring/Simple only.
    let (chunk_steps, slice_steps) = match (plan.algorithm, protocol, plan.collective) {
        (AnyAlgo::Nccl(Algo::Ring), Proto::Simple, Coll::Broadcast) => (1, 1),
        (AnyAlgo::Nccl(Algo::Ring), Proto::Simple, _) => (4, 2),
        _ => (1, 1),
    };
    let mut chunk_bytes = step_bytes * chunk_steps;
    match protocol {
        Proto::Ll => chunk_bytes /= 2,
        Proto::Ll128 => chunk_bytes = chunk_bytes / 16 * 15,
        Proto::Simple => {}
    }
    if plan.algorithm == Algo::Tree && protocol == Proto::Ll128 {
        // One node: nNodes = 1, ppn = nRanks.
        let ppn = plan.n_ranks as f64;
        let nsteps = 1.0 + 0.1 * ppn;
        let n_bytes = plan.bytes as usize;
        while ((n_bytes / (plan.n_channels * chunk_bytes)) as f64) < nsteps * 64.0 / ppn
            && chunk_bytes > 131072
        {
            chunk_bytes /= 2;
        }
        while ((n_bytes / (plan.n_channels * chunk_bytes)) as f64) < nsteps * 16.0 / ppn
            && chunk_bytes > 32768
        {
            chunk_bytes /= 2;
        }
    }
    let grain = grain_bytes(protocol);
    chunk_bytes = chunk_bytes / grain * grain;
    Chunking {
        step_bytes,
        chunk_elems: chunk_bytes / plan.dtype.size() as usize,
        slices_per_chunk: chunk_steps / slice_steps,
        steps_per_slice: slice_steps,
    }
}

pub(crate) fn div_up(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

pub(crate) fn align_up(a: usize, b: usize) -> usize {
    a.div_ceil(b) * b
}

/// Bytes every channel's share of the buffer is a multiple of. 512 B (four
/// 128-byte cache lines) keeps each channel's first byte line-aligned, so a
/// warp's 512-byte access to user memory touches 4 lines, not 5 with partial
/// sectors at both ends. NCCL gets the same from its 8 KiB cells
/// (`enqueue.cc` MinTrafficPerChannel / trafficPerByte).
pub(crate) const CHANNEL_PART_ALIGN_BYTES: usize = 512;

/// One channel's contiguous part of the call count: (offset, count).
/// Every channel but the last gets the same share, a multiple of
/// CHANNEL_PART_ALIGN_BYTES, so every channel starts 512-byte aligned;
/// trailing channels may get nothing.
pub fn channel_part(
    count: usize,
    n_channels: usize,
    elem_size: usize,
    channel: usize,
) -> (usize, usize) {
    let align = CHANNEL_PART_ALIGN_BYTES / elem_size;
    let per = align_up(div_up(count, n_channels), align);
    let start = (per * channel).min(count);
    let end = (per * (channel + 1)).min(count);
    (start, end - start)
}

/// One primitive operation of one CTA (thread group): receive from every
/// `recv` peer and sum with the input at `src` (if any), store the result in
/// the output at `dst` (if any) and send it to every `send` peer. `nelem` may be 0: the operation
/// still takes its FIFO steps so both ends stay in step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub recv: Vec<usize>,
    pub(crate) src: Option<usize>,
    pub(crate) dst: Option<usize>,
    pub(crate) send: Vec<usize>,
    pub nelem: usize,
}

/// A thread group of a CTA: the whole CTA, or one half of a split tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    All,
    TreeUp,
    TreeDown,
}

/// The operations of (rank, channel, group), in order. Empty for a group that
/// has nothing to do on that rank (the root has no separate halves).
pub fn ops(plan: &ExecPlan, rank: usize, channel: usize, group: Group) -> Vec<Op> {
    let ck = chunking(plan);
    let count = plan.call_count();
    let (part_off, part_count) =
        channel_part(count, plan.n_channels, plan.dtype.size() as usize, channel);
    let n = plan.n_ranks;
    let mut out = Vec::new();
    if n == 1 {
        // One rank: the collective is a copy of the input into the output.
        if group == Group::All && part_count > 0 {
            out.push(Op {
                recv: vec![],
                src: Some(part_off),
                dst: Some(part_off),
                send: vec![],
                nelem: part_count,
            });
        }
        return out;
    }
    match plan.algorithm {
        AnyAlgo::Nccl(Algo::Ring) if group == Group::All => {
            ring_ops(
                &mut out,
                plan,
                rank,
                channel,
                (part_off, part_count),
                ck.chunk_elems,
            );
        }
        AnyAlgo::Nccl(Algo::Tree) => {
            tree_ops(
                &mut out,
                plan,
                rank,
                channel,
                group,
                (part_off, part_count),
                ck.chunk_elems,
            );
        }
        // ExecPlan::build admits only Ring and Tree.
        _ => {}
    }
    out
}

/// The ring's operations of (rank, channel) on the channel's part (offset, count) of the call, in chunks of
/// `chunk_elems`.
fn ring_ops(
    out: &mut Vec<Op>,
    plan: &ExecPlan,
    rank: usize,
    channel: usize,
    (part_off, part_count): (usize, usize),
    chunk_elems: usize,
) {
    let n = plan.n_ranks;
    let count = plan.call_count();
    let ring = &plan.rings[channel];
    let pos = ring.iter().position(|&r| r == rank).expect("rank in ring");
    let prev = ring[(pos + n - 1) % n];
    let next = ring[(pos + 1) % n];
    // user_ranks[i]: the rank i hops downstream (NCCL's ring->userRanks).
    let user_ranks: Vec<usize> = (0..n).map(|i| ring[(pos + i) % n]).collect();
    // NCCL's ring->index: position relative to rank 0's position.
    let pos0 = ring.iter().position(|&r| r == 0).expect("rank 0 in ring");
    let ring_index = (pos + n - pos0) % n;
    match plan.collective {
        Coll::AllReduce => ring_all_reduce(
            out,
            n,
            ring_index,
            prev,
            next,
            part_off,
            part_count,
            chunk_elems,
            16 / plan.dtype.size() as usize,
        ),
        Coll::AllGather => {
            let mut off = 0;
            while off < part_count {
                let nelem = chunk_elems.min(part_count - off);
                let data = part_off + off;
                out.push(Op {
                    recv: vec![],
                    src: Some(data),
                    dst: Some(user_ranks[0] * count + data),
                    send: vec![next],
                    nelem,
                });
                for j in 1..n - 1 {
                    out.push(Op {
                        recv: vec![prev],
                        src: None,
                        dst: Some(user_ranks[n - j] * count + data),
                        send: vec![next],
                        nelem,
                    });
                }
                out.push(Op {
                    recv: vec![prev],
                    src: None,
                    dst: Some(user_ranks[1] * count + data),
                    send: vec![],
                    nelem,
                });
                off += chunk_elems;
            }
        }
        Coll::ReduceScatter => {
            let mut off = 0;
            while off < part_count {
                let nelem = chunk_elems.min(part_count - off);
                let data = part_off + off;
                out.push(Op {
                    recv: vec![],
                    src: Some(user_ranks[n - 1] * count + data),
                    dst: None,
                    send: vec![next],
                    nelem,
                });
                for j in 2..n {
                    out.push(Op {
                        recv: vec![prev],
                        src: Some(user_ranks[n - j] * count + data),
                        dst: None,
                        send: vec![next],
                        nelem,
                    });
                }
                out.push(Op {
                    recv: vec![prev],
                    src: Some(user_ranks[0] * count + data),
                    dst: Some(data),
                    send: vec![],
                    nelem,
                });
                off += chunk_elems;
            }
        }
        Coll::Broadcast => {
            let mut off = 0;
            while off < part_count {
                let nelem = chunk_elems.min(part_count - off);
                let data = part_off + off;
                if rank == plan.root {
                    out.push(Op {
                        recv: vec![],
                        src: Some(data),
                        dst: Some(data),
                        send: vec![next],
                        nelem,
                    });
                } else if next == plan.root {
                    out.push(Op {
                        recv: vec![prev],
                        src: None,
                        dst: Some(data),
                        send: vec![],
                        nelem,
                    });
                } else {
                    out.push(Op {
                        recv: vec![prev],
                        src: None,
                        dst: Some(data),
                        send: vec![next],
                        nelem,
                    });
                }
                off += chunk_elems;
            }
        }
        // ExecPlan::build rejects Reduce.
        Coll::Reduce => {}
    }
}

/// The tree's operations of (rank, channel, group) on the channel's part (offset, count) of the call, in chunks
/// of `chunk_elems`: the root reduces and broadcasts in one group, the other ranks in two.
fn tree_ops(
    out: &mut Vec<Op>,
    plan: &ExecPlan,
    rank: usize,
    channel: usize,
    group: Group,
    (part_off, part_count): (usize, usize),
    chunk_elems: usize,
) {
    let node = &plan.trees[channel][rank];
    let up = node.up;
    let down = &node.down;
    let mut off = 0;
    while off < part_count {
        let nelem = chunk_elems.min(part_count - off);
        let data = part_off + off;
        match (up, group) {
            // The root reduces from its children and sends the result straight back down.
            (None, Group::All) => out.push(Op {
                recv: down.clone(),
                src: Some(data),
                dst: Some(data),
                send: down.clone(),
                nelem,
            }),
            (Some(u), Group::TreeUp) => out.push(Op {
                recv: down.clone(),
                src: Some(data),
                dst: None,
                send: vec![u],
                nelem,
            }),
            (Some(u), Group::TreeDown) => out.push(Op {
                recv: vec![u],
                src: None,
                dst: Some(data),
                send: down.clone(),
                nelem,
            }),
            _ => {}
        }
        off += chunk_elems;
    }
}

/// NCCL's ring all-reduce step order (`all_reduce.h:13-83`).
#[allow(clippy::too_many_arguments)]
fn ring_all_reduce(
    out: &mut Vec<Op>,
    n: usize,
    ring_index: usize,
    prev: usize,
    next: usize,
    part_off: usize,
    part_count: usize,
    chunk: usize,
    align: usize,
) {
    let loop_count = n * chunk;
    let mut elem_off = 0;
    while elem_off < part_count {
        let rem = part_count - elem_off;
        let chunk_count = if rem < loop_count {
            align_up(div_up(rem, n), align)
        } else {
            chunk
        };
        let piece = |c: usize| -> (usize, usize) {
            let co = c * chunk_count;
            let nelem = if rem > co {
                chunk_count.min(rem - co)
            } else {
                0
            };
            (part_off + elem_off + co, nelem)
        };
        let m = |r: usize| r % n;
        let (o, k) = piece(m(ring_index + n - 1));
        out.push(Op {
            recv: vec![],
            src: Some(o),
            dst: None,
            send: vec![next],
            nelem: k,
        });
        for j in 2..n {
            let (o, k) = piece(m(ring_index + n - j));
            out.push(Op {
                recv: vec![prev],
                src: Some(o),
                dst: None,
                send: vec![next],
                nelem: k,
            });
        }
        let (o, k) = piece(ring_index);
        out.push(Op {
            recv: vec![prev],
            src: Some(o),
            dst: Some(o),
            send: vec![next],
            nelem: k,
        });
        for j in 1..n - 1 {
            let (o, k) = piece(m(ring_index + n - j));
            out.push(Op {
                recv: vec![prev],
                src: None,
                dst: Some(o),
                send: vec![next],
                nelem: k,
            });
        }
        let (o, k) = piece(m(ring_index + 1));
        out.push(Op {
            recv: vec![prev],
            src: None,
            dst: Some(o),
            send: vec![],
            nelem: k,
        });
        elem_off += loop_count;
    }
}

/// The thread groups a rank's CTA runs on one channel.
pub(crate) fn groups(plan: &ExecPlan, rank: usize, channel: usize) -> Vec<Group> {
    if plan.algorithm == Algo::Tree && plan.n_ranks > 1 && plan.trees[channel][rank].up.is_some() {
        vec![Group::TreeUp, Group::TreeDown]
    } else {
        vec![Group::All]
    }
}

/// Threads of each group (the split tree's halves, NCCL's rule).
pub(crate) fn group_threads(plan: &ExecPlan, group: Group) -> usize {
    let (up, down) = tree_split_threads(plan.protocol, plan.n_threads);
    match group {
        Group::All => plan.n_threads,
        Group::TreeUp => up,
        Group::TreeDown => down,
    }
}

/// Slices of one Simple operation of `nelem` elements: NCCL's
/// `sliceSize = max(divUp(nelem, 16*SlicePerChunk)*16, stepSize*StepPerSlice/32)`
/// (`prims_simple.h` genericOp). Every slice is posted, empty ones too.
pub fn simple_slices(ck: &Chunking, elem_size: usize, nelem: usize) -> Vec<(usize, usize)> {
    let step_elems = ck.step_bytes / elem_size;
    let slice =
        (div_up(nelem, 16 * ck.slices_per_chunk) * 16).max(step_elems * ck.steps_per_slice / 32);
    let mut out = Vec::new();
    let mut offset = 0;
    for _ in 0..ck.slices_per_chunk {
        let size = if nelem > offset {
            slice.min(nelem - offset)
        } else {
            0
        };
        out.push((offset, size));
        offset += slice;
    }
    out
}

/// Messages one operation puts on each connection: (offset in op, elements, steps).
fn messages(plan: &ExecPlan, ck: &Chunking, op: &Op) -> Vec<(usize, usize, usize)> {
    match plan.protocol {
        Proto::Simple => simple_slices(ck, plan.dtype.size() as usize, op.nelem)
            .into_iter()
            .map(|(o, k)| (o, k, ck.steps_per_slice))
            .collect(),
        _ => vec![(0, op.nelem, 1)],
    }
}

/// Result of playing a schedule through on the CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// Per rank, the output buffer.
    pub outputs: Vec<Vec<i64>>,
    /// Per rank, how often each output element was written.
    pub writes: Vec<Vec<u32>>,
    /// Largest number of FIFO slots in use on any connection.
    pub max_fifo_steps: usize,
    /// Total messages passed.
    pub messages: usize,
}

/// Why a schedule failed on the CPU.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    Deadlock(String),
    Mismatch(String),
    OutOfBounds(String),
}

struct Msg {
    steps: usize,
    data: Vec<i64>,
}

struct Proc {
    rank: usize,
    channel: usize,
    ops: Vec<Op>,
    /// (op index, message index within op)
    at: (usize, usize),
}

/// The simulation's buffers: every rank's output (and how often each element was written) and its own copy of
/// its input (in-place reduce-scatter writes into it).
struct SimBuffers<'a> {
    plan: &'a ExecPlan,
    send_count: usize,
    recv_count: usize,
    outputs: Vec<Vec<i64>>,
    writes: Vec<Vec<u32>>,
    inputs: Vec<Vec<i64>>,
}

impl<'a> SimBuffers<'a> {
    fn new(plan: &'a ExecPlan, inputs: &[Vec<i64>]) -> Self {
        let n = plan.n_ranks;
        let send_count = plan.send_count();
        let recv_count = plan.recv_count();
        let mut bufs = SimBuffers {
            plan,
            send_count,
            recv_count,
            outputs: vec![vec![i64::MIN; recv_count]; n],
            writes: vec![vec![0; recv_count]; n],
            inputs: inputs.to_vec(),
        };
        if plan.in_place {
            for (r, input) in inputs.iter().enumerate().take(n) {
                if plan.collective == Coll::ReduceScatter {
                    // In-place reduce-scatter: the output is a window of the input.
                    continue;
                }
                let base = bufs.in_place_base(r);
                bufs.outputs[r][base..base + send_count].copy_from_slice(&input[..send_count]);
            }
        }
        bufs
    }

    /// In-place: the input is a window of the output (nccl-tests' layout).
    fn in_place_base(&self, rank: usize) -> usize {
        match self.plan.collective {
            Coll::AllGather => rank * self.plan.call_count(),
            _ => 0,
        }
    }

    /// Add the source elements from `start` into `acc` (op `oi` of `p`).
    fn read_src(&self, p: &Proc, oi: usize, start: usize, acc: &mut [i64]) -> Result<(), SimError> {
        let plan = self.plan;
        for (i, a) in acc.iter_mut().enumerate() {
            let reads_output = plan.in_place && plan.collective != Coll::ReduceScatter;
            let v = if start + i >= self.send_count {
                None
            } else if reads_output {
                self.outputs[p.rank]
                    .get(self.in_place_base(p.rank) + start + i)
                    .copied()
            } else {
                self.inputs[p.rank].get(start + i).copied()
            };
            match v {
                Some(v) => *a += v,
                None => {
                    return Err(SimError::OutOfBounds(format!(
                        "rank {} channel {} op {oi}: source element {} outside the buffer",
                        p.rank,
                        p.channel,
                        start + i
                    )))
                }
            }
        }
        Ok(())
    }

    /// Write `acc` into the output from `start` (op `oi` of `p`).
    fn write_dst(
        &mut self,
        p: &Proc,
        oi: usize,
        start: usize,
        acc: &[i64],
    ) -> Result<(), SimError> {
        let plan = self.plan;
        let recv_count = self.recv_count;
        for (i, a) in acc.iter().enumerate() {
            let idx = start + i;
            if idx >= recv_count {
                return Err(SimError::OutOfBounds(format!(
                    "rank {} channel {} op {oi}: output element {idx} outside 0..{recv_count}",
                    p.rank, p.channel
                )));
            }
            self.outputs[p.rank][idx] = *a;
            self.writes[p.rank][idx] += 1;
            // In-place reduce-scatter writes into the input window.
            if plan.in_place && plan.collective == Coll::ReduceScatter {
                self.inputs[p.rank][p.rank * plan.call_count() + idx] = *a;
            }
        }
        Ok(())
    }
}

/// Play every rank's operations through FIFOs of `FIFO_STEPS` slots with the
/// given inputs. A connection is (channel, sender, receiver, which of the
/// algorithm's links); a message holds one slice. Runs processes round-robin,
/// each advancing while it can; fails on deadlock, on a message whose size
/// the receiver does not expect, or on an access outside a buffer.
pub fn simulate(plan: &ExecPlan, inputs: &[Vec<i64>]) -> Result<SimResult, SimError> {
    simulate_ops(plan, inputs, |r, c, g| ops(plan, r, c, g))
}

/// `simulate` with the operations of each (rank, channel, group) given by
/// `ops_of` (tests use it to feed deliberately broken schedules).
pub fn simulate_ops(
    plan: &ExecPlan,
    inputs: &[Vec<i64>],
    ops_of: impl Fn(usize, usize, Group) -> Vec<Op>,
) -> Result<SimResult, SimError> {
    let n = plan.n_ranks;
    let ck = chunking(plan);
    let mut bufs = SimBuffers::new(plan, inputs);
    let mut procs = Vec::new();
    for r in 0..n {
        for c in 0..plan.n_channels {
            for g in groups(plan, r, c) {
                procs.push(Proc {
                    rank: r,
                    channel: c,
                    ops: ops_of(r, c, g),
                    at: (0, 0),
                });
            }
        }
    }
    // key: (channel, from, to): the algorithm's links never share a directed pair in one group set.
    let mut fifos: HashMap<(usize, usize, usize), (VecDeque<Msg>, usize)> = HashMap::new();
    let mut max_fifo = 0;
    let mut n_msgs = 0;
    loop {
        let mut progressed = false;
        let mut all_done = true;
        for p in procs.iter_mut() {
            loop {
                let (oi, mi) = p.at;
                if oi >= p.ops.len() {
                    break;
                }
                all_done = false;
                let op = p.ops[oi].clone();
                let msgs = messages(plan, &ck, &op);
                let (m_off, m_len, m_steps) = msgs[mi];
                // Can every receive be satisfied and every send fit?
                let ready_recv = op.recv.iter().all(|&from| {
                    fifos
                        .get(&(p.channel, from, p.rank))
                        .is_some_and(|(q, _)| !q.is_empty())
                });
                let ready_send = op.send.iter().all(|&to| {
                    let used = fifos.get(&(p.channel, p.rank, to)).map_or(0, |(_, u)| *u);
                    used + m_steps <= FIFO_STEPS
                });
                if !(ready_recv && ready_send) {
                    break;
                }
                let mut acc: Vec<i64> = vec![0; m_len];
                for &from in &op.recv {
                    let (q, used) = fifos.get_mut(&(p.channel, from, p.rank)).expect("checked");
                    let msg = q.pop_front().expect("checked");
                    *used -= msg.steps;
                    if msg.steps != m_steps || msg.data.len() != m_len {
                        return Err(SimError::Mismatch(format!(
                            "rank {} channel {} op {oi}: expected {m_len} elements in {m_steps} steps from rank {from}, got {} in {}",
                            p.rank, p.channel, msg.data.len(), msg.steps
                        )));
                    }
                    for (a, v) in acc.iter_mut().zip(&msg.data) {
                        *a += v;
                    }
                }
                if let Some(off) = op.src {
                    bufs.read_src(p, oi, off + m_off, &mut acc)?;
                }
                if let Some(off) = op.dst {
                    bufs.write_dst(p, oi, off + m_off, &acc)?;
                }
                for &to in &op.send {
                    let entry = fifos
                        .entry((p.channel, p.rank, to))
                        .or_insert((VecDeque::new(), 0));
                    entry.0.push_back(Msg {
                        steps: m_steps,
                        data: acc.clone(),
                    });
                    entry.1 += m_steps;
                    max_fifo = max_fifo.max(entry.1);
                    n_msgs += 1;
                }
                progressed = true;
                p.at = if mi + 1 < msgs.len() {
                    (oi, mi + 1)
                } else {
                    (oi + 1, 0)
                };
            }
        }
        if all_done {
            break;
        }
        if !progressed {
            let stuck: Vec<String> = procs
                .iter()
                .filter(|p| p.at.0 < p.ops.len())
                .take(4)
                .map(|p| format!("rank {} channel {} at op {}", p.rank, p.channel, p.at.0))
                .collect();
            return Err(SimError::Deadlock(stuck.join("; ")));
        }
    }
    if let Some((_, (q, _))) = fifos.iter().find(|(_, (q, _))| !q.is_empty()) {
        return Err(SimError::Mismatch(format!(
            "{} message(s) never received",
            q.len()
        )));
    }
    Ok(SimResult {
        outputs: bufs.outputs,
        writes: bufs.writes,
        max_fifo_steps: max_fifo,
        messages: n_msgs,
    })
}

/// What every rank's output must hold, from the inputs (exact integer sums).
pub fn expected_outputs(plan: &ExecPlan, inputs: &[Vec<i64>]) -> Vec<Vec<i64>> {
    let n = plan.n_ranks;
    let count = plan.call_count();
    match plan.collective {
        // Reduce (which plans reject) would hold the sum at the root.
        Coll::AllReduce | Coll::Reduce => {
            let sum: Vec<i64> = (0..count)
                .map(|i| inputs.iter().map(|v| v[i]).sum())
                .collect();
            vec![sum; n]
        }
        Coll::Broadcast => vec![inputs[plan.root][..count].to_vec(); n],
        Coll::AllGather => {
            let mut all = Vec::with_capacity(count * n);
            for v in inputs {
                all.extend_from_slice(&v[..count]);
            }
            vec![all; n]
        }
        Coll::ReduceScatter => (0..n)
            .map(|r| {
                (0..count)
                    .map(|i| inputs.iter().map(|v| v[r * count + i]).sum())
                    .collect()
            })
            .collect(),
    }
}
