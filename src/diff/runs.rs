//! `planner diff RUN_A.json RUN_B.json`: two `planner verify` result files, e.g. before and
//! after a driver, NCCL or BIOS change. What differs on the machine first, then per
//! (backend, pair, size) the ratio B/A of the medians with the repeats' spread as the noise
//! band (`[min B / max A, max B / min A]`: every B repeat against every A repeat), flagged
//! where the whole band is above or below 1; whether the measured-best pair and NCCL's own
//! choice changed; and one verdict per size regime.

use super::size_label;
use crate::error::{Error, Result};
use crate::measure::{median, Backend, RowStatus};
use crate::model::Pair;
use crate::result_file::{Fingerprint, RunOptions, VerifyRun};
use crate::verify::Regime;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One header field of the two files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    pub field: String,
    pub a: String,
    pub(crate) b: String,
    pub same: bool,
    /// What exactly differs, where a field is a summary (the topology XML).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where the ratio of one row lies against its noise band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// The band contains 1: the repeats of A and B overlap.
    WithinNoise,
    /// Every repeat of B is slower than every repeat of A.
    Slower,
    /// Every repeat of B is faster than every repeat of A.
    Faster,
}

/// One (backend, pair, size) measured in both files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioRow {
    pub backend: Backend,
    /// None: NCCL's own choice (not pinned).
    pub pair: Option<Pair>,
    pub bytes: u64,
    pub(crate) median_a_us: f64,
    pub(crate) median_b_us: f64,
    /// B / A of the medians (> 1: B is slower).
    pub ratio: f64,
    /// min B / max A and max B / min A.
    pub ratio_lo: f64,
    pub ratio_hi: f64,
    pub flag: Flag,
    pub(crate) repeats_a: usize,
    pub(crate) repeats_b: usize,
    /// What NCCL ran, for its own choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_choice_a: Option<Pair>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_choice_b: Option<Pair>,
}

/// The fastest measured pinned pair at one size, per backend, in each file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestPair {
    pub(crate) backend: Backend,
    pub(crate) bytes: u64,
    pub(crate) best_a: Option<Pair>,
    pub(crate) best_b: Option<Pair>,
    pub(crate) changed: bool,
}

/// One backend's rows in one size regime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BackendVerdict {
    pub(crate) backend: Backend,
    pub(crate) compared: usize,
    pub(crate) slower: usize,
    pub(crate) faster: usize,
    /// Geometric mean of the ratios.
    pub(crate) geomean_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegimeVerdict {
    pub(crate) regime: Regime,
    pub(crate) label: String,
    pub(crate) backends: Vec<BackendVerdict>,
    /// Sizes where the measured-best pair changed, and where NCCL's own choice changed.
    pub(crate) best_changed: usize,
    pub nccl_choice_changed: usize,
    /// One line, e.g. `nccl: B slower (71 of 91 outside the noise band, geometric mean 1.31); native: ...`.
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    pub a: String,
    pub b: String,
    pub collective: String,
    /// Machine and versions, every field with whether it is the same.
    pub machine: Vec<FieldDiff>,
    /// The runs' options.
    pub options: Vec<FieldDiff>,
    pub rows: Vec<RatioRow>,
    pub best: Vec<BestPair>,
    /// Measured rows with no partner in the other file.
    pub only_in_a: usize,
    pub only_in_b: usize,
    pub regimes: Vec<RegimeVerdict>,
}

fn field(name: &str, a: String, b: String) -> FieldDiff {
    FieldDiff {
        field: name.to_string(),
        same: a == b,
        a,
        b,
        detail: None,
    }
}

fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "unknown".to_string())
}

/// `2x NVIDIA H200 (sm 9.0)`, grouped by model.
fn gpus_text(fp: &Fingerprint) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for g in &fp.gpus {
        let key = format!("{} (sm {})", g.name, g.compute_capability);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 += 1,
            None => groups.push((key, 1)),
        }
    }
    if groups.is_empty() {
        return "unknown".to_string();
    }
    groups
        .iter()
        .map(|(k, n)| format!("{n}x {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The link summary the file has, or the one its topology XML gives.
fn links_text(fp: &Fingerprint) -> String {
    fp.links
        .clone()
        .or_else(|| {
            fp.topology_xml
                .as_deref()
                .and_then(Fingerprint::links_from_xml)
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Attribute by attribute, where two NCCL topology XMLs differ (at most `limit` items).
pub(crate) fn xml_differences(a: &str, b: &str, limit: usize) -> Vec<String> {
    let (Ok(ra), Ok(rb)) = (crate::xml::parse(a, "A"), crate::xml::parse(b, "B")) else {
        return vec!["one of the XMLs does not parse".to_string()];
    };
    let mut out = Vec::new();
    fn walk(a: &crate::xml::XmlNode, b: &crate::xml::XmlNode, path: &str, out: &mut Vec<String>) {
        let here = if path.is_empty() {
            a.name.clone()
        } else {
            format!("{path}/{}", a.name)
        };
        if a.name != b.name {
            out.push(format!("{here}: element {} -> {}", a.name, b.name));
            return;
        }
        for (k, va) in &a.attrs {
            match b.attr(k) {
                Some(vb) if vb == va => {}
                Some(vb) => out.push(format!("{here} {k}: {va} -> {vb}")),
                None => out.push(format!("{here} {k}: {va} -> (none)")),
            }
        }
        for (k, vb) in &b.attrs {
            if a.attr(k).is_none() {
                out.push(format!("{here} {k}: (none) -> {vb}"));
            }
        }
        if a.children.len() != b.children.len() {
            out.push(format!(
                "{here}: {} -> {} child elements",
                a.children.len(),
                b.children.len()
            ));
        }
        for (ca, cb) in a.children.iter().zip(&b.children) {
            walk(ca, cb, &here, out);
        }
    }
    walk(&ra, &rb, "", &mut out);
    let more = out.len().saturating_sub(limit);
    out.truncate(limit);
    if more > 0 {
        out.push(format!("and {more} more"));
    }
    out
}

fn machine_fields(a: &Fingerprint, b: &Fingerprint) -> Vec<FieldDiff> {
    let mut hash = field(
        "topology hash",
        a.topology_hash.clone(),
        b.topology_hash.clone(),
    );
    if !hash.same {
        if let (Some(xa), Some(xb)) = (&a.topology_xml, &b.topology_xml) {
            let d = xml_differences(xa, xb, 5);
            hash.detail = Some(if d.is_empty() {
                "the XMLs differ only in layout".to_string()
            } else {
                format!("XML differs in: {}", d.join("; "))
            });
        }
    }
    vec![
        field("GPUs", gpus_text(a), gpus_text(b)),
        field("links", links_text(a), links_text(b)),
        field("driver", opt(&a.driver_version), opt(&b.driver_version)),
        field("CUDA", opt(&a.cuda_version), opt(&b.cuda_version)),
        field("NCCL", opt(&a.nccl_version), opt(&b.nccl_version)),
        hash,
        field("nodes", a.nodes.to_string(), b.nodes.to_string()),
        field(
            "ranks / processes",
            format!("{} / {}", a.world_size, a.processes),
            format!("{} / {}", b.world_size, b.processes),
        ),
        field("hosts", a.hosts.join(", "), b.hosts.join(", ")),
        field(
            "topology source",
            a.topology_source.clone(),
            b.topology_source.clone(),
        ),
    ]
}

fn option_fields(a: &VerifyRun, b: &VerifyRun) -> Vec<FieldDiff> {
    let (oa, ob) = (&a.options, &b.options);
    let sizes = |o: &RunOptions| match (o.sizes.first(), o.sizes.last()) {
        (Some(lo), Some(hi)) => format!(
            "{}, {} .. {}",
            crate::units::count(o.sizes.len(), "size"),
            size_label(*lo),
            size_label(*hi)
        ),
        _ => "none".to_string(),
    };
    let plan = |o: &RunOptions| {
        format!(
            "{} iters, {} warmup, {} repeats",
            o.plan.iters, o.plan.warmup, o.plan.repeats
        )
    };
    let backends = |o: &RunOptions| {
        o.backends
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        field(
            "collective",
            crate::measure::coll_label(oa.collective),
            crate::measure::coll_label(ob.collective),
        ),
        field("dtype", oa.dtype.to_string(), ob.dtype.to_string()),
        field("sizes", sizes(oa), sizes(ob)),
        field("pairs", oa.pairs.clone(), ob.pairs.clone()),
        field("backends", backends(oa), backends(ob)),
        field("timing", plan(oa), plan(ob)),
        field("CUDA graph", oa.graph.to_string(), ob.graph.to_string()),
        field("launch", oa.launch.clone(), ob.launch.clone()),
        field(
            "planner",
            a.planner_version.clone(),
            b.planner_version.clone(),
        ),
    ]
}

type Key = (Backend, Option<Pair>, u64);

/// The measured rows of a run: key -> (times, NCCL's choice).
fn measured(run: &VerifyRun) -> Vec<(Key, Vec<f64>, Option<Pair>)> {
    run.rows
        .iter()
        .filter(|r| r.status == RowStatus::Ok && !r.times_us.is_empty())
        .map(|r| {
            (
                (r.backend, r.pair, r.bytes),
                r.times_us.clone(),
                r.nccl_choice.map(|c| c.pair),
            )
        })
        .collect()
}

/// The fastest pinned pair (lowest median) per backend and size; the first of equals, as `min_by` keeps it.
fn fastest_pairs(m: &[(Key, Vec<f64>, Option<Pair>)]) -> BTreeMap<(Backend, u64), (Pair, f64)> {
    let mut fastest: BTreeMap<(Backend, u64), (Pair, f64)> = BTreeMap::new();
    for ((backend, pair, bytes), times, _) in m {
        let (Some(pair), Some(t)) = (*pair, median(times)) else {
            continue;
        };
        let slot = fastest.entry((*backend, *bytes)).or_insert((pair, t));
        if t.total_cmp(&slot.1) == std::cmp::Ordering::Less {
            *slot = (pair, t);
        }
    }
    fastest
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
        (lo.min(x), hi.max(x))
    })
}

/// Compare two verify result files (A, then B).
pub fn diff_runs(a: &VerifyRun, a_name: &str, b: &VerifyRun, b_name: &str) -> Result<RunDiff> {
    if a.options.collective != b.options.collective {
        return Err(Error::bad_input(format!(
            "{a_name} measured {} and {b_name} {}: nothing to compare",
            crate::measure::coll_label(a.options.collective),
            crate::measure::coll_label(b.options.collective)
        )));
    }
    let ma = measured(a);
    let mb = measured(b);
    // Look-ups by key through hash maps (the first row of a key, as a scan would find it): linear in the rows.
    let mut b_of: HashMap<&Key, (&Vec<f64>, &Option<Pair>)> = HashMap::with_capacity(mb.len());
    for (k, t, c) in &mb {
        b_of.entry(k).or_insert((t, c));
    }
    let a_keys: HashSet<&Key> = ma.iter().map(|(k, _, _)| k).collect();
    let mut rows = Vec::new();
    let mut only_in_a = 0;
    for (key, ta, ca) in &ma {
        let Some(&(tb, cb)) = b_of.get(key) else {
            only_in_a += 1;
            continue;
        };
        let (Some(med_a), Some(med_b)) = (median(ta), median(tb)) else {
            continue;
        };
        let ((lo_a, hi_a), (lo_b, hi_b)) = (min_max(ta), min_max(tb));
        if med_a <= 0.0 || lo_a <= 0.0 {
            continue;
        }
        let (ratio_lo, ratio_hi) = (lo_b / hi_a, hi_b / lo_a);
        let flag = if ratio_lo > 1.0 {
            Flag::Slower
        } else if ratio_hi < 1.0 {
            Flag::Faster
        } else {
            Flag::WithinNoise
        };
        rows.push(RatioRow {
            backend: key.0,
            pair: key.1,
            bytes: key.2,
            median_a_us: med_a,
            median_b_us: med_b,
            ratio: med_b / med_a,
            ratio_lo,
            ratio_hi,
            flag,
            repeats_a: ta.len(),
            repeats_b: tb.len(),
            nccl_choice_a: *ca,
            nccl_choice_b: *cb,
        });
    }
    let only_in_b = mb.iter().filter(|(k, _, _)| !a_keys.contains(k)).count();
    rows.sort_by_key(|r| (r.backend, r.pair.is_none(), r.pair, r.bytes));

    // The fastest pinned pair per backend and size, where both files measured the size.
    let mut best = Vec::new();
    let (fastest_a, fastest_b) = (fastest_pairs(&ma), fastest_pairs(&mb));
    let fastest = |m: &BTreeMap<(Backend, u64), (Pair, f64)>, backend: Backend, bytes: u64| {
        m.get(&(backend, bytes)).map(|&(p, _)| p)
    };
    let mut keys: Vec<(Backend, u64)> = rows
        .iter()
        .filter(|r| r.pair.is_some())
        .map(|r| (r.backend, r.bytes))
        .collect();
    keys.sort();
    keys.dedup();
    for (backend, bytes) in keys {
        let (best_a, best_b) = (
            fastest(&fastest_a, backend, bytes),
            fastest(&fastest_b, backend, bytes),
        );
        best.push(BestPair {
            backend,
            bytes,
            best_a,
            best_b,
            changed: best_a != best_b,
        });
    }

    let regimes = Regime::ALL
        .into_iter()
        .map(|regime| {
            let in_regime: Vec<&RatioRow> = rows
                .iter()
                .filter(|r| Regime::of(r.bytes) == regime)
                .collect();
            let backends: Vec<BackendVerdict> = [Backend::Nccl, Backend::Native]
                .into_iter()
                .filter_map(|backend| {
                    let mine: Vec<&&RatioRow> =
                        in_regime.iter().filter(|r| r.backend == backend).collect();
                    (!mine.is_empty()).then(|| BackendVerdict {
                        backend,
                        compared: mine.len(),
                        slower: mine.iter().filter(|r| r.flag == Flag::Slower).count(),
                        faster: mine.iter().filter(|r| r.flag == Flag::Faster).count(),
                        geomean_ratio: (mine.iter().map(|r| r.ratio.ln()).sum::<f64>()
                            / mine.len() as f64)
                            .exp(),
                    })
                })
                .collect();
            let best_changed = best
                .iter()
                .filter(|b| b.changed && Regime::of(b.bytes) == regime)
                .count();
            let nccl_choice_changed = in_regime
                .iter()
                .filter(|r| r.pair.is_none() && r.nccl_choice_a != r.nccl_choice_b)
                .count();
            let verdict = verdict(&backends, best_changed, nccl_choice_changed);
            RegimeVerdict {
                regime,
                label: regime.label().to_string(),
                backends,
                best_changed,
                nccl_choice_changed,
                verdict,
            }
        })
        .collect();
    Ok(RunDiff {
        a: a_name.to_string(),
        b: b_name.to_string(),
        collective: crate::measure::coll_label(a.options.collective),
        machine: machine_fields(&a.machine, &b.machine),
        options: option_fields(a, b),
        rows,
        best,
        only_in_a,
        only_in_b,
        regimes,
    })
}

/// `B slower` where every flagged row is slower, `mostly slower` where they outnumber the
/// faster ones three to one, `mixed` otherwise.
fn backend_verdict(v: &BackendVerdict) -> String {
    let outside = format!(
        "{} slower, {} faster of {} outside the noise band, geometric mean ratio {:.3}",
        v.slower, v.faster, v.compared, v.geomean_ratio
    );
    let word = match (v.slower, v.faster) {
        (0, 0) => {
            return format!(
                "{}: no change beyond the repeats' spread (geometric mean ratio {:.3})",
                v.backend.name(),
                v.geomean_ratio
            )
        }
        (_, 0) => "B slower",
        (0, _) => "B faster",
        (s, f) if s >= 3 * f => "mostly slower",
        (s, f) if f >= 3 * s => "mostly faster",
        _ => "mixed",
    };
    format!("{}: {word} ({outside})", v.backend.name())
}

fn verdict(backends: &[BackendVerdict], best_changed: usize, choice_changed: usize) -> String {
    if backends.is_empty() {
        return "nothing measured in both".to_string();
    }
    let mut text = backends
        .iter()
        .map(backend_verdict)
        .collect::<Vec<_>>()
        .join("; ");
    if best_changed > 0 {
        text.push_str(&format!(
            "; measured-best pair changed at {}",
            crate::units::count(best_changed, "size")
        ));
    }
    if choice_changed > 0 {
        text.push_str(&format!(
            "; NCCL's own choice changed at {}",
            crate::units::count(choice_changed, "size")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_differences_name_the_attribute() {
        let a =
            r#"<system version="1"><cpu host_hash="0x1" numaid="0"><gpu dev="0"/></cpu></system>"#;
        let b = r#"<system version="1"><cpu host_hash="0x2" numaid="0"><gpu dev="0"/><gpu dev="1"/></cpu></system>"#;
        assert_eq!(
            xml_differences(a, b, 5),
            [
                "system/cpu host_hash: 0x1 -> 0x2",
                "system/cpu: 1 -> 2 child elements"
            ]
        );
        assert!(xml_differences(a, a, 5).is_empty());
    }

    #[test]
    fn verdicts() {
        let v = |slower, faster| BackendVerdict {
            backend: Backend::Nccl,
            compared: 10,
            slower,
            faster,
            geomean_ratio: 1.1,
        };
        assert_eq!(
            verdict(&[v(0, 0)], 0, 0),
            "nccl: no change beyond the repeats' spread (geometric mean ratio 1.100)"
        );
        assert_eq!(
            verdict(&[v(3, 0)], 1, 0),
            "nccl: B slower (3 slower, 0 faster of 10 outside the noise band, geometric mean ratio 1.100); measured-best pair changed at 1 size"
        );
        assert!(verdict(&[v(6, 2)], 0, 0).starts_with("nccl: mostly slower"));
        assert!(verdict(&[v(2, 2)], 0, 0).starts_with("nccl: mixed"));
        assert_eq!(verdict(&[], 0, 0), "nothing measured in both");
    }
}
