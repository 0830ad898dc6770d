//! Reader for an `NCCL_DEBUG=INFO` log (`NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING`):
//! version, environment, communicator shape, searched graphs, channel
//! counts, the init tuning table and the per-call choices. Lines from other
//! programs are ignored; an NCCL line that starts one of these records but
//! does not parse is a bad input naming the file and line.

use crate::error::{Error, Result};
use crate::model::{Algo, Coll, Proto};
use crate::search::Pattern;
use crate::topo::PathType;
use serde::Serialize;

/// One `Pattern ..., nChannels ..., bw ..., type ..., sameChannels ...` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogGraph {
    pub pattern: Pattern,
    pub cross_nic: u32,
    pub n_channels: usize,
    pub bw_intra: f64,
    pub bw_inter: f64,
    pub type_intra: PathType,
    pub type_inter: PathType,
    pub same_channels: bool,
    pub line: usize,
}

/// One cell of the init table as printed: latency and bandwidth text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCell {
    pub latency: String,
    pub bandwidth: String,
}

/// The init tuning table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogTable {
    /// `[algo][proto]`, None where the log had no block for the algorithm.
    pub max_threads: Vec<Vec<Option<i64>>>,
    /// `[func][algo][proto]`.
    pub cells: Vec<Vec<Vec<Option<LogCell>>>>,
    /// Line of the first `Algorithm` header.
    pub line: usize,
}

/// One per-call line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCall {
    pub coll: Coll,
    pub bytes: u64,
    pub algo: Algo,
    pub proto: Proto,
    pub channel_lo: usize,
    pub channel_hi: usize,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclLog {
    pub source: String,
    /// `NCCL version 2.28.9+cuda13.0` -> "2.28.9+cuda13.0".
    pub version: Option<String>,
    /// `X set by environment to Y` lines, in order (name, value, line).
    pub env: Vec<(String, String, usize)>,
    pub n_ranks: Option<usize>,
    pub n_nodes: Option<usize>,
    pub local_ranks: Option<usize>,
    /// Graph lines in the order NCCL prints them: ring, tree, then collnet chain,
    /// collnet direct, NVLS when searched.
    pub graphs: Vec<LogGraph>,
    /// `N coll channels, .. M nvls channels`: (coll, nvls, line).
    pub channels: Option<(usize, usize, usize)>,
    pub table: Option<LogTable>,
    /// `threadThresholds a/b/c | d/e/f | g | h` and its line.
    pub thread_thresholds: Option<([i64; 8], usize)>,
    pub calls: Vec<LogCall>,
}

impl NcclLog {
    /// The value of an environment variable the log reports.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, _)| v.as_str())
    }

    /// Read a log file.
    pub fn load(path: &str) -> Result<NcclLog> {
        let bytes = crate::units::read_input_bytes(path)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            Error::bad_input(format!("{path}:{line}: not text (invalid UTF-8)"))
        })?;
        NcclLog::parse(&text, path)
    }

    pub fn parse(text: &str, source: &str) -> Result<NcclLog> {
        let mut log = NcclLog {
            source: source.to_string(),
            version: None,
            env: Vec::new(),
            n_ranks: None,
            n_nodes: None,
            local_ranks: None,
            graphs: Vec::new(),
            channels: None,
            table: None,
            thread_thresholds: None,
            calls: Vec::new(),
        };
        let bad = |line: usize, what: &str| Error::bad_input(format!("{source}:{line}: {what}"));
        let mut table = TableBuilder::default();
        let mut nccl_lines = 0usize;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let Some(pos) = raw.find("NCCL INFO ") else {
                continue;
            };
            nccl_lines += 1;
            let msg = &raw[pos + "NCCL INFO ".len()..];
            let trimmed = msg.trim();
            if table.open() && !table.accepts(msg) {
                table.finish(source, line_no)?;
            }
            if let Some(v) = trimmed.strip_prefix("NCCL version ") {
                log.version = Some(v.trim().to_string());
            } else if let Some((name, value)) = env_line(trimmed) {
                log.env.push((name, value, line_no));
            } else if trimmed.starts_with("comm ") && trimmed.contains(" nRanks ") {
                let field = |key: &str| -> Result<Option<usize>> {
                    match word_after(trimmed, key) {
                        None => Ok(None),
                        Some(w) => w
                            .parse::<usize>()
                            .map(Some)
                            .map_err(|_| bad(line_no, &format!("'{key} {w}' is not a count"))),
                    }
                };
                log.n_ranks = field("nRanks")?;
                log.n_nodes = field("nNodes")?;
                log.local_ranks = field("localRanks")?;
            } else if trimmed.starts_with("Pattern ") {
                let mut g = graph_line(trimmed).map_err(|e| bad(line_no, &e))?;
                g.line = line_no;
                log.graphs.push(g);
            } else if trimmed.contains(" coll channels,") {
                let nums: Vec<usize> = trimmed
                    .split(',')
                    .filter_map(|part| part.split_whitespace().next()?.parse().ok())
                    .collect();
                if nums.len() < 3 {
                    return Err(bad(line_no, "channel counts line is cut short"));
                }
                log.channels = Some((nums[0], nums[2], line_no));
            } else if let Some(rest) = trimmed.strip_prefix("threadThresholds ") {
                let nums: Vec<i64> = rest
                    .split(['/', '|'])
                    .map(|w| w.trim())
                    .filter(|w| !w.is_empty())
                    .map(|w| w.parse::<i64>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| bad(line_no, &format!("unreadable threadThresholds '{rest}'")))?;
                let arr: [i64; 8] = nums.try_into().map_err(|_| {
                    bad(
                        line_no,
                        &format!("threadThresholds needs 8 values: '{rest}'"),
                    )
                })?;
                log.thread_thresholds = Some((arr, line_no));
            } else if msg.starts_with("  Algorithm   |") {
                table.header(msg, line_no).map_err(|e| bad(line_no, &e))?;
            } else if table.open() && table.accepts(msg) {
                table.row(msg, line_no).map_err(|e| bad(line_no, &e))?;
            } else if trimmed.contains(" Bytes -> Algo ") {
                log.calls
                    .push(call_line(trimmed, line_no).map_err(|e| bad(line_no, &e))?);
            }
        }
        let end = text.lines().count();
        if table.open() {
            table.finish(source, end)?;
        }
        if let Some(t) = table.table.take() {
            if let Some(missing) = Algo::ALL.into_iter().find(|a| !table.seen.contains(a)) {
                return Err(Error::bad_input(format!(
                    "{source}:{end}: the tuning table that starts at line {} is cut short: no {} block",
                    t.line,
                    missing.nccl_name()
                )));
            }
            log.table = Some(t);
        }
        if nccl_lines == 0 {
            return Err(Error::bad_input(format!(
                "{source}: no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log"
            )));
        }
        if log.table.is_none() && log.calls.is_empty() {
            return Err(Error::bad_input(format!(
                "{source}: no tuning table and no per-call line; run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING"
            )));
        }
        Ok(log)
    }
}

/// `NAME set by environment to VALUE` (integer params end with a period).
fn env_line(msg: &str) -> Option<(String, String)> {
    let (name, value) = msg.split_once(" set by environment to ")?;
    if !name.starts_with("NCCL_") || name.contains(' ') {
        return None;
    }
    let value = value.trim();
    let value = match value.strip_suffix('.') {
        Some(v) if crate::model::knobs::parse_c_integer(v).is_some() => v,
        _ => value,
    };
    Some((name.to_string(), value.to_string()))
}

fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next();
        }
    }
    None
}

/// `Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1`
fn graph_line(msg: &str) -> std::result::Result<LogGraph, String> {
    let field = |key: &str| -> std::result::Result<&str, String> {
        msg.split(',')
            .map(str::trim)
            .find_map(|part| part.strip_prefix(key).map(str::trim))
            .ok_or_else(|| format!("graph line without '{}': '{msg}'", key.trim()))
    };
    let int = |key: &str| -> std::result::Result<u64, String> {
        let v = field(key)?;
        v.parse::<u64>()
            .map_err(|_| format!("graph line: '{}{v}' is not a count", key))
    };
    let pair = |key: &str| -> std::result::Result<(&str, &str), String> {
        let v = field(key)?;
        v.split_once('/')
            .ok_or_else(|| format!("graph line: '{key}{v}' is not A/B"))
    };
    let (bi, be) = pair("bw ")?;
    let num = |v: &str| -> std::result::Result<f64, String> {
        v.parse::<f64>()
            .map_err(|_| format!("graph line: bandwidth '{v}' is not a number"))
    };
    let (ti, te) = pair("type ")?;
    let path = |v: &str| -> std::result::Result<PathType, String> {
        PathType::from_name(v).ok_or_else(|| format!("graph line: '{v}' is not an NCCL path type"))
    };
    Ok(LogGraph {
        pattern: Pattern::from_number(int("Pattern ")?)
            .ok_or_else(|| format!("graph line: unknown NCCL pattern number in '{msg}'"))?,
        cross_nic: int("crossNic ")? as u32,
        n_channels: int("nChannels ")? as usize,
        bw_intra: num(bi)?,
        bw_inter: num(be)?,
        type_intra: path(ti)?,
        type_inter: path(te)?,
        same_channels: int("sameChannels ")? != 0,
        line: 0,
    })
}

/// `AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}`
fn call_line(msg: &str, line: usize) -> std::result::Result<LogCall, String> {
    let err = || format!("per-call line does not parse: '{msg}'");
    let (func, rest) = msg.split_once(": ").ok_or_else(err)?;
    let coll = Coll::ALL
        .into_iter()
        .find(|c| c.nccl_name() == func.trim())
        .ok_or_else(|| format!("unknown function '{func}' in per-call line"))?;
    let mut words = rest.split_whitespace();
    let bytes = words
        .next()
        .and_then(|w| w.parse::<u64>().ok())
        .ok_or_else(err)?;
    let expect = |w: Option<&str>, want: &str| {
        if w == Some(want) {
            Ok(())
        } else {
            Err(err())
        }
    };
    expect(words.next(), "Bytes")?;
    expect(words.next(), "->")?;
    expect(words.next(), "Algo")?;
    let algo_name = words.next().ok_or_else(err)?;
    let algo = Algo::ALL
        .into_iter()
        .find(|a| a.log_name() == algo_name)
        .ok_or_else(|| format!("unknown algorithm '{algo_name}' in per-call line"))?;
    expect(words.next(), "proto")?;
    let proto_name = words.next().ok_or_else(err)?;
    let proto = Proto::ALL
        .into_iter()
        .find(|p| p.log_name() == proto_name)
        .ok_or_else(|| format!("unknown protocol '{proto_name}' in per-call line"))?;
    let range = words.next().ok_or_else(err)?;
    let inner = range
        .strip_prefix("channel{Lo..Hi}={")
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(err)?;
    let (lo, hi) = inner.split_once("..").ok_or_else(err)?;
    let channel_lo = lo.parse::<usize>().map_err(|_| err())?;
    let channel_hi = hi.parse::<usize>().map_err(|_| err())?;
    Ok(LogCall {
        coll,
        bytes,
        algo,
        proto,
        channel_lo,
        channel_hi,
        line,
    })
}

/// Assembles the init table block by block: `Algorithm`, `Protocol`,
/// `Max NThreads`, then one row per function.
#[derive(Default)]
struct TableBuilder {
    /// Algorithms of the open block, and how many function rows it has read.
    block: Option<(Vec<Algo>, usize, bool, bool, usize)>,
    table: Option<LogTable>,
    /// Algorithms whose block was read completely.
    seen: Vec<Algo>,
}

impl TableBuilder {
    fn open(&self) -> bool {
        self.block.is_some()
    }

    /// Lines that belong to an open block.
    fn accepts(&self, msg: &str) -> bool {
        msg.starts_with("  Protocol    |")
            || msg.starts_with(" Max NThreads |")
            || Coll::ALL
                .iter()
                .any(|c| msg.starts_with(&format!("{:>13} |", c.nccl_name())))
    }

    fn header(&mut self, msg: &str, line: usize) -> std::result::Result<(), String> {
        let names: Vec<&str> = msg
            .split('|')
            .skip(1)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let algos = names
            .iter()
            .map(|n| {
                Algo::ALL
                    .into_iter()
                    .find(|a| a.nccl_name() == *n)
                    .ok_or_else(|| format!("unknown algorithm '{n}' in the tuning table header"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if algos.is_empty() || algos.len() > 3 {
            return Err("tuning table header must name 1 to 3 algorithms".to_string());
        }
        if self.table.is_none() {
            self.table = Some(LogTable {
                max_threads: vec![vec![None; 3]; 7],
                cells: vec![vec![vec![None; 3]; 7]; 5],
                line,
            });
        }
        self.block = Some((algos, 0, false, false, line));
        Ok(())
    }

    fn row(&mut self, msg: &str, _line: usize) -> std::result::Result<(), String> {
        let Some((algos, rows, proto_seen, threads_seen, _)) = self.block.as_mut() else {
            return Ok(());
        };
        let table = self
            .table
            .as_mut()
            .ok_or("tuning table row before its header")?;
        let (label, rest) = msg.split_once('|').ok_or("tuning table row without '|'")?;
        let label = label.trim();
        let cells: Vec<&str> = rest
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match label {
            "Protocol" => {
                *proto_seen = true;
            }
            "Max NThreads" => {
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "Max NThreads row has {} values, expected {}",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let v = cell
                        .parse::<i64>()
                        .map_err(|_| format!("Max NThreads value '{cell}' is not a number"))?;
                    table.max_threads[algos[k / 3] as usize][k % 3] = Some(v);
                }
                *threads_seen = true;
            }
            func => {
                let coll = Coll::ALL
                    .into_iter()
                    .find(|c| c.nccl_name() == func)
                    .ok_or_else(|| format!("unknown function '{func}' in the tuning table"))?;
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "{func} row has {} cells, expected {} (a cut line?)",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let (lat, bw) = cell
                        .split_once('/')
                        .ok_or_else(|| format!("cell '{cell}' is not latency/bandwidth"))?;
                    let (lat, bw) = (lat.trim(), bw.trim());
                    if lat.parse::<f64>().is_err() || bw.parse::<f64>().is_err() {
                        return Err(format!("cell '{cell}' is not two numbers"));
                    }
                    table.cells[coll as usize][algos[k / 3] as usize][k % 3] = Some(LogCell {
                        latency: lat.to_string(),
                        bandwidth: bw.to_string(),
                    });
                }
                *rows += 1;
            }
        }
        Ok(())
    }

    /// Close the open block; a block cut short is a truncated log.
    fn finish(&mut self, source: &str, line: usize) -> Result<()> {
        if let Some((algos, rows, proto_seen, threads_seen, start)) = self.block.take() {
            if rows != 5 || !proto_seen || !threads_seen {
                return Err(Error::bad_input(format!(
                    "{source}:{line}: the tuning table block for {} that starts at line {start} is cut short ({rows} of 5 function rows)",
                    algos.iter().map(|a| a.nccl_name()).collect::<Vec<_>>().join("/")
                )));
            }
            self.seen.extend(algos);
        }
        Ok(())
    }
}
