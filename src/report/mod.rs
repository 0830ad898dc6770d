//! Output for people and scripts.

pub mod channels;
pub mod topo;
