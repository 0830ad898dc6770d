//! Cost model (filled in by the model stage).
