//! The kernels' step schedules, played through 8-slot FIFOs on the CPU
//! (`planner::exec::schedule::simulate`) for rank counts 1..16, several
//! channel counts and ragged sizes: every output element must be the exact
//! sum / copy, written exactly once, with no deadlock and no FIFO overflow.

use planner::dtype::Dtype;
use planner::exec::plan::{chain_tree, heap_tree, launch_shape, ExecPlan, PlanChoice, TreeNode};
use planner::exec::schedule::{self, simulate, FIFO_STEPS};
use planner::model::{Algo, Coll, Proto};

/// Inputs that make every misplaced element visible: rank r, element i holds
/// a distinct value (r+1) * 1_000_003 + i (sums over 16 ranks stay exact in i64).
fn inputs(plan: &ExecPlan) -> Vec<Vec<i64>> {
    (0..plan.n_ranks)
        .map(|r| {
            (0..plan.send_count())
                .map(|i| (r as i64 + 1) * 1_000_003 + i as i64)
                .collect()
        })
        .collect()
}

fn choice(coll: Coll, algo: Algo, proto: Proto, bytes: u64, nch: usize) -> PlanChoice {
    PlanChoice {
        collective: coll,
        algorithm: algo.into(),
        protocol: proto,
        n_channels: Some(nch),
        n_threads: Some(if proto == Proto::Ll128 { 640 } else { 512 }),
        dtype: Dtype::F32,
        bytes,
        in_place: false,
        root: 0,
    }
}

/// Simulate and compare with the expected outputs; return the result.
fn check(plan: &ExecPlan) -> schedule::SimResult {
    let ins = inputs(plan);
    let sim = simulate(plan, &ins).unwrap_or_else(|e| panic!("{plan} bytes {}: {e:?}", plan.bytes));
    let want = schedule::expected_outputs(plan, &ins);
    for (r, want_r) in want.iter().enumerate() {
        if let Some(i) = (0..want_r.len()).find(|&i| sim.outputs[r][i] != want_r[i]) {
            panic!(
                "{plan} bytes {}: rank {r} element {i} is {} (want {})",
                plan.bytes, sim.outputs[r][i], want_r[i]
            );
        }
        if !plan.in_place {
            if let Some(i) = sim.writes[r].iter().position(|&w| w != 1) {
                panic!(
                    "{plan} bytes {}: rank {r} element {i} written {} times",
                    plan.bytes, sim.writes[r][i]
                );
            }
        }
    }
    assert!(sim.max_fifo_steps <= FIFO_STEPS);
    sim
}

/// Ragged element counts: tiny, not a multiple of anything, one more than a
/// 16-byte multiple, and a few around the LL chunk (8192 f32 per operation).
const COUNTS: &[u64] = &[1, 2, 3, 5, 17, 255, 1000, 4099, 8191, 8193, 24_577, 65_539];

#[test]
fn ring_all_reduce_every_rank_count_protocol_and_ragged_size() {
    for n in 1..=16 {
        for &nch in &[1, 3, 8] {
            for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
                for &count in COUNTS {
                    let c = choice(Coll::AllReduce, Algo::Ring, proto, count * 4, nch);
                    let plan = ExecPlan::default_shapes(n, nch, &c).unwrap();
                    check(&plan);
                }
            }
        }
    }
}

#[test]
fn ring_all_reduce_many_loops_and_permuted_rings() {
    // LL moves 8192 f32 per step: 300k elements over 5 ranks and 2 channels is
    // several full ring loops plus a ragged last loop, on a permuted ring.
    for n in [2, 5, 7] {
        for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
            let c = choice(Coll::AllReduce, Algo::Ring, proto, 300_007 * 4, 2);
            let ring: Vec<usize> = (0..n).map(|i| (i * 3 + 1) % n).collect();
            let mut ring_sorted = ring.clone();
            ring_sorted.sort();
            ring_sorted.dedup();
            let ring = if ring_sorted.len() == n {
                ring
            } else {
                (0..n).rev().collect()
            };
            let plan = ExecPlan::build(
                n,
                vec![ring.clone(), (0..n).collect()],
                vec![chain_tree(&ring)],
                &c,
                "test".into(),
            )
            .unwrap();
            let sim = check(&plan);
            assert!(sim.messages > 0);
        }
    }
    // Simple moves 2 MiB per operation (524288 f32): 2 ranks, 1 channel, 2.5 loops.
    let c = choice(Coll::AllReduce, Algo::Ring, Proto::Simple, 2_621_447 * 4, 1);
    check(&ExecPlan::default_shapes(2, 1, &c).unwrap());
}

#[test]
fn ring_all_reduce_in_place_and_16_bit_types() {
    for n in [1, 2, 3, 8, 16] {
        for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
            for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
                let mut c = choice(Coll::AllReduce, Algo::Ring, proto, 0, 3);
                c.dtype = dtype;
                c.bytes = 10_007 * dtype.size();
                c.in_place = true;
                check(&ExecPlan::default_shapes(n, 3, &c).unwrap());
            }
        }
    }
}

#[test]
fn tree_all_reduce_chains_binary_trees_and_arity_three() {
    for n in 1..=16 {
        for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
            for &count in &[1u64, 7, 1000, 8193, 40_001] {
                let c = choice(Coll::AllReduce, Algo::Tree, proto, count * 4, 4);
                // test_shapes alternates chain / binary tree per channel.
                let plan = ExecPlan::test_shapes(n, 4, &c).unwrap();
                check(&plan);
            }
        }
    }
    // A root with three children, one of which has three children.
    let mut tree = vec![TreeNode::default(); 7];
    tree[0].down = vec![1, 2, 3];
    for r in [1, 2, 3] {
        tree[r].up = Some(0);
    }
    tree[3].down = vec![4, 5, 6];
    for r in [4, 5, 6] {
        tree[r].up = Some(3);
    }
    for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
        let c = choice(Coll::AllReduce, Algo::Tree, proto, 100_003 * 4, 2);
        let plan = ExecPlan::build(
            7,
            vec![(0..7).collect()],
            vec![tree.clone(), heap_tree(&[6, 5, 4, 3, 2, 1, 0])],
            &c,
            "test".into(),
        )
        .unwrap();
        check(&plan);
    }
}

#[test]
fn ring_all_gather_reduce_scatter_broadcast() {
    for n in 1..=16 {
        for coll in [Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast] {
            for &bytes in &[64u64, 4 * 1000 * n as u64 + 12, 4 * 300_017] {
                for in_place in [false, true] {
                    let mut c = choice(coll, Algo::Ring, Proto::Simple, bytes, 3);
                    c.in_place = in_place;
                    c.root = n / 2;
                    let plan = ExecPlan::test_shapes(n, 3, &c).unwrap();
                    check(&plan);
                }
            }
        }
    }
}

#[test]
fn zero_elements_per_rank_is_a_no_op() {
    // 8 bytes of all-gather over 2 ranks: the per-rank block (16-byte multiple) is empty.
    let c = choice(Coll::AllGather, Algo::Ring, Proto::Simple, 8, 1);
    let plan = ExecPlan::default_shapes(2, 1, &c).unwrap();
    assert_eq!(plan.call_count(), 0);
    let sim = check(&plan);
    assert_eq!(sim.messages, 0);
}

#[test]
fn channel_parts_tile_the_buffer_with_512_byte_aligned_starts() {
    // 1 GiB of f32 on 24 channels: 268435456 / 24 = 11184810.67, up to a
    // multiple of 128 elements (512 B) = 11184896 per channel.
    assert_eq!(
        schedule::channel_part(1 << 28, 24, 4, 1),
        (11_184_896, 11_184_896)
    );
    for &count in &[0usize, 1, 3, 4, 5, 1023, 1024, 1025, 999_999, 1 << 28] {
        for &nch in &[1usize, 2, 3, 7, 24, 64] {
            for elem in [2usize, 4] {
                let mut next = 0;
                for c in 0..nch {
                    let (off, n) = schedule::channel_part(count, nch, elem, c);
                    assert_eq!(off, next, "count {count} nch {nch} channel {c}");
                    if n > 0 {
                        assert_eq!((off * elem) % 512, 0, "count {count} nch {nch} channel {c}");
                    }
                    next = off + n;
                }
                assert_eq!(next, count);
            }
        }
    }
}

#[test]
fn simple_slices_fit_their_fifo_steps() {
    let c = choice(Coll::AllReduce, Algo::Ring, Proto::Simple, 1 << 30, 1);
    let plan = ExecPlan::default_shapes(2, 1, &c).unwrap();
    let ck = schedule::chunking(&plan);
    // 4 MiB buffer / 8 steps = 512 KiB per step; chunk 4 steps = 2 MiB = 524288 f32; 2 slices of 2 steps.
    assert_eq!(ck.step_bytes, 524_288);
    assert_eq!(ck.chunk_elems, 524_288);
    assert_eq!((ck.slices_per_chunk, ck.steps_per_slice), (2, 2));
    for &nelem in &[0usize, 1, 15, 16, 17, 4095, 100_000, 524_288] {
        let slices = schedule::simple_slices(&ck, 4, nelem);
        assert_eq!(slices.len(), 2);
        assert_eq!(slices.iter().map(|s| s.1).sum::<usize>(), nelem);
        for (_, k) in slices {
            assert!(k * 4 <= ck.step_bytes * ck.steps_per_slice);
        }
    }
}

#[test]
fn chunk_sizes_follow_nccl() {
    let mk = |algo, proto, bytes| {
        let c = choice(Coll::AllReduce, algo, proto, bytes, 24);
        schedule::chunking(&ExecPlan::default_shapes(2, 24, &c).unwrap())
    };
    // LL: 64 KiB step, half payload = 32768 B = 8192 f32.
    assert_eq!(mk(Algo::Ring, Proto::Ll, 1 << 20).chunk_elems, 8192);
    // LL128: 614400 B step, 15/16 payload = 576000 B = 144000 f32 (a multiple of the 1920 B grain).
    assert_eq!(mk(Algo::Ring, Proto::Ll128, 1 << 20).chunk_elems, 144_000);
    // Tree LL128, 2 ranks, 24 channels, 1 MiB: nsteps = 1 + 0.1*2 = 1.2; 1 MiB/(24*chunk) = 0 is
    // below 1.2*64/2 = 38.4, so 576000 halves while > 131072: 288000, 144000, 72000; then below
    // 1.2*16/2 = 9.6 it halves while > 32768: 36000, 18000; grain 1920: 9*1920 = 17280 B = 4320 f32.
    assert_eq!(mk(Algo::Tree, Proto::Ll128, 1 << 20).chunk_elems, 4320);
    // Tree Simple: one 512 KiB step per operation.
    assert_eq!(mk(Algo::Tree, Proto::Simple, 1 << 20).chunk_elems, 131_072);
}

#[test]
fn launch_shape_matches_the_h200_capture() {
    // nccl-allreduce-choices.txt (2x H200, 24 channels): Ring/LL uses channels
    // {0..0} up to 8 KiB, {0..1} at 16 KiB, {0..3} at 32 KiB, {0..7} at 64 KiB,
    // {0..15} at 128 KiB. Threshold for Ring/LL = 8 * nRanks = 16 B per thread.
    for (bytes, nch) in [
        (8u64, 1),
        (8192, 1),
        (16384, 2),
        (32768, 4),
        (65536, 8),
        (131072, 16),
    ] {
        let (nc, _) = launch_shape(Algo::Ring, Proto::Ll, 2, bytes, 24, 512);
        assert_eq!(nc, nch, "{bytes} B");
    }
    // 8 B: nt halves 512 -> 64 while nBytes < nc*nt*16, then the 3-warp minimum: 96.
    assert_eq!(launch_shape(Algo::Ring, Proto::Ll, 2, 8, 24, 512), (1, 96));
    // Large Ring/Simple: all channels, 512 + 32 sync-warp threads.
    assert_eq!(
        launch_shape(Algo::Ring, Proto::Simple, 2, 1 << 30, 24, 512),
        (24, 544)
    );
    // Tree always uses 640 threads.
    assert_eq!(
        launch_shape(Algo::Tree, Proto::Ll, 2, 1 << 30, 24, 512).1,
        640
    );
}

#[test]
fn broken_schedules_are_caught() {
    let c = choice(Coll::AllReduce, Algo::Ring, Proto::Ll, 4000 * 4, 1);
    let plan = ExecPlan::default_shapes(3, 1, &c).unwrap();
    let ins = inputs(&plan);
    // Rank 2 skips its last operation: its peer's message is never received.
    let skipped = schedule::simulate_ops(&plan, &ins, |r, ch, g| {
        let mut ops = schedule::ops(&plan, r, ch, g);
        if r == 2 {
            ops.pop();
        }
        ops
    });
    assert!(skipped.is_err(), "a missing receive must be reported");
    // Rank 1 receives before it sends in its first operation: everyone waits.
    let deadlock = schedule::simulate_ops(&plan, &ins, |r, ch, g| {
        let mut ops = schedule::ops(&plan, r, ch, g);
        ops[0].recv = vec![(r + 2) % 3];
        ops
    });
    assert!(
        matches!(deadlock, Err(schedule::SimError::Deadlock(_))),
        "{deadlock:?}"
    );
    // Rank 0 sends a chunk of the wrong size.
    let mismatch = schedule::simulate_ops(&plan, &ins, |r, ch, g| {
        let mut ops = schedule::ops(&plan, r, ch, g);
        if r == 0 {
            ops[0].nelem -= 1;
        }
        ops
    });
    assert!(
        matches!(mismatch, Err(schedule::SimError::Mismatch(_))),
        "{mismatch:?}"
    );
}
