//! Output for people and scripts.

pub mod run;
pub mod topo;
