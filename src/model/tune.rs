//! NCCL's init-time tuning (`ncclTopoTuneModel`, `src/graph/tuning.cc`):
//! latency and algorithm bandwidth for every function x algorithm x protocol,
//! maximum threads, thread thresholds, and the enable layers. Every entry that
//! ends with bandwidth 0 keeps the reasons, in NCCL's order.

use super::input::{ModelInput, NvlsState};
use super::knobs::{EnableMatrix, NcclEnv};
use super::table::TuningTable;
use super::{log2i, Algo, Coll, Proto};
use crate::error::Result;
use crate::search::Pattern;
use crate::topo::{CpuArch, CpuVendor, PathType};
use serde::Serialize;

/// Why a (function, algorithm, protocol) entry cannot be used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum MaskReason {
    /// NCCL has no kernel for this function with this algorithm.
    NoKernel,
    /// The algorithm runs Simple only (NVLS, NVLSTree, PAT, CollNet).
    SimpleOnly,
    /// NVLS needs at least 2 NVLS channels.
    NvlsFewChannels(usize),
    /// PAT is off: the text says why.
    PatDisabled(String),
    /// The model computed 0 bandwidth (an empty graph: the search found nothing).
    ZeroBandwidth,
    /// AllGather/ReduceScatter across nodes needs the collnet plugin's collective.
    CollnetCollectiveMissing,
    /// AllGather/ReduceScatter across nodes needs one collnet head per local GPU.
    CollnetHeads { local_ranks: usize, heads: usize },
    /// Excluded by `NCCL_PROTO`.
    UserProto(String),
    /// Excluded by `NCCL_ALGO`.
    UserAlgo(String),
    /// NVLSTree is disabled on a single node.
    NvlsTreeOneNode,
    /// CollNet (SHARP) is not enabled.
    CollnetDisabled,
    /// NVLS across nodes needs CollNet (NVLS+SHARP).
    NvlsMultiNodeNeedsCollnet,
    /// The collnet plugin has no chain support.
    CollnetChainUnsupported,
    /// CollNetDirect needs an NVSwitch.
    CollnetDirectNoNvswitch,
    /// LL128 auto gate: the inter-node path is worse than allowed.
    Ll128InterPath { path: PathType, limit: PathType },
    /// LL128 auto gate: the intra-node path is worse than NVB.
    Ll128IntraPath { path: PathType },
    /// LL128 auto gate: GPUs of different generations.
    Ll128MixedGenerations { min_sm: u32, max_sm: u32 },
    /// LL128 auto gate: GPUs older than sm70.
    Ll128OldGpu(u32),
    /// Per call: CollNet not supported for this function/type/op.
    CollnetUnsupported,
    /// Per call: CollNet supports at most 8 local GPUs.
    CollnetTooManyLocalRanks(usize),
    /// Per call: NVLS not supported (the text says why).
    NvlsUnsupported(String),
    /// Per call: NVLS for functions other than AllReduce supports at most 32 local GPUs.
    NvlsArity(usize),
    /// Per call: one rank, NCCL only runs Ring/Simple (a copy).
    SingleRank,
}

impl MaskReason {
    /// One line a person can read, e.g. `LL128: intra-node path PHB is worse than NVB`.
    pub fn text(&self, coll: Coll, algo: Algo, proto: Proto) -> String {
        let a = algo.nccl_name();
        let p = proto.nccl_name();
        match self {
            MaskReason::NoKernel => {
                let kernels = match coll {
                    Coll::Broadcast | Coll::Reduce => "Ring",
                    Coll::AllGather | Coll::ReduceScatter => "Ring, PAT, NVLS, CollNetDirect",
                    Coll::AllReduce => "Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree",
                };
                format!("{a}: NCCL has no {a} kernel for {} (only {kernels})", coll.nccl_name())
            }
            MaskReason::SimpleOnly => format!("{a}: runs the Simple protocol only, not {p}"),
            MaskReason::NvlsFewChannels(n) => {
                format!("{a}: needs at least 2 NVLS channels, the NVLS graph has {n}")
            }
            MaskReason::PatDisabled(why) => format!("PAT: {why}"),
            MaskReason::ZeroBandwidth => {
                format!("{a}: no {a} graph (the search found 0 channels), bandwidth 0")
            }
            MaskReason::CollnetCollectiveMissing => format!(
                "{a}: {} across nodes needs the CollNet plugin's collective",
                coll.nccl_name()
            ),
            MaskReason::CollnetHeads { local_ranks, heads } => format!(
                "{a}: {} across nodes needs a CollNet head per GPU ({local_ranks} GPUs per node, {heads} heads)",
                coll.nccl_name()
            ),
            MaskReason::UserProto(v) => format!("{p}: excluded by NCCL_PROTO={v}"),
            MaskReason::UserAlgo(v) => format!("{a}: excluded by NCCL_ALGO={v}"),
            MaskReason::NvlsTreeOneNode => "NVLSTree: disabled on a single node".to_string(),
            MaskReason::CollnetDisabled => format!(
                "{a}: needs a CollNet (SHARP) network enabled with NCCL_COLLNET_ENABLE=1"
            ),
            MaskReason::NvlsMultiNodeNeedsCollnet => {
                "NVLS: across nodes needs CollNet (NVLS+SHARP)".to_string()
            }
            MaskReason::CollnetChainUnsupported => {
                "CollNetChain: the CollNet plugin has no chain support".to_string()
            }
            MaskReason::CollnetDirectNoNvswitch => "CollNetDirect: needs an NVSwitch".to_string(),
            MaskReason::Ll128InterPath { path, limit } => format!(
                "LL128: inter-node path {} is worse than {}",
                path.nccl_name(),
                limit.nccl_name()
            ),
            MaskReason::Ll128IntraPath { path } => format!(
                "LL128: intra-node path {} is worse than NVB",
                path.nccl_name()
            ),
            MaskReason::Ll128MixedGenerations { min_sm, max_sm } => {
                format!("LL128: GPUs of different generations (sm{min_sm} and sm{max_sm})")
            }
            MaskReason::Ll128OldGpu(sm) => format!("LL128: needs sm70+, the GPUs are sm{sm}"),
            MaskReason::CollnetUnsupported => {
                format!("{a}: CollNet does not support this function, type and operation")
            }
            MaskReason::CollnetTooManyLocalRanks(n) => {
                format!("{a}: supports at most 8 GPUs per node, this node has {n}")
            }
            MaskReason::NvlsUnsupported(why) => format!("{a}: {why}"),
            MaskReason::NvlsArity(n) => format!(
                "{a}: {} supports at most 32 GPUs per node, this node has {n}",
                coll.nccl_name()
            ),
            MaskReason::SingleRank => "one rank: NCCL only copies (Ring/Simple)".to_string(),
        }
    }
}

/// Hardware latency class (`NCCL_HW_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Hw {
    NvLink = 0,
    Pci = 1,
    Net = 2,
}

/// The constants `ncclTopoTuneModel` picked for this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selected {
    /// 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell.
    pub compcap_index: usize,
    /// 0 one node, 1 two nodes, 2 four or more.
    pub scale_index: usize,
    pub ll_max_bw: f64,
    pub per_channel_max_tree_bw: f64,
    pub per_channel_max_ring_ll128_bw: f64,
    pub per_channel_max_tree_ll128_bw: f64,
    pub per_channel_max_nvls_tree_bw: f64,
    pub net_overhead_us: f32,
}

/// NCCL's init tables for one communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tuned {
    /// `latencies[func][algo][proto]`, µs.
    pub latency: [[[f32; 3]; 7]; 5],
    /// `bandwidths[func][algo][proto]`, GB/s of algorithm bandwidth, after all masks.
    pub bandwidth: [[[f32; 3]; 7]; 5],
    /// The bandwidth the model computed before the enable layer zeroed entries.
    pub model_bandwidth: [[[f32; 3]; 7]; 5],
    /// `maxThreads[algo][proto]`.
    pub max_threads: [[i64; 3]; 7],
    /// `threadThresholds[algo][proto]`.
    pub thread_thresholds: [[i64; 3]; 7],
    /// User lists after parsing (LL128 "2" = auto, resolved per entry by the gate).
    pub enable: EnableMatrix,
    /// Reasons per entry, `[func][algo][proto]`; empty = usable at init.
    pub masks: Vec<Vec<Vec<Vec<MaskReason>>>>,
    pub selected: Selected,
}

impl Tuned {
    pub fn masks_of(&self, coll: Coll, algo: Algo, proto: Proto) -> &[MaskReason] {
        &self.masks[coll as usize][algo as usize][proto as usize]
    }
}

/// NCCL's `getNthreads`: a user value must be a multiple of the warp size and
/// within [min, max]; otherwise NCCL falls back as below.
fn get_nthreads(user: Option<i64>, min: i64, max: i64, default: i64, warp: i64) -> i64 {
    match user {
        Some(nt) if nt > 0 => {
            if nt % warp != 0 || nt > max {
                max
            } else if nt < min {
                min
            } else {
                nt
            }
        }
        _ => default,
    }
}

pub fn tune(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> Result<Tuned> {
    let th = &table.threads;
    let mut max_threads = [[0i64; 3]; 7];
    // Ring/Simple gets fewer threads when the ring is slower than one PCIe Gen3 x16.
    let simple_default = if (input.ring.bw_intra * input.ring.n_channels as f32) as f64 <= th.pci_bw
    {
        th.ring_simple_low_bw_nthreads
    } else {
        th.simple_max_nthreads
    };
    let warp = th.warp_size;
    max_threads[Algo::Ring as usize][Proto::Simple as usize] = get_nthreads(
        env.nthreads,
        2 * warp,
        th.simple_max_nthreads,
        simple_default,
        warp,
    );
    max_threads[Algo::Tree as usize][Proto::Simple as usize] = get_nthreads(
        env.nthreads,
        2 * warp,
        th.simple_max_nthreads,
        th.simple_max_nthreads,
        warp,
    );
    for a in [
        Algo::CollNetDirect,
        Algo::CollNetChain,
        Algo::Nvls,
        Algo::NvlsTree,
    ] {
        max_threads[a as usize][Proto::Simple as usize] = th.max_nthreads;
    }
    let ll = get_nthreads(
        env.nthreads,
        2 * warp,
        th.ll_max_nthreads,
        th.ll_max_nthreads,
        warp,
    );
    let ll128 = get_nthreads(
        env.ll128_nthreads,
        th.ll128_max_nthreads / 4,
        th.ll128_max_nthreads,
        th.ll128_max_nthreads,
        warp,
    );
    for a in [Algo::Ring, Algo::Tree] {
        max_threads[a as usize][Proto::Ll as usize] = ll;
        max_threads[a as usize][Proto::Ll128 as usize] = ll128;
    }

    let n_nodes = input.n_nodes;
    let n_ranks = input.n_ranks;
    let min_sm = input.min_sm;
    let compcap_index = if min_sm >= 100 {
        3
    } else if min_sm >= 90 {
        2
    } else if min_sm >= 80 {
        1
    } else {
        0
    };
    let scale_index = if n_nodes <= 2 { n_nodes - 1 } else { 2 };
    // LL: one node looks at the GPU generation, several nodes at the CPU vendor.
    let ll_row = if n_nodes == 1 {
        compcap_index
    } else if input.cpu_vendor == CpuVendor::Amd {
        1
    } else {
        0
    };
    let selected = Selected {
        compcap_index,
        scale_index,
        ll_max_bw: table.ll_max_bws[ll_row][scale_index],
        per_channel_max_tree_bw: table.per_channel_max_tree_bws[compcap_index][scale_index],
        per_channel_max_ring_ll128_bw: table.per_channel_max_ring_ll128_bws[compcap_index]
            [scale_index],
        per_channel_max_tree_ll128_bw: table.per_channel_max_tree_ll128_bws[compcap_index]
            [scale_index],
        per_channel_max_nvls_tree_bw: table.per_channel_max_nvls_tree_bws[compcap_index]
            [scale_index],
        net_overhead_us: net_overhead(input, env, table),
    };

    let mut latency = [[[0f32; 3]; 7]; 5];
    let mut bandwidth = [[[0f32; 3]; 7]; 5];
    let mut masks: Vec<Vec<Vec<Vec<MaskReason>>>> = vec![vec![vec![Vec::new(); 3]; 7]; 5];
    let mut thread_thresholds = [[0i64; 3]; 7];
    // Entries the model loop reached (the others keep latency and bandwidth 0).
    let mut computed = [[[false; 3]; 7]; 5];
    let enable = EnableMatrix::from_env(env)?;

    if n_ranks <= 1 {
        // NCCL returns right after the thread maxima: no tables, no thresholds.
        for c in Coll::ALL {
            for a in Algo::ALL {
                for p in Proto::ALL {
                    if !(a == Algo::Ring && p == Proto::Simple) {
                        masks[c as usize][a as usize][p as usize].push(MaskReason::SingleRank);
                    }
                }
            }
        }
        return Ok(Tuned {
            latency,
            bandwidth,
            model_bandwidth: bandwidth,
            max_threads,
            thread_thresholds,
            enable,
            masks,
            selected,
        });
    }

    let mut hw_lat = table.hw_latencies;
    if input.cpu_arch == CpuArch::Power {
        // De-penalize Tree/Simple on POWER: PCI Tree/Simple takes Ring/Simple's latency.
        hw_lat[Hw::Pci as usize][Algo::Tree as usize][Proto::Simple as usize] =
            hw_lat[Hw::Pci as usize][Algo::Ring as usize][Proto::Simple as usize];
    }
    let ppn: f32 = n_ranks as f32 / n_nodes as f32;
    let ppn_int = input.ppn() as i64;
    let log_nodes = log2i(n_nodes as u64);
    let nvls_eff = table.nvls_efficiency[compcap_index] as f32;
    let f = &table.factors;
    let pat_enabled = pat_enable(input, env);

    for c in Coll::ALL {
        let nsteps = c.ring_steps(n_ranks) as i64;
        for a in Algo::ALL {
            let g = input.graph(a);
            let no_kernel = match c {
                Coll::Broadcast | Coll::Reduce => a != Algo::Ring,
                Coll::AllGather | Coll::ReduceScatter => {
                    !matches!(a, Algo::Pat | Algo::Ring | Algo::Nvls | Algo::CollNetDirect)
                }
                Coll::AllReduce => a == Algo::Pat,
            };
            if no_kernel {
                for p in Proto::ALL {
                    masks[c as usize][a as usize][p as usize].push(MaskReason::NoKernel);
                }
                continue;
            }
            let intra_hw = if g.type_intra == PathType::Nvl {
                Hw::NvLink
            } else {
                Hw::Pci
            };
            let hw = if n_nodes == 1 { intra_hw } else { Hw::Net };
            for p in Proto::ALL {
                let cell = &mut masks[c as usize][a as usize][p as usize];
                if a.is_nvls() && p != Proto::Simple {
                    cell.push(MaskReason::SimpleOnly);
                    continue;
                }
                if c.is_ag_rs() && a == Algo::Pat {
                    if p != Proto::Simple {
                        cell.push(MaskReason::SimpleOnly);
                        continue;
                    }
                    if let Err(why) = &pat_enabled {
                        cell.push(MaskReason::PatDisabled(why.clone()));
                        continue;
                    }
                }
                let collnet = a.is_collnet();
                let mut bw: f32 = if n_nodes <= 2 || collnet {
                    g.bw_intra
                } else {
                    g.bw_inter
                };
                let n_ch = g.n_channels as i64;
                if a.is_nvls() {
                    if n_ch < 2 {
                        // Without NVLS support there is no NVLS graph: say why.
                        cell.push(match &input.nvls_state {
                            NvlsState::Supported => MaskReason::NvlsFewChannels(g.n_channels),
                            other => MaskReason::NvlsUnsupported(other.why()),
                        });
                        continue;
                    }
                    let mut intra_bw: f32 = g.bw_intra * nvls_eff * (n_ch - 1) as f32 / n_ch as f32;
                    if c == Coll::AllReduce {
                        intra_bw *= 2.0;
                    } else {
                        intra_bw *= (ppn - 1.0) / ppn;
                    }
                    let inter_mult = if n_nodes <= 2 && a == Algo::NvlsTree {
                        2
                    } else {
                        1
                    };
                    let inter_bw: f32 = g.bw_inter * inter_mult as f32;
                    let cap = if a == Algo::NvlsTree {
                        selected.per_channel_max_nvls_tree_bw as f32
                    } else {
                        f32::MAX
                    };
                    bw = intra_bw.min(inter_bw).min(cap);
                }
                let mut bus_bw: f32 = n_ch as f32 * bw;
                let n_ch_f = n_ch as f64;
                if a == Algo::Ring && p == Proto::Ll {
                    bus_bw = selected.ll_max_bw.min(bus_bw as f64 * f.ring_ll_bw) as f32;
                }
                if a == Algo::Ring && p == Proto::Ll128 {
                    bus_bw = (bus_bw as f64 * f.ring_ll128_bw)
                        .min(n_ch_f * selected.per_channel_max_ring_ll128_bw)
                        as f32;
                }
                if a == Algo::Tree && c == Coll::AllReduce {
                    bus_bw = (bus_bw as f64 * f.tree_allreduce_bw)
                        .min(n_ch_f * selected.per_channel_max_tree_bw)
                        as f32;
                }
                if a == Algo::Tree && p == Proto::Ll {
                    bus_bw = (bus_bw as f64 / f.tree_ll_bw_divisor).min(selected.ll_max_bw) as f32;
                }
                if a == Algo::Tree && p == Proto::Ll128 {
                    let k = if n_nodes == 1 {
                        f.tree_ll128_bw_one_node
                    } else {
                        f.tree_ll128_bw_multi_node
                    };
                    bus_bw = (bus_bw as f64 * k)
                        .min(n_ch_f * selected.per_channel_max_tree_ll128_bw)
                        as f32;
                }
                if a == Algo::Tree && input.max_tree_pattern == Pattern::Tree {
                    bus_bw = (bus_bw as f64 * f.tree_pattern_tree_bw) as f32;
                }
                if a == Algo::Pat {
                    bus_bw = (bus_bw as f64 * f.pat_bw) as f32;
                }
                if collnet && p != Proto::Simple {
                    bus_bw = 0.0;
                    cell.push(MaskReason::SimpleOnly);
                }
                if a == Algo::CollNetDirect && p == Proto::Simple {
                    if c.is_ag_rs() {
                        bus_bw = ppn
                            * g.bw_intra
                                .min(g.bw_inter * f.collnet_direct_inter_bw as f32);
                    } else {
                        // GPU/NIC ratio: collnet direct wants a NIC per GPU.
                        let mut factor: f32 = (ppn as f64 / (1.0 * n_ch_f)) as f32;
                        factor -= (factor - 1.0) / 2.0;
                        bus_bw /= factor;
                        if min_sm >= 90 {
                            bus_bw = (bus_bw as f64 * f.collnet_direct_sm90_bw) as f32;
                        }
                    }
                }
                if (a == Algo::Nvls || a == Algo::CollNetDirect)
                    && p == Proto::Simple
                    && c.is_ag_rs()
                    && n_nodes > 1
                {
                    // The collnet plugin's allgather/reducescatter: present iff collnet is on.
                    if !input.collnet_enable {
                        bus_bw = 0.0;
                        cell.push(MaskReason::CollnetCollectiveMissing);
                    } else if bus_bw > 0.0 && input.local_ranks > input.collnet_heads {
                        bus_bw = 0.0;
                        cell.push(MaskReason::CollnetHeads {
                            local_ranks: input.local_ranks,
                            heads: input.collnet_heads,
                        });
                    }
                }
                // Bus bandwidth to algorithm bandwidth, except non-ring AllGather/ReduceScatter.
                if !(a != Algo::Ring && c.is_ag_rs()) {
                    let ratio: f32 = if matches!(a, Algo::Ring | Algo::Nvls | Algo::NvlsTree) {
                        ((1.0 * n_ranks as f64) / nsteps as f64) as f32
                    } else {
                        0.5
                    };
                    bus_bw *= ratio;
                }
                bandwidth[c as usize][a as usize][p as usize] = bus_bw;
                computed[c as usize][a as usize][p as usize] = true;

                let mut lat: f32 = table.base_latencies[a as usize][p as usize] as f32;
                let mut intra_lat: f32 = hw_lat[intra_hw as usize][a as usize][p as usize] as f32;
                // With one GPU per node latencies are fully exposed: use the Tree network latency.
                let mut inter_lat: f32 = if ppn == 1.0 {
                    hw_lat[Hw::Net as usize][Algo::Tree as usize][p as usize] as f32
                } else {
                    hw_lat[Hw::Net as usize][a as usize][p as usize] as f32
                };
                inter_lat += g.latency_inter;
                if p == Proto::Simple {
                    // Flush latency.
                    inter_lat += g.latency_inter;
                }
                match a {
                    Algo::Ring => {
                        let mut step_lat: f32 = hw_lat[hw as usize][a as usize][p as usize] as f32;
                        if matches!(c, Coll::Reduce | Coll::Broadcast) {
                            if g.same_channels {
                                lat += step_lat;
                            } else {
                                if p == Proto::Simple {
                                    step_lat =
                                        hw_lat[hw as usize][Algo::Tree as usize][p as usize] as f32;
                                }
                                lat += nsteps as f32 * step_lat;
                            }
                        } else {
                            // Inter-node rings still launch nsteps network posts.
                            let mut overhead: f32 = 0.0;
                            if n_nodes > 1 {
                                overhead = selected.net_overhead_us;
                                if p == Proto::Simple {
                                    overhead = (overhead as f64
                                        * table.net_overhead_us.simple_multiplier)
                                        as f32;
                                }
                            }
                            intra_lat = intra_lat.max(overhead);
                            let n_inter: i64 = if n_nodes == 1 {
                                0
                            } else if c == Coll::AllReduce {
                                2 * (n_nodes as i64 - 1)
                            } else {
                                n_nodes as i64 - 1
                            };
                            lat +=
                                (nsteps - n_inter) as f32 * intra_lat + n_inter as f32 * inter_lat;
                        }
                    }
                    Algo::Tree => {
                        if c == Coll::AllReduce {
                            lat += 2.0
                                * ((ppn_int - 1) as f32 * intra_lat + log_nodes as f32 * inter_lat);
                        }
                    }
                    Algo::CollNetDirect => {
                        // 0.4 µs arity serialization per extra local rank (double in NCCL).
                        let extra: f64 = 2.0
                            * (((1i64.min(ppn_int - 1)) as f32 * intra_lat) as f64
                                + (ppn_int - 1) as f64 * f.collnet_direct_arity_latency_us)
                            + inter_lat as f64;
                        lat = (lat as f64 + extra) as f32;
                    }
                    Algo::CollNetChain => {
                        lat += (2 * (ppn_int - 1)) as f32 * intra_lat + inter_lat;
                    }
                    Algo::Nvls => {
                        lat = intra_lat;
                        if n_nodes > 1 {
                            lat += inter_lat;
                        }
                    }
                    Algo::NvlsTree => {
                        lat += intra_lat + (2 * log_nodes) as f32 * inter_lat;
                    }
                    Algo::Pat => {
                        if c.is_ag_rs() {
                            let extra: f64 = log_nodes as f64
                                * (inter_lat as f64 / f.pat_log_latency_divisor)
                                + n_ranks as f64 * f.pat_rank_latency_us;
                            lat = (lat as f64 + extra) as f32;
                        }
                    }
                }
                latency[c as usize][a as usize][p as usize] = lat;
            }
        }
    }
    let model_bandwidth = bandwidth;

    // Enable layer: forced disables, then the LL128 auto gate, then zero the bandwidths.
    let mut algo_enable = enable.algo;
    let mut forced: Vec<Vec<Vec<MaskReason>>> = vec![vec![Vec::new(); 7]; 5];
    for c in Coll::ALL {
        for a in Algo::ALL {
            let reasons = &mut forced[c as usize][a as usize];
            if n_nodes == 1 && a == Algo::NvlsTree {
                reasons.push(MaskReason::NvlsTreeOneNode);
            }
            if !input.collnet_enable && a.is_collnet() {
                reasons.push(MaskReason::CollnetDisabled);
            }
            if !input.collnet_enable && a == Algo::Nvls && n_nodes > 1 {
                reasons.push(MaskReason::NvlsMultiNodeNeedsCollnet);
            }
            if table.behaviour.collnet_chain_needs_chain_support
                && input.collnet_enable
                && a == Algo::CollNetChain
                && !input.collnet_chain_support
            {
                reasons.push(MaskReason::CollnetChainUnsupported);
            }
            if !input.has_nvswitch && a == Algo::CollNetDirect {
                reasons.push(MaskReason::CollnetDirectNoNvswitch);
            }
            if !reasons.is_empty() {
                algo_enable[c as usize][a as usize] = 0;
            }
        }
    }
    let ll128_c2c = env.ll128_c2c.unwrap_or(1) != 0;
    for c in Coll::ALL {
        for a in Algo::ALL {
            let g = input.graph(a);
            for p in Proto::ALL {
                let cell = &mut masks[c as usize][a as usize][p as usize];
                let mut p_enable = enable.proto[c as usize][p as usize];
                let mut gate: Vec<MaskReason> = Vec::new();
                if p_enable == 2 && p == Proto::Ll128 {
                    let limit = if ll128_c2c && min_sm >= 90 {
                        PathType::Pxn
                    } else {
                        PathType::Pxb
                    };
                    if g.type_inter > limit {
                        gate.push(MaskReason::Ll128InterPath {
                            path: g.type_inter,
                            limit,
                        });
                    }
                    if g.type_intra > PathType::Nvb {
                        gate.push(MaskReason::Ll128IntraPath { path: g.type_intra });
                    }
                    let mixed_ok = input.min_sm == input.max_sm
                        || (table.behaviour.ll128_mixed_compcap_allowed_from_sm90 && min_sm >= 90);
                    if !mixed_ok {
                        gate.push(MaskReason::Ll128MixedGenerations {
                            min_sm: input.min_sm,
                            max_sm: input.max_sm,
                        });
                    }
                    // (NCCL also drops LL128 for Ring AllReduce on 2 sm90 ranks when
                    // built with CUDA 11.8; planner models CUDA 12+ builds.)
                    if min_sm < 70 {
                        gate.push(MaskReason::Ll128OldGpu(min_sm));
                    }
                    p_enable = if gate.is_empty() { 1 } else { 0 };
                }
                let mut zero = false;
                let reached = computed[c as usize][a as usize][p as usize];
                if p_enable == 0 {
                    zero = true;
                    if !reached {
                        // Already explained by the model layer.
                    } else if gate.is_empty() {
                        cell.push(MaskReason::UserProto(env.proto.clone().unwrap_or_default()));
                    } else {
                        cell.extend(gate);
                    }
                }
                if algo_enable[c as usize][a as usize] == 0 {
                    zero = true;
                    if reached {
                        if enable.algo[c as usize][a as usize] == 0 {
                            cell.push(MaskReason::UserAlgo(env.algo.clone().unwrap_or_default()));
                        }
                        cell.extend(forced[c as usize][a as usize].iter().cloned());
                    }
                }
                if zero {
                    bandwidth[c as usize][a as usize][p as usize] = 0.0;
                }
                // An entry the model computed as 0 (or NaN) without any other reason: empty graph.
                let bw = bandwidth[c as usize][a as usize][p as usize];
                if cell.is_empty() && (bw.is_nan() || bw == 0.0) {
                    cell.push(MaskReason::ZeroBandwidth);
                }
            }
        }
    }

    // Per-thread work before more threads/channels are used.
    for row in thread_thresholds.iter_mut() {
        *row = [
            table.thread_thresholds.ll,
            table.thread_thresholds.ll128,
            table.thread_thresholds.simple,
        ];
    }
    thread_thresholds[Algo::Ring as usize][Proto::Ll as usize] *= n_ranks as i64;
    thread_thresholds[Algo::CollNetDirect as usize][Proto::Simple as usize] =
        table.thread_thresholds.collnet_simple;
    thread_thresholds[Algo::CollNetChain as usize][Proto::Simple as usize] =
        table.thread_thresholds.collnet_simple;
    if let Some(text) = &env.thread_thresholds {
        // sscanf("%ld %ld %ld %ld %ld %ld"): Tree LL/LL128/Simple, Ring LL/LL128/Simple;
        // stops at the first field that does not parse; negative values are ignored.
        for (i, word) in text.split_whitespace().take(6).enumerate() {
            let Some(v) = scanf_long(word) else { break };
            if v >= 0 {
                let algo = if i < 3 { Algo::Tree } else { Algo::Ring };
                thread_thresholds[algo as usize][i % 3] = v;
            }
        }
    }

    Ok(Tuned {
        latency,
        bandwidth,
        model_bandwidth,
        max_threads,
        thread_thresholds,
        enable: EnableMatrix {
            proto: enable.proto,
            algo: algo_enable,
        },
        masks,
        selected,
    })
}

/// `%ld` as sscanf reads it: leading digits (with sign) of the word.
fn scanf_long(word: &str) -> Option<i64> {
    let end = word
        .char_indices()
        .find(|&(i, ch)| !(ch.is_ascii_digit() || (i == 0 && (ch == '-' || ch == '+'))))
        .map(|(i, _)| i)
        .unwrap_or(word.len());
    word[..end].parse().ok()
}

/// `getNetOverhead`: NCCL_NET_OVERHEAD (ns) or by CPU.
fn net_overhead(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> f32 {
    if let Some(ns) = env.net_overhead_ns {
        if ns != -2 {
            return (ns as f64 * 0.001) as f32;
        }
    }
    let t = &table.net_overhead_us;
    let us = match (input.cpu_arch, input.cpu_vendor) {
        (CpuArch::X86, CpuVendor::Intel) => t.x86_intel,
        (CpuArch::X86, CpuVendor::Amd) => t.x86_amd,
        _ => t.other,
    };
    us as f32
}

/// `ncclPatEnable`: Ok when PAT may run, Err(why) otherwise.
fn pat_enable(input: &ModelInput, env: &NcclEnv) -> std::result::Result<(), String> {
    if input.min_sm < 60 {
        return Err("needs sm60+ (CUDA atomics)".to_string());
    }
    match env.pat_enable.unwrap_or(2) {
        0 => return Err("disabled by NCCL_PAT_ENABLE=0".to_string()),
        2 => {}
        _ => return Ok(()),
    }
    if input.n_nodes != input.n_ranks {
        return Err(format!(
            "needs one GPU per node ({} GPUs per node here)",
            input.ppn()
        ));
    }
    if !input.net_device_host {
        return Err("does not support network device offload".to_string());
    }
    Ok(())
}
