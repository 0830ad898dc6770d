//! Model inputs written out by hand from real NCCL dumps and from a worked
//! example of NCCL's formulas, for tests, benchmarks and documentation.

use super::input::{GraphInfo, ModelInput, NvlsState};
use crate::search::Pattern;
use crate::topo::{CpuArch, CpuVendor, PathType};

/// The capture `h200x2-nvswitch-vm` (NCCL 2.28.9): 2x H200 (sm90) on an
/// NVSwitch, one node, Intel Emerald Rapids, NVLS off (`NCCL_NVLS_ENABLE=0`).
/// From its `graph.xml`: ring pattern 4, 12 channels, 30/30 GB/s, NVL/PIX,
/// sameChannels 1; tree pattern 1, 12 channels, 60/60, NVL/PIX, sameChannels 0.
/// From its log: 24 coll channels, 0 nvls channels.
pub fn h200x2_capture() -> ModelInput {
    ModelInput {
        n_ranks: 2,
        n_nodes: 1,
        local_ranks: 2,
        min_sm: 90,
        max_sm: 90,
        cpu_arch: CpuArch::X86,
        cpu_vendor: CpuVendor::Intel,
        has_nvswitch: true,
        ring: GraphInfo {
            pattern: Pattern::Ring,
            n_channels: 12,
            bw_intra: 30.0,
            bw_inter: 30.0,
            type_intra: PathType::Nvl,
            type_inter: PathType::Pix,
            latency_inter: 0.0,
            same_channels: true,
        },
        tree: GraphInfo {
            pattern: Pattern::BalancedTree,
            n_channels: 12,
            bw_intra: 60.0,
            bw_inter: 60.0,
            type_intra: PathType::Nvl,
            type_inter: PathType::Pix,
            latency_inter: 0.0,
            same_channels: false,
        },
        collnet_chain: GraphInfo::empty(Pattern::Tree),
        collnet_direct: GraphInfo::empty(Pattern::CollNetDirect),
        nvls: GraphInfo::empty(Pattern::Nvls),
        max_tree_pattern: Pattern::BalancedTree,
        channels: 24,
        nvls_state: NvlsState::Disabled("NCCL_NVLS_ENABLE=0".to_string()),
        nvls_channels: 0,
        collnet_enable: false,
        collnet_chain_support: false,
        collnet_heads: 0,
        net_device_host: true,
    }
}

/// A worked example of NCCL's `tuning.cc` formulas: one node, 8 Hopper GPUs,
/// ring and tree with 12 channels at 30 GB/s over NVLink, balanced tree,
/// no NVLS or CollNet, 24 runtime channels.
pub fn hopper8_worked_example() -> ModelInput {
    let graph = |pattern: Pattern, same: bool| GraphInfo {
        pattern,
        n_channels: 12,
        bw_intra: 30.0,
        bw_inter: 30.0,
        type_intra: PathType::Nvl,
        type_inter: PathType::Pix,
        latency_inter: 0.0,
        same_channels: same,
    };
    ModelInput {
        n_ranks: 8,
        n_nodes: 1,
        local_ranks: 8,
        min_sm: 90,
        max_sm: 90,
        cpu_arch: CpuArch::X86,
        cpu_vendor: CpuVendor::Intel,
        has_nvswitch: true,
        ring: graph(Pattern::Ring, true),
        tree: graph(Pattern::BalancedTree, false),
        collnet_chain: GraphInfo::empty(Pattern::Tree),
        collnet_direct: GraphInfo::empty(Pattern::CollNetDirect),
        nvls: GraphInfo::empty(Pattern::Nvls),
        max_tree_pattern: Pattern::BalancedTree,
        channels: 24,
        nvls_state: NvlsState::Unavailable("not in the worked example".to_string()),
        nvls_channels: 0,
        collnet_enable: false,
        collnet_chain_support: false,
        collnet_heads: 0,
        net_device_host: true,
    }
}
