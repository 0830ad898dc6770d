//! Output of `planner check`: one file per format behind `CheckFormat` (a table for people, `--json` for scripts,
//! `--prometheus` for a node_exporter textfile collector).

mod json;
mod prometheus;
mod table;

use crate::check::CheckReport;
use crate::error::Result;

pub(crate) use json::Json;
pub(crate) use prometheus::Prometheus;
pub(crate) use table::Table;

/// One way to print a check report.
pub(crate) trait CheckFormat {
    fn render(&self, report: &CheckReport) -> Result<String>;
}
