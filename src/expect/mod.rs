//! The expected model: what nccl-tests should measure on this machine, per collective, algorithm x protocol and
//! size. Not NCCL's cost model (which is NCCL's selection heuristic): each pair is simulated as NCCL runs it on the
//! plan NCCL's search found (rings, trees, NVLS, the per-call channels), over the physical links each channel
//! crosses, per direction, with every channel's flow summed on every link:
//!
//! time = launch + fill (the hops of the first chunk, each at its transport's latency)
//!        + steps x max(step synchronisation, step bytes / the rate a channel gets)
//!
//! (a Simple step within the node adds its synchronisation, a fence, to its bytes' time instead; under eager
//! launch the host's per-call cost is a floor under the whole),
//!
//! where a channel's rate is the smallest of its busiest link's share (the link's physical rate x the protocol's
//! payload fraction / the flows on it) and the protocol's per-channel thread rate. Every constant is physical and
//! kept as data with its source (`params`, `tuning-tables/expect/`); `fit` fits the few marked `fit` to public
//! measurements with leave-one-machine-out cross-validation, whose error is the band `planner expect` prints.
//!
//! Stage: after `model` (it reads topo, search, model and pipeline); nothing before it reads it.

pub mod fit;
pub mod params;
pub(crate) mod plan;

use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{Algo, Coll, Model, Proto, TuningTable};
use crate::nccl_env::NcclEnv;
use crate::search::Graphs;
use crate::topo::{Cluster, CpuVendor};
pub use params::Params;
use plan::{ChannelFlows, LinkClass, Plan};
use serde::{Deserialize, Serialize};

/// How nccl-tests launches each call: eager (the default, as PyTorch does) or captured in a CUDA graph (`-G`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Launch {
    #[default]
    Eager,
    Graph,
}

impl Launch {
    pub(crate) fn parse(text: &str) -> Result<Launch> {
        match text.to_ascii_lowercase().as_str() {
            "eager" => Ok(Launch::Eager),
            "graph" | "cuda-graph" => Ok(Launch::Graph),
            _ => Err(Error::bad_input(format!(
                "invalid --launch '{text}': expected eager or graph"
            ))),
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Launch::Eager => "eager",
            Launch::Graph => "graph",
        }
    }
}

/// The network between nodes, which sets its latency and the fraction of the line rate reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NetKind {
    Ib,
    Roce,
    Efa,
    /// GCP GPUDirect-TCPX and TCPXO.
    Tcpx,
    Socket,
}

impl NetKind {
    pub(crate) const ALL: [NetKind; 5] = [
        NetKind::Ib,
        NetKind::Roce,
        NetKind::Efa,
        NetKind::Tcpx,
        NetKind::Socket,
    ];
    pub(crate) fn name(self) -> &'static str {
        match self {
            NetKind::Ib => "ib",
            NetKind::Roce => "roce",
            NetKind::Efa => "efa",
            NetKind::Tcpx => "tcpx",
            NetKind::Socket => "socket",
        }
    }
    pub(crate) fn parse(text: &str) -> Result<NetKind> {
        let t = text.to_ascii_lowercase();
        if t == "tcpxo" {
            return Ok(NetKind::Tcpx);
        }
        NetKind::ALL
            .into_iter()
            .find(|k| k.name() == t)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "invalid --net-kind '{text}': expected ib, roce, efa, tcpx, tcpxo or socket"
                ))
            })
    }
    /// From the NIC names NCCL reports: `rdmap*` EFA, `mlx5*`/`ib*`/`bnxt_re*` IB, GPUDirect NICs named like
    /// Ethernet interfaces TCPX(O) (GCP's gVNIC), other Ethernet names sockets.
    pub(crate) fn detect(names: &[String], gdr: bool) -> NetKind {
        let first = names
            .first()
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        if first.starts_with("rdmap") || first.starts_with("efa") {
            NetKind::Efa
        } else if first.starts_with("mlx5") || first.starts_with("ib") || first.starts_with("bnxt")
        {
            NetKind::Ib
        } else if gdr
            && ["eth", "enp", "ens", "eno"]
                .iter()
                .any(|p| first.starts_with(p))
        {
            NetKind::Tcpx
        } else {
            NetKind::Socket
        }
    }
}

/// Options beside the topology.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExpectOptions {
    pub(crate) launch: Launch,
    /// None: detected from the NIC names.
    pub(crate) net_kind: Option<NetKind>,
    /// GPUs one host thread drives (nccl-tests `-g N`); 0 or 1: one (nccl-tests' default, PyTorch's one process per
    /// GPU). Under eager launch that thread enqueues each GPU's kernel of a call in turn.
    pub(crate) gpus_per_thread: usize,
}

/// Relative error of the class's leave-one-machine-out cross-validation, per size range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Band {
    /// <= 64 KiB.
    pub(crate) small: f64,
    /// 64 KiB < size < 256 MiB.
    pub(crate) mid: f64,
    /// >= 256 MiB.
    pub(crate) large: f64,
}

impl Band {
    pub(crate) fn at(&self, bytes: u64) -> f64 {
        if bytes <= 64 << 10 {
            self.small
        } else if bytes < 256 << 20 {
            self.mid
        } else {
            self.large
        }
    }
}

/// The machine's class: which constants apply and which band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MachineClass {
    /// e.g. "sm90 nvswitch", "sm90 nvswitch + efa", "sm120 pcie 2-socket".
    pub(crate) name: String,
    pub(crate) gpu_class: String,
    /// The key of the band in `bands.json`: nvswitch, nvswitch-net, pcie (default otherwise).
    pub(crate) band_key: String,
    pub(crate) net_kind: Option<NetKind>,
    pub(crate) band: Band,
}

/// What bounds an expected time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    /// Launch and per-hop latencies (or per-step synchronisation) dominate.
    Latency,
    /// The busiest physical link a channel crosses.
    Link {
        class: String,
        name: String,
        rate_gbs: f64,
    },
    /// The protocol's per-channel rate (its threads' loads and stores).
    Protocol { proto: Proto, rate_gbs: f64 },
    /// The NVSwitch's multimem reduction (NVLS).
    NvlsReduce { rate_gbs: f64 },
}

impl Limit {
    pub fn describe(&self) -> String {
        match self {
            Limit::Latency => "latency".to_string(),
            Limit::Link {
                class,
                name,
                rate_gbs,
            } => format!("{class} {name} ({rate_gbs:.1} GB/s)"),
            Limit::Protocol { proto, rate_gbs } => {
                format!(
                    "{} thread rate ({rate_gbs:.1} GB/s, all channels)",
                    proto.nccl_name()
                )
            }
            Limit::NvlsReduce { rate_gbs } => format!("NVLS multimem ({rate_gbs:.1} GB/s)"),
        }
    }
}

/// One expected value: what nccl-tests should print for this pair and size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectation {
    pub(crate) coll: Coll,
    pub algo: Algo,
    pub(crate) proto: Proto,
    pub(crate) bytes: u64,
    pub(crate) launch: Launch,
    pub(crate) channels: usize,
    pub expected_time_us: f64,
    pub(crate) expected_algbw_gbs: f64,
    pub(crate) expected_busbw_gbs: f64,
    pub(crate) expected_low_busbw_gbs: f64,
    pub(crate) expected_high_busbw_gbs: f64,
    pub(crate) expected_low_time_us: f64,
    pub(crate) expected_high_time_us: f64,
    pub(crate) limit: Limit,
}

/// NCCL's chunk sizes (its protocol constants): a step of each protocol's buffer, and NVLS's own chunk.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Chunking {
    pub step_bytes: [f64; 3],
    /// NCCL_NVLS_CHUNKSIZE: NVLS and NVLSTree move this (or less, for small calls) per head and step.
    pub(crate) nvls_bytes: f64,
    /// NCCL_NVLSTREE_MAX_CHUNKSIZE's default at 4 nodes and more.
    pub(crate) nvls_tree_max_bytes: f64,
}

const KIB: f64 = 1024.0;

impl Chunking {
    /// NVLS's chunk for `d` bytes a channel moves over `heads` heads: NCCL's nvlsChunkSize (never above a Simple
    /// step), halved down to 64/32/16 KiB as the call shrinks below 64/8/2 chunks per head (enqueue.cc,
    /// calcCollChunking).
    pub(crate) fn nvls(&self, d: f64, heads: f64) -> f64 {
        let mut chunk = self.nvls_bytes.min(self.step_bytes[Proto::Simple as usize]);
        for (times, at_most) in [(64.0, 64.0 * KIB), (8.0, 32.0 * KIB), (2.0, 16.0 * KIB)] {
            if d < times * heads * chunk && chunk > at_most {
                chunk = at_most;
            }
        }
        chunk
    }

    /// NVLSTree's chunk: nvlsChunkSize, at most NCCL_NVLSTREE_MAX_CHUNKSIZE from 4 nodes, then down to 128/64/32 KiB
    /// below 16/4/1 chunks per head.
    pub(crate) fn nvls_tree(&self, d: f64, heads: f64, nodes: usize) -> f64 {
        let mut chunk = self.nvls_bytes;
        if nodes >= 4 {
            chunk = chunk.min(self.nvls_tree_max_bytes);
        }
        for (times, at_most) in [
            (32.0, 256.0 * KIB),
            (16.0, 128.0 * KIB),
            (4.0, 64.0 * KIB),
            (1.0, 32.0 * KIB),
        ] {
            if d < times * heads * chunk && chunk > at_most {
                chunk = at_most;
            }
        }
        chunk
    }

    /// Tree/LL128's chunk: an LL128 step, halved (not below 128 KiB, then 32 KiB) while a channel's bytes hold fewer
    /// chunks than 64 (then 16) x (1 + log2 nodes + 0.1 ppn) / ppn, so every level of the tree gets a chunk early.
    pub(crate) fn tree_ll128(&self, d: f64, ranks: usize, nodes: usize) -> f64 {
        let nodes = nodes.max(1);
        let ppn = ranks as f64 / nodes as f64;
        let levels = 1.0 + f64::from(nodes.ilog2()) + 0.1 * ppn;
        let mut chunk = self.step_bytes[Proto::Ll128 as usize];
        for (per, floor) in [(64.0, 128.0 * KIB), (16.0, 32.0 * KIB)] {
            while (d / chunk).floor() < levels * per / ppn && chunk > floor {
                chunk = (chunk / 2.0).floor();
            }
        }
        chunk
    }
}

/// The constants of one machine, resolved from `Params` (serialised into a calibration of the expected form).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    /// The device side of a call's launch and completion (what a CUDA graph leaves of it), added to its time.
    pub(crate) launch_us: f64,
    /// Eager launch only (0 under a CUDA graph, and in calibrations written before it existed): the host's cost of
    /// one call (NCCL's enqueue and the kernel launch). nccl-tests enqueues its calls without waiting, so this
    /// overlaps the previous call's kernel and a call takes the longer of it and the device's time (`evaluate`).
    #[serde(default)]
    pub(crate) host_call_us: f64,
    pub(crate) hop_us: [f64; 3],
    pub(crate) step_us: [f64; 3],
    pub(crate) channel_gbs: [f64; 3],
    pub(crate) nvls_efficiency: f64,
    /// NVLSTree's multimem efficiency (multi-node), apart from single-node NVLS's.
    pub(crate) nvls_tree_efficiency: f64,
    pub(crate) nvls_hop_us: f64,
    pub(crate) reduce_efficiency: f64,
    pub(crate) chunking: Chunking,
    pub(crate) wire_efficiency: [f64; 3],
    pub(crate) nvlink: [(f64, f64); 3],
    pub(crate) pcie_efficiency: f64,
    pub(crate) inter_socket_gbs: [f64; 3],
    pub(crate) staging_gbs: f64,
    pub(crate) c2c_efficiency: f64,
    pub(crate) net_efficiency: f64,
    pub(crate) net_hop_us: f64,
    pub(crate) net_step_us: f64,
}

/// The GPU class of a compute capability (x10).
pub fn gpu_class(sm: u32) -> &'static str {
    match sm {
        0..=80 => "sm80",
        81..=89 => "sm89",
        90..=99 => "sm90",
        100..=119 => "sm100",
        _ => "sm120",
    }
}

impl Resolved {
    /// The constants of a machine whose nccl-tests runs one process per GPU (as `planner expect` assumes).
    pub(crate) fn new(params: &Params, gpu: &str, net: NetKind, launch: Launch) -> Resolved {
        Resolved::for_process(params, gpu, net, launch, 1)
    }

    /// As `new`, for a process that drives `gpus_per_process` GPUs (nccl-tests `-g N`): under eager launch its
    /// host enqueues every GPU's kernel of a call in turn, so each further GPU adds its launch to the host's cost.
    pub(crate) fn for_process(
        params: &Params,
        gpu: &str,
        net: NetKind,
        launch: Launch,
        gpus_per_process: usize,
    ) -> Resolved {
        let extra_gpus = gpus_per_process.max(1) as f64 - 1.0;
        let per_extra_gpu = params.get("host", "host", "launch_per_extra_gpu_us");
        let g = |n: &str| params.get("gpu", gpu, n);
        let l = |c: &str, n: &str| params.get("link", c, n);
        let pr = |n: &str| params.get("protocol", "protocols", n);
        let nk = |n: &str| params.get("net", net.name(), n);
        Resolved {
            launch_us: g("launch_graph_us"),
            host_call_us: match launch {
                Launch::Eager => g("launch_eager_us") + extra_gpus * per_extra_gpu,
                Launch::Graph => 0.0,
            },
            hop_us: [g("hop_ll_us"), g("hop_ll128_us"), g("hop_simple_us")],
            step_us: [g("step_ll_us"), g("step_ll128_us"), g("step_simple_us")],
            channel_gbs: [
                g("channel_ll_gbs"),
                g("channel_ll128_gbs"),
                g("channel_simple_gbs"),
            ],
            nvls_efficiency: g("nvls_efficiency"),
            nvls_tree_efficiency: g("nvls_tree_efficiency"),
            nvls_hop_us: g("nvls_hop_us"),
            reduce_efficiency: g("reduce_efficiency"),
            chunking: Chunking {
                step_bytes: [
                    pr("ll_step_bytes"),
                    pr("ll128_step_bytes"),
                    pr("simple_step_bytes"),
                ],
                nvls_bytes: pr("nvls_chunk_bytes"),
                nvls_tree_max_bytes: pr("nvls_tree_max_chunk_bytes"),
            },
            wire_efficiency: [
                pr("ll_wire_efficiency"),
                pr("ll128_wire_efficiency"),
                pr("simple_wire_efficiency"),
            ],
            nvlink: [
                (l("nvlink3", "lane_gbs"), l("nvlink3", "efficiency")),
                (l("nvlink4", "lane_gbs"), l("nvlink4", "efficiency")),
                (l("nvlink5", "lane_gbs"), l("nvlink5", "efficiency")),
            ],
            pcie_efficiency: l("pcie", "efficiency"),
            inter_socket_gbs: [
                l("inter-socket", "intel_gbs"),
                l("inter-socket", "amd_gbs"),
                l("inter-socket", "other_gbs"),
            ],
            staging_gbs: l("host-memory", "staging_gbs"),
            c2c_efficiency: l("c2c", "efficiency"),
            net_efficiency: nk("efficiency"),
            net_hop_us: nk("hop_us"),
            net_step_us: nk("step_us"),
        }
    }

    /// A slot's physical rate one way, GB/s.
    pub(crate) fn rate(&self, slot: &plan::Slot) -> f64 {
        match slot.class {
            LinkClass::NvLink(g) => {
                let (lane, eff) = self.nvlink[(g.clamp(3, 5) - 3) as usize];
                f64::from(slot.lanes) * lane * eff
            }
            LinkClass::Pcie => slot.nominal_gbs * self.pcie_efficiency,
            LinkClass::InterSocket(v) => match v {
                CpuVendor::Intel => self.inter_socket_gbs[0],
                CpuVendor::Amd => self.inter_socket_gbs[1],
                _ => self.inter_socket_gbs[2],
            },
            LinkClass::C2c => slot.nominal_gbs * self.c2c_efficiency,
            LinkClass::Nic => slot.nominal_gbs * self.net_efficiency,
            LinkClass::HostMemory => self.staging_gbs,
        }
    }
}

/// The expected model of one machine: the plan NCCL's search found, NCCL's model (for its masks, per-call
/// channels and its pick) and the constants.
#[derive(Debug, Clone)]
pub struct Expected {
    pub(crate) plan: Plan,
    pub model: Model,
    pub(crate) class: MachineClass,
    pub(crate) launch: Launch,
    /// GPUs one host thread drives (`ExpectOptions::gpus_per_thread`, at least 1).
    pub(crate) gpus_per_thread: usize,
    pub(crate) resolved: Resolved,
}

/// The expected model on the inputs `pipeline::build_model` takes; returns NCCL's model (unchanged) beside it.
pub fn build(
    cluster: &Cluster,
    graph_file: Option<&str>,
    table: TuningTable,
    env: NcclEnv,
    nvls: NvlsFlag,
    opts: &ExpectOptions,
) -> Result<(Model, Expected)> {
    build_with(
        cluster,
        graph_file,
        table,
        env,
        nvls,
        opts,
        &Params::builtin()?,
    )
}

/// As `build`, with another set of constants (`Params::load_dir`, a fit).
pub(crate) fn build_with(
    cluster: &Cluster,
    graph_file: Option<&str>,
    table: TuningTable,
    env: NcclEnv,
    nvls: NvlsFlag,
    opts: &ExpectOptions,
    params: &Params,
) -> Result<(Model, Expected)> {
    let nvls_state = crate::model::ModelInput::nvls_request(cluster, &env, nvls);
    let mut search_opts = crate::pipeline::search_options(cluster, &env, nvls_state.supported())?;
    search_opts.family = table.version;
    let (result, _) = crate::pipeline::channels(cluster, &search_opts, graph_file)?;
    let n_channels = result.connection.n_channels;
    let model =
        crate::pipeline::model_from_graphs(cluster, &result.graphs, n_channels, table, env, nvls)?;
    let expected = Expected::new(cluster, &result.graphs, &model, params, opts)?;
    Ok((model, expected))
}

/// Inter-node units a tree channel carries per direction at the busiest node: 1 with 2 nodes (each is the other's
/// parent in one of the two trees), towards 2 for many (an inner node of one tree, a leaf of the other).
fn tree_net_units(n_nodes: usize) -> f64 {
    let n = n_nodes.max(2) as f64;
    2.0 - 2.0 / n
}

fn ceil_log2(n: usize) -> f64 {
    (n.max(1) as f64).log2().ceil()
}

/// A physical link's load: the slot (its rate), the flows on it in units of a channel's volume, and whether the
/// traffic is NVLS multimem (charged at the NVSwitch's reduction rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Load {
    pub(crate) slot: usize,
    pub(crate) units: f64,
    pub(crate) multimem: bool,
}

/// One pair at one size on one plan, before the constants: the volume a channel moves, its steps, its hops and the
/// loads on the links it crosses (only the busiest of each kind of link is kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub(crate) proto: Proto,
    pub(crate) channels: usize,
    /// Bytes one channel of one rank moves (payload).
    pub(crate) volume: f64,
    /// Sequential steps per channel.
    pub(crate) steps: f64,
    /// Of those, the steps that cross the network or are paced by it (the network's per-step cost is theirs): the
    /// network hops of the first chunk's chain, then every step of the pipeline's steady state, which the slowest
    /// stage (the network) sets. 0 on one node.
    pub(crate) net_steps: f64,
    pub(crate) intra_hops: f64,
    pub(crate) net_hops: f64,
    pub(crate) nvls_hops: f64,
    pub(crate) multi_node: bool,
    pub(crate) loads: Vec<Load>,
    /// One rank: a local copy, launch only.
    pub(crate) single_rank: bool,
    /// The collective reduces (a channel's threads add as they copy).
    pub(crate) reduces: bool,
}

/// The loads of `nc` channels over `flows` (+ `extra` per channel), the busiest slot of each link kind kept.
fn loads_of(
    plan: &Plan,
    flows: &[ChannelFlows],
    nc: usize,
    net_units: f64,
    extra: &[(usize, f64, bool)],
) -> Vec<Load> {
    let mut loads = vec![0.0; plan.slots.len()];
    let mut multimem = vec![false; plan.slots.len()];
    for k in 0..nc {
        if let Some(ch) = flows.get(k % flows.len().max(1)) {
            for &(s, u) in &ch.intra {
                loads[s] += u;
            }
            for &(s, u) in &ch.net {
                loads[s] += u * net_units;
            }
        }
        for &(s, u, mm) in extra {
            loads[s] += u;
            multimem[s] |= mm;
        }
    }
    // Slots of the same kind and size: only the most loaded can bound the rate.
    let mut kept: Vec<Load> = Vec::new();
    for (s, &units) in loads.iter().enumerate() {
        if units <= 0.0 {
            continue;
        }
        let slot = &plan.slots[s];
        let same = kept.iter_mut().find(|l| {
            let o = &plan.slots[l.slot];
            o.class == slot.class
                && o.lanes == slot.lanes
                && o.nominal_gbs == slot.nominal_gbs
                && l.multimem == multimem[s]
        });
        match same {
            Some(l) if l.units >= units => {}
            Some(l) => {
                *l = Load {
                    slot: s,
                    units,
                    multimem: multimem[s],
                }
            }
            None => kept.push(Load {
                slot: s,
                units,
                multimem: multimem[s],
            }),
        }
    }
    kept
}

/// Inter-node units per direction, the step structure and the loads of one pair (parameter-free but for the
/// protocol's step sizes, which are NCCL's constants). None where the pair is not modelled (CollNet, PAT,
/// planner's own kernels) or the plan has no graph for it.
pub(crate) fn prepare(
    plan: &Plan,
    chunking: &Chunking,
    coll: Coll,
    algo: Algo,
    proto: Proto,
    bytes: u64,
    channels: usize,
) -> Option<Prepared> {
    let p = proto as usize;
    let s = bytes as f64;
    let n = plan.n_ranks.max(1);
    let g = plan.local_ranks.max(1);
    let nodes = plan.n_nodes.max(1);
    let multi = nodes > 1;
    let nc = channels.max(1);
    let mut prepared = Prepared {
        proto,
        channels: nc,
        volume: 0.0,
        steps: 1.0,
        net_steps: 0.0,
        intra_hops: 0.0,
        net_hops: 0.0,
        nvls_hops: 0.0,
        multi_node: multi,
        loads: Vec::new(),
        single_rank: n == 1,
        reduces: matches!(coll, Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce),
    };
    if n == 1 {
        return Some(prepared);
    }
    let d = s / nc as f64;
    let step = chunking.step_bytes[p];
    let nf = n as f64;
    match algo {
        Algo::Ring => {
            if plan.ring.is_empty() {
                return None;
            }
            let ring_steps = match coll {
                Coll::AllReduce => 2 * (n - 1),
                _ => n - 1,
            } as f64;
            let (per_rank, volume) = match coll {
                Coll::AllReduce => (d / nf, 2.0 * (nf - 1.0) / nf * d),
                Coll::AllGather | Coll::ReduceScatter => (d / nf, (nf - 1.0) / nf * d),
                Coll::Broadcast | Coll::Reduce => (d, d),
            };
            let chunk = step.min(per_rank).max(1.0);
            let loops = (per_rank / chunk).ceil().max(1.0);
            prepared.steps = match coll {
                Coll::Broadcast | Coll::Reduce => loops + ring_steps - 1.0,
                _ => ring_steps * loops,
            };
            prepared.net_hops = if multi {
                ring_steps * nodes as f64 / nf
            } else {
                0.0
            };
            prepared.intra_hops = ring_steps - prepared.net_hops;
            if multi {
                // The first chunk's chain crosses the network net_hops times; the later steps follow its pace.
                prepared.net_steps = prepared.net_hops + (prepared.steps - ring_steps).max(0.0);
            }
            prepared.volume = volume;
            prepared.loads = loads_of(plan, &plan.ring, nc, 1.0, &[]);
        }
        Algo::Tree => {
            if plan.tree.is_empty() {
                return None;
            }
            let step = if proto == Proto::Ll128 {
                chunking.tree_ll128(d, n, nodes)
            } else {
                step
            };
            let chunk = step.min(d).max(1.0);
            prepared.intra_hops = 2.0 * (g - 1) as f64;
            prepared.net_hops = 2.0 * ceil_log2(nodes);
            // Fill and drain: the first chunk crosses every level up and down before the last one can leave.
            let chunks = (d / chunk).ceil().max(1.0);
            prepared.steps = chunks + prepared.intra_hops + prepared.net_hops - 1.0;
            prepared.net_steps = if multi {
                prepared.net_hops + chunks - 1.0
            } else {
                0.0
            };
            prepared.volume = d;
            prepared.loads = loads_of(plan, &plan.tree, nc, tree_net_units(nodes), &[]);
        }
        Algo::Nvls | Algo::NvlsTree => {
            if plan.nvls_out.is_empty() {
                return None;
            }
            let gf = g as f64;
            let (volume, out_u, in_u, hops) = match coll {
                Coll::AllReduce => (d * (1.0 + 1.0 / gf), 1.0, 1.0, 2.0),
                Coll::AllGather => (d * (gf - 1.0) / gf, 1.0 / (gf - 1.0).max(1.0), 1.0, 1.0),
                Coll::ReduceScatter => (d * (gf - 1.0) / gf, 1.0, 1.0 / (gf - 1.0).max(1.0), 1.0),
                _ => return None,
            };
            let extra: Vec<(usize, f64, bool)> = plan
                .nvls_out
                .iter()
                .map(|&s| (s, out_u, true))
                .chain(plan.nvls_in.iter().map(|&s| (s, in_u, true)))
                .collect();
            let heads = plan.nvls.len().max(1) as f64;
            let chunk = chunking.nvls(d, heads).min(d / gf).max(1.0);
            prepared.steps = hops * (d / gf / chunk).ceil().max(1.0);
            prepared.nvls_hops = hops;
            let net_units = if multi {
                // NVLS reduce, the tree between nodes, NVLS broadcast: a chunk fills every stage in turn.
                prepared.net_hops = 2.0 * ceil_log2(nodes);
                let net_chunk = chunking.nvls_tree(d, heads, nodes).min(d).max(1.0);
                let chunks = (d / net_chunk).ceil().max(1.0);
                prepared.steps = chunks + hops + prepared.net_hops - 1.0;
                prepared.net_steps = prepared.net_hops + chunks - 1.0;
                tree_net_units(nodes) * d / volume
            } else {
                0.0
            };
            prepared.volume = volume;
            prepared.loads = loads_of(plan, &plan.nvls, nc, net_units, &extra);
        }
        _ => return None,
    }
    Some(prepared)
}

/// The expected time (us) of a prepared pair under constants `r`, and what limits it:
/// launch + hops x their latency + steps x max(step synchronisation, step bytes / channel rate) (Simple within the
/// node: the sum).
/// Under eager launch the host's per-call cost is a floor: the host enqueues the next call while the GPU runs this
/// one, so a call the GPU finishes sooner waits for the host (2x H200, NCCL 2.28, tests/data/expect-own: Ring/LL
/// at 8 B takes 7.3-9.0 us eager and 5.6-5.8 us under a graph, Ring/LL128 12.0 and 12.1 us: the same once the GPU
/// takes longer than the host).
pub(crate) fn evaluate(plan: &Plan, r: &Resolved, pp: &Prepared) -> Option<(f64, Limit)> {
    let (time, limit) = step_form(plan, r, pp, 1.0, pp.steps, Fence::Added)?;
    if r.host_call_us > time {
        Some((r.host_call_us, Limit::Latency))
    } else {
        Some((time, limit))
    }
}

/// `evaluate` with the bandwidth term (the time the volume takes at the channel rate) stretched by
/// `transfer_factor`, and that volume spread over `chunk_steps` steps instead of all `pp.steps` (1 and `pp.steps`:
/// `evaluate`). `calibrate` passes the steps that each move a new chunk, so a pipeline's fill and drain steps
/// (a tree's levels, a ring broadcast's hops) each move a whole chunk too. Every step here takes the longer of
/// its synchronisation and its bytes' time, Simple's too: calibrate's form, whose fitted step and channel rate
/// absorb the fence (its k-fold figures were set on it).
pub fn evaluate_with(
    plan: &Plan,
    r: &Resolved,
    pp: &Prepared,
    transfer_factor: f64,
    chunk_steps: f64,
) -> Option<(f64, Limit)> {
    step_form(plan, r, pp, transfer_factor, chunk_steps, Fence::Overlapped)
}

/// How a Simple step's fence counts within the node: added to its bytes' time (the expected model) or overlapped
/// with it like LL's and LL128's flags (calibrate's form).
#[derive(Clone, Copy, PartialEq)]
enum Fence {
    Added,
    Overlapped,
}

fn step_form(
    plan: &Plan,
    r: &Resolved,
    pp: &Prepared,
    transfer_factor: f64,
    chunk_steps: f64,
    fence: Fence,
) -> Option<(f64, Limit)> {
    if pp.single_rank {
        return Some((r.launch_us, Limit::Latency));
    }
    let p = pp.proto as usize;
    let wire = r.wire_efficiency[p];
    let mut rate = f64::INFINITY;
    let mut at = None;
    let nvls_eff = if pp.multi_node {
        r.nvls_tree_efficiency
    } else {
        r.nvls_efficiency
    };
    for l in &pp.loads {
        let eff = if l.multimem { nvls_eff } else { 1.0 };
        let x = r.rate(&plan.slots[l.slot]) * eff * wire / l.units;
        if x < rate {
            rate = x;
            at = Some(*l);
        }
    }
    let cap = r.channel_gbs[p] * if pp.reduces { r.reduce_efficiency } else { 1.0 };
    let limit_bw = if cap < rate {
        rate = cap;
        Limit::Protocol {
            proto: pp.proto,
            rate_gbs: cap * pp.channels as f64,
        }
    } else {
        match at {
            Some(l) if l.multimem => Limit::NvlsReduce {
                rate_gbs: r.rate(&plan.slots[l.slot]) * nvls_eff,
            },
            Some(l) => Limit::Link {
                class: plan.slots[l.slot].class.name(),
                name: plan.slots[l.slot].name.clone(),
                rate_gbs: r.rate(&plan.slots[l.slot]),
            },
            None => Limit::Latency,
        }
    };
    if !rate.is_finite() || rate <= 0.0 {
        return None;
    }
    let step_oh = r.step_us[p];
    let net_step_oh = step_oh + r.net_step_us;
    let fill =
        pp.intra_hops * r.hop_us[p] + pp.net_hops * r.net_hop_us + pp.nvls_hops * r.nvls_hop_us;
    let bw_us = pp.volume / (rate * 1e3) * transfer_factor;
    let step_bw_us = bw_us / chunk_steps.clamp(1.0, pp.steps.max(1.0));
    let net_steps = pp.net_steps.min(pp.steps);
    // A Simple step ends with a memory fence before its flag: the channel's threads wait for their writes to land
    // before the next step's copy, so within the node the step's synchronisation adds to its transfer. LL and
    // LL128 carry the flag inside the data (no fence): their synchronisation overlaps the transfer. A network
    // step's cost is the proxy's posting and polling beside the NIC's DMA: it overlaps too.
    let intra_step = |bw: f64| {
        if pp.proto == Proto::Simple && fence == Fence::Added {
            bw + step_oh
        } else {
            bw.max(step_oh)
        }
    };
    let time = r.launch_us
        + fill
        + (pp.steps - net_steps) * intra_step(step_bw_us)
        + net_steps * step_bw_us.max(net_step_oh);
    let limit = if bw_us > r.launch_us + fill + pp.steps * step_oh + net_steps * r.net_step_us {
        limit_bw
    } else {
        Limit::Latency
    };
    Some((time, limit))
}

/// `prepare` then `evaluate`: the expected time (us) of one pair and what limits it.
pub(crate) fn simulate(
    plan: &Plan,
    r: &Resolved,
    coll: Coll,
    algo: Algo,
    proto: Proto,
    bytes: u64,
    channels: usize,
) -> Option<(f64, Limit)> {
    let pp = prepare(plan, &r.chunking, coll, algo, proto, bytes, channels)?;
    evaluate(plan, r, &pp)
}

impl Expected {
    pub(crate) fn new(
        cluster: &Cluster,
        graphs: &Graphs,
        model: &Model,
        params: &Params,
        opts: &ExpectOptions,
    ) -> Result<Expected> {
        let plan = Plan::new(cluster, graphs, model.env.p2p_level)?;
        let gdr = cluster
            .node
            .nodes(crate::topo::NodeKind::Net)
            .iter()
            .filter_map(|&i| cluster.node.node(i).net())
            .any(|n| n.gdr);
        let net_kind = (cluster.n_nodes > 1).then(|| {
            opts.net_kind
                .unwrap_or_else(|| NetKind::detect(&plan.nic_names, gdr))
        });
        let class = machine_class(&plan, net_kind, params);
        let resolved = Resolved::for_process(
            params,
            &class.gpu_class,
            net_kind.unwrap_or(NetKind::Ib),
            opts.launch,
            opts.gpus_per_thread.max(1),
        );
        Ok(Expected {
            plan,
            model: model.clone(),
            class,
            launch: opts.launch,
            gpus_per_thread: opts.gpus_per_thread.max(1),
            resolved,
        })
    }

    pub(crate) fn class(&self) -> &MachineClass {
        &self.class
    }
    pub(crate) fn launch(&self) -> Launch {
        self.launch
    }
    pub(crate) fn gpus_per_thread(&self) -> usize {
        self.gpus_per_thread
    }
    pub(crate) fn n_ranks(&self) -> usize {
        self.plan.n_ranks
    }

    fn call(&self, coll: Coll, bytes: u64) -> Option<Call> {
        Call::new(coll, bytes, self.plan.n_ranks, 1).ok()
    }

    fn expectation(
        &self,
        call: &Call,
        algo: Algo,
        proto: Proto,
        channels: usize,
    ) -> Option<Expectation> {
        let (time, limit) = simulate(
            &self.plan,
            &self.resolved,
            call.coll,
            algo,
            proto,
            call.model_bytes,
            channels,
        )?;
        let bytes = call.model_bytes as f64;
        let factor = call.coll.nccl_tests_bus_factor(self.plan.n_ranks);
        let band = self.class.band.at(call.size);
        let algbw = bytes / (time * 1e3);
        let busbw = algbw * factor;
        Some(Expectation {
            coll: call.coll,
            algo,
            proto,
            bytes: call.model_bytes,
            launch: self.launch,
            channels,
            expected_time_us: time,
            expected_algbw_gbs: algbw,
            expected_busbw_gbs: busbw,
            expected_low_busbw_gbs: busbw / (1.0 + band),
            expected_high_busbw_gbs: busbw / (1.0 - band).max(0.05),
            expected_low_time_us: time * (1.0 - band).max(0.05),
            expected_high_time_us: time * (1.0 + band),
            limit,
        })
    }

    /// One pair; None where NCCL cannot run it here (its masks) or it is not modelled.
    pub fn expect(&self, coll: Coll, algo: Algo, proto: Proto, bytes: u64) -> Option<Expectation> {
        let call = self.call(coll, bytes)?;
        let eval = self.model.evaluate(&call).ok()?;
        let c = eval
            .candidates
            .iter()
            .find(|c| c.algo == algo && c.proto == proto)?;
        if !c.masks.is_empty() && self.plan.n_ranks > 1 {
            return None;
        }
        self.expectation(&call, algo, proto, c.channels)
    }

    /// Every runnable pair, NCCL's order.
    pub(crate) fn all(&self, coll: Coll, bytes: u64) -> Vec<Expectation> {
        let Some(call) = self.call(coll, bytes) else {
            return Vec::new();
        };
        let Ok(eval) = self.model.evaluate(&call) else {
            return Vec::new();
        };
        eval.candidates
            .iter()
            .filter(|c| c.masks.is_empty() || self.plan.n_ranks == 1)
            .filter_map(|c| self.expectation(&call, c.algo, c.proto, c.channels))
            .collect()
    }

    /// The pair expected fastest (ties: NCCL's order).
    pub fn fastest(&self, coll: Coll, bytes: u64) -> Option<Expectation> {
        self.all(coll, bytes)
            .into_iter()
            .fold(None, |best, e| match best {
                Some(b) if b.expected_time_us <= e.expected_time_us => Some(b),
                _ => Some(e),
            })
    }

    /// NCCL's own pick (its model, NCCL_ALGO/NCCL_PROTO applied) with the expected time: what an unpinned
    /// nccl-tests run should print.
    pub(crate) fn nccl_pick(&self, coll: Coll, bytes: u64) -> Option<Expectation> {
        let call = self.call(coll, bytes)?;
        let eval = self.model.evaluate(&call).ok()?;
        let w = eval.winner();
        self.expectation(&call, w.algo, w.proto, w.channels)
    }
}

fn machine_class(plan: &Plan, net: Option<NetKind>, params: &Params) -> MachineClass {
    let gpu = gpu_class(plan.min_sm).to_string();
    let nvlink = plan
        .slots
        .iter()
        .any(|s| matches!(s.class, LinkClass::NvLink(_)));
    let fabric = if plan.has_nvswitch {
        "nvswitch"
    } else if nvlink {
        "nvlink"
    } else {
        "pcie"
    };
    let mut name = format!("{gpu} {fabric}");
    if fabric == "pcie" && plan.sockets > 1 {
        name.push_str(&format!(" {}-socket", plan.sockets));
    }
    if let Some(k) = net {
        name.push_str(&format!(" + {}", k.name()));
    }
    let band_key = match (fabric, net) {
        ("pcie", _) => "pcie",
        (_, Some(_)) => "nvswitch-net",
        _ => "nvswitch",
    }
    .to_string();
    let b = |key: &str, r: &str| {
        let v = params.get("bands", "bands", &format!("{key}_{r}"));
        if v > 0.0 {
            v
        } else {
            params.get("bands", "bands", &format!("default_{r}"))
        }
    };
    MachineClass {
        name,
        gpu_class: gpu,
        band: Band {
            small: b(&band_key, "small"),
            mid: b(&band_key, "mid"),
            large: b(&band_key, "large"),
        },
        band_key,
        net_kind: net,
    }
}
