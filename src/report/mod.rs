//! Output for people and scripts.

pub mod audit;
pub mod channels;
pub mod diff;
pub mod explain;
pub mod run;
pub mod topo;
pub mod verify;
