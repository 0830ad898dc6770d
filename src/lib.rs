//! planner: which collective algorithm and protocol a machine should run, why,
//! and whether that is true.
//!
//! The crate follows the data. The modules below are declared in stage order: a module reads only the modules
//! declared above it (`tests/integration/layering.rs` checks it on every `crate::` reference outside test code),
//! so adding a stage means inserting its `pub mod` line at its place in this list.
//!
//! The public API is what the binary (`main.rs`), the tests, benches, fuzz targets and doc examples use: an item is
//! `pub` only where one of them names it, every other item is `pub(crate)`. The names most callers start from:
//! - `pipeline::Source` (a topology from a probe, a fixture or a file, with NCCL's environment) and
//!   `pipeline::load_fixture`;
//! - `model::Model` (NCCL's tuning model), `model::Pair` (an algorithm/protocol pair), `model::Coll`;
//! - `expect::Expected` (planner's expected model: what nccl-tests should measure) and `expect::build`;
//! - `nccl_env::NcclEnv` (the NCCL_* variables, read once);
//! - `predict::Predictor` (what a pair should take at a size) and `predict::ModelPredictor`;
//! - `result_file::VerifyRun` (a measurement run's result file) and `verify::score::score`;
//! - `nccl_log::NcclLog` (an NCCL_DEBUG=INFO log, read once);
//! - `calibrate::calibrate`, `audit::audit`, `diff::diff_runs`, `diff::diff_versions`;
//! - `cli` is the binary's (`cli::run`): no stage or test imports it.

// Foundations: errors, NCCL's fixed limits, file input/output, units, element types, the XML reader, the SVG
// plotter.
pub mod error;
pub mod limits;
pub mod fsio;
pub mod units;
pub mod dtype;
pub mod xml;
pub mod plot;

// What the machine is: probe -> topo -> NCCL's environment -> search -> model (NCCL's), assembled by pipeline.
pub mod probe;
pub mod topo;
pub mod nccl_env;
pub mod search;
pub mod model;
// What NCCL logged: one reader of NCCL_DEBUG=INFO logs and their lines, for audit, the NCCL backend, calibrate
// and `explain --from-log`.
pub mod nccl_log;
pub mod pipeline;
// What the machine should deliver: planner's expected model on the plan the search found.
pub mod expect;

// What NCCL logged about it, against the model.
pub mod audit;

// Measuring it: the GPU layer (below the measurement vocabulary: it reads only foundations and the model), the
// vocabulary of a measurement, the prediction seam, our kernels (`exec`) and the reference backend (`nccl`),
// then verify, which runs and scores both.
pub mod gpu;
pub mod measure;
pub mod result_file;
pub mod predict;
pub mod exec;
pub mod nccl;
pub mod verify;
// Is a live machine healthy: its links and a short NCCL sweep beside the expected rates.
pub mod doctor;

// Reading measurements back: calibration, run and version diffs, tuning from measurements.
pub mod calibrate;
pub mod diff;
pub mod tune;
// Is the machine delivering it: measurements against the expected model, with causes.
pub mod check;

// People and scripts: tables, JSON, plots; then the command line.
pub mod report;
pub mod cli;

pub use error::{Error, Result};
