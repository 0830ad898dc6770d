//! planner's all-reduce kernels beyond NCCL's menu (OneShot/LL, TwoShot/Simple)
//! without a GPU: the vocabulary keeps them out of every NCCL path, the plans
//! and the geometry cover every element once, and the flag protocols,
//! played through random interleavings of every rank, CTA and thread
//! (`planner::exec::beyond`), never read a unit before it is written or
//! after it is overwritten, survive graph-style replays, and end with the
//! exact sums; deliberately broken variants of each protocol are caught.

use crate::common::planner;
use planner::dtype::Dtype;
use planner::exec::beyond::{
    self, simulate_one_shot, simulate_two_shot, two_shot_part, ModelCall, Mutant,
};
use planner::exec::plan::{parse_pair, ExecPlan, PlanChoice};
use planner::model::{Algo, AnyAlgo, Coll, OwnAlgo, Pair, Proto};
use predicates::prelude::*;

// ------------------------------------------------------------ vocabulary

#[test]
fn nccl_vocabulary_is_unchanged_and_refuses_the_new_algorithms() {
    assert_eq!(Algo::ALL.len(), 7);
    assert!(Algo::ALL
        .iter()
        .all(|&a| !AnyAlgo::from(a).is_beyond_nccl()));
    for (i, a) in Algo::ALL.iter().enumerate() {
        assert_eq!(*a as usize, i, "NCCL's index order");
        assert_eq!(Algo::from_index(i), Some(*a));
    }
    assert_eq!(Algo::from_index(7), None);
    assert_eq!(OwnAlgo::ALL, [OwnAlgo::OneShot, OwnAlgo::TwoShot]);
    // NCCL_ALGO's parser knows NCCL's menu only.
    for name in ["OneShot", "oneshot", "TWO_SHOT", "TwoShot"] {
        assert!(Algo::parse(name).is_err(), "{name}");
    }
    assert_eq!(Algo::parse("ring").unwrap(), Algo::Ring);
    // `--pair all` is still Ring/Tree x protocols.
    assert!(Pair::ring_tree_all().iter().all(|p| !p.is_beyond_nccl()));
    assert_eq!(Pair::ring_tree_all().len(), 6);
}

#[test]
fn pairs_beyond_nccl_parse_with_their_one_protocol() {
    let one = Pair::new(OwnAlgo::OneShot, Proto::Ll);
    let two = Pair::new(OwnAlgo::TwoShot, Proto::Simple);
    for text in ["OneShot/LL", "oneshot/ll", "one-shot/LL", "ONE_SHOT/ll"] {
        assert_eq!(Pair::parse(text).unwrap(), one, "{text}");
    }
    assert_eq!(Pair::parse("TwoShot/Simple").unwrap(), two);
    assert_eq!(one.to_string(), "OneShot/LL");
    assert_eq!(two.to_string(), "TwoShot/Simple");
    let err = Pair::parse("OneShot/Simple").unwrap_err().to_string();
    assert!(err.contains("OneShot/LL"), "{err}");
    assert!(Pair::parse("TwoShot/LL128").is_err());
    // The executor's --pair and verify's --pair take them.
    assert_eq!(parse_pair("OneShot/LL").unwrap(), one);
    let sel = planner::verify::PairSelection::parse("OneShot/LL,TwoShot/Simple").unwrap();
    assert_eq!(sel, planner::verify::PairSelection::List(vec![one, two]));
    // JSON (result files): the names, both ways.
    let json = serde_json::to_string(&two).unwrap();
    assert_eq!(json, r#"{"algo":"TwoShot","proto":"Simple"}"#);
    assert_eq!(serde_json::from_str::<Pair>(&json).unwrap(), two);
}

#[test]
fn any_algo_is_each_menu_s_name_in_json_and_sorts_nccl_first() {
    for algo in AnyAlgo::all() {
        let json = serde_json::to_string(&algo).unwrap();
        assert_eq!(json, format!("\"{}\"", algo.name()));
        assert_eq!(serde_json::from_str::<AnyAlgo>(&json).unwrap(), algo);
    }
    assert_eq!(AnyAlgo::all().count(), 9);
    // NCCL's menu first, in index order (the order pairs sort in, as when both were one enum).
    let sorted: Vec<AnyAlgo> = {
        let mut v: Vec<AnyAlgo> = AnyAlgo::all().collect();
        v.sort();
        v
    };
    assert_eq!(sorted, AnyAlgo::all().collect::<Vec<_>>());
    assert!(AnyAlgo::from(Algo::Pat) < AnyAlgo::from(OwnAlgo::OneShot));
    // An unknown name is refused with serde's own wording for an unknown variant, both menus listed.
    let err = serde_json::from_str::<Pair>(r#"{"algo":"Foo","proto":"LL"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "unknown variant `Foo`, expected one of `Tree`, `Ring`, `CollNetDirect`, `CollNetChain`, `NVLS`, `NVLSTree`, `PAT`, `OneShot`, `TwoShot`"
        ),
        "{err}"
    );
}

#[test]
fn run_refuses_a_beyond_pair_with_another_protocol() {
    planner()
        .args(["run", "--pair", "OneShot/Simple"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid --pair 'OneShot/Simple'"))
        .stderr(predicate::str::contains("OneShot/LL"));
}

// ------------------------------------------------------------ plans

fn choice(algo: OwnAlgo, bytes: u64, dtype: Dtype) -> PlanChoice {
    PlanChoice {
        dtype,
        ..PlanChoice::all_reduce(algo, algo.protocol(), bytes)
    }
}

#[test]
fn plans_take_their_own_launch_shape_and_refuse_what_the_kernels_do_not_run() {
    // 8 B on 4 virtual ranks: one CTA of 64 threads per rank.
    let p = ExecPlan::test_shapes(4, 24, &choice(OwnAlgo::OneShot, 8, Dtype::F32)).unwrap();
    assert_eq!((p.n_channels, p.n_threads), (1, 64));
    assert_eq!(
        p.to_string(),
        "all_reduce OneShot/LL 4 ranks, 1 channel x 64 threads, float out-of-place"
    );
    // 256 MiB: all 24 channels of 512 threads.
    let p =
        ExecPlan::test_shapes(4, 24, &choice(OwnAlgo::TwoShot, 256 << 20, Dtype::Bf16)).unwrap();
    assert_eq!((p.n_channels, p.n_threads), (24, 512));
    // Explicit channels and threads are kept.
    let mut c = choice(OwnAlgo::TwoShot, 1 << 20, Dtype::F16);
    c.n_channels = Some(3);
    c.n_threads = Some(256);
    let p = ExecPlan::test_shapes(8, 24, &c).unwrap();
    assert_eq!((p.n_channels, p.n_threads), (3, 256));
    // More than the kernels' 512 threads.
    c.n_threads = Some(640);
    let err = ExecPlan::test_shapes(8, 24, &c).unwrap_err().to_string();
    assert!(err.contains("--threads 640"), "{err}");
    // Another protocol or collective.
    let mut c = choice(OwnAlgo::OneShot, 1 << 20, Dtype::F32);
    c.protocol = Proto::Simple;
    assert!(ExecPlan::test_shapes(2, 24, &c).is_err());
    let mut c = choice(OwnAlgo::OneShot, 1 << 20, Dtype::F32);
    c.collective = Coll::AllGather;
    let err = ExecPlan::test_shapes(2, 24, &c).unwrap_err().to_string();
    assert!(err.contains("all-reduce"), "{err}");
}

// ------------------------------------------------------------ geometry

#[test]
fn two_shot_parts_cover_every_element_once_in_whole_units() {
    for elem in [4u64, 2] {
        let epv = 16 / elem;
        for n in 1..=16usize {
            for channels in [1usize, 2, 3, 7] {
                for count in [0u64, 1, 3, 7, 8, 9, 15, 16, 17, 100, 257, 1000, 4099] {
                    let mut seen = vec![0u8; count as usize];
                    for rank in 0..n {
                        for ch in 0..channels {
                            let (lo, hi) = two_shot_part(count, elem, n, channels, rank, ch);
                            assert!(lo <= hi && hi <= count);
                            if lo < hi {
                                assert_eq!(lo % epv, 0, "part start is a whole unit");
                                assert!(hi % epv == 0 || hi == count, "only the end is ragged");
                            }
                            for i in lo..hi {
                                seen[i as usize] += 1;
                            }
                        }
                    }
                    assert!(
                        seen.iter().all(|&s| s == 1),
                        "elem {elem} n {n} channels {channels} count {count}: {seen:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn one_shot_rounds_cover_every_unit_once() {
    for channels in [1usize, 2, 5] {
        for threads in [64usize, 96, 512] {
            for n_units in [0u64, 1, 63, 64, 65, 1000, 5 * 512 + 1] {
                let rounds = beyond::one_shot_rounds(n_units, channels, threads);
                let mut seen = vec![0u8; n_units as usize];
                for k in 0..rounds {
                    for ch in 0..channels {
                        for tid in 0..threads {
                            for u in 0..beyond::ONESHOT_UNITS {
                                let unit = beyond::one_shot_unit(k, ch, tid, u, channels, threads);
                                if unit < n_units {
                                    seen[unit as usize] += 1;
                                }
                            }
                        }
                    }
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "{channels} {threads} {n_units}"
                );
                // No round is empty.
                assert!(
                    rounds == 0
                        || beyond::one_shot_unit(rounds - 1, 0, 0, 0, channels, threads) < n_units
                );
            }
        }
    }
}

// ------------------------------------------------------------ protocols

/// A sequence of calls as the executor makes them: sizes and shapes change
/// between calls (one executor runs every size), some calls repeat (a
/// graph's iterations), ragged sizes in both element widths.
fn calls(threads: usize) -> Vec<ModelCall> {
    let c = |channels, threads, count, elem_bytes| ModelCall {
        channels,
        threads,
        count,
        elem_bytes,
    };
    vec![
        c(2, threads, 37, 4),
        c(2, threads, 37, 4),
        c(1, threads.max(2) - 1, 5, 2),
        c(3, threads, 1, 4),
        c(3, threads, 61, 2),
        c(2, threads, 61, 2),
        c(2, threads, 61, 2),
    ]
}

#[test]
fn one_shot_protocol_holds_for_every_rank_count_and_interleaving() {
    let mut waited = 0;
    for n in 1..=16usize {
        let seeds = if n <= 4 { 40 } else { 4 };
        for seed in 0..seeds {
            let stats = simulate_one_shot(n, &calls(3), seed, Mutant::None)
                .unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"));
            assert!(stats.units_checked > 0);
            waited += stats.blocked_polls;
        }
    }
    // The interleavings did make threads wait for their peers.
    assert!(waited > 0);
}

#[test]
fn one_shot_catches_a_captured_sequence_and_a_single_slot() {
    let caught = |mutant| {
        (0..40u64)
            .filter(|&seed| simulate_one_shot(3, &calls(2), seed, mutant).is_err())
            .count()
    };
    // A round number baked into the launch (a CUDA graph replaying the first
    // call's value): a replay passes on the previous call's lines (or, when
    // the lines were overwritten first, waits forever).
    assert!(caught(Mutant::SequenceFromLaunch) > 0);
    let stale = (0..40u64)
        .filter_map(|seed| simulate_one_shot(3, &calls(2), seed, Mutant::SequenceFromLaunch).err())
        .filter(|e| e.contains("passed on round"))
        .count();
    assert!(stale > 0, "no replay passed on stale lines");
    // One slot: a fast rank overwrites a line its peer has not read yet.
    assert!(caught(Mutant::OneSlot) > 0);
}

#[test]
fn two_shot_protocol_holds_for_every_rank_count_and_interleaving() {
    let mut waited = 0;
    for in_place in [false, true] {
        for n in 1..=16usize {
            let seeds = if n <= 4 { 40 } else { 3 };
            for seed in 0..seeds {
                let stats = simulate_two_shot(n, &calls(2), in_place, seed, Mutant::None)
                    .unwrap_or_else(|e| panic!("{n} ranks, in place {in_place}, seed {seed}: {e}"));
                assert!(stats.units_checked > 0);
                waited += stats.blocked_polls;
            }
        }
    }
    assert!(waited > 0);
}

#[test]
fn two_shot_catches_missing_barriers_and_a_captured_sequence() {
    for mutant in [
        Mutant::NoStartBarrier,
        Mutant::NoEndBarrier,
        Mutant::SequenceFromLaunch,
    ] {
        for in_place in [false, true] {
            let caught = (0..40u64)
                .filter(|&seed| simulate_two_shot(3, &calls(2), in_place, seed, mutant).is_err())
                .count();
            assert!(caught > 0, "{mutant:?} in place {in_place} never caught");
        }
    }
}

// ------------------------------------------------------------ NCCL paths stay closed

#[test]
fn nccl_algo_refuses_the_new_names() {
    planner()
        .args([
            "explain",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--size",
            "4K",
            "--algo",
            "OneShot",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("OneShot"))
        .stderr(predicate::str::contains("panicked").not());
}

/// A result file with native rows of a pair beyond NCCL (here: the Ring/LL
/// rows of a real 2x H200 run renamed OneShot/LL, no prediction) loads,
/// re-scores against NCCL's model (which has no cell for it) and renders.
#[test]
fn result_files_with_rows_beyond_nccl_load_and_rescore() {
    use serde_json::{json, Value};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/results/verify-h200x2-both-graph-1proc.json"
    );
    let mut run: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut renamed = 0;
    for row in run["rows"].as_array_mut().unwrap() {
        if row["backend"] == "native" && row["pair"] == json!({"algo": "Ring", "proto": "LL"}) {
            row["pair"] = json!({"algo": "OneShot", "proto": "LL"});
            row["predicted_us"] = Value::Null;
            renamed += 1;
        }
    }
    assert!(renamed > 0);
    let file =
        std::env::temp_dir().join(format!("planner-beyond-rows-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(&run).unwrap()).unwrap();
    planner()
        .args(["verify", "--load"])
        .arg(&file)
        .assert()
        .success()
        .stdout(predicate::str::contains("OneShot/LL"));
    planner()
        .args(["verify", "--load"])
        .arg(&file)
        .arg("--json")
        .assert()
        .success()
        .stdout(predicate::str::contains(r#""algorithm": "OneShot""#));
    let _ = std::fs::remove_file(&file);
}
