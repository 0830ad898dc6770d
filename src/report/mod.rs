//! Output for people and scripts.

pub mod audit;
pub mod explain;
pub mod topo;
pub mod verify;
pub mod run;
