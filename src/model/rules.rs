//! The formula and rule changes of NCCL's cost model between release
//! families, each with the families it applies to and where it was read.
//! Numbers live in `tuning-tables/*.json`; what NCCL *does* with them, when
//! that changed between 2.18 and 2.31 (pre-release), is a `Rule` here, switched on by the
//! table's family (`TuningTable::has`). Sources are `tag file:line` of the
//! first (or only) tag that has the rule's code.

use serde::Serialize;

/// `(major, minor)` of an NCCL release family.
pub(crate) type Family = (u32, u32);

/// A rule of NCCL's model that exists in some families only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Rule {
    /// The PAT algorithm (AllGather/ReduceScatter, one GPU per node).
    Pat,
    /// NVLS has AllGather/ReduceScatter kernels.
    NvlsAllGatherReduceScatter,
    /// CollNetDirect has AllGather/ReduceScatter kernels.
    CollnetDirectAllGatherReduceScatter,
    /// Ring/LL bus bandwidth x1/4 (several nodes, AllReduce, Reduce) or x1/3, not x0.5.
    RingLlQuarterThird,
    /// Ring/LL128 bus bandwidth x0.7 (not x0.92) with fewer than 2 GPUs per node.
    RingLl128OnePerNodePenalty,
    /// NVLS bandwidth as the ring's (`bwIntra`/`bwInter`), algbw x5/6 (NVLS) and
    /// x0.7*nNodes/(2(nNodes-1)) (NVLSTree); latency `baseLat + hwLat[NET]`.
    NvlsModel2_18,
    /// NVLS bandwidth `min(bwIntra, bwInter)`, NVLSTree `min(bwIntra, bwInter or bwInter/2)`, algbw x5/6.
    NvlsMinIntraInter,
    /// NVLS AllGather/ReduceScatter bandwidth `min(bwIntra*(ppn-1)/ppn, 0.9*bwInter)`.
    NvlsAllGatherReduceScatterBw2_27,
    /// NVLS efficiency model: `nvlsEfficiency`, (nCh-1)/nCh, x2 for AllReduce,
    /// `perChMaxNVLSTreeBw`, algbw `nRanks/nsteps`, at least 2 channels.
    NvlsEfficiency,
    /// Bus to algorithm bandwidth is skipped for every non-Ring AllGather/ReduceScatter
    /// (before: only for CollNetDirect AllGather/ReduceScatter).
    AlgbwSkipNonRingAllGatherReduceScatter,
    /// CollNetDirect AllGather/ReduceScatter: `ppn*bwIntra` times a 0.95..0.85
    /// interpolation, 0 when the plugin lacks the collective or ppn > heads.
    CollnetDirectAllGatherReduceScatterBw2_20,
    /// CollNetDirect AllGather/ReduceScatter `ppn*min(bwIntra, 0.9*bwInter)`, and
    /// NVLS/CollNetDirect AllGather/ReduceScatter across nodes need collnet and one head per GPU.
    CollnetAllGatherReduceScatterHeads,
    /// Tree x0.85 when the highest tree pattern over the ranks is TREE (before: the local graph's).
    TreePatternMaxOverRanks,
    /// Blackwell (sm100+) has its own bandwidth rows (before: the Hopper rows).
    BlackwellRows,
    /// With one GPU per node the inter-node latency is the Tree row's.
    InterLatencyTreeRowOnePerNode,
    /// Ring AllReduce counts `2*nNodes` inter-node steps (not `2*(nNodes-1)`).
    RingInterStepsTwiceNodes,
    /// PAT latency starts at a hard-coded 8 µs (not `baseLatencies[PAT]`).
    PatLatencyHardCoded,
    /// `NCCL_ALGO`/`NCCL_PROTO` take `function:list` entries (before: one list for all).
    PerFunctionAlgoProtoLists,
    /// `NCCL_ALGO` never disables Ring for functions other than AllReduce.
    RingNeverDisabledOutsideAllReduce,
    /// When `NCCL_ALGO` leaves only CollNet and CollNet is off, Ring and Tree are re-enabled.
    CollnetOnlyAlgoIgnored,
    /// When every entry of a function is masked, Ring's bandwidths come back (init table and per call).
    RingBackup,
    /// LL128's auto gate accepts only sm70, sm80 and sm90.
    Ll128Sm708090Only,
    /// LL128's auto gate accepts only sm70, sm80, sm90, sm100 and sm120.
    Ll128Sm70To120List,
    /// `NCCL_LL128_C2C` chooses the inter-node path limit (PXN or PXB) on sm90+.
    Ll128C2cKnob,
    /// LL128 between GPUs of different generations when the oldest is sm90+ (table flag).
    Ll128MixedGenerationsFromSm90,
    /// CollNetChain is disabled when the plugin lacks chain support (table flag).
    CollnetChainNeedsChainSupport,
    /// PAT needs sm60+.
    PatNeedsSm60,
    /// Tree always launches `NCCL_MAX_NTHREADS` threads.
    TreeAllThreads,
    /// NVLS across nodes uses `min(nvlsChannels, nChannels)` channels.
    NvlsMultiNodeChannelsMin,
    /// CollNetDirect is masked per call with more than 8 GPUs per node.
    CollnetDirectLocalRanksMask,
    /// CollNetChain is masked per call with more than 8 GPUs per node.
    CollnetChainLocalRanksMask,
    /// NVLS AllGather/ReduceScatter is masked per call across nodes.
    NvlsAllGatherReduceScatterOneNodeOnly,
    /// NVLS AllGather/ReduceScatter is masked per call with more than 32 ranks.
    NvlsAllGatherReduceScatterRankLimit,
    /// NVLS/NVLSTree for functions other than AllReduce are masked with more than 32 GPUs per node.
    NvlsLocalRankLimitOutsideAllReduce,
    /// NVLSTree AllReduce gets the tree correction on Blackwell with x86 CPUs (table flag).
    NvlsTreeCorrectionBlackwellX86,
    /// sm100 across nodes: the NVLS channel count follows node count, GPUs per node and NIC bandwidth.
    NvlsSm100MultiNodeTuning,
    /// `numPipeOps = ceil(tasks / nChannels)` for a group.
    PipeOpsPerChannel,
    /// A group's aggregate is priced with `numPipeOps = 1`.
    PipeOpsOne,
    /// The argmin starts at 3600000000 µs: a pair slower than an hour is never picked.
    ArgminOneHourLimit,
    /// Work is spread over channels in cells of `max(MinTrafficPerChannel/trafficPerByte)` bytes.
    CellScheduler,
    /// Work is spread over channels in 16-byte cells with a 512-byte minimum.
    CellScheduler16Bytes,
    /// Work is placed with `ncclWorkElem` lists (not modelled).
    WorkElementScheduler,
    /// A group's aggregate gets its own channel count and scaled bandwidth (not modelled).
    AggregateChannels2_18,
    /// Ring/Simple gets 256 threads when the ring is no faster than `PCI_BW`.
    RingSimpleLowBwThreads,
    /// A non-empty `NCCL_ALGO` starts every function's algorithm row at 0: a
    /// function another list forces (`NCCL_PROTO`) but `NCCL_ALGO` does not name has no algorithm.
    AlgoEnvZeroFillsUnnamedFunctions,
    /// The LL128 gate runs only for functions `NCCL_ALGO`/`NCCL_PROTO` force (not modelled).
    Ll128GateOnlyForForcedFunctions,
    /// Ring uses `bwInter` from 2 nodes (before: `bwIntra` up to 2 nodes).
    RingBwInterFromTwoNodes,
    /// Tree and PAT use `min(bwIntra, bwInter)` (before: `bwIntra` up to 2 nodes, else `bwInter`).
    TreePatBwMinIntraInter,
    /// Ring Broadcast/Reduce step latency from the intra-node row across nodes (before: the NET row).
    RingBroadcastReduceIntraRow,
    /// PAT adds the graph's `latencyInter` once (before: twice, as a flush).
    PatFlushLatencyOnce,
    /// CollNet bandwidths of the 2.31 model (carried-over busBw, no sm90 x0.85, AG/RS x0.5; not modelled).
    CollnetModel2_31,
    /// Ties in the per-call argmin go to the highest tuning id (not modelled).
    ArgminTiesToHighestId,
}

/// One rule: the families it applies to, what it does, where it was read.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RuleInfo {
    pub(crate) rule: Rule,
    /// Stable name for result files and `planner diff`.
    pub name: &'static str,
    /// First family with the rule.
    pub(crate) first: Family,
    /// Last family with it; `None` while the newest family has it.
    pub(crate) last: Option<Family>,
    pub(crate) what: &'static str,
    /// `tag file:line` where the rule's code was read.
    pub(crate) source: &'static str,
    /// True when planner implements the rule; false when it is only recorded.
    pub(crate) modelled: bool,
}

impl RuleInfo {
    /// Whether the rule applies to `family`.
    pub fn applies_to(&self, family: Family) -> bool {
        family >= self.first && self.last.is_none_or(|last| family <= last)
    }
}

const fn rule(
    rule: Rule,
    name: &'static str,
    first: Family,
    last: Option<Family>,
    what: &'static str,
    source: &'static str,
) -> RuleInfo {
    RuleInfo {
        rule,
        name,
        first,
        last,
        what,
        source,
        modelled: true,
    }
}

const fn recorded(
    rule: Rule,
    name: &'static str,
    first: Family,
    last: Option<Family>,
    what: &'static str,
    source: &'static str,
) -> RuleInfo {
    RuleInfo {
        modelled: false,
        ..self::rule(rule, name, first, last, what, source)
    }
}

/// Every versioned rule, in the order of NCCL's code path.
pub const RULES: &[RuleInfo] = &[
    rule(
        Rule::Pat,
        "pat",
        (2, 23),
        None,
        "PAT algorithm for AllGather/ReduceScatter (7 algorithms; 6 before)",
        "v2.23.4-1 src/graph/tuning.cc:178-179",
    ),
    rule(
        Rule::NvlsAllGatherReduceScatter,
        "nvls_allgather_reducescatter",
        (2, 19),
        None,
        "NVLS kernels for AllGather and ReduceScatter",
        "v2.19.4-1 src/graph/tuning.cc:168-169",
    ),
    rule(
        Rule::CollnetDirectAllGatherReduceScatter,
        "collnet_direct_allgather_reducescatter",
        (2, 20),
        None,
        "CollNetDirect kernels for AllGather and ReduceScatter",
        "v2.20.5-1 src/graph/tuning.cc:169-170",
    ),
    rule(
        Rule::RingLlQuarterThird,
        "ring_ll_quarter_third",
        (2, 18),
        Some((2, 20)),
        "Ring/LL busBw x1/4 (several nodes, AllReduce, Reduce) or x1/3 (others), not x0.5",
        "v2.18.6-1 src/graph/tuning.cc:178",
    ),
    rule(
        Rule::RingLl128OnePerNodePenalty,
        "ring_ll128_one_per_node_penalty",
        (2, 18),
        Some((2, 22)),
        "Ring/LL128 busBw x0.7 instead of x0.92 when ppn < 2",
        "v2.18.6-1 src/graph/tuning.cc:179 (to v2.22.3-1 :179)",
    ),
    rule(
        Rule::NvlsModel2_18,
        "nvls_model_2_18",
        (2, 18),
        Some((2, 18)),
        "NVLS/NVLSTree bw as ring (bwIntra, or bwInter beyond 2 nodes); algbw x5/6 and x0.7*nNodes/(2(nNodes-1)); latency baseLat + hwLat[NET] (x2(nNodes-1) for NVLSTree)",
        "v2.18.6-1 src/graph/tuning.cc:174,197-198,235-238",
    ),
    rule(
        Rule::NvlsMinIntraInter,
        "nvls_min_intra_inter",
        (2, 19),
        Some((2, 27)),
        "NVLS bw min(bwIntra, bwInter); NVLSTree min(bwIntra, bwInter, /2 beyond 2 nodes); algbw x5/6",
        "v2.19.4-1 src/graph/tuning.cc:175-176,199",
    ),
    rule(
        Rule::NvlsAllGatherReduceScatterBw2_27,
        "nvls_allgather_reducescatter_bw_2_27",
        (2, 27),
        Some((2, 27)),
        "NVLS AllGather/ReduceScatter bw min(bwIntra*(ppn-1)/ppn, 0.9*bwInter)",
        "v2.27.7-1 src/graph/tuning.cc:267-273",
    ),
    rule(
        Rule::NvlsEfficiency,
        "nvls_efficiency",
        (2, 28),
        None,
        "NVLS/NVLSTree bw = bwIntra*nvlsEfficiency*(nCh-1)/nCh (x2 AllReduce, x(ppn-1)/ppn otherwise) capped by bwInter and perChMaxNVLSTreeBw; algbw nRanks/nsteps; needs 2 channels",
        "v2.28.9-1 src/graph/tuning.cc:285-300,348",
    ),
    rule(
        Rule::AlgbwSkipNonRingAllGatherReduceScatter,
        "algbw_skip_non_ring_allgather_reducescatter",
        (2, 23),
        None,
        "no bus-to-algorithm bandwidth conversion for non-Ring AllGather/ReduceScatter (before: only CollNetDirect's, from 2.20)",
        "v2.23.4-1 src/graph/tuning.cc:221",
    ),
    rule(
        Rule::CollnetDirectAllGatherReduceScatterBw2_20,
        "collnet_direct_allgather_reducescatter_bw_2_20",
        (2, 20),
        Some((2, 26)),
        "CollNetDirect AllGather/ReduceScatter busBw ppn*bwIntra x (w*0.85+(1-w)*0.95), w=(ppn-1)/7; 0 across nodes without the plugin collective or with ppn > heads",
        "v2.20.5-1 src/graph/tuning.cc:189-203",
    ),
    rule(
        Rule::CollnetAllGatherReduceScatterHeads,
        "collnet_allgather_reducescatter_heads",
        (2, 27),
        None,
        "CollNetDirect AllGather/ReduceScatter ppn*min(bwIntra, 0.9*bwInter); NVLS/CollNetDirect AllGather/ReduceScatter across nodes need collnet and a head per GPU",
        "v2.27.7-1 src/graph/tuning.cc:289-318",
    ),
    rule(
        Rule::TreePatternMaxOverRanks,
        "tree_pattern_max_over_ranks",
        (2, 26),
        None,
        "Tree x0.85 tests comm->maxTreePattern (before: the local tree graph's pattern)",
        "v2.26.6-1 src/graph/tuning.cc:261",
    ),
    rule(
        Rule::BlackwellRows,
        "blackwell_rows",
        (2, 25),
        None,
        "sm100+ uses the Blackwell bandwidth rows (before: the Hopper rows)",
        "v2.25.1-1 src/graph/tuning.cc:215",
    ),
    rule(
        Rule::InterLatencyTreeRowOnePerNode,
        "inter_latency_tree_row_one_per_node",
        (2, 23),
        Some((2, 30)),
        "interLat = hwLat[NET][Tree][p] when ppn == 1 (2.31: each model's own NET row)",
        "v2.23.4-1 src/graph/tuning.cc:236",
    ),
    rule(
        Rule::RingInterStepsTwiceNodes,
        "ring_inter_steps_twice_nodes",
        (2, 18),
        Some((2, 22)),
        "Ring AllReduce latency counts 2*nNodes inter-node steps (2*(nNodes-1) from 2.23)",
        "v2.18.6-1 src/graph/tuning.cc:161-163 (to v2.22.3-1 :159)",
    ),
    rule(
        Rule::PatLatencyHardCoded,
        "pat_latency_hard_coded",
        (2, 23),
        Some((2, 27)),
        "PAT latency = 8 + log2i(nNodes)*interLat/3.5 + nRanks*2.8 with 8 written in the code (PAT latency rows are 0)",
        "v2.23.4-1 src/graph/tuning.cc:278-280",
    ),
    rule(
        Rule::PerFunctionAlgoProtoLists,
        "per_function_algo_proto_lists",
        (2, 24),
        None,
        "NCCL_ALGO/NCCL_PROTO accept func:list entries; unknown names are errors (before: one list, unknown names ignored)",
        "v2.24.3-1 src/graph/tuning.cc:53-116,367",
    ),
    rule(
        Rule::RingNeverDisabledOutsideAllReduce,
        "ring_never_disabled_outside_allreduce",
        (2, 18),
        Some((2, 18)),
        "NCCL_ALGO does not disable Ring for functions other than AllReduce",
        "v2.18.6-1 src/graph/tuning.cc:296-297",
    ),
    rule(
        Rule::CollnetOnlyAlgoIgnored,
        "collnet_only_algo_ignored",
        (2, 18),
        Some((2, 23)),
        "when CollNet is off and NCCL_ALGO left no Ring/Tree/NVLS/NVLSTree, Ring and Tree are re-enabled",
        "v2.18.6-1 src/graph/tuning.cc:267-272 (to v2.23.4-1 :310-314)",
    ),
    rule(
        Rule::RingBackup,
        "ring_backup",
        (2, 19),
        Some((2, 23)),
        "a function with every entry at 0 gets Ring's model bandwidths back (init table); a masked Ring is a per-call fallback",
        "v2.19.4-1 src/graph/tuning.cc:202-204,305-318,404-412, src/enqueue.cc:1190-1215 (to v2.23.4-1 tuning.cc:343-357)",
    ),
    rule(
        Rule::Ll128Sm708090Only,
        "ll128_sm70_80_90_only",
        (2, 18),
        Some((2, 24)),
        "LL128 auto only when minCompCap is exactly 70, 80 or 90",
        "v2.18.6-1 src/graph/tuning.cc:288-293 (to v2.24.3-1 :426-431)",
    ),
    rule(
        Rule::Ll128Sm70To120List,
        "ll128_sm70_to_120_list",
        (2, 25),
        Some((2, 26)),
        "LL128 auto only when minCompCap is exactly 70, 80, 90, 100 or 120",
        "v2.25.1-1 src/graph/tuning.cc:431-437 (to v2.26.6-1 :432-439)",
    ),
    rule(
        Rule::Ll128C2cKnob,
        "ll128_c2c_knob",
        (2, 27),
        None,
        "NCCL_LL128_C2C (default 1) picks the sm90+ inter-node limit PXN, else PXB; any minCompCap >= 70",
        "v2.27.7-1 src/graph/tuning.cc:459-470",
    ),
    rule(
        Rule::Ll128MixedGenerationsFromSm90,
        "ll128_mixed_generations_from_sm90",
        (2, 30),
        None,
        "LL128 between GPU generations when the oldest is sm90+ (behaviour.ll128_mixed_compcap_allowed_from_sm90)",
        "v2.30.7-1 src/graph/tuning.cc:533",
    ),
    rule(
        Rule::CollnetChainNeedsChainSupport,
        "collnet_chain_needs_chain_support",
        (2, 30),
        None,
        "CollNetChain off without plugin chain support (behaviour.collnet_chain_needs_chain_support)",
        "v2.30.7-1 src/graph/tuning.cc:507",
    ),
    rule(
        Rule::PatNeedsSm60,
        "pat_needs_sm60",
        (2, 26),
        None,
        "PAT disabled below sm60",
        "v2.26.6-1 src/graph/tuning.cc:180",
    ),
    rule(
        Rule::TreeAllThreads,
        "tree_all_threads",
        (2, 22),
        None,
        "Tree launches NCCL_MAX_NTHREADS (640) threads whatever the size",
        "v2.22.3-1 src/enqueue.cc:1655",
    ),
    rule(
        Rule::NvlsMultiNodeChannelsMin,
        "nvls_multi_node_channels_min",
        (2, 28),
        None,
        "NVLS across nodes launches min(nvlsChannels, nChannels) channels (before: nvlsChannels)",
        "v2.28.9-1 src/enqueue.cc:1881-1882",
    ),
    rule(
        Rule::CollnetDirectLocalRanksMask,
        "collnet_direct_local_ranks_mask",
        (2, 23),
        None,
        "CollNetDirect skipped per call with more than 8 GPUs per node",
        "v2.23.4-1 src/enqueue.cc:1792-1793",
    ),
    rule(
        Rule::CollnetChainLocalRanksMask,
        "collnet_chain_local_ranks_mask",
        (2, 28),
        None,
        "CollNetChain skipped per call with more than 8 GPUs per node",
        "v2.28.9-1 src/enqueue.cc:1800-1801",
    ),
    rule(
        Rule::NvlsAllGatherReduceScatterOneNodeOnly,
        "nvls_allgather_reducescatter_one_node_only",
        (2, 19),
        Some((2, 26)),
        "NVLS AllGather/ReduceScatter skipped per call across nodes",
        "v2.19.4-1 src/enqueue.cc:1186-1187 (to v2.26.6-1 :1688-1689)",
    ),
    rule(
        Rule::NvlsAllGatherReduceScatterRankLimit,
        "nvls_allgather_reducescatter_rank_limit",
        (2, 25),
        Some((2, 26)),
        "NVLS AllGather/ReduceScatter skipped per call with more than NCCL_MAX_NVLS_ARITY (32) ranks",
        "v2.25.1-1 src/enqueue.cc:1610",
    ),
    rule(
        Rule::NvlsLocalRankLimitOutsideAllReduce,
        "nvls_local_rank_limit_outside_allreduce",
        (2, 27),
        None,
        "NVLS/NVLSTree outside AllReduce skipped per call with more than NCCL_MAX_NVLS_ARITY GPUs per node",
        "v2.27.7-1 src/enqueue.cc:1768",
    ),
    rule(
        Rule::NvlsTreeCorrectionBlackwellX86,
        "nvls_tree_correction_blackwell_x86",
        (2, 29),
        None,
        "NVLSTree AllReduce gets treeCorrectionFactor on sm100+ x86 (behaviour.nvls_tree_correction_sm100_x86)",
        "v2.29.7-1 src/graph/tuning.cc:596",
    ),
    rule(
        Rule::NvlsSm100MultiNodeTuning,
        "nvls_sm100_multi_node_tuning",
        (2, 30),
        None,
        "sm100 across nodes: nvlsChannels 32 on 2 nodes with NICs >= 48 GB/s, 24 (<= 8 GPUs/node) or 32 with NICs >= 96, 24 with NICs >= 48",
        "v2.30.7-1 src/transport/nvls.cc:164-200,217-219",
    ),
    rule(
        Rule::PipeOpsPerChannel,
        "pipe_ops_per_channel",
        (2, 22),
        None,
        "a group is priced with numPipeOps = ceil(nTasksColl / nChannels)",
        "v2.22.3-1 src/enqueue.cc:441",
    ),
    rule(
        Rule::PipeOpsOne,
        "pipe_ops_one",
        (2, 20),
        Some((2, 21)),
        "a group's aggregate is priced with numPipeOps = 1",
        "v2.21.5-1 src/enqueue.cc:777",
    ),
    recorded(
        Rule::AggregateChannels2_18,
        "aggregate_channels_2_18",
        (2, 18),
        Some((2, 19)),
        "a group's aggregate gets nChannels from NCCL_AGG_CHANNEL_SIZE, its bandwidth scaled by nChannels/comm->nChannels and numPipeOps = ceil(nAggChannels/nChannels); planner prices 2.18/2.19 groups with the 2.22 rule",
        "v2.18.6-1 src/enqueue.cc:496-541, src/graph/tuning.cc:389",
    ),
    rule(
        Rule::ArgminOneHourLimit,
        "argmin_one_hour_limit",
        (2, 18),
        Some((2, 28)),
        "the argmin starts at 3600000000 µs (FLT_MAX from 2.29): nothing slower is ever picked",
        "v2.18.6-1 src/enqueue.cc:1160 (to v2.28.9-1 :1828)",
    ),
    rule(
        Rule::CellScheduler,
        "cell_scheduler",
        (2, 23),
        None,
        "channel spreading in cells of roundup16(MinTrafficPerChannel/trafficPerByte) bytes, per-task traffic at least MinTrafficPerChannel",
        "v2.23.4-1 src/enqueue.cc:723-790",
    ),
    recorded(
        Rule::CellScheduler16Bytes,
        "cell_scheduler_16_bytes",
        (2, 22),
        Some((2, 22)),
        "channel spreading in 16-byte cells, 512-byte minimum per channel, task traffic summed as is; planner's scheduler (2.23 rule) does not model it",
        "v2.22.3-1 src/enqueue.cc:614-657",
    ),
    recorded(
        Rule::WorkElementScheduler,
        "work_element_scheduler",
        (2, 18),
        Some((2, 21)),
        "channel placement with ncclWorkElem lists (NCCL_MAX_WORK_ELEMENTS 9 per work); planner's scheduler does not model it",
        "v2.18.6-1 src/enqueue.cc:483-605 (to v2.21.5-1 :743-860)",
    ),
    rule(
        Rule::RingSimpleLowBwThreads,
        "ring_simple_low_bw_threads",
        (2, 18),
        Some((2, 30)),
        "Ring/Simple defaults to 256 threads when ring bwIntra*nChannels <= PCI_BW (12 GB/s); 2.31 always NCCL_SIMPLE_MAX_NTHREADS",
        "v2.30.7-1 src/graph/tuning.cc:244-245",
    ),
    rule(
        Rule::AlgoEnvZeroFillsUnnamedFunctions,
        "algo_env_zero_fills_unnamed_functions",
        (2, 31),
        None,
        "a non-empty NCCL_ALGO zero-fills every function's algorithm row; a function forced by NCCL_PROTO but not named in NCCL_ALGO has no algorithm (vllm#58179)",
        "dev@86fa684d src/tuning/cost_model.cc:315-318,349-361",
    ),
    recorded(
        Rule::Ll128GateOnlyForForcedFunctions,
        "ll128_gate_only_for_forced_functions",
        (2, 31),
        None,
        "the LL128 gate (path types, compute capability) runs only for functions NCCL_ALGO/NCCL_PROTO force; others keep LL128 on; planner applies the gate to every function",
        "dev@86fa684d src/tuning/cost_model.cc:349-365",
    ),
    rule(
        Rule::RingBwInterFromTwoNodes,
        "ring_bw_inter_from_two_nodes",
        (2, 31),
        None,
        "Ring busBw from bwInter as soon as nNodes > 1 (before: bwIntra up to 2 nodes)",
        "dev@86fa684d src/tuning/ring.cc:35-36",
    ),
    rule(
        Rule::TreePatBwMinIntraInter,
        "tree_pat_bw_min_intra_inter",
        (2, 31),
        None,
        "Tree and PAT busBw from min(bwIntra, bwInter) (before: bwIntra up to 2 nodes, else bwInter)",
        "dev@86fa684d src/tuning/tree.cc:28, pat.cc:41",
    ),
    rule(
        Rule::RingBroadcastReduceIntraRow,
        "ring_broadcast_reduce_intra_row",
        (2, 31),
        None,
        "Ring Broadcast/Reduce step latency from hwLat[intra] (Tree row for Simple without sameChannels) across nodes too (before: hwLat[NET])",
        "dev@86fa684d src/tuning/ring.cc:57-66",
    ),
    rule(
        Rule::PatFlushLatencyOnce,
        "pat_flush_latency_once",
        (2, 31),
        None,
        "PAT interLat adds latencyInter once (before: twice, the second as the Simple flush)",
        "dev@86fa684d src/tuning/pat.cc:47-48",
    ),
    recorded(
        Rule::CollnetModel2_31,
        "collnet_model_2_31",
        (2, 31),
        None,
        "CollNet AllReduce starts from the busBw left by the ReduceScatter iteration, divided by the GPU/NIC factor (Chain too), without the sm90 x0.85 (compCapIndex >= 90 is never true); AllGather/ReduceScatter x0.5; planner keeps the 2.30 CollNet model",
        "dev@86fa684d src/tuning/collnet.cc:35,49-57,75-91",
    ),
    recorded(
        Rule::ArgminTiesToHighestId,
        "argmin_ties_to_highest_id",
        (2, 31),
        None,
        "results are pushed to the front of a list and the first strict minimum wins: ties go to the highest algo*3+proto; planner keeps the lowest",
        "dev@86fa684d src/tuning/tuning.cc:32-38,130-142,153-167",
    ),
];

impl Rule {
    /// The rule's catalogue entry.
    pub(crate) fn info(self) -> &'static RuleInfo {
        RULES
            .iter()
            .find(|r| r.rule == self)
            .expect("every Rule has one RULES entry (checked by a test)")
    }

    /// Whether NCCL `family` has the rule.
    pub(crate) fn applies_to(self, family: Family) -> bool {
        self.info().applies_to(family)
    }
}

/// `"2.22"` -> `(2, 22)`.
pub fn parse_family(text: &str) -> Option<Family> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_an_entry_and_ranges_are_ordered() {
        for r in RULES {
            assert_eq!(r.rule.info().rule, r.rule);
            if let Some(last) = r.last {
                assert!(last >= r.first, "{}", r.name);
            }
        }
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RULES.len(), "rule names are unique");
    }

    #[test]
    fn ranges() {
        assert!(!Rule::Pat.applies_to((2, 22)));
        assert!(Rule::Pat.applies_to((2, 23)));
        assert!(Rule::RingBackup.applies_to((2, 23)));
        assert!(!Rule::RingBackup.applies_to((2, 24)));
        assert!(!Rule::RingBackup.applies_to((2, 18)));
        assert_eq!(parse_family("2.30"), Some((2, 30)));
        assert_eq!(parse_family("2"), None);
    }
}
