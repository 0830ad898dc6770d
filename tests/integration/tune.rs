//! `planner tune`: plans from the committed 2x H200 verify runs and calibration, the NCCL example CSV, `--show`,
//! the plan loaded by the plugin's own code, and bad inputs.

use crate::common::planner;
use nccl_tuner_planner::context::{Decision, InitSettings, TunerContext};
use nccl_tuner_planner::plan::{fnv1a64_hex, Algo, Coll, Plan, Proto, SourceKind};
use std::path::PathBuf;

const FINAL: &str = "bench/results/verify-h200x2-final-2026-11-30/verify.json";
const PROCS_1: &str = "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-1proc.json";
const PROCS_2: &str = "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-2proc.json";
const CALIBRATION: &str = "bench/results/calibration-cv-2026-12-01/calibration-nccl.json";

const MIB: u64 = 1 << 20;

fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

/// A fresh path under the target's tmp dir.
fn temp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tune");
    std::fs::create_dir_all(&dir).expect("create temp dir");
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("{}-{n}-{name}", std::process::id()))
}

/// `planner tune ARGS -o OUT` from the repository root (relative paths as a user types them); returns the plan
/// file's text and stdout.
fn tune(args: &[&str], out_name: &str) -> (String, String) {
    let out = temp(out_name);
    let output = planner()
        .current_dir(root())
        .env("SOURCE_DATE_EPOCH", "1796000000")
        .arg("tune")
        .args(args)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run planner");
    assert!(
        output.status.success(),
        "planner tune {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&out).expect("plan written");
    (text, String::from_utf8_lossy(&output.stdout).into_owned())
}

fn plan_from(args: &[&str]) -> Plan {
    let (text, _) = tune(args, "plan.json");
    Plan::from_json(&text).expect("tune writes a plan the plugin accepts")
}

/// (min, max, algorithm, protocol) of every rule, in order.
fn bands(plan: &Plan) -> Vec<(u64, u64, Algo, Proto)> {
    plan.rules
        .iter()
        .map(|r| (r.min_bytes, r.max_bytes, r.algorithm, r.protocol))
        .collect()
}

fn pick_at(plan: &Plan, bytes: u64) -> (Algo, Proto) {
    let p = plan
        .pick(Coll::AllReduce as i32, 2, 1, bytes)
        .unwrap_or_else(|| panic!("no rule at {bytes} B"));
    (p.algorithm, p.protocol)
}

#[test]
fn verify_plan_picks_ring_ll_at_2_mib_and_keeps_nccl_within_the_margin() {
    let plan = plan_from(&["--from", FINAL]);
    // Measured medians (NCCL backend, 5 repeats) in the committed run:
    // 2 MiB: NCCL's choice Ring/Simple 28.28 (pinned) / 28.50 (auto), Ring/LL 22.08: 21.9 % faster, repeats apart
    assert_eq!(pick_at(&plan, 2 * MIB), (Algo::Ring, Proto::Ll));
    // 4 MiB: Ring/LL128 30.78 vs Ring/Simple 33.40: 7.8 % faster
    assert_eq!(pick_at(&plan, 4 * MIB), (Algo::Ring, Proto::Ll128));
    // within the 5 % margin, NCCL's choice stays: 8 MiB Ring/LL128 0.5 % faster, 64 MiB Tree/Simple 1.7 %,
    // 128 MiB Tree/Simple 4.0 %
    assert_eq!(pick_at(&plan, 8 * MIB), (Algo::Ring, Proto::Simple));
    assert_eq!(pick_at(&plan, 64 * MIB), (Algo::Ring, Proto::Simple));
    assert_eq!(pick_at(&plan, 128 * MIB), (Algo::Ring, Proto::Simple));
    // 512 B: Tree/LL's median is 6.7 % below NCCL's Ring/LL, but its repeats overlap NCCL's
    assert_eq!(pick_at(&plan, 512), (Algo::Ring, Proto::Ll));
    // three bands, edges at log2 midpoints: sqrt(2 MiB x 4 MiB) = 2965820.99, sqrt(4 MiB x 8 MiB) = 5931641.99
    assert_eq!(
        bands(&plan),
        [
            (0, 2_965_820, Algo::Ring, Proto::Ll),
            (2_965_821, 5_931_641, Algo::Ring, Proto::Ll128),
            (5_931_642, u64::MAX, Algo::Ring, Proto::Simple),
        ]
    );
    for r in &plan.rules {
        assert_eq!(
            (r.collective, r.n_ranks, r.n_nodes),
            (Coll::AllReduce, Some(2), Some(1))
        );
        assert_eq!(r.channels, None);
    }
    // the Ring/LL band's time is the one at its largest measured size, 2 MiB
    let measured = plan.rules[0].measured_us.expect("measured time");
    assert!((measured - 22.0752).abs() < 1e-3, "{measured}");
    let p = &plan.provenance;
    assert_eq!(p.source_kind, SourceKind::Verify);
    assert_eq!(p.source_file, FINAL);
    let bytes = std::fs::read(format!("{}/{FINAL}", root())).unwrap();
    assert_eq!(p.source_hash, fnv1a64_hex(&bytes));
    assert_eq!(p.nccl_version.as_deref(), Some("2.28.3"));
    assert_eq!(p.machine, "2x NVIDIA H200 on vm");
    assert_eq!(p.margin_percent, 5.0);
    assert_eq!(p.created_unix, 1_796_000_000, "SOURCE_DATE_EPOCH");
    // the canonical topology hash: the same one the calibration of these runs records
    assert_eq!(p.topology_hash.as_deref(), Some("d08830d0a48245b4"));
}

#[test]
fn a_smaller_margin_lets_smaller_gains_through() {
    let plan = plan_from(&["--from", FINAL, "--margin", "3"]);
    // 128 MiB: Tree/Simple 452.09 vs Ring/Simple 470.77 (auto) / 472.7 (pinned): 4.0 %, repeats apart
    assert_eq!(pick_at(&plan, 128 * MIB), (Algo::Tree, Proto::Simple));
    // 64 MiB: 1.7 % is still within 3 %
    assert_eq!(pick_at(&plan, 64 * MIB), (Algo::Ring, Proto::Simple));
    assert_eq!(plan.provenance.margin_percent, 3.0);
}

#[test]
fn the_three_committed_nccl_runs_give_the_same_plan_at_the_default_margin() {
    let plans: Vec<Plan> = [FINAL, PROCS_1, PROCS_2]
        .iter()
        .map(|f| plan_from(&["--from", f]))
        .collect();
    assert_eq!(bands(&plans[0]), bands(&plans[1]));
    assert_eq!(bands(&plans[0]), bands(&plans[2]));
}

#[test]
fn nccl_csv_is_the_example_plugins_format() {
    let (csv, _) = tune(&["--from", FINAL, "--format", "nccl-csv"], "plan.csv");
    let expected = "\
# NCCL example tuner config written by planner 0.1.0 from verify bench/results/verify-h200x2-final-2026-11-30/verify.json (2x NVIDIA H200 on vm, NCCL 2.28.3)
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
allreduce,0,2965820,ring,ll,-1,1,2,-1,-1
allreduce,2965821,5931641,ring,ll128,-1,1,2,-1,-1
allreduce,5931642,18446744073709551615,ring,simple,-1,1,2,-1,-1
";
    assert_eq!(csv, expected);
}

#[test]
fn making_a_plan_prints_every_decision_and_the_bands() {
    let (_, stdout) = tune(&["--from", FINAL], "plan.json");
    let line = |size: &str| {
        stdout
            .lines()
            .find(|l| {
                l.starts_with("| AllReduce") && l.split('|').nth(2).map(str::trim) == Some(size)
            })
            .unwrap_or_else(|| panic!("no decision line for {size}:\n{stdout}"))
            .to_string()
    };
    let two = line("2 MiB");
    assert!(two.contains("| Ring/Simple   | auto row |"), "{two}");
    assert!(
        two.contains("|   21.9 | Ring/LL     | faster beyond the margin"),
        "{two}"
    );
    assert!(line("512 B").contains("repeats overlap: NCCL's kept"));
    assert!(line("64 MiB").contains("within the margin: NCCL's kept"));
    assert!(
        stdout.contains("| 2.8 MiB - 5.7 MiB | Ring/LL128  |"),
        "{stdout}"
    );

    // --json: the plan as written, one decision per measured size (30 sizes, 8 B .. 4 GiB), the notes
    let (text, stdout) = tune(&["--from", FINAL, "--json"], "plan.json");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    let decisions = json["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 30);
    let two = decisions.iter().find(|d| d["bytes"] == 2 * MIB).unwrap();
    assert_eq!(two["reason"], "faster");
    assert_eq!(two["pick"]["algorithm"], "Ring");
    assert_eq!(two["pick"]["protocol"], "LL");
    assert_eq!(two["nccl"]["protocol"], "Simple");
    // The plan file as `--json` prints it (docs/json.md: schema spellings, rounded floats).
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut file: serde_json::Value =
        serde_json::from_str(&planner::report::json::render_value(file, "").unwrap()).unwrap();
    file.as_object_mut().unwrap().remove("schema_version");
    assert_eq!(json["plan"], file);
}

#[test]
fn show_prints_the_bands_and_json() {
    let (text, _) = tune(&["--from", FINAL], "plan.json");
    let path = temp("show.json");
    std::fs::write(&path, &text).unwrap();
    let output = planner()
        .arg("tune")
        .arg("--show")
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let expected_rows = [
        "| AllReduce  |      2 |      1 |         0 |   2965820 | 0 B - 2.8 MiB     | Ring/LL     |        - |          22.67 |         22.08 |    0 |",
        "| AllReduce  |      2 |      1 |   2965821 |   5931641 | 2.8 MiB - 5.7 MiB | Ring/LL128  |        - |          30.46 |         30.78 |    1 |",
        "| AllReduce  |      2 |      1 |   5931642 |       max | 5.7 MiB - max     | Ring/Simple |        - |       11945.67 |      12411.23 |    2 |",
    ];
    for row in expected_rows {
        assert!(stdout.lines().any(|l| l == row), "missing {row}\n{stdout}");
    }
    assert!(stdout.starts_with("# plan v1 for the NCCL tuner plugin: 3 rules, made by planner 0.1.0 at unix 1796000000\n# machine: 2x NVIDIA H200 on vm; NCCL 2.28.3; topology d08830d0a48245b4\n"), "{stdout}");
    let output = planner()
        .arg("tune")
        .arg("--show")
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bands = json["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 3);
    assert_eq!(bands[1]["min_bytes"], 2_965_821);
    assert_eq!(bands[1]["protocol"], "LL128");
    assert_eq!(bands[1]["rule"], 1);
    assert_eq!(bands[2]["max_bytes"], u64::MAX);
    assert_eq!(json["provenance"]["source_kind"], "verify");
}

#[test]
fn the_plugin_loads_the_plan_and_steers_2_mib_to_ring_ll() {
    let (text, _) = tune(&["--from", FINAL], "plan.json");
    let path = temp("plugin.json");
    std::fs::write(&path, &text).unwrap();
    let settings = InitSettings {
        plan_path: Some(path),
        nccl_version: Some((2, 28, 3)),
        log_decisions: false,
    };
    // the plugin's own init and getCollInfo (tuner/src/context.rs), with no logger
    let context = TunerContext::new(2, 1, None, &settings);
    assert!(context.is_active(), "the plan applies to 2 ranks on 1 node");
    // NCCL's float[7][3] cost table at 2 MiB: Tree and Ring usable, NCCL's minimum Ring/Simple, the rest masked
    let mut table = [-1.0f32; 21];
    table[..6].copy_from_slice(&[40.0, 35.0, 33.0, 30.0, 29.0, 28.0]);
    let mut channels: i32 = 24;
    // SAFETY: table holds 7 x 3 floats and channels is a live i32, as NCCL passes them.
    let decision = unsafe {
        context.get_coll_info(
            Coll::AllReduce as i32,
            2 << 20,
            table.as_mut_ptr(),
            7,
            3,
            &mut channels,
        )
    };
    match decision {
        Decision::Applied(pick) => {
            assert_eq!((pick.algorithm, pick.protocol), (Algo::Ring, Proto::Ll));
            assert_eq!(pick.rule_index, 0);
        }
        other => panic!("expected the plan to steer, got {other:?}"),
    }
    // Ring/LL (algorithm 1, protocol 0) is now the minimum; channels untouched
    assert_eq!(table[3], 0.0);
    assert_eq!(table[5], 28.0);
    assert_eq!(channels, 24);
    // another shape: the plan does not apply
    assert!(!TunerContext::new(8, 1, None, &settings).is_active());
}

#[test]
fn calibration_plan_uses_the_stock_model_from_the_calibrations_verify_files() {
    let (text, stdout) = tune(&["--calibration", CALIBRATION], "cal.json");
    let plan = Plan::from_json(&text).unwrap();
    assert_eq!(plan.provenance.source_kind, SourceKind::Calibration);
    assert_eq!(
        plan.provenance.topology_hash.as_deref(),
        Some("d08830d0a48245b4")
    );
    // NCCL's choice from the stock model on the verify file's topology (the calibration's first source)
    assert!(stdout.contains("| stock model |"), "{stdout}");
    // calibrated at 2 MiB: Ring/LL 21.45 vs the stock pick Ring/Simple 28.31 (24 % faster)
    assert_eq!(pick_at(&plan, 2 * MIB), (Algo::Ring, Proto::Ll));
    assert_eq!(pick_at(&plan, MIB), (Algo::Ring, Proto::Ll));
    assert_eq!(pick_at(&plan, 16 * MIB), (Algo::Ring, Proto::Simple));
    // every rule carries the calibrated time, none a measured one
    assert!(plan
        .rules
        .iter()
        .all(|r| r.predicted_us.is_some() && r.measured_us.is_none()));
    assert_eq!(plan.rules.first().map(|r| r.min_bytes), Some(0));
    assert_eq!(plan.rules.last().map(|r| r.max_bytes), Some(u64::MAX));
}

fn fails(args: &[&std::ffi::OsStr]) -> String {
    let output = planner()
        .current_dir(root())
        .arg("tune")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

#[test]
fn bad_inputs_exit_2_with_one_line_naming_the_file() {
    let out = temp("never.json");
    let os = |s: &str| std::ffi::OsString::from(s);
    let o = out.as_os_str();
    let e = fails(&[&os("--from"), &os("no/such/results.json"), &os("-o"), o]);
    assert!(e.contains("no/such/results.json: cannot read"), "{e}");
    let e = fails(&[&os("--from"), &os(CALIBRATION), &os("-o"), o]);
    assert!(
        e.contains(&format!("{CALIBRATION}: not a planner verify result file")),
        "{e}"
    );
    let e = fails(&[&os("--calibration"), &os(FINAL), &os("-o"), o]);
    assert!(
        e.contains(&format!("{FINAL}: not a calibration file")),
        "{e}"
    );
    let e = fails(&[&os("--from"), &os(FINAL), &os("--margin=-1"), &os("-o"), o]);
    assert!(e.contains("invalid --margin -1"), "{e}");
    let e = fails(&[
        &os("--from"),
        &os(FINAL),
        &os("--ranks"),
        &os("4"),
        &os("-o"),
        o,
    ]);
    assert!(e.contains("--ranks 4 disagrees with"), "{e}");
    assert!(!out.exists(), "no plan is written on bad input");

    // a verify file with only native rows
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{}/{FINAL}", root())).unwrap())
            .unwrap();
    run["rows"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["backend"] == "native");
    let native = temp("native-only.json");
    std::fs::write(&native, serde_json::to_string(&run).unwrap()).unwrap();
    let e = fails(&[&os("--from"), native.as_os_str(), &os("-o"), o]);
    assert!(e.contains("native-only.json: no usable NCCL rows"), "{e}");

    // --show: a truncated plan and a plan with an unknown protocol
    let (text, _) = tune(&["--from", FINAL], "plan.json");
    let truncated = temp("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let e = fails(&[&os("--show"), truncated.as_os_str()]);
    assert!(
        e.contains("truncated.json: invalid plan: not JSON at line"),
        "{e}"
    );
    let bad = temp("bad-proto.json");
    std::fs::write(&bad, text.replacen("\"LL128\"", "\"LL256\"", 1)).unwrap();
    let e = fails(&[&os("--show"), bad.as_os_str()]);
    assert!(
        e.contains("bad-proto.json: invalid plan: rules[1].protocol: unknown protocol \"LL256\""),
        "{e}"
    );
}

#[test]
fn calibration_topology_from_flags_or_none_at_all() {
    let calibration = format!("{}/{CALIBRATION}", root());
    let elsewhere = std::env::temp_dir();
    let run = |extra: &[&str]| {
        let out = temp("cal.json");
        let output = planner()
            .current_dir(&elsewhere)
            .args(["tune", "--calibration", &calibration, "-o"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // from another directory the calibration's relative source paths do not resolve: calibrated picks only
    let (code, stdout, stderr) = run(&[]);
    assert_eq!(code, Some(0));
    assert!(
        stderr.contains("no topology for the stock NCCL model"),
        "{stderr}"
    );
    assert!(
        stdout.contains("NCCL's choice unknown: fastest taken"),
        "{stdout}"
    );
    // NCCL's own topology dump of the machine: the stock model's picks, and no topology warning
    let topo = crate::common::golden("topo.xml");
    let (code, stdout, stderr) = run(&["--topo", &topo]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("| stock model |"), "{stdout}");
    assert!(!stderr.contains("is not the topology"), "{stderr}");
    // a topology the user names must load
    let (code, _, stderr) = run(&["--topo", "/no/such/topo.xml"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("/no/such/topo.xml: cannot read"),
        "{stderr}"
    );
}
