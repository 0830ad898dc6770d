//! Every NCCL release family 2.18 ... 2.30, and 2.31 read from the pre-release dev branch: the tables load with the tag they
//! were read from, their `changes_from_previous` lists agree with the data
//! and with the rule catalogue, `--nccl-version` maps any version, and cells
//! that differ between families are checked by hand against NCCL's source
//! (each assertion names the tag and line it was computed from).

use planner::model::cells::{NUM_ALGORITHMS, NUM_PROTOCOLS};
use planner::model::examples::h200x2_capture;
use planner::model::input::{GraphInfo, ModelInput, NvlsState};
use planner::model::rules::{self, Rule, RULES};
use planner::model::select::Call;
use planner::model::table::{self, TuningTable};
use planner::model::{Algo, Coll, MaskReason, Model, Proto};
use planner::nccl_env::NcclEnv;
use planner::report::explain::nccl_table_lines;
use planner::search::Pattern;
use planner::topo::PathType;
use serde_json::Value;

const FAMILIES: [(&str, &str); 14] = [
    ("2.18", "v2.18.6-1"),
    ("2.19", "v2.19.4-1"),
    ("2.20", "v2.20.5-1"),
    ("2.21", "v2.21.5-1"),
    ("2.22", "v2.22.3-1"),
    ("2.23", "v2.23.4-1"),
    ("2.24", "v2.24.3-1"),
    ("2.25", "v2.25.1-1"),
    ("2.26", "v2.26.6-1"),
    ("2.27", "v2.27.7-1"),
    ("2.28", "v2.28.9-1"),
    ("2.29", "v2.29.7-1"),
    ("2.30", "v2.30.7-1"),
    ("2.31", "dev@86fa684d (2.31.0a7)"),
];

const AR: usize = Coll::AllReduce as usize;
const AG: usize = Coll::AllGather as usize;

fn t(family: &str) -> TuningTable {
    table::builtin(family).unwrap()
}

/// The capture machine as NCCL ran it (`NCCL_NVLS_ENABLE=0`).
fn capture_env() -> NcclEnv {
    NcclEnv {
        nvls_enable: Some(0),
        ..Default::default()
    }
}

fn model(input: &ModelInput, env: &NcclEnv, family: &str) -> Model {
    crate::common::model_of(input.clone(), env.clone(), family)
}

fn capture(family: &str) -> Model {
    model(&h200x2_capture(), &capture_env(), family)
}

fn bw(m: &Model, c: usize, a: Algo, p: Proto) -> f32 {
    m.tuned.bandwidth[c][a as usize][p as usize]
}

fn lat(m: &Model, c: usize, a: Algo, p: Proto) -> f32 {
    m.tuned.latency[c][a as usize][p as usize]
}

fn close(got: f32, want: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

fn families_in(lo: &str, hi: &str) -> Vec<&'static str> {
    let key = |f: &str| rules::parse_family(f).unwrap();
    FAMILIES
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| key(f) >= key(lo) && key(f) <= key(hi))
        .collect()
}

#[test]
fn every_family_loads_with_the_tag_it_was_read_from() {
    assert_eq!(table::families(), FAMILIES.map(|(f, _)| f).to_vec());
    for (family, tag) in FAMILIES {
        let tb = t(family);
        assert_eq!(tb.family, family);
        assert_eq!(tb.verified_against, format!("NCCL {tag}"));
        assert_eq!(Some(tb.version), rules::parse_family(family));
        assert_eq!(
            tb.changes_from_previous.is_empty(),
            family == "2.18",
            "{family}"
        );
        // treeCorrectionFactor has 23 entries up to 2.28, 24 from 2.29
        // (v2.29.7-1 src/graph/tuning.cc:581).
        let want = if tb.version >= (2, 29) { 24 } else { 23 };
        assert_eq!(tb.tree_correction_factor[0].len(), want, "{family}");
    }
}

/// A table file's constants as dotted paths (`hw_latencies.NET.Tree`).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    const META: [&str; 7] = [
        "family",
        "verified_against",
        "pre_release",
        "sources",
        "notes",
        "changes_from_previous",
        "patch_changes",
    ];
    if let Value::Object(map) = v {
        for (k, item) in map {
            if prefix.is_empty() && META.contains(&k.as_str()) {
                continue;
            }
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if item.is_object() {
                leaves(item, &path, out);
            } else {
                out.push((path, item.clone()));
            }
        }
    }
}

#[test]
fn changes_from_previous_list_exactly_what_differs() {
    for pair in table::EMBEDDED.windows(2) {
        let (prev_name, prev_text) = pair[0];
        let (name, text) = pair[1];
        let parse = |s: &str| -> Vec<(String, Value)> {
            let mut out = Vec::new();
            leaves(&serde_json::from_str(s).unwrap(), "", &mut out);
            out
        };
        let before = parse(prev_text);
        let after = parse(text);
        let listed = t(name).changes_from_previous;
        // Every constant that differs is listed with its old and new value ...
        for (path, value) in &after {
            let old = before.iter().find(|(p, _)| p == path).map(|(_, v)| v);
            if old != Some(value) {
                let c = listed
                    .iter()
                    .find(|c| &c.what == path)
                    .unwrap_or_else(|| panic!("{name}: {path} changed but is not listed"));
                assert_eq!(Some(&c.from), old, "{name}: {path}");
                assert_eq!(&c.to, value, "{name}: {path}");
                assert!(
                    c.source.starts_with('v') || c.source.starts_with("dev@"),
                    "{name}: {path} cites a tag or the pre-release commit"
                );
            }
        }
        // ... and every rule that starts or ends here.
        let prev = rules::parse_family(prev_name).unwrap();
        let this = rules::parse_family(name).unwrap();
        for r in RULES {
            let flips = r.applies_to(prev) != r.applies_to(this);
            let entry = listed.iter().find(|c| c.what == format!("rule:{}", r.name));
            assert_eq!(entry.is_some(), flips, "{name}: rule {}", r.name);
            if let Some(c) = entry {
                let on = |b: bool| Value::from(if b { "on" } else { "off" });
                assert_eq!(c.from, on(r.applies_to(prev)), "{name}: rule {}", r.name);
                assert_eq!(c.to, on(r.applies_to(this)), "{name}: rule {}", r.name);
            }
        }
        // Nothing listed that did not change.
        for c in &listed {
            if let Some(rule) = c.what.strip_prefix("rule:") {
                assert!(RULES.iter().any(|r| r.name == rule), "{name}: {rule}");
            } else {
                let old = before.iter().find(|(p, _)| *p == c.what).map(|(_, v)| v);
                assert_ne!(old, Some(&c.to), "{name}: {} did not change", c.what);
            }
        }
    }
}

#[test]
fn table_flags_agree_with_the_rule_catalogue() {
    for (family, _) in FAMILIES {
        let tb = t(family);
        let b = &tb.behaviour;
        assert_eq!(
            b.ll128_mixed_compcap_allowed_from_sm90,
            tb.has(Rule::Ll128MixedGenerationsFromSm90),
            "{family}"
        );
        assert_eq!(
            b.collnet_chain_needs_chain_support,
            tb.has(Rule::CollnetChainNeedsChainSupport),
            "{family}"
        );
        assert_eq!(
            b.nvls_tree_correction_sm100_x86,
            tb.has(Rule::NvlsTreeCorrectionBlackwellX86),
            "{family}"
        );
    }
}

#[test]
fn any_version_maps_to_a_family() {
    for (family, _) in FAMILIES {
        assert_eq!(table::for_version(family).unwrap().family, family);
    }
    let c = table::for_version("2.22.3").unwrap();
    assert_eq!((c.family, c.notice), ("2.22", None));
    assert_eq!(table::for_version("v2.19.4-1").unwrap().family, "2.19");
    // Newer than the newest family (2.32, whose source is not public here): the
    // newest modelled (2.31, pre-release), and one line saying so.
    let c = table::for_version("2.32.1").unwrap();
    assert_eq!(c.family, "2.31");
    let notice = c.notice.unwrap();
    assert!(
        notice.contains("2.32.1")
            && notice.contains("not modelled")
            && notice.contains("newest modelled 2.31 (pre-release)")
            && notice.contains("--from-log"),
        "{notice}"
    );
    assert_eq!(notice.lines().count(), 1);
    assert_eq!(table::for_version("3.0").unwrap().family, "2.31");
    // 2.31 itself: its table, and a line saying it is pre-release.
    let (tb, notice) = table::builtin_for_version("2.31").unwrap();
    assert_eq!(tb.family, "2.31");
    assert!(tb.pre_release);
    let notice = notice.unwrap();
    assert!(notice.contains("pre-release"), "{notice}");
    assert_eq!(notice.lines().count(), 1);
    // Released families say nothing.
    assert_eq!(table::for_version("2.30.7").unwrap().notice, None);
    // Older than 2.18, or not a version: bad input naming it.
    for bad in ["2.17", "2.4.8", "two"] {
        let e = table::for_version(bad).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(bad), "{e}");
    }
}

#[test]
fn capture_init_table_under_2_28_equals_the_log() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/h200x2-nvswitch-vm/nccl-init-rank0.log"
    );
    let log = std::fs::read_to_string(path).unwrap();
    let expected: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("NCCL INFO "))
        .filter(|m| {
            m.starts_with("  Algorithm   |")
                || m.starts_with("  Protocol    |")
                || m.starts_with(" Max NThreads |")
                || Coll::ALL
                    .iter()
                    .any(|c| m.starts_with(&format!("{:>13} |", c.nccl_name())))
                || m.starts_with("threadThresholds ")
        })
        .collect();
    assert_eq!(expected.len(), 25);
    assert_eq!(nccl_table_lines(&capture("2.28")), expected);
}

/// The capture (2x H200, one node, ring 12 ch x 30 GB/s, tree 12 ch x 60 GB/s,
/// NVLink, balanced tree) in every family: cells computed by hand.
#[test]
fn capture_cells_by_hand_in_every_family() {
    for (family, _) in FAMILIES {
        let m = capture(family);
        let v = m.table.version;
        // Ring/LL AllReduce: busBw 12*30 = 360.
        // 2.18-2.20: x1/4 (v2.18.6-1 src/graph/tuning.cc:178) = 90, capped by
        // llMaxBws Hopper-N1 87.7 (v2.18.6-1 :89, the Ampere value); 2.21+: x0.5
        // (v2.21.5-1 :180) = 180, capped by 141.0 (v2.21.5-1 :89). Ratio 2/2.
        let ring_ll = if v <= (2, 20) { 87.7 } else { 141.0 };
        close(bw(&m, AR, Algo::Ring, Proto::Ll), ring_ll, family);
        // AllGather on one node: x1/3 up to 2.20 = 120 -> 87.7; ratio nRanks/nsteps = 2.
        close(bw(&m, AG, Algo::Ring, Proto::Ll), 2.0 * ring_ll, family);
        // Tree/LL AllReduce: min(720*0.92, 12*38.7) = 464.4, /3.8 = 122.2,
        // capped by llMaxBw, x0.5.
        let tree_ll = if v <= (2, 20) {
            87.7 * 0.5
        } else {
            464.4 / 3.8 * 0.5
        };
        close(bw(&m, AR, Algo::Tree, Proto::Ll), tree_ll, family);
        // Ring/LL latency 6.6 + 2 x 0.6 in every family (v2.18.6-1 :57,67).
        close(lat(&m, AR, Algo::Ring, Proto::Ll), 7.8, family);
        // Tree/Simple latency baseLat + 2 x hwLat[NVLINK][Tree][Simple]:
        // 0 + 2x4 (v2.18.6-1 :57,67), 0 + 2x28 (v2.19.4-1 :57,67, to 2.22),
        // 8.4 + 2x4 (v2.23.4-1 :57,67).
        let tree_simple = match v {
            (2, 18) => 8.0,
            (2, 19..=22) => 56.0,
            _ => 16.4,
        };
        close(lat(&m, AR, Algo::Tree, Proto::Simple), tree_simple, family);
        // CollNetDirect/Simple latency (empty graph: PCI row, ppn 2):
        // 2.18: 0 + 2*(8.0 + 0.5) + 10.7 (v2.18.6-1 :58,72,76,232);
        // 2.19+: 2*(3.7 + 0.4) + 31 (v2.19.4-1 :72,76,236).
        let cnd = if v == (2, 18) { 27.7 } else { 39.2 };
        close(lat(&m, AR, Algo::CollNetDirect, Proto::Simple), cnd, family);
        // CollNetChain/Simple: 2*(ppn-1)*hwLat[PCI][CNC] + hwLat[NET][CNC]:
        // 2*8 + 14 (v2.18.6-1 :72,76); 2*2.8 + 30 (v2.19.4-1 :72,76).
        let cnc = if v == (2, 18) { 30.0 } else { 35.6 };
        close(lat(&m, AR, Algo::CollNetChain, Proto::Simple), cnc, family);
        // PAT: absent before 2.23; from 2.23 disabled (2 GPUs per node).
        let pat = m.tuned.masks_of(Coll::AllGather, Algo::Pat, Proto::Simple);
        if v < (2, 23) {
            assert!(
                matches!(&pat[0], MaskReason::NotInFamily { first, .. } if first == "2.23"),
                "{family}: {pat:?}"
            );
        } else {
            assert!(
                matches!(pat[0], MaskReason::PatDisabled(_)),
                "{family}: {pat:?}"
            );
        }
        // NVLS AllGather: no kernel before 2.19 (v2.19.4-1 :168-169).
        let nvls = m.tuned.masks_of(Coll::AllGather, Algo::Nvls, Proto::Simple);
        assert_eq!(
            matches!(nvls[0], MaskReason::NotInFamily { .. }),
            v < (2, 19),
            "{family}: {nvls:?}"
        );
        // LL128 is on everywhere on sm90 + NVLink: Ring/LL128 = 360*0.92 = 331.2.
        close(bw(&m, AR, Algo::Ring, Proto::Ll128), 331.2, family);
    }
}

#[test]
fn capture_picks_differ_only_where_the_model_changed() {
    // 16 MiB AllReduce: Ring/Simple wins in every family (Tree/Simple's
    // latency or bandwidth never beats it on 2 GPUs).
    for (family, _) in FAMILIES {
        let m = capture(family);
        let c = m.choose(Coll::AllReduce, 16 << 20, 1).unwrap();
        assert_eq!((c.algo, c.proto), (Algo::Ring, Proto::Simple), "{family}");
    }
    // 8 KiB AllReduce: Ring/LL (7.8 + 8192/(1000 x bw)) in every family; the
    // bandwidth term grows from 0.058 to 0.093 µs when llMaxBw is 87.7.
    for (family, _) in FAMILIES {
        let m = capture(family);
        let c = m.choose(Coll::AllReduce, 8192, 1).unwrap();
        assert_eq!((c.algo, c.proto), (Algo::Ring, Proto::Ll), "{family}");
        let want = 7.8
            + 8192.0
                / (1000.0
                    * if m.table.version <= (2, 20) {
                        87.7
                    } else {
                        141.0
                    });
        close(c.time_us, want, family);
    }
}

/// Two nodes of one GPU: ring and tree 4 channels x 20 GB/s, PIX to the NIC.
fn one_gpu_per_node() -> ModelInput {
    let mut input = h200x2_capture();
    input.n_nodes = 2;
    input.local_ranks = 1;
    input.has_nvswitch = false;
    let g = GraphInfo {
        pattern: Pattern::Ring,
        n_channels: 4,
        bw_intra: 20.0,
        bw_inter: 20.0,
        type_intra: PathType::Loc,
        type_inter: PathType::Pix,
        latency_inter: 0.0,
        same_channels: false,
    };
    input.ring = g.clone();
    input.tree = GraphInfo {
        pattern: Pattern::BalancedTree,
        ..g
    };
    input.channels = 8;
    input
}

#[test]
fn one_gpu_per_node_rules() {
    let input = one_gpu_per_node();
    let env = capture_env();
    let (m22, m23, m24, m28) = (
        model(&input, &env, "2.22"),
        model(&input, &env, "2.23"),
        model(&input, &env, "2.24"),
        model(&input, &env, "2.28"),
    );
    // Ring/LL128 busBw 4*20 = 80: x0.7 with ppn < 2 up to 2.22
    // (v2.22.3-1 src/graph/tuning.cc:179), x0.92 from 2.23 (v2.23.4-1 :188).
    close(bw(&m22, AR, Algo::Ring, Proto::Ll128), 56.0, "2.22");
    close(bw(&m23, AR, Algo::Ring, Proto::Ll128), 73.6, "2.23");
    // Ring/LL AllReduce latency, nsteps 2, intraLat max(hwLat[PCI][Ring][LL] 1.0,
    // netOverhead 1.0): 2.22 counts 2*nNodes = 4 inter steps (v2.22.3-1 :159) at
    // hwLat[NET][Ring][LL] 2.7: 6.6 + (2-4)*1.0 + 4*2.7 = 15.4. 2.23 counts
    // 2*(nNodes-1) = 2 (v2.23.4-1 :258) at the Tree row for ppn 1 (:236) 5.0:
    // 6.6 + 0 + 2*5.0 = 16.6.
    close(lat(&m22, AR, Algo::Ring, Proto::Ll), 15.4, "2.22");
    close(lat(&m23, AR, Algo::Ring, Proto::Ll), 16.6, "2.23");
    // Tree/Simple: 0 + 2*log2(2)*28 (v2.22.3-1 :57,75) vs 8.4 + 2*14 (v2.23.4-1 :57,75).
    close(lat(&m22, AR, Algo::Tree, Proto::Simple), 56.0, "2.22");
    close(lat(&m23, AR, Algo::Tree, Proto::Simple), 36.4, "2.23");
    // PAT AllGather (one GPU per node, auto-enabled): busBw 80 x0.85
    // (v2.23.4-1 :193) or x0.75 (v2.24.3-1 :256), no algbw conversion. Latency
    // 8 + log2(2)*14/3.5 + 2*2.8 = 17.6 hard-coded (v2.23.4-1 :278-280) and
    // from baseLat 8.0 (v2.28.9-1 :398): the same number.
    close(bw(&m23, AG, Algo::Pat, Proto::Simple), 68.0, "2.23");
    close(bw(&m24, AG, Algo::Pat, Proto::Simple), 60.0, "2.24");
    close(lat(&m23, AG, Algo::Pat, Proto::Simple), 17.6, "2.23");
    close(lat(&m28, AG, Algo::Pat, Proto::Simple), 17.6, "2.28");
    assert!(matches!(
        m22.tuned
            .masks_of(Coll::AllGather, Algo::Pat, Proto::Simple)[0],
        MaskReason::NotInFamily { .. }
    ));
}

#[test]
fn ring_inter_steps_two_nodes_of_two() {
    let mut input = one_gpu_per_node();
    input.n_ranks = 4;
    input.local_ranks = 2;
    input.ring.type_intra = PathType::Nvl;
    let env = capture_env();
    // nsteps 2*(4-1) = 6, intraLat max(0.6, netOverhead 1.0) = 1.0, interLat 2.7 (ppn 2):
    // 2.22: 6.6 + (6-4)*1.0 + 4*2.7 = 19.4; 2.23: 6.6 + (6-2)*1.0 + 2*2.7 = 16.0.
    close(
        lat(&model(&input, &env, "2.22"), AR, Algo::Ring, Proto::Ll),
        19.4,
        "2.22",
    );
    close(
        lat(&model(&input, &env, "2.23"), AR, Algo::Ring, Proto::Ll),
        16.0,
        "2.23",
    );
}

/// 8 GPUs on one NVSwitch node with NVLS: NVLS graph 16 ch, 40 GB/s intra, 20 inter.
fn nvls_node() -> ModelInput {
    let mut input = h200x2_capture();
    input.n_ranks = 8;
    input.local_ranks = 8;
    input.nvls = GraphInfo {
        pattern: Pattern::Nvls,
        n_channels: 16,
        bw_intra: 40.0,
        bw_inter: 20.0,
        type_intra: PathType::Nvl,
        type_inter: PathType::Pix,
        latency_inter: 0.0,
        same_channels: false,
    };
    input.nvls_state = NvlsState::Supported;
    input.nvls_channels = 16;
    input
}

#[test]
fn nvls_bandwidth_and_latency_in_each_era() {
    let input = nvls_node();
    let env = NcclEnv::default();
    let nvls = |fam: &str, c: usize| bw(&model(&input, &env, fam), c, Algo::Nvls, Proto::Simple);
    // AllReduce, 16 channels:
    // 2.18: bw = bwIntra 40 (v2.18.6-1 src/graph/tuning.cc:174), x5/6 (:197): 533.33.
    close(nvls("2.18", AR), 640.0 * 5.0 / 6.0, "2.18");
    // 2.19-2.27: min(bwIntra, bwInter) = 20 (v2.19.4-1 :175), x5/6: 266.67.
    for f in families_in("2.19", "2.27") {
        close(nvls(f, AR), 320.0 * 5.0 / 6.0, f);
    }
    // 2.28+: min(40*0.85*15/16*2 = 63.75, 20) = 20 (v2.28.9-1 :290-299), x8/14.
    close(nvls("2.28", AR), 320.0 * 8.0 / 14.0, "2.28");
    // AllGather: x5/6 up to 2.22; no conversion from 2.23 (v2.23.4-1 :221);
    // 2.27: min(40*7/8, 20*0.9) = 18 (v2.27.7-1 :272); 2.28: min(27.9, 20) = 20.
    close(nvls("2.22", AG), 320.0 * 5.0 / 6.0, "2.22");
    close(nvls("2.26", AG), 320.0, "2.26");
    close(nvls("2.27", AG), 288.0, "2.27");
    close(nvls("2.28", AG), 320.0, "2.28");
    // Latency: baseLat 23 (v2.18.6-1 :59), hwLat[NVLINK][NVLS] 23 (v2.19.4-1 :69),
    // 25 from 2.21 (v2.21.5-1 :69).
    let l = |fam: &str| lat(&model(&input, &env, fam), AR, Algo::Nvls, Proto::Simple);
    close(l("2.18"), 23.0, "2.18");
    close(l("2.20"), 23.0, "2.20");
    close(l("2.21"), 25.0, "2.21");
    close(l("2.30"), 25.0, "2.30");
    // busbw factors: the inverse of 5/6 before 2.28, nsteps/nRanks = 14/8 from 2.28;
    // AllGather NVLS kept bus bandwidth from 2.23 only.
    let bf = |fam: &str, c: Coll| model(&input, &env, fam).bus_factor(c, Algo::Nvls);
    close(bf("2.27", Coll::AllReduce) as f32, 1.2, "2.27");
    close(bf("2.28", Coll::AllReduce) as f32, 14.0 / 8.0, "2.28");
    close(bf("2.22", Coll::AllGather) as f32, 1.2, "2.22");
    close(bf("2.23", Coll::AllGather) as f32, 1.0, "2.23");
}

#[test]
fn ll128_gate_by_gpu_generation() {
    let mut input = h200x2_capture();
    input.min_sm = 86;
    input.max_sm = 86;
    let env = capture_env();
    // sm86 is not in the 2.18-2.26 list (v2.26.6-1 src/graph/tuning.cc:432-439).
    let m26 = model(&input, &env, "2.26");
    assert_eq!(bw(&m26, AR, Algo::Ring, Proto::Ll128), 0.0);
    assert!(matches!(
        m26.tuned
            .masks_of(Coll::AllReduce, Algo::Ring, Proto::Ll128)[0],
        MaskReason::Ll128UnlistedGpu { sm: 86, .. }
    ));
    // 2.27: any sm70+ (v2.27.7-1 :470); Ampere row: min(331.2, 12*20) = 240.
    close(
        bw(&model(&input, &env, "2.27"), AR, Algo::Ring, Proto::Ll128),
        240.0,
        "2.27",
    );
    // sm100 before 2.25: Hopper rows (v2.24.3-1 :210) and no LL128 (no case 100).
    input.min_sm = 100;
    input.max_sm = 100;
    let m24 = model(&input, &env, "2.24");
    close(bw(&m24, AR, Algo::Ring, Proto::Ll), 141.0, "2.24");
    assert_eq!(bw(&m24, AR, Algo::Ring, Proto::Ll128), 0.0);
    // 2.25: Blackwell llMaxBw 2*141 (v2.25.1-1 :155): min(282, 180) = 180.
    let m25 = model(&input, &env, "2.25");
    close(bw(&m25, AR, Algo::Ring, Proto::Ll), 180.0, "2.25");
    // LL128 on (case 100, v2.25.1-1 :435): min(331.2, 12*73.4) = 331.2.
    close(bw(&m25, AR, Algo::Ring, Proto::Ll128), 331.2, "2.25");
}

#[test]
fn collnet_direct_allgather_before_and_after_2_27() {
    let mut input = h200x2_capture();
    input.n_ranks = 16;
    input.n_nodes = 2;
    input.local_ranks = 8;
    input.collnet_enable = true;
    input.collnet_chain_support = true;
    input.collnet_heads = 8;
    input.collnet_direct = GraphInfo {
        pattern: Pattern::CollNetDirect,
        n_channels: 8,
        bw_intra: 20.0,
        bw_inter: 20.0,
        type_intra: PathType::Nvl,
        type_inter: PathType::Pix,
        latency_inter: 0.0,
        same_channels: false,
    };
    input.collnet_chain = GraphInfo {
        pattern: Pattern::Tree,
        ..input.collnet_direct.clone()
    };
    let env = NcclEnv::default();
    let cnd = |fam: &str| {
        bw(
            &model(&input, &env, fam),
            AG,
            Algo::CollNetDirect,
            Proto::Simple,
        )
    };
    // 2.19: no kernel.
    assert_eq!(cnd("2.19"), 0.0);
    // 2.20-2.26: ppn*bwIntra = 160, w = (8-1)/7 = 1 -> x0.85 (v2.20.5-1 :189-203).
    close(cnd("2.20"), 136.0, "2.20");
    close(cnd("2.26"), 136.0, "2.26");
    // 2.27+: ppn*min(bwIntra, 0.9*bwInter) = 8*18 (v2.27.7-1 :290).
    close(cnd("2.27"), 144.0, "2.27");
}

#[test]
fn algorithm_lists_before_and_after_2_24() {
    // "ring;allreduce:tree" is one unknown name before 2.24 (v2.23.4-1
    // src/graph/tuning.cc:34-52): every algorithm off, then Ring and Tree back
    // because CollNet is off (:310-314), so the pick is the default one.
    let env = NcclEnv {
        algo: Some("ring;allreduce:tree".to_string()),
        ..capture_env()
    };
    let default = capture("2.23")
        .choose(Coll::AllReduce, 16 << 20, 1)
        .unwrap();
    let m23 = model(&h200x2_capture(), &env, "2.23");
    let c23 = m23.choose(Coll::AllReduce, 16 << 20, 1).unwrap();
    assert_eq!((c23.algo, c23.proto), (default.algo, default.proto));
    // 2.24: Tree only for AllReduce (v2.24.3-1 :53-116).
    let c24 = model(&h200x2_capture(), &env, "2.24")
        .choose(Coll::AllReduce, 16 << 20, 1)
        .unwrap();
    assert_eq!(c24.algo, Algo::Tree);
}

#[test]
fn ring_backup_until_2_23() {
    // NCCL_ALGO=Tree leaves AllGather with nothing. 2.19-2.23 give it Ring's
    // bandwidths back (v2.23.4-1 src/graph/tuning.cc:343-357): Ring/LL 282.
    let env = NcclEnv {
        algo: Some("Tree".to_string()),
        ..capture_env()
    };
    let m23 = model(&h200x2_capture(), &env, "2.23");
    close(bw(&m23, AG, Algo::Ring, Proto::Ll), 282.0, "2.23");
    let c = m23.choose(Coll::AllGather, 1 << 20, 1).unwrap();
    assert_eq!(c.algo, Algo::Ring);
    // 2.18 never disables Ring outside AllReduce (v2.18.6-1 :296-297).
    let m18 = model(&h200x2_capture(), &env, "2.18");
    assert_eq!(
        m18.choose(Coll::AllGather, 1 << 20, 1).unwrap().algo,
        Algo::Ring
    );
    // From 2.24 there is no backup: a usage error.
    let e = model(&h200x2_capture(), &env, "2.24")
        .choose(Coll::AllGather, 1 << 20, 1)
        .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        bw(
            &model(&h200x2_capture(), &env, "2.24"),
            AG,
            Algo::Ring,
            Proto::Ll
        ),
        0.0
    );
}

#[test]
fn threads_pipe_ops_and_the_one_hour_argmin() {
    // Tree/Simple at 1 KiB on the capture: 2.21 halves 512 threads while
    // 1024 < nc*nt*64 and nt%128 == 0 -> 64, plus 4 warps -> 192
    // (v2.21.5-1 src/enqueue.cc:1566-1618); 2.22 always 640 (v2.22.3-1 :1655).
    let (_, nt21) = capture("2.21").channels_threads(Algo::Tree, Proto::Simple, 1024);
    let (_, nt22) = capture("2.22").channels_threads(Algo::Tree, Proto::Simple, 1024);
    assert_eq!((nt21, nt22), (192, 640));
    // numPipeOps for 30 ops on 24 channels: 1 in 2.20-2.21 (v2.21.5-1
    // :777), ceil(30/24) = 2 from 2.22 (v2.22.3-1 :441).
    assert_eq!(capture("2.21").num_pipe_ops(30), 1);
    assert_eq!(capture("2.22").num_pipe_ops(30), 2);
    // The argmin starts at one hour up to 2.28 (v2.28.9-1 src/enqueue.cc:1828),
    // at FLT_MAX from 2.29 (v2.29.7-1 :1940).
    let mut slow = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
    slow[Algo::Ring as usize][Proto::Simple as usize] = 4.0e9;
    assert_eq!(capture("2.28").argmin_for_family(&slow), None);
    assert!(capture("2.29").argmin_for_family(&slow).is_some());
    // Work batch for the Tree latency count: 9, 16, 10, 8 (devcomm.h/device.h).
    let batch = |f: &str| t(f).max_dev_work_batch_colls;
    assert_eq!(
        [batch("2.21"), batch("2.22"), batch("2.29"), batch("2.30")],
        [9, 16, 10, 8]
    );
}

#[test]
fn calls_work_for_every_family() {
    // Every family evaluates and plans a sweep of calls on the capture.
    for (family, _) in FAMILIES {
        let m = capture(family);
        for coll in Coll::ALL {
            for size in [64u64, 1 << 16, 1 << 26] {
                let call = Call::new(coll, size, 2, 1).unwrap();
                let eval = m.evaluate(&call).unwrap();
                assert!(eval.winner().usable(), "{family} {coll:?} {size}");
                m.plan(&call).unwrap();
            }
        }
    }
}

/// The machine of `tests/data/logs/nccl-2.29.7-rtx5090-2ranks-socket.log`
/// (see its README): 2 nodes of one RTX 5090 over sockets. The graph values
/// are read off the log's own table; the test checks the 2.29 formulas.
fn rtx5090_two_hosts() -> ModelInput {
    let mut input = one_gpu_per_node();
    input.min_sm = 120;
    input.max_sm = 120;
    input.ring = GraphInfo {
        pattern: Pattern::Ring,
        n_channels: 2,
        bw_intra: 1.2,
        bw_inter: 1.2,
        type_intra: PathType::Loc,
        type_inter: PathType::Phb,
        latency_inter: 0.0,
        same_channels: true,
    };
    input.tree = GraphInfo {
        pattern: Pattern::Tree,
        bw_intra: 2.4,
        bw_inter: 2.4,
        same_channels: false,
        ..input.ring.clone()
    };
    input.max_tree_pattern = Pattern::Tree;
    input.channels = 4;
    input.nvls_state = NvlsState::Unavailable("no NVSwitch".to_string());
    input
}

#[test]
fn public_2_29_log_table_and_broadcast_choices() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/logs/nccl-2.29.7-rtx5090-2ranks-socket.log"
    );
    let log = std::fs::read_to_string(path).unwrap();
    let messages: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("NCCL INFO ").map(|(_, m)| m))
        .collect();
    let version = messages[0].strip_prefix("NCCL version ").unwrap();
    let (tb, notice) = table::builtin_for_version(version).unwrap();
    assert_eq!((tb.family.as_str(), notice), ("2.29", None));
    let m = Model::new(rtx5090_two_hosts(), NcclEnv::default(), tb).unwrap();
    // The 24 table lines; the log has no threadThresholds line (INIT subsystem off).
    let table_lines: Vec<&str> = messages
        .iter()
        .copied()
        .filter(|m| {
            m.starts_with("  Algorithm   |")
                || m.starts_with("  Protocol    |")
                || m.starts_with(" Max NThreads |")
                || Coll::ALL
                    .iter()
                    .any(|c| m.starts_with(&format!("{:>13} |", c.nccl_name())))
        })
        .collect();
    assert_eq!(table_lines.len(), 24);
    let ours = nccl_table_lines(&m);
    for (k, want) in table_lines.iter().enumerate() {
        assert_eq!(ours[k], *want, "table line {k}");
    }
    // Per-call lines: Ring/LL up to 16 KiB, Ring/Simple from 32 KiB (crossover
    // 9.3 + b/1200 = 22.4 + b/2400 at b = 31440), channel ranges as logged.
    let calls: Vec<&str> = messages
        .iter()
        .copied()
        .filter(|m| m.starts_with("Broadcast: "))
        .collect();
    assert_eq!(calls.len(), 18);
    for line in calls {
        let bytes: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let plan = m
            .plan(&Call::new(Coll::Broadcast, bytes, 2, 1).unwrap())
            .unwrap();
        assert_eq!(
            planner::report::explain::nccl_call_lines(&[plan]),
            vec![line.to_string()]
        );
    }
}

#[test]
fn the_pre_release_family_is_marked_and_never_the_default() {
    for (family, _) in FAMILIES {
        let tb = t(family);
        assert_eq!(tb.pre_release, table::is_pre_release(family), "{family}");
        assert_eq!(tb.pre_release, family == "2.31", "{family}");
    }
    // Without a version the newest released family is used, not the pre-release one.
    assert_eq!(table::newest_family(), "2.30");
    assert_eq!(table::newest_modelled_family(), "2.31");
    // The released tables serialize as before (no `pre_release` key).
    let json = serde_json::to_value(t("2.30")).unwrap();
    assert!(json.get("pre_release").is_none());
    assert_eq!(
        serde_json::to_value(t("2.31")).unwrap()["pre_release"],
        true
    );
}

#[test]
fn a_live_libnccl_maps_to_a_family() {
    // ncclGetVersion 23100 (2.31.0a7 on dev) and 23203 (PyPI's nvidia-nccl-cu12/-cu13 2.32.3).
    assert_eq!(planner::nccl::version_string(23100), "2.31.0");
    assert_eq!(planner::nccl::version_string(23203), "2.32.3");
    let (family, exact, notice) = table::live_family(2, 31);
    assert_eq!((family, exact), ("2.31", true));
    assert!(notice.unwrap().contains("pre-release"));
    let (family, exact, notice) = table::live_family(2, 32);
    assert_eq!((family, exact), ("2.31", false));
    let notice = notice.unwrap();
    assert!(
        notice.contains("NCCL 2.32 is not modelled")
            && notice.contains("newest modelled 2.31 (pre-release)")
            && notice.contains("--from-log"),
        "{notice}"
    );
    assert_eq!(table::live_family(2, 30), ("2.30", true, None));
    assert_eq!(table::live_family(2, 28), ("2.28", true, None));
    // Older than every family: the oldest, and the caller's own line (no notice here).
    assert_eq!(table::live_family(2, 17), ("2.18", false, None));
    assert_eq!(table::NEWEST_KNOWN_UNMODELLED, "2.32.3");
}

/// `NCCL_ALGO=allreduce:ring NCCL_PROTO=Simple` on the capture machine: 2.30
/// keeps every algorithm for the other functions, 2.31 zero-fills them
/// (dev@86fa684d src/tuning/cost_model.cc:315-318: `std::fill_n(algoEnable, ..., 0)`;
/// :349-361: a function forced by NCCL_PROTO takes its row from algoEnable).
#[test]
fn nccl_algo_for_one_function_zero_fills_the_others_in_2_31() {
    let env = NcclEnv {
        algo: Some("allreduce:ring".to_string()),
        proto: Some("Simple".to_string()),
        ..capture_env()
    };
    let old = model(&h200x2_capture(), &env, "2.30");
    let new = model(&h200x2_capture(), &env, "2.31");
    assert!(new.table.has(Rule::AlgoEnvZeroFillsUnnamedFunctions));
    assert!(!old.table.has(Rule::AlgoEnvZeroFillsUnnamedFunctions));
    assert!(bw(&old, AG, Algo::Ring, Proto::Simple) > 0.0);
    for a in Algo::ALL {
        for p in Proto::ALL {
            assert_eq!(bw(&new, AG, a, p), 0.0, "AllGather {a:?}/{p:?}");
        }
    }
    // AllReduce, which NCCL_ALGO names, keeps Ring/Simple in both.
    close(
        bw(&new, AR, Algo::Ring, Proto::Simple),
        bw(&old, AR, Algo::Ring, Proto::Simple) as f64,
        "AllReduce Ring/Simple",
    );
}

/// Ring/Simple threads on a ring no faster than PCI_BW (12 GB/s): 256 up to
/// 2.30 (v2.30.7-1 src/graph/tuning.cc:244-245), NCCL_SIMPLE_MAX_NTHREADS 512 in
/// 2.31 (dev@86fa684d src/tuning/tuning_general.cc:77-79).
#[test]
fn ring_simple_threads_no_longer_drop_on_slow_rings_in_2_31() {
    let mut input = h200x2_capture();
    input.ring.bw_intra = 5.0;
    input.ring.n_channels = 2;
    let ring_simple = |family: &str| {
        model(&input, &capture_env(), family).tuned.max_threads[Algo::Ring as usize]
            [Proto::Simple as usize]
    };
    assert_eq!(ring_simple("2.30"), 256);
    assert_eq!(ring_simple("2.31"), 512);
}
