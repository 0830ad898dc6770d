//! Which reader a file needs, from its content (never from its name).

use super::nccl_tests_text::{header_columns, strip_launcher_tag};
use super::InputFormat;
use crate::error::{Error, Result};
use crate::result_file::RESULT_FORMAT;

/// The first non-empty line of `text` and its 1-based number (1 and "" for a blank text).
fn first_line(text: &str) -> (usize, &str) {
    text.lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .unwrap_or((1, ""))
}

/// The format from the content: JSON documents by their keys, JSONL by its
/// first line, nccl-tests text by its header or rows.
pub(super) fn detect(text: &str, source: &str) -> Result<InputFormat> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(Error::bad_input(format!("{source}: the file is empty")));
    }
    if trimmed.starts_with('{') {
        let whole = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => return detect_json(&value, source, 1),
            Err(e) => e,
        };
        // Not one document: JSON Lines, judged by the first non-empty line.
        let (number, first) = first_line(text);
        return match serde_json::from_str::<serde_json::Value>(first) {
            Ok(value) => detect_json(&value, source, number),
            // One document after all (pretty-printed): its own error position.
            Err(_) => Err(Error::bad_input(format!(
                "{source}:{}:{}: not valid JSON: {whole}",
                whole.line(),
                whole.column()
            ))),
        };
    }
    for line in text.lines() {
        let t = strip_launcher_tag(line.trim());
        if t.starts_with("# nccl-tests version")
            || t.starts_with("# Collective test starting")
            || (t.starts_with('#') && t.contains("out-of-place"))
            || header_columns(t).is_some()
        {
            return Ok(InputFormat::NcclTestsText);
        }
    }
    let (number, first) = first_line(text);
    Err(Error::bad_input(format!(
        "{source}:{number}: unknown format (expected a planner verify result file, nccl-tests output as text \
         or -J JSON, or NCCL Inspector JSONL); the line starts `{}`",
        first.trim().chars().take(60).collect::<String>()
    )))
}

fn detect_json(value: &serde_json::Value, source: &str, line: usize) -> Result<InputFormat> {
    if let Some(format) = value.get("format").and_then(|f| f.as_str()) {
        return match format {
            RESULT_FORMAT => Ok(InputFormat::PlannerVerify),
            super::super::file::CALIBRATION_FORMAT => Err(Error::bad_input(format!(
                "{source}: is a calibration file, not measurements"
            ))),
            other => Err(Error::bad_input(format!(
                "{source}: unknown JSON format \"{other}\" (expected \"{}\")",
                RESULT_FORMAT
            ))),
        };
    }
    if value.get("results").is_some() && value.get("config").is_some() {
        return Ok(InputFormat::NcclTestsJson);
    }
    if value.get("coll_perf").is_some() || value.get("p2p_perf").is_some() {
        return Ok(InputFormat::NcclInspector);
    }
    Err(Error::bad_input(format!(
        "{source}:{line}: unknown JSON input: no \"format\" (planner verify), \"results\"+\"config\" \
         (nccl-tests -J) or \"coll_perf\" (NCCL Inspector) key"
    )))
}
