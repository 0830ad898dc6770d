//! Output for people and scripts.
pub mod verify;
