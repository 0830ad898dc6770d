//! Output for people and scripts.
