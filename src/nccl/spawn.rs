//! The parent side of the NCCL backend: start one child, follow its report
//! lines with a deadline, and turn what it said (or did not say) into rows.

use super::{child_command, ChildEvent, ChildMode, ChildSpec};
use crate::error::{Error, Result};
use crate::measure::{Backend, GpuInfo, Row, RowStatus};
use crate::model::Pair;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// What one child did.
#[derive(Debug, Default)]
pub(crate) struct ChildOutcome {
    pub(crate) init: Option<ChildInit>,
    /// Size events in order.
    pub(crate) sizes: Vec<ChildEvent>,
    /// Its own account of a failure that ended it.
    pub(crate) fatal: Option<String>,
    /// No report line came within the deadline; it was killed.
    pub(crate) timed_out: bool,
    /// The user asked to stop (Ctrl-C): it was killed after its current size.
    pub(crate) interrupted: bool,
    /// How it exited ("exit status: 0", "signal: 9", ...).
    pub(crate) exit: String,
    pub(crate) exit_ok: bool,
    /// The end of what it wrote besides its reports (NCCL warnings, errors).
    pub(crate) output_tail: String,
    /// NCCL's TUNING log (choices mode).
    pub(crate) tuning_log: Option<String>,
    /// NCCL's own topology (NCCL_TOPO_DUMP_FILE) and graphs
    /// (NCCL_GRAPH_DUMP_FILE), choices mode, written by rank 0.
    pub(crate) topo_dump: Option<String>,
    pub(crate) graph_dump: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildInit {
    pub(crate) nccl_version: String,
    pub(crate) cuda_version: String,
    pub(crate) world_size: usize,
    pub(crate) gpus: Vec<GpuInfo>,
}

const TAIL_BYTES: usize = 8 << 10;

fn push_tail(tail: &mut String, text: &str) {
    tail.push_str(text);
    tail.push('\n');
    if tail.len() > TAIL_BYTES {
        let mut cut = tail.len() - TAIL_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
}

enum Line {
    Out(String),
    End,
}

static LOG_COUNTER: AtomicUsize = AtomicUsize::new(0);

fn temp_path(what: &str) -> PathBuf {
    let n = LOG_COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("planner-nccl-{what}-{}-{n}", std::process::id()))
}

/// Most bytes kept of one dump file or of the child's stderr (`limits::MAX_INPUT_FILE_BYTES`, as for any input
/// file); the rest is drained and dropped, so a child that writes without end cannot exhaust memory.
const MAX_CHILD_OUTPUT_BYTES: u64 = crate::limits::MAX_INPUT_FILE_BYTES;
/// Longest report line read from the child's stdout; a longer one is cut there (and is no report line).
const MAX_CHILD_LINE_BYTES: u64 = 1 << 20;

/// Read at most `MAX_CHILD_OUTPUT_BYTES` of `reader`, then drain the rest.
fn read_capped(mut reader: impl Read) -> String {
    let mut buf = Vec::new();
    let _ = (&mut reader)
        .take(MAX_CHILD_OUTPUT_BYTES)
        .read_to_end(&mut buf);
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
    String::from_utf8_lossy(&buf).into_owned()
}

fn take_file(path: &Option<PathBuf>) -> Option<String> {
    let path = path.as_ref()?;
    let text = std::fs::File::open(path).ok().map(read_capped);
    let _ = std::fs::remove_file(path);
    text.filter(|t| !t.trim().is_empty())
}

/// The next line of `reader` without its newline, at most `MAX_CHILD_LINE_BYTES` long (the rest of a longer line
/// is skipped); None at the end or on a read error.
fn next_line(reader: &mut impl BufRead) -> Option<String> {
    let mut buf = Vec::new();
    let n = reader
        .take(MAX_CHILD_LINE_BYTES)
        .read_until(b'\n', &mut buf)
        .ok()?;
    if n == 0 {
        return None;
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if n as u64 == MAX_CHILD_LINE_BYTES {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            match reader
                .take(MAX_CHILD_LINE_BYTES)
                .read_until(b'\n', &mut rest)
            {
                Ok(0) | Err(_) => break,
                Ok(_) if rest.last() == Some(&b'\n') => break,
                Ok(_) => {}
            }
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Run `spec` in a child of `exe`. `timeout` bounds the wait for each report
/// line (the first one, which includes NCCL's start-up, gets a minute more).
pub(crate) fn run_child(
    exe: &Path,
    spec: &ChildSpec,
    timeout: Duration,
    on_event: &mut dyn FnMut(&ChildEvent),
) -> Result<ChildOutcome> {
    let choices = spec.mode == ChildMode::Choices;
    let log_path = choices.then(|| temp_path("tuning.log"));
    let topo_path = choices.then(|| temp_path("topo.xml"));
    let graph_path = choices.then(|| temp_path("graph.xml"));
    let mut cmd = child_command(exe, spec)?;
    if let (Some(log), Some(topo), Some(graph)) = (&log_path, &topo_path, &graph_path) {
        cmd.env("NCCL_DEBUG_FILE", log);
        cmd.env("NCCL_TOPO_DUMP_FILE", topo);
        cmd.env("NCCL_GRAPH_DUMP_FILE", graph);
    } else if std::env::var_os("NCCL_DEBUG_FILE").is_none() {
        // NCCL's own lines must not share stdout with our reports: stdio
        // buffering could split a line of ours.
        cmd.env("NCCL_DEBUG_FILE", "/dev/stderr");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a terminal's Ctrl-C reaches planner alone, which lets the
        // child finish its current size, then stops it.
        cmd.process_group(0);
        // SAFETY: runs in the forked child before exec; prctl is async-signal-safe and touches
        // no memory of ours. It kills the child when planner dies, so no child outlives it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|e| {
        Error::runtime(format!(
            "cannot start the NCCL child {}: {e}",
            exe.display()
        ))
    })?;
    crate::measure::set_child_pid(Some(child.id()));

    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take();
    let out_thread = std::thread::spawn(move || {
        if let Some(out) = stdout {
            let mut reader = BufReader::new(out);
            while let Some(line) = next_line(&mut reader) {
                if tx.send(Line::Out(line)).is_err() {
                    return;
                }
            }
        }
        let _ = tx.send(Line::End);
    });
    let stderr = child.stderr.take();
    let err_thread = std::thread::spawn(move || stderr.map(read_capped).unwrap_or_default());

    let mut outcome = ChildOutcome::default();
    let mut other = String::new();
    let mut first = true;
    let mut since = std::time::Instant::now();
    loop {
        let wait = if first {
            timeout + Duration::from_secs(60)
        } else {
            timeout
        };
        // Short waits, so a stop request is seen while the child works on a size.
        let slice = Duration::from_millis(100).min(wait);
        let received = rx.recv_timeout(slice);
        if matches!(received, Ok(Line::Out(_))) {
            // Every line restarts the wait, as one blocking wait per line did.
            since = std::time::Instant::now();
        }
        match received {
            Ok(Line::Out(line)) => match ChildEvent::from_line(&line) {
                Some(Ok(event)) => {
                    first = false;
                    on_event(&event);
                    let size_done = matches!(event, ChildEvent::Size { .. });
                    match &event {
                        ChildEvent::Init {
                            nccl_version,
                            cuda_version,
                            world_size,
                            gpus,
                        } => {
                            outcome.init = Some(ChildInit {
                                nccl_version: nccl_version.clone(),
                                cuda_version: cuda_version.clone(),
                                world_size: *world_size,
                                gpus: gpus.clone(),
                            })
                        }
                        ChildEvent::Size { .. } => outcome.sizes.push(event),
                        ChildEvent::Fatal { message } => outcome.fatal = Some(message.clone()),
                        ChildEvent::Done => {}
                    }
                    // Stop requested: the size in progress has finished, end the child here.
                    if size_done && crate::measure::stop_requested().is_some() {
                        outcome.interrupted = true;
                        let _ = child.kill();
                        break;
                    }
                }
                Some(Err(e)) => push_tail(&mut other, &e.to_string()),
                None => push_tail(&mut other, &line),
            },
            Ok(Line::End) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if since.elapsed() < wait => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                outcome.timed_out = true;
                let _ = child.kill();
                break;
            }
        }
    }
    let status = child.wait();
    crate::measure::set_child_pid(None);
    let status = status.map_err(|e| Error::runtime(format!("waiting for the NCCL child: {e}")))?;
    let _ = out_thread.join();
    let stderr_text = err_thread.join().unwrap_or_default();
    for line in stderr_text.lines() {
        push_tail(&mut other, line);
    }
    outcome.exit = status.to_string();
    outcome.exit_ok = status.success();
    outcome.output_tail = other;
    outcome.tuning_log = take_file(&log_path);
    outcome.topo_dump = take_file(&topo_path);
    outcome.graph_dump = take_file(&graph_path);
    Ok(outcome)
}

/// Which rows a child's sizes become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowKind {
    pub(crate) backend: Backend,
    /// The pinned pair; None for NCCL's free choice.
    pub(crate) pair: Option<Pair>,
    /// NCCL's free choice with the tuner plugin (the `tuned` row).
    pub(crate) tuned: bool,
}

impl RowKind {
    /// A pinned pair of the NCCL backend.
    pub(crate) fn pinned(pair: Pair) -> RowKind {
        RowKind {
            backend: Backend::Nccl,
            pair: Some(pair),
            tuned: false,
        }
    }
    /// NCCL's free choice on `backend`, with or without the tuner plugin.
    pub(crate) fn free(backend: Backend, tuned: bool) -> RowKind {
        RowKind {
            backend,
            pair: None,
            tuned,
        }
    }
    /// The row of one size event (None for other events).
    pub(crate) fn row_of(&self, event: &ChildEvent) -> Option<Row> {
        let ChildEvent::Size {
            bytes,
            status,
            note,
            iters,
            repeats,
            times_us,
            wrong,
        } = event
        else {
            return None;
        };
        let mut row = self.row(*bytes, *status);
        row.note = note.clone();
        row.iters = *iters;
        row.repeats = *repeats;
        row.times_us = times_us.clone();
        row.wrong = *wrong;
        row.derive_stats();
        Some(row)
    }
    fn row(&self, bytes: u64, status: RowStatus) -> Row {
        let mut row = Row::empty(self.backend, self.pair, bytes, status);
        row.tuned = self.tuned;
        row
    }
}

/// Rows for `sizes` from a child's outcome: a row per reported size, and for
/// the sizes it never reported, why (none after a stop request: they were
/// never asked for).
pub(crate) fn rows_from_outcome(
    kind: RowKind,
    sizes: &[u64],
    outcome: &ChildOutcome,
    timeout: Duration,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut stop_reason: Option<String> = None;
    for &bytes in sizes {
        let reported = outcome
            .sizes
            .iter()
            .find(|e| matches!(e, ChildEvent::Size { bytes: b, .. } if *b == bytes));
        if let Some(row) = reported.and_then(|e| kind.row_of(e)) {
            rows.push(row);
            continue;
        }
        if outcome.interrupted {
            break;
        }
        match &stop_reason {
            None => {
                let why = if outcome.timed_out {
                    format!(
                        "no result within --timeout {} s: the child was killed",
                        timeout.as_secs()
                    )
                } else if let Some(f) = &outcome.fatal {
                    f.clone()
                } else {
                    let tail: Vec<&str> = outcome.output_tail.lines().rev().take(3).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!(
                        "the child ended ({}) without a result: {}",
                        outcome.exit,
                        tail.join(" | ")
                    )
                };
                let mut row = kind.row(bytes, RowStatus::Failed);
                row.note = Some(why.clone());
                rows.push(row);
                stop_reason = Some(why);
            }
            Some(_) => {
                let mut row = kind.row(bytes, RowStatus::Skipped);
                row.note = Some("not run: the child stopped at a smaller size".into());
                rows.push(row);
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algo, Proto};

    #[test]
    fn child_output_is_read_with_caps() {
        // An endless stream (a child writing without end) stops at the cap, and is drained.
        let endless = std::io::repeat(b'x').take(MAX_CHILD_OUTPUT_BYTES + 4096);
        assert_eq!(read_capped(endless).len() as u64, MAX_CHILD_OUTPUT_BYTES);
        // Lines: CRLF and LF end a line; one longer than the cap is cut there and the rest of it skipped.
        let long = "y".repeat(MAX_CHILD_LINE_BYTES as usize + 10);
        let text = format!("first\r\n{long}\nlast");
        let mut reader = std::io::BufReader::new(text.as_bytes());
        assert_eq!(next_line(&mut reader).as_deref(), Some("first"));
        assert_eq!(
            next_line(&mut reader).map(|l| l.len() as u64),
            Some(MAX_CHILD_LINE_BYTES)
        );
        assert_eq!(next_line(&mut reader).as_deref(), Some("last"));
        assert_eq!(next_line(&mut reader), None);
    }

    fn size_event(bytes: u64) -> ChildEvent {
        ChildEvent::Size {
            bytes,
            status: RowStatus::Ok,
            note: None,
            iters: 20,
            repeats: 3,
            times_us: vec![3.0, 1.0, 2.0],
            wrong: Some(0),
        }
    }

    #[test]
    fn unreported_sizes_say_why() {
        let pair = RowKind::pinned(Pair::new(Algo::Ring, Proto::Ll));
        let outcome = ChildOutcome {
            sizes: vec![size_event(8), size_event(16)],
            timed_out: true,
            ..Default::default()
        };
        let rows = rows_from_outcome(pair, &[8, 16, 32, 64], &outcome, Duration::from_secs(30));
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].status, RowStatus::Ok);
        assert_eq!(rows[0].median_us, Some(2.0));
        assert_eq!(rows[2].status, RowStatus::Failed);
        assert!(rows[2].note.as_ref().unwrap().contains("--timeout 30 s"));
        assert_eq!(rows[3].status, RowStatus::Skipped);

        let fatal = ChildOutcome {
            fatal: Some("GPU 1: cuMemAlloc failed".into()),
            ..Default::default()
        };
        let rows = rows_from_outcome(pair, &[8], &fatal, Duration::from_secs(30));
        assert_eq!(rows[0].note.as_deref(), Some("GPU 1: cuMemAlloc failed"));
    }

    #[test]
    fn a_child_that_prints_other_things_and_dies_is_reported() {
        // /bin/sh stands in for the child: it ignores the hidden subcommand's
        // meaning, prints one report line, some noise, and fails.
        let script = format!(
            "echo 'noise from a library'; echo '{}'; echo 'last words' >&2; exit 3",
            size_event(8).to_line()
        );
        let dir = std::env::temp_dir().join(format!("planner-spawn-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("fake-child");
        std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let spec = ChildSpec {
            collective: crate::model::Coll::AllReduce,
            dtype: crate::dtype::Dtype::F32,
            sizes: vec![8, 16],
            plan: Default::default(),
            graph: false,
            mode: ChildMode::Free,
            ranks: crate::nccl::ChildRanks::Local { gpus: 2 },
            symmetric: false,
            tuner: Default::default(),
        };
        let mut seen = 0;
        let outcome = run_child(&exe, &spec, Duration::from_secs(20), &mut |_| seen += 1).unwrap();
        assert_eq!(seen, 1);
        assert!(!outcome.exit_ok);
        assert!(outcome.output_tail.contains("noise from a library"));
        assert!(outcome.output_tail.contains("last words"));
        let tuned = RowKind::free(Backend::Nccl, true);
        let rows = rows_from_outcome(tuned, &[8, 16], &outcome, Duration::from_secs(20));
        assert!(rows.iter().all(|r| r.tuned && r.pair.is_none()));
        assert_eq!(rows[0].pair_label(), "tuned");
        assert_eq!(rows[0].status, RowStatus::Ok);
        assert_eq!(rows[1].status, RowStatus::Failed);
        assert!(
            rows[1].note.as_ref().unwrap().contains("last words"),
            "{:?}",
            rows[1].note
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
