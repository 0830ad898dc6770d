//! `Plan::from_json` (what the tuner plugin runs at NCCL's `init` on the file `PLANNER_TUNER_PLAN` names) on
//! arbitrary bytes: it must never panic. A plan it accepts must also write itself out again (`to_json`,
//! `to_nccl_csv`), read back to the same rules, and answer every lookup the same through
//! `Plan::pick` and the plugin's per-communicator index.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_tuner_planner::plan::{Plan, Rule};

/// Shapes to look up: the plan's own plus a few fixed ones.
fn shapes(plan: &Plan) -> Vec<(u64, u64)> {
    let mut shapes = vec![(1, 1), (2, 1), (8, 1), (16, 2)];
    for rule in &plan.rules {
        shapes.push((
            rule.n_ranks.map_or(2, u64::from),
            rule.n_nodes.map_or(1, u64::from),
        ));
    }
    shapes.sort_unstable();
    shapes.dedup();
    shapes.truncate(16);
    shapes
}

/// Sizes to look up: every band edge and its neighbours, plus 0 and the largest.
fn sizes(plan: &Plan) -> Vec<u64> {
    let mut sizes = vec![0, 1, 4096, u64::MAX];
    for rule in plan.rules.iter().take(64) {
        for edge in [rule.min_bytes, rule.max_bytes] {
            sizes.extend([edge.saturating_sub(1), edge, edge.saturating_add(1)]);
        }
    }
    sizes
}

/// Everything but the informational times (serde_json's default float parsing may move the last bit).
fn key(rule: &Rule) -> impl PartialEq + std::fmt::Debug {
    (
        rule.collective,
        rule.n_ranks,
        rule.n_nodes,
        rule.min_bytes,
        rule.max_bytes,
        rule.algorithm,
        rule.protocol,
        rule.channels,
    )
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = Plan::from_json(text) else {
        return;
    };
    let written = plan
        .to_json()
        .expect("a plan from_json accepted must write out");
    let again = Plan::from_json(&written).expect("what to_json writes must read back");
    assert_eq!(
        plan.rules.iter().map(key).collect::<Vec<_>>(),
        again.rules.iter().map(key).collect::<Vec<_>>()
    );
    let _ = plan.to_nccl_csv();
    for (n_ranks, n_nodes) in shapes(&plan) {
        let index = plan.index_for_shape(n_ranks, n_nodes);
        assert_eq!(index.is_empty(), !plan.has_shape(n_ranks, n_nodes));
        for coll in 0..6 {
            for &bytes in &sizes(&plan) {
                let direct = plan.pick(coll, n_ranks, n_nodes, bytes);
                let indexed = nccl_tuner_planner::Coll::from_nccl_index(coll)
                    .and_then(|c| index.pick(c, bytes));
                assert_eq!(direct, indexed, "coll {coll} {n_ranks}x{n_nodes} {bytes} B");
            }
        }
    }
});
