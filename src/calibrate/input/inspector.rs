//! NCCL Inspector JSONL (`ext-profiler/inspector`, v2.28.3-1; `plugins/profiler/inspector` since 2.30): one JSON
//! object per line with `header` (comm id, rank, n_ranks), `metadata` and `coll_perf` (`coll`, `coll_sn`,
//! `coll_msg_size_bytes`, `coll_exec_time_us` in whole µs). A collective's time is the slowest rank's (as
//! nccl-tests and verify take it); a size's time is the median over its collectives, using those that every rank
//! reported when there are any. Algorithm and protocol: format v4.0 has neither (its rows are NCCL's free choice,
//! "auto"); an `algo_proto` field (`Ring_ll`, the spelling of the plugin's Prometheus output) is read where present.

use super::nccl_tests::pinned_pair;
use super::{InputFormat, Measurement, Measurements, ReadOptions, Reader};
use crate::calibrate::stats::spread;
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::{Coll, Pair};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

pub(super) struct InspectorReader;

impl Reader for InspectorReader {
    fn read(&self, text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
        let mut scan = InspectorScan {
            out: Measurements::new(source, InputFormat::NcclInspector),
            records: Vec::new(),
            p2p: 0,
            other: BTreeMap::new(),
            sources: BTreeMap::new(),
            seen_hosts: HashSet::new(),
        };
        for (index, raw) in text.lines().enumerate() {
            if !raw.trim().is_empty() {
                scan.line(index + 1, raw)?;
            }
        }
        let mut records = scan.records;
        let mut out = scan.out;
        push_notes(&mut out, scan.p2p, &scan.other, &scan.sources);
        if let Some(o) = options.coll {
            records.retain(|r| r.coll == o);
        }
        let calls = calls_of(records, source)?;
        out.machine.gpu_count = calls.values().map(|c| c.n_ranks as usize).max();
        out.rows = rows_of(&calls, source);
        if let Some(p) = options.pair {
            pin_pair(&mut out.rows, p, source)?;
        }
        Ok(out)
    }
}

/// One collective of one rank.
struct InspectorRecord {
    comm: String,
    sn: u64,
    rank: u64,
    n_ranks: u64,
    coll: Coll,
    bytes: u64,
    time_us: f64,
    pair: Option<Pair>,
    line: usize,
}

/// What the lines read so far held.
struct InspectorScan {
    out: Measurements,
    records: Vec<InspectorRecord>,
    /// Point-to-point records, left out.
    p2p: usize,
    /// Records of collectives the tuner does not model, by name.
    other: BTreeMap<String, usize>,
    /// `coll_timing_source` values, counted.
    sources: BTreeMap<String, usize>,
    /// The hosts so far (`out.machine.hosts` in order).
    seen_hosts: HashSet<String>,
}

impl InspectorScan {
    /// One non-empty line: one JSON object.
    fn line(&mut self, number: usize, raw: &str) -> Result<()> {
        let source = self.out.source.as_str();
        let value: Value = serde_json::from_str(raw)
            .map_err(|e| Error::bad_input(format!("{source}:{number}: not a JSON object: {e}")))?;
        let bad = |what: &str| Error::bad_input(format!("{source}:{number}: {what}"));
        if value.get("p2p_perf").is_some() {
            self.p2p += 1;
            return Ok(());
        }
        let perf = value
            .get("coll_perf")
            .ok_or_else(|| bad("no \"coll_perf\" or \"p2p_perf\": not NCCL Inspector output"))?;
        let header = value.get("header").ok_or_else(|| bad("no \"header\""))?;
        let metadata = value.get("metadata");
        let machine = &mut self.out.machine;
        if machine.nccl_version.is_none() {
            // git_rev "v2.28.3-1" -> 2.28.3
            machine.nccl_version = metadata
                .and_then(|m| m.get("git_rev"))
                .and_then(|g| g.as_str())
                .map(|g| g.trim_start_matches('v'))
                .map(|g| g.split('-').next().unwrap_or(g).to_string());
        }
        if let Some(host) = metadata
            .and_then(|m| m.get("hostname"))
            .and_then(|h| h.as_str())
        {
            machine.add_host(&mut self.seen_hosts, host);
        }
        let name = perf
            .get("coll")
            .and_then(|c| c.as_str())
            .ok_or_else(|| bad("coll_perf has no \"coll\""))?;
        let Ok(coll) = Coll::parse(name) else {
            *self.other.entry(name.to_string()).or_default() += 1;
            return Ok(());
        };
        let record = record_of(header, perf, coll, number, &bad)?;
        if let Some(s) = perf.get("coll_timing_source").and_then(|s| s.as_str()) {
            *self.sources.entry(s.to_string()).or_default() += 1;
        }
        self.records.push(record);
        Ok(())
    }
}

/// The record of one collective line whose collective the tuner models.
fn record_of(
    header: &Value,
    perf: &Value,
    coll: Coll,
    number: usize,
    bad: &dyn Fn(&str) -> Error,
) -> Result<InspectorRecord> {
    let uint = |v: Option<&Value>, key: &str| -> Result<u64> {
        v.and_then(|x| x.as_u64())
            .ok_or_else(|| bad(&format!("no integer \"{key}\"")))
    };
    let n_ranks = uint(header.get("n_ranks"), "n_ranks")?.max(1);
    let msg = uint(perf.get("coll_msg_size_bytes"), "coll_msg_size_bytes")?;
    // AG/RS report one rank's share (inspector.cc:1363-1369 of v2.28.3-1
    // multiply it by nranks for the bandwidth); the model counts all of it.
    let bytes = if coll.is_ag_rs() {
        msg.checked_mul(n_ranks).ok_or_else(|| {
            bad(&format!(
                "coll_msg_size_bytes {msg} x n_ranks {n_ranks} overflows a byte count"
            ))
        })?
    } else {
        msg
    };
    let time_us = perf
        .get("coll_exec_time_us")
        .and_then(|t| t.as_f64())
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| bad("no non-negative \"coll_exec_time_us\""))?;
    let pair = match perf.get("algo_proto").and_then(|a| a.as_str()) {
        Some(ap) => {
            let (a, p) = ap
                .split_once('_')
                .ok_or_else(|| bad(&format!("algo_proto `{ap}` is not ALGO_PROTO")))?;
            Some(pinned_pair(Some(a), Some(p)).ok_or_else(|| {
                bad(&format!(
                    "algo_proto `{ap}` names no known algorithm/protocol"
                ))
            })?)
        }
        None => None,
    };
    Ok(InspectorRecord {
        comm: header.get("id").map(|i| i.to_string()).unwrap_or_default(),
        sn: uint(perf.get("coll_sn"), "coll_sn")?,
        rank: uint(header.get("rank"), "rank")?,
        n_ranks,
        coll,
        bytes,
        time_us,
        pair,
        line: number,
    })
}

/// What was left out, and timing sources other than the GPU kernel's.
fn push_notes(
    out: &mut Measurements,
    p2p: usize,
    other: &BTreeMap<String, usize>,
    sources: &BTreeMap<String, usize>,
) {
    if p2p > 0 {
        out.notes
            .push(format!("{p2p} point-to-point record(s) left out"));
    }
    for (name, n) in other {
        out.notes.push(format!(
            "{n} {name} record(s) left out (not a collective NCCL's tuner models)"
        ));
    }
    if sources.len() > 1 || sources.keys().any(|s| s != "kernel_gpu") {
        let list: Vec<String> = sources.iter().map(|(s, n)| format!("{s} x{n}")).collect();
        out.notes
            .push(format!("timing sources: {}", list.join(", ")));
    }
}

/// One collective (communicator, sequence number) over its ranks: the slowest rank's time.
struct Call {
    coll: Coll,
    bytes: u64,
    time_us: f64,
    /// The ranks that reported it (a hash set: one look-up per record).
    ranks: HashSet<u64>,
    n_ranks: u64,
    pair: Option<Pair>,
    line: usize,
}

/// The records merged into calls; a call whose ranks disagree on its collective or size is bad input.
/// O(n log n) in the records (an ordered map of calls, a hash set of ranks per call).
fn calls_of(records: Vec<InspectorRecord>, source: &str) -> Result<BTreeMap<(String, u64), Call>> {
    let mut calls: BTreeMap<(String, u64), Call> = BTreeMap::new();
    for r in records {
        let call = calls.entry((r.comm.clone(), r.sn)).or_insert(Call {
            coll: r.coll,
            bytes: r.bytes,
            time_us: r.time_us,
            ranks: HashSet::new(),
            n_ranks: r.n_ranks,
            pair: r.pair,
            line: r.line,
        });
        if call.bytes != r.bytes || call.coll != r.coll {
            return Err(Error::bad_input(format!(
                "{source}:{}: collective {} of communicator {} has {} {} B here but {} {} B on line {}",
                r.line, r.sn, r.comm, r.coll.nccl_name(), r.bytes, call.coll.nccl_name(), call.bytes, call.line
            )));
        }
        call.time_us = call.time_us.max(r.time_us);
        call.ranks.insert(r.rank);
        call.line = call.line.min(r.line);
    }
    Ok(calls)
}

/// Per (collective, pair, size): the median over complete calls, else over all.
fn rows_of(calls: &BTreeMap<(String, u64), Call>, source: &str) -> Vec<Measurement> {
    // (complete calls' times, partial calls' times, first line)
    type Group = (Vec<f64>, Vec<f64>, usize);
    let mut groups: BTreeMap<(Coll, Option<Pair>, u64), Group> = BTreeMap::new();
    for c in calls.values() {
        let g =
            groups
                .entry((c.coll, c.pair, c.bytes))
                .or_insert((Vec::new(), Vec::new(), usize::MAX));
        if c.ranks.len() as u64 >= c.n_ranks {
            g.0.push(c.time_us);
        } else {
            g.1.push(c.time_us);
        }
        g.2 = g.2.min(c.line);
    }
    let mut rows = Vec::new();
    for ((coll, pair, bytes), (complete, partial, line)) in groups {
        let times = if complete.is_empty() {
            partial
        } else {
            complete
        };
        let Some(median) = crate::measure::median(&times) else {
            continue;
        };
        if median <= 0.0 {
            continue;
        }
        let spread_pct = spread(&times, median).map(|s| s * 100.0);
        rows.push(Measurement {
            backend: Backend::Nccl,
            coll,
            pair,
            nccl_choice: None,
            bytes,
            time_us: median,
            repeats: Some(times.len() as u32),
            spread_pct,
            stock_us: None,
            in_place: None,
            per_iteration: None,
            source: source.to_string(),
            line,
        });
    }
    rows
}

/// `--pair` on an Inspector file: every call ran that pair.
fn pin_pair(rows: &mut [Measurement], pair: Pair, source: &str) -> Result<()> {
    for r in rows {
        match r.pair {
            Some(q) if q != pair => {
                return Err(Error::bad_input(format!(
                    "{source}:{}: --pair {pair} contradicts the file's algo_proto {q}",
                    r.line
                )))
            }
            _ => r.pair = Some(pair),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28 class 3: 100,000 Inspector lines (25,000 calls of 4 ranks on 4 hosts, 1,000 sizes) in one pass:
    /// ranks and hosts are de-duplicated through hash sets. Asserts the result, not the time.
    #[test]
    fn a_hundred_thousand_lines_are_read() {
        let mut text = String::new();
        for sn in 0..25_000u64 {
            for rank in 0..4 {
                text.push_str(&format!(
                    "{{\"header\":{{\"id\":\"0x1\",\"rank\":{rank},\"n_ranks\":4}},\
                     \"metadata\":{{\"hostname\":\"node{rank}\"}},\
                     \"coll_perf\":{{\"coll\":\"AllReduce\",\"coll_sn\":{sn},\
                     \"coll_msg_size_bytes\":{},\"coll_exec_time_us\":{}}}}}\n",
                    (sn % 1000 + 1) * 1024,
                    10 + rank
                ));
            }
        }
        let m = InspectorReader
            .read(&text, "big.jsonl", &ReadOptions::default())
            .unwrap();
        assert_eq!(m.rows.len(), 1000);
        assert_eq!(m.machine.hosts, ["node0", "node1", "node2", "node3"]);
        assert_eq!(m.machine.gpu_count, Some(4));
        // every call's slowest rank: 13 µs, 25 calls per size
        assert!(m
            .rows
            .iter()
            .all(|r| r.time_us == 13.0 && r.repeats == Some(25)));
    }
}
