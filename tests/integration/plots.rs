//! The SVG plots of `explain`, `verify --load` and `calibrate`: small multiples (one panel per
//! pair), a log2 size axis with binary ticks, a time and a busbw view, NCCL's pick shaded, and a
//! legend that shows measured solid and predicted dashed. plotters writes each text as
//! `<text ...>\nTEXT\n</text>`, which the assertions below look for.

use crate::common::planner;
use std::path::PathBuf;
use std::time::Duration;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("planner-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn text(svg: &str, label: &str) -> bool {
    svg.contains(&format!("\n{label}\n"))
}

/// How many texts are exactly `label` (panel captions: once per view).
fn count(svg: &str, label: &str) -> usize {
    svg.matches(&format!("\n{label}\n")).count()
}

const RESULT: &str = "bench/results/verify-h200x2-both-eager.json";

#[test]
fn explain_plot_has_a_panel_per_pair_in_time_and_busbw_with_binary_ticks_and_pick_bands() {
    let path = temp("explain.svg");
    planner()
        .args(["explain", "--fixture", "hgx-h100-8", "--plot"])
        .arg(&path)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"));
    // Two views, each with every pair usable on an 8x H100 NVSwitch board (NVLS is on there):
    // Tree and Ring x 3 protocols, and NVLS/Simple.
    assert!(
        svg.contains("Predicted time per algorithm/protocol"),
        "time view"
    );
    assert!(
        svg.contains("Predicted busbw (nccl-tests definition"),
        "busbw view"
    );
    for pair in [
        "Tree/LL",
        "Tree/LL128",
        "Tree/Simple",
        "Ring/LL",
        "Ring/LL128",
        "Ring/Simple",
        "NVLS/Simple",
    ] {
        assert_eq!(count(&svg, pair), 2, "{pair}");
    }
    // Binary ticks on the size axis (1K, 1M, 1G), never decimal sizes.
    for tick in ["1K", "1M", "1G"] {
        assert!(text(&svg, tick), "{tick}");
    }
    assert!(!svg.contains("1000000"));
    // Axis names with units, and the legend.
    assert!(text(&svg, "time (µs)") && text(&svg, "busbw (GB/s)"));
    assert!(text(&svg, "NCCL picks this pair"));
    assert!(text(&svg, "fastest pair at each size"));
    // The bands: shaded rectangles in the band colour (255, 200, 80).
    assert!(svg.contains("#FFC850"), "no shaded band");
}

#[test]
fn verify_plot_shows_measured_solid_predicted_dashed_per_pair() {
    let path = temp("verify.svg");
    planner()
        .args(["verify", "--load", RESULT, "--plot"])
        .arg(&path)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&path).unwrap();
    // Six pinned pairs and NCCL's free choice, in the time and the busbw view.
    for panel in [
        "Ring/LL",
        "Ring/Simple",
        "Tree/LL128",
        "NCCL&apos;s free choice",
    ] {
        assert_eq!(count(&svg, panel), 2, "{panel}");
    }
    for label in [
        "planner kernels (measured)",
        "NCCL (measured)",
        "model&apos;s prediction",
        "NCCL&apos;s free choice ran this pair",
        "busbw (GB/s)",
    ] {
        assert!(text(&svg, label), "{label}");
    }
    // The legend draws the prediction dashed: short segments of 6 px in the dark colour.
    assert!(svg.matches("stroke=\"#282828\"").count() > 20);
}

#[test]
fn verify_plot_skips_zero_sizes_and_huge_times_without_hanging() {
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(RESULT).unwrap()).unwrap();
    let rows = run["rows"].as_array_mut().unwrap();
    rows[0]["bytes"] = 0.into();
    for key in ["median_us", "p99_us"] {
        rows[1][key] = serde_json::json!(1e308);
    }
    rows[1]["times_us"] = serde_json::json!([1e308, 1e308, 1e308]);
    let file = temp("odd.json");
    std::fs::write(&file, serde_json::to_string(&run).unwrap()).unwrap();
    let path = temp("odd.svg");
    let out = planner()
        .args(["verify", "--load"])
        .arg(&file)
        .arg("--plot")
        .arg(&path)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    // Either drawn (the odd points dropped) or refused as bad input; never a hang or a panic.
    assert!(
        matches!(out.status.code(), Some(0) | Some(2)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    }
}

/// `explain --plot` draws planner's expected time (dashed, labelled) beside NCCL's estimate in every panel, and the
/// log time axis has ticks at 2, 5, 10, 20 and 50 µs so small-message times read (issue 26; hgx-h100-8, whose
/// 8 B times are 12-15 µs).
#[test]
fn explain_plot_shows_the_expected_curve_dashed_and_ticks_below_100_us() {
    let path = temp("explain-expected.svg");
    planner()
        .args([
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--sweep",
            "8..4G",
            "--plot",
        ])
        .arg(&path)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(text(
        &svg,
        "this pair, expected (planner&apos;s model of the links)"
    ));
    assert!(text(
        &svg,
        "this pair, NCCL&apos;s estimate (its cost model, used for its choice)"
    ));
    // The expected curve is dashed: short segments in its colour (31, 119, 180), many per panel.
    assert!(
        svg.matches("stroke=\"#1F77B4\"").count() > 100,
        "no dashed curve"
    );
    // Ticks at 2 and 5 of each decade below 100 us (the axis starts between 10 and 20 us here, so 10 may not show).
    for tick in ["20", "50", "100"] {
        assert!(text(&svg, tick), "tick {tick}");
    }
}
