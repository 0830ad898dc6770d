//! The result files measured on the lent 2 x H200 (bench/results/verify-*)
//! load, re-render and re-score without a GPU, and say what they must.

use planner::measure::Backend;
use planner::measure::RowStatus;
use planner::model::Pair;
use planner::result_file::VerifyRun;
use planner::verify::score::{predictor_for_run, score};

fn load(name: &str) -> VerifyRun {
    let path = format!("{}/bench/results/{name}", env!("CARGO_MANIFEST_DIR"));
    VerifyRun::load(&path).unwrap()
}

#[test]
fn the_goal_run_covers_every_ring_tree_pair_with_nothing_wrong() {
    let run = load("verify-h200x2-both-eager.json");
    assert_eq!(run.machine.nccl_version.as_deref(), Some("2.28.3"));
    assert_eq!(run.machine.world_size, 2);
    assert!(run.machine.gpus.iter().all(|g| g.name == "NVIDIA H200"));
    assert_eq!(run.options.sizes.len(), 30); // 8 B .. 4 GiB
    for backend in [Backend::Native, Backend::Nccl] {
        for pair in Pair::ring_tree_all() {
            let rows: Vec<_> = run
                .rows
                .iter()
                .filter(|r| r.backend == backend && r.pair == Some(pair))
                .collect();
            assert_eq!(rows.len(), 30, "{backend} {pair}");
            assert!(rows
                .iter()
                .all(|r| r.status == RowStatus::Ok && r.wrong == Some(0)));
        }
    }
    // NCCL's free choice was read at every size from its TUNING lines
    let auto: Vec<_> = run.rows.iter().filter(|r| r.pair.is_none()).collect();
    assert_eq!(auto.len(), 30);
    assert!(auto.iter().all(|r| r.nccl_choice.is_some()));
    // NCCL's own topology and graph dumps travel in the file
    assert!(run
        .machine
        .nccl_topology_xml
        .as_deref()
        .unwrap()
        .contains("<system"));
    assert!(run
        .machine
        .nccl_graph_xml
        .as_deref()
        .unwrap()
        .contains("<graphs"));
}

#[test]
fn re_scoring_the_goal_run_with_the_current_model() {
    let run = load("verify-h200x2-both-eager.json");
    let predictor = predictor_for_run(&run);
    assert!(
        predictor.label().starts_with("stock model"),
        "{}",
        predictor.label()
    );
    let scored = score(&run, predictor.as_ref());
    let nccl = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::Nccl)
        .unwrap();
    // the model's pick is what NCCL 2.28.3 actually ran, at all 30 sizes
    assert_eq!(nccl.agrees_with_nccl, 30);
    assert_eq!(nccl.wrong, 0);
    assert_eq!(nccl.rows_ok, 210);
    // every pinned row has a prediction
    assert!(scored
        .rows
        .iter()
        .filter(|r| r.row.pair.is_some())
        .all(|r| r.predicted_us.is_some()));
}

#[test]
fn one_and_two_processes_agree_on_large_sizes() {
    // Same NCCL sweep (eager loops), one process for both GPUs and one process
    // per GPU under RANK/WORLD_SIZE/...: above 16 MiB every pair's median is
    // within 5% (measured: 0.985-1.023).
    let one = load("verify-h200x2-nccl-eager-1proc.json");
    let two = load("verify-h200x2-nccl-eager-2proc.json");
    assert_eq!(two.machine.processes, 2);
    assert!(two.options.launch.starts_with("launcher: 2 ranks"));
    let mut compared = 0;
    for a in one
        .rows
        .iter()
        .filter(|r| r.bytes > 16 << 20 && r.pair.is_some())
    {
        let b = two
            .rows
            .iter()
            .find(|r| r.pair == a.pair && r.bytes == a.bytes)
            .unwrap();
        let ratio = a.median_us.unwrap() / b.median_us.unwrap();
        assert!(
            (0.95..1.05).contains(&ratio),
            "{:?} {}: {ratio}",
            a.pair,
            a.bytes
        );
        compared += 1;
    }
    assert_eq!(compared, 48); // 8 sizes x 6 pairs
}
