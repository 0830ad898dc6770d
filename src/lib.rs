//! planner: which collective algorithm and protocol a machine should run, why,
//! and whether that is true.
//!
//! The crate follows the data: `probe` -> `topo` -> `search` -> `model` ->
//! `exec` -> `report` -> `cli`. Each stage reads only the stages before it.

pub mod error;
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
pub mod pipeline;
pub mod probe;
pub mod report;
pub mod search;
pub mod topo;
pub mod verify;
pub mod xml;

pub use error::{Error, Result};
