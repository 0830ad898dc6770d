//! Measurements are never lost: the result file is written as the run goes (rewritten whole after
//! each finished size, through a temporary file and a rename), so Ctrl-C, a crashed NCCL child, a
//! timeout, a lost rank or a killed planner leaves a file `verify --load` reads; such a file says
//! `"complete": false` and, where planner saw it happen, why (`stopped`).
//!
//! Why one JSON document rewritten, not JSON Lines: every reader of result files (`--load`,
//! `calibrate`, `tune`, `diff`) keeps reading one document, old files included, and a partial
//! file is valid JSON at every instant. The cost is rewriting a few hundred KiB per size.

use super::run::Progress;
use crate::error::Error;
use crate::measure::{Row, RowStatus};
use crate::result_file::{StopReason, Stopped, VerifyRun};
use crate::units::format_size;
use std::cell::RefCell;

/// What went missing during a run; the first reason in `StopReason`'s order names it.
#[derive(Debug, Default)]
pub struct Gaps(Vec<(StopReason, String)>);

impl Gaps {
    pub(crate) fn push(&mut self, reason: StopReason, detail: impl Into<String>) {
        let detail = detail.into();
        if !self.0.iter().any(|(r, d)| *r == reason && *d == detail) {
            self.0.push((reason, detail));
        }
    }
    /// One record: the most important reason, every detail (the first 4) in order.
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        let reason = self.0.iter().map(|(r, _)| *r).min()?;
        let mut details: Vec<String> = self
            .0
            .iter()
            .map(|(r, d)| {
                if *r == reason {
                    d.clone()
                } else {
                    format!("{}: {d}", r.label())
                }
            })
            .collect();
        if details.len() > 4 {
            let more = details.len() - 4;
            details.truncate(4);
            details.push(format!("{more} more"));
        }
        Some(Stopped {
            reason,
            detail: details.join("; "),
        })
    }
}

/// Mark `run` complete or, with gaps, incomplete and why.
pub(crate) fn close_run(run: &mut VerifyRun, gaps: &Gaps) {
    run.stopped = gaps.stopped();
    run.complete = run.stopped.is_none();
}

/// The progress of a run that also keeps its result file up to date: rows are appended as each
/// size finishes and the file is rewritten (incomplete) at once.
pub(crate) struct Keeping<'a> {
    inner: &'a dyn Progress,
    path: String,
    run: RefCell<Option<VerifyRun>>,
    /// A write failed: said once, then the run goes on (its end writes again).
    failed: RefCell<bool>,
}

impl<'a> Keeping<'a> {
    pub(crate) fn new(inner: &'a dyn Progress, path: &str) -> Keeping<'a> {
        Keeping {
            inner,
            path: path.to_string(),
            run: RefCell::new(None),
            failed: RefCell::new(false),
        }
    }

    fn write(&self) {
        let run = self.run.borrow();
        let Some(run) = run.as_ref() else { return };
        if let Err(e) = run.save(&self.path) {
            if !self.failed.replace(true) {
                self.inner.note(&e.to_string());
            }
        }
    }

    /// The run failed part-way with `error`: record it in the file, which keeps every row
    /// measured so far. No-op before the run started.
    pub(crate) fn fail(&self, error: &Error) {
        if let Some(run) = self.run.borrow_mut().as_mut() {
            run.complete = false;
            run.stopped = Some(Stopped {
                reason: StopReason::Failed,
                detail: error.to_string(),
            });
        }
        self.write();
    }

    /// Whether the file was started (it holds the rows measured so far).
    pub(crate) fn started(&self) -> bool {
        self.run.borrow().is_some()
    }
}

impl Progress for Keeping<'_> {
    fn start(&self, total: u64) {
        self.inner.start(total)
    }
    fn job(&self, label: &str) {
        self.inner.job(label)
    }
    fn step(&self, label: &str) {
        self.inner.step(label)
    }
    fn note(&self, text: &str) {
        self.inner.note(text)
    }
    fn finish(&self) {
        self.inner.finish()
    }
    fn begin_run(&self, draft: &VerifyRun) {
        let mut run = draft.clone();
        run.complete = false;
        *self.run.borrow_mut() = Some(run);
        self.write();
    }
    fn row_done(&self, row: &Row) {
        if let Some(run) = self.run.borrow_mut().as_mut() {
            run.rows.push(row.clone());
        }
        self.write();
    }
}

/// For `--load` of an incomplete file: one line saying so, why, and which sizes it holds.
pub fn incomplete_line(run: &VerifyRun) -> Option<String> {
    if run.complete {
        return None;
    }
    let why = match &run.stopped {
        Some(s) => format!("{}: {}", s.reason.label(), s.detail),
        None => "it ended without saying why (planner was killed or crashed)".into(),
    };
    let measured = |bytes: u64| {
        run.rows
            .iter()
            .any(|r| r.bytes == bytes && r.status == RowStatus::Ok)
    };
    let present: Vec<u64> = run
        .options
        .sizes
        .iter()
        .copied()
        .filter(|&b| measured(b))
        .collect();
    let list = if present.is_empty() {
        "none".to_string()
    } else {
        present
            .iter()
            .map(|&b| format_size(b))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !present.is_empty() && present.len() == run.options.sizes.len() {
        // Rows are written job by job (one pair over all its sizes): that every size has rows says nothing of the
        // jobs that never started, so an incomplete file never says "sizes measured: N of N".
        return Some(format!(
            "incomplete run ({why}); every size has rows, but the run stopped before its end: the pairs or \
             backends that had not finished are missing"
        ));
    }
    Some(format!(
        "incomplete run ({why}); sizes measured: {} of {}: {list}",
        present.len(),
        run.options.sizes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{FakeBackend, FakeFault};

    #[test]
    fn the_first_reason_in_order_names_the_stop() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.stopped(), None);
        gaps.push(StopReason::Timeout, "nccl auto at 4 KiB");
        gaps.push(StopReason::Interrupted, "SIGINT (Ctrl-C)");
        gaps.push(StopReason::Interrupted, "SIGINT (Ctrl-C)"); // once
        let stopped = gaps.stopped().unwrap();
        assert_eq!(stopped.reason, StopReason::Interrupted);
        assert_eq!(
            stopped.detail,
            "timeout: nccl auto at 4 KiB; SIGINT (Ctrl-C)"
        );
        let json = serde_json::to_string(&stopped).unwrap();
        assert!(json.contains("\"reason\":\"interrupted\""), "{json}");
    }

    #[test]
    fn max_always_p99_only_from_100_repeats() {
        let mut row = Row::empty(crate::measure::Backend::Nccl, None, 8, RowStatus::Ok);
        row.times_us = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        row.derive_stats();
        assert_eq!(
            (row.median_us, row.max_us, row.p99_us),
            (Some(3.0), Some(5.0), None)
        );
        // 1..=100: nearest rank ceil(0.99 * 100) = 99
        row.times_us = (1..=100).map(f64::from).collect();
        row.derive_stats();
        assert_eq!((row.max_us, row.p99_us), (Some(100.0), Some(99.0)));
    }

    #[test]
    fn fake_settings() {
        let vars = |list: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                list.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(FakeBackend::from_vars(vars(&[])).unwrap(), None);
        assert_eq!(
            FakeBackend::from_vars(vars(&[("PLANNER_FAKE_BACKEND", "1")])).unwrap(),
            Some(FakeBackend {
                delay_ms: 50,
                fault: None
            })
        );
        let f = FakeBackend::from_vars(vars(&[
            ("PLANNER_FAKE_BACKEND", "1"),
            ("PLANNER_FAKE_DELAY_MS", "7"),
            ("PLANNER_FAKE_FAULT", "hang:3"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (f.delay_ms, f.fault),
            (7, Some(FakeFault::Hang { after: 3 }))
        );
        for bad in ["crash", "crash:x", "boom:1"] {
            let list: &'static [(&str, &str)] = Box::leak(Box::new([
                ("PLANNER_FAKE_BACKEND", "1"),
                ("PLANNER_FAKE_FAULT", bad),
            ]));
            assert_eq!(
                FakeBackend::from_vars(vars(list)).unwrap_err().exit_code(),
                2
            );
        }
        // deterministic, 1 % slower per repeat: 5 µs + 1 MB at 100-149 GB/s
        let t = FakeBackend::times_us("nccl Ring/LL", 1 << 20, 3);
        assert_eq!(t, FakeBackend::times_us("nccl Ring/LL", 1 << 20, 3));
        assert!(t[0] > 5.0 + 1048576.0 / 150e3 && t[0] < 5.0 + 1048576.0 / 100e3);
        assert!((t[1] / t[0] - 1.01).abs() < 1e-3);
    }
}
