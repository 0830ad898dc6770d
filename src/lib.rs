//! planner: which collective algorithm and protocol a machine should run, why,
//! and whether that is true.
//!
//! The crate follows the data: `probe` -> `topo` -> `search` -> `model` (with `pipeline` building them in one
//! way) -> `audit` | `calibrate` -> `gpu` -> `exec` (our kernels) | `nccl` (the reference backend) -> `verify` ->
//! `report` -> `cli`. Each stage reads only the stages before it; `exec` and `nccl` never read each other.

pub mod error;
pub mod fsio;
pub mod units;

pub mod audit;
pub mod calibrate;
pub mod cli;
pub mod diff;
pub mod exec;
pub mod gpu;
pub mod limits;
pub mod measure;
pub mod model;
pub mod nccl;
pub mod nccl_env;
pub mod pipeline;
pub mod plot;
pub mod probe;
pub mod report;
pub mod search;
pub mod topo;
pub mod tune;
pub mod verify;
pub mod xml;

pub use error::{Error, Result};
