//! `planner check --prometheus`: a node_exporter textfile (`--collector.textfile.directory`) whose labels are the
//! ones NCCL Inspector's Prometheus output uses for a collective (`node`, `gpu`, `n_nodes`, `nranks`,
//! `collective`, `message_size` as a range such as `1-2MB`, `algo_proto`; NCCL `plugins/profiler/inspector/
//! inspector_prom.cc`), so a dashboard built on the Inspector's metrics can put the expectation beside them.

use super::CheckFormat;
use crate::check::{CheckReport, Status};
use crate::error::Result;
use std::fmt::Write;

pub(crate) struct Prometheus;

/// The Inspector's size bucket: the size in the largest unit (B, KB, MB, GB, TB of 1024) it is at least 1 of,
/// floored, as `lower-(lower+1)UNIT` (`1048576` -> `1-2MB`, `3145728` -> `3-4MB`).
pub(crate) fn message_size_label(bytes: u64) -> String {
    if bytes == 0 {
        return "0B".into();
    }
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < units.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let lower = value.floor().max(1.0);
    format!("{lower:.0}-{:.0}{}", lower + 1.0, units[unit])
}

/// A label value with `\`, `"` and newlines escaped (the text format's rules).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl CheckFormat for Prometheus {
    fn render(&self, report: &CheckReport) -> Result<String> {
        let mut out = String::new();
        let node = report
            .run
            .hosts
            .first()
            .map(String::as_str)
            .unwrap_or("unknown");
        let gpu = report
            .run
            .gpus
            .first()
            .map(String::as_str)
            .unwrap_or("unknown");
        let nranks = report.machine.gpus_per_node * report.machine.nodes;
        let metrics: [(&str, &str, &str); 6] = [
            (
                "planner_check_measured_busbw_gbs",
                "gauge",
                "Measured bus bandwidth (nccl-tests definition), GB/s",
            ),
            (
                "planner_check_expected_busbw_gbs",
                "gauge",
                "ExpectedBand bus bandwidth on this machine, GB/s",
            ),
            (
                "planner_check_expected_low_busbw_gbs",
                "gauge",
                "Low edge of the expected band, GB/s",
            ),
            (
                "planner_check_expected_high_busbw_gbs",
                "gauge",
                "High edge of the expected band, GB/s",
            ),
            (
                "planner_check_measured_time_microseconds",
                "gauge",
                "Measured time per call, us",
            ),
            (
                "planner_check_slow",
                "gauge",
                "1 when the size is below its band by more than the tolerance",
            ),
        ];
        for (i, (name, kind, help)) in metrics.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in &report.sizes {
                let labels = format!(
                    "node=\"{}\",gpu=\"{}\",n_nodes=\"{}\",nranks=\"{}\",collective=\"{}\",message_size=\"{}\",\
                     algo_proto=\"{}\",size_bytes=\"{}\",source=\"{}\"",
                    escape(node),
                    escape(gpu),
                    report.machine.nodes,
                    nranks,
                    s.coll.nccl_name(),
                    message_size_label(s.bytes),
                    escape(&s.pair.replace('/', "_")),
                    s.bytes,
                    escape(&s.source)
                );
                let value = match i {
                    0 => Some(s.measured_busbw_gbs),
                    1 => s.expected.as_ref().map(|e| e.busbw_gbs),
                    2 => s.expected.as_ref().map(|e| e.low_busbw_gbs),
                    3 => s.expected.as_ref().map(|e| e.high_busbw_gbs),
                    4 => Some(s.measured_time_us),
                    _ => Some(f64::from(u8::from(s.status == Status::Slow))),
                };
                if let Some(v) = value.filter(|v| v.is_finite()) {
                    let _ = writeln!(out, "{name}{{{labels}}} {v:.6}");
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP planner_check_verdict_slow 1 when some size is slow (check exits 1)"
        );
        let _ = writeln!(out, "# TYPE planner_check_verdict_slow gauge");
        let _ = writeln!(
            out,
            "planner_check_verdict_slow{{node=\"{}\",n_nodes=\"{}\",nranks=\"{nranks}\"}} {}",
            escape(node),
            report.machine.nodes,
            report.exit_code()
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_size_buckets_as_the_inspector_writes_them() {
        // inspector_prom.cc inspectorPromFormatMessageSizeRange, by hand: 1048576 B = 1.0 MB -> "1-2MB".
        assert_eq!(message_size_label(1048576), "1-2MB");
        assert_eq!(message_size_label(3 << 20), "3-4MB");
        assert_eq!(message_size_label(8), "8-9B");
        assert_eq!(message_size_label(1536), "1-2KB");
        assert_eq!(message_size_label(0), "0B");
        assert_eq!(escape("a\"b\\"), "a\\\"b\\\\");
    }
}
