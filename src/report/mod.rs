//! Output for people and scripts.

pub mod channels;
pub mod run;
pub mod topo;
