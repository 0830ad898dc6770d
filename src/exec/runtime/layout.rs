//! Device layouts: the structs the kernels read (`kernels/common.cuh`,
//! `kernels/beyond.cu`), the connections of a plan, and how the executor fills them.

use super::*;

// ------------------------------------------------------------ device layouts

/// `struct Conn` in kernels/common.cuh: device addresses.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conn {
    pub(crate) buff: u64,
    pub(crate) tail: u64,
    pub(crate) head: u64,
    pub(crate) step: u64,
}

/// `struct ChannelDesc` in kernels/common.cuh.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelDesc {
    pub(crate) ring_recv: Conn,
    pub(crate) ring_send: Conn,
    pub(crate) tree_recv_up: Conn,
    pub(crate) tree_send_up: Conn,
    pub(crate) tree_recv_down: [Conn; MAX_TREE_ARITY],
    pub(crate) tree_send_down: [Conn; MAX_TREE_ARITY],
    pub(crate) user_ranks: [i32; MAX_RANKS],
    pub(crate) ring_index: i32,
    pub(crate) tree_has_up: i32,
    pub(crate) tree_n_down: i32,
    pub(crate) rank: i32,
    pub(crate) local_rank: i32,
    pub(crate) channel: i32,
    pub(crate) pad0: i32,
    pub(crate) pad1: i32,
}

/// `struct KernelArgs` in kernels/common.cuh, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelArgs {
    pub(crate) desc: u64,
    pub(crate) abort_flag: u64,
    pub(crate) aborted: u64,
    pub(crate) send: [u64; MAX_RANKS],
    pub(crate) recv: [u64; MAX_RANKS],
    pub(crate) chan_off: [i64; MAX_CHANNELS],
    pub(crate) chan_count: [i64; MAX_CHANNELS],
    pub(crate) call_count: i64,
    pub(crate) chunk_elems: i64,
    pub(crate) nranks: i32,
    pub(crate) nchannels: i32,
    pub(crate) root: i32,
    pub(crate) slices_per_chunk: i32,
    pub(crate) steps_per_slice: i32,
    pub(crate) step_bytes: i32,
    pub(crate) tree_up_threads: i32,
    pub(crate) pad: i32,
}

/// `struct PeerArgs` in kernels/beyond.cu, passed by value to the kernels
/// beyond NCCL (OneShot, TwoShot). Arrays are indexed by global rank: every
/// launch sees every rank's buffers and peer area.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PeerArgs {
    pub(crate) abort_flag: u64,
    pub(crate) aborted: u64,
    pub(crate) send: [u64; MAX_RANKS],
    pub(crate) recv: [u64; MAX_RANKS],
    pub(crate) area: [u64; MAX_RANKS],
    pub(crate) count: i64,
    pub(crate) nranks: i32,
    pub(crate) nchannels: i32,
    pub(crate) first_rank: i32,
    pub(crate) inbox_stride: i32,
    pub(crate) inbox_channels: i32,
    pub(crate) pad: i32,
}

/// Sizes the kernels' static_asserts check (kernels/common.cuh, kernels/beyond.cu).
pub const CHANNEL_DESC_BYTES: usize = 416;
pub const KERNEL_ARGS_BYTES: usize = 1352;
pub const PEER_ARGS_BYTES: usize = 432;

/// The one parameter of a variant's `planner_collective`: `KernelArgs` for
/// Ring and Tree, `PeerArgs` for the kernels beyond NCCL. Copied by value
/// into each launch's parameters, so both stay unboxed.
#[derive(Debug, Clone, Copy)]
#[allow(clippy::large_enum_variant)]
pub(super) enum LaunchArgs {
    Channels(KernelArgs),
    Peers(PeerArgs),
}

// ------------------------------------------------------------ connections

/// One directed connection (channel, from, to): where its pieces live.
#[derive(Debug, Clone, Copy)]
pub(super) struct Edge {
    /// On the receiver's GPU: FIFO, tail, receiver step.
    pub(super) fifo: u64,
    pub(super) tail: u64,
    pub(super) recv_step: u64,
    /// On the sender's GPU: head, sender step.
    pub(super) head: u64,
    pub(super) send_step: u64,
}

impl Edge {
    pub(super) fn as_sender(&self) -> Conn {
        Conn {
            buff: self.fifo,
            tail: self.tail,
            head: self.head,
            step: self.send_step,
        }
    }
    pub(super) fn as_receiver(&self) -> Conn {
        Conn {
            buff: self.fifo,
            tail: self.tail,
            head: self.head,
            step: self.recv_step,
        }
    }
}

/// The directed (channel, from, to) links a plan's algorithm uses.
pub(super) fn plan_edges(plan: &ExecPlan) -> Vec<(usize, usize, usize)> {
    let mut edges = Vec::new();
    if plan.n_ranks < 2 {
        return edges;
    }
    for c in 0..plan.n_channels {
        match plan.algorithm {
            AnyAlgo::Nccl(Algo::Ring) => {
                let ring = &plan.rings[c];
                for i in 0..ring.len() {
                    edges.push((c, ring[i], ring[(i + 1) % ring.len()]));
                }
            }
            AnyAlgo::Nccl(Algo::Tree) => {
                for (r, node) in plan.trees[c].iter().enumerate() {
                    if let Some(u) = node.up {
                        edges.push((c, r, u));
                        edges.push((c, u, r));
                    }
                }
            }
            // ExecPlan::build admits only Ring and Tree.
            _ => {}
        }
    }
    edges
}

impl Executor {
    /// Descriptors of every CTA on GPU `g` for `plan`'s channel count.
    pub(super) fn descriptors(&self, plan: &ExecPlan, g: usize) -> Vec<ChannelDesc> {
        let ranks: Vec<usize> = match self.virtual_ranks {
            Some(_) => (0..self.n_ranks).collect(),
            None => vec![g],
        };
        let mut out = Vec::new();
        for (local, &rank) in ranks.iter().enumerate() {
            for c in 0..plan.n_channels {
                let mut d = ChannelDesc {
                    rank: rank as i32,
                    local_rank: local as i32,
                    channel: c as i32,
                    ..Default::default()
                };
                let n = plan.n_ranks;
                let ring = &plan.rings[c];
                let pos = ring.iter().position(|&r| r == rank).unwrap_or(0);
                let pos0 = ring.iter().position(|&r| r == 0).unwrap_or(0);
                d.ring_index = ((pos + n - pos0) % n) as i32;
                for i in 0..n {
                    d.user_ranks[i] = ring[(pos + i) % n] as i32;
                }
                if n > 1 {
                    let prev = ring[(pos + n - 1) % n];
                    let next = ring[(pos + 1) % n];
                    if let Some(e) = self.edges.get(&(c, prev, rank)) {
                        d.ring_recv = e.as_receiver();
                    }
                    if let Some(e) = self.edges.get(&(c, rank, next)) {
                        d.ring_send = e.as_sender();
                    }
                    let node = &plan.trees[c][rank];
                    if let Some(u) = node.up {
                        d.tree_has_up = 1;
                        if let Some(e) = self.edges.get(&(c, u, rank)) {
                            d.tree_recv_up = e.as_receiver();
                        }
                        if let Some(e) = self.edges.get(&(c, rank, u)) {
                            d.tree_send_up = e.as_sender();
                        }
                    }
                    d.tree_n_down = node.down.len() as i32;
                    for (i, &ch) in node.down.iter().enumerate() {
                        if let Some(e) = self.edges.get(&(c, ch, rank)) {
                            d.tree_recv_down[i] = e.as_receiver();
                        }
                        if let Some(e) = self.edges.get(&(c, rank, ch)) {
                            d.tree_send_down[i] = e.as_sender();
                        }
                    }
                }
                out.push(d);
            }
        }
        out
    }

    /// Buffer addresses of rank r for this plan's size.
    pub(super) fn rank_buffers(&self, plan: &ExecPlan, r: usize) -> (u64, u64) {
        let (send, recv) = self.buffers[r];
        if !plan.in_place {
            return (send, recv);
        }
        let block = (plan.call_count() * plan.dtype.size() as usize) as u64;
        match plan.collective {
            // The input is rank r's block of the output (nccl-tests' layout).
            Coll::AllGather => (recv + r as u64 * block, recv),
            // The output is rank r's block of the input.
            Coll::ReduceScatter => (send, send + r as u64 * block),
            _ => (send, recv),
        }
    }

    pub(super) fn kernel_args(&self, plan: &ExecPlan, g: usize) -> KernelArgs {
        let ck = schedule::chunking(plan);
        let mut args = KernelArgs {
            desc: self.desc_mem[g].ptr(),
            abort_flag: self.abort_dev[g],
            aborted: self.status_mem[g].ptr(),
            send: [0; MAX_RANKS],
            recv: [0; MAX_RANKS],
            chan_off: [0; MAX_CHANNELS],
            chan_count: [0; MAX_CHANNELS],
            call_count: plan.call_count() as i64,
            chunk_elems: ck.chunk_elems as i64,
            nranks: plan.n_ranks as i32,
            nchannels: plan.n_channels as i32,
            root: plan.root as i32,
            slices_per_chunk: ck.slices_per_chunk as i32,
            steps_per_slice: ck.steps_per_slice as i32,
            step_bytes: ck.step_bytes as i32,
            tree_up_threads: schedule::group_threads(plan, schedule::Group::TreeUp) as i32,
            pad: 0,
        };
        let ranks: Vec<usize> = match self.virtual_ranks {
            Some(_) => (0..self.n_ranks).collect(),
            None => vec![g],
        };
        for (local, &r) in ranks.iter().enumerate() {
            let (s, d) = self.rank_buffers(plan, r);
            args.send[local] = s;
            args.recv[local] = d;
        }
        for c in 0..plan.n_channels {
            let (off, count) = schedule::channel_part(
                plan.call_count(),
                plan.n_channels,
                plan.dtype.size() as usize,
                c,
            );
            args.chan_off[c] = off as i64;
            args.chan_count[c] = count as i64;
        }
        args
    }

    /// The argument of `plan`'s kernel on GPU `g`.
    pub(super) fn launch_args(&self, plan: &ExecPlan, g: usize) -> LaunchArgs {
        if plan.algorithm.is_beyond_nccl() {
            LaunchArgs::Peers(self.peer_args(plan, g))
        } else {
            LaunchArgs::Channels(self.kernel_args(plan, g))
        }
    }

    /// The kernels beyond NCCL: every rank's buffers and peer area, by rank.
    pub(super) fn peer_args(&self, plan: &ExecPlan, g: usize) -> PeerArgs {
        let mut args = PeerArgs {
            abort_flag: self.abort_dev[g],
            aborted: self.status_mem[g].ptr(),
            send: [0; MAX_RANKS],
            recv: [0; MAX_RANKS],
            area: [0; MAX_RANKS],
            count: plan.call_count() as i64,
            nranks: plan.n_ranks as i32,
            nchannels: plan.n_channels as i32,
            first_rank: match self.virtual_ranks {
                Some(_) => 0,
                None => g as i32,
            },
            inbox_stride: self.template.n_threads as i32,
            inbox_channels: self.template.n_channels as i32,
            pad: 0,
        };
        for r in 0..self.n_ranks {
            let (s, d) = self.rank_buffers(plan, r);
            args.send[r] = s;
            args.recv[r] = d;
            args.area[r] = self.peer_areas.get(r).copied().unwrap_or(0);
        }
        args
    }
}

/// Compile-time layout checks of the shared structs.
const _: () = assert!(std::mem::size_of::<ChannelDesc>() == CHANNEL_DESC_BYTES);
const _: () = assert!(std::mem::size_of::<KernelArgs>() == KERNEL_ARGS_BYTES);
const _: () = assert!(std::mem::size_of::<PeerArgs>() == PEER_ARGS_BYTES);
