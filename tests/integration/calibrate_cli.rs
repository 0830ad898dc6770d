//! `planner calibrate` and `--calibration` from the outside: committed result
//! files -> CAL.json -> `explain` on the captured 2x H200 topology and
//! `verify --load`; the refusals (another machine, NCCL's own formats); every
//! input format and bad inputs on the command line.

use crate::common::{golden, json_of, planner, stderr, stdout, with_scratch};
use planner::calibrate::{self, Calibration};
use planner::model::{Algo, Coll, Proto};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

const FINAL: &str = "bench/results/verify-h200x2-final-2026-11-30/verify.json";
const PROCS_1: &str = "bench/results/verify-h200x2-procs-2026-11-30/nccl-eager-1proc.json";
const TEXT: &str = "tests/data/calibrate/nccl-tests-ring-ll.txt";
const J_JSON: &str = "tests/data/calibrate/nccl-tests-J-ring-ll.json";
const INSPECTOR: &str = "tests/data/calibrate/nccl-inspector-allreduce.jsonl";

fn repo(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory `name` in this test's scratch directory.
fn scratch(name: &str) -> PathBuf {
    with_scratch(|s| s.subdir(name))
}

fn run(args: &[&str]) -> Output {
    planner().args(args).output().unwrap()
}

fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    out
}

/// Exit 2 with a one-line error, the last line on stderr (after any
/// progress lines); that line.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("planner: error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{args:?}: {err}");
    assert_eq!(err.lines().last(), Some(errors[0]), "{args:?}: {err}");
    errors[0].to_string()
}

/// `planner calibrate FILE... -o DIR/NAME` (NCCL backend); the file's path.
fn calibrate_to(dir: &std::path::Path, name: &str, files: &[&str]) -> String {
    let cal = dir.join(name).to_string_lossy().into_owned();
    let mut args = vec!["calibrate".to_string()];
    args.extend(files.iter().map(|f| repo(f)));
    args.extend(["-o".to_string(), cal.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&args);
    cal
}

fn topo() -> String {
    golden("topo.xml")
}

fn pair_of(v: &Value) -> String {
    format!(
        "{}/{}",
        v["algorithm"].as_str().unwrap(),
        v["protocol"].as_str().unwrap()
    )
}

// ---------------------------------------------------------------------------
// calibrate -> CAL.json -> explain on the captured topology

#[test]
fn calibration_of_a_verify_file_applies_to_the_captured_topology() {
    let dir = scratch("topology");
    let cal_path = dir.join("cal.json").to_string_lossy().into_owned();
    let out = ok(&["calibrate", &repo(FINAL), "-o", &cal_path]);
    // progress on stderr, the table on stdout
    let err = stderr(&out);
    assert!(
        err.contains("planner-verify, 390 rows (180 native, 210 nccl)"),
        "{err}"
    );
    assert!(
        err.contains("fitted 6 pair(s) of the nccl backend in"),
        "{err}"
    );
    assert!(err.contains(&format!("wrote {cal_path}")), "{err}");
    let text = stdout(&out);
    assert!(
        text.starts_with("calibration of the nccl backend: 2 GPUs"),
        "{text}"
    );
    assert_eq!(text.matches("| AllReduce  |").count(), 6, "{text}");

    // The verify files were taken on the live probe of the VM (their own
    // topology_hash, FNV of the raw XML, differs from boot to boot); the
    // calibration's hash covers what the model uses and equals that of NCCL's
    // dump committed as tests/golden/h200x2-nvswitch-vm/topo.xml.
    let cal = Calibration::load(&cal_path).unwrap();
    let golden_xml = std::fs::read_to_string(topo()).unwrap();
    let golden_hash = calibrate::topology_hash(&golden_xml, "topo.xml").unwrap();
    assert_eq!(
        cal.machine.topology_hash.as_deref(),
        Some(golden_hash.as_str())
    );
    assert_eq!(cal.machine.gpu_count, Some(2));
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(repo(FINAL)).unwrap()).unwrap();
    assert_ne!(
        raw["machine"]["topology_hash"].as_str(),
        Some(golden_hash.as_str())
    );
}

#[test]
fn explain_shows_calibrated_time_busbw_and_pick_next_to_nccls() {
    let dir = scratch("explain");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    let cal = Calibration::load(&cal_path).unwrap();
    let t = topo();
    let base = [
        "explain",
        "--topo",
        &t,
        "--nccl-version",
        "2.28",
        "--size",
        "2M",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .chain(["--calibration", cal_path.as_str()].iter())
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let args = with(&["--json"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = json_of(&ok(&args));
    // Every pair has the key; measured pairs get the calibration's own time
    // at 2 MiB, the others (masked, or NVLS: never measured) null.
    let pairs = v["pairs"].as_array().unwrap();
    let mut calibrated = 0;
    for p in pairs {
        let algo = Algo::parse(p["algorithm"].as_str().unwrap()).unwrap();
        let proto = Proto::parse(p["protocol"].as_str().unwrap()).unwrap();
        let expected = if p["usable"].as_bool().unwrap() {
            cal.predict_us(Coll::AllReduce, algo, proto, 2 << 20)
        } else {
            None
        };
        match expected {
            Some(e) => {
                calibrated += 1;
                let got = p["calibrated_time_us"].as_f64().unwrap();
                assert!((got - e).abs() < 1e-6 * e, "{}: {got} vs {e}", pair_of(p));
                // busbw from that time with nccl-tests' factor: 2(n-1)/n = 1 on the capture's 2 ranks
                let busbw = p["calibrated_busbw_gbs"].as_f64().unwrap();
                let want = (2u64 << 20) as f64 / (e * 1000.0);
                assert!((busbw - want).abs() < 1e-6 * want, "{}", pair_of(p));
            }
            None => {
                assert!(p["calibrated_time_us"].is_null(), "{}", pair_of(p));
                assert!(p.get("calibrated_time_us").is_some(), "{}", pair_of(p));
            }
        }
    }
    assert_eq!(calibrated, 6);
    // At 2 MiB NCCL's model picks Ring/Simple; measured, Ring/LL is 28 %
    // faster (bench/results/verify-h200x2-final-2026-11-30), and so is the
    // calibrated pick.
    assert_eq!(pair_of(&v["winner"]), "Ring/Simple");
    let c = &v["calibration"];
    assert_eq!(c["backend"], "nccl");
    assert_eq!(pair_of(&c["calibrated_pick"]), "Ring/LL");
    let pick_us = c["calibrated_pick"]["time_us"].as_f64().unwrap();
    let nccl_us = c["nccl_pick_calibrated_time_us"].as_f64().unwrap();
    let ring_ll = cal
        .predict_us(Coll::AllReduce, Algo::Ring, Proto::Ll, 2 << 20)
        .unwrap();
    let ring_simple = cal
        .predict_us(Coll::AllReduce, Algo::Ring, Proto::Simple, 2 << 20)
        .unwrap();
    // equal up to the 7 significant digits `--json` prints (docs/json.md)
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
    assert!(
        same(pick_us, ring_ll) && same(nccl_us, ring_simple),
        "{pick_us} {nccl_us} vs {ring_ll} {ring_simple}"
    );
    let margin = c["margin_us"].as_f64().unwrap();
    assert!((margin - (ring_simple - ring_ll)).abs() < 1e-6 * ring_simple);
    assert!(margin > 0.2 * ring_ll, "{margin} {ring_ll}");
    let pct = 100.0 * margin / ring_ll;
    assert!((c["margin_pct"].as_f64().unwrap() - pct).abs() < 1e-6 * pct);

    // The table: three more columns and the line on the two picks.
    let args = with(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = stdout(&ok(&args));
    for col in [
        "calibrated us",
        "calibrated busbw GB/s",
        "calibrated margin",
    ] {
        assert!(text.contains(col), "{col}: {text}");
    }
    assert!(text.contains("calibrated pick"), "{text}");
    assert!(
        text.contains(&format!(
            "Calibrated model ({cal_path}, nccl backend): picks Ring/LL among the 6 measured of the 7 pairs NCCL allows here, {ring_ll:.2} us; NCCL's pick Ring/Simple takes {ring_simple:.2} us there"
        )),
        "{text}"
    );

    // Without --calibration nothing calibrated appears.
    let plain: Vec<&str> = base.iter().chain(["--json"].iter()).copied().collect();
    let plain = stdout(&ok(&plain));
    assert!(!plain.contains("calibrat"), "{plain}");
    let plain_text = stdout(&ok(&base));
    assert!(!plain_text.contains("alibrat"), "{plain_text}");
}

#[test]
fn explain_sweep_prints_both_crossover_maps() {
    let dir = scratch("sweep");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    let cal = Calibration::load(&cal_path).unwrap();
    let t = topo();
    let args = [
        "explain",
        "--topo",
        &t,
        "--nccl-version",
        "2.28",
        "--nvls",
        "off",
        "--sweep",
        "8..4G",
        "--calibration",
        &cal_path,
    ];
    let text = stdout(&ok(&args));
    // NCCL's map first, unchanged (Ring/LL -> Ring/Simple at 1.6 MiB), then the calibrated one.
    let plain = stdout(&ok(&args[..args.len() - 2]));
    assert!(text.starts_with(&plain), "{text}");
    assert!(
        plain.contains("Ring/LL -> Ring/Simple at 1715180 bytes"),
        "{plain}"
    );
    assert!(text.contains("Calibrated crossover map ("), "{text}");

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v = json_of(&ok(&json_args));
    assert_eq!(v["calibrated"]["backend"], "nccl");
    let bands = v["calibrated"]["bands"].as_array().unwrap();
    // contiguous, covering 8 B .. 4 GiB
    assert_eq!(bands[0]["from_bytes"], 8);
    assert_eq!(bands.last().unwrap()["to_bytes"], 4u64 << 30);
    let band_at = |bytes: u64| {
        bands
            .iter()
            .find(|b| {
                b["from_bytes"].as_u64().unwrap() <= bytes
                    && bytes <= b["to_bytes"].as_u64().unwrap()
            })
            .unwrap()
    };
    // The calibrated pick keeps Ring/LL at 2 MiB and moves to LL128 between 2 and 4 MiB,
    // where the measurements put the crossover (NCCL's model: Simple from 1.6 MiB).
    let b2 = band_at(2 << 20);
    assert_eq!(
        (b2["algorithm"].as_str(), b2["protocol"].as_str()),
        (Some("Ring"), Some("LL"))
    );
    let next = bands
        .iter()
        .find(|b| b["from_bytes"].as_u64().unwrap() > b2["to_bytes"].as_u64().unwrap())
        .unwrap();
    assert_eq!(
        (next["algorithm"].as_str(), next["protocol"].as_str()),
        (Some("Ring"), Some("LL128"))
    );
    let x = next["starts_at_bytes"].as_u64().unwrap();
    assert!(x > 2 << 20 && x <= 4 << 20, "{x}");
    // exact: at x the calibrated Ring/LL128 is faster than every other pair,
    // one byte less it is not
    let time = |a, p, b| cal.predict_us(Coll::AllReduce, a, p, b).unwrap();
    let best_other = |b: u64| {
        [
            (Algo::Ring, Proto::Ll),
            (Algo::Ring, Proto::Simple),
            (Algo::Tree, Proto::Ll),
            (Algo::Tree, Proto::Ll128),
            (Algo::Tree, Proto::Simple),
        ]
        .iter()
        .map(|&(a, p)| time(a, p, b))
        .fold(f64::MAX, f64::min)
    };
    assert!(time(Algo::Ring, Proto::Ll128, x) < best_other(x));
    assert!(time(Algo::Ring, Proto::Ll128, x - 1) >= best_other(x - 1));
    // and the text says so
    assert!(
        text.contains(&format!("Ring/LL -> Ring/LL128 at {x} bytes")),
        "{text}"
    );
}

#[test]
fn calibration_refuses_another_machine_unless_forced() {
    let dir = scratch("refuse");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    // NCCL's own dump as a fixture is the same machine
    ok(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--calibration",
        &cal_path,
    ]);
    // another topology
    let err = refused(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--calibration",
        &cal_path,
    ]);
    assert!(
        err.contains(&format!("{cal_path} was measured on topology"))
            && err.contains("not the same machine (--force to apply it anyway)"),
        "{err}"
    );
    let out = ok(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--calibration",
        &cal_path,
        "--force",
    ]);
    assert!(stdout(&out).contains("calibrated us"));
    // the same node twice: 4 GPUs
    let err = refused(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--nodes",
        "2",
        "--calibration",
        &cal_path,
    ]);
    assert!(
        err.contains("was measured on 2 GPUs, this run has 4"),
        "{err}"
    );
    // a collective it has no pair of, aggregated groups
    let err = refused(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--coll",
        "all-gather",
        "--calibration",
        &cal_path,
    ]);
    assert!(
        err.contains("has no fitted pair for AllGather (it calibrates AllReduce)"),
        "{err}"
    );
    let err = refused(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--ops",
        "4",
        "--calibration",
        &cal_path,
    ]);
    assert!(err.contains("--calibration with --ops 4"), "{err}");
    // not a calibration file
    let err = refused(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--calibration",
        &repo(FINAL),
    ]);
    assert!(err.contains("not a calibration file"), "{err}");
}

#[test]
fn calibration_never_changes_nccls_own_formats() {
    let dir = scratch("formats");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    let t = topo();
    let log = golden("nccl-init-rank0.log");
    for extra in [
        vec!["--nccl-table"],
        vec!["--nccl-calls", "--sweep", "4..4G"],
        vec!["--nccl-log", log.as_str()],
    ] {
        let mut args = vec!["explain", "--topo", &t, "--calibration", &cal_path];
        args.extend(extra.iter().copied());
        let err = refused(&args);
        // --nccl-log takes none of explain's model flags: refused as a conflict naming both.
        assert!(
            err.contains(&format!(
                "--calibration cannot be combined with {}",
                extra[0]
            )) || (err.contains("'--calibration <CAL.json>' cannot be used with")
                && err.contains(extra[0])),
            "{err}"
        );
    }
}

// ---------------------------------------------------------------------------
// verify --load --calibration

#[test]
fn verify_load_rescores_another_run_with_the_calibration() {
    let dir = scratch("verify");
    // fit on one run, score another (one process per GPU pair of threads)
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    let cal = Calibration::load(&cal_path).unwrap();
    let test = repo(PROCS_1);
    let stock = json_of(&ok(&["verify", "--load", &test, "--json"]));
    let out = ok(&[
        "verify",
        "--load",
        &test,
        "--calibration",
        &cal_path,
        "--json",
    ]);
    let v = json_of(&out);
    assert!(
        v["predictor"]
            .as_str()
            .unwrap()
            .starts_with("calibrated model of the nccl backend"),
        "{}",
        v["predictor"]
    );
    assert_eq!(v["stock"]["predictor"], stock["predictor"]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 210);
    for (i, r) in rows.iter().enumerate() {
        // the stock model's numbers are those of a plain --load
        assert_eq!(
            v["stock"]["rows"][i]["predicted_us"],
            stock["rows"][i]["predicted_us"]
        );
        assert_eq!(
            v["stock"]["rows"][i]["error_pct"],
            stock["rows"][i]["error_pct"]
        );
        let label = r["label"].as_str().unwrap();
        if label == "auto" {
            assert!(r["predicted_us"].is_null());
            continue;
        }
        let (a, p) = label.split_once('/').unwrap();
        let want = cal
            .predict_us(
                Coll::AllReduce,
                Algo::parse(a).unwrap(),
                Proto::parse(p).unwrap(),
                r["bytes"].as_u64().unwrap(),
            )
            .unwrap();
        assert!(
            (r["predicted_us"].as_f64().unwrap() - want).abs() < 1e-6 * want,
            "{label}"
        );
    }
    // Re-scored: the calibrated median |error| is a fraction of the stock
    // model's in every regime (README of calibration-cv-2026-12-01: 2-4 % vs 20-28 %).
    let regimes = |s: &Value| -> Vec<f64> {
        s["summaries"][0]["regimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["median_abs_error_pct"].as_f64().unwrap())
            .collect()
    };
    let (c, s) = (regimes(&v), regimes(&v["stock"]));
    assert_eq!(c.len(), 3);
    for (c, s) in c.iter().zip(&s) {
        assert!(*c < 5.0 && *c < s / 3.0, "calibrated {c}% vs stock {s}%");
    }
    // The stock pick loses 28 % at 2 MiB (Ring/Simple, Ring/LL is best); the calibrated one does not.
    let at = |sizes: &Value, bytes: u64| -> f64 {
        sizes
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["bytes"] == bytes)
            .unwrap()["regret"]
            .as_f64()
            .unwrap()
    };
    assert!(at(&stock["sizes"], 2 << 20) > 1.2);
    assert!(at(&v["sizes"], 2 << 20) < 1.01);

    // The table: the stock model's columns next to the calibrated ones.
    let text = stdout(&ok(&[
        "verify",
        "--load",
        &test,
        "--calibration",
        &cal_path,
    ]));
    assert!(
        text.contains("predictions: calibrated model of the nccl backend"),
        "{text}"
    );
    assert!(text.contains("compared with: stock model"), "{text}");
    for col in [
        "stock us",
        "stock error",
        "stock median |error|",
        "nccl stock",
    ] {
        assert!(text.contains(col), "{col}");
    }
}

#[test]
fn verify_load_scores_only_the_calibrated_backend_and_refuses_other_machines() {
    let dir = scratch("verify-refuse");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    // FINAL has both backends: a calibration of NCCL scores NCCL's rows only
    let out = ok(&[
        "verify",
        "--load",
        &repo(FINAL),
        "--calibration",
        &cal_path,
        "--json",
    ]);
    assert!(
        stderr(&out).contains(
            "calibrates the nccl backend: scoring its 210 rows, 180 other row(s) left out"
        ),
        "{}",
        stderr(&out)
    );
    let v = json_of(&out);
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["backend"] == "nccl"));

    // the same calibration said to come from another machine, or from 4 GPUs
    let text = std::fs::read_to_string(&cal_path).unwrap();
    let mut other: Value = serde_json::from_str(&text).unwrap();
    other["machine"]["topology_hash"] = Value::from("0123456789abcdef");
    let other_path = dir.join("other.json").to_string_lossy().into_owned();
    std::fs::write(&other_path, other.to_string()).unwrap();
    let err = refused(&[
        "verify",
        "--load",
        &repo(PROCS_1),
        "--calibration",
        &other_path,
    ]);
    assert!(
        err.contains("was measured on topology 0123456789abcdef"),
        "{err}"
    );
    ok(&[
        "verify",
        "--load",
        &repo(PROCS_1),
        "--calibration",
        &other_path,
        "--force",
    ]);
    let mut four: Value = serde_json::from_str(&text).unwrap();
    four["machine"]["gpu_count"] = Value::from(4);
    let four_path = dir.join("four.json").to_string_lossy().into_owned();
    std::fs::write(&four_path, four.to_string()).unwrap();
    let err = refused(&[
        "verify",
        "--load",
        &repo(PROCS_1),
        "--calibration",
        &four_path,
    ]);
    assert!(
        err.contains("was measured on 4 GPUs, this run has 2"),
        "{err}"
    );
    // a native calibration on an NCCL-only file: nothing to score
    let native = dir.join("native.json").to_string_lossy().into_owned();
    ok(&[
        "calibrate",
        &repo(FINAL),
        "--backend",
        "native",
        "-o",
        &native,
    ]);
    let err = refused(&["verify", "--load", &repo(PROCS_1), "--calibration", &native]);
    assert!(err.contains("has no native rows to score"), "{err}");
    // --calibration needs --load
    let out = run(&["verify", "--calibration", &cal_path]);
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// calibrate: inputs, flags, --cv, --plot

#[test]
fn calibrate_reads_every_format_and_takes_the_pair_from_the_command_line() {
    let dir = scratch("formats-in");
    // nccl-tests text with its NCCL_ALGO/NCCL_PROTO log lines, and -J JSON
    for file in [TEXT, J_JSON] {
        let v = json_of(&ok(&["calibrate", &repo(file), "--json"]));
        let pairs = v["calibration"]["pairs"].as_array().unwrap();
        assert_eq!(pairs.len(), 1, "{file}");
        assert_eq!(pair_of(&pairs[0]), "Ring/LL", "{file}");
        let format = v["calibration"]["sources"][0]["format"].as_str().unwrap();
        assert!(format.starts_with("nccl-tests"), "{file}: {format}");
    }
    // the text without its log: NCCL's free choice, so --pair must say what ran
    let no_log: String = std::fs::read_to_string(repo(TEXT))
        .unwrap()
        .lines()
        .filter(|l| !l.contains("NCCL INFO"))
        .map(|l| format!("{l}\n"))
        .collect();
    let bare = dir.join("bare.txt").to_string_lossy().into_owned();
    std::fs::write(&bare, no_log).unwrap();
    let err = refused(&["calibrate", &bare]);
    assert!(err.contains("give the pair with --pair"), "{err}");
    let v = json_of(&ok(&["calibrate", &bare, "--pair", "Ring/LL", "--json"]));
    assert_eq!(pair_of(&v["calibration"]["pairs"][0]), "Ring/LL");
    let err = refused(&["calibrate", &bare, "--pair", "Ring/LL64"]);
    assert!(err.contains("--pair: invalid pair 'Ring/LL64'"), "{err}");
    // --pair against the file's own log lines
    let err = refused(&["calibrate", &repo(TEXT), "--pair", "Tree/LL"]);
    assert!(err.contains("--pair Tree/LL contradicts the file"), "{err}");
    // NCCL Inspector: NCCL's free choice without the pair, nothing to fit alone
    let err = refused(&["calibrate", &repo(INSPECTOR)]);
    assert!(err.contains("NCCL's free choice"), "{err}");
    // a file without a topology, bound to one named on the command line
    let cal = dir.join("bound.json").to_string_lossy().into_owned();
    let t = topo();
    let out = ok(&["calibrate", &repo(TEXT), "--topo", &t, "-o", &cal]);
    assert!(
        stderr(&out).contains(&format!("taken from {t}")),
        "{}",
        stderr(&out)
    );
    let bound = Calibration::load(&cal).unwrap();
    let golden_hash = calibrate::topology_hash(&std::fs::read_to_string(&t).unwrap(), "t").unwrap();
    assert_eq!(bound.machine.topology_hash, Some(golden_hash));
    // ... and a verify file named with another machine's topology is refused
    let err = refused(&["calibrate", &repo(FINAL), "--fixture", "hgx-h200-8"]);
    assert!(err.contains("fixture hgx-h200-8 is"), "{err}");
    // --backend
    let v = json_of(&ok(&[
        "calibrate",
        &repo(FINAL),
        "--backend",
        "native",
        "--json",
    ]));
    assert_eq!(v["calibration"]["backend"], "native");
    let err = refused(&["calibrate", &repo(FINAL), "--backend", "both"]);
    assert!(err.contains("invalid --backend 'both'"), "{err}");
}

#[test]
fn calibrate_bad_inputs_exit_2_naming_file_and_line() {
    let dir = scratch("bad");
    let junk = dir.join("junk.txt").to_string_lossy().into_owned();
    std::fs::write(&junk, "\nhello\n").unwrap();
    let err = refused(&["calibrate", &junk]);
    assert!(
        err.starts_with(&format!("planner: error: {junk}:2: unknown format")),
        "{err}"
    );
    // a broken nccl-tests row: its line
    let broken = dir.join("broken.txt").to_string_lossy().into_owned();
    std::fs::write(
        &broken,
        std::fs::read_to_string(repo(TEXT))
            .unwrap()
            .replace("   286.90  ", "   28x.90  "),
    )
    .unwrap();
    let err = refused(&["calibrate", &broken]);
    assert!(
        err.starts_with(&format!(
            "planner: error: {broken}:27: malformed nccl-tests row"
        )),
        "{err}"
    );
    // the second file is the bad one: it is named, nothing is written
    let out_path = dir.join("cal.json");
    let err = refused(&[
        "calibrate",
        &repo(FINAL),
        &broken,
        "-o",
        &out_path.to_string_lossy(),
    ]);
    assert!(err.contains(&broken), "{err}");
    assert!(!out_path.exists());
    // missing file, a calibration given as input
    let err = refused(&["calibrate", "/nonexistent/run.json"]);
    assert!(err.contains("/nonexistent/run.json: cannot read"), "{err}");
    let cal = calibrate_to(&dir, "ok.json", &[FINAL]);
    let err = refused(&["calibrate", &cal]);
    assert!(
        err.contains("is a calibration file, not measurements"),
        "{err}"
    );
    // no file at all: clap's usage error, exit 2
    assert_eq!(run(&["calibrate"]).status.code(), Some(2));
    // an output in a missing directory is bad input, as from every command (a full disk would be exit 1)
    let out = run(&["calibrate", &repo(FINAL), "-o", "/nonexistent/dir/cal.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn calibrate_cv_prints_the_report_and_plots_small_multiples() {
    let dir = scratch("cv");
    let svg = dir.join("cal.svg").to_string_lossy().into_owned();
    let out = ok(&[
        "calibrate",
        &repo(FINAL),
        &repo(PROCS_1),
        "--cv",
        "--plot",
        &svg,
        "--json",
    ]);
    let v = json_of(&out);
    // k-fold by size, then train on each / test on the other
    let sections = v["cross_validation_report"]["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 3);
    assert!(sections[0]["method"]
        .as_str()
        .unwrap()
        .starts_with("k-fold by size: 5"));
    assert_eq!(sections[1]["method"], "train on one input, test on another");
    assert_eq!(sections[1]["train"][0], repo(FINAL));
    assert_eq!(sections[1]["test"][0], repo(PROCS_1));
    // the same report the library computes
    let inputs: Vec<_> = [FINAL, PROCS_1]
        .iter()
        .map(|f| calibrate::read_file(&repo(f), &Default::default()).unwrap())
        .collect();
    let lib = calibrate::cross_validate(&inputs, &Default::default()).unwrap();
    // ... as `--json` prints it (docs/json.md: rounded, schema spellings)
    let lib: Value = serde_json::from_str(&lib.to_json().unwrap()).unwrap();
    let mut lib: Value =
        serde_json::from_str(&planner::report::json::render_value(lib, "").unwrap()).unwrap();
    lib.as_object_mut().unwrap().remove("schema_version");
    assert_eq!(v["cross_validation_report"], lib);
    // issue 11's targets on fit-on-final / test-on-1proc (bench/results/calibration-cv-2026-12-01)
    let target = |name: &str| {
        sections[1]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == name)
            .unwrap()["achieved_pct"]
            .as_f64()
            .unwrap()
    };
    assert!(target("median |error| from 64 KiB") <= 5.0);
    assert!(target("p95 |error| from 64 KiB") <= 15.0);
    assert!(target("worst |error| from 1 MiB") <= 15.0);
    assert!(target("worst regret of the calibrated pick from 1 MiB") <= 2.0);
    assert!(target("median |error| below 64 KiB") <= 10.0);
    // one panel per pair
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg"));
    for pair in [
        "Ring/LL",
        "Ring/LL128",
        "Ring/Simple",
        "Tree/LL",
        "Tree/LL128",
        "Tree/Simple",
    ] {
        assert!(plot.contains(&format!("AllReduce {pair}")), "{pair}");
    }
    // as text: the calibration's table, then the report with its tables
    let text = stdout(&ok(&["calibrate", &repo(FINAL), &repo(PROCS_1), "--cv"]));
    assert!(
        text.starts_with("calibration of the nccl backend"),
        "{text}"
    );
    assert!(
        text.contains("# cross-validation of the nccl backend"),
        "{text}"
    );
    assert_eq!(
        text.matches("## train on one input, test on another")
            .count(),
        2,
        "{text}"
    );
    assert!(text.contains("targets (issue 11):"), "{text}");
    // --folds 10: ten bands
    let v = json_of(&ok(&[
        "calibrate",
        &repo(FINAL),
        "--cv",
        "--folds",
        "10",
        "--json",
    ]));
    assert!(v["cross_validation_report"]["sections"][0]["method"]
        .as_str()
        .unwrap()
        .starts_with("k-fold by size: 10"));
}

#[test]
fn calibrating_and_applying_work_on_a_full_file() {
    // How fast they are (fit < 1 s, a calibrated prediction < 1 µs) is measured in benches/calibrate.rs, not here:
    // a timed test fails on a loaded machine.
    use planner::model::select::Call;
    let input = calibrate::read_file(&repo(FINAL), &Default::default()).unwrap();
    let cal = calibrate::fit(std::slice::from_ref(&input), &Default::default()).unwrap();
    assert_eq!(cal.pairs.len(), 6, "NCCL's six ring/tree pairs are fitted");
    // explain --calibration: load, check against the cluster, evaluate every pair.
    let dir = scratch("fast");
    let cal_path = calibrate_to(&dir, "cal.json", &[FINAL]);
    let source = planner::pipeline::Source {
        topo: Some(topo()),
        nodes: 1,
        ..Default::default()
    };
    let cluster = source.load().unwrap();
    let table = planner::pipeline::choose_table(None, Some("2.28"), None).unwrap();
    let model = planner::pipeline::build_model(
        &cluster,
        None,
        table,
        planner::nccl_env::NcclEnv::default(),
        planner::model::input::NvlsFlag::Off,
    )
    .unwrap();
    let eval = model
        .evaluate(&Call::new(Coll::AllReduce, 2 << 20, 2, 1).unwrap())
        .unwrap();
    let loaded =
        calibrate::load_for_cluster(&cal_path, &cluster, Coll::AllReduce, 1, false).unwrap();
    let c = calibrate::calibrate_call(&loaded, &eval);
    assert!(c.pick.is_some());
}

// ---------------------------------------------------------------------------
// issue 26: nccl-tests inputs with a named topology, and calibrations of some pairs only

/// nccl-tests output records no stock estimate; with `--fixture` calibrate computes NCCL's (the stock model of the
/// file's NCCL 2.28 on that topology), so the stock columns are filled; without a topology they stay "-".
#[test]
fn nccl_tests_input_with_a_fixture_gets_the_stock_estimate() {
    let row = |text: &str, first: &str| -> Vec<String> {
        // The last such row: the cross-validation's tables follow the fit's.
        text.lines()
            .rfind(|l| l.starts_with(first))
            .unwrap_or_else(|| panic!("no {first} row: {text}"))
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let with = stdout(&ok(&[
        "calibrate",
        &repo(TEXT),
        "--fixture",
        "h200x2-nvswitch-vm",
        "--cv",
    ]));
    let without = stdout(&ok(&["calibrate", &repo(TEXT), "--cv"]));
    // | sizes | points | calibrated | stock NCCL model | ...
    let stock = &row(&with, "| < 64 KiB")[4];
    assert!(stock.contains('%') && stock.contains(" / "), "{with}");
    assert_eq!(row(&without, "| < 64 KiB")[4], "-", "{without}");
    // Per pair: | collective | pair | calibrated median / worst | stock |
    assert!(
        row(&with, "| AllReduce  | Ring/LL")[4].ends_with('%'),
        "{with}"
    );
    assert_eq!(row(&without, "| AllReduce  | Ring/LL")[4], "-", "{without}");
    // The stock model is NCCL's own: 2x H200 Ring/LL at 128 B is 7.80 us by NCCL's estimate (explain --json),
    // against 13.47 us measured out of place, so its error there is at least 40 %.
    let e: Value = json_of(&ok(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--nccl-version",
        "2.28",
        "--size",
        "128",
        "--json",
    ]));
    let ring_ll = e["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| pair_of(c) == "Ring/LL")
        .unwrap()["time_us"]
        .as_f64()
        .unwrap();
    assert!((ring_ll - 7.80).abs() < 0.01, "{ring_ll}");
}

/// A calibration that measured only Ring/LL (nccl-tests pinned to it) says so in explain: the one pair is no pick,
/// the pairs NCCL allows without a calibrated time are named, and the sweep's map says it ranks measured pairs only.
#[test]
fn a_calibration_of_one_pair_is_no_pick_among_the_others() {
    let dir = scratch("onepair");
    let cal = dir.join("cal.json").to_string_lossy().into_owned();
    ok(&[
        "calibrate",
        &repo(J_JSON),
        "--fixture",
        "h200x2-nvswitch-vm",
        "-o",
        &cal,
    ]);
    let single = stdout(&ok(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--size",
        "2M",
        "--calibration",
        &cal,
    ]));
    assert!(
        single.contains("nccl backend): has a time for Ring/LL only (25.05 us), 1 of the 7 pairs NCCL allows here: the others were not measured, so it ranks nothing."),
        "{single}"
    );
    assert!(!single.contains("picks Ring/LL"), "{single}");
    assert!(
        single.contains("calibrated -: not measured, so the calibration has no time for Tree/LL, Tree/LL128, Tree/Simple, Ring/LL128, Ring/Simple, NVLS/Simple."),
        "{single}"
    );
    let sweep = stdout(&ok(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--sweep",
        "8..64M",
        "--calibration",
        &cal,
    ]));
    assert!(
        sweep.contains("The calibration measured 1 of the 7 pairs NCCL's model allows in this sweep (Ring/LL); not measured: Tree/LL, Tree/LL128, Tree/Simple, Ring/LL128, Ring/Simple, NVLS/Simple. The calibrated map ranks the measured pairs only."),
        "{sweep}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nccl_tests_output_calibrates_on_the_expected_form_of_the_named_topology() {
    let dir = scratch("expected-form");
    let cal = dir.join("cal.json").to_string_lossy().into_owned();
    let text = repo("tests/data/calibrate/nccl-tests-ring-ll.txt");
    // without a topology: the empirical form, and the progress line says why
    let out = ok(&["calibrate", &text, "-o", &cal]);
    assert!(
        stderr(&out).contains("form: empirical (no input carries its topology"),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cal).unwrap()).unwrap();
    assert_eq!(v["form"], "empirical");
    assert!(v.get("expected_form").is_none());
    // with --fixture: the expected form, NCCL's channels from the table of the run's NCCL (nccl-library=22803)
    let out = ok(&[
        "calibrate",
        &text,
        "--fixture",
        "h200x2-nvswitch-vm",
        "-o",
        &cal,
    ]);
    assert!(
        stderr(&out).contains("form: the expected model's (sm90 nvswitch, NCCL 2.28 channels)"),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cal).unwrap()).unwrap();
    assert_eq!(v["version"], 2);
    assert_eq!(v["form"], "expected");
    assert_eq!(v["expected_form"]["nccl_family"], "2.28");
    assert_eq!(
        v["pairs"][0]["measured_ratio"].as_array().unwrap().len(),
        12
    );
    // and explain applies it on that topology
    let out = ok(&[
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--size",
        "2M",
        "--calibration",
        &cal,
    ]);
    assert!(
        stdout(&out).contains("Calibrated model ("),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
