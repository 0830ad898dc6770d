//! Cross-validation of the calibration on the committed 2x H200 verify runs.
//!
//! `cargo run --release --example calibrate_cv -- OUT_DIR` writes, per backend,
//! the calibration fitted on all inputs (`calibration-<backend>.json` and
//! `.txt`), the cross-validation report (`cv-<backend>.txt` and `.json`: k-fold
//! by size, then train on one run / test on another with the run-to-run
//! spread) and the plot (`plot-<backend>.svg`). It prints the fit time.

use planner::calibrate::{self, Backend, FitOptions, ReadOptions};
use std::time::Instant;

/// NCCL: the runs where the NCCL child drives each GPU from its own thread or
/// process (the earlier single-thread runs are host-bound below 1 MiB and
/// measure a different launch path). Native: the two runs of the final kernels.
const NCCL_RUNS: [&str; 3] = [
    "bench/results/verify-h200x2-final-2026-11-30/verify.json",
    "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-1proc.json",
    "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-2proc.json",
];
const NATIVE_RUNS: [&str; 2] = [
    "bench/results/verify-h200x2-final-2026-11-30/verify.json",
    "bench/results/integration-h200x2-2026-11-30/verify.json",
];

fn main() {
    if let Err(e) = run() {
        eprintln!("{e}");
        std::process::exit(e.exit_code());
    }
}

fn write(path: &str, text: &str) -> planner::Result<()> {
    std::fs::write(path, text)
        .map_err(|e| planner::Error::runtime(format!("{path}: cannot write: {e}")))
}

fn run() -> planner::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    for (backend, files) in [
        (Backend::Nccl, &NCCL_RUNS[..]),
        (Backend::Native, &NATIVE_RUNS[..]),
    ] {
        let inputs = files
            .iter()
            .map(|f| calibrate::read_file(f, &ReadOptions::default()))
            .collect::<planner::Result<Vec<_>>>()?;
        let options = FitOptions {
            backend,
            cv_folds: std::env::var("CV_FOLDS")
                .ok()
                .and_then(|f| f.parse().ok())
                .unwrap_or(FitOptions::default().cv_folds),
            ..FitOptions::default()
        };
        let start = Instant::now();
        let cal = calibrate::fit(
            &inputs[..1],
            &FitOptions {
                cv_folds: 0,
                ..options.clone()
            },
        )?;
        let fit_one = start.elapsed();
        let start = Instant::now();
        let cal_all = calibrate::fit(&inputs, &options)?;
        let fit_all = start.elapsed();
        let start = Instant::now();
        let mut sum = 0.0;
        let mut calls = 0u64;
        for p in &cal.pairs {
            for e in 3..=32 {
                sum += cal
                    .predict_us(p.coll, p.algo, p.proto, 1u64 << e)
                    .unwrap_or(0.0);
                calls += 1;
            }
        }
        let per_predict = start.elapsed().as_secs_f64() / calls as f64;
        eprintln!(
            "{backend}: fit on {} in {:.1} ms (no k-fold), on all {} inputs with 5-fold CV in {:.1} ms; \
             predict_us {:.0} ns per call (checksum {sum:.1})",
            files[0],
            fit_one.as_secs_f64() * 1e3,
            files.len(),
            fit_all.as_secs_f64() * 1e3,
            per_predict * 1e9
        );
        let report = calibrate::cross_validate(&inputs, &options)?;
        let name = backend.name();
        write(
            &format!("{out}/calibration-{name}.json"),
            &(cal_all.to_json()? + "\n"),
        )?;
        write(
            &format!("{out}/calibration-{name}.txt"),
            &cal_all.render_text(),
        )?;
        write(&format!("{out}/cv-{name}.txt"), &report.render_text())?;
        write(
            &format!("{out}/cv-{name}.json"),
            &(report.to_json()? + "\n"),
        )?;
        write(
            &format!("{out}/plot-{name}.svg"),
            &calibrate::plot::render_svg(&cal_all, &inputs)?,
        )?;
    }
    Ok(())
}
