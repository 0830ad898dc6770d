//! Changes of NCCL's search and connection between release families that alter graphs or channel counts, each
//! with the first family that has it (as `model::rules` does for the cost model). The search models the newest
//! behaviour; a rule whose `first` is newer than the requested family is switched off. Sources are `tag file:line`
//! of the first tag with the code. `modelled: false` rules are recorded only: planner keeps the newest behaviour for
//! them in every family.

use serde::Serialize;

/// `(major, minor)` of an NCCL release family.
pub type Family = (u32, u32);

/// The newest family whose search planner follows (the default when no version is asked for).
pub const NEWEST: Family = (2, 30);

/// A rule of NCCL's search that exists in some families only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum SearchRule {
    /// `MAXCHANNELS` is 64 (before: 32): the ring search may find 32 channels and the runtime count reaches 64.
    MaxChannels64,
    /// One GPU alone: `totalBw = LOC_BW` (before: 0).
    OneGpuTotalBwLoc,
    /// With NVSwitches the next GPU is tried among the ring/tree neighbours first (2.19) and only them (2.21).
    NvsNeighboursFirst,
    NvsNeighboursOnly,
    /// Channels are duplicated before pass 2, and pass 2 raises the ring's bandwidth and NVLS's bwInter too.
    DupBeforePass2,
    /// AMD CPUs: channels stay the same (no `sameChannels = 0` retry) when the path is SYS.
    AmdSysSameChannels,
    /// Two NVLink islands: the ring search needs at least 2 channels.
    SplitNvlinkTwoChannels,
    /// sm100 (Blackwell) has its own speed ladders (before: the sm90 ones).
    Sm100Ladders,
    /// The sm90 one-node ladder has 50 GB/s (2.19) and 11 GB/s (2.21) rungs.
    Sm90IntraLadder50,
    Sm90IntraLadder11,
    /// The sm90 several-node ladder has a 22 GB/s rung.
    Sm90InterLadder22,
    /// CollNetDirect searches at most one head per GPU (2.22), at most 8 (2.25).
    CollnetDirectHeads,
    /// `NCCL_CROSS_NIC=2` retries with crossNic 2, for Ring and BalancedTree only (before: crossNic 1, any pattern).
    CrossNicRetryRingTreeOnly,
    /// The path-type relaxation starts and stops at the machine's own best/worst GPU paths (before: NVL/PIX..SYS).
    PathTypeRangeFromPaths,
    /// NVLS searches at most `NCCL_MAX_NVLS_ARITY` (32) heads (before: one per GPU).
    NvlsArityCap,
    /// sm100 ladders gain rungs: intra 18 (2.27.3), inter 96 and 45.1 (2.27.7).
    Sm100LadderRungs,
    /// sm100 ladders gain the intra 45 (2.29.2) and inter 80 (2.29.7) rungs.
    Sm100LadderRungs2_29,
    /// The sm100 several-node ladder gains an 86 rung.
    Sm100LadderRungs2_30,
    /// Before sm90 the NET path type may relax up to SYS; the fallback graph names NETs.
    PreHopperInterSysAndFallbackNets,
    /// Log format: `Channel` lines pad ranks to the width of the largest (before: ` %3d`, at most 20 ranks).
    ChannelLineWidth,
    /// Log format: graph channels name GPUs and NETs by topology id `GPU/0-d8000` (before: `GPU/<rank>`).
    GraphLineTopoIds,
}

/// One rule: first family, what it does, where it was read, whether planner switches it by version.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SearchRuleInfo {
    pub(crate) rule: SearchRule,
    pub name: &'static str,
    pub first: Family,
    pub(crate) what: &'static str,
    pub source: &'static str,
    pub modelled: bool,
}

const fn info(
    rule: SearchRule,
    name: &'static str,
    first: Family,
    modelled: bool,
    what: &'static str,
    source: &'static str,
) -> SearchRuleInfo {
    SearchRuleInfo {
        rule,
        name,
        first,
        what,
        source,
        modelled,
    }
}

/// Every search rule, oldest first.
pub const RULES: &[SearchRuleInfo] = &[
    info(
        SearchRule::NvsNeighboursFirst,
        "nvs_neighbours_first",
        (2, 19),
        false,
        "NVSwitch: the ring/tree neighbours (index +-1) are tried first (before: every GPU in score order)",
        "v2.19.3-1 src/graph/search.cc:264",
    ),
    info(
        SearchRule::DupBeforePass2,
        "dup_before_pass2",
        (2, 19),
        true,
        "ncclTopoDupChannels runs before pass 2 (before: at the end of ncclTopoCompute) and pass 2 raises a \
         ring's bandwidth and an NVLS graph's bwInter (before: only a non-ring graph's bwIntra); shows on the sm90 \
         NVSwitch fixtures' NVLS graph: 8 x 40/40 in 2.18, 8 x 40/60 from 2.19",
        "v2.19.3-1 src/graph/search.cc:993",
    ),
    info(
        SearchRule::AmdSysSameChannels,
        "amd_sys_same_channels",
        (2, 19),
        false,
        "x86 AMD CPUs with SYS paths inside the node keep sameChannels=1; no fixture has AMD CPUs and a SYS ring \
         (the AMD fixtures are NVLink machines), so no fixture shows it",
        "v2.19.1-1 src/graph/search.cc:900",
    ),
    info(
        SearchRule::Sm90IntraLadder50,
        "sm90_intra_ladder_50",
        (2, 19),
        false,
        "sm90 one-node ladder gains a 50 GB/s rung",
        "v2.19.1-1 src/graph/search.cc:802",
    ),
    info(
        SearchRule::Sm90InterLadder22,
        "sm90_inter_ladder_22",
        (2, 19),
        false,
        "sm90 several-node ladder gains a 22 GB/s rung (2.19.3)",
        "v2.19.3-1 src/graph/search.cc:844",
    ),
    info(
        SearchRule::NvsNeighboursOnly,
        "nvs_neighbours_only",
        (2, 21),
        false,
        "NVSwitch: only the neighbours are tried (firstGpuRealCount)",
        "v2.21.5-1 src/graph/search.cc:293",
    ),
    info(
        SearchRule::Sm90IntraLadder11,
        "sm90_intra_ladder_11",
        (2, 21),
        false,
        "sm90 one-node ladder gains an 11 GB/s rung",
        "v2.21.5-1 src/graph/search.cc:855",
    ),
    info(
        SearchRule::OneGpuTotalBwLoc,
        "one_gpu_total_bw_loc",
        (2, 21),
        false,
        "one GPU alone: totalBw = LOC_BW (before 0, and 0 x 1/0 = NaN let the ladder start at its top); the \
         graph is the same: 16 or 32 channels at the first rung (also search.cc:921, ngpus > 1 guard)",
        "v2.21.5-1 src/graph/search.cc:43",
    ),
    info(
        SearchRule::CollnetDirectHeads,
        "collnet_direct_heads",
        (2, 22),
        false,
        "CollNetDirect maxChannels = GPUs per node (2.22), min(8, GPUs) (2.25); CollNet graphs only",
        "v2.22.3-1 src/graph/search.cc:954",
    ),
    info(
        SearchRule::CrossNicRetryRingTreeOnly,
        "cross_nic_retry_ring_tree_only",
        (2, 23),
        false,
        "NCCL_CROSS_NIC=2: the retry uses crossNic 2 and only for Ring/BalancedTree (before: crossNic 1, any \
         pattern with 2+ NETs); several nodes with 2+ NICs only",
        "v2.23.4-1 src/graph/search.cc:1067",
    ),
    info(
        SearchRule::ChannelLineWidth,
        "channel_line_width",
        (2, 23),
        true,
        "log format only: `Channel 00/32 : 0` (before: `Channel 00/32 :    0`, ranks as %3d, at most 20)",
        "v2.23.4-1 src/graph/rings.cc:12",
    ),
    info(
        SearchRule::MaxChannels64,
        "max_channels_64",
        (2, 25),
        true,
        "MAXCHANNELS 64 (before 32): the ring search allows MAXCHANNELS/2 = 32 channels (before 16) and the \
         runtime count is capped at 64 (before 32); shows with one GPU (16 -> 32 search channels)",
        "v2.25.1-1 src/include/device.h:62",
    ),
    info(
        SearchRule::Sm100Ladders,
        "sm100_ladders",
        (2, 25),
        true,
        "sm100+ ladders (before: the sm90 ones)",
        "v2.25.1-1 src/graph/search.cc:940",
    ),
    info(
        SearchRule::PathTypeRangeFromPaths,
        "path_type_range_from_paths",
        (2, 25),
        false,
        "the relaxation of typeIntra/typeInter starts at the machine's best GPU-GPU/GPU-NET path type and stops at \
         its worst (before: NVL (LOC for one GPU) / PIX up to SYS); fewer empty passes, so a different budget",
        "v2.25.1-1 src/graph/search.cc:957",
    ),
    info(
        SearchRule::NvlsArityCap,
        "nvls_arity_cap",
        (2, 25),
        false,
        "NVLS maxChannels = min(32, GPUs per node); only nodes of 33+ GPUs differ",
        "v2.25.1-1 src/graph/search.cc:992",
    ),
    info(
        SearchRule::SplitNvlinkTwoChannels,
        "split_nvlink_two_channels",
        (2, 26),
        false,
        "two NVLink islands: the ring needs minChannels 2; no fixture has two NVLink islands, so no fixture shows it",
        "v2.26.2-1 src/graph/search.cc:985",
    ),
    info(
        SearchRule::Sm100LadderRungs,
        "sm100_ladder_rungs",
        (2, 27),
        true,
        "sm100 ladders gain rungs: intra 18 (2.27.3), inter 96/45.1 (2.27.7; 2.27.3 started at 47.9, 45.0)",
        "v2.27.7-1 src/graph/search.cc:962-963",
    ),
    info(
        SearchRule::GraphLineTopoIds,
        "graph_line_topo_ids",
        (2, 28),
        true,
        "log format only: graph channels print `GPU/0-d8000` (before: `GPU/0`, the rank)",
        "v2.28.3-1 src/graph/search.cc:1192",
    ),
    info(
        SearchRule::Sm100LadderRungs2_29,
        "sm100_ladder_rungs_2_29",
        (2, 29),
        true,
        "sm100 one-node ladder gains a 45 GB/s rung (2.29.2), the several-node one an 80 GB/s rung (2.29.7); shows \
         on the public 2x GB300 2.29.7 log's tree graph: 16 channels at 45 GB/s (40 before)",
        "v2.29.7-1 src/graph/search.cc:987-988",
    ),
    info(
        SearchRule::PreHopperInterSysAndFallbackNets,
        "pre_hopper_inter_sys",
        (2, 29),
        false,
        "before sm90 the NET path type may relax up to SYS whatever the paths say, and the fallback graph \
         (nothing found) enters and leaves by the NETs nearest its first and last GPU",
        "v2.29.2-1 src/graph/search.cc:1038",
    ),
    info(
        SearchRule::Sm100LadderRungs2_30,
        "sm100_ladder_rungs_2_30",
        (2, 30),
        true,
        "sm100 several-node ladder gains an 86 GB/s rung",
        "v2.30.3-1 src/graph/search.cc:1064",
    ),
];

/// The rule's record.
pub(crate) fn info_of(rule: SearchRule) -> &'static SearchRuleInfo {
    RULES.iter().find(|r| r.rule == rule).unwrap_or(&RULES[0])
}

/// Whether `family`'s search has `rule` (modelled rules only; recorded ones always follow the newest).
pub fn has(family: Family, rule: SearchRule) -> bool {
    let r = info_of(rule);
    !r.modelled || family >= r.first
}

/// NCCL's `MAXCHANNELS` in `family`.
pub(crate) fn max_channels(family: Family) -> usize {
    if has(family, SearchRule::MaxChannels64) {
        crate::limits::MAX_CHANNELS
    } else {
        32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_one_record() {
        use SearchRule::*;
        let all = [
            MaxChannels64,
            OneGpuTotalBwLoc,
            NvsNeighboursFirst,
            NvsNeighboursOnly,
            DupBeforePass2,
            AmdSysSameChannels,
            SplitNvlinkTwoChannels,
            Sm100Ladders,
            Sm90IntraLadder50,
            Sm90IntraLadder11,
            Sm90InterLadder22,
            CollnetDirectHeads,
            CrossNicRetryRingTreeOnly,
            PathTypeRangeFromPaths,
            NvlsArityCap,
            Sm100LadderRungs,
            Sm100LadderRungs2_29,
            Sm100LadderRungs2_30,
            PreHopperInterSysAndFallbackNets,
            ChannelLineWidth,
            GraphLineTopoIds,
        ];
        assert_eq!(all.len(), RULES.len());
        for rule in all {
            assert_eq!(info_of(rule).rule, rule);
        }
        for r in RULES {
            assert_eq!(info_of(r.rule).name, r.name);
        }
        assert!(RULES.windows(2).all(|w| w[0].first <= w[1].first));
    }

    #[test]
    fn max_channels_by_family() {
        assert_eq!(max_channels((2, 19)), 32);
        assert_eq!(max_channels((2, 24)), 32);
        assert_eq!(max_channels((2, 25)), 64);
        assert_eq!(max_channels(NEWEST), 64);
    }
}
