//! Fitting the constants marked `fit` to measurements, and leave-one-machine-out cross-validation.

use super::Params;
use crate::error::{Error, Result};

/// The fit's figures: per class and size range, on the training set and left out.
#[derive(Debug, Clone, Default)]
pub struct FitReport {
    pub lines: Vec<String>,
}

impl FitReport {
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

pub fn run_fit(_points: &str, _params: &Params, _write: Option<&str>) -> Result<FitReport> {
    Err(Error::runtime("expect --fit: not built yet"))
}
