//! `planner tune --expected`: a plan from planner's expected model of the machine's links, made without any
//! measurement (issue 24 item 6).
//!
//! Per collective and size of a fine log2 grid ([`GRID_LO`]..=[`GRID_HI`], 8 sizes per doubling, powers of two
//! exact), the challenger is the pair the expected model rates fastest among those NCCL can run on the machine
//! (`Expected::all`: NCCL's own menu with its masks, NCCL_ALGO/NCCL_PROTO applied; the same pairs and the same tie
//! rule as `explain`'s expected crossover map). NCCL's own choice is NCCL's model's pick on the same topology, timed
//! by the expected model. The challenger replaces it where it is expected faster by more than the margin (as
//! `calibrated` does with calibrated times); with `--margin 0` the plan is the expected crossover map itself.
//!
//! The plan's provenance says what it is: `source_kind` "expected", a `source_file` that reads "planner's expected
//! model, no measurement (...)", and a `source_hash` over the topology, the NCCL table and the model's constants.

use super::calibrated::{log2_grid, GRID_STEPS_PER_OCTAVE};
use super::{
    created_unix, fnv1a64_hex, parse_nccl_version, plan_of, Decision, Provenance, Reason, Shape,
    SourceKind, Tuned,
};
use crate::error::{Error, Result};
use crate::expect::{ExpectOptions, Expectation, Expected, Params};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{Coll, Pair, TuningTable};
use crate::nccl_env::NcclEnv;
use crate::pipeline::Source;
use crate::units::format_size;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// The smallest size the plan decides at (nccl-tests' `-b 8`); below it the first band reaches down to 0 bytes.
pub(crate) const GRID_LO: u64 = 8;
/// The largest size the plan decides at (16 GiB, above every public nccl-tests sweep); the last band reaches up to
/// `u64::MAX`.
pub(crate) const GRID_HI: u64 = 16 << 30;

/// What `planner tune --expected` needs: the topology and NCCL's environment, the NCCL table for NCCL's own pick,
/// the expected model's options and constants, and the margin.
#[derive(Debug, Clone)]
pub(crate) struct ExpectedRequest {
    pub(crate) source: Source,
    /// `--graph FILE` (NCCL's graphs instead of the search), if any.
    pub(crate) graph: Option<String>,
    pub(crate) table: TuningTable,
    /// The NCCL version the user named (`--nccl-version`), recorded in the plan when it is a full version.
    pub(crate) nccl_version: Option<String>,
    pub(crate) nvls: NvlsFlag,
    pub(crate) options: ExpectOptions,
    pub(crate) params: Params,
    pub(crate) margin_percent: f64,
}

/// The line `planner tune --expected` prints above its tables: no measurement was used.
pub(crate) const NO_MEASUREMENT: &str = "No measurement was used: this plan is planner's expected model of the machine's \
links (every time below is expected, not measured and not NCCL's estimate); check it with `planner verify` before \
trusting it.";

/// The expected model of the request's machine, and the plan from it.
pub(crate) fn make(request: &ExpectedRequest) -> Result<Tuned> {
    let margin = request.margin_percent;
    if !(margin.is_finite() && (0.0..=100.0).contains(&margin)) {
        return Err(Error::bad_input(format!(
            "invalid --margin {margin}: give a percentage from 0 to 100"
        )));
    }
    let cluster = request.source.load()?;
    let env: NcclEnv = request.source.nccl_env.clone();
    let (_model, expected) = crate::expect::build_with(
        &cluster,
        request.graph.as_deref(),
        request.table.clone(),
        env,
        request.nvls,
        &request.options,
        &request.params,
    )?;
    let mut decisions = Vec::new();
    for coll in Coll::ALL {
        for bytes in log2_grid(GRID_LO, GRID_HI, GRID_STEPS_PER_OCTAVE) {
            if let Some(d) = decide_size(&expected, coll, bytes, margin) {
                decisions.push(d);
            }
        }
    }
    if decisions.is_empty() {
        return Err(Error::bad_input(format!(
            "{}: the expected model has no pair NCCL can run at any size",
            cluster.node.source
        )));
    }
    let n_ranks = u32::try_from(expected.n_ranks())
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| Error::bad_input(format!("{}: no ranks", cluster.node.source)))?;
    let n_nodes = u32::try_from(cluster.n_nodes)
        .ok()
        .filter(|n| (1..=n_ranks).contains(n))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{}: {} nodes for {n_ranks} ranks",
                cluster.node.source, cluster.n_nodes
            ))
        })?;
    let shape = Shape { n_ranks, n_nodes };
    let notes = Vec::new();
    // A full version ("2.28.3") goes into the plan; a family ("2.28") names only the table, so none is recorded.
    let nccl_version = request
        .nccl_version
        .clone()
        .filter(|v| parse_nccl_version(v).is_some());
    let class = expected.class();
    let source_file = format!(
        "planner's expected model, no measurement ({}, {}, {} GPUs; class {}; NCCL {} table; {} launch)",
        cluster.node.source,
        crate::units::count(cluster.n_nodes, "node"),
        n_ranks,
        class.name,
        request.table.family,
        expected.launch().name()
    );
    let topology_hash = crate::calibrate::topology_hash_of_root(&cluster.node.xml);
    let source_hash = fnv1a64_hex(
        format!(
            "{source_file}\n{topology_hash}\n{}\n{:?}\n{:?}",
            request.table.source, request.params, request.source.nccl_env
        )
        .as_bytes(),
    );
    let provenance = Provenance {
        planner_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: created_unix(),
        machine: format!(
            "{} ({}, {n_ranks} GPUs)",
            cluster.node.source,
            crate::units::count(cluster.n_nodes, "node")
        ),
        nccl_version,
        topology_hash: Some(topology_hash),
        source_kind: SourceKind::Expected,
        source_file,
        source_hash,
        margin_percent: margin,
    };
    let plan = plan_of(provenance, shape, &decisions)?;
    Ok(Tuned {
        plan,
        decisions,
        stock_model: Some(format!(
            "NCCL's model ({}) for NCCL's own pick; planner's expected model ({}) for every time",
            request.table.source, class.name
        )),
        notes,
    })
}

/// The expected fastest of `all` (ties: NCCL's order, as `Expected::fastest` and explain's crossover map).
fn fastest(all: &[Expectation]) -> Option<&Expectation> {
    all.iter().fold(None, |best, e| match best {
        Some(b) if b.expected_time_us <= e.expected_time_us => Some(b),
        _ => Some(e),
    })
}

/// The decision at one size: None where the size gives no call (all-gather and reduce-scatter need 16 B per rank)
/// or NCCL has no pair here.
pub(crate) fn decide_size(
    expected: &Expected,
    coll: Coll,
    bytes: u64,
    margin: f64,
) -> Option<Decision> {
    let call = Call::new(coll, bytes, expected.n_ranks(), 1).ok()?;
    let eval = expected.model.evaluate(&call).ok()?;
    let winner = eval.winner();
    let nccl = Pair::new(winner.algo, winner.proto);
    let all = expected.all(coll, bytes);
    let timed = |p: Pair| {
        all.iter()
            .find(|e| p.algo == e.algo && e.proto == p.proto)
            .map(|e| e.expected_time_us)
    };
    let mut decision = Decision {
        coll,
        bytes,
        nccl: Some(nccl),
        nccl_from: Some("NCCL's model"),
        nccl_us: timed(nccl),
        best: None,
        best_us: None,
        gain_percent: None,
        pick: nccl,
        reason: Reason::NcclChoiceUnmeasured,
        measured_us: None,
        predicted_us: timed(nccl),
    };
    let Some(best) = fastest(&all) else {
        // No pair is modelled here (CollNet, PAT): NCCL's own pick stays.
        return Some(decision);
    };
    let best_pair = Pair::new(best.algo, best.proto);
    decision.best = Some(best_pair);
    decision.best_us = Some(best.expected_time_us);
    let Some(nccl_us) = decision.nccl_us else {
        // NCCL picks a pair the expected model does not model: nothing says another is faster.
        return Some(decision);
    };
    if best_pair == nccl {
        decision.gain_percent = Some(0.0);
        decision.reason = Reason::NcclIsBest;
        return Some(decision);
    }
    let gain = if nccl_us > 0.0 {
        (nccl_us - best.expected_time_us) / nccl_us * 100.0
    } else {
        0.0
    };
    decision.gain_percent = Some(gain);
    if gain > margin {
        decision.pick = best_pair;
        decision.predicted_us = Some(best.expected_time_us);
        decision.reason = Reason::Faster;
    } else {
        decision.reason = Reason::WithinMargin;
    }
    Some(decision)
}

/// The decisions at powers of two, every time labelled expected (`tune --expected`'s table; `render::decisions_table`
/// labels its times for measured and calibrated plans).
pub(crate) fn decisions_table(decisions: &[Decision]) -> String {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec![
            "collective",
            "size",
            "NCCL's pick (NCCL's model)",
            "NCCL's pick, expected (us)",
            "expected fastest",
            "expected fastest (us)",
            "expected gain %",
            "plan",
            "why",
        ]);
    for i in [1, 3, 5, 6] {
        if let Some(column) = t.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let us = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |t| format!("{t:.2}"));
    let pair = |p: Option<Pair>| p.map_or_else(|| "-".to_string(), |p| p.to_string());
    for d in decisions.iter().filter(|d| d.bytes.is_power_of_two()) {
        t.add_row(vec![
            d.coll.nccl_name().to_string(),
            format_size(d.bytes),
            pair(d.nccl),
            us(d.nccl_us),
            pair(d.best),
            us(d.best_us),
            d.gain_percent
                .map_or_else(|| "-".to_string(), |g| format!("{g:.1}")),
            d.pick.to_string(),
            d.reason.describe().to_string(),
        ]);
    }
    format!("{t}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{table, Algo, AnyAlgo};

    fn request(fixture: &str, nodes: usize, margin: f64) -> ExpectedRequest {
        ExpectedRequest {
            source: Source {
                fixture: Some(fixture.to_string()),
                nodes,
                ..Default::default()
            },
            graph: None,
            table: table::builtin_for_version("2.28").unwrap().0,
            nccl_version: Some("2.28.3".to_string()),
            nvls: NvlsFlag::Auto,
            options: ExpectOptions::default(),
            params: Params::builtin().unwrap(),
            margin_percent: margin,
        }
    }

    #[test]
    fn the_plan_says_it_is_expected_and_covers_every_size() {
        let tuned = make(&request("pcie-l40s-4", 1, 0.0)).unwrap();
        let p = &tuned.plan.provenance;
        assert_eq!(p.source_kind, SourceKind::Expected);
        assert!(p
            .source_file
            .starts_with("planner's expected model, no measurement (fixture pcie-l40s-4"));
        assert_eq!(p.nccl_version.as_deref(), Some("2.28.3"));
        // every collective from 0 to u64::MAX, for exactly 4 ranks on 1 node
        for coll in Coll::ALL {
            let rules: Vec<_> = tuned
                .plan
                .rules
                .iter()
                .filter(|r| r.collective == super::super::plan_coll(coll))
                .collect();
            assert_eq!(rules.first().map(|r| r.min_bytes), Some(0), "{coll:?}");
            assert_eq!(
                rules.last().map(|r| r.max_bytes),
                Some(u64::MAX),
                "{coll:?}"
            );
            assert!(rules
                .iter()
                .all(|r| r.n_ranks == Some(4) && r.n_nodes == Some(1)));
            assert!(rules.iter().all(|r| r.measured_us.is_none()));
        }
        // no measurement: every decision's time is the expected model's
        assert!(tuned.decisions.iter().all(|d| d.measured_us.is_none()));
        // with margin 0 every decided size runs the expected fastest pair (where NCCL's pick is modelled)
        for d in &tuned.decisions {
            if d.nccl_us.is_some() && d.gain_percent.is_some_and(|g| g > 0.0) {
                assert_eq!(Some(d.pick), d.best, "{d:?}");
            }
        }
        // Broadcast and Reduce: only Ring
        assert!(tuned
            .decisions
            .iter()
            .filter(|d| matches!(d.coll, Coll::Broadcast | Coll::Reduce))
            .all(|d| d.pick.algo == AnyAlgo::Nccl(Algo::Ring)));
    }

    #[test]
    fn the_margin_keeps_nccls_pick_where_the_gain_is_small() {
        let tuned = make(&request("hgx-h100-8", 1, 5.0)).unwrap();
        for d in &tuned.decisions {
            match d.reason {
                Reason::Faster => {
                    assert!(d.gain_percent.unwrap() > 5.0);
                    assert_eq!(Some(d.pick), d.best);
                }
                Reason::WithinMargin => {
                    assert!(d.gain_percent.unwrap() <= 5.0);
                    assert_eq!(Some(d.pick), d.nccl);
                }
                _ => assert_eq!(Some(d.pick), d.nccl),
            }
        }
        // a bad margin is bad input
        let e = make(&request("hgx-h100-8", 1, 101.0)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // LL and LL128 only with Ring and Tree: every rule is a pair NCCL runs (the plan validated it)
        assert!(tuned
            .plan
            .rules
            .iter()
            .all(|r| r.protocol == nccl_tuner_planner::Proto::Simple
                || matches!(
                    r.algorithm,
                    nccl_tuner_planner::Algo::Ring | nccl_tuner_planner::Algo::Tree
                )));
    }
}
