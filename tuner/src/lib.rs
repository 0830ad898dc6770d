//! `planner`'s NCCL tuner plugin and its plan format.
//!
//! * [`plan`]: the plan file `planner tune` writes and the plugin reads (`PLANNER_TUNER_PLAN`).
//! * [`abi`]: NCCL's tuner plugin ABI (v5 for NCCL 2.28/2.29, v6 for 2.30), declared from NCCL's headers.
//! * [`context`]: one context per communicator and the `getCollInfo` decision.
//! * `ncclTunerPlugin_v5` / `ncclTunerPlugin_v6`: the exported tables NCCL looks up in
//!   `libnccl_tuner_planner.so` (`NCCL_TUNER_PLUGIN=/path/libnccl_tuner_planner.so`). See `tuner/README.md`.

pub mod abi;
pub mod context;
pub mod plan;
mod plugin;

pub use plan::{Algo, Coll, Pick, Plan, PlanError, Proto, Provenance, Rule, SourceKind};
pub use plugin::{
    ncclTunerPlugin_v5, ncclTunerPlugin_v6, planner_tuner_init_with_plan, PLUGIN_NAME,
};
