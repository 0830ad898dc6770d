//! `calibrate`: fit on a full verify file (both backends' rows, NCCL's 6 pairs
//! x 30 sizes; target < 1 s) with and without the 5-fold cross-validation the
//! file stores, and one `predict_us` (target < 1 µs, so `explain
//! --calibration` adds far less than 1 ms).

use criterion::{criterion_group, criterion_main, Criterion};
use planner::calibrate::{self, FitOptions, ReadOptions};
use planner::model::{Algo, Coll, Proto};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/bench/results/verify-h200x2-final-2026-11-30/verify.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let input = calibrate::read_file(&path, &ReadOptions::default()).unwrap();
    let inputs = [input];
    let no_cv = FitOptions {
        cv_folds: 0,
        ..FitOptions::default()
    };
    let mut group = c.benchmark_group("calibrate");
    group.sample_size(10);
    group.bench_function("read verify file", |b| {
        b.iter(|| calibrate::read_file(black_box(&path), &ReadOptions::default()).unwrap())
    });
    group.bench_function("fit nccl, no cv", |b| {
        b.iter(|| calibrate::fit(black_box(&inputs), &no_cv).unwrap())
    });
    group.bench_function("fit nccl, 5-fold cv", |b| {
        b.iter(|| calibrate::fit(black_box(&inputs), &FitOptions::default()).unwrap())
    });
    group.finish();
    let cal = calibrate::fit(&inputs, &no_cv).unwrap();
    c.bench_function("calibrate predict_us", |b| {
        b.iter(|| {
            cal.predict_us(
                black_box(Coll::AllReduce),
                black_box(Algo::Ring),
                black_box(Proto::Simple),
                black_box(3 << 20),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
