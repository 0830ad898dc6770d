//! Plans from a search result, the plan checks, and the input pattern.

use planner::dtype::Dtype;
use planner::exec::plan::{chain_tree, validate_tree, ExecPlan, PlanChoice, TreeNode};
use planner::gpu::pattern::{self, DataPattern};
use planner::model::{Algo, Coll, Proto};
use planner::search::{Connection, Graphs, Pattern, SearchGraph, SearchResult, TreeLinks};

/// The 2x H200 capture (nccl-init-rank0.log): 24 runtime channels, every ring
/// 0 -> 1; trees 0-5 and 12-17 rooted at 0 (`1/-1/-1->0->-1`), 6-11 and
/// 18-23 rooted at 1 (`-1/-1/-1->0->1`).
fn capture_search() -> SearchResult {
    let rings = vec![vec![0, 1]; 24];
    let trees = (0..24)
        .map(|c| {
            let root0 = (c % 12) < 6;
            let (r0, r1) = if root0 {
                (
                    TreeLinks {
                        up: -1,
                        down: [1, -1, -1],
                    },
                    TreeLinks {
                        up: 0,
                        down: [-1, -1, -1],
                    },
                )
            } else {
                (
                    TreeLinks {
                        up: 1,
                        down: [-1, -1, -1],
                    },
                    TreeLinks {
                        up: -1,
                        down: [0, -1, -1],
                    },
                )
            };
            vec![r0, r1]
        })
        .collect();
    SearchResult {
        graphs: Graphs {
            ring: SearchGraph::empty(0, Pattern::Ring),
            tree: SearchGraph::empty(1, Pattern::BalancedTree),
            collnet_chain: None,
            collnet_direct: None,
            nvls: None,
        },
        connection: Connection {
            n_channels: 24,
            rings,
            trees,
            preset_trees: Vec::new(),
            search_channels: 12,
            n_nodes: 1,
            gpus_per_node: 2,
            // 2 ranks on one node: nRanks/nNodes - 1 + log2i(1) = 1.
            tree_depth: 1,
            // Search channels 0-5 order GPUs 0,1 and 6-11 order 1,0 (graph.xml):
            // [to parent, to child 0, to child 1] = [I[0], I[1], I[0]].
            tree_heads: (0..12)
                .map(|c| if c < 6 { [0, 1, 0] } else { [1, 0, 1] })
                .collect(),
        },
    }
}

#[test]
fn hand_built_capture_equals_the_search() {
    let cluster = planner::topo::Cluster::single(
        planner::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap(),
    );
    let searched = planner::search::search(&cluster, &Default::default()).unwrap();
    let hand = capture_search();
    assert_eq!(searched.connection.rings, hand.connection.rings);
    assert_eq!(searched.connection.trees, hand.connection.trees);
    assert_eq!(searched.connection.n_channels, hand.connection.n_channels);
}

#[test]
fn plan_from_the_capture_keeps_rings_trees_and_nccl_shape() {
    let choice = PlanChoice::all_reduce(Algo::Tree, Proto::Ll128, 64 << 20);
    let plan = ExecPlan::from_search(&capture_search(), &choice).unwrap();
    assert_eq!(plan.n_ranks, 2);
    // 64 MiB >= 24 * 640 * 8: all 24 channels; Tree always 640 threads.
    assert_eq!((plan.n_channels, plan.n_threads), (24, 640));
    assert_eq!(
        plan.trees[0][0],
        TreeNode {
            up: None,
            down: vec![1]
        }
    );
    assert_eq!(
        plan.trees[6][0],
        TreeNode {
            up: Some(1),
            down: vec![]
        }
    );
    assert_eq!(
        plan.trees[6][1],
        TreeNode {
            up: None,
            down: vec![0]
        }
    );
    assert_eq!(plan.rings[23], vec![0, 1]);
}

#[test]
fn explicit_channels_beyond_the_search_repeat_its_channels() {
    let mut choice = PlanChoice::all_reduce(Algo::Ring, Proto::Simple, 1 << 30);
    choice.n_channels = Some(32);
    let plan = ExecPlan::from_search(&capture_search(), &choice).unwrap();
    assert_eq!(plan.rings.len(), 32);
    assert_eq!(plan.trees[30], plan.trees[6]);
}

#[test]
fn bad_shapes_are_rejected() {
    let mut choice = PlanChoice::all_reduce(Algo::Ring, Proto::Ll, 4096);
    choice.n_threads = Some(100);
    assert!(ExecPlan::default_shapes(2, 1, &choice).is_err());
    choice.n_threads = None;
    choice.n_channels = Some(65);
    assert!(ExecPlan::default_shapes(2, 1, &choice).is_err());
    // Only Ring/Simple for the other collectives.
    let mut c = PlanChoice::all_reduce(Algo::Tree, Proto::Simple, 4096);
    c.collective = Coll::AllGather;
    assert!(ExecPlan::default_shapes(2, 1, &c).is_err());
    // A size that is not a whole number of elements.
    let mut c = PlanChoice::all_reduce(Algo::Ring, Proto::Simple, 6);
    c.dtype = Dtype::F32;
    assert!(ExecPlan::default_shapes(2, 1, &c).is_err());
}

#[test]
fn outside_the_executors_vocabulary_is_bad_input() {
    // The model's vocabulary is wider than the executor's: Reduce and the
    // algorithms other than Ring and Tree are refused when the plan is built.
    let mut c = PlanChoice::all_reduce(Algo::Ring, Proto::Simple, 4096);
    c.collective = Coll::Reduce;
    let e = ExecPlan::default_shapes(2, 1, &c).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e
        .to_string()
        .contains("reduce: the executor runs all-reduce"));
    let c = PlanChoice::all_reduce(Algo::Nvls, Proto::Simple, 4096);
    let e = ExecPlan::default_shapes(2, 1, &c).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e
        .to_string()
        .contains("NVLS: the executor runs Ring, Tree, OneShot and TwoShot only"));
    // `--coll reduce` keeps the old message (the executor never knew Reduce).
    let e = planner::exec::plan::parse_collective("reduce").unwrap_err();
    assert!(e.to_string().contains("unknown collective 'reduce'"));
    assert_eq!(
        planner::exec::plan::parse_collective("All_Gather").unwrap(),
        Coll::AllGather
    );
}

#[test]
fn broken_trees_are_named() {
    // Two roots.
    let two_roots = vec![TreeNode::default(), TreeNode::default()];
    assert!(validate_tree(&two_roots, 2)
        .unwrap_err()
        .contains("2 roots"));
    // Child lists a parent that does not list it back.
    let mut t = chain_tree(&[0, 1, 2]);
    t[1].down.clear();
    assert!(validate_tree(&t, 3).is_err());
    // A search ring with a rank out of range fails the plan.
    let mut s = capture_search();
    s.connection.rings[3] = vec![0, 2];
    let choice = PlanChoice::all_reduce(Algo::Ring, Proto::Ll, 4096);
    let err = ExecPlan::from_search(&s, &choice).unwrap_err();
    assert!(err.to_string().contains("ring 3"), "{err}");
}

#[test]
fn pattern_values_are_small_exact_and_match_their_bits() {
    // At the executor's most ranks (16) the amplitude is 5 in every type
    // (bf16: 256 / 16 = 16, capped at 5), so every value is in -5..=5 (within
    // the old -7..=7) and any sum over 16 ranks (|sum| <= 80) has at most 7
    // significant bits.
    for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
        assert_eq!(DataPattern::new(dtype, 16, 1).amp, 5, "{dtype}");
    }
    let p = DataPattern::new(Dtype::Bf16, 16, 1);
    for i in 0..10_000u64 {
        for r in 0..16 {
            let v = p.value(r, i);
            assert!((-5..=5).contains(&v));
        }
    }
    // f32 1.0 = 0x3f800000; bf16 is its top half; f16 1.0 = 0x3c00, -7 = 0xc700, 112 = 0x5700.
    assert_eq!(pattern::bits(Dtype::F32, 1), 0x3f80_0000);
    assert_eq!(pattern::bits(Dtype::Bf16, 1), 0x3f80);
    assert_eq!(pattern::bits(Dtype::F16, 1), 0x3c00);
    assert_eq!(pattern::bits(Dtype::F16, -7), 0xc700);
    assert_eq!(pattern::bits(Dtype::F16, 112), 0x5700);
    assert_eq!(pattern::bits(Dtype::F16, 0), 0);
    // The values differ between ranks and indices (not a constant pattern).
    let a: Vec<i32> = (0..64).map(|i| p.value(0, i)).collect();
    let b: Vec<i32> = (0..64).map(|i| p.value(1, i)).collect();
    assert_ne!(a, b);
    assert!(a.iter().any(|&v| v != a[0]));
}

#[test]
fn cpu_check_counts_wrong_elements() {
    let c = PlanChoice::all_reduce(Algo::Ring, Proto::Ll, 64);
    let plan = ExecPlan::default_shapes(3, 1, &c).unwrap();
    let want = plan.expectation(0, 9);
    let mut out: Vec<u32> = (0..16)
        .map(|i| pattern::bits(Dtype::F32, want.value(i)))
        .collect();
    assert_eq!(want.count_wrong(plan.dtype, &out), (0, None));
    out[5] ^= 1;
    out[9] = 0xffff_ffff;
    assert_eq!(want.count_wrong(plan.dtype, &out), (2, Some(5)));
}
