//! The result file round trip and the scoring arithmetic, on a small recorded
//! run whose every number is worked out by hand in the comments.

use crate::verify_data::{recorded_run, ring_ll, ring_simple, tree_ll, KIB, MIB};
use planner::measure::Backend;
use planner::model::Pair;
use planner::result_file::VerifyRun;
use planner::verify::score::{score, Recorded};
use planner::verify::Regime;

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn result_file_round_trip() {
    let run = recorded_run();
    let text = run.to_json().unwrap();
    let back = VerifyRun::from_json(&text, "recorded.json").unwrap();
    assert_eq!(back, run);
    // and through a real file
    let path = std::env::temp_dir().join(format!("planner-verify-rt-{}.json", std::process::id()));
    run.save(path.to_str().unwrap()).unwrap();
    assert_eq!(VerifyRun::load(path.to_str().unwrap()).unwrap(), run);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn bad_result_files_are_input_errors() {
    let run = recorded_run();
    let good = run.to_json().unwrap();
    let cases = [
        ("{", "bad.json:"),
        (
            "{\"format\": \"other\", \"version\": 1}",
            "not a planner verify result file",
        ),
        (
            &good.replacen("\"version\": 1", "\"version\": 99", 1),
            "version 99 is not supported",
        ),
        (
            &good.replacen("[\n        10.0", "[\n        -10.0", 1),
            "negative or non-finite time",
        ),
    ];
    for (text, expected) in cases {
        let err = VerifyRun::from_json(text, "bad.json").unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains(expected), "{err} lacks {expected}");
    }
}

#[test]
fn errors_per_regime() {
    let run = recorded_run();
    let scored = score(&run, &Recorded::new(&run));
    let nccl = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::Nccl)
        .unwrap();
    let regime = |g: Regime| nccl.regimes.iter().find(|r| r.regime == g).unwrap();
    // 1 KiB: (9.9-11)/11 = -10%, (25.2-21)/21 = +20%, (11.7-13)/13 = -10% -> median 10, worst 20
    let small = regime(Regime::Small);
    assert_eq!(small.rows, 3);
    assert!(close(small.median_abs_error_pct, 10.0), "{small:?}");
    assert!(close(small.worst_abs_error_pct, 20.0));
    assert_eq!(small.worst_pair, Some(ring_simple()));
    // 1 MiB: (36-40)/40 = -10%, (39-30)/30 = +30%, (55-50)/50 = +10% -> median 10, worst 30
    let medium = regime(Regime::Medium);
    assert!(close(medium.median_abs_error_pct, 10.0));
    assert!(close(medium.worst_abs_error_pct, 30.0));
    assert_eq!(medium.worst_bytes, Some(MIB));
    // 64 MiB: (480-400)/400 = +20%, (190-200)/200 = -5% -> median 12.5, worst 20 (Tree/LL unavailable)
    let large = regime(Regime::Large);
    assert_eq!(large.rows, 2);
    assert!(close(large.median_abs_error_pct, 12.5));
    assert!(close(large.worst_abs_error_pct, 20.0));
    assert_eq!(large.worst_pair, Some(ring_ll()));
    // signed error on one row
    let row = scored
        .rows
        .iter()
        .find(|r| {
            r.row.backend == Backend::Nccl
                && r.row.pair == Some(ring_simple())
                && r.row.bytes == KIB
        })
        .unwrap();
    assert!(close(row.error_pct, 20.0));
    // algbw = 1024 B / 21 µs = 0.04876 GB/s; busbw on 2 ranks = algbw x 2(2-1)/2
    assert!(close(row.algbw_gbs, 1024.0 / 21_000.0));
    assert!(close(row.busbw_gbs, 1024.0 / 21_000.0));
}

#[test]
fn picks_hits_and_regret() {
    let run = recorded_run();
    let scored = score(&run, &Recorded::new(&run));
    let nccl = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::Nccl)
        .unwrap();
    // model (lowest recorded prediction): Ring/LL, Ring/LL, Ring/Simple
    // measured best:                      Ring/LL, Ring/Simple, Ring/Simple -> 2 of 3
    assert_eq!((nccl.hits, nccl.sizes_with_best), (2, 3));
    assert!(close(nccl.hit_rate, 2.0 / 3.0));
    // the miss at 1 MiB: Ring/LL 40 over Ring/Simple 30
    assert!(close(nccl.worst_regret, 40.0 / 30.0));
    assert_eq!(nccl.worst_regret_bytes, Some(MIB));
    assert_eq!(nccl.worst_regret_pick, Some(ring_ll()));
    assert_eq!(nccl.worst_regret_best, Some(ring_simple()));
    // NCCL's own choices are the same three pairs: 2 of 3, the same regret, agreeing with the model 3 times
    assert_eq!((nccl.nccl_hits, nccl.nccl_sizes), (2, 3));
    assert!(close(nccl.nccl_worst_regret, 40.0 / 30.0));
    assert_eq!(nccl.agrees_with_nccl, 3);
    assert_eq!(
        (nccl.rows_ok, nccl.rows_unavailable, nccl.rows_failed),
        (11, 1, 0)
    );
    // marks on the rows
    let mark = |pair: Pair, bytes: u64| {
        let r = scored
            .rows
            .iter()
            .find(|r| {
                r.row.backend == Backend::Nccl && r.row.pair == Some(pair) && r.row.bytes == bytes
            })
            .unwrap();
        (r.model_pick, r.measured_best, r.nccl_pick)
    };
    assert_eq!(mark(ring_ll(), MIB), (true, false, true));
    assert_eq!(mark(ring_simple(), MIB), (false, true, false));
    // native: best 1 KiB Ring/LL (only one), 1 MiB Ring/Simple 27, 64 MiB Ring/Simple 220
    let native = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::Native)
        .unwrap();
    assert_eq!((native.hits, native.sizes_with_best), (2, 3));
    assert!(close(native.worst_regret, 40.0 / 27.0));
}

#[test]
fn native_over_nccl_ratios() {
    let run = recorded_run();
    let scored = score(&run, &Recorded::new(&run));
    let ratio = |p: Pair| scored.ratios.iter().find(|r| r.pair == p).unwrap();
    // Ring/LL: 22/11 = 2.0, 40/40 = 1.0, 360/400 = 0.9 -> median 1.0, min 0.9, max 2.0
    let rl = ratio(ring_ll());
    assert_eq!(rl.sizes, 3);
    assert!(close(rl.median, 1.0) && close(rl.min, 0.9) && close(rl.max, 2.0));
    assert!(close(rl.by_regime[0].1, 2.0) && close(rl.by_regime[2].1, 0.9));
    // Ring/Simple: 27/30 = 0.9, 220/200 = 1.1 -> median 1.0
    let rs = ratio(ring_simple());
    assert_eq!(rs.sizes, 2);
    assert!(close(rs.median, 1.0));
    assert_eq!(rs.by_regime[0].1, None);
    // Tree/LL never ran natively
    assert_eq!(ratio(tree_ll()).sizes, 0);
}

/// NCCL 2.28.9's graph dump from the 2 x H200 capture (`h200x2-nvswitch-vm/graph.xml`).
const CAPTURE_GRAPH_XML: &str = include_str!("../golden/h200x2-nvswitch-vm/graph.xml");

#[test]
fn the_stock_model_as_predictor_matches_the_capture() {
    use planner::model::Coll;
    use planner::predict::{ModelPredictor, Predictor};
    let node = planner::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap();
    let cluster = planner::topo::Cluster::single(node);
    let model = ModelPredictor::new(&cluster, Some(CAPTURE_GRAPH_XML), Some("2.28.9")).unwrap();
    assert!(model.label().contains("nccl-2.28"), "{}", model.label());
    // the capture's choices: Ring/LL up to 1 MiB, Ring/Simple from 2 MiB to 4 GiB
    for p in 2..=32 {
        let size = 1u64 << p;
        let expected = if size <= MIB {
            ring_ll()
        } else {
            ring_simple()
        };
        assert_eq!(model.pick(Coll::AllReduce, size), Some(expected), "{size}");
    }
    // the capture's init table: AllReduce Ring/LL 7.8 us / 141.0 GB/s, so
    // 64 KiB takes 7.8 + 65536 / (1000 x 141.0) = 8.2648 us
    let t = model
        .predict_us(Coll::AllReduce, ring_ll(), 64 * KIB)
        .unwrap();
    assert!((t - 8.2648).abs() < 1e-3, "{t}");
    // Tree pinned has a time too, and a masked pair (NVLS, multicast off) has none
    assert!(model
        .predict_us(Coll::AllReduce, tree_ll(), 64 * KIB)
        .is_some());
    let nvls = Pair::new(planner::model::Algo::Nvls, planner::model::Proto::Simple);
    assert_eq!(model.predict_us(Coll::AllReduce, nvls, 64 * KIB), None);
}

/// `Recorded`'s look-ups (a map built once) give what a scan of the rows gives: the first recorded prediction of
/// (pair, size), and the pick = the least prediction at the size, the first row on a tie. On the hand-made run
/// with a duplicate row (a later, lower prediction of a pair already recorded) and on the committed result files.
#[test]
fn recorded_look_ups_equal_a_scan_of_the_rows() {
    use planner::predict::Predictor;
    let mut hand = recorded_run();
    let mut dup = hand.rows[0].clone();
    dup.predicted_us = dup.predicted_us.map(|t| t / 2.0);
    hand.rows.push(dup);
    let mut runs = vec![hand];
    for name in [
        "verify-h200x2-both-eager.json",
        "verify-h200x2-nccl-eager-2proc.json",
    ] {
        let path = format!("{}/bench/results/{name}", env!("CARGO_MANIFEST_DIR"));
        runs.push(VerifyRun::load(&path).unwrap());
    }
    for run in &runs {
        let recorded = Recorded::new(run);
        let coll = run.options.collective;
        let mut checked = 0;
        for row in &run.rows {
            let Some(pair) = row.pair else { continue };
            let first = run
                .rows
                .iter()
                .find(|r| r.pair == Some(pair) && r.bytes == row.bytes && r.predicted_us.is_some())
                .and_then(|r| r.predicted_us);
            assert_eq!(recorded.predict_us(coll, pair, row.bytes), first);
            let mut best: Option<(f64, Pair)> = None;
            for r in &run.rows {
                if let (Some(p), Some(t)) = (r.pair, r.predicted_us) {
                    if r.bytes == row.bytes && best.is_none_or(|(b, _)| t < b) {
                        best = Some((t, p));
                    }
                }
            }
            assert_eq!(recorded.pick(coll, row.bytes), best.map(|(_, p)| p));
            checked += 1;
        }
        assert!(checked > 3, "{checked} rows checked");
    }
}
