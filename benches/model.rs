//! Full sweep: 30 sizes (8 B .. 4 GiB) x 5 collectives x 21 algorithm/protocol
//! pairs on an 8-GPU topology, after the search: NCCL's init tuning plus a
//! detailed evaluation (times, terms, masks, channels, threads) of every pair.
//! Target: under 1 ms. (AllGather/ReduceScatter sizes are per rank.)

use criterion::{criterion_group, criterion_main, Criterion};
use planner::model::examples::hopper8_worked_example;
use planner::model::select::Call;
use planner::model::{table, Coll, Model, ModelInput, TuningTable};
use planner::nccl_env::NcclEnv;
use planner::units::parse_size_range;
use std::hint::black_box;

fn full_sweep(input: &ModelInput, table: &TuningTable, sizes: &[u64]) -> usize {
    let model = Model::new(input.clone(), NcclEnv::default(), table.clone()).unwrap();
    let mut usable = 0;
    for coll in Coll::ALL {
        for &size in sizes {
            // AllGather/ReduceScatter: `size` per rank (at least nccl-tests' 16 bytes),
            // so all 30 sizes are valid for every collective.
            let total = if coll.is_ag_rs() {
                size.max(16) * model.input.n_ranks as u64
            } else {
                size
            };
            let call = Call::new(coll, total, model.input.n_ranks, 1).unwrap();
            let eval = model.evaluate(&call).unwrap();
            usable += eval.candidates.iter().filter(|c| c.usable()).count();
        }
    }
    usable
}

/// The searched hgx-h200-8 fixture when the search stage is available.
fn searched_fixture() -> Option<ModelInput> {
    let topo = planner::pipeline::load_fixture("hgx-h200-8").ok()?;
    let cluster = planner::topo::Cluster::single(topo);
    let env = NcclEnv::default();
    let table = table::builtin("2.30").ok()?;
    let nvls = ModelInput::nvls_request(&cluster, &env, planner::model::input::NvlsFlag::Auto);
    let opts = planner::search::SearchOptions {
        nvls: nvls.supported(),
        ..Default::default()
    };
    let result = planner::search::search(&cluster, &opts).ok()?;
    ModelInput::from_search(&cluster, &result, &env, nvls, &table).ok()
}

fn bench(c: &mut Criterion) {
    let sizes = parse_size_range("8..4G").unwrap();
    assert_eq!(sizes.len(), 30);
    let table = table::builtin("2.30").unwrap();
    let hand = hopper8_worked_example();
    c.bench_function("full sweep, 8x H100-class (hand-made graphs)", |b| {
        b.iter(|| full_sweep(black_box(&hand), &table, &sizes))
    });
    match searched_fixture() {
        Some(input) => {
            c.bench_function("full sweep, hgx-h200-8 after search", |b| {
                b.iter(|| full_sweep(black_box(&input), &table, &sizes))
            });
        }
        None => panic!("hgx-h200-8: the search failed"),
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
