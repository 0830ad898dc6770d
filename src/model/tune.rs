//! NCCL's init-time tuning (`ncclTopoTuneModel`, `src/graph/tuning.cc`):
//! latency and algorithm bandwidth for every function x algorithm x protocol,
//! maximum threads, thread thresholds, and the enable layers. Every entry that
//! ends with bandwidth 0 keeps the reasons, in NCCL's order.

use super::input::{ModelInput, NvlsState};
use super::knobs::EnableMatrix;
use super::rules::Rule;
use super::table::TuningTable;
use super::{log2i, Algo, Coll, Proto};
use crate::error::Result;
use crate::nccl_env::NcclEnv;
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
    /// The table's NCCL family has no such kernel yet.
    NotInFamily { family: String, first: String },
    /// LL128 auto gate before 2.27: only listed GPU generations.
    Ll128UnlistedGpu { sm: u32, allowed: String },
    /// Per call before 2.27: NVLS AllGather/ReduceScatter runs on one node only.
    NvlsOneNodeOnly,
    /// Per call in 2.25-2.26: NVLS AllGather/ReduceScatter supports at most 32 ranks.
    NvlsRankLimit(usize),
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
            MaskReason::NotInFamily { family, first } => format!(
                "{a}: NCCL {family} has no {a} kernel for {} (added in {first})",
                coll.nccl_name()
            ),
            MaskReason::Ll128UnlistedGpu { sm, allowed } => {
                format!("LL128: enabled by default only on {allowed}, the GPUs are sm{sm}")
            }
            MaskReason::NvlsOneNodeOnly => format!(
                "{a}: {} runs on one node only in this NCCL family",
                coll.nccl_name()
            ),
            MaskReason::NvlsRankLimit(n) => format!(
                "{a}: {} supports at most 32 ranks, the communicator has {n}",
                coll.nccl_name()
            ),
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
    /// `comm->ringbdw[func][proto]` (NCCL 2.19-2.23, rule `ring_backup`):
    /// Ring's bandwidths before the algorithm masks, the per-call fallback.
    pub ring_backup: Option<[[f32; 3]; 5]>,
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
    // Before 2.25 there is no Blackwell row: sm100 takes Hopper's (rule blackwell_rows).
    let compcap_index = if min_sm >= 100 && table.has(Rule::BlackwellRows) {
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
    let enable = if table.has(Rule::PerFunctionAlgoProtoLists) {
        EnableMatrix::from_env(env)?
    } else {
        EnableMatrix::from_env_flat(env)
    };

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
            ring_backup: None,
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
    let pat_enabled = pat_enable(input, env, table);
    // Ring bandwidths before the enable layer (`comm->ringbdw`, 2.19-2.23).
    let mut ring_backup = [[0f32; 3]; 5];

    for c in Coll::ALL {
        let nsteps = c.ring_steps(n_ranks) as i64;
        for a in Algo::ALL {
            let g = input.graph(a);
            if let Some(first) = first_family_of_kernel(c, a, table) {
                for p in Proto::ALL {
                    masks[c as usize][a as usize][p as usize].push(MaskReason::NotInFamily {
                        family: table.family.clone(),
                        first: first.clone(),
                    });
                }
                continue;
            }
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
                if a.is_nvls() && !table.has(Rule::NvlsEfficiency) {
                    // Before 2.28 NCCL prices NVLS even without an NVLS graph (bandwidth 0).
                    if n_ch == 0 {
                        cell.push(match &input.nvls_state {
                            NvlsState::Supported => MaskReason::NvlsFewChannels(0),
                            other => MaskReason::NvlsUnsupported(other.why()),
                        });
                    }
                    if table.has(Rule::NvlsMinIntraInter) {
                        // v2.19.4-1 src/graph/tuning.cc:175-176; v2.27.7-1 :267-273.
                        bw = if a == Algo::NvlsTree {
                            g.bw_intra.min(if n_nodes <= 2 {
                                g.bw_inter
                            } else {
                                g.bw_inter / 2.0
                            })
                        } else if c != Coll::AllReduce
                            && table.has(Rule::NvlsAllGatherReduceScatterBw2_27)
                        {
                            (g.bw_intra * (ppn - 1.0) / ppn).min(g.bw_inter * 0.9)
                        } else {
                            g.bw_intra.min(g.bw_inter)
                        };
                    }
                    // 2.18 (rule nvls_model_2_18): the ring's bw as computed above.
                } else if a.is_nvls() {
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
                    let k = if table.has(Rule::RingLlQuarterThird) {
                        // v2.18.6-1 src/graph/tuning.cc:178
                        if n_nodes > 1 || matches!(c, Coll::AllReduce | Coll::Reduce) {
                            1.0 / 4.0
                        } else {
                            1.0 / 3.0
                        }
                    } else {
                        f.ring_ll_bw
                    };
                    bus_bw = selected.ll_max_bw.min(bus_bw as f64 * k) as f32;
                }
                if a == Algo::Ring && p == Proto::Ll128 {
                    // v2.22.3-1 src/graph/tuning.cc:179: x0.7 with one GPU per node.
                    let k = if table.has(Rule::RingLl128OnePerNodePenalty) && ppn < 2.0 {
                        0.7
                    } else {
                        f.ring_ll128_bw
                    };
                    bus_bw = (bus_bw as f64 * k)
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
                let tree_pattern = if table.has(Rule::TreePatternMaxOverRanks) {
                    input.max_tree_pattern
                } else {
                    g.pattern
                };
                if a == Algo::Tree && tree_pattern == Pattern::Tree {
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
                    if c.is_ag_rs() && !table.has(Rule::CollnetAllGatherReduceScatterHeads) {
                        // v2.20.5-1 src/graph/tuning.cc:189-203 (2.20-2.26).
                        bus_bw = ppn * bw;
                        if n_nodes > 1 {
                            if !input.collnet_enable {
                                bus_bw = 0.0;
                                cell.push(MaskReason::CollnetCollectiveMissing);
                            } else if ppn > input.collnet_heads as f32 {
                                bus_bw = 0.0;
                                cell.push(MaskReason::CollnetHeads {
                                    local_ranks: input.local_ranks,
                                    heads: input.collnet_heads,
                                });
                            }
                        }
                        // Measured at 1 and 8 GPUs per node, interpolated.
                        let w: f32 = (ppn - 1.0) / (8.0 - 1.0);
                        bus_bw =
                            (bus_bw as f64 * (w as f64 * 0.85 + (1.0 - w) as f64 * 0.95)) as f32;
                    } else if c.is_ag_rs() {
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
                    && table.has(Rule::CollnetAllGatherReduceScatterHeads)
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
                // Bus bandwidth to algorithm bandwidth, except non-ring AllGather/ReduceScatter
                // (before 2.23: except CollNetDirect AllGather/ReduceScatter only).
                let skip_ratio = if table.has(Rule::AlgbwSkipNonRingAllGatherReduceScatter) {
                    a != Algo::Ring && c.is_ag_rs()
                } else {
                    a == Algo::CollNetDirect && c.is_ag_rs()
                };
                if !skip_ratio {
                    let ratio: f32 =
                        if a == Algo::Ring || (a.is_nvls() && table.has(Rule::NvlsEfficiency)) {
                            ((1.0 * n_ranks as f64) / nsteps as f64) as f32
                        } else if a == Algo::NvlsTree && table.has(Rule::NvlsModel2_18) {
                            // v2.18.6-1 src/graph/tuning.cc:198 (infinite on one node,
                            // where NVLSTree is disabled anyway).
                            (0.70 * n_nodes as f64 / (2 * (n_nodes as i64 - 1)) as f64) as f32
                        } else if a.is_nvls() {
                            // v2.18.6-1 :197, v2.19.4-1 :199
                            (5.0f64 / 6.0) as f32
                        } else {
                            0.5
                        };
                    bus_bw *= ratio;
                }
                bandwidth[c as usize][a as usize][p as usize] = bus_bw;
                computed[c as usize][a as usize][p as usize] = true;
                if a == Algo::Ring {
                    ring_backup[c as usize][p as usize] = bus_bw;
                }

                let mut lat: f32 = table.base_latencies[a as usize][p as usize] as f32;
                let mut intra_lat: f32 = hw_lat[intra_hw as usize][a as usize][p as usize] as f32;
                // With one GPU per node latencies are fully exposed: use the Tree network latency.
                let mut inter_lat: f32 =
                    if ppn == 1.0 && table.has(Rule::InterLatencyTreeRowOnePerNode) {
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
                            let n_inter: i64 = if table.has(Rule::RingInterStepsTwiceNodes) {
                                // v2.22.3-1 src/graph/tuning.cc:159-161
                                match c {
                                    Coll::AllReduce if n_nodes > 1 => 2 * n_nodes as i64,
                                    Coll::AllReduce => 0,
                                    Coll::AllGather | Coll::ReduceScatter => n_nodes as i64 - 1,
                                    Coll::Broadcast | Coll::Reduce => n_nodes as i64,
                                }
                            } else if n_nodes == 1 {
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
                    Algo::Nvls if table.has(Rule::NvlsModel2_18) => {
                        // v2.18.6-1 src/graph/tuning.cc:236
                        if n_nodes > 1 {
                            lat += hw_lat[Hw::Net as usize][a as usize][p as usize] as f32;
                        }
                    }
                    Algo::Nvls => {
                        lat = intra_lat;
                        if n_nodes > 1 {
                            lat += inter_lat;
                        }
                    }
                    Algo::NvlsTree if table.has(Rule::NvlsModel2_18) => {
                        // v2.18.6-1 src/graph/tuning.cc:238
                        lat += (2 * (n_nodes as i64 - 1)) as f32
                            * hw_lat[Hw::Net as usize][a as usize][p as usize] as f32;
                    }
                    Algo::NvlsTree => {
                        lat += intra_lat + (2 * log_nodes) as f32 * inter_lat;
                    }
                    // Not in Algo::ALL, which this loop runs over (model::beyond).
                    Algo::OneShot | Algo::TwoShot => {}
                    Algo::Pat => {
                        if c.is_ag_rs() {
                            // 2.23-2.27 start from a literal 8 µs (v2.23.4-1 src/graph/tuning.cc:278).
                            let base = if table.has(Rule::PatLatencyHardCoded) {
                                8.0
                            } else {
                                lat as f64
                            };
                            let extra: f64 = log_nodes as f64
                                * (inter_lat as f64 / f.pat_log_latency_divisor)
                                + n_ranks as f64 * f.pat_rank_latency_us;
                            lat = (base + extra) as f32;
                        }
                    }
                }
                latency[c as usize][a as usize][p as usize] = lat;
            }
        }
    }
    let model_bandwidth = bandwidth;

    // Enable layer: forced disables, then the LL128 auto gate, then zero the bandwidths.
    let mut user_algo = enable.algo;
    if table.has(Rule::CollnetOnlyAlgoIgnored) && !input.collnet_enable {
        // 2.18-2.23: a list that leaves only CollNet (off here) is ignored for
        // Ring and Tree; NVLS across nodes and NVLSTree on one node count as off
        // (v2.23.4-1 src/graph/tuning.cc:304-314).
        for row in user_algo.iter_mut() {
            let off = |a: Algo| {
                row[a as usize] == 0
                    || (a == Algo::Nvls && n_nodes > 1)
                    || (a == Algo::NvlsTree && n_nodes == 1)
            };
            if off(Algo::Ring) && off(Algo::Tree) && off(Algo::Nvls) && off(Algo::NvlsTree) {
                row[Algo::Ring as usize] = 1;
                row[Algo::Tree as usize] = 1;
            }
        }
    }
    let mut algo_enable = user_algo;
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
            // Before 2.24 the NVSwitch test runs only when CollNet is on.
            if !input.has_nvswitch
                && a == Algo::CollNetDirect
                && (input.collnet_enable || table.has(Rule::PerFunctionAlgoProtoLists))
            {
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
                    // Before 2.27 NCCL_LL128_C2C does not exist: sm90+ allows PXN
                    // (v2.18.6-1 src/graph/tuning.cc:285).
                    let c2c = ll128_c2c || !table.has(Rule::Ll128C2cKnob);
                    let limit = if c2c && min_sm >= 90 {
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
                    let listed: Option<(&[u32], &str)> = if table.has(Rule::Ll128Sm708090Only) {
                        // v2.24.3-1 src/graph/tuning.cc:426-431: a switch on minCompCap.
                        Some((&[70, 80, 90], "sm70, sm80 and sm90"))
                    } else if table.has(Rule::Ll128Sm70To120List) {
                        Some((&[70, 80, 90, 100, 120], "sm70, sm80, sm90, sm100 and sm120"))
                    } else {
                        None
                    };
                    match listed {
                        Some((list, text)) if !list.contains(&min_sm) => {
                            gate.push(MaskReason::Ll128UnlistedGpu {
                                sm: min_sm,
                                allowed: text.to_string(),
                            });
                        }
                        Some(_) => {}
                        None if min_sm < 70 => gate.push(MaskReason::Ll128OldGpu(min_sm)),
                        None => {}
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
                // 2.18: NCCL_ALGO never disables Ring outside AllReduce
                // (v2.18.6-1 src/graph/tuning.cc:296-297).
                let ring_kept = table.has(Rule::RingNeverDisabledOutsideAllReduce)
                    && a == Algo::Ring
                    && c != Coll::AllReduce;
                if algo_enable[c as usize][a as usize] == 0 && !ring_kept {
                    zero = true;
                    if reached {
                        if user_algo[c as usize][a as usize] == 0 {
                            cell.push(MaskReason::UserAlgo(env.algo.clone().unwrap_or_default()));
                        }
                        cell.extend(forced[c as usize][a as usize].iter().cloned());
                    }
                }
                if zero {
                    bandwidth[c as usize][a as usize][p as usize] = 0.0;
                }
                if a == Algo::Ring && p_enable == 0 && table.version >= (2, 22) {
                    // v2.22.3-1 src/graph/tuning.cc:318: a disabled protocol has no backup.
                    ring_backup[c as usize][p as usize] = 0.0;
                }
            }
        }
    }
    let ring_backup = table.has(Rule::RingBackup).then_some(ring_backup);
    if let Some(backup) = &ring_backup {
        // 2.19-2.23: a function left with nothing gets Ring's bandwidths back
        // (v2.23.4-1 src/graph/tuning.cc:343-357).
        for c in Coll::ALL {
            let row = &mut bandwidth[c as usize];
            if row.iter().flatten().all(|&b| b == 0.0) {
                for p in Proto::ALL {
                    row[Algo::Ring as usize][p as usize] = backup[c as usize][p as usize];
                    if backup[c as usize][p as usize] != 0.0 {
                        masks[c as usize][Algo::Ring as usize][p as usize].clear();
                    }
                }
            }
        }
    }
    for c in Coll::ALL {
        for a in Algo::ALL {
            for p in Proto::ALL {
                // An entry the model computed as 0 (or NaN) without any other reason: empty graph.
                let cell = &mut masks[c as usize][a as usize][p as usize];
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
    let ring_ll = &mut thread_thresholds[Algo::Ring as usize][Proto::Ll as usize];
    *ring_ll = ring_ll.saturating_mul(n_ranks as i64);
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
        ring_backup,
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

/// The family that added the kernel for `coll` x `algo`, when the table's
/// family predates it (v2.19.4-1 src/graph/tuning.cc:168-169, v2.20.5-1
/// :169-170, v2.23.4-1 :173-179).
fn first_family_of_kernel(coll: Coll, algo: Algo, table: &TuningTable) -> Option<String> {
    let rule = match (coll.is_ag_rs(), algo) {
        (_, Algo::Pat) => Rule::Pat,
        (true, Algo::Nvls) => Rule::NvlsAllGatherReduceScatter,
        (true, Algo::CollNetDirect) => Rule::CollnetDirectAllGatherReduceScatter,
        _ => return None,
    };
    let (major, minor) = rule.info().first;
    (!table.has(rule)).then(|| format!("{major}.{minor}"))
}

/// `ncclPatEnable`: Ok when PAT may run, Err(why) otherwise.
fn pat_enable(
    input: &ModelInput,
    env: &NcclEnv,
    table: &TuningTable,
) -> std::result::Result<(), String> {
    // The sm60 test exists from 2.26 (v2.26.6-1 src/graph/tuning.cc:180).
    if input.min_sm < 60 && table.has(Rule::PatNeedsSm60) {
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
