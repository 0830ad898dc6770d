//! The plan format: round trip, validation errors naming the field, lookup precedence, NCCL example-CSV output,
//! and parser robustness against truncated and garbage input (errors, never panics).

mod support;

use nccl_tuner_planner::context::{
    decision_line, decode_nccl_version_code, nccl_prints_tuning_info, Decision,
};
use nccl_tuner_planner::plan::{fnv1a64, fnv1a64_hex, parse_nccl_version, Pick};
use nccl_tuner_planner::{Algo, Coll, Plan, PlanError, Proto, Provenance, Rule, SourceKind};

fn rule(
    coll: Coll,
    ranks: Option<u32>,
    nodes: Option<u32>,
    min: u64,
    max: u64,
    algo: Algo,
    proto: Proto,
) -> Rule {
    Rule {
        collective: coll,
        n_ranks: ranks,
        n_nodes: nodes,
        min_bytes: min,
        max_bytes: max,
        algorithm: algo,
        protocol: proto,
        channels: None,
        predicted_us: None,
        measured_us: None,
    }
}

fn plan(rules: Vec<Rule>) -> Plan {
    Plan::new(
        Provenance {
            planner_version: "0.1.0".into(),
            created_unix: 1_764_547_200,
            machine: "2x NVIDIA H200".into(),
            nccl_version: Some("2.28.3".into()),
            topology_hash: Some("9f3a0c".into()),
            source_kind: SourceKind::Verify,
            source_file: "results.json".into(),
            source_hash: fnv1a64_hex(b"results"),
            margin_percent: 2.0,
        },
        rules,
    )
}

fn sample() -> Plan {
    let mut small = rule(
        Coll::AllReduce,
        Some(2),
        Some(1),
        0,
        65535,
        Algo::Ring,
        Proto::Ll,
    );
    small.predicted_us = Some(7.25);
    small.measured_us = Some(6.5);
    let mut mid = rule(
        Coll::AllReduce,
        Some(2),
        Some(1),
        65536,
        1048575,
        Algo::Tree,
        Proto::Simple,
    );
    mid.channels = Some(4);
    let large = rule(
        Coll::AllReduce,
        Some(2),
        Some(1),
        1048576,
        u64::MAX,
        Algo::Ring,
        Proto::Simple,
    );
    let mut any = rule(
        Coll::AllReduce,
        None,
        None,
        0,
        u64::MAX,
        Algo::Nvls,
        Proto::Simple,
    );
    any.channels = Some(16);
    let ranks_only = rule(
        Coll::AllGather,
        Some(8),
        None,
        4096,
        8191,
        Algo::Ring,
        Proto::Ll128,
    );
    let nodes_only = rule(
        Coll::ReduceScatter,
        None,
        Some(2),
        0,
        4095,
        Algo::CollNetDirect,
        Proto::Simple,
    );
    plan(vec![small, mid, large, any, ranks_only, nodes_only])
}

fn invalid(text: &str) -> (String, String) {
    match Plan::from_json(text) {
        Err(PlanError::Invalid { field, message }) => (field, message),
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

/// The sample as JSON with one rule field replaced (raw JSON value).
fn with_rule_field(index: usize, key: &str, raw: &str) -> String {
    let mut value: serde_json::Value =
        serde_json::from_str(&sample().to_json().expect("valid")).expect("json");
    value["rules"][index][key] = serde_json::from_str(raw).expect("raw json");
    value.to_string()
}

fn with_provenance_field(key: &str, raw: &str) -> String {
    let mut value: serde_json::Value =
        serde_json::from_str(&sample().to_json().expect("valid")).expect("json");
    value["provenance"][key] = serde_json::from_str(raw).expect("raw json");
    value.to_string()
}

#[test]
fn round_trip_through_json_and_serde() {
    let plan = sample();
    let json = plan.to_json().expect("valid plan");
    assert_eq!(Plan::from_json(&json).expect("reads back"), plan);
    let via_serde: Plan = serde_json::from_str(&json).expect("serde Deserialize validates too");
    assert_eq!(via_serde, plan);
    assert_eq!(
        (plan.format.as_str(), plan.version),
        ("planner-tuner-plan", 1)
    );
    // u64::MAX survives as an exact integer, null options as null.
    assert!(json.contains("\"max_bytes\": 18446744073709551615"));
    assert!(json.contains("\"channels\": null"));
    assert!(json.contains("\"source_kind\": \"verify\""));
    assert!(json.contains("\"algorithm\": \"NVLS\""));
    assert!(json.contains("\"protocol\": \"LL128\""));
}

#[test]
fn schema_example_and_minimal_rules_parse() {
    let plan = Plan::from_json(support::PLAN_2X1).expect("the test plan is valid");
    assert_eq!(plan.rules.len(), 4);
    assert_eq!(plan.rules[1].channels, Some(4));
    assert_eq!(plan.rules[2].max_bytes, u64::MAX);
    // Optional fields may be absent.
    let minimal = r#"{"format":"planner-tuner-plan","version":1,
      "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"","source_kind":"calibration",
                    "source_file":"cal.json","source_hash":"0123456789abcdef","margin_percent":0},
      "rules":[{"collective":"Broadcast","min_bytes":0,"max_bytes":10,"algorithm":"Ring","protocol":"Simple"}]}"#;
    let plan = Plan::from_json(minimal).expect("minimal plan");
    assert_eq!(plan.provenance.nccl_version, None);
    assert_eq!(plan.provenance.source_kind, SourceKind::Calibration);
    assert_eq!(
        plan.rules[0],
        rule(
            Coll::Broadcast,
            None,
            None,
            0,
            10,
            Algo::Ring,
            Proto::Simple
        )
    );
}

#[test]
fn validation_errors_name_the_field() {
    let cases: Vec<(String, &str, &str)> = vec![
        (
            with_rule_field(1, "algorithm", "\"Rng\""),
            "rules[1].algorithm",
            "unknown algorithm \"Rng\"",
        ),
        (
            with_rule_field(0, "algorithm", "\"ring\""),
            "rules[0].algorithm",
            "expected one of Tree, Ring",
        ),
        (
            with_rule_field(0, "protocol", "\"SIMPLE\""),
            "rules[0].protocol",
            "unknown protocol \"SIMPLE\"",
        ),
        (
            with_rule_field(0, "collective", "\"Allreduce\""),
            "rules[0].collective",
            "unknown collective",
        ),
        (
            with_rule_field(0, "collective", "4"),
            "rules[0].collective",
            "must be a string, found a number",
        ),
        (
            with_rule_field(0, "protocol", "null"),
            "rules[0].protocol",
            "must be a string, found null",
        ),
        (
            with_rule_field(1, "channels", "0"),
            "rules[1].channels",
            "0 is not within 1..=64",
        ),
        (
            with_rule_field(1, "channels", "65"),
            "rules[1].channels",
            "65 is not within 1..=64",
        ),
        (
            with_rule_field(1, "channels", "-1"),
            "rules[1].channels",
            "is not a whole number",
        ),
        (
            with_rule_field(1, "channels", "2.5"),
            "rules[1].channels",
            "is not a whole number",
        ),
        (
            with_rule_field(0, "max_bytes", "18446744073709551616"),
            "rules[0].max_bytes",
            "is not a whole number",
        ),
        (
            with_rule_field(0, "min_bytes", "-1"),
            "rules[0].min_bytes",
            "is not a whole number",
        ),
        (
            with_rule_field(1, "min_bytes", "2000000"),
            "rules[1].max_bytes",
            "1048575 is below min_bytes 2000000",
        ),
        (
            with_rule_field(0, "n_ranks", "0"),
            "rules[0].n_ranks",
            "at least 1",
        ),
        (
            with_rule_field(0, "n_nodes", "3"),
            "rules[0].n_nodes",
            "3 nodes for 2 ranks",
        ),
        (
            with_rule_field(0, "predicted_us", "-2.0"),
            "rules[0].predicted_us",
            "is not a time >= 0",
        ),
        (
            with_rule_field(0, "measured_us", "\"fast\""),
            "rules[0].measured_us",
            "must be a number or null",
        ),
        (
            with_rule_field(2, "chanels", "4"),
            "rules[2].chanels",
            "unknown field",
        ),
        (
            with_rule_field(1, "max_bytes", "2000000"),
            "rules[2]",
            "overlap rules[1] (bytes 65536..=2000000)",
        ),
        (
            with_provenance_field("source_kind", "\"measured\""),
            "provenance.source_kind",
            "unknown source kind",
        ),
        (
            with_provenance_field("source_hash", "\"xyz\""),
            "provenance.source_hash",
            "not 16 hex digits",
        ),
        (
            with_provenance_field("nccl_version", "\"2.28\""),
            "provenance.nccl_version",
            "not a version",
        ),
        (
            with_provenance_field("topology_hash", "\"\""),
            "provenance.topology_hash",
            "not a hex string",
        ),
        (
            with_provenance_field("margin_percent", "101"),
            "provenance.margin_percent",
            "not within 0..=100",
        ),
        (
            with_provenance_field("created_unix", "-5"),
            "provenance.created_unix",
            "is not a whole number",
        ),
        (
            with_provenance_field("planner_version", "\"\""),
            "provenance.planner_version",
            "is empty",
        ),
        (
            with_provenance_field("color", "\"red\""),
            "provenance.color",
            "unknown field",
        ),
    ];
    for (text, field, message) in cases {
        let (got_field, got_message) = invalid(&text);
        assert_eq!(got_field, field, "{got_message}");
        assert!(
            got_message.contains(message),
            "{field}: {got_message:?} lacks {message:?}"
        );
    }

    // Missing fields, top-level problems.
    let mut value: serde_json::Value =
        serde_json::from_str(&sample().to_json().expect("valid")).expect("json");
    value["rules"][3]
        .as_object_mut()
        .expect("object")
        .remove("protocol");
    assert_eq!(
        invalid(&value.to_string()),
        ("rules[3].protocol".into(), "is missing".into())
    );
    let text = sample().to_json().expect("valid");
    assert_eq!(
        invalid(&text.replace("\"version\": 1", "\"version\": 2")).0,
        "version"
    );
    assert_eq!(
        invalid(&text.replace("planner-tuner-plan", "nccl-plan")).0,
        "format"
    );
    assert_eq!(
        invalid("[]"),
        ("plan".into(), "must be an object, found an array".into())
    );
    assert_eq!(
        invalid(r#"{"format":"planner-tuner-plan","version":1}"#).0,
        "provenance"
    );
    assert_eq!(
        invalid(
            &text
                .replace("\"rules\": [", "\"rules\": {\"x\": [")
                .replace("]\n}", "]}\n}")
        )
        .0,
        "rules"
    );
    assert_eq!(
        invalid(
            &with_rule_field(0, "collective", "\"AllReduce\"")
                .replace("\"rules\":[", "\"rules\":[7,")
        )
        .0,
        "rules[0]"
    );
}

#[test]
fn overlapping_bands_of_one_key_are_rejected_and_name_both_rules() {
    let mut plan = sample();
    plan.rules.push(rule(
        Coll::AllReduce,
        Some(2),
        Some(1),
        1048575,
        1048575,
        Algo::Tree,
        Proto::Ll,
    ));
    let error = plan.validate().expect_err("overlap");
    assert_eq!(
        error.to_string(),
        "rules[6]: bytes 1048575..=1048575 overlap rules[1] (bytes 65536..=1048575) for AllReduce nRanks 2 nNodes 1"
    );
    assert!(
        plan.to_json().is_err(),
        "to_json refuses to write an invalid plan"
    );
    // The same band for another key is fine (the more specific key wins at lookup).
    let mut plan = sample();
    plan.rules.push(rule(
        Coll::AllReduce,
        Some(2),
        None,
        0,
        100,
        Algo::Tree,
        Proto::Ll,
    ));
    plan.validate().expect("different key");
}

#[test]
fn syntax_errors_carry_line_and_column() {
    match Plan::from_json("{\n  \"format\": planner }") {
        Err(PlanError::Syntax {
            line,
            column,
            message,
        }) => {
            assert_eq!((line, column), (2, 13));
            assert_eq!(message, "expected value");
        }
        other => panic!("{other:?}"),
    }
    let error = Plan::from_json("").expect_err("empty");
    assert_eq!(
        error.to_string(),
        "not JSON at line 1 column 0: EOF while parsing a value"
    );
}

#[test]
fn pick_prefers_the_most_specific_rule_and_the_index_agrees() {
    let plan = sample();
    let all_reduce = Coll::AllReduce as i32;
    let p = |ranks, nodes, bytes| {
        plan.pick(all_reduce, ranks, nodes, bytes)
            .map(|p| p.rule_index)
    };
    // 2 ranks on 1 node: the exact rules; any other shape: the any/any NVLS rule.
    assert_eq!(p(2, 1, 0), Some(0));
    assert_eq!(p(2, 1, 65535), Some(0));
    assert_eq!(p(2, 1, 65536), Some(1));
    assert_eq!(p(2, 1, u64::MAX), Some(2));
    assert_eq!(p(4, 1, 100), Some(3));
    assert_eq!(p(2, 2, 100), Some(3));
    assert_eq!(
        plan.pick(all_reduce, 2, 1, 70000),
        Some(Pick {
            rule_index: 1,
            algorithm: Algo::Tree,
            protocol: Proto::Simple,
            channels: Some(4)
        })
    );
    // n_ranks-only and n_nodes-only rules.
    assert_eq!(
        plan.pick(Coll::AllGather as i32, 8, 1, 4096)
            .map(|p| p.rule_index),
        Some(4)
    );
    assert_eq!(plan.pick(Coll::AllGather as i32, 8, 1, 8192), None);
    assert_eq!(plan.pick(Coll::AllGather as i32, 4, 1, 4096), None);
    assert_eq!(
        plan.pick(Coll::ReduceScatter as i32, 16, 2, 0)
            .map(|p| p.rule_index),
        Some(5)
    );
    assert_eq!(plan.pick(Coll::ReduceScatter as i32, 16, 4, 0), None);
    // Not tuned collectives.
    for func in [5, 11, -1, i32::MAX] {
        assert_eq!(plan.pick(func, 2, 1, 100), None);
    }
    // has_shape.
    assert!(plan.has_shape(2, 1));
    assert!(plan.has_shape(1, 1), "the any/any rule covers every shape");
    let only_exact = plan_of(&plan, &[0, 1, 2]);
    assert!(only_exact.has_shape(2, 1));
    assert!(!only_exact.has_shape(1, 1));
    assert!(!only_exact.has_shape(2, 2));
    assert_eq!(plan.rules_for_shape(2, 1), 4);
    assert_eq!(plan.rules_for_shape(8, 2), 3);

    // The plugin's per-shape index gives the same answer as Plan::pick at every band edge.
    let mut edges: Vec<u64> = plan
        .rules
        .iter()
        .flat_map(|r| [r.min_bytes, r.max_bytes])
        .collect();
    edges.extend(
        edges
            .clone()
            .iter()
            .flat_map(|&e| [e.saturating_sub(1), e.saturating_add(1)]),
    );
    for (ranks, nodes) in [(2, 1), (8, 1), (16, 2), (4, 4), (1, 1)] {
        let index = plan.index_for_shape(ranks, nodes);
        assert_eq!(index.len(), plan.rules_for_shape(ranks, nodes));
        for coll in Coll::ALL {
            for &bytes in &edges {
                assert_eq!(
                    index.pick(coll, bytes),
                    plan.pick(coll as i32, ranks, nodes, bytes),
                    "{coll:?} {ranks}x{nodes} {bytes}"
                );
            }
        }
    }
}

fn plan_of(base: &Plan, keep: &[usize]) -> Plan {
    let mut p = base.clone();
    p.rules = keep.iter().map(|&i| base.rules[i].clone()).collect();
    p
}

#[test]
fn nccl_csv_matches_the_example_plugin_format() {
    // Hand-written: most specific key first (exact ranks+nodes, ranks only, nodes only, any), then by collective
    // and min_bytes; -1 for any/keep; numPipeOps and regBuff always -1.
    let expected = "\
# NCCL example tuner config written by planner 0.1.0 from verify results.json (2x NVIDIA H200, NCCL 2.28.3)
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
allreduce,0,65535,ring,ll,-1,1,2,-1,-1
allreduce,65536,1048575,tree,simple,4,1,2,-1,-1
allreduce,1048576,18446744073709551615,ring,simple,-1,1,2,-1,-1
allgather,4096,8191,ring,ll128,-1,-1,8,-1,-1
reducescatter,0,4095,collnet_direct,simple,-1,2,-1,-1,-1
allreduce,0,18446744073709551615,nvls,simple,16,-1,-1,-1,-1
";
    assert_eq!(sample().to_nccl_csv(), expected);
    for line in expected.lines().filter(|l| !l.starts_with('#')) {
        assert_eq!(line.split(',').count(), 10);
        assert!(
            line.len() < 256,
            "the example plugin reads lines of up to 255 characters"
        );
    }
}

#[test]
fn truncated_and_garbage_inputs_are_errors_not_panics() {
    let valid = sample().to_json().expect("valid");
    // (to_json ends with a newline; without it the text is still complete.)
    for end in 0..valid.trim_end().len() {
        if valid.is_char_boundary(end) {
            assert!(
                Plan::from_json(&valid[..end]).is_err(),
                "truncated at {end}"
            );
        }
    }
    // Deterministic pseudo-random garbage, byte flips of the valid plan, and deep nesting.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"{}[]\":,0123456789-.eE truefalsnl\\\nAllReduceRingLLSimple_";
    for _ in 0..3000 {
        let len = (next() % 200) as usize;
        let text: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char)
            .collect();
        let _ = Plan::from_json(&text);
    }
    let bytes = valid.as_bytes();
    for _ in 0..3000 {
        let mut mutated = bytes.to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % mutated.len() as u64) as usize;
            mutated[at] = alphabet[(next() % alphabet.len() as u64) as usize];
        }
        if let Ok(text) = String::from_utf8(mutated) {
            if let Ok(plan) = Plan::from_json(&text) {
                plan.validate().expect("whatever parses is valid");
            }
        }
    }
    let deep = "[".repeat(100_000);
    assert!(matches!(
        Plan::from_json(&deep),
        Err(PlanError::Syntax { .. })
    ));
    let deep_object = format!("{}{}", "{\"a\":".repeat(10_000), "1");
    assert!(Plan::from_json(&deep_object).is_err());
}

#[test]
fn helpers_match_their_definitions() {
    // FNV-1a 64 reference vectors (Fowler/Noll/Vo test suite).
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    assert_eq!(fnv1a64_hex(b""), "cbf29ce484222325");

    assert_eq!(parse_nccl_version("2.28.3"), Some((2, 28, 3)));
    assert_eq!(parse_nccl_version("2.28.3-1"), Some((2, 28, 3)));
    assert_eq!(parse_nccl_version("2.28.3+cuda12.9"), Some((2, 28, 3)));
    for bad in ["2.28", "2.28.3.1", "v2.28.3", "2..3", "", "2.28.x"] {
        assert_eq!(parse_nccl_version(bad), None, "{bad}");
    }
    // NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before.
    assert_eq!(decode_nccl_version_code(22803), Some((2, 28, 3)));
    assert_eq!(decode_nccl_version_code(23007), Some((2, 30, 7)));
    assert_eq!(decode_nccl_version_code(2708), Some((2, 7, 8)));
    assert_eq!(decode_nccl_version_code(0), None);
    assert_eq!(decode_nccl_version_code(-1), None);

    // NCCL's NCCL_DEBUG / NCCL_DEBUG_SUBSYS parsing (src/debug.cc).
    assert!(nccl_prints_tuning_info(Some("INFO"), Some("INIT,TUNING")));
    assert!(nccl_prints_tuning_info(Some("info"), Some("tuning")));
    assert!(nccl_prints_tuning_info(Some("TRACE"), Some("ALL")));
    assert!(nccl_prints_tuning_info(Some("INFO"), Some("^INIT")));
    assert!(!nccl_prints_tuning_info(Some("INFO"), Some("^TUNING,INIT")));
    assert!(
        !nccl_prints_tuning_info(Some("INFO"), None),
        "default subsystems are INIT,BOOTSTRAP,ENV"
    );
    assert!(!nccl_prints_tuning_info(Some("WARN"), Some("TUNING")));
    assert!(!nccl_prints_tuning_info(None, Some("TUNING")));
    assert!(
        !nccl_prints_tuning_info(Some("INFO"), Some("INIT, TUNING")),
        "NCCL does not trim spaces"
    );

    let pick = Pick {
        rule_index: 3,
        algorithm: Algo::Ring,
        protocol: Proto::Ll,
        channels: None,
    };
    assert_eq!(
        decision_line(4, 2_097_152, 2, 1, Decision::Applied(pick)),
        "planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)"
    );
    assert_eq!(
        decision_line(9, 8, 2, 1, Decision::Unsupported("collective")),
        "planner-tuner: func9 8 bytes nRanks 2 nNodes 1 -> kept (unsupported collective)"
    );
}

#[test]
fn a_key_given_twice_is_refused_not_read_as_the_last() {
    let text = sample().to_json().expect("valid");
    // The plugin would apply Tree while a reader of the file sees Ring.
    let twice = text.replacen(
        "\"algorithm\": \"Ring\",",
        "\"algorithm\": \"Ring\", \"algorithm\": \"Tree\",",
        1,
    );
    assert_ne!(twice, text);
    match Plan::from_json(&twice) {
        Err(PlanError::Syntax { message, line, .. }) => {
            assert!(message.contains("duplicate key \"algorithm\""), "{message}");
            assert!(line > 1);
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    let top = text.replacen("\"version\": 1,", "\"version\": 1, \"version\": 1,", 1);
    assert!(Plan::from_json(&top).is_err());
    // A key repeated in different objects is fine.
    assert!(Plan::from_json(&text).is_ok());
}

#[test]
fn a_pair_nccl_never_runs_is_refused() {
    use nccl_tuner_planner::plan::nccl_runs;
    for (coll, algo, proto) in [
        (Coll::AllReduce, Algo::Nvls, Proto::Ll),
        (Coll::AllReduce, Algo::NvlsTree, Proto::Ll128),
        (Coll::AllReduce, Algo::CollNetDirect, Proto::Ll),
        (Coll::AllReduce, Algo::Pat, Proto::Simple),
        (Coll::AllGather, Algo::Pat, Proto::Ll128),
        (Coll::AllGather, Algo::Tree, Proto::Simple),
        (Coll::ReduceScatter, Algo::CollNetChain, Proto::Simple),
        (Coll::Broadcast, Algo::Tree, Proto::Ll),
        (Coll::Reduce, Algo::Nvls, Proto::Simple),
    ] {
        assert!(!nccl_runs(coll, algo, proto), "{coll:?} {algo:?} {proto:?}");
        let bad = plan(vec![rule(coll, Some(2), Some(1), 0, 1023, algo, proto)]);
        let text = serde_json::to_string(&bad).expect("serialise");
        let (field, message) = invalid(&text);
        assert_eq!(field, "rules[0].protocol");
        assert!(message.contains("NCCL never runs"), "{message}");
        assert!(bad.to_json().is_err());
    }
    // Every pair NCCL's tuning table can hold for AllReduce except PAT.
    for algo in [Algo::Ring, Algo::Tree] {
        for proto in [Proto::Ll, Proto::Ll128, Proto::Simple] {
            assert!(nccl_runs(Coll::AllReduce, algo, proto));
        }
    }
    for algo in [
        Algo::CollNetDirect,
        Algo::CollNetChain,
        Algo::Nvls,
        Algo::NvlsTree,
    ] {
        assert!(nccl_runs(Coll::AllReduce, algo, Proto::Simple));
    }
    assert!(nccl_runs(Coll::AllGather, Algo::Pat, Proto::Simple));
    assert!(nccl_runs(Coll::Broadcast, Algo::Ring, Proto::Ll128));
}

#[test]
fn a_plan_the_plugin_would_not_read_is_never_written() {
    // Disjoint 1-byte bands, each about 250 bytes of pretty JSON: 100,000 of them pass 16 MiB.
    let rules: Vec<Rule> = (0..100_000u64)
        .map(|i| {
            rule(
                Coll::AllReduce,
                Some(2),
                Some(1),
                i,
                i,
                Algo::Ring,
                Proto::Simple,
            )
        })
        .collect();
    let big = plan(rules);
    let text = serde_json::to_string_pretty(&big).expect("serialise");
    assert!(text.len() as u64 > nccl_tuner_planner::context::MAX_PLAN_BYTES);
    match big.to_json() {
        Err(PlanError::Invalid { field, message }) => {
            assert_eq!(field, "plan");
            assert!(
                message.contains("100000 rules") && message.contains("16 MiB"),
                "{message}"
            );
        }
        other => panic!("expected the size limit, got {other:?}"),
    }
    let small = plan(big.rules[..1000].to_vec());
    assert!(small.to_json().is_ok());
}

/// The plugin line the top-level README quotes (its tuner section) is the one the plugin prints for that call. (The
/// NCCL line quoted beside it is NCCL's own per-call format, which no committed log of a plugin run holds.)
#[test]
fn the_readme_quotes_the_plugins_decision_line() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("the top-level README");
    let quoted = readme
        .lines()
        .find_map(|l| l.strip_prefix("NCCL INFO planner-tuner: "))
        .expect("a quoted planner-tuner line");
    let pick = Pick {
        rule_index: 0,
        algorithm: Algo::Ring,
        protocol: Proto::Ll,
        channels: None,
    };
    assert_eq!(
        format!("planner-tuner: {quoted}"),
        decision_line(4, 2_097_152, 2, 1, Decision::Applied(pick))
    );
}
