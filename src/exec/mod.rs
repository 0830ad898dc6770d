//! The executor: runs a plan (rings, trees, channels, threads, protocol) with
//! our own kernels on the local GPUs, checks every element of the result and
//! times it.
//!
//! - `plan`: what to run (`ExecPlan`), built from the search or by hand.
//! - `schedule`: the kernels' step schedule on the CPU, with a FIFO simulator.
//! - `pattern`: the deterministic inputs and the exact expected results.
//! - `kernels`: the CUDA sources and their NVRTC compilation to CUBIN.
//! - `cuda`: checks that the driver and NVRTC libraries exist before any call.
//! - `runtime`: contexts, peer access, FIFOs, launches, graphs, timing.

pub mod cuda;
pub mod kernels;
pub mod pattern;
pub mod plan;
pub mod runtime;
pub mod schedule;
pub mod session;

pub use plan::{ExecPlan, PlanChoice, TreeNode};
