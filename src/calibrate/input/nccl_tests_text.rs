//! nccl-tests text output (`all_reduce_perf` and siblings, nccl-tests 2.19.6 layout, `src/util.cu:454-525,739-790`):
//! an out-of-place and an in-place time per size; the pinned pair from the `NCCL_ALGO` / `NCCL_PROTO` "set by
//! environment" lines of an `NCCL_DEBUG=INFO` log in the same file (NCCL `src/graph/tuning.cc:421,426`) or from
//! `ReadOptions::pair`.

use super::nccl_tests::{
    coll_of_program, nccl_version_of_code, pair_of_env, resolve_coll, unmodelled_program, TestsRow,
};
use super::{InputFormat, Measurements, ReadOptions, Reader};
use crate::error::{Error, Result};
use crate::model::Coll;
use std::collections::{BTreeMap, HashSet};

pub(super) struct NcclTestsTextReader;

impl Reader for NcclTestsTextReader {
    fn read(&self, text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
        let mut scan = TextScan::new(source);
        for (index, raw) in text.lines().enumerate() {
            let line = strip_launcher_tag(raw.trim());
            if !line.is_empty() {
                scan.line(index + 1, line)?;
            }
        }
        scan.finish(options)
    }
}

/// Column names of an nccl-tests header line (`#  size  count  type  redop
/// root  time  algbw ...`), after the `#`.
pub(super) fn header_columns(line: &str) -> Option<Vec<String>> {
    let rest = line.trim().strip_prefix('#')?;
    let cols: Vec<String> = rest.split_whitespace().map(|s| s.to_string()).collect();
    if cols.len() >= 6 && cols[..5] == ["size", "count", "type", "redop", "root"] {
        Some(cols)
    } else {
        None
    }
}

/// `mpirun --tag-output` prefixes every line with `[job,rank]<stdout>:`.
pub(super) fn strip_launcher_tag(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((tag, after)) = rest.split_once(']') {
            if tag.split(',').all(|t| t.trim().parse::<u64>().is_ok()) {
                for stream in ["<stdout>:", "<stderr>:"] {
                    if let Some(body) = after.strip_prefix(stream) {
                        return body.trim();
                    }
                }
            }
        }
    }
    line
}

struct TextLayout {
    /// Tokens per half (out-of-place, in-place): 4, or 8 with `-I`.
    half: usize,
    cpu_time: bool,
}

/// One result row: its size, its out-of-place and in-place times, its line.
struct TextRow {
    bytes: u64,
    out_of_place: Option<f64>,
    in_place: Option<f64>,
    /// `-I 1`: each half's `i_min i_max i_p99 i_cv%`.
    out_of_place_iter: Option<super::IterStats>,
    in_place_iter: Option<super::IterStats>,
    line: usize,
}

/// The four per-iteration columns after a half's `#wrong` (`-I 1`: `i_min i_max i_p99 i_cv%`), where all four are
/// numbers (nccl-tests prints `N/A`-free numbers; a row of another layout has none).
fn iter_columns(tokens: &[&str], at: usize) -> Option<super::IterStats> {
    let v: Vec<f64> = tokens
        .get(at..at + 4)?
        .iter()
        .map(|t| t.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
        .collect::<Option<Vec<f64>>>()?;
    Some(super::IterStats {
        iterations: None,
        skipped_iterations: None,
        min_us: v[0],
        max_us: v[1],
        p50_us: None,
        p99_us: v[2],
        stdev_us: None,
        cv_pct: v[3],
        per_process_median_us: Vec::new(),
    })
}

/// What the lines read so far said.
struct TextScan<'t> {
    source: &'t str,
    out: Measurements,
    program_coll: Option<Coll>,
    layout: TextLayout,
    /// NCCL_ALGO / NCCL_PROTO as the log set them, with the line that did.
    env: BTreeMap<&'t str, (String, usize)>,
    rank_lines: usize,
    /// The hosts of the rank lines so far (`out.machine.hosts` in order).
    seen_hosts: HashSet<String>,
    per_process_gpus: Option<usize>,
    rows: Vec<TextRow>,
    wrong_rows: usize,
}

impl<'t> TextScan<'t> {
    fn new(source: &'t str) -> TextScan<'t> {
        TextScan {
            source,
            out: Measurements::new(source, InputFormat::NcclTestsText),
            program_coll: None,
            layout: TextLayout {
                half: 4,
                cpu_time: false,
            },
            env: BTreeMap::new(),
            rank_lines: 0,
            seen_hosts: HashSet::new(),
            per_process_gpus: None,
            rows: Vec::new(),
            wrong_rows: 0,
        }
    }

    /// One non-empty line, its launcher tag stripped.
    fn line(&mut self, number: usize, line: &'t str) -> Result<()> {
        if line.contains("NCCL INFO") || line.contains("NCCL WARN") {
            return self.log_line(number, line);
        }
        if let Some(comment) = line.strip_prefix('#') {
            return self.comment_line(number, comment.trim(), line);
        }
        self.result_line(number, line)
    }

    /// A line of NCCL's log: the pair it pins and NCCL's version.
    fn log_line(&mut self, number: usize, line: &'t str) -> Result<()> {
        let setting = crate::nccl_log::env_setting(line)
            .filter(|(name, _)| matches!(*name, "NCCL_ALGO" | "NCCL_PROTO"));
        if let Some((name, value)) = setting {
            if let Some((prev, at)) = self.env.get(name) {
                if prev != value {
                    return Err(Error::bad_input(format!(
                        "{}:{number}: {name} set to {value} here but to {prev} on line {at}",
                        self.source
                    )));
                }
            } else {
                self.env.insert(name, (value.to_string(), number));
            }
        }
        if self.out.machine.nccl_version.is_none() {
            if let Some(v) = line.split("NCCL version ").nth(1) {
                let v: String = v
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                if !v.is_empty() {
                    self.out.machine.nccl_version = Some(v);
                }
            }
        }
        Ok(())
    }

    /// A `#` line of nccl-tests: the program, the version, the thread and GPU counts, a rank, the column header.
    fn comment_line(&mut self, number: usize, comment: &str, line: &str) -> Result<()> {
        if let Some(program) = comment.strip_prefix("Collective test starting:") {
            let program = program.trim();
            match coll_of_program(program) {
                Some(c) => self.program_coll = Some(c),
                None => {
                    return Err(unmodelled_program(
                        &format!("{}:{number}", self.source),
                        program,
                    ))
                }
            }
        } else if let Some(rest) = comment.strip_prefix("nccl-tests version") {
            if let Some(code) = rest
                .split_whitespace()
                .find_map(|t| t.strip_prefix("nccl-library="))
                .and_then(|c| c.parse::<u64>().ok())
            {
                self.out.machine.nccl_version = Some(nccl_version_of_code(code));
            }
        } else if comment.starts_with("nThread") {
            self.thread_line(number, comment)?;
        } else if comment.starts_with("Rank") {
            self.rank_line(comment);
        } else if let Some(cols) = header_columns(line) {
            if cols[5] == "time" || cols[5] == "cputime" {
                self.layout.cpu_time = cols[5] == "cputime";
                let after_root = cols.len() - 5;
                let stamps = usize::from(cols.last().is_some_and(|c| c == "timestamp"));
                self.layout.half = ((after_root - stamps) / 2).max(4);
            }
        }
        Ok(())
    }

    /// `# nThread 1 nGpus 2 minBytes ...`: the GPUs of one process.
    fn thread_line(&mut self, number: usize, comment: &str) -> Result<()> {
        let get = |key: &str| {
            crate::nccl_log::word_after(comment, key).and_then(|v| v.parse::<usize>().ok())
        };
        if let (Some(t), Some(g)) = (get("nThread"), get("nGpus")) {
            // Untrusted counts: their product is checked against the rank limit, not overflowed.
            let max = crate::limits::MAX_RANKS;
            match t.checked_mul(g).filter(|n| *n <= max) {
                Some(n) => self.per_process_gpus = Some(n),
                None => {
                    return Err(Error::bad_input(format!(
                        "{}:{number}: nThread {t} x nGpus {g} is more than planner's limit of {max} ranks",
                        self.source
                    )))
                }
            }
        }
        Ok(())
    }

    /// `#  Rank  0 Group  0 Pid   1412 on         vm device  0 [0000:00:06] NVIDIA H200`
    fn rank_line(&mut self, comment: &str) {
        self.rank_lines += 1;
        let machine = &mut self.out.machine;
        if let Some((_, name)) = comment.split_once(']') {
            machine.gpus.push(name.trim().to_string());
        }
        if let Some(host) = comment.split_whitespace().skip_while(|t| *t != "on").nth(1) {
            machine.add_host(&mut self.seen_hosts, host);
        }
    }

    /// A result row (`size count type redop root time algbw busbw #wrong ...`), or noise between the rows.
    fn result_line(&mut self, number: usize, line: &str) -> Result<()> {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Ok(bytes) = tokens[0].parse::<u64>() else {
            // Launcher or application noise between the rows: not ours to judge.
            return Ok(());
        };
        let source = self.source;
        let bad = |what: &str| {
            Error::bad_input(format!(
                "{source}:{number}: malformed nccl-tests row ({what}): `{}`",
                line.chars().take(100).collect::<String>()
            ))
        };
        let half = self.layout.half;
        if tokens.len() < 5 + half {
            return Err(bad("too few columns"));
        }
        let time_at = |i: usize| -> Result<Option<f64>> {
            match tokens.get(i) {
                None => Ok(None),
                Some(t) => match t.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                    _ => Err(bad(&format!("time `{t}` is not a positive number"))),
                },
            }
        };
        let wrong_at = |i: usize| -> bool {
            tokens
                .get(i)
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(|w| w > 0.0)
        };
        let both_halves = tokens.len() >= 5 + 2 * half;
        let (out_of_place, in_place) = if both_halves {
            (time_at(5)?, time_at(5 + half)?)
        } else {
            // Trace replay prints only the in-place half.
            (None, time_at(5)?)
        };
        if both_halves && (wrong_at(8) || wrong_at(8 + half)) {
            self.wrong_rows += 1;
            return Ok(());
        }
        // With -I 1 a half is `time algbw busbw #wrong i_min i_max i_p99 i_cv%`.
        let (out_of_place_iter, in_place_iter) = if half == 8 && both_halves {
            (iter_columns(&tokens, 9), iter_columns(&tokens, 9 + half))
        } else {
            (None, None)
        };
        self.rows.push(TextRow {
            bytes,
            out_of_place,
            in_place,
            out_of_place_iter,
            in_place_iter,
            line: number,
        });
        Ok(())
    }

    /// The measurements of the whole file.
    fn finish(self, options: &ReadOptions) -> Result<Measurements> {
        let source = self.source;
        let mut out = self.out;
        if self.rows.is_empty() {
            return Err(Error::bad_input(format!(
                "{source}: nccl-tests output without result rows"
            )));
        }
        let coll = resolve_coll(self.program_coll, options, source)?;
        let algo = self.env.get("NCCL_ALGO").map(|(v, _)| v.as_str());
        let proto = self.env.get("NCCL_PROTO").map(|(v, _)| v.as_str());
        let pair = pair_of_env(algo, proto, options, source)?;
        out.machine.gpu_count = if self.rank_lines > 0 {
            Some(self.rank_lines)
        } else {
            self.per_process_gpus
        };
        if self.layout.cpu_time {
            out.notes
                .push("times are CPU times (nccl-tests -C 1), not GPU times".into());
        }
        if self.wrong_rows > 0 {
            out.notes.push(format!(
                "{} row(s) with #wrong > 0 left out",
                self.wrong_rows
            ));
        }
        for row in self.rows {
            for (time, in_place, per_iteration) in [
                (row.out_of_place, false, row.out_of_place_iter),
                (row.in_place, true, row.in_place_iter),
            ] {
                if let Some(time_us) = time {
                    let half = TestsRow {
                        coll,
                        pair,
                        bytes: row.bytes,
                        time_us,
                        in_place,
                        source,
                        line: row.line,
                        per_iteration,
                    };
                    out.rows.push(half.measurement());
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_tags_are_stripped() {
        assert_eq!(
            strip_launcher_tag("[1,0]<stdout>:  8  2 float"),
            "8  2 float"
        );
        assert_eq!(strip_launcher_tag("[1,0]<stderr>:x"), "x");
        // a NCCL log line's `[0]` is not a launcher tag
        assert_eq!(strip_launcher_tag("[0] NCCL INFO x"), "[0] NCCL INFO x");
    }

    /// Issue 28 class 3: 100,000 rank lines on as many hosts, read in one pass (the hosts are de-duplicated
    /// through a hash set, not a scan of the hosts per line). Asserts the result, not the time.
    #[test]
    fn a_hundred_thousand_rank_lines_are_read() {
        let mut text = String::from("# Collective test starting: all_reduce_perf\n");
        for rank in 0..100_000 {
            text.push_str(&format!(
                "#  Rank {rank} Group  0 Pid 1 on host{} device  0 [0000:00:06] NVIDIA H200\n",
                rank / 2
            ));
        }
        text.push_str(
            "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n",
        );
        text.push_str("   1024   256 float sum -1  10.0 0.10 0.10 0  9.0 0.11 0.11 0\n");
        let m = NcclTestsTextReader
            .read(&text, "big.txt", &ReadOptions::default())
            .unwrap();
        assert_eq!(m.machine.hosts.len(), 50_000);
        assert_eq!(m.machine.hosts[1], "host1");
        assert_eq!(m.machine.gpu_count, Some(100_000));
        assert_eq!(m.rows.len(), 2);
    }
}
