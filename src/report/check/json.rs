//! `planner check --json`: the report as docs/json.md's `check` section describes it.

use super::CheckFormat;
use crate::check::CheckReport;
use crate::error::Result;

pub(crate) struct Json;

impl CheckFormat for Json {
    fn render(&self, report: &CheckReport) -> Result<String> {
        let mut value = serde_json::to_value(report)
            .map_err(|e| crate::error::Error::runtime(format!("cannot write JSON: {e}")))?;
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "exit_code".into(),
                serde_json::Value::from(report.exit_code()),
            );
        }
        crate::report::json::render_value(value, "")
    }
}
