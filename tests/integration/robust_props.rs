//! Issue 15: the properties the fuzz targets (fuzz/fuzz_targets/) check, on stable Rust with proptest, one group
//! per parser: XML (`xml::parse_bytes`: round trip), topology XML (`topo::build::from_bytes`, then report and
//! search), graph XML (`search::graphs_from_text`), NCCL logs (`NcclLog::parse`, then audit), tuning and symmetric
//! tables (then the model), verify result files, calibration files and tuner plans (round trips), nccl-tests text
//! and JSON and NCCL Inspector JSONL (`calibrate::read_text`), sizes and ranges, pairs, `NCCL_ALGO`/`NCCL_PROTO`,
//! the `NCCL_*` values the model reads, and partial vendor files (`--gpu MODEL` fill and merge). Properties: never
//! a panic; a refusal is bad input (exit 2); what is accepted reads back the same or stays in range. Run them in
//! debug too (overflow checks on): `cargo test --test integration robust`; `PROPTEST_CASES=10000` for a longer run.

use crate::robust_gen::{generated_graphs, generated_topology, same_tree};
use planner::search::{self, SearchOptions};
use planner::topo::{build, Cluster};
use planner::xml::{self, XmlNode};
use proptest::prelude::*;

/// `cases` per property, or `PROPTEST_CASES` for a longer campaign.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Attribute values with what XML escapes, entities, unicode and control characters.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.:x ]{0,12}",
        "[&<>\"'\\t\\n é€]{0,6}",
        any::<String>(),
        Just("0x060400".to_string()),
    ]
}

/// A tree of elements from a small name pool with generated attributes.
fn element_tree() -> impl Strategy<Value = XmlNode> {
    let leaf = (
        "[a-z][a-z0-9_:.-]{0,6}",
        prop::collection::vec(("[a-z][a-z_]{0,5}", value()), 0..4),
    )
        .prop_map(|(name, attrs)| {
            let mut n = XmlNode::new(name);
            for (k, v) in attrs {
                n.set_attr(&k, v);
            }
            n
        });
    leaf.prop_recursive(6, 48, 5, |inner| {
        (inner.clone(), prop::collection::vec(inner, 0..5)).prop_map(|(mut n, children)| {
            n.children = children;
            n
        })
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn xml_parse_never_panics_and_round_trips(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(tree) = xml::parse_bytes(&bytes, "fuzz") {
            let again = xml::parse(&xml::write(&tree), "again").expect("what was accepted is accepted again");
            prop_assert!(same_tree(&tree, &again));
        }
    }

    #[test]
    fn xml_of_generated_trees_round_trips(tree in element_tree(), noise in "[ \\n\\t]{0,3}") {
        let text = format!("<?xml version=\"1.0\"?>{noise}<!-- c -->{}", xml::write(&tree));
        match xml::parse(&text, "gen") {
            Ok(parsed) => prop_assert!(same_tree(&tree, &parsed)),
            // Only the named limits may refuse a tree the writer wrote (long values, control characters).
            Err(e) => prop_assert_eq!(e.exit_code(), 2),
        }
    }

    #[test]
    fn sizes_never_panic_and_stay_in_range(text in prop_oneof![
        any::<String>(),
        "[0-9_ .eE+-]{0,30}[kKmMgGtTpPeE]?[iI]?[bB]?",
        "[0-9]{1,25}(\\.[0-9]{0,25})?[KMGT]?(\\.\\.[0-9]{1,25}[KMG]?)?",
    ]) {
        if let Ok(v) = planner::units::parse_size(&text) {
            prop_assert!((1..=planner::units::MAX_SIZE).contains(&v));
        }
        if let Ok(sizes) = planner::units::parse_size_range(&text) {
            prop_assert!(!sizes.is_empty() && sizes.len() <= 41);
            prop_assert!(sizes.windows(2).all(|w| w[1] == 2 * w[0]));
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn topology_build_search_and_report_never_panic(bytes in prop::collection::vec(any::<u8>(), 8..400)) {
        // Through the text, as a file would come in.
        let text = xml::write(&generated_topology(&bytes));
        match build::from_bytes(text.as_bytes(), "gen.xml") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(topo) => {
                let cluster = Cluster::single(topo);
                let report = planner::report::topo::report(&cluster);
                let _ = planner::report::topo::render_text(&report);
                for nodes in [1, 2] {
                    let mut c = cluster.clone();
                    c.n_nodes = nodes;
                    if let Err(e) = search::search(&c, &SearchOptions::default()) {
                        prop_assert_eq!(e.exit_code(), 2, "{}", e);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn graph_xml_reading_never_panics(bytes in prop::collection::vec(any::<u8>(), 4..200), nodes in 1usize..3) {
        let fixtures: [(&str, &[&str], &[&str]); 2] = [
            ("h200x2-nvswitch-vm", &["0", "0x1"], &["0"]),
            ("hgx-h200-8", &["0", "0x1", "0x2", "0x3", "0x4", "0x5", "0x6", "0x7"], &["0", "0x1", "0x2", "0x7"]),
        ];
        for (fixture, gpus, nets) in fixtures {
            let mut cluster = Cluster::single(planner::pipeline::load_fixture(fixture).unwrap());
            cluster.n_nodes = nodes;
            let text = generated_graphs(&bytes, gpus, nets, nodes > 1);
            if let Err(e) = search::graphs_from_text(&text, "gen-graph.xml", &cluster, &SearchOptions::default()) {
                prop_assert_eq!(e.exit_code(), 2, "{}", e);
            }
        }
    }

    #[test]
    fn graph_xml_of_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let cluster = Cluster::single(planner::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap());
        let text = String::from_utf8_lossy(&bytes);
        let _ = search::graphs_from_text(&text, "bytes.xml", &cluster, &SearchOptions::default());
    }
}

// ---- Every other parser, on real files with random edits (the fuzz targets' seeds, mutated as a fuzzer would:
// ---- bytes replaced, a cut, a span repeated), and on the strings users type.

/// A committed file, read once.
fn seed(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// `text` with `edits` applied: (position, byte) replacements, then a cut at `cut` (per mille of the length), then
/// the span around `dup` repeated. Positions wrap around the length. The result may not be UTF-8: lossy.
fn mutate(text: &str, edits: &[(usize, u8)], cut: usize, dup: usize) -> String {
    let mut bytes = text.as_bytes().to_vec();
    if bytes.is_empty() {
        return String::new();
    }
    for &(at, b) in edits {
        let i = at % bytes.len();
        bytes[i] = b;
    }
    let keep = bytes.len() * cut.min(1000) / 1000;
    bytes.truncate(keep.max(1));
    let d = dup % bytes.len();
    let span: Vec<u8> = bytes[d..(d + 40).min(bytes.len())].to_vec();
    bytes.splice(d..d, span);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Edits that favour the characters formats are made of.
fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec(
        (
            any::<usize>(),
            prop_oneof![
                any::<u8>(),
                prop::sample::select(b"0123456789-.eE\"{}[],:<>/= \n".to_vec()),
            ],
        ),
        0..6,
    )
}

/// A bad-input refusal or success; never a runtime error (and a panic fails the property).
fn bad_input_only<T>(r: planner::Result<T>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        prop_assert_eq!(e.exit_code(), 2, "{}", e);
    }
    Ok(())
}

/// The 2x H200 capture's cluster with its searched graphs: the model any table or environment runs on.
fn capture_model(
    env: planner::nccl_env::NcclEnv,
    table: planner::model::TuningTable,
) -> planner::Result<planner::model::Model> {
    use std::sync::OnceLock;
    static SETUP: OnceLock<(Cluster, planner::search::Graphs, usize)> = OnceLock::new();
    let (cluster, graphs, channels) = SETUP.get_or_init(|| {
        let cluster =
            Cluster::single(planner::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap());
        let (g, c) = planner::pipeline::graphs_for(
            &cluster,
            &planner::nccl_env::NcclEnv::default(),
            false,
            None,
        )
        .unwrap();
        (cluster, g, c)
    });
    planner::pipeline::model_from_graphs(
        cluster,
        graphs,
        *channels,
        table,
        env,
        planner::model::input::NvlsFlag::Auto,
    )
}

fn newest_table() -> planner::model::TuningTable {
    planner::model::table::builtin(planner::model::table::newest_family()).unwrap()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn nccl_logs_never_panic(which in 0usize..4, edits in edits(), cut in 0usize..1200, dup in any::<usize>()) {
        let file = [
            "tests/golden/h200x2-nvswitch-vm/nccl-init-rank0.log",
            "tests/data/logs/nccl-2.22.3-h100x24-ibm-issue1453.log",
            "tests/data/logs/nccl-2.29.7-rtx5090-2ranks-socket.log",
            // NCCL 2.31's per-call "Input: {" / "Best tuning {" lines (written from its format strings).
            "fuzz/corpus/nccl_log/nccl-2.31-tuning-lines.log",
        ][which];
        let text = mutate(&seed(file), &edits, cut, dup);
        match planner::nccl_log::NcclLog::parse(&text, "m.log") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(log) => {
                bad_input_only(planner::nccl_log::table_from_log(&log))?;
                let env = planner::nccl_env::NcclEnv::from_pairs(
                    log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())),
                );
                if let Ok(model) = capture_model(env, newest_table()) {
                    let _ = planner::audit::audit(&log, &model, None);
                }
            }
        }
    }

    #[test]
    fn partial_vendor_files_fill_and_merge_without_panic(
        which in 0usize..4,
        model in 0usize..16,
        speed in 0u8..20,
        // Bytes replaced by hex digits: mostly inside attribute values (bus ids, classes, vendors, speeds), so
        // most edited files still read as XML and reach the fill; a fuzzer's harsher edits are vendor_topo's.
        edits in prop::collection::vec((any::<usize>(), prop::sample::select(b"0123456789abcdefx".to_vec())), 0..8),
    ) {
        // The fuzz target vendor_topo's properties: `--gpu MODEL` fill and NCCL's merge with a detected system.
        use planner::topo::{gpu_models, vendor};
        let file = [
            "tests/integration/vendor_topo/azure-ndv4-topo.xml",
            "tests/integration/vendor_topo/azure-ndv5-topo.xml",
            "tests/integration/vendor_topo/aws-p4d-24xl-topo.xml",
            "tests/integration/vendor_topo/aws-p4de-24xl-topo.xml",
        ][which];
        let mut bytes = seed(file).into_bytes();
        for (at, b) in edits {
            let i = at % bytes.len();
            bytes[i] = b;
        }
        let text = String::from_utf8_lossy(&bytes);
        let root = match xml::parse(&text, "v.xml") {
            Err(e) => {
                prop_assert_eq!(e.exit_code(), 2, "{}", e);
                return Ok(());
            }
            Ok(root) => root,
        };
        if !vendor::is_partial(&root) {
            return Ok(());
        }
        let model = &gpu_models::GPU_MODELS[model % gpu_models::GPU_MODELS.len()];
        let nic = vendor::NicChoice {
            speed_gbits: (speed > 0).then_some(f64::from(speed) * 25.0),
        };
        let builds = |root: &XmlNode| -> Result<(), TestCaseError> {
            match build::from_xml(root, "v.xml") {
                Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
                Ok(topo) => bad_input_only(search::search(&Cluster::single(topo), &SearchOptions::default()))?,
            }
            Ok(())
        };
        match vendor::fill_from_model(&root, model, nic, "v.xml") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok((filled, warnings)) => {
                prop_assert!(!warnings.is_empty());
                prop_assert!(!vendor::is_partial(&filled));
                let ranks: Vec<usize> = filled
                    .descendants()
                    .into_iter()
                    .filter(|n| n.name == "gpu")
                    .filter_map(|g| g.attr("rank")?.parse().ok())
                    .collect();
                let mut sorted = ranks.clone();
                sorted.sort_unstable();
                prop_assert!(sorted.iter().copied().eq(0..ranks.len()), "ranks {:?}", ranks);
                builds(&filled)?;
            }
        }
        let detected = xml::parse(planner::topo::fixtures::find("hgx-h100-8").unwrap().xml, "d.xml").unwrap();
        builds(&vendor::merge_with_detected(&root, &detected))?;
    }

    #[test]
    fn tuning_tables_never_panic(family in 0usize..3, edits in edits(), cut in 900usize..1001, dup in any::<usize>()) {
        let file = ["tuning-tables/nccl-2.18.json", "tuning-tables/nccl-2.28.json", "tuning-tables/nccl-symmetric-2.28.json"][family];
        let text = mutate(&seed(file), &edits, cut, dup);
        bad_input_only(planner::model::symmetric::SymmetricTable::parse(&text, "m.json"))?;
        match planner::model::TuningTable::parse(&text, "m.json") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(table) => {
                if let Ok(model) = capture_model(planner::nccl_env::NcclEnv::default(), table) {
                    for coll in planner::model::Coll::ALL {
                        for bytes in [1u64, 1 << 20, 1 << 40] {
                            let _ = model.choose(coll, bytes, 1);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn result_calibration_and_plan_files_never_panic(which in 0usize..3, edits in edits(), cut in 900usize..1001, dup in any::<usize>()) {
        match which {
            0 => {
                let text = mutate(&seed("fuzz/corpus/verify_result/verify-h200x2-both-eager-6rows.json"), &edits, cut, dup);
                bad_input_only(planner::calibrate::read_text(&text, "m.json", &Default::default()))?;
                if let Ok(run) = planner::result_file::VerifyRun::from_json(&text, "m.json") {
                    let again = planner::result_file::VerifyRun::from_json(&run.to_json().unwrap(), "again.json").unwrap();
                    prop_assert_eq!(run.rows.len(), again.rows.len());
                } else if let Err(e) = planner::result_file::VerifyRun::from_json(&text, "m.json") {
                    prop_assert_eq!(e.exit_code(), 2);
                }
            }
            1 => {
                let text = mutate(&seed("bench/results/calibration-cv-2026-12-01/calibration-nccl.json"), &edits, cut, dup);
                match planner::calibrate::Calibration::from_json(&text, "m.json") {
                    Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
                    Ok(cal) => {
                        let again = planner::calibrate::Calibration::from_json(&cal.to_json().unwrap(), "again.json").unwrap();
                        prop_assert_eq!(cal.pairs.len(), again.pairs.len());
                        let candidates: Vec<_> = cal.pairs.iter().map(|p| p.pair()).collect();
                        for bytes in [0u64, 1, 1 << 20, u64::MAX] {
                            let _ = cal.pick(planner::model::Coll::AllReduce, bytes, &candidates);
                        }
                    }
                }
            }
            _ => {
                let text = mutate(&seed("fuzz/corpus/tuner_plan/verify-h200x2.json"), &edits, cut, dup);
                if let Ok(plan) = nccl_tuner_planner::plan::Plan::from_json(&text) {
                    let again = nccl_tuner_planner::plan::Plan::from_json(&plan.to_json().unwrap()).unwrap();
                    prop_assert_eq!(plan.rules.len(), again.rules.len());
                }
            }
        }
    }

    #[test]
    fn measurement_files_never_panic(which in 0usize..3, edits in edits(), cut in 0usize..1001, dup in any::<usize>()) {
        let file = [
            "tests/data/calibrate/nccl-tests-ring-ll.txt",
            "tests/data/calibrate/nccl-tests-J-ring-ll.json",
            "fuzz/corpus/inspector/allreduce-24.jsonl",
        ][which];
        let mut text = mutate(&seed(file), &edits, cut, dup);
        if which == 2 {
            text.remove(0); // the fuzz seed's first byte picks options
        }
        match planner::calibrate::read_text(&text, "m.txt", &Default::default()) {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            // Issue 28: a 0-byte row or a time of 0 is left out (it made the fit of its pair fail).
            Ok(m) => prop_assert!(m.rows.iter().all(|r| r.bytes > 0 && r.time_us.is_normal() && r.time_us > 0.0)),
        }
    }

    #[test]
    fn typed_strings_never_panic_and_read_back(text in prop_oneof![
        any::<String>(),
        "[a-zA-Z_-]{0,10}/[a-zA-Z0-9]{0,8}",
        "\\^?([a-z]{0,10}:)?[a-zA-Z0-9,^]{0,20}(;[a-z]{0,10}:[a-zA-Z0-9,^]{0,12}){0,3}",
    ]) {
        use planner::model::knobs::EnableMatrix;
        use planner::nccl_env::NcclEnv;
        match planner::model::Pair::parse(&text) {
            Err(e) => prop_assert_eq!(e.exit_code(), 2),
            Ok(pair) => prop_assert_eq!(planner::model::Pair::parse(&pair.to_string()).ok(), Some(pair)),
        }
        bad_input_only(planner::dtype::Dtype::parse(&text))?;
        bad_input_only(planner::measure::Backend::parse_list(&text))?;
        bad_input_only(planner::verify::PairSelection::parse(&text))?;
        // ncclGetLevel's reading never fails: a level, an old numeric level, or ignored with a warning.
        let _ = planner::nccl_env::nccl_level(&text);
        let level_env = planner::nccl_env::NcclEnv::from_pairs([("NCCL_P2P_LEVEL".to_string(), text.clone())]);
        prop_assert!(level_env.p2p_level.is_some() || !level_env.warnings.is_empty() || text.is_empty());
        for var in ["NCCL_ALGO", "NCCL_PROTO"] {
            let env = NcclEnv::from_pairs([(var.to_string(), text.clone())]);
            bad_input_only(EnableMatrix::from_env(&env))?;
            let flat = EnableMatrix::from_env_flat(&env);
            prop_assert!(flat.algo.iter().flatten().chain(flat.proto.iter().flatten()).all(|v| (0..=2).contains(v)));
        }
    }

    #[test]
    fn nccl_environment_values_never_panic(
        values in prop::collection::vec(prop_oneof![
            "-?[0-9]{1,20}",
            "0x[0-9a-fA-F]{1,17}",
            "( ?-?[0-9]{1,20}){1,7}",
            any::<String>(),
        ], 6),
    ) {
        use planner::limits::{MAX_CHANNELS, MAX_THREADS};
        use planner::model::{Algo, Proto};
        use planner::nccl_env::NcclEnv;
        let names = ["NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_THREAD_THRESHOLDS", "NCCL_NET_OVERHEAD", "NCCL_PAT_ENABLE", "NCCL_NVLS_ENABLE"];
        let env = NcclEnv::from_pairs(names.iter().map(|n| n.to_string()).zip(values));
        match capture_model(env, newest_table()) {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(model) => {
                for algo in Algo::ALL {
                    for proto in Proto::ALL {
                        for bytes in [0u64, 1, 1 << 20, 1 << 40] {
                            let (channels, threads) = model.channels_threads(algo, proto, bytes);
                            prop_assert!(channels <= MAX_CHANNELS && threads <= MAX_THREADS, "{:?}/{:?}: {} channels {} threads", algo, proto, channels, threads);
                        }
                    }
                }
                for coll in planner::model::Coll::ALL {
                    let _ = model.choose(coll, 1 << 20, 1);
                }
            }
        }
    }
}

// ---- Issue 28: files that parse but are inconsistent or absurd are refused, or give finite, printable answers.

/// The byte spans of the numbers of a JSON text (a digit or '-' after ':', '[' or ',' and any blanks).
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut prev = b' ';
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if (b.is_ascii_digit() || b == b'-') && matches!(prev, b':' | b'[' | b',') {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            spans.push((start, i));
            prev = b'0';
            continue;
        }
        if !b.is_ascii_whitespace() {
            prev = b;
        }
        i += 1;
    }
    spans
}

/// `text` with its `k`-th number (modulo their count) replaced by `value`.
fn with_number(text: &str, k: usize, value: &str) -> String {
    let spans = number_spans(text);
    let (a, b) = spans[k % spans.len()];
    format!("{}{value}{}", &text[..a], &text[b..])
}

/// Finite numbers from 1e-300 to 9e300, of either sign, and 0.
fn absurd_number() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..10, -300i32..=300).prop_map(|(m, e)| format!("{m}e{e}")),
        (1u32..10, -300i32..=300).prop_map(|(m, e)| format!("-{m}e{e}")),
        Just("0".to_string()),
        Just("5e-324".to_string()),
    ]
}

/// The control characters and escape sequences a hostile file could carry, mixed with text.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z]{0,4}(\u{1b}\\[[0-9;]{0,6}[a-zA-Z]|\u{1b}\\][0-9];[a-z]{0,4}\u{7}|\n|\r|\u{0}|\u{9b}|\u{202e})[a-z]{0,4}",
    ]
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn absurd_tuning_constants_are_refused_or_give_finite_times(k in any::<usize>(), value in absurd_number()) {
        let text = with_number(&seed("tuning-tables/nccl-2.28.json"), k, &value);
        match planner::model::TuningTable::parse(&text, "m.json") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(table) => {
                if let Ok(model) = capture_model(planner::nccl_env::NcclEnv::default(), table) {
                    for coll in planner::model::Coll::ALL {
                        for bytes in [1u64, 1 << 20, 1 << 40] {
                            if let Ok(choice) = model.choose(coll, bytes, 1) {
                                prop_assert!(choice.time_us.is_finite() && choice.time_us >= 0.0,
                                    "{value} at number {k}: {coll:?} {bytes} B: {} µs", choice.time_us);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn absurd_calibrations_are_refused_or_give_finite_positive_times(k in any::<usize>(), value in absurd_number()) {
        let text = with_number(&seed("bench/results/calibration-cv-2026-12-01/calibration-nccl.json"), k, &value);
        match planner::calibrate::Calibration::from_json(&text, "m.json") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(cal) => {
                for p in &cal.pairs {
                    for bytes in (0..=40).map(|s| 1u64 << s).chain([0, 3 << 30, u64::MAX]) {
                        let t = cal.predict_us(p.coll, p.algo, p.proto, bytes).unwrap();
                        prop_assert!(t.is_finite() && t > 0.0, "{value} at number {k}: {bytes} B: {t} µs");
                    }
                }
            }
        }
    }

    #[test]
    fn result_files_never_echo_control_characters_and_wrong_rows_are_never_best(
        host in hostile_text(),
        version in hostile_text(),
        note in hostile_text(),
        row in 0usize..6,
        wrong in prop_oneof![Just(0u64), 1u64..64, Just(1u64 << 63), any::<u64>()],
        fast in any::<bool>(),
    ) {
        let mut v: serde_json::Value = serde_json::from_str(&seed("fuzz/corpus/verify_result/verify-h200x2-both-eager-6rows.json")).unwrap();
        v["machine"]["hosts"][0] = host.into();
        v["machine"]["nccl_version"] = version.into();
        let rows = v["rows"].as_array_mut().unwrap();
        let n = rows.len();
        let r = &mut rows[row % n];
        r["note"] = note.into();
        r["wrong"] = wrong.into();
        if fast {
            // The wrong row the fastest by far: it must still not be the measured best.
            let times = r["times_us"].as_array().unwrap().len();
            r["times_us"] = serde_json::json!(vec![0.001; times]);
            r["median_us"] = serde_json::Value::Null;
        }
        match planner::result_file::VerifyRun::from_json(&v.to_string(), "m.json") {
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{}", e),
            Ok(run) => {
                let clean = |s: &str| !s.chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c));
                prop_assert!(run.machine.hosts.iter().all(|h| clean(h)), "{:?}", run.machine.hosts);
                prop_assert!(run.machine.nccl_version.as_deref().is_none_or(clean));
                prop_assert!(run.rows.iter().all(|r| r.note.as_deref().is_none_or(clean)));
                prop_assert!(wrong <= (1 << 40) * run.machine.world_size as u64);
                let scored = planner::verify::score::score(&run, &planner::verify::score::Recorded::new(&run));
                for s in &scored.rows {
                    prop_assert!(!(s.measured_best && s.row.wrong.is_some_and(|w| w > 0)), "{:?}", s.row);
                }
            }
        }
    }
}
