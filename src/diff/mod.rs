//! `planner diff`: what changed between two NCCL versions on one machine, and between
//! two measured runs.
//!
//! * `versions`: the model under NCCL family A and B, size band by size band, with the
//!   constants and rules (the tables' `changes_from_previous` chain) that caused each change.
//! * `runs`: two `planner verify` result files: machine and version differences first, then
//!   the measured ratio per pair and size with the repeats' spread, and a verdict per regime.

pub mod runs;
pub mod versions;

pub use runs::{diff_runs, RunDiff};
pub use versions::{diff_versions, VersionDiff, VersionDiffOptions};

/// A size as people read it: `16 MiB` for a power of two, else `1144840 B (1.1 MiB)`.
pub(crate) fn size_label(bytes: u64) -> String {
    let text = crate::units::format_size(bytes);
    if bytes.is_power_of_two() || bytes < 1024 {
        text
    } else {
        format!("{bytes} B ({text})")
    }
}
