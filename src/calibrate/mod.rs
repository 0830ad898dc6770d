//! `planner calibrate`: fit NCCL's cost model to measurements of one machine.
//!
//! NCCL predicts a call as `latency + bytes / bandwidth` per algorithm x
//! protocol from constants that describe a generic machine. This module keeps
//! that structure and fits the two numbers per pair (and per collective where
//! the data has it) to what was measured, adding only the terms the data needs
//! (see `model`). Everything is one call per use:
//!
//! * `input::read_file` / `input::read_text`: any supported measurement file
//!   (planner verify results, nccl-tests text or `-J` JSON, NCCL Inspector
//!   JSONL) -> `Measurements`, one vocabulary for all of them.
//! * `fit(&[Measurements], &FitOptions) -> Calibration`.
//! * `Calibration::predict_us(coll, algo, proto, bytes)`.
//! * `Calibration::to_json` / `from_json` / `check_applies`.
//! * `cross_validate(&[Measurements], &FitOptions) -> CvReport`, rendered by
//!   `CvReport::render_text` / `to_json`.
//! * `plot::render_svg`: one panel per pair, measured, stock and calibrated.
//! * `command::calibrate(&CalibrateRequest, progress)`: all of the above as
//!   `planner calibrate` runs it (read, fit, `--cv`, `--plot`, `-o`).
//! * `apply`: using a saved calibration without refitting: `load_for_cluster`
//!   then `calibrate_call` / `calibrate_sweep` for `explain --calibration`;
//!   `rescore_verify` and `CalibratedPredictor` (verify's `Predictor`) for
//!   `verify --load --calibration`.
//!
//! ```no_run
//! use planner::calibrate::{self, FitOptions, ReadOptions};
//! use planner::model::{Algo, Coll, Proto};
//! # fn main() -> planner::Result<()> {
//! let run = calibrate::read_file(
//!     "bench/results/verify-h200x2-final-2026-11-30/verify.json",
//!     &ReadOptions::default(),
//! )?;
//! let cal = calibrate::fit(&[run], &FitOptions::default())?; // NCCL's rows
//! cal.save("cal.json")?;
//! // 3 MiB all-reduce with Ring/LL128 on that machine: about 28 µs
//! let t = cal.predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll128, 3 << 20);
//! # let _ = t;
//! # Ok(())
//! # }
//! ```

pub(crate) mod apply;
pub(crate) mod command;
pub mod cv;
pub mod expected;
pub mod file;
pub mod fit;
pub(crate) mod input;
pub(crate) mod model;
pub mod plot;
mod report;
mod solver;
pub mod stats;

pub use apply::{
    calibrate_call, calibrate_sweep, load_for_cluster, rescore_verify, CalibratedCall,
    CalibratedPredictor, CalibratedSweep,
};
pub use command::{calibrate, CalibrateOutcome, CalibrateRequest, TopologyFacts};
pub use cv::{cross_validate, cross_validate_with, CvReport};
pub use expected::{FormBasis, Physical};
pub use file::{topology_hash, topology_hash_of_root, Calibration, PairFit};
pub use fit::{fit, fit_with_basis, FitOptions};
pub use input::{read_file, read_text, InputFormat, Measurement, Measurements, ReadOptions};
pub use model::PairParams;
