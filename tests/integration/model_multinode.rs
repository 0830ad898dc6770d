//! Multi-node latencies and bandwidth caps, hand-calculated from tuning.cc.

use crate::common::close;
use planner::model::input::{GraphInfo, NvlsState};
use planner::model::{Algo, Coll, Model, ModelInput, Proto};
use planner::nccl_env::NcclEnv;
use planner::search::Pattern;
use planner::topo::{CpuArch, CpuVendor, PathType};

/// `nodes` x `gpus` Hopper GPUs on NVLink, one 50 GB/s NIC per GPU pair:
/// ring and tree 16 channels, 40 GB/s intra, 25 GB/s inter, 32 runtime channels.
fn cluster(nodes: usize, gpus: usize, vendor: CpuVendor) -> ModelInput {
    let graph = |pattern: Pattern| GraphInfo {
        pattern,
        n_channels: 16,
        bw_intra: 40.0,
        bw_inter: 25.0,
        type_intra: PathType::Nvl,
        type_inter: PathType::Pxb,
        latency_inter: 0.0,
        same_channels: false,
    };
    ModelInput {
        n_ranks: nodes * gpus,
        n_nodes: nodes,
        local_ranks: gpus,
        min_sm: 90,
        max_sm: 90,
        cpu_arch: CpuArch::X86,
        cpu_vendor: vendor,
        has_nvswitch: true,
        ring: graph(Pattern::Ring),
        tree: graph(Pattern::BalancedTree),
        collnet_chain: GraphInfo::empty(Pattern::Tree),
        collnet_direct: GraphInfo::empty(Pattern::CollNetDirect),
        nvls: GraphInfo::empty(Pattern::Nvls),
        max_tree_pattern: Pattern::BalancedTree,
        channels: 32,
        nvls_state: NvlsState::Disabled("NCCL_NVLS_ENABLE=0".to_string()),
        nvls_channels: 0,
        collnet_enable: false,
        collnet_chain_support: false,
        collnet_heads: 0,
        net_device_host: true,
    }
}

fn model(input: ModelInput) -> Model {
    crate::common::model_of(input, NcclEnv::default(), "2.30")
}

fn lat(m: &Model, c: Coll, a: Algo, p: Proto) -> f64 {
    m.tuned.latency[c as usize][a as usize][p as usize] as f64
}

#[test]
fn ring_latencies_two_nodes_of_eight() {
    let m = model(cluster(2, 8, CpuVendor::Intel));
    // AllReduce: nsteps = 2*(16-1) = 30, inter steps 2*(2-1) = 2.
    // Simple: intra max(3.4 NVLink, net overhead 1.0*3 = 3.0) = 3.4, inter NET Ring Simple 14.
    //   8.4 + 28*3.4 + 2*14 = 131.6
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Ring, Proto::Simple),
        131.6,
        1e-4
    ));
    // LL: intra max(0.6, 1.0) = 1.0 (the net overhead wins), inter 2.7: 6.6 + 28*1.0 + 2*2.7 = 40.0
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Ring, Proto::Ll),
        40.0,
        1e-4
    ));
    // LL128: max(1.9, 1.0) = 1.9, inter 4.0: 14 + 28*1.9 + 2*4.0 = 75.2
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Ring, Proto::Ll128),
        75.2,
        1e-4
    ));
    // AllGather: nsteps 15, inter steps 1: Simple 8.4 + 14*3.4 + 14 = 70.0
    assert!(close(
        lat(&m, Coll::AllGather, Algo::Ring, Proto::Simple),
        70.0,
        1e-4
    ));
    // Broadcast, sameChannels 0: nsteps = nRanks = 16, Simple uses the NET Tree Simple
    // latency 14 per step: 8.4 + 16*14 = 232.4; LL uses NET Ring LL 2.7: 6.6 + 16*2.7 = 49.8
    assert!(close(
        lat(&m, Coll::Broadcast, Algo::Ring, Proto::Simple),
        232.4,
        1e-4
    ));
    assert!(close(
        lat(&m, Coll::Broadcast, Algo::Ring, Proto::Ll),
        49.8,
        1e-4
    ));
}

#[test]
fn tree_latencies_log_of_nodes() {
    // Tree AllReduce: base + 2*((ppn-1)*intra + log2i(nNodes)*inter).
    // 4 nodes x 8: Simple 8.4 + 2*(7*4.0 + 2*14) = 120.4; LL 6.8 + 2*(7*0.6 + 2*5.0) = 35.2
    let m = model(cluster(4, 8, CpuVendor::Intel));
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Tree, Proto::Simple),
        120.4,
        1e-4
    ));
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Tree, Proto::Ll),
        35.2,
        1e-4
    ));
    // 5 nodes: log2i(5) = 2, same as 4.
    let m5 = model(cluster(5, 8, CpuVendor::Intel));
    assert!(close(
        lat(&m5, Coll::AllReduce, Algo::Tree, Proto::Simple),
        120.4,
        1e-4
    ));
}

#[test]
fn one_gpu_per_node_uses_the_tree_network_latency() {
    // ppn = 1: interLat comes from the NET Tree row. 4 nodes x 1 GPU, Ring AllReduce LL:
    // nsteps = 6, all 6 are inter-node: 6.6 + 0*.. + 6*5.0 (NET Tree LL) = 36.6
    let m = model(cluster(4, 1, CpuVendor::Intel));
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Ring, Proto::Ll),
        36.6,
        1e-4
    ));
    // PAT AllGather (auto-enabled: one GPU per node): 8.0 + log2i(4)*(14/3.5) + 4*2.8 = 27.2
    assert!(close(
        lat(&m, Coll::AllGather, Algo::Pat, Proto::Simple),
        27.2,
        1e-4
    ));
}

#[test]
fn amd_net_overhead_and_ll_caps() {
    // AMD x86: net overhead 2.0 µs; Simple x3 = 6.0 beats NVLink 3.4:
    // AllReduce Ring Simple 2 nodes x 8 = 8.4 + 28*6.0 + 2*14 = 204.4
    let m = model(cluster(2, 8, CpuVendor::Amd));
    assert!(close(
        lat(&m, Coll::AllReduce, Algo::Ring, Proto::Simple),
        204.4,
        1e-4
    ));
    // LL cap for 2 nodes with AMD: llMaxBws[1][1] = 22.5; ring busBw 16*40 = 640,
    // LL min(22.5, 320) = 22.5; AllReduce ratio 16/30: algBw 12.0
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][Algo::Ring as usize][0] as f64;
    assert!(close(bw, 22.5 * 16.0 / 30.0, 1e-4), "{bw}");
    // Intel 2 nodes: llMaxBws[0][1] = 39.0
    let m = model(cluster(2, 8, CpuVendor::Intel));
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][Algo::Ring as usize][0] as f64;
    assert!(close(bw, 39.0 * 16.0 / 30.0, 1e-4), "{bw}");
}

#[test]
fn ring_simple_plateau_across_nodes() {
    // nBytes/(comm channels * nRanks) >= 64 multiplies the Ring/Simple AllReduce
    // latency by 1.4 (sm80+): 32 channels * 16 ranks * 64 = 32768 bytes.
    let m = model(cluster(2, 8, CpuVendor::Intel));
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][Algo::Ring as usize][2] as f64;
    let t = |n: u64| {
        m.algo_time(Coll::AllReduce, Algo::Ring, Proto::Simple, n, 1)
            .unwrap()
            .0 as f64
    };
    assert!(close(t(32764), 131.6 + 32764.0 / (1000.0 * bw), 1e-4));
    assert!(close(t(32768), 131.6 * 1.4 + 32768.0 / (1000.0 * bw), 1e-4));
    // One node never has the plateau.
    let m1 = model(cluster(1, 8, CpuVendor::Intel));
    let l1 = lat(&m1, Coll::AllReduce, Algo::Ring, Proto::Simple);
    let bw1 = m1.tuned.bandwidth[Coll::AllReduce as usize][Algo::Ring as usize][2] as f64;
    let t1 = m1
        .algo_time(Coll::AllReduce, Algo::Ring, Proto::Simple, 1 << 30, 1)
        .unwrap()
        .0 as f64;
    assert!(close(t1, l1 + (1u64 << 30) as f64 / (1000.0 * bw1), 1e-4));
}

#[test]
fn aggregation_counts_pipe_ops() {
    // 64 ops on 32 channels: numPipeOps = 2. Ring pays latency twice, Tree
    // ceil(2/8) = 1 time (2.30 batches 8 colls).
    let m = model(cluster(2, 8, CpuVendor::Intel));
    assert_eq!(m.num_pipe_ops(64), 2);
    let ring = m
        .algo_time(Coll::AllReduce, Algo::Ring, Proto::Ll, 1 << 20, 2)
        .unwrap();
    assert!(close(ring.1 as f64, 2.0 * 40.0, 1e-4));
    let tree = m
        .algo_time(Coll::AllReduce, Algo::Tree, Proto::Ll, 1 << 20, 2)
        .unwrap();
    assert!(close(
        tree.1 as f64,
        lat(&m, Coll::AllReduce, Algo::Tree, Proto::Ll),
        1e-4
    ));
}
