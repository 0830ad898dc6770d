//! The three masking layers and the reasons they give.

use planner::model::examples::{h200x2_capture, hopper8_worked_example};
use planner::model::input::{GraphInfo, NvlsState};
use planner::model::select::Call;
use planner::model::{table, Algo, Coll, MaskReason, Model, ModelInput, Proto};
use planner::nccl_env::NcclEnv;
use planner::search::Pattern;
use planner::topo::PathType;

fn model(input: ModelInput, env: NcclEnv) -> Model {
    crate::common::model_of(input, env, "2.30")
}

/// The reasons (as text) for one pair in one call.
fn reasons(m: &Model, coll: Coll, size: u64, algo: Algo, proto: Proto) -> Vec<String> {
    let call = Call::new(coll, size, m.input.n_ranks, 1).unwrap();
    let eval = m.evaluate(&call).unwrap();
    let c = &eval.candidates[algo as usize * 3 + proto as usize];
    c.masks.iter().map(|r| r.text(coll, algo, proto)).collect()
}

fn usable(m: &Model, coll: Coll, algo: Algo, proto: Proto) -> bool {
    reasons(m, coll, 1 << 20, algo, proto).is_empty()
}

/// An NVLS graph as an 8-GPU H100/H200 NVSwitch box gives (16 channels).
fn nvls_input() -> ModelInput {
    let mut input = hopper8_worked_example();
    input.nvls = GraphInfo {
        pattern: Pattern::Nvls,
        n_channels: 16,
        bw_intra: 40.0,
        bw_inter: 40.0,
        type_intra: PathType::Nvl,
        type_inter: PathType::Pix,
        latency_inter: 0.0,
        same_channels: false,
    };
    input.nvls_state = NvlsState::Supported;
    input.nvls_channels = 16;
    input
}

#[test]
fn ll128_needs_nvlink_inside_the_node() {
    let mut input = hopper8_worked_example();
    input.ring.type_intra = PathType::Phb;
    let m = model(input, NcclEnv::default());
    let r = reasons(&m, Coll::AllReduce, 1 << 20, Algo::Ring, Proto::Ll128);
    assert_eq!(
        r,
        vec!["LL128: intra-node path PHB is worse than NVB".to_string()]
    );
    // Tree keeps NVLink, so Tree/LL128 stays.
    assert!(usable(&m, Coll::AllReduce, Algo::Tree, Proto::Ll128));
    // NCCL_PROTO replaces LL128's "auto" by 1: the gate no longer applies.
    let mut input = hopper8_worked_example();
    input.ring.type_intra = PathType::Phb;
    let env = NcclEnv {
        proto: Some("^LL".to_string()),
        ..Default::default()
    };
    let m = model(input, env);
    assert!(usable(&m, Coll::AllReduce, Algo::Ring, Proto::Ll128));
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Ring, Proto::Ll),
        vec!["LL: excluded by NCCL_PROTO=^LL".to_string()]
    );
}

#[test]
fn ll128_inter_node_gate_and_mixed_generations() {
    // sm90 with NCCL_LL128_C2C=1 (default): inter path up to PXN is fine, SYS is not.
    let mut input = hopper8_worked_example();
    input.ring.type_inter = PathType::Sys;
    let m = model(input, NcclEnv::default());
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Ring, Proto::Ll128),
        vec!["LL128: inter-node path SYS is worse than PXN".to_string()]
    );
    // Ampere + Hopper: 2.28 requires equal generations, 2.30 allows mixing from sm90 only.
    let mut input = hopper8_worked_example();
    input.min_sm = 80;
    input.max_sm = 90;
    let m = Model::new(input, NcclEnv::default(), table::builtin("2.28").unwrap()).unwrap();
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Ring, Proto::Ll128),
        vec!["LL128: GPUs of different generations (sm80 and sm90)".to_string()]
    );
}

#[test]
fn nvls_needs_support_and_nvls_tree_needs_several_nodes() {
    // Capture: NCCL_NVLS_ENABLE=0.
    let m = model(h200x2_capture(), NcclEnv::default());
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Nvls, Proto::Simple),
        vec!["NVLS: disabled by NCCL_NVLS_ENABLE=0".to_string()]
    );
    // No NVSwitch / old GPUs.
    let mut input = h200x2_capture();
    input.nvls_state = NvlsState::Unavailable("needs an NVSwitch with reduction, sm90+".into());
    let m = model(input, NcclEnv::default());
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Nvls, Proto::Simple),
        vec!["NVLS: needs an NVSwitch with reduction, sm90+".to_string()]
    );
    // With NVLS: NVLS/Simple usable for AllReduce, not LL; NVLSTree off on one node.
    let m = model(nvls_input(), NcclEnv::default());
    assert!(usable(&m, Coll::AllReduce, Algo::Nvls, Proto::Simple));
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Nvls, Proto::Ll),
        vec!["NVLS: runs the Simple protocol only, not LL".to_string()]
    );
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::NvlsTree, Proto::Simple),
        vec!["NVLSTree: disabled on a single node".to_string()]
    );
    // NVLS AllReduce bandwidth: 40 * 0.85 * 15/16 * 2 = 63.75 per channel (< inter 40? no:
    // min(63.75, bwInter 40) = 40), busBw 16*40 = 640, algBw 640 * 8/14 = 365.71.
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][Algo::Nvls as usize][2] as f64;
    assert!((bw - 365.714).abs() < 0.01, "{bw}");
    // NVLS latency replaces the base: hwLat[NVLINK][NVLS][Simple] = 25.
    assert_eq!(
        m.tuned.latency[Coll::AllReduce as usize][Algo::Nvls as usize][2],
        25.0
    );
    // NVLS runs on nvlsChannels.
    assert_eq!(
        m.channels_threads(Algo::Nvls, Proto::Simple, 1 << 30),
        (16, 640)
    );
}

#[test]
fn collnet_needs_a_collnet_network() {
    let m = model(hopper8_worked_example(), NcclEnv::default());
    let r = reasons(
        &m,
        Coll::AllReduce,
        1 << 20,
        Algo::CollNetChain,
        Proto::Simple,
    );
    assert_eq!(
        r,
        vec![
            "CollNetChain: needs a CollNet (SHARP) network enabled with NCCL_COLLNET_ENABLE=1"
                .to_string()
        ]
    );
    // CollNetDirect also needs an NVSwitch.
    let mut input = hopper8_worked_example();
    input.has_nvswitch = false;
    let m = model(input, NcclEnv::default());
    let r = reasons(
        &m,
        Coll::AllReduce,
        1 << 20,
        Algo::CollNetDirect,
        Proto::Simple,
    );
    assert!(
        r.contains(&"CollNetDirect: needs an NVSwitch".to_string()),
        "{r:?}"
    );
}

#[test]
fn pat_only_with_one_gpu_per_node() {
    // 8 GPUs on one node: PAT off (auto needs nNodes == nRanks).
    let m = model(hopper8_worked_example(), NcclEnv::default());
    assert_eq!(
        reasons(&m, Coll::AllGather, 1 << 20, Algo::Pat, Proto::Simple),
        vec!["PAT: needs one GPU per node (8 GPUs per node here)".to_string()]
    );
    // NCCL_PAT_ENABLE=1 forces it on.
    let env = NcclEnv {
        pat_enable: Some(1),
        ..Default::default()
    };
    let m = model(hopper8_worked_example(), env);
    assert!(usable(&m, Coll::AllGather, Algo::Pat, Proto::Simple));
    // AllReduce never has PAT.
    assert!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Pat, Proto::Simple)[0]
            .starts_with("PAT: NCCL has no PAT kernel for AllReduce")
    );
}

#[test]
fn broadcast_and_reduce_run_ring_only() {
    let m = model(hopper8_worked_example(), NcclEnv::default());
    for coll in [Coll::Broadcast, Coll::Reduce] {
        for a in Algo::ALL {
            for p in Proto::ALL {
                let ok = usable(&m, coll, a, p);
                assert_eq!(ok, a == Algo::Ring, "{coll:?} {a:?} {p:?}");
            }
        }
    }
    // AllGather: no Tree kernel.
    assert_eq!(
        m.tuned.masks_of(Coll::AllGather, Algo::Tree, Proto::Simple),
        &[MaskReason::NoKernel]
    );
}

#[test]
fn a_list_that_masks_everything_is_a_usage_error() {
    let env = NcclEnv {
        algo: Some("nvls".to_string()),
        ..Default::default()
    };
    let m = model(h200x2_capture(), env);
    let call = Call::new(Coll::AllReduce, 1 << 20, 2, 1).unwrap();
    let err = m.evaluate(&call).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .starts_with("no algorithm/protocol available for function AllReduce"),
        "{err}"
    );
    assert!(
        err.to_string().contains("NCCL_ALGO was set to nvls"),
        "{err}"
    );
}

#[test]
fn single_rank_only_copies() {
    // nRanks == 1: NCCL fills no tables and its cost table holds only Ring/Simple = 0.
    let mut input = h200x2_capture();
    input.n_ranks = 1;
    input.local_ranks = 1;
    let m = model(input, NcclEnv::default());
    assert_eq!(m.tuned.bandwidth, planner::model::Cells::splat(0.0));
    let call = Call::new(Coll::AllReduce, 1 << 20, 1, 1).unwrap();
    let eval = m.evaluate(&call).unwrap();
    let w = eval.winner();
    assert_eq!(
        (w.algo, w.proto, w.time_us),
        (Algo::Ring, Proto::Simple, 0.0)
    );
    assert!(w.usable());
    assert_eq!(eval.candidates.iter().filter(|c| c.usable()).count(), 1);
    assert_eq!(
        reasons(&m, Coll::AllReduce, 1 << 20, Algo::Tree, Proto::Ll),
        vec!["one rank: NCCL only copies (Ring/Simple)".to_string()]
    );
}
