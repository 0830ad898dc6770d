//! Search plus connection (`planner::search::search`): the budgets are
//! hgx-h200-8 x 128 nodes (1,024 ranks) < 200 ms and one 8-GPU node < 5 ms.
//! Topology loading (XML, paths) is the topo stage and is not timed here.

use criterion::{criterion_group, criterion_main, Criterion};
use planner::pipeline::load_fixture;
use planner::search::{self, SearchOptions};
use planner::topo::Cluster;
use std::hint::black_box;
use std::time::Duration;

fn cluster(name: &str, nodes: usize) -> Cluster {
    Cluster {
        node: load_fixture(name).expect("fixture loads"),
        n_nodes: nodes,
        net_latency_us: 0.0,
    }
}

fn bench_search(c: &mut Criterion) {
    let opts = SearchOptions::default();
    let mut group = c.benchmark_group("search+connect");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    for (name, nodes) in [
        ("hgx-h200-8", 1),
        ("hgx-h200-8", 2),
        ("hgx-h200-8", 128),
        ("h200x2-nvswitch-vm", 1),
        ("dgx-a100-8", 1),
        ("pcie-rtxpro6000-8", 1),
    ] {
        let cl = cluster(name, nodes);
        group.bench_function(format!("{name} x{nodes}"), |b| {
            b.iter(|| search::search(black_box(&cl), &opts).expect("search succeeds"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
