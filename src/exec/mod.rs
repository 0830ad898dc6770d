//! Executor (filled in by the exec stage).
