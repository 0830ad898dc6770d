//! Executor (filled in by the exec stage).

// `planner verify` (the verify helper's files).
pub mod nccl;
pub mod nccl_child;
pub mod nccl_kernels;
pub mod nccl_spawn;
pub mod rendezvous;
pub mod verify;
pub mod verify_run;
pub mod verify_score;
