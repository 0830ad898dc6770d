//! One NCCL log line at a time: each function reads the message of one kind of line (the text after
//! `NCCL INFO `), and the `*_in_line` functions take a whole line as the reference backend and calibrate
//! see it. The formats and their NCCL sources are listed in the module comment of `nccl_log`.

use super::{
    CallFormat, LogCall, LogGraph, LogRing, LogRingLink, LogTreeLink, PluginDecision, PluginOutcome,
};
use crate::model::{Algo, Coll, Proto};
use crate::search::{Pattern, SearchGraph};
use crate::topo::PathType;
use serde::Serialize;

/// `AllReduce: opCount 0 sendbuff ...` (NCCL_COLL): the collective (None for Send/Recv and others).
pub(super) fn coll_op_line(msg: &str) -> Option<(Option<Coll>, ())> {
    let (func, rest) = msg.split_once(": ")?;
    if !rest.starts_with("opCount ") || func.contains(' ') {
        return None;
    }
    Some((Coll::ALL.into_iter().find(|c| c.nccl_name() == func), ()))
}

/// `24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, ...`: by label.
pub(super) fn channel_counts(
    msg: &str,
    line: usize,
) -> std::result::Result<(usize, usize, usize), String> {
    let mut coll = None;
    let mut nvls = None;
    for part in msg.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(label)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else { continue };
        match (label, words.next()) {
            ("coll", Some("channels")) => coll = Some(n),
            ("nvls", Some("channels")) => nvls = Some(n),
            _ => {}
        }
    }
    match (coll, nvls) {
        (Some(c), Some(n)) => Ok((c, n, line)),
        _ => Err("channel counts line is cut short (no 'coll channels' or 'nvls channels')".into()),
    }
}

/// `NAME set by environment to VALUE` (integer params end with a period).
pub(super) fn env_line(msg: &str) -> Option<(&str, &str)> {
    // NCCL's IB plugin prints its own line for NCCL_IB_HCA (net_ib: `NCCL_IB_HCA set to mlx5_0`).
    if let Some(value) = msg.strip_prefix("NCCL_IB_HCA set to ") {
        return Some(("NCCL_IB_HCA", value.trim()));
    }
    let (name, value) = msg.split_once(" set by environment to ")?;
    if !name.starts_with("NCCL_") || name.contains(' ') {
        return None;
    }
    let value = value.trim();
    let value = match value.strip_suffix('.') {
        Some(v) if crate::model::knobs::parse_c_integer(v).is_some() => v,
        _ => value,
    };
    Some((name, value))
}

/// The word after the first word `key` of `text` (`nRanks 16` -> "16").
pub(crate) fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next();
        }
    }
    None
}

/// `Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1`
pub(super) fn graph_line(msg: &str) -> std::result::Result<LogGraph, String> {
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
    let pattern = Pattern::from_number(int("Pattern ")?)
        .ok_or_else(|| format!("graph line: unknown NCCL pattern number in '{msg}'"))?;
    let mut graph = SearchGraph::empty(0, pattern);
    graph.cross_nic = int("crossNic ")? as u32;
    graph.n_channels = int("nChannels ")? as usize;
    graph.bw_intra = num(bi)?;
    graph.bw_inter = num(be)?;
    graph.type_intra = path(ti)?;
    graph.type_inter = path(te)?;
    graph.same_channels = int("sameChannels ")? != 0;
    Ok(LogGraph {
        graph,
        line: 0,
        stream: 0,
    })
}

/// A per-call line in any of its formats (see `CallFormat`).
pub(super) fn call_line(msg: &str, line: usize) -> std::result::Result<LogCall, String> {
    let err = || format!("per-call line does not parse: '{msg}'");
    let (coll, rest) = match msg.split_once(": ") {
        Some((func, rest)) => {
            let coll = Coll::ALL
                .into_iter()
                .find(|c| c.nccl_name() == func.trim())
                .ok_or_else(|| format!("unknown function '{func}' in per-call line"))?;
            (Some(coll), rest)
        }
        None => (None, msg),
    };
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
    let algo_word = words.next().ok_or_else(err)?;
    // Names from 2.24 (`ncclAlgoToString`), indices before.
    let numeric = algo_word.parse::<usize>().ok();
    let algo = match numeric {
        Some(i) => Algo::from_index(i)
            .ok_or_else(|| format!("unknown algorithm index {i} in per-call line"))?,
        None => Algo::ALL
            .into_iter()
            .find(|a| a.log_name() == algo_word)
            .ok_or_else(|| format!("unknown algorithm '{algo_word}' in per-call line"))?,
    };
    expect(words.next(), "proto")?;
    let proto_word = words.next().ok_or_else(err)?;
    let proto = match proto_word.parse::<usize>() {
        Ok(i) => Proto::from_index(i)
            .ok_or_else(|| format!("unknown protocol index {i} in per-call line"))?,
        Err(_) => Proto::ALL
            .into_iter()
            .find(|p| p.log_name() == proto_word)
            .ok_or_else(|| format!("unknown protocol '{proto_word}' in per-call line"))?,
    };
    let next = words.next().ok_or_else(err)?;
    let (format, channels, time_us) = if next == "time" {
        let t = words.next().ok_or_else(err)?;
        t.parse::<f64>().map_err(|_| err())?;
        let format = if coll.is_some() {
            CallFormat::NamedTimed
        } else {
            CallFormat::Timed
        };
        (format, None, Some(t.to_string()))
    } else {
        let inner = next
            .strip_prefix("channel{Lo..Hi}={")
            .and_then(|r| r.strip_suffix('}'))
            .ok_or_else(err)?;
        let (lo, hi) = inner.split_once("..").ok_or_else(err)?;
        let lo = lo.parse::<usize>().map_err(|_| err())?;
        let hi = hi.parse::<usize>().map_err(|_| err())?;
        if coll.is_none() || numeric.is_some() {
            return Err(err());
        }
        (CallFormat::Named, Some((lo, hi)), None)
    };
    Ok(LogCall {
        coll,
        coll_line: None,
        format,
        bytes,
        algo,
        proto,
        channels,
        time_us,
        trace: false,
        process: String::new(),
        stream: 0,
        line,
    })
}

/// `AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)` or `... -> kept (WHY)`
/// (after `planner-tuner: `).
pub(super) fn plugin_line(rest: &str) -> std::result::Result<PluginDecision, String> {
    let err = || format!("planner-tuner decision line does not parse: 'planner-tuner: {rest}'");
    let (head, outcome) = rest.split_once(" -> ").ok_or_else(err)?;
    let words: Vec<&str> = head.split_whitespace().collect();
    let [func, bytes, "bytes", "nRanks", ranks, "nNodes", nodes] = words.as_slice() else {
        return Err(err());
    };
    let number = |w: &str| w.parse::<u64>().map_err(|_| err());
    let coll = Coll::ALL.into_iter().find(|c| c.nccl_name() == *func);
    let outcome = if let Some(why) = outcome.strip_prefix("kept (") {
        PluginOutcome::Kept(why.strip_suffix(')').ok_or_else(err)?.to_string())
    } else {
        let words: Vec<&str> = outcome.split_whitespace().collect();
        let [pair, "channels", channels, "(rule", rule] = words.as_slice() else {
            return Err(err());
        };
        let (algo, proto) = pair.split_once('/').ok_or_else(err)?;
        PluginOutcome::Steered {
            algo: Algo::parse(algo).map_err(|e| e.to_string())?,
            proto: Proto::parse(proto).map_err(|e| e.to_string())?,
            channels: match *channels {
                "-" => None,
                c => Some(c.parse::<u32>().map_err(|_| err())?),
            },
            rule: rule
                .strip_suffix(')')
                .and_then(|r| r.parse::<usize>().ok())
                .ok_or_else(err)?,
        }
    };
    Ok(PluginDecision {
        coll,
        n_bytes: number(bytes)?,
        n_ranks: number(ranks)? as usize,
        n_nodes: number(nodes)? as usize,
        outcome,
        process: String::new(),
        line: 0,
    })
}

/// `Channel 00/16 :    0   7   6 ...` (rank 0's rings); None for other `Channel` lines
/// (the connection lines `Channel 00/0 : 0[0] -> 1[1] via P2P` and the like).
pub(super) fn ring_line(msg: &str) -> std::result::Result<Option<LogRing>, String> {
    let Some(rest) = msg.strip_prefix("Channel ") else {
        return Ok(None);
    };
    if rest.contains("->") || rest.contains(" via ") || rest.contains('[') {
        return Ok(None);
    }
    let Some((head, ranks)) = rest.split_once(" :") else {
        return Ok(None);
    };
    let Some((c, n)) = head.split_once('/') else {
        return Ok(None);
    };
    let (Ok(channel), Ok(n_channels)) = (c.trim().parse::<usize>(), n.trim().parse::<usize>())
    else {
        return Ok(None);
    };
    // Long rings end with "..." (2.23+) or are cut at 20 ranks (up to 2.22).
    let ranks: Vec<i32> = ranks
        .split_whitespace()
        .map_while(|w| w.parse::<i32>().ok())
        .collect();
    if ranks.is_empty() {
        return Err(format!("ring line without ranks: '{msg}'"));
    }
    Ok(Some(LogRing {
        channel,
        n_channels,
        ranks,
        line: 0,
    }))
}

/// `a -> b -> c` as three numbers.
fn arrow3(text: &str) -> Option<[&str; 3]> {
    let parts: Vec<&str> = text.split("->").map(str::trim).collect();
    <[&str; 3]>::try_from(parts.as_slice()).ok()
}

/// `d0/d1/d2`.
fn down3(text: &str) -> Option<[i32; 3]> {
    let v: Vec<i32> = text
        .split('/')
        .map(|w| w.trim().parse::<i32>().ok())
        .collect::<Option<_>>()?;
    <[i32; 3]>::try_from(v.as_slice()).ok()
}

/// `Ring 00 : 1 -> 0 -> 1`; None for other `Ring` lines (older `Ring 00 : 3[b0] -> 0[80] via ...`).
pub(super) fn ring_link_line(msg: &str) -> std::result::Result<Option<LogRingLink>, String> {
    let Some(rest) = msg.strip_prefix("Ring ") else {
        return Ok(None);
    };
    if rest.contains('[') || rest.contains(" via ") {
        return Ok(None);
    }
    let Some((c, links)) = rest.split_once(" : ") else {
        return Ok(None);
    };
    let Ok(channel) = c.trim().parse::<usize>() else {
        return Ok(None);
    };
    let err = || format!("ring line does not parse: '{msg}'");
    let [p, r, n] = arrow3(links).ok_or_else(err)?;
    let num = |w: &str| w.parse::<i32>().map_err(|_| err());
    Ok(Some(LogRingLink {
        channel,
        prev: num(p)?,
        rank: num(r)?,
        next: num(n)?,
        line: 0,
    }))
}

/// `Tree 0 : -1 -> 0 -> 1/-1/-1` (the links across nodes).
pub(super) fn tree_line(msg: &str) -> std::result::Result<Option<LogTreeLink>, String> {
    let Some(rest) = msg.strip_prefix("Tree ") else {
        return Ok(None);
    };
    let Some((c, links)) = rest.split_once(" : ") else {
        return Ok(None);
    };
    let Ok(channel) = c.trim().parse::<usize>() else {
        return Ok(None);
    };
    let err = || format!("tree line does not parse: '{msg}'");
    let [up, r, down] = arrow3(links).ok_or_else(err)?;
    Ok(Some(LogTreeLink {
        channel,
        up: up.parse().map_err(|_| err())?,
        rank: r.parse().map_err(|_| err())?,
        down: down3(down).ok_or_else(err)?,
        across_nodes: true,
        line: 0,
    }))
}

/// `Trees [0] 1/-1/-1->0->-1 [1] ...`. NCCL cuts the line at 1023 bytes, so a last entry
/// that does not parse is dropped; older formats (`a->b->c|c->b->a`) are skipped.
pub(super) fn trees_line(msg: &str, line: usize) -> std::result::Result<Vec<LogTreeLink>, String> {
    let Some(rest) = msg.strip_prefix("Trees") else {
        return Ok(Vec::new());
    };
    if rest.contains('|') {
        return Ok(Vec::new());
    }
    let entries: Vec<&str> = rest.split('[').skip(1).collect();
    let mut out = Vec::new();
    for (k, entry) in entries.iter().enumerate() {
        let parsed = (|| {
            let (c, body) = entry.split_once(']')?;
            let [down, r, up] = arrow3(body.trim())?;
            Some(LogTreeLink {
                channel: c.trim().parse().ok()?,
                up: up.parse().ok()?,
                rank: r.parse().ok()?,
                down: down3(down)?,
                across_nodes: false,
                line,
            })
        })();
        match parsed {
            Some(t) => out.push(t),
            None if k + 1 == entries.len() => {}
            None => return Err(format!("Trees entry '[{entry}' does not parse")),
        }
    }
    Ok(out)
}

/// One `[Symmetric]` line of an NCCL log: the kernel NCCL actually ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SymmetricLogLine {
    pub coll: Coll,
    /// `count * typeSize` summed over the works of the launch, unaligned
    /// (one rank's share for AllGather/ReduceScatter).
    pub bytes: u64,
    /// NCCL's kernel name (`AllReduce_AGxLL_R`).
    pub kernel: String,
    /// Blocks launched.
    pub channels: u32,
    pub threads: u32,
    /// Calls fused into the launch.
    pub works: u32,
}

/// Read the line NCCL prints for every symmetric launch:
///
/// ```text
/// host:pid:tid [0] NCCL INFO AllReduce [Symmetric]: 1024 Bytes -> Kernel AllReduce_AGxLL_R nchannels 1 nthreads 512 nWorks 1
/// ```
///
/// Format string `"%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d
/// nthreads %d nWorks %d"` (function name, `logCount * typeSize`, kernel
/// name, channels used, `nWarps * 32`, works), `INFO(NCCL_TUNING, ...)`,
/// printed by rank 0 only, in `ncclSymmetricTaskScheduler`:
/// `src/scheduler/symmetric_sched.cc:225-226` (v2.28.3-1), `:229-230`
/// (v2.28.9-1), `:356-357` (v2.30.7-1); identical text in all three. It needs
/// `NCCL_DEBUG=INFO` and `NCCL_DEBUG_SUBSYS` including `TUNING` (the default
/// mask is INIT,BOOTSTRAP,ENV: `src/debug.cc:44` v2.28.3, `:48` v2.28.9, `:56`
/// v2.30.7). Calls that take the classic path print the usual
/// `... Bytes -> Algo ... proto ...` line instead. Prefixes (host/pid, `[dev]
/// NCCL INFO`, mpirun tags) are skipped; None for any other line.
pub fn symmetric_line(line: &str) -> Option<SymmetricLogLine> {
    const TAG: &str = " [Symmetric]: ";
    let at = line.find(TAG)?;
    let func = line[..at].split_whitespace().last()?;
    let coll = Coll::ALL.into_iter().find(|c| c.nccl_name() == func)?;
    let mut words = line[at + TAG.len()..].split_whitespace();
    let bytes = words.next()?.parse::<u64>().ok()?;
    let mut expect = |word: &str| words.next().filter(|w| *w == word).map(|_| ());
    expect("Bytes")?;
    expect("->")?;
    expect("Kernel")?;
    let kernel = words.next()?.to_string();
    let mut field = |name: &str| -> Option<u32> {
        words.next().filter(|w| *w == name)?;
        words.next()?.parse::<u32>().ok()
    };
    let channels = field("nchannels")?;
    let threads = field("nthreads")?;
    let works = field("nWorks")?;
    Some(SymmetricLogLine {
        coll,
        bytes,
        kernel,
        channels,
        threads,
        works,
    })
}

// ---------------------------------------------------------------- whole lines

/// The message of a whole line: the text after `NCCL INFO `, or the whole line (trimmed) when it has none
/// (a capture with NCCL's prefixes cut off).
fn message_of(line: &str) -> &str {
    match line.find("NCCL INFO ") {
        Some(at) => line[at + "NCCL INFO ".len()..].trim(),
        None => line.trim(),
    }
}

/// The per-call line of 2.24+ (`Func: N Bytes -> Algo RING proto LL channel{Lo..Hi}={a..b}`) in a whole line,
/// as the reference backend reads NCCL's stdout: the reader `NcclLog::parse` uses (`call_line`), kept to that
/// format and to a channel range that does not run backwards; None for any other line.
pub fn tuning_line(line: &str) -> Option<LogCall> {
    let msg = message_of(line);
    if !msg.contains(" Bytes -> Algo ") {
        return None;
    }
    let call = call_line(msg, 0).ok()?;
    match call.channels {
        Some((lo, hi)) if call.format == CallFormat::Named && lo <= hi => Some(call),
        _ => None,
    }
}

/// A decision line of planner's tuner plugin (`planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 ->
/// Ring/LL channels - (rule 3)`) in a whole line (`plugin_line`); None for any other line, the plugin's init
/// lines included.
pub fn tuner_line(line: &str) -> Option<PluginDecision> {
    const MARK: &str = "planner-tuner: ";
    let at = line.find(MARK)?;
    plugin_line(line[at + MARK.len()..].trim_end()).ok()
}

/// `NAME set by environment to VALUE` in a whole `NCCL INFO` line (`env_line`: an integer's trailing period
/// dropped).
pub fn env_setting(line: &str) -> Option<(&str, &str)> {
    let at = line.find("NCCL INFO ")?;
    env_line(line[at + "NCCL INFO ".len()..].trim())
}
