//! `planner diff RUN_A.json RUN_B.json` on two committed 2x H200 runs, and the fingerprint.

use crate::common::planner;
use planner::diff::diff_runs;
use planner::diff::runs::Flag;
use planner::measure::Backend;
use planner::model::{Algo, Pair, Proto};
use planner::result_file::{Fingerprint, VerifyRun};
use serde_json::Value;

fn result(path: &str) -> String {
    format!("{}/bench/results/{path}", env!("CARGO_MANIFEST_DIR"))
}

const A: &str = "verify-h200x2-final-2026-11-30/verify.json";
const B: &str = "integration-h200x2-2026-11-30/verify.json";

#[test]
fn two_committed_runs() {
    let (a, b) = (
        VerifyRun::load(&result(A)).unwrap(),
        VerifyRun::load(&result(B)).unwrap(),
    );
    let d = diff_runs(&a, "A", &b, "B").unwrap();
    let field = |name: &str| d.machine.iter().find(|f| f.field == name).unwrap();
    // The same machine type and software; the topology XML differs in the host hash only.
    assert!(field("GPUs").same);
    assert_eq!(field("GPUs").a, "2x NVIDIA H200 (sm 9.0)");
    for same in ["driver", "CUDA", "NCCL", "links", "nodes"] {
        assert!(field(same).same, "{same}");
    }
    // Files written before the link summary existed get it from their topology XML.
    assert_eq!(a.machine.links, None);
    assert_eq!(
        field("links").a,
        "2 GPUs: 18 NVLink to NVSwitch, PCIe 32.0 GT/s x0; NICs: eth0 10000 Mb/s"
    );
    let hash = field("topology hash");
    assert!(!hash.same);
    assert_eq!(
        hash.detail.as_deref(),
        Some("XML differs in: system/cpu host_hash: 0x71b415682fefd448 -> 0x4722d82181eac7c5")
    );
    assert!(d.options.iter().all(|f| f.same));
    // 13 series (2 backends x 6 pairs + NCCL's choice) x 30 sizes, all measured in both.
    assert_eq!(d.rows.len(), 390);
    assert_eq!((d.only_in_a, d.only_in_b), (0, 0));
    // By hand, native Tree/LL at 8 B (the files' repeats):
    // A 5.6896 5.8304 5.6336 5.9760 5.8128 -> median 5.8128
    // B 5.8944 6.0096 5.6848 5.7696 6.9520 -> median 5.8944; ratio 1.0140;
    // band 5.6848 / 5.9760 = 0.951 .. 6.9520 / 5.6336 = 1.234: within the noise.
    let r = d
        .rows
        .iter()
        .find(|r| {
            r.backend == Backend::Native
                && r.pair == Some(Pair::new(Algo::Tree, Proto::Ll))
                && r.bytes == 8
        })
        .unwrap();
    assert!((r.ratio - 5.8944 / 5.8128).abs() < 1e-4, "{r:?}");
    assert!((r.ratio_lo - 5.6848 / 5.976).abs() < 1e-4);
    assert!((r.ratio_hi - 6.952 / 5.6336).abs() < 1e-4);
    assert_eq!(r.flag, Flag::WithinNoise);
    // NCCL's small all-reduces were slower in B, every repeat: flagged.
    let nccl_small = d
        .rows
        .iter()
        .filter(|r| r.backend == Backend::Nccl && r.pair.is_none() && r.bytes < 65536)
        .collect::<Vec<_>>();
    assert!(
        nccl_small.iter().all(|r| r.flag == Flag::Slower),
        "{nccl_small:?}"
    );
    // Three regimes, each with a verdict per backend.
    assert_eq!(d.regimes.len(), 3);
    assert!(
        d.regimes[0].verdict.starts_with("nccl: mostly slower"),
        "{}",
        d.regimes[0].verdict
    );
    // NCCL's own choice did not change anywhere (both NCCL 2.28.3 on the same machine).
    assert_eq!(
        d.regimes
            .iter()
            .map(|r| r.nccl_choice_changed)
            .sum::<usize>(),
        0
    );
}

#[test]
fn cli_text_json_and_plot() {
    let dir = std::env::temp_dir().join(format!("planner-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("ratio.svg");
    let out = planner()
        .args(["diff", &result(A), &result(B), "--plot"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("DIFFERS: XML differs in: system/cpu host_hash"),
        "{text}"
    );
    assert!(text.contains("Verdict:\n  < 64 KiB: nccl: "), "{text}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"));
    // One panel per pair and one for NCCL's own choice, binary size ticks.
    for title in [
        "Tree/LL",
        "Ring/LL128",
        "Ring/Simple",
        "NCCL&apos;s own choice",
        "\n1G\n",
    ] {
        assert!(
            drawn.contains(title) || drawn.contains(&title.replace("&apos;", "'")),
            "{title}"
        );
    }
    let out = planner()
        .args(["diff", &result(A), &result(B), "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 390);
    assert_eq!(v["rows"][0]["backend"], "native");
    assert!(v["rows"][0]["ratio_lo"].as_f64().is_some());
    assert_eq!(v["regimes"][2]["label"], "> 16 MiB");
}

#[test]
fn runs_of_different_collectives_are_refused() {
    let text = std::fs::read_to_string(result(A)).unwrap();
    let other = text.replacen(
        "\"collective\": \"allreduce\"",
        "\"collective\": \"allgather\"",
        1,
    );
    assert_ne!(text, other);
    let dir = std::env::temp_dir().join(format!("planner-diff-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("allgather.json");
    std::fs::write(&path, other).unwrap();
    let out = planner()
        .args(["diff", &result(A)])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("measured allreduce and"), "{err}");
    assert!(err.contains("allgather: nothing to compare"), "{err}");
}

#[test]
fn fingerprint_links_round_trip_and_old_files_load() {
    let mut run = VerifyRun::load(&result(A)).unwrap();
    assert_eq!(run.machine.links, None, "written before the field existed");
    let xml = run.machine.topology_xml.clone().unwrap();
    run.machine.links = Fingerprint::links_from_xml(&xml);
    let back = VerifyRun::from_json(&run.to_json().unwrap(), "round trip").unwrap();
    assert_eq!(back.machine.links, run.machine.links);
    // A fixture with NVLinks between GPUs and NICs: DGX A100, 12 NVLinks per GPU to NVSwitches.
    let dgx = planner::topo::fixtures::find("dgx-a100-8").unwrap().xml;
    let links = Fingerprint::links_from_xml(dgx).unwrap();
    assert!(
        links.starts_with("8 GPUs: 12 NVLink to NVSwitch"),
        "{links}"
    );
    assert!(links.contains("NICs: "), "{links}");
    assert_eq!(Fingerprint::links_from_xml("<system"), None);
}
