//! The executor: runs a plan (rings, trees, channels, threads, protocol) with
//! our own kernels on the local GPUs, checks every element of the result and
//! times it.
//!
//! - `beyond`: the all-reduce kernels beyond NCCL's menu (OneShot/LL,
//!   TwoShot/Simple): geometry, launch shape and a CPU model of their flags.
//! - `plan`: what to run (`ExecPlan`), built from the search or by hand.
//! - `schedule`: the kernels' step schedule on the CPU, with a FIFO simulator.
//! - `kernels`: the kernel variants and their sources.
//! - `runtime`: contexts, peer access, FIFOs, launches, graphs, timing (`layout`, `device`, `open`, `launch`).
//! - `session`: one plan over several sizes (`planner run`).
//!
//! The plumbing it shares with the NCCL backend (library checks, CUDA errors,
//! device buffers, NVRTC, the test pattern) is in `crate::gpu`.

pub mod beyond;
pub mod kernels;
pub mod plan;
pub mod runtime;
pub mod schedule;
pub mod session;

pub use plan::{ExecPlan, PlanChoice, TreeNode};
