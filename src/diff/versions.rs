//! `planner diff --nccl-version A --against B`: NCCL's pick and predicted time on one machine
//! under two release families, band by band, and for every band that changed the constants
//! and rules that caused it.
//!
//! The causes come from the tables' `changes_from_previous` chain between A and B. Each step
//! of the chain (one family to the next) is re-evaluated with one change at a time: applied
//! alone to the older family's table ("alone on 2.27") and removed alone from the newer
//! one's ("on 2.28 without -> with it"). A change is named when either flips the pick or moves the
//! pick's time by more than 1 % at a size of the band. Rules are switched by the table's
//! family, so the rule changes of one step are evaluated together and named where they
//! touch the algorithms and protocols of the band's picks.

use super::size_label;
use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::rules::{self, Rule, RuleInfo, RULES};
use crate::model::select::Call;
use crate::model::table::{self, TuningTable};
use crate::model::{Algo, Coll, Model, Pair, Proto};
use crate::nccl_env::NcclEnv;
use crate::pipeline::{self, Source};
use crate::search::Graphs;
use crate::topo::Cluster;
use serde::Serialize;
use serde_json::Value;

/// What to compare.
#[derive(Debug, Clone)]
pub struct VersionDiffOptions {
    /// NCCL version or family A (`2.22`, `2.22.3`).
    pub(crate) from: String,
    /// NCCL version or family B.
    pub(crate) against: String,
    pub(crate) source: Source,
    pub(crate) graph_file: Option<String>,
    pub(crate) colls: Vec<Coll>,
    /// Sweep sizes, ascending.
    pub(crate) sizes: Vec<u64>,
    pub(crate) env: NcclEnv,
    pub(crate) nvls: NvlsFlag,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FamilyInfo {
    pub(crate) family: String,
    /// The tag the table was checked against.
    pub(crate) tag: String,
}

/// One constant or rule that differs between two neighbouring families, in the A -> B direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChangeText {
    /// A constant's dotted path (`hw_latencies.NET.Tree`) or `rule:NAME`.
    pub(crate) what: String,
    pub(crate) from: Value,
    pub(crate) to: Value,
    /// `tag file:line` of the newer family.
    pub(crate) source: String,
    /// The change as people read it, e.g. `hw_latencies.NVLINK.Tree[Simple] 28 -> 4 µs`.
    pub(crate) text: String,
}

/// The changes between two neighbouring families of the chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Step {
    pub(crate) from_family: String,
    pub(crate) to_family: String,
    pub(crate) changes: Vec<ChangeText>,
}

/// The pick and its time at one size under A and B; busbw in nccl-tests' convention
/// (algbw x 2(n-1)/n for AllReduce ...), which does not change between families.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PointDiff {
    pub(crate) bytes: u64,
    pub(crate) time_a_us: f64,
    pub(crate) time_b_us: f64,
    pub(crate) busbw_a_gbs: f64,
    pub(crate) busbw_b_gbs: f64,
}

/// A change that moves the band: which one, in which step, and what it does there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// The family that introduced the change (the newer family of its step).
    pub(crate) family: String,
    pub(crate) change: ChangeText,
    /// Rules of the same step evaluated together with this one (NCCL switches rules by family).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) together_with: Vec<String>,
    /// What the change does at the band's sizes, e.g. `alone on 2.27: Ring/LL -> NVLS/Simple at
    /// 1144840 B (1.1 MiB)` or `on 2.28 without -> with it: time -1.8 % at 64 MiB`.
    pub(crate) effect: String,
    /// It flips the pick (else it moves the pick's time).
    pub(crate) flips: bool,
    /// The time change of the pick, %, where it does not flip it.
    pub(crate) time_change_pct: f64,
}

/// Sizes with the same pick under A and the same pick under B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BandDiff {
    pub(crate) from_bytes: u64,
    pub(crate) to_bytes: u64,
    pub(crate) pick_a: Pair,
    pub(crate) pick_b: Pair,
    pub(crate) pick_changed: bool,
    /// The largest change of the predicted time B vs A in the band, %, and where.
    pub(crate) time_change_pct: f64,
    pub(crate) time_change_at_bytes: u64,
    /// The pick changed or the time moved by more than 1 %.
    pub(crate) changed: bool,
    /// The band's first and last size and the sweep sizes in between.
    pub(crate) points: Vec<PointDiff>,
    pub(crate) causes: Vec<Cause>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CollDiff {
    pub(crate) coll: Coll,
    pub(crate) bands: Vec<BandDiff>,
    /// Sweep sizes too small for the collective.
    pub(crate) skipped: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionDiff {
    pub(crate) a: FamilyInfo,
    pub(crate) b: FamilyInfo,
    /// Where the topology came from and its size.
    pub(crate) machine: String,
    pub(crate) n_ranks: usize,
    pub(crate) n_nodes: usize,
    /// The chain of families from A to B and what each step changes.
    pub(crate) steps: Vec<Step>,
    pub(crate) notes: Vec<String>,
    pub(crate) collectives: Vec<CollDiff>,
}

/// A relative change above this (1 %) counts.
pub(crate) const TIME_THRESHOLD_PCT: f64 = 1.0;

/// The model on the machine's graphs for any table.
struct Machine<'a> {
    cluster: &'a Cluster,
    graphs: &'a Graphs,
    channels: usize,
    env: &'a NcclEnv,
    nvls: NvlsFlag,
}

impl Machine<'_> {
    fn model(&self, table: TuningTable) -> Result<Model> {
        pipeline::model_from_graphs(
            self.cluster,
            self.graphs,
            self.channels,
            table,
            self.env.clone(),
            self.nvls,
        )
    }
}

/// NCCL's pick at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Eval {
    pair: Pair,
    time_us: f64,
    busbw_gbs: f64,
}

fn eval(m: &Model, coll: Coll, size: u64) -> Result<Option<Eval>> {
    let Ok(call) = Call::new(coll, size, m.input.n_ranks, 1) else {
        return Ok(None);
    };
    let ch = m.choose(coll, call.model_bytes, m.num_pipe_ops(1))?;
    let time_us = ch.time_us as f64;
    let algbw = if time_us > 0.0 {
        call.model_bytes as f64 / (time_us * 1000.0)
    } else {
        0.0
    };
    // nccl-tests' bus factor: the same for every family, so busbw compares across versions.
    Ok(Some(Eval {
        pair: Pair::new(ch.algo, ch.proto),
        time_us,
        busbw_gbs: algbw * coll.nccl_tests_bus_factor(m.input.n_ranks),
    }))
}

fn pct(from: f64, to: f64) -> f64 {
    if from > 0.0 {
        (to - from) / from * 100.0
    } else {
        0.0
    }
}

/// The table of `family` with constants (dotted paths) set to new values.
fn table_with(family: &str, values: &[(&str, &Value)]) -> Result<TuningTable> {
    let text = table::EMBEDDED
        .iter()
        .find(|(f, _)| *f == family)
        .map(|(_, t)| *t)
        .ok_or_else(|| Error::runtime(format!("no built-in table {family}")))?;
    let mut root: Value = serde_json::from_str(text)
        .map_err(|e| Error::runtime(format!("built-in nccl-{family}.json: {e}")))?;
    for (what, value) in values {
        let mut node = &mut root;
        for key in what.split('.') {
            node = node.get_mut(key).ok_or_else(|| {
                Error::runtime(format!(
                    "built-in nccl-{family}.json has no '{what}' (named in changes_from_previous)"
                ))
            })?;
        }
        *node = (*value).clone();
    }
    let names: Vec<&str> = values.iter().map(|(w, _)| *w).collect();
    TuningTable::parse(
        &root.to_string(),
        &format!(
            "built-in nccl-{family}.json with {} changed",
            names.join(", ")
        ),
    )
}

/// Constants that only make sense together: the three tree correction rows must keep one length.
fn group_key(what: &str) -> &str {
    if what.starts_with("tree_correction_factor.") {
        "tree_correction_factor"
    } else {
        what
    }
}

/// The table of `family` with the rules of `rules_of` (its family number).
fn table_with_rules_of(family: &str, rules_of: &str) -> Result<TuningTable> {
    let mut t = table::builtin(family)?;
    t.version = rules::parse_family(rules_of)
        .ok_or_else(|| Error::runtime(format!("bad family {rules_of}")))?;
    Ok(t)
}

/// Element labels of a constant's array, by its path.
fn element_labels(what: &str, len: usize) -> Vec<String> {
    if what.starts_with("base_latencies.") || what.starts_with("hw_latencies.") {
        ["LL", "LL128", "Simple"].map(String::from).to_vec()
    } else if what.starts_with("ll_max_bws.") || what.starts_with("per_channel_max_") {
        ["1 node", "2 nodes", "3+ nodes"].map(String::from).to_vec()
    } else if what.starts_with("tree_correction_factor.") {
        (0..len)
            .map(|i| crate::units::format_size(64u64 << i))
            .collect()
    } else {
        (0..len).map(|i| i.to_string()).collect()
    }
}

fn unit_of(what: &str) -> &'static str {
    if what.contains("latenc") || what.ends_with("_us") {
        " µs"
    } else if what.contains("bws.") || what == "threads.pci_bw" {
        " GB/s"
    } else {
        ""
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `hw_latencies.NVLINK.Tree[Simple] 28 -> 4 µs`, `rule pat off -> on`.
pub(crate) fn change_text(what: &str, from: &Value, to: &Value) -> String {
    if let Some(name) = what.strip_prefix("rule:") {
        return format!("rule {name} {} -> {}", value_text(from), value_text(to));
    }
    let unit = unit_of(what);
    match (from.as_array(), to.as_array()) {
        (Some(a), Some(b)) if a.len() == b.len() => {
            let labels = element_labels(what, a.len());
            let parts: Vec<String> = a
                .iter()
                .zip(b)
                .enumerate()
                .filter(|(_, (x, y))| x != y)
                .map(|(i, (x, y))| format!("{what}[{}] {x} -> {y}{unit}", labels[i]))
                .collect();
            parts.join(", ")
        }
        (Some(a), Some(b)) => format!("{what}: {} values -> {} values", a.len(), b.len()),
        _ => format!("{what} {} -> {}{unit}", value_text(from), value_text(to)),
    }
}

/// The chain of built-in families from `a` to `b`, both included.
fn chain(a: &str, b: &str) -> Result<Vec<&'static str>> {
    let fams = table::families();
    let pos = |f: &str| {
        fams.iter()
            .position(|x| *x == f)
            .ok_or_else(|| Error::runtime(format!("no built-in table {f}")))
    };
    let (i, j) = (pos(a)?, pos(b)?);
    Ok(if i <= j {
        fams[i..=j].to_vec()
    } else {
        fams[j..=i].iter().rev().copied().collect()
    })
}

/// The changes of the step `x -> y` (neighbours), in that direction.
fn step_changes(x: &str, y: &str) -> Result<Vec<ChangeText>> {
    let forward = rules::parse_family(y) > rules::parse_family(x);
    let newer = table::builtin(if forward { y } else { x })?;
    Ok(newer
        .changes_from_previous
        .iter()
        .map(|c| {
            let (from, to) = if forward {
                (c.from.clone(), c.to.clone())
            } else {
                (c.to.clone(), c.from.clone())
            };
            ChangeText {
                text: change_text(&c.what, &from, &to),
                what: c.what.clone(),
                from,
                to,
                source: c.source.clone(),
            }
        })
        .collect())
}

/// Which algorithms, protocols and collectives a rule's code can touch (empty = any).
fn rule_scope(rule: Rule) -> (&'static [Algo], Option<Proto>, &'static [Coll]) {
    use Algo::*;
    const AG_RS: &[Coll] = &[Coll::AllGather, Coll::ReduceScatter];
    const NOT_AR: &[Coll] = &[
        Coll::Broadcast,
        Coll::Reduce,
        Coll::AllGather,
        Coll::ReduceScatter,
    ];
    match rule {
        Rule::Pat | Rule::PatLatencyHardCoded | Rule::PatNeedsSm60 => (&[Pat], None, &[]),
        Rule::NvlsAllGatherReduceScatter
        | Rule::NvlsAllGatherReduceScatterBw2_27
        | Rule::NvlsAllGatherReduceScatterOneNodeOnly
        | Rule::NvlsAllGatherReduceScatterRankLimit => (&[Nvls], None, AG_RS),
        Rule::NvlsLocalRankLimitOutsideAllReduce => (&[Nvls, NvlsTree], None, NOT_AR),
        Rule::CollnetDirectAllGatherReduceScatter
        | Rule::CollnetDirectAllGatherReduceScatterBw2_20 => (&[CollNetDirect], None, AG_RS),
        Rule::CollnetAllGatherReduceScatterHeads => (&[CollNetDirect, Nvls], None, AG_RS),
        Rule::RingLlQuarterThird => (&[Ring], Some(Proto::Ll), &[]),
        Rule::RingLl128OnePerNodePenalty => (&[Ring], Some(Proto::Ll128), &[]),
        Rule::RingInterStepsTwiceNodes => (&[Ring], None, &[Coll::AllReduce]),
        Rule::NvlsModel2_18
        | Rule::NvlsMinIntraInter
        | Rule::NvlsEfficiency
        | Rule::NvlsMultiNodeChannelsMin
        | Rule::NvlsTreeCorrectionBlackwellX86 => (&[Nvls, NvlsTree], None, &[]),
        Rule::AlgbwSkipNonRingAllGatherReduceScatter => (&[Nvls, Pat, CollNetDirect], None, AG_RS),
        Rule::TreePatternMaxOverRanks | Rule::TreeAllThreads => (&[Tree], None, &[]),
        Rule::CollnetChainNeedsChainSupport | Rule::CollnetChainLocalRanksMask => {
            (&[CollNetChain], None, &[])
        }
        Rule::CollnetDirectLocalRanksMask => (&[CollNetDirect], None, &[]),
        Rule::Ll128Sm708090Only
        | Rule::Ll128Sm70To120List
        | Rule::Ll128C2cKnob
        | Rule::Ll128MixedGenerationsFromSm90 => (&[], Some(Proto::Ll128), &[]),
        _ => (&[], None, &[]),
    }
}

/// Rules whose code runs only across nodes.
fn multi_node_only(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::NvlsMultiNodeChannelsMin
            | Rule::RingInterStepsTwiceNodes
            | Rule::InterLatencyTreeRowOnePerNode
            | Rule::NvlsAllGatherReduceScatterOneNodeOnly
            | Rule::CollnetAllGatherReduceScatterHeads
    )
}

/// Rules that only act on lists the user gave (`NCCL_ALGO`, `NCCL_PROTO`).
fn user_lists_only(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::PerFunctionAlgoProtoLists
            | Rule::RingNeverDisabledOutsideAllReduce
            | Rule::CollnetOnlyAlgoIgnored
    )
}

/// A rule whose scope names algorithms or a protocol (not every cell).
fn specific(rule: Rule) -> bool {
    let (algos, proto, _) = rule_scope(rule);
    !algos.is_empty() || proto.is_some()
}

fn rule_touches(info: &RuleInfo, coll: Coll, cells: &[Pair], n_nodes: usize) -> bool {
    let (algos, proto, colls) = rule_scope(info.rule);
    (n_nodes > 1 || !multi_node_only(info.rule))
        && (colls.is_empty() || colls.contains(&coll))
        && cells.iter().any(|p| {
            (algos.is_empty() || p.algo.nccl().is_some_and(|a| algos.contains(&a)))
                && proto.is_none_or(|q| q == p.proto)
        })
}

/// One re-evaluation of a step: the change(s) (one constant, the constants that only go
/// together, or all rule changes of the step), the older family's model with them applied
/// (`forward`), and the newer family's model with them reverted (`backward`).
struct Variant {
    changes: Vec<ChangeText>,
    forward: Model,
    backward: Model,
}

struct StepModels {
    x: &'static str,
    y: &'static str,
    base_x: Model,
    base_y: Model,
    constants: Vec<Variant>,
    rules: Option<Variant>,
}

fn build_step(m: &Machine, x: &'static str, y: &'static str) -> Result<StepModels> {
    let changes = step_changes(x, y)?;
    let mut groups: Vec<Vec<ChangeText>> = Vec::new();
    let mut rule_changes = Vec::new();
    for c in changes {
        if c.what.starts_with("rule:") {
            rule_changes.push(c);
            continue;
        }
        match groups
            .iter_mut()
            .find(|g| group_key(&g[0].what) == group_key(&c.what))
        {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    let mut constants = Vec::new();
    for g in groups {
        let to: Vec<(&str, &Value)> = g.iter().map(|c| (c.what.as_str(), &c.to)).collect();
        let from: Vec<(&str, &Value)> = g.iter().map(|c| (c.what.as_str(), &c.from)).collect();
        let forward = m.model(table_with(x, &to)?)?;
        let backward = m.model(table_with(y, &from)?)?;
        constants.push(Variant {
            changes: g,
            forward,
            backward,
        });
    }
    let rules = if rule_changes.is_empty() {
        None
    } else {
        Some(Variant {
            changes: rule_changes,
            forward: m.model(table_with_rules_of(x, y)?)?,
            backward: m.model(table_with_rules_of(y, x)?)?,
        })
    };
    Ok(StepModels {
        x,
        y,
        base_x: m.model(table::builtin(x)?)?,
        base_y: m.model(table::builtin(y)?)?,
        constants,
        rules,
    })
}

/// What going from `before` to `after` does at one size: a flip, or the pick's time change.
#[derive(Debug, Clone, PartialEq)]
struct Effect {
    flip: Option<(Pair, Pair)>,
    pct: f64,
    size: u64,
}

impl Effect {
    fn matters(&self) -> bool {
        self.flip.is_some() || self.pct.abs() > TIME_THRESHOLD_PCT
    }
    /// Flips first, then the larger time change.
    fn stronger_than(&self, other: &Effect) -> bool {
        match (self.flip.is_some(), other.flip.is_some()) {
            (true, false) => true,
            (false, true) => false,
            _ => self.pct.abs() > other.pct.abs(),
        }
    }
}

fn effect(before: &Model, after: &Model, coll: Coll, sizes: &[u64]) -> Result<Option<Effect>> {
    let mut best: Option<Effect> = None;
    for &s in sizes {
        let (Some(a), Some(b)) = (eval(before, coll, s)?, eval(after, coll, s)?) else {
            continue;
        };
        let e = Effect {
            flip: (a.pair != b.pair).then_some((a.pair, b.pair)),
            pct: pct(a.time_us, b.time_us),
            size: s,
        };
        if best.as_ref().is_none_or(|b| e.stronger_than(b)) {
            best = Some(e);
        }
    }
    Ok(best)
}

fn effect_text(how: &str, e: &Effect) -> String {
    match e.flip {
        Some((a, b)) => format!("{how}: {a} -> {b} at {}", size_label(e.size)),
        None => format!("{how}: time {:+.1} % at {}", e.pct, size_label(e.size)),
    }
}

/// The causes of one changed band, step by step along the chain.
fn causes_of(
    steps: &[StepModels],
    coll: Coll,
    band: &BandDiff,
    sizes: &[u64],
) -> Result<Vec<Cause>> {
    let mut out = Vec::new();
    for step in steps {
        // Only steps that change something at these sizes.
        let Some(own) = effect(&step.base_x, &step.base_y, coll, sizes)? else {
            continue;
        };
        if own.flip.is_none() && own.pct.abs() < 1e-3 {
            continue;
        }
        let strongest = |v: &Variant| -> Result<Option<(Effect, String)>> {
            let fwd = effect(&step.base_x, &v.forward, coll, sizes)?;
            let bwd = effect(&v.backward, &step.base_y, coll, sizes)?;
            let fwd = fwd.map(|e| {
                let t = effect_text(&format!("alone on {}", step.x), &e);
                (e, t)
            });
            let bwd = bwd.map(|e| {
                // In the A -> B direction: the newer family without the change -> with it.
                let t = effect_text(&format!("on {} without -> with it", step.y), &e);
                (e, t)
            });
            Ok(match (fwd, bwd) {
                (Some(f), Some(b)) => Some(if b.0.stronger_than(&f.0) { b } else { f }),
                (f, b) => f.or(b),
            })
        };
        let before = out.len();
        for v in &step.constants {
            if let Some((e, text)) = strongest(v)?.filter(|(e, _)| e.matters()) {
                for c in &v.changes {
                    out.push(Cause {
                        family: newer(step.x, step.y).to_string(),
                        change: c.clone(),
                        together_with: v
                            .changes
                            .iter()
                            .filter(|o| o.what != c.what)
                            .map(|o| o.what.clone())
                            .collect(),
                        effect: text.clone(),
                        flips: e.flip.is_some(),
                        time_change_pct: if e.flip.is_some() { 0.0 } else { e.pct },
                    });
                }
            }
        }
        if let Some(v) = &step.rules {
            if let Some((e, text)) = strongest(v)?.filter(|(e, _)| e.matters()) {
                let mut cells = vec![band.pick_a, band.pick_b];
                if let Some((p, q)) = e.flip {
                    cells.extend([p, q]);
                }
                // The rules whose code can touch these cells: those naming the cells'
                // algorithms or protocols first, then rules of every cell, else all of them.
                let user_lists = step.base_x.env.user_lists_set();
                let in_scope: Vec<(&ChangeText, &RuleInfo)> = v
                    .changes
                    .iter()
                    .filter_map(|c| rule_info(&c.what).map(|i| (c, i)))
                    .filter(|(_, i)| {
                        i.modelled
                            && (user_lists || !user_lists_only(i.rule))
                            && rule_touches(i, coll, &cells, step.base_x.input.n_nodes)
                    })
                    .collect();
                let specific_ones: Vec<&ChangeText> = in_scope
                    .iter()
                    .filter(|(_, i)| specific(i.rule))
                    .map(|(c, _)| *c)
                    .collect();
                let named: Vec<&ChangeText> = if !specific_ones.is_empty() {
                    specific_ones
                } else if !in_scope.is_empty() {
                    in_scope.iter().map(|(c, _)| *c).collect()
                } else {
                    v.changes.iter().collect()
                };
                let names: Vec<String> = named
                    .iter()
                    .map(|c| c.what.trim_start_matches("rule:").to_string())
                    .collect();
                for c in &named {
                    let own = c.what.trim_start_matches("rule:");
                    out.push(Cause {
                        family: newer(step.x, step.y).to_string(),
                        change: (*c).clone(),
                        together_with: names.iter().filter(|n| *n != own).cloned().collect(),
                        effect: text.clone(),
                        flips: e.flip.is_some(),
                        time_change_pct: if e.flip.is_some() { 0.0 } else { e.pct },
                    });
                }
            }
        }
        if out.len() == before && own.matters() {
            // No single change (nor the rules together) reaches the threshold; their sum does.
            out.push(Cause {
                family: newer(step.x, step.y).to_string(),
                change: ChangeText {
                    what: format!("{} -> {}", step.x, step.y),
                    from: Value::String(step.x.to_string()),
                    to: Value::String(step.y.to_string()),
                    source: String::new(),
                    text: format!("the changes of {} together", newer(step.x, step.y)),
                },
                together_with: Vec::new(),
                effect: effect_text(&format!("{} -> {}", step.x, step.y), &own),
                flips: own.flip.is_some(),
                time_change_pct: if own.flip.is_some() { 0.0 } else { own.pct },
            });
        }
    }
    Ok(out)
}

fn newer<'a>(x: &'a str, y: &'a str) -> &'a str {
    if rules::parse_family(y) > rules::parse_family(x) {
        y
    } else {
        x
    }
}

fn rule_info(what: &str) -> Option<&'static RuleInfo> {
    let name = what.strip_prefix("rule:")?;
    RULES.iter().find(|r| r.name == name)
}

/// Up to `n` sizes of `points`: the first, the last and evenly spaced ones between.
fn sample(points: &[u64], n: usize) -> Vec<u64> {
    if points.len() <= n {
        return points.to_vec();
    }
    let mut out: Vec<u64> = (0..n)
        .map(|k| points[k * (points.len() - 1) / (n - 1)])
        .collect();
    out.dedup();
    out
}

/// The bands of one collective: the sweep's crossovers under A and B cut the size range
/// into pieces with one pick under each.
fn coll_diff(
    ma: &Model,
    mb: &Model,
    steps: &[StepModels],
    coll: Coll,
    sizes: &[u64],
) -> Result<CollDiff> {
    let sa = ma.sweep(coll, sizes, 1)?;
    let sb = mb.sweep(coll, sizes, 1)?;
    let mut out = CollDiff {
        coll,
        bands: Vec::new(),
        skipped: sa.skipped.clone(),
    };
    let (Some(first), Some(last)) = (sa.points.first(), sa.points.last()) else {
        return Ok(out);
    };
    let (lo, hi) = (first.size, last.size);
    let mut bounds: Vec<u64> = sa
        .bands
        .iter()
        .chain(&sb.bands)
        .map(|b| b.starts_at)
        .filter(|s| (lo..=hi).contains(s))
        .chain([lo])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut pieces: Vec<(u64, u64, Pair, Pair)> = Vec::new();
    for (i, &start) in bounds.iter().enumerate() {
        let end = bounds.get(i + 1).map_or(hi, |n| n - 1);
        let (Some(a), Some(b)) = (eval(ma, coll, start)?, eval(mb, coll, start)?) else {
            continue;
        };
        match pieces.last_mut() {
            Some(p) if p.2 == a.pair && p.3 == b.pair => p.1 = end,
            _ => pieces.push((start, end, a.pair, b.pair)),
        }
    }
    let sweep_sizes: Vec<u64> = sa.points.iter().map(|p| p.size).collect();
    for (from, to, pick_a, pick_b) in pieces {
        let mut at: Vec<u64> = std::iter::once(from)
            .chain(sweep_sizes.iter().copied().filter(|s| *s > from && *s < to))
            .chain(std::iter::once(to))
            .collect();
        at.dedup();
        let mut points = Vec::new();
        let (mut worst, mut worst_at) = (0.0f64, from);
        for &s in &at {
            let (Some(a), Some(b)) = (eval(ma, coll, s)?, eval(mb, coll, s)?) else {
                continue;
            };
            let change = pct(a.time_us, b.time_us);
            if change.abs() > worst.abs() {
                (worst, worst_at) = (change, s);
            }
            points.push(PointDiff {
                bytes: s,
                time_a_us: a.time_us,
                time_b_us: b.time_us,
                busbw_a_gbs: a.busbw_gbs,
                busbw_b_gbs: b.busbw_gbs,
            });
        }
        let pick_changed = pick_a != pick_b;
        let mut band = BandDiff {
            from_bytes: from,
            to_bytes: to,
            pick_a,
            pick_b,
            pick_changed,
            time_change_pct: worst,
            time_change_at_bytes: worst_at,
            changed: pick_changed || worst.abs() > TIME_THRESHOLD_PCT,
            points,
            causes: Vec::new(),
        };
        if band.changed {
            band.causes = causes_of(steps, coll, &band, &sample(&at, 6))?;
        }
        out.bands.push(band);
    }
    Ok(out)
}

/// Compare the model under two families on one machine.
pub fn diff_versions(opts: &VersionDiffOptions) -> Result<VersionDiff> {
    let family_a = table::for_version(&opts.from)?;
    let family_b = table::for_version(&opts.against)?;
    let mut notes: Vec<String> = [&family_a.notice, &family_b.notice]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let (a, b) = (family_a.family, family_b.family);
    let cluster = opts.source.load()?;
    let nvls_state = crate::model::ModelInput::nvls_request(&cluster, &opts.env, opts.nvls);
    let (graphs, channels) = pipeline::graphs_for(
        &cluster,
        &opts.env,
        nvls_state.supported(),
        opts.graph_file.as_deref(),
    )?;
    let machine = Machine {
        cluster: &cluster,
        graphs: &graphs,
        channels,
        env: &opts.env,
        nvls: opts.nvls,
    };
    let families = chain(a, b)?;
    let mut steps = Vec::new();
    let mut step_models = Vec::new();
    for w in families.windows(2) {
        steps.push(Step {
            from_family: w[0].to_string(),
            to_family: w[1].to_string(),
            changes: step_changes(w[0], w[1])?,
        });
        step_models.push(build_step(&machine, w[0], w[1])?);
    }
    let ta = table::builtin(a)?;
    let tb = table::builtin(b)?;
    let info = |t: &TuningTable| FamilyInfo {
        family: t.family.clone(),
        tag: t.verified_against.clone(),
    };
    let (ia, ib) = (info(&ta), info(&tb));
    let ma = machine.model(ta)?;
    let mb = machine.model(tb)?;
    notes.push(
        "the graphs are the planner's channel search (NCCL 2.28's search rules) under both versions"
            .to_string(),
    );
    for f in &families {
        for p in &table::builtin(f)?.patch_changes {
            notes.push(format!(
                "patch release {}: {} (not modelled)",
                p.tag, p.what
            ));
        }
    }
    let mut collectives = Vec::new();
    for &coll in &opts.colls {
        collectives.push(coll_diff(&ma, &mb, &step_models, coll, &opts.sizes)?);
    }
    Ok(VersionDiff {
        a: ia,
        b: ib,
        machine: format!(
            "{}: {} on {}",
            cluster.node.source,
            crate::units::count(ma.input.n_ranks, "rank"),
            crate::units::count(ma.input.n_nodes, "node")
        ),
        n_ranks: ma.input.n_ranks,
        n_nodes: ma.input.n_nodes,
        steps,
        notes,
        collectives,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_texts_name_the_element_and_unit() {
        let t = change_text(
            "hw_latencies.NVLINK.Tree",
            &serde_json::json!([0.6, 1.25, 28.0]),
            &serde_json::json!([0.6, 1.25, 4.0]),
        );
        assert_eq!(t, "hw_latencies.NVLINK.Tree[Simple] 28.0 -> 4.0 µs");
        assert_eq!(
            change_text("rule:pat", &"off".into(), &"on".into()),
            "rule pat off -> on"
        );
        assert_eq!(
            change_text("factors.pat_bw", &0.85.into(), &0.75.into()),
            "factors.pat_bw 0.85 -> 0.75"
        );
        assert_eq!(
            change_text(
                "ll_max_bws.Hopper",
                &serde_json::json!([87.7, 22.5, 19.0]),
                &serde_json::json!([141.0, 45.0, 35.0])
            ),
            "ll_max_bws.Hopper[1 node] 87.7 -> 141.0 GB/s, ll_max_bws.Hopper[2 nodes] 22.5 -> 45.0 GB/s, ll_max_bws.Hopper[3+ nodes] 19.0 -> 35.0 GB/s"
        );
    }

    #[test]
    fn chains_go_both_ways() {
        assert_eq!(chain("2.22", "2.24").unwrap(), ["2.22", "2.23", "2.24"]);
        assert_eq!(chain("2.24", "2.22").unwrap(), ["2.24", "2.23", "2.22"]);
        // Backwards, a step's changes swap from and to.
        let fwd = step_changes("2.23", "2.24").unwrap();
        let back = step_changes("2.24", "2.23").unwrap();
        let f = fwd.iter().find(|c| c.what == "factors.pat_bw").unwrap();
        let b = back.iter().find(|c| c.what == "factors.pat_bw").unwrap();
        assert_eq!((f.from.as_f64(), f.to.as_f64()), (Some(0.85), Some(0.75)));
        assert_eq!((b.from.as_f64(), b.to.as_f64()), (Some(0.75), Some(0.85)));
    }

    #[test]
    fn one_constant_changes_and_nothing_else() {
        let t = table_with("2.23", &[("factors.pat_bw", &0.75.into())]).unwrap();
        let mut want = table::builtin("2.23").unwrap();
        want.factors.pat_bw = 0.75;
        want.source = t.source.clone();
        assert_eq!(t, want);
        let r = table_with_rules_of("2.27", "2.28").unwrap();
        assert!(r.has(Rule::NvlsEfficiency));
        assert_eq!(
            r.nvls_efficiency,
            table::builtin("2.27").unwrap().nvls_efficiency
        );
    }

    #[test]
    fn rule_scopes() {
        let pat = rule_info("rule:pat").unwrap();
        let ring_ll = [Pair::new(Algo::Ring, Proto::Ll)];
        assert!(!rule_touches(pat, Coll::AllGather, &ring_ll, 1));
        assert!(rule_touches(
            pat,
            Coll::AllGather,
            &[Pair::new(Algo::Pat, Proto::Simple)],
            1
        ));
        let quarter = rule_info("rule:ring_ll_quarter_third").unwrap();
        assert!(rule_touches(quarter, Coll::AllReduce, &ring_ll, 1));
        assert!(!rule_touches(
            quarter,
            Coll::AllReduce,
            &[Pair::new(Algo::Ring, Proto::Simple)],
            1
        ));
        let nvls = [Pair::new(Algo::Nvls, Proto::Simple)];
        let channels_min = rule_info("rule:nvls_multi_node_channels_min").unwrap();
        assert!(!rule_touches(channels_min, Coll::AllReduce, &nvls, 1));
        assert!(rule_touches(channels_min, Coll::AllReduce, &nvls, 2));
    }
}
