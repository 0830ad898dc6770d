//! `planner explain`'s small-message sections: NCCL's symmetric kernels
//! (registered windows), planner's own kernels beyond NCCL, the closing
//! "what is possible" lines, and `--from-log` (the model's cells from the
//! TUNING table an NCCL log printed).

use crate::common::{golden, planner, run_ok};
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&run_ok(&all)).unwrap()
}

/// The 2x H200 capture as a fixture, NCCL 2.28's model and NVLS off (as measured:
/// NCCL_NVLS_ENABLE=0).
fn h200x2(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "explain",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--nccl-version",
        "2.28",
        "--nvls",
        "off",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The line of a text table whose kernel column is `kernel`.
fn kernel_row<'a>(text: &'a str, kernel: &str) -> &'a str {
    text.lines()
        .find(|l| l.split('|').nth(2).map(str::trim) == Some(kernel))
        .unwrap_or_else(|| panic!("no row {kernel} in\n{text}"))
}

#[test]
fn symmetric_picks_on_the_2x_h200_match_nccl_2_28() {
    // tests/integration/model_symmetric.rs: AGxLL_R from 8 B to 16 KiB, RSxLD_AGxST at 2 MiB
    // (NCCL's picks measured on this machine with nccl-tests -R 2, issue 13).
    for (size, kernel) in [
        ("8", "AllReduce_AGxLL_R"),
        ("16K", "AllReduce_AGxLL_R"),
        ("2M", "AllReduce_RSxLD_AGxST"),
    ] {
        let text = run_ok(&refs(&h200x2(&["--size", size])));
        assert!(text.contains("NCCL symmetric kernels (needs registered windows):"));
        assert!(
            kernel_row(&text, kernel).starts_with("| >"),
            "{size}: {kernel} not marked in\n{text}"
        );
        assert!(text.contains(&format!("NCCL's symmetric pick: {kernel} (")));
        // NVLS off: the multicast kernels are marked (with 2 ranks they could not run anyway).
        assert!(kernel_row(&text, "AllReduce_AGxLLMC_R").contains("needs NVLS multicast (off)"));
        // NCCL's standard argmin is still there and separate.
        assert!(text.contains("NCCL picks Ring/"), "{text}");
        let j = json(&refs(&h200x2(&["--size", size])));
        assert_eq!(j["symmetric"]["pick"], kernel, "{size}");
        assert_eq!(j["symmetric"]["family"], "2.28");
        assert_eq!(j["possible"]["symmetric_pick"], kernel);
        assert_eq!(j["winner"]["algorithm"], "Ring");
    }
}

#[test]
fn beyond_nccl_is_the_model_by_hand_and_marked_not_fitted() {
    let text = run_ok(&refs(&h200x2(&["--size", "8"])));
    assert!(text.contains("beyond NCCL (planner's own kernels):"));
    assert!(text.contains("model defaults, not fitted to measurements"));
    // OneShot/LL at 8 B on 2 ranks: 3.5 µs + 2·1·8 wire bytes / (0.88 · 370.8 GB/s) = 3.50005 µs.
    let j = json(&refs(&h200x2(&["--size", "8"])));
    let beyond = j["beyond_nccl"].as_array().unwrap();
    assert_eq!(beyond.len(), 2);
    let one = &beyond[0];
    assert_eq!(
        (one["algorithm"].as_str(), one["protocol"].as_str()),
        (Some("OneShot"), Some("LL"))
    );
    assert!((one["time_us"].as_f64().unwrap() - 3.50005).abs() < 1e-4);
    assert_eq!(one["fitted_to_measurements"], false);
    // TwoShot/Simple at 8 MiB: 7 + 8 MiB / (0.88 · 370.8e3 B/µs) = 32.71 µs.
    let j = json(&refs(&h200x2(&["--size", "8M"])));
    let two = j["beyond_nccl"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["algorithm"] == "TwoShot")
        .unwrap();
    assert!((two["time_us"].as_f64().unwrap() - 32.71).abs() < 0.01);
    // Fastest at 8 B is OneShot (3.5 µs < AGxLL_R's 4.89 µs < Ring/LL), source "model".
    assert_eq!(
        json(&refs(&h200x2(&["--size", "8"])))["possible"]["fastest"],
        "OneShot/LL"
    );
    assert_eq!(j["possible"]["fastest_source"], "model");
    // Not an all-reduce: none, with the reason.
    let text = run_ok(&refs(&h200x2(&["--size", "4K", "--coll", "all-gather"])));
    assert!(text.contains("none here: planner's own kernels are all-reduce only"));
}

#[test]
fn sweep_ends_with_one_line_per_band() {
    let text = run_ok(&refs(&h200x2(&["--sweep", "8..4G"])));
    let tail: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("What is possible"))
        .skip(1)
        .collect();
    assert!(!tail.is_empty(), "{text}");
    assert!(tail[0].starts_with("  8 B - "), "{}", tail[0]);
    assert!(tail[0].contains("symmetric AllReduce_AGxLL_R"));
    assert!(tail.last().unwrap().contains("4 GiB:"));
    for line in &tail {
        assert!(
            line.contains("| fastest ") && line.contains("source: model"),
            "{line}"
        );
    }
    let j = json(&refs(&h200x2(&["--sweep", "8..4G"])));
    let bands = j["possible"].as_array().unwrap();
    assert_eq!(bands.len(), tail.len());
    // Bands cover the sweep's sizes in order without gaps (8 B .. 4 GiB: 30 sizes).
    let points: usize = bands
        .iter()
        .map(|b| b["points"].as_array().unwrap().len())
        .sum();
    assert_eq!(points, 30);
    // 2 MiB is in a band with the symmetric pick RSxLD_AGxST and NCCL's Ring/Simple.
    let at_2m = bands
        .iter()
        .flat_map(|b| b["points"].as_array().unwrap())
        .find(|p| p["size_bytes"] == 2 << 20)
        .unwrap();
    assert_eq!(at_2m["symmetric_pick"], "AllReduce_RSxLD_AGxST");
    assert_eq!(at_2m["nccl_pick"], "Ring/Simple");
    // Old keys stay.
    assert!(j["sweep"]["bands"].is_array() && j["tuning_table"].is_string());
}

#[test]
fn hgx_h200_8_marks_multicast_kernels_only_with_nvls_off() {
    let args = ["explain", "--fixture", "hgx-h200-8", "--size", "1M"];
    let mut off = args.to_vec();
    off.extend(["--nvls", "off"]);
    let text = run_ok(&off);
    assert!(text.contains("NVLS multicast off"));
    for k in ["AllReduce_AGxLLMC_R", "AllReduce_RSxLDMC_AGxSTMC"] {
        assert!(
            kernel_row(&text, k).contains("needs NVLS multicast (off)"),
            "{k}"
        );
    }
    let j = json(&off);
    let kernels = j["symmetric"]["kernels"].as_array().unwrap();
    assert!(kernels
        .iter()
        .filter(|k| k["needs_multicast"] == true)
        .all(|k| k["eligible"] == false));
    assert_eq!(j["symmetric"]["nvls_multicast"], false);
    assert_eq!(j["ranks"], 8);
    // NVLS on (the fixture's NVSwitches do multicast): the multicast kernels compete.
    let j = json(&args);
    assert_eq!(j["symmetric"]["nvls_multicast"], true);
    assert!(j["symmetric"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["needs_multicast"] == true && k["eligible"] == true));
}

#[test]
fn several_ops_leave_the_sections_out_with_a_note() {
    let text = run_ok(&refs(&h200x2(&["--size", "1M", "--ops", "4"])));
    assert!(text.contains("shown for single calls only (--ops 1)"));
    assert!(!text.contains("NCCL symmetric kernels"));
    let j = json(&refs(&h200x2(&["--size", "1M", "--ops", "4"])));
    assert!(j.get("symmetric").is_none() && j.get("possible").is_none());
}

#[test]
fn from_log_reproduces_the_stock_2_28_picks_on_the_capture() {
    let topo = golden("topo.xml");
    let log = golden("nccl-init-rank0.log");
    let base = [
        "explain",
        "--topo",
        topo.as_str(),
        "--sweep",
        "8..4G",
        "--nvls",
        "off",
    ];
    let mut stock = base.to_vec();
    stock.extend(["--nccl-version", "2.28"]);
    let mut logged = base.to_vec();
    logged.extend(["--from-log", log.as_str()]);
    let (s, l) = (json(&stock), json(&logged));
    assert_eq!(s["sweep"]["bands"], l["sweep"]["bands"]);
    let picks = |v: &Value| -> Vec<(Value, Value)> {
        v["possible"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|b| b["points"].as_array().unwrap().clone())
            .map(|p| (p["nccl_pick"].clone(), p["symmetric_pick"].clone()))
            .collect()
    };
    assert_eq!(picks(&s), picks(&l));
    let text = run_ok(&logged);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("latency and bandwidth from the TUNING table in"),
        "{text}"
    );
    assert!(text.contains("channels, threads and per-call rules are the model's"));
    // A log that does not exist is a bad input (exit 2) naming the file.
    let out = planner()
        .args(["explain", "--from-log", "/nonexistent/nccl.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/nccl.log"));
    // Conflicts with choosing a version.
    let out = planner()
        .args([
            "explain",
            "--from-log",
            log.as_str(),
            "--nccl-version",
            "2.28",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The column of a text table's row whose header is `name`.
fn column<'a>(text: &'a str, row: &'a str, name: &str) -> &'a str {
    let header = text
        .lines()
        .find(|l| l.starts_with("| pick"))
        .unwrap_or_else(|| panic!("no header in\n{text}"));
    let k = header
        .split('|')
        .position(|h| h.trim() == name)
        .unwrap_or_else(|| panic!("no column {name} in {header}"));
    row.split('|').nth(k).unwrap().trim()
}

/// Every pair of the text table shows the expected time and busbw of `--json` beside NCCL's own columns, and the
/// verdict line names the expected fastest and its gain over NCCL's pick (hgx-h100-8, 256 KiB: NCCL picks Ring/LL,
/// the expected model rates Tree/LL fastest).
#[test]
fn explain_text_shows_the_expected_columns_and_verdict_hgx_h100_8() {
    let args = ["explain", "--fixture", "hgx-h100-8", "--size", "256K"];
    let text = run_ok(&args);
    let j = json(&args);
    assert!(text.contains("NCCL's own cost model, used for its choice"));
    let pairs = j["pairs"].as_array().unwrap();
    let mut shown = 0;
    for p in pairs.iter().filter(|p| p["usable"] == true) {
        let (a, pr) = (
            p["algorithm"].as_str().unwrap(),
            p["protocol"].as_str().unwrap(),
        );
        let row = text
            .lines()
            .find(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                cells.get(2) == Some(&a) && cells.get(3) == Some(&pr)
            })
            .unwrap_or_else(|| panic!("no row {a}/{pr}"));
        let want = |key: &str| match p[key].as_f64() {
            Some(v) if v >= 1000.0 => format!("{v:.0}"),
            Some(v) => format!("{v:.2}"),
            None => "-".to_string(),
        };
        assert_eq!(column(&text, row, "expected us"), want("expected_time_us"));
        assert_eq!(
            column(&text, row, "expected busbw GB/s"),
            p["expected_busbw_gbs"]
                .as_f64()
                .map_or("-".into(), |v| format!("{v:.2}"))
        );
        shown += 1;
    }
    assert!(shown >= 7, "{shown} pairs");
    let f = &j["expected_fastest"];
    assert_eq!(j["winner"]["algorithm"], "Ring");
    assert_eq!(
        (f["algorithm"].as_str(), f["protocol"].as_str()),
        (Some("Tree"), Some("LL"))
    );
    let nccl = j["winner"]["expected_time_us"].as_f64().unwrap();
    let best = f["expected_time_us"].as_f64().unwrap();
    let pct = f["expected_gain_over_nccl_pick_pct"].as_f64().unwrap();
    // JSON numbers are rounded: the percentage agrees to its rounding.
    assert!((pct - 100.0 * (nccl - best) / best).abs() < 0.1);
    let verdict = format!(
        "Expected (planner's model): fastest Tree/LL {best:.2} us, expected to beat NCCL's pick Ring/LL ({nccl:.2} us) \
         by {:.2} us ({pct:.0}%).",
        nccl - best
    );
    assert!(text.lines().any(|l| l == verdict), "{verdict}\n{text}");
}

/// Where NCCL's pick is the pair the expected model rates fastest, the verdict says so (hgx-h200-8, 16 MiB: NVLS).
#[test]
fn explain_verdict_when_nccl_pick_is_the_expected_fastest_hgx_h200_8() {
    let args = ["explain", "--fixture", "hgx-h200-8", "--size", "16M"];
    let j = json(&args);
    assert_eq!(j["winner"]["algorithm"], j["expected_fastest"]["algorithm"]);
    assert_eq!(j["winner"]["protocol"], j["expected_fastest"]["protocol"]);
    let text = run_ok(&args);
    assert!(
        text.contains(
            "Expected (planner's model): NCCL's pick is also the expected fastest, NVLS/Simple "
        ),
        "{text}"
    );
}

/// With several ops per group the expected model (single calls) is left out of text and JSON.
#[test]
fn explain_with_ops_leaves_the_expected_model_out() {
    let args = [
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--size",
        "1M",
        "--ops",
        "4",
    ];
    assert!(!run_ok(&args).contains("expected us"));
    let j = json(&args);
    assert!(j["winner"]["expected_time_us"].is_null());
    assert!(j.get("expected_fastest").is_none());
}

/// `--sweep --json` points carry NCCL's pick's busbw (nccl-tests' definition, by hand: algbw x 2(n-1)/n) and the
/// expected columns; the expected crossover map is printed after NCCL's (hgx-h100-8: NCCL picks Ring/LL at 256 KiB
/// where the expected model rates Tree/LL fastest).
#[test]
fn sweep_shows_busbw_and_the_expected_crossover_map_hgx_h100_8() {
    let args = ["explain", "--fixture", "hgx-h100-8", "--sweep", "64K..16M"];
    let j = json(&args);
    let points = j["sweep"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 9);
    for p in points {
        let (bytes, t) = (
            p["size_bytes"].as_f64().unwrap(),
            p["time_us"].as_f64().unwrap(),
        );
        let busbw = bytes / (t * 1e3) * 2.0 * 7.0 / 8.0;
        let got = p["busbw_gbs"].as_f64().unwrap();
        assert!((got - busbw).abs() / busbw < 1e-3, "{p}");
        assert!(p["expected_time_us"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["expected_busbw_gbs"].as_f64().unwrap() > 0.0, "{p}");
        let f = p["expected_fastest"]["expected_time_us"].as_f64().unwrap();
        assert!(f <= p["expected_time_us"].as_f64().unwrap(), "{p}");
    }
    let at_256k = points.iter().find(|p| p["size_bytes"] == 262144).unwrap();
    assert_eq!(at_256k["algorithm"], "Ring");
    assert_eq!(at_256k["expected_fastest"]["algorithm"], "Tree");
    let bands = j["expected_crossover"].as_array().unwrap();
    assert_eq!(bands[0]["from_bytes"], 65536);
    assert_eq!(bands.last().unwrap()["to_bytes"], 16 << 20);
    let text = run_ok(&args);
    let map = text
        .split("Expected crossover map (planner's model of these links")
        .nth(1)
        .expect("expected map");
    assert!(text.find("crossover map").unwrap() < text.find("Expected crossover map").unwrap());
    assert!(
        map.lines().any(|l| l.starts_with("  64 KiB - ")
            && l.contains(": Tree/LL ")
            && l.contains("| NCCL Ring/LL ")),
        "{map}"
    );
    assert!(map.contains("| NCCL's pick too"), "{map}");
}

/// A PCIe pair (pcie-rtx4000ada-2, no NVLink): NCCL stays on its classic path, so no symmetric kernel is marked
/// eligible and none is the fastest.
#[test]
fn symmetric_kernels_not_eligible_on_pcie_rtx4000ada_2() {
    let j = json(&["explain", "--fixture", "pcie-rtx4000ada-2", "--size", "64K"]);
    for k in j["symmetric"]["kernels"].as_array().unwrap() {
        assert_eq!(k["eligible"], false, "{k}");
    }
    assert_eq!(j["possible"]["fastest_kind"], "nccl");
}

/// dgx-a100-8: 12 NVLinks x 20 GB/s = 240 GB/s per GPU; no symmetric kernel is shown carrying more busbw.
#[test]
fn symmetric_busbw_bounded_by_the_nvlink_on_dgx_a100_8() {
    let j = json(&["explain", "--fixture", "dgx-a100-8", "--size", "64M"]);
    for k in j["symmetric"]["kernels"].as_array().unwrap() {
        if let Some(b) = k["busbw_gbs"].as_f64() {
            assert!(b <= 240.0 + 1e-6, "{k}");
        }
    }
}

/// gb200-nvl72-tray --nodes 18 (one MNNVL domain of 18 trays): planner's own kernels are modelled within one tray,
/// so none is listed or the fastest.
#[test]
fn beyond_nccl_not_fastest_across_18_gb200_trays() {
    let args = [
        "explain",
        "--fixture",
        "gb200-nvl72-tray",
        "--nodes",
        "18",
        "--size",
        "8",
    ];
    let text = run_ok(&args);
    assert!(text.contains("not across the 18 trays"), "{text}");
    assert!(!text.contains("fastest OneShot/LL"), "{text}");
    assert_eq!(json(&args)["beyond_nccl"].as_array().unwrap().len(), 0);
}

/// hgx-h100-8 --nodes 2 (16 ranks): the multicast kernels are out because the job spans nodes, not for rank count.
#[test]
fn multicast_reason_names_the_nodes_on_hgx_h100_8_two_nodes() {
    let text = run_ok(&[
        "explain",
        "--fixture",
        "hgx-h100-8",
        "--nodes",
        "2",
        "--size",
        "64K",
    ]);
    assert!(!text.contains("needs NVLS multicast (3+ ranks)"), "{text}");
    assert!(
        text.contains("needs NVLS multicast (within one node)"),
        "{text}"
    );
}
