//! NCCL's init-time tuning (`ncclTopoTuneModel`, `src/graph/tuning.cc`):
//! latency and algorithm bandwidth for every function x algorithm x protocol,
//! maximum threads, thread thresholds, and the enable layers. Every entry that
//! ends with bandwidth 0 keeps the reasons, in NCCL's order.

use super::cells::{AlgoProto, Cells, NUM_ALGORITHMS, NUM_FUNCTIONS, NUM_HW_LINKS, NUM_PROTOCOLS};
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
pub(crate) enum Hw {
    NvLink = 0,
    Pci = 1,
    Net = 2,
}

/// The constants `ncclTopoTuneModel` picked for this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Selected {
    /// 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell.
    pub(crate) compcap_index: usize,
    /// 0 one node, 1 two nodes, 2 four or more.
    pub(crate) scale_index: usize,
    pub(crate) ll_max_bw: f64,
    pub(crate) per_channel_max_tree_bw: f64,
    pub(crate) per_channel_max_ring_ll128_bw: f64,
    pub(crate) per_channel_max_tree_ll128_bw: f64,
    pub(crate) per_channel_max_nvls_tree_bw: f64,
    pub(crate) net_overhead_us: f32,
}

/// NCCL's init tables for one communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tuned {
    /// `latencies[func][algo][proto]`, µs.
    pub latency: Cells<f32>,
    /// `bandwidths[func][algo][proto]`, GB/s of algorithm bandwidth, after all masks.
    pub bandwidth: Cells<f32>,
    /// The bandwidth the model computed before the enable layer zeroed entries.
    pub(crate) model_bandwidth: Cells<f32>,
    /// `maxThreads[algo][proto]`.
    pub max_threads: AlgoProto<i64>,
    /// `threadThresholds[algo][proto]`.
    pub(crate) thread_thresholds: AlgoProto<i64>,
    /// User lists after parsing (LL128 "2" = auto, resolved per entry by the gate).
    pub(crate) enable: EnableMatrix,
    /// Reasons per entry, `[func][algo][proto]`; empty = usable at init.
    pub(crate) masks: Cells<Vec<MaskReason>>,
    pub(crate) selected: Selected,
    /// `comm->ringbdw[func][proto]` (NCCL 2.19-2.23, rule `ring_backup`):
    /// Ring's bandwidths before the algorithm masks, the per-call fallback.
    pub(crate) ring_backup: Option<[[f32; NUM_PROTOCOLS]; NUM_FUNCTIONS]>,
}

impl Tuned {
    pub fn masks_of(&self, coll: Coll, algo: Algo, proto: Proto) -> &[MaskReason] {
        &self.masks[(coll, algo, proto)]
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

/// NCCL's `ncclTopoTuneModel`, phase by phase: maximum threads, the selected
/// constants, the model layer (bandwidth and latency per algorithm), the
/// enable layer with the LL128 gate, the Ring fallback, and the thresholds.
pub(crate) fn tune(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> Result<Tuned> {
    let max_threads = max_threads(input, env, table);
    let selected = select_constants(input, env, table);
    let enable = if table.has(Rule::PerFunctionAlgoProtoLists) {
        EnableMatrix::from_env(env)?
            .zero_fill_unnamed(env, table.has(Rule::AlgoEnvZeroFillsUnnamedFunctions))
    } else {
        EnableMatrix::from_env_flat(env)
    };
    if input.n_ranks <= 1 {
        return Ok(single_rank(max_threads, enable, selected));
    }
    let ctx = TuneCtx::new(input, env, table, selected);
    let mut masks: Cells<Vec<MaskReason>> = Cells::from_fn(|_, _, _| Vec::new());
    let mut model = ctx.model_layer(&mut masks);
    let model_bandwidth = model.bandwidth;
    let algo_enable = ctx.enable_layer(&enable, &mut model, &mut masks);
    let ring_backup = table.has(Rule::RingBackup).then_some(model.ring_backup);
    if let Some(backup) = &ring_backup {
        restore_ring_backup(backup, &mut model.bandwidth, &mut masks);
    }
    mark_zero_bandwidth(&model.bandwidth, &mut masks);
    Ok(Tuned {
        latency: model.latency,
        bandwidth: model.bandwidth,
        model_bandwidth,
        max_threads,
        thread_thresholds: thread_thresholds(input, env, table),
        enable: EnableMatrix {
            proto: enable.proto,
            algo: algo_enable,
        },
        masks,
        selected: ctx.selected,
        ring_backup,
    })
}

/// `maxThreads[algo][proto]`.
fn max_threads(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> AlgoProto<i64> {
    let th = &table.threads;
    let mut max_threads = [[0i64; NUM_PROTOCOLS]; NUM_ALGORITHMS];
    // Ring/Simple gets fewer threads when the ring is slower than one PCIe Gen3 x16.
    let simple_default = if table.has(Rule::RingSimpleLowBwThreads)
        && (input.ring.bw_intra * input.ring.n_channels as f32) as f64 <= th.pci_bw
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
    max_threads
}

/// The rows of the per-generation, per-scale tables this machine uses.
fn select_constants(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> Selected {
    let n_nodes = input.n_nodes;
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
    Selected {
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
    }
}

/// One rank: NCCL returns right after the thread maxima, no tables, no thresholds.
fn single_rank(max_threads: AlgoProto<i64>, enable: EnableMatrix, selected: Selected) -> Tuned {
    let masks = Cells::from_fn(|_, a, p| {
        if a == Algo::Ring && p == Proto::Simple {
            Vec::new()
        } else {
            vec![MaskReason::SingleRank]
        }
    });
    Tuned {
        latency: Cells::splat(0.0),
        bandwidth: Cells::splat(0.0),
        model_bandwidth: Cells::splat(0.0),
        max_threads,
        thread_thresholds: [[0i64; NUM_PROTOCOLS]; NUM_ALGORITHMS],
        enable,
        masks,
        selected,
        ring_backup: None,
    }
}

/// The model layer's result: every entry's cost before the enable layer.
struct ModelCells {
    latency: Cells<f32>,
    bandwidth: Cells<f32>,
    /// Entries the model loop reached (the others keep latency and bandwidth 0).
    computed: Cells<bool>,
    /// Ring bandwidths before the enable layer (`comm->ringbdw`, 2.19-2.23).
    ring_backup: [[f32; NUM_PROTOCOLS]; NUM_FUNCTIONS],
}

/// What every phase of the tuning reads: the inputs and the values derived
/// from them once (NCCL's locals at the top of `ncclTopoTuneModel`).
struct TuneCtx<'a> {
    input: &'a ModelInput,
    env: &'a NcclEnv,
    table: &'a TuningTable,
    selected: Selected,
    /// `hwLat[hw][algo][proto]` after the POWER adjustment.
    hw_lat: [AlgoProto<f64>; NUM_HW_LINKS],
    /// Ranks per node as a float (`nRanks/nNodes`) and as NCCL's integer.
    ppn: f32,
    ppn_int: i64,
    log_nodes: i32,
    nvls_eff: f32,
    pat_enabled: std::result::Result<(), String>,
}

impl<'a> TuneCtx<'a> {
    fn new(
        input: &'a ModelInput,
        env: &'a NcclEnv,
        table: &'a TuningTable,
        selected: Selected,
    ) -> Self {
        TuneCtx {
            input,
            env,
            table,
            hw_lat: hw_latencies(input, table),
            ppn: input.n_ranks as f32 / input.n_nodes as f32,
            ppn_int: input.ppn() as i64,
            log_nodes: log2i(input.n_nodes as u64),
            nvls_eff: table.nvls_efficiency[selected.compcap_index] as f32,
            pat_enabled: pat_enable(input, env, table),
            selected,
        }
    }

    fn hw_lat(&self, hw: Hw, a: Algo, p: Proto) -> f32 {
        self.hw_lat[hw as usize][a as usize][p as usize] as f32
    }

    /// The model loop: bandwidth and latency of every entry NCCL has a kernel for.
    fn model_layer(&self, masks: &mut Cells<Vec<MaskReason>>) -> ModelCells {
        let mut out = ModelCells {
            latency: Cells::splat(0.0),
            bandwidth: Cells::splat(0.0),
            computed: Cells::splat(false),
            ring_backup: [[0f32; NUM_PROTOCOLS]; NUM_FUNCTIONS],
        };
        for c in Coll::ALL {
            let nsteps = c.ring_steps(self.input.n_ranks) as i64;
            for a in Algo::ALL {
                if let Some(why) = kernel_missing(c, a, self.table) {
                    for p in Proto::ALL {
                        masks[(c, a, p)].push(why.clone());
                    }
                    continue;
                }
                for p in Proto::ALL {
                    let Some((bw, lat)) = self.model_cell(c, a, p, nsteps, &mut masks[(c, a, p)])
                    else {
                        continue;
                    };
                    out.bandwidth[(c, a, p)] = bw;
                    out.computed[(c, a, p)] = true;
                    if a == Algo::Ring {
                        out.ring_backup[c as usize][p as usize] = bw;
                    }
                    out.latency[(c, a, p)] = lat;
                }
            }
        }
        out
    }

    /// One entry's (algorithm bandwidth, latency), or None when a reason in
    /// `cell` keeps the model from computing it.
    fn model_cell(
        &self,
        c: Coll,
        a: Algo,
        p: Proto,
        nsteps: i64,
        cell: &mut Vec<MaskReason>,
    ) -> Option<(f32, f32)> {
        if let Some(why) = self.protocol_gate(c, a, p) {
            cell.push(why);
            return None;
        }
        let bw = self.channel_bandwidth(c, a, cell)?;
        let bus_bw = self.bus_bandwidth(c, a, p, bw, cell);
        let algo_bw = self.algo_bandwidth(c, a, nsteps, bus_bw);
        Some((algo_bw, self.latency(c, a, p, nsteps)))
    }

    /// Algorithms that run one protocol only, and PAT's own switch.
    fn protocol_gate(&self, c: Coll, a: Algo, p: Proto) -> Option<MaskReason> {
        if a.is_nvls() && p != Proto::Simple {
            return Some(MaskReason::SimpleOnly);
        }
        if c.is_ag_rs() && a == Algo::Pat {
            if p != Proto::Simple {
                return Some(MaskReason::SimpleOnly);
            }
            if let Err(why) = &self.pat_enabled {
                return Some(MaskReason::PatDisabled(why.clone()));
            }
        }
        None
    }

    /// Per-channel bandwidth of the algorithm's graph (`bw` in NCCL).
    fn channel_bandwidth(&self, c: Coll, a: Algo, cell: &mut Vec<MaskReason>) -> Option<f32> {
        let g = self.input.graph(a);
        let bw: f32 = if a == Algo::Ring && self.table.has(Rule::RingBwInterFromTwoNodes) {
            if self.input.n_nodes > 1 {
                g.bw_inter
            } else {
                g.bw_intra
            }
        } else if matches!(a, Algo::Tree | Algo::Pat)
            && self.table.has(Rule::TreePatBwMinIntraInter)
        {
            g.bw_intra.min(g.bw_inter)
        } else if self.input.n_nodes <= 2 || a.is_collnet() {
            g.bw_intra
        } else {
            g.bw_inter
        };
        if !a.is_nvls() {
            Some(bw)
        } else if !self.table.has(Rule::NvlsEfficiency) {
            Some(self.nvls_bandwidth_before_2_28(c, a, bw, cell))
        } else {
            self.nvls_bandwidth(c, a, cell)
        }
    }

    /// Before 2.28 NCCL prices NVLS even without an NVLS graph (bandwidth 0).
    fn nvls_bandwidth_before_2_28(
        &self,
        c: Coll,
        a: Algo,
        bw: f32,
        cell: &mut Vec<MaskReason>,
    ) -> f32 {
        let g = self.input.graph(a);
        if g.n_channels == 0 {
            cell.push(match &self.input.nvls_state {
                NvlsState::Supported => MaskReason::NvlsFewChannels(0),
                other => MaskReason::NvlsUnsupported(other.why()),
            });
        }
        if !self.table.has(Rule::NvlsMinIntraInter) {
            // 2.18 (rule nvls_model_2_18): the ring's bw as computed above.
            return bw;
        }
        // v2.19.4-1 src/graph/tuning.cc:175-176; v2.27.7-1 :267-273.
        if a == Algo::NvlsTree {
            g.bw_intra.min(if self.input.n_nodes <= 2 {
                g.bw_inter
            } else {
                g.bw_inter / 2.0
            })
        } else if c != Coll::AllReduce && self.table.has(Rule::NvlsAllGatherReduceScatterBw2_27) {
            let ppn = self.ppn;
            (g.bw_intra * (ppn - 1.0) / ppn).min(g.bw_inter * 0.9)
        } else {
            g.bw_intra.min(g.bw_inter)
        }
    }

    /// 2.28+: NVLS needs 2 channels; its efficiency scales the intra-node bandwidth.
    fn nvls_bandwidth(&self, c: Coll, a: Algo, cell: &mut Vec<MaskReason>) -> Option<f32> {
        let g = self.input.graph(a);
        let n_ch = g.n_channels as i64;
        if n_ch < 2 {
            // Without NVLS support there is no NVLS graph: say why.
            cell.push(match &self.input.nvls_state {
                NvlsState::Supported => MaskReason::NvlsFewChannels(g.n_channels),
                other => MaskReason::NvlsUnsupported(other.why()),
            });
            return None;
        }
        let ppn = self.ppn;
        let mut intra_bw: f32 = g.bw_intra * self.nvls_eff * (n_ch - 1) as f32 / n_ch as f32;
        if c == Coll::AllReduce {
            intra_bw *= 2.0;
        } else {
            intra_bw *= (ppn - 1.0) / ppn;
        }
        let inter_mult = if self.input.n_nodes <= 2 && a == Algo::NvlsTree {
            2
        } else {
            1
        };
        let inter_bw: f32 = g.bw_inter * inter_mult as f32;
        let cap = if a == Algo::NvlsTree {
            self.selected.per_channel_max_nvls_tree_bw as f32
        } else {
            f32::MAX
        };
        Some(intra_bw.min(inter_bw).min(cap))
    }

    /// Bus bandwidth: channels times `bw`, then the algorithm's own factors and caps.
    fn bus_bandwidth(
        &self,
        c: Coll,
        a: Algo,
        p: Proto,
        bw: f32,
        cell: &mut Vec<MaskReason>,
    ) -> f32 {
        let n_ch = self.input.graph(a).n_channels as i64;
        let bus_bw: f32 = n_ch as f32 * bw;
        let bus_bw = match a {
            Algo::Ring => self.ring_bus_bw(c, p, bus_bw),
            Algo::Tree => self.tree_bus_bw(c, p, bus_bw),
            Algo::Pat => (bus_bw as f64 * self.table.factors.pat_bw) as f32,
            Algo::CollNetDirect => self.collnet_direct_bus_bw(c, p, bw, bus_bw, cell),
            Algo::CollNetChain => collnet_simple_only(p, bus_bw, cell),
            Algo::Nvls | Algo::NvlsTree => bus_bw,
        };
        self.collnet_plugin_gate(c, a, p, bus_bw, cell)
    }

    fn ring_bus_bw(&self, c: Coll, p: Proto, bus_bw: f32) -> f32 {
        let (t, f, sel) = (self.table, &self.table.factors, &self.selected);
        let n_ch_f = self.input.ring.n_channels as i64 as f64;
        match p {
            Proto::Ll => {
                let k = if t.has(Rule::RingLlQuarterThird) {
                    // v2.18.6-1 src/graph/tuning.cc:178
                    if self.input.n_nodes > 1 || matches!(c, Coll::AllReduce | Coll::Reduce) {
                        1.0 / 4.0
                    } else {
                        1.0 / 3.0
                    }
                } else {
                    f.ring_ll_bw
                };
                sel.ll_max_bw.min(bus_bw as f64 * k) as f32
            }
            Proto::Ll128 => {
                // v2.22.3-1 src/graph/tuning.cc:179: x0.7 with one GPU per node.
                let k = if t.has(Rule::RingLl128OnePerNodePenalty) && self.ppn < 2.0 {
                    0.7
                } else {
                    f.ring_ll128_bw
                };
                (bus_bw as f64 * k).min(n_ch_f * sel.per_channel_max_ring_ll128_bw) as f32
            }
            Proto::Simple => bus_bw,
        }
    }

    fn tree_bus_bw(&self, c: Coll, p: Proto, mut bus_bw: f32) -> f32 {
        let (f, sel) = (&self.table.factors, &self.selected);
        let g = &self.input.tree;
        let n_ch_f = g.n_channels as i64 as f64;
        if c == Coll::AllReduce {
            bus_bw = (bus_bw as f64 * f.tree_allreduce_bw).min(n_ch_f * sel.per_channel_max_tree_bw)
                as f32;
        }
        if p == Proto::Ll {
            bus_bw = (bus_bw as f64 / f.tree_ll_bw_divisor).min(sel.ll_max_bw) as f32;
        }
        if p == Proto::Ll128 {
            let k = if self.input.n_nodes == 1 {
                f.tree_ll128_bw_one_node
            } else {
                f.tree_ll128_bw_multi_node
            };
            bus_bw = (bus_bw as f64 * k).min(n_ch_f * sel.per_channel_max_tree_ll128_bw) as f32;
        }
        let tree_pattern = if self.table.has(Rule::TreePatternMaxOverRanks) {
            self.input.max_tree_pattern
        } else {
            g.pattern
        };
        if tree_pattern == Pattern::Tree {
            bus_bw = (bus_bw as f64 * f.tree_pattern_tree_bw) as f32;
        }
        bus_bw
    }

    fn collnet_direct_bus_bw(
        &self,
        c: Coll,
        p: Proto,
        bw: f32,
        bus_bw: f32,
        cell: &mut Vec<MaskReason>,
    ) -> f32 {
        let mut bus_bw = collnet_simple_only(p, bus_bw, cell);
        if p != Proto::Simple {
            return bus_bw;
        }
        let (input, f, ppn) = (self.input, &self.table.factors, self.ppn);
        let g = &input.collnet_direct;
        if c.is_ag_rs() && !self.table.has(Rule::CollnetAllGatherReduceScatterHeads) {
            // v2.20.5-1 src/graph/tuning.cc:189-203 (2.20-2.26).
            bus_bw = ppn * bw;
            if input.n_nodes > 1 {
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
            bus_bw = (bus_bw as f64 * (w as f64 * 0.85 + (1.0 - w) as f64 * 0.95)) as f32;
        } else if c.is_ag_rs() {
            bus_bw = ppn
                * g.bw_intra
                    .min(g.bw_inter * f.collnet_direct_inter_bw as f32);
        } else {
            // GPU/NIC ratio: collnet direct wants a NIC per GPU.
            let n_ch_f = g.n_channels as i64 as f64;
            let mut factor: f32 = (ppn as f64 / (1.0 * n_ch_f)) as f32;
            factor -= (factor - 1.0) / 2.0;
            bus_bw /= factor;
            if input.min_sm >= 90 {
                bus_bw = (bus_bw as f64 * f.collnet_direct_sm90_bw) as f32;
            }
        }
        bus_bw
    }

    /// 2.27+: NVLS and CollNetDirect AllGather/ReduceScatter across nodes run the
    /// collnet plugin's collective, present iff collnet is on.
    fn collnet_plugin_gate(
        &self,
        c: Coll,
        a: Algo,
        p: Proto,
        bus_bw: f32,
        cell: &mut Vec<MaskReason>,
    ) -> f32 {
        let input = self.input;
        if !((a == Algo::Nvls || a == Algo::CollNetDirect)
            && p == Proto::Simple
            && c.is_ag_rs()
            && input.n_nodes > 1
            && self.table.has(Rule::CollnetAllGatherReduceScatterHeads))
        {
            return bus_bw;
        }
        if !input.collnet_enable {
            cell.push(MaskReason::CollnetCollectiveMissing);
            return 0.0;
        }
        if bus_bw > 0.0 && input.local_ranks > input.collnet_heads {
            cell.push(MaskReason::CollnetHeads {
                local_ranks: input.local_ranks,
                heads: input.collnet_heads,
            });
            return 0.0;
        }
        bus_bw
    }

    /// Bus bandwidth to algorithm bandwidth, except non-ring AllGather/ReduceScatter
    /// (before 2.23: except CollNetDirect AllGather/ReduceScatter only).
    fn algo_bandwidth(&self, c: Coll, a: Algo, nsteps: i64, bus_bw: f32) -> f32 {
        let t = self.table;
        let skip_ratio = if t.has(Rule::AlgbwSkipNonRingAllGatherReduceScatter) {
            a != Algo::Ring && c.is_ag_rs()
        } else {
            a == Algo::CollNetDirect && c.is_ag_rs()
        };
        if skip_ratio {
            return bus_bw;
        }
        let n_nodes = self.input.n_nodes;
        let ratio: f32 = if a == Algo::Ring || (a.is_nvls() && t.has(Rule::NvlsEfficiency)) {
            ((1.0 * self.input.n_ranks as f64) / nsteps as f64) as f32
        } else if a == Algo::NvlsTree && t.has(Rule::NvlsModel2_18) {
            // v2.18.6-1 src/graph/tuning.cc:198 (infinite on one node,
            // where NVLSTree is disabled anyway).
            (0.70 * n_nodes as f64 / (2 * (n_nodes as i64 - 1)) as f64) as f32
        } else if a.is_nvls() {
            // v2.18.6-1 :197, v2.19.4-1 :199
            (5.0f64 / 6.0) as f32
        } else {
            0.5
        };
        bus_bw * ratio
    }

    /// Latency: the base, plus the hardware latencies the algorithm's steps expose.
    fn latency(&self, c: Coll, a: Algo, p: Proto, nsteps: i64) -> f32 {
        let g = self.input.graph(a);
        let intra_hw = if g.type_intra == PathType::Nvl {
            Hw::NvLink
        } else {
            Hw::Pci
        };
        let base: f32 = self.table.base_latencies[a as usize][p as usize] as f32;
        let intra_lat: f32 = self.hw_lat(intra_hw, a, p);
        // With one GPU per node latencies are fully exposed: use the Tree network latency.
        let mut inter_lat: f32 =
            if self.ppn == 1.0 && self.table.has(Rule::InterLatencyTreeRowOnePerNode) {
                self.hw_lat(Hw::Net, Algo::Tree, p)
            } else {
                self.hw_lat(Hw::Net, a, p)
            };
        inter_lat += g.latency_inter;
        if p == Proto::Simple && !(a == Algo::Pat && self.table.has(Rule::PatFlushLatencyOnce)) {
            // Flush latency.
            inter_lat += g.latency_inter;
        }
        let lat = Latency {
            base,
            intra: intra_lat,
            inter: inter_lat,
        };
        match a {
            Algo::Ring => self.ring_latency(c, p, nsteps, intra_hw, lat),
            Algo::Tree => self.tree_latency(c, lat),
            Algo::CollNetDirect => self.collnet_direct_latency(lat),
            Algo::CollNetChain => {
                lat.base + ((2 * (self.ppn_int - 1)) as f32 * lat.intra + lat.inter)
            }
            Algo::Nvls => self.nvls_latency(p, lat),
            Algo::NvlsTree => self.nvls_tree_latency(p, lat),
            Algo::Pat => self.pat_latency(c, lat),
        }
    }

    fn ring_latency(&self, c: Coll, p: Proto, nsteps: i64, intra_hw: Hw, l: Latency) -> f32 {
        let (t, n_nodes) = (self.table, self.input.n_nodes);
        let hw = if n_nodes == 1 || t.has(Rule::RingBroadcastReduceIntraRow) {
            intra_hw
        } else {
            Hw::Net
        };
        let mut lat = l.base;
        let mut step_lat: f32 = self.hw_lat(hw, Algo::Ring, p);
        if matches!(c, Coll::Reduce | Coll::Broadcast) {
            if self.input.ring.same_channels {
                lat += step_lat;
            } else {
                if p == Proto::Simple {
                    step_lat = self.hw_lat(hw, Algo::Tree, p);
                }
                lat += nsteps as f32 * step_lat;
            }
            return lat;
        }
        // Inter-node rings still launch nsteps network posts.
        let mut overhead: f32 = 0.0;
        if n_nodes > 1 {
            overhead = self.selected.net_overhead_us;
            if p == Proto::Simple {
                overhead = (overhead as f64 * t.net_overhead_us.simple_multiplier) as f32;
            }
        }
        let intra_lat = l.intra.max(overhead);
        let n_inter: i64 = if t.has(Rule::RingInterStepsTwiceNodes) {
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
        lat + ((nsteps - n_inter) as f32 * intra_lat + n_inter as f32 * l.inter)
    }

    fn tree_latency(&self, c: Coll, l: Latency) -> f32 {
        if c != Coll::AllReduce {
            return l.base;
        }
        l.base + 2.0 * ((self.ppn_int - 1) as f32 * l.intra + self.log_nodes as f32 * l.inter)
    }

    fn collnet_direct_latency(&self, l: Latency) -> f32 {
        let ppn_int = self.ppn_int;
        // 0.4 µs arity serialization per extra local rank (double in NCCL).
        let extra: f64 = 2.0
            * (((1i64.min(ppn_int - 1)) as f32 * l.intra) as f64
                + (ppn_int - 1) as f64 * self.table.factors.collnet_direct_arity_latency_us)
            + l.inter as f64;
        (l.base as f64 + extra) as f32
    }

    fn nvls_latency(&self, p: Proto, l: Latency) -> f32 {
        let multi_node = self.input.n_nodes > 1;
        if self.table.has(Rule::NvlsModel2_18) {
            // v2.18.6-1 src/graph/tuning.cc:236
            return if multi_node {
                l.base + self.hw_lat(Hw::Net, Algo::Nvls, p)
            } else {
                l.base
            };
        }
        if multi_node {
            l.intra + l.inter
        } else {
            l.intra
        }
    }

    fn nvls_tree_latency(&self, p: Proto, l: Latency) -> f32 {
        if self.table.has(Rule::NvlsModel2_18) {
            // v2.18.6-1 src/graph/tuning.cc:238
            return l.base
                + (2 * (self.input.n_nodes as i64 - 1)) as f32
                    * self.hw_lat(Hw::Net, Algo::NvlsTree, p);
        }
        l.base + (l.intra + (2 * self.log_nodes) as f32 * l.inter)
    }

    fn pat_latency(&self, c: Coll, l: Latency) -> f32 {
        if !c.is_ag_rs() {
            return l.base;
        }
        let f = &self.table.factors;
        // 2.23-2.27 start from a literal 8 µs (v2.23.4-1 src/graph/tuning.cc:278).
        let base = if self.table.has(Rule::PatLatencyHardCoded) {
            8.0
        } else {
            l.base as f64
        };
        let extra: f64 = self.log_nodes as f64 * (l.inter as f64 / f.pat_log_latency_divisor)
            + self.input.n_ranks as f64 * f.pat_rank_latency_us;
        (base + extra) as f32
    }
}

/// One entry's latency terms (`baseLat`, `intraLat`, `interLat` in NCCL).
#[derive(Clone, Copy)]
struct Latency {
    base: f32,
    intra: f32,
    inter: f32,
}

/// CollNet runs Simple only: other protocols get bandwidth 0.
fn collnet_simple_only(p: Proto, bus_bw: f32, cell: &mut Vec<MaskReason>) -> f32 {
    if p == Proto::Simple {
        return bus_bw;
    }
    cell.push(MaskReason::SimpleOnly);
    0.0
}

/// `hwLat`, with Tree/Simple de-penalized on POWER (PCI Tree/Simple takes
/// Ring/Simple's latency).
fn hw_latencies(input: &ModelInput, table: &TuningTable) -> [AlgoProto<f64>; NUM_HW_LINKS] {
    let mut hw_lat = table.hw_latencies;
    if input.cpu_arch == CpuArch::Power {
        hw_lat[Hw::Pci as usize][Algo::Tree as usize][Proto::Simple as usize] =
            hw_lat[Hw::Pci as usize][Algo::Ring as usize][Proto::Simple as usize];
    }
    hw_lat
}

/// Why NCCL has no kernel for `coll` x `algo` in the table's family, if it has none.
fn kernel_missing(c: Coll, a: Algo, table: &TuningTable) -> Option<MaskReason> {
    if let Some(first) = first_family_of_kernel(c, a, table) {
        return Some(MaskReason::NotInFamily {
            family: table.family.clone(),
            first,
        });
    }
    let no_kernel = match c {
        Coll::Broadcast | Coll::Reduce => a != Algo::Ring,
        Coll::AllGather | Coll::ReduceScatter => {
            !matches!(a, Algo::Pat | Algo::Ring | Algo::Nvls | Algo::CollNetDirect)
        }
        Coll::AllReduce => a == Algo::Pat,
    };
    no_kernel.then_some(MaskReason::NoKernel)
}

/// `algoEnable[func][algo]` as a matrix of 0/1.
type AlgoRows = [[i32; NUM_ALGORITHMS]; NUM_FUNCTIONS];

impl TuneCtx<'_> {
    /// The enable layer: forced disables, then the LL128 auto gate, then zero
    /// the bandwidths. Returns the algorithm matrix NCCL ends with.
    fn enable_layer(
        &self,
        enable: &EnableMatrix,
        model: &mut ModelCells,
        masks: &mut Cells<Vec<MaskReason>>,
    ) -> AlgoRows {
        let user_algo = self.user_algo(enable);
        let (algo_enable, forced) = self.forced_disables(user_algo);
        for c in Coll::ALL {
            for a in Algo::ALL {
                for p in Proto::ALL {
                    let mut p_enable = enable.proto[c as usize][p as usize];
                    let mut gate: Vec<MaskReason> = Vec::new();
                    if p_enable == 2 && p == Proto::Ll128 {
                        gate = self.ll128_gate(a);
                        p_enable = if gate.is_empty() { 1 } else { 0 };
                    }
                    let layer = EnableLayer {
                        user_algo: &user_algo,
                        algo_enable: &algo_enable,
                        forced: &forced,
                    };
                    self.disable_cell((c, a, p), p_enable == 0, gate, &layer, model, masks);
                }
            }
        }
        algo_enable
    }

    /// 2.18-2.23: a list that leaves only CollNet (off here) is ignored for
    /// Ring and Tree; NVLS across nodes and NVLSTree on one node count as off
    /// (v2.23.4-1 src/graph/tuning.cc:304-314).
    fn user_algo(&self, enable: &EnableMatrix) -> AlgoRows {
        let mut user_algo = enable.algo;
        let n_nodes = self.input.n_nodes;
        if self.table.has(Rule::CollnetOnlyAlgoIgnored) && !self.input.collnet_enable {
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
        user_algo
    }

    /// The algorithms NCCL turns off whatever the user asks, each with its reasons.
    fn forced_disables(&self, user_algo: AlgoRows) -> (AlgoRows, Vec<Vec<Vec<MaskReason>>>) {
        let (input, n_nodes) = (self.input, self.input.n_nodes);
        let mut algo_enable = user_algo;
        let mut forced: Vec<Vec<Vec<MaskReason>>> =
            vec![vec![Vec::new(); NUM_ALGORITHMS]; NUM_FUNCTIONS];
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
                if self.table.behaviour.collnet_chain_needs_chain_support
                    && input.collnet_enable
                    && a == Algo::CollNetChain
                    && !input.collnet_chain_support
                {
                    reasons.push(MaskReason::CollnetChainUnsupported);
                }
                // Before 2.24 the NVSwitch test runs only when CollNet is on.
                if !input.has_nvswitch
                    && a == Algo::CollNetDirect
                    && (input.collnet_enable || self.table.has(Rule::PerFunctionAlgoProtoLists))
                {
                    reasons.push(MaskReason::CollnetDirectNoNvswitch);
                }
                if !reasons.is_empty() {
                    algo_enable[c as usize][a as usize] = 0;
                }
            }
        }
        (algo_enable, forced)
    }

    /// LL128's auto gate (`NCCL_PROTO` value 2): the reasons it stays off, empty when on.
    fn ll128_gate(&self, a: Algo) -> Vec<MaskReason> {
        let (input, table, min_sm) = (self.input, self.table, self.input.min_sm);
        let g = input.graph(a);
        let mut gate = Vec::new();
        // Before 2.27 NCCL_LL128_C2C does not exist: sm90+ allows PXN
        // (v2.18.6-1 src/graph/tuning.cc:285).
        let c2c = self.env.ll128_c2c.unwrap_or(1) != 0 || !table.has(Rule::Ll128C2cKnob);
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
        gate
    }

    /// Zero one entry the enable layer turns off, with its reasons.
    fn disable_cell(
        &self,
        (c, a, p): (Coll, Algo, Proto),
        proto_off: bool,
        gate: Vec<MaskReason>,
        layer: &EnableLayer,
        model: &mut ModelCells,
        masks: &mut Cells<Vec<MaskReason>>,
    ) {
        let (env, table) = (self.env, self.table);
        let cell = &mut masks[(c, a, p)];
        let reached = model.computed[(c, a, p)];
        let mut zero = false;
        if proto_off {
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
        if layer.algo_enable[c as usize][a as usize] == 0 && !ring_kept {
            zero = true;
            if reached {
                if layer.user_algo[c as usize][a as usize] == 0 {
                    cell.push(MaskReason::UserAlgo(env.algo.clone().unwrap_or_default()));
                }
                cell.extend(layer.forced[c as usize][a as usize].iter().cloned());
            }
        }
        if zero {
            model.bandwidth[(c, a, p)] = 0.0;
        }
        if a == Algo::Ring && proto_off && table.version >= (2, 22) {
            // v2.22.3-1 src/graph/tuning.cc:318: a disabled protocol has no backup.
            model.ring_backup[c as usize][p as usize] = 0.0;
        }
    }
}

/// The algorithm side of the enable layer.
struct EnableLayer<'a> {
    /// The user's list (`NCCL_ALGO`) as NCCL reads it.
    user_algo: &'a AlgoRows,
    /// The user's list after the forced disables.
    algo_enable: &'a AlgoRows,
    /// The forced disables' reasons, `[func][algo]`.
    forced: &'a [Vec<Vec<MaskReason>>],
}

/// 2.19-2.23: a function left with nothing gets Ring's bandwidths back
/// (v2.23.4-1 src/graph/tuning.cc:343-357).
fn restore_ring_backup(
    backup: &[[f32; NUM_PROTOCOLS]; NUM_FUNCTIONS],
    bandwidth: &mut Cells<f32>,
    masks: &mut Cells<Vec<MaskReason>>,
) {
    for c in Coll::ALL {
        let row = bandwidth.of_mut(c);
        if row.iter().flatten().all(|&b| b == 0.0) {
            for p in Proto::ALL {
                row[Algo::Ring as usize][p as usize] = backup[c as usize][p as usize];
                if backup[c as usize][p as usize] != 0.0 {
                    masks[(c, Algo::Ring, p)].clear();
                }
            }
        }
    }
}

/// An entry the model computed as 0 (or NaN) without any other reason: empty graph.
fn mark_zero_bandwidth(bandwidth: &Cells<f32>, masks: &mut Cells<Vec<MaskReason>>) {
    for c in Coll::ALL {
        for a in Algo::ALL {
            for p in Proto::ALL {
                let cell = &mut masks[(c, a, p)];
                let bw = bandwidth[(c, a, p)];
                if cell.is_empty() && (bw.is_nan() || bw == 0.0) {
                    cell.push(MaskReason::ZeroBandwidth);
                }
            }
        }
    }
}

/// `threadThresholds[algo][proto]`: per-thread work before more threads/channels are used.
fn thread_thresholds(input: &ModelInput, env: &NcclEnv, table: &TuningTable) -> AlgoProto<i64> {
    let t = &table.thread_thresholds;
    let mut thresholds = [[t.ll, t.ll128, t.simple]; NUM_ALGORITHMS];
    let ring_ll = &mut thresholds[Algo::Ring as usize][Proto::Ll as usize];
    *ring_ll = ring_ll.saturating_mul(input.n_ranks as i64);
    thresholds[Algo::CollNetDirect as usize][Proto::Simple as usize] = t.collnet_simple;
    thresholds[Algo::CollNetChain as usize][Proto::Simple as usize] = t.collnet_simple;
    if let Some(text) = &env.thread_thresholds {
        // sscanf("%ld %ld %ld %ld %ld %ld"): Tree LL/LL128/Simple, Ring LL/LL128/Simple;
        // stops at the first field that does not parse; negative values are ignored.
        for (i, word) in text.split_whitespace().take(6).enumerate() {
            let Some(v) = scanf_long(word) else { break };
            if v >= 0 {
                let algo = if i < 3 { Algo::Tree } else { Algo::Ring };
                thresholds[algo as usize][i % 3] = v;
            }
        }
    }
    thresholds
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
