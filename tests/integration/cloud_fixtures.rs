//! The cloud fixtures (AWS p4d/p5/p5en, Azure NDv4/NDv5, GCP A3 High/Mega): the
//! commands run on each, the topology facts their sources give, the channels
//! NCCL's search finds and the algorithm NCCL's model picks, each value with the
//! hand calculation that makes it right.
//!
//! Shorthands (NCCL 2.28.9): NVLink per link 20.0 GB/s (sm80) / 20.6 (sm90); PCIe
//! x16 Gen3 12, Gen4 24, Gen5 48; NET = speed/8000. Search ladders (search.cc):
//! intra sm80 [40 30 20 ..], intra sm90 [60 50 40 30 24 ..], inter sm80 [48 30 28 24
//! 20 18 15 12 10 9 7 6 5 ..], inter sm90 [48 45 42 40 30 24 22 20 17.5 15 12 6 ..].
//! A search stops when its channels fill totalBw (the GPU's summed NVLink
//! bandwidth; x8/7 for trees); else it relaxes in NCCL's order (sameChannels, a
//! simpler tree on sm90, typeIntra, typeInter, crossNic 2, lower speeds while
//! next/best > 0.49) and keeps the best nChannels x bw. Trees must match the
//! ring's channel count. Pass 2 raises ring speeds, or a tree's bwIntra while
//! below 2 x bwInter. Runtime channels: search channels x 2.
//! Model (tuning.cc): busBw = channels x bw (bwIntra up to 2 nodes); Ring/LL128
//! x0.92; Tree x0.92 capped at channels x perChMaxTreeBw (sm80 2 nodes 23.6, sm90
//! 41.4); NVLS intra = bwIntra x 0.85 x (ch-1)/ch x 2; NVLSTree 2 nodes min(that,
//! 2 x bwInter, 57.7); algbw = busBw x nRanks/nSteps (Ring, NVLS: 8/14 on 8 ranks,
//! 16/30 on 16) or x0.5 (Tree). Latencies: base + hops; a NET hop costs its
//! hardware latency plus the NIC's `latency` (twice for Simple); multi-node Ring
//! Simple latency x1.4; intra steps cost at least the net overhead x3 for Simple
//! (Intel 1.0 µs, AMD 2.0 µs).

use crate::common::{close, planner};
use planner::pipeline::load_fixture;
use planner::search::{self, Pattern, SearchOptions, SearchResult};
use planner::topo::{fixtures, Cluster, NodeKind, PathType, Topology};

const CLOUD: [&str; 7] = [
    "aws-p4d",
    "aws-p5",
    "aws-p5en",
    "azure-ndv4",
    "azure-ndv5",
    "gcp-a3-high",
    "gcp-a3-mega",
];

fn stdout_of(args: &[&str]) -> String {
    let out = planner().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "planner {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.trim().is_empty(), "planner {args:?} printed nothing");
    text
}

#[test]
fn every_cloud_fixture_is_listed_and_runs_topo_channels_explain() {
    let listing = stdout_of(&["fixtures"]);
    for name in CLOUD {
        let f = fixtures::find(name).unwrap_or_else(|| panic!("{name} is registered"));
        assert!(listing.contains(name), "`planner fixtures` lists {name}");
        assert!(
            listing.contains(f.description),
            "`planner fixtures` shows {name}'s description"
        );
        let topo = stdout_of(&["topo", "--fixture", name]);
        assert!(topo.contains(&format!("fixture {name}")), "{name}: {topo}");
        stdout_of(&["channels", "--fixture", name]);
        stdout_of(&["explain", "--fixture", name, "--size", "16M"]);
        stdout_of(&["topo", "--fixture", name, "--nodes", "2"]);
    }
}

// ---------------------------------------------------------------- topology facts

fn load(name: &str) -> Topology {
    load_fixture(name).unwrap()
}

struct Facts {
    sm: u32,
    /// GPU to NVSwitch, GB/s: links x per-link bandwidth.
    nvlink_gbs: f64,
    cpus: usize,
    /// Between CPU nodes, GB/s (NCCL's per-vendor constant).
    cpu_gbs: f64,
    nics: usize,
    speed_mbps: f64,
    latency_us: f64,
    /// GPU0 to its own switch's NIC.
    local: (PathType, f64),
}

fn facts_of(t: &Topology) -> Facts {
    let gpus = t.nodes(NodeKind::Gpu);
    let nets = t.nodes(NodeKind::Net);
    let cpus = t.nodes(NodeKind::Cpu);
    let net0 = t.node(nets[0]).net().unwrap();
    for &n in nets {
        let net = t.node(n).net().unwrap();
        assert_eq!(net.speed_mbps, net0.speed_mbps, "one NIC speed per fixture");
        assert_eq!(net.latency_us, net0.latency_us);
        assert!(net.gdr, "{}: GPUDirect RDMA", net.name);
    }
    let p = t.path(gpus[0], nets[0]).unwrap();
    Facts {
        sm: t.gpus().next().unwrap().1.sm,
        nvlink_gbs: t.path(gpus[0], t.nodes(NodeKind::Nvs)[0]).unwrap().bw,
        cpus: cpus.len(),
        cpu_gbs: t.path(cpus[0], cpus[1]).unwrap().bw,
        nics: nets.len(),
        speed_mbps: net0.speed_mbps,
        latency_us: net0.latency_us,
        local: (p.ptype, p.bw),
    }
}

/// (name, sm, NVLink GB/s, CPU nodes, GB/s between them, NICs, Mb/s, NIC latency µs, GPU0 to its NIC)
#[rustfmt::skip]
type FactPin = (&'static str, u32, f64, usize, f64, usize, f64, f64, (PathType, f64));

#[test]
fn topology_facts_from_the_sources() {
    use PathType::{Pix, Pxn};
    // Hand values:
    // p4d: 12 x 20.0; Cascade Lake (model 85, SKL) 10; 4 EFA x 100 Gb/s; the plugin's 75 µs;
    //      GPU and NIC links "8 GT/s" x16 in AWS's file: 16 x 60 / 80 = 12.
    // p5: 18 x 20.6 = 370.8; AMD 16; 8 leader NICs of 4 x 100 Gb/s; 75 µs; Gen5 x16 48 under
    //      the NET's 50.
    // p5en: as p5 with Sapphire Rapids (model 143, SRP) 22 and the plugin's 35 µs.
    // NDv4: 12 x 20.0; 4 AMD NUMA nodes 16; 8 HDR; 0 µs (IB); "16 GT/s" x16 = 24.
    // NDv5: 370.8; SRP 22; 8 NDR 400 Gb/s; "32.0 GT/s PCIe" x16 = 48.
    // A3 High / Mega: 370.8; SRP 22; 4 / 8 gVNIC of 200 Gb/s; links 24 (as NCCL logged on A3 Mega).
    #[rustfmt::skip]
    let pins: [FactPin; 7] = [
        ("aws-p4d",     80, 240.0, 2, 10.0, 4, 100000.0, 75.0, (Pix, 12.0)),
        ("aws-p5",      90, 370.8, 2, 16.0, 8, 400000.0, 75.0, (Pix, 48.0)),
        ("aws-p5en",    90, 370.8, 2, 22.0, 8, 400000.0, 35.0, (Pix, 48.0)),
        ("azure-ndv4",  80, 240.0, 4, 16.0, 8, 200000.0,  0.0, (Pix, 24.0)),
        ("azure-ndv5",  90, 370.8, 2, 22.0, 8, 400000.0,  0.0, (Pix, 48.0)),
        ("gcp-a3-high", 90, 370.8, 2, 22.0, 4, 200000.0,  0.0, (Pix, 24.0)),
        ("gcp-a3-mega", 90, 370.8, 2, 22.0, 8, 200000.0,  0.0, (Pix, 24.0)),
    ];
    for (name, sm, nvl, cpus, cpu_gbs, nics, mbps, lat, local) in pins {
        let t = load(name);
        assert_eq!(t.nodes(NodeKind::Gpu).len(), 8, "{name}: 8 GPUs");
        assert!(t.has_nvswitch(), "{name}");
        let f = facts_of(&t);
        assert_eq!(f.sm, sm, "{name}");
        assert!(close(f.nvlink_gbs, nvl, 1e-6), "{name}: {}", f.nvlink_gbs);
        assert_eq!(f.cpus, cpus, "{name}");
        assert!(close(f.cpu_gbs, cpu_gbs, 1e-9), "{name}: {}", f.cpu_gbs);
        assert_eq!(f.nics, nics, "{name}");
        assert_eq!(f.speed_mbps, mbps, "{name}");
        assert_eq!(f.latency_us, lat, "{name}");
        assert_eq!(f.local, local, "{name}");
        // Every GPU pair is NVLink through the switch fabric.
        let g = t.nodes(NodeKind::Gpu);
        for &a in g {
            for &b in g {
                if a != b {
                    let p = t.path(a, b).unwrap();
                    assert_eq!(p.ptype, PathType::Nvl, "{name}");
                    assert!(close(p.bw, nvl, 1e-6), "{name}");
                }
            }
        }
        // A NIC on another switch is reached through an NVLink peer (PXN): GPU0's own path
        // crosses the CPUs (PHB or SYS, worse than PXN), even on p4d where the peer's
        // 12 GB/s is no faster.
        let last = *t.nodes(NodeKind::Net).last().unwrap();
        assert_eq!(t.path(g[0], last).unwrap().ptype, Pxn, "{name}");
    }
}

#[test]
fn nic_layout_per_switch() {
    // Which GPUs share a switch with which NICs (PIX), as the sources give it.
    fn pix(t: &Topology) -> Vec<Vec<usize>> {
        let nets = t.nodes(NodeKind::Net);
        t.nodes(NodeKind::Gpu)
            .iter()
            .map(|&g| {
                (0..nets.len())
                    .filter(|&n| t.path(g, nets[n]).unwrap().ptype == PathType::Pix)
                    .collect()
            })
            .collect()
    }
    let pairs = |per: usize, nics: usize| -> Vec<Vec<usize>> {
        (0..8)
            .map(|g| ((g / per) * nics..(g / per + 1) * nics).collect())
            .collect()
    };
    // p4d, A3 High: 2 GPUs and 1 NIC per switch.
    assert_eq!(pix(&load("aws-p4d")), pairs(2, 1));
    assert_eq!(pix(&load("gcp-a3-high")), pairs(2, 1));
    // p5, NDv5: 1 GPU and 1 (leader) NIC per switch.
    assert_eq!(pix(&load("aws-p5")), pairs(1, 1));
    assert_eq!(pix(&load("azure-ndv5")), pairs(1, 1));
    // p5en, NDv4, A3 Mega: 2 GPUs and 2 NICs per switch.
    assert_eq!(pix(&load("aws-p5en")), pairs(2, 2));
    assert_eq!(pix(&load("azure-ndv4")), pairs(2, 2));
    assert_eq!(pix(&load("gcp-a3-mega")), pairs(2, 2));
}

// ---------------------------------------------------------------- channel search

fn run(name: &str, nodes: usize) -> SearchResult {
    let cluster = Cluster {
        node: load(name),
        n_nodes: nodes,
        net_latency_us: 0.0,
    };
    search::search(&cluster, &SearchOptions::default()).unwrap()
}

/// (pattern, cross nic, channels, bw intra, bw inter, type intra, type inter, same channels)
type Pin = (Pattern, u32, usize, f64, f64, PathType, PathType, bool);

fn check(name: &str, r: &SearchResult, ring: Pin, tree: Pin, runtime: usize) {
    for (g, pin) in [(&r.graphs.ring, ring), (&r.graphs.tree, tree)] {
        let got = (
            g.pattern,
            g.cross_nic,
            g.n_channels,
            g.bw_intra,
            g.bw_inter,
            g.type_intra,
            g.type_inter,
            g.same_channels,
        );
        assert_eq!(got, pin, "{name}: graph {}", g.id);
        assert_eq!(g.channels.len(), g.n_channels);
    }
    assert_eq!(r.connection.n_channels, runtime, "{name}: runtime channels");
}

use PathType::{Nvl, Pix};
use Pattern::{BalancedTree, Ring, Tree};

#[test]
fn one_node_is_the_nvswitch_search() {
    // Inside one node only NVLink counts; every cloud machine searches like its NVIDIA
    // board (search_fixtures.rs: dgx-a100-8, hgx-h100-8):
    // sm80, 12 x 20 = 240: ring 6 x 40 fills 240, dup (40 >= 25, cc 80) -> 12 x 20; tree
    //   240 x 8/7 = 274.3, 12 channels at 40 or 30 exceed it -> 20, 240/20 = 12 chains.
    // sm90, 18 x 20.6 = 370.8: ring 6 x 60 = 360 short, lower speeds no better, 6 x 60 dup
    //   -> 12 x 30; tree 423.8 -> 30, floor(370.8/30) = 12 chains.
    for name in ["aws-p4d", "azure-ndv4"] {
        check(
            name,
            &run(name, 1),
            (Ring, 0, 12, 20.0, 20.0, Nvl, Pix, true),
            (BalancedTree, 0, 12, 20.0, 20.0, Nvl, Pix, true),
            24,
        );
    }
    for name in [
        "aws-p5",
        "aws-p5en",
        "azure-ndv5",
        "gcp-a3-high",
        "gcp-a3-mega",
    ] {
        check(
            name,
            &run(name, 1),
            (Ring, 0, 12, 30.0, 30.0, Nvl, Pix, true),
            (BalancedTree, 0, 12, 30.0, 30.0, Nvl, Pix, true),
            24,
        );
    }
}

#[test]
fn aws_p4d_two_nodes() {
    // GPU -> own NIC: min(PCI 12, 12, NET 12.5) = 12 = maxBw -> inter sm80 rung 12. A NET
    // (12.5 - 12 < 12) and a NIC's 12 GB/s link hold one channel each: 4 NICs -> 4 x 12
    // = 48 < 240, relax: 10, 9, 7 keep 4 channels; 6 (6/12 = 0.5 > 0.49) gives 8 x 6 = 48,
    // equal, not better; 5/12 < 0.49 stops. Each ring enters at one GPU of a switch and
    // leaves from the other to the same NIC (crossNic 0, PIX). 12 < 25: no dup.
    // Tree: 4 x 12 likewise; pass 2 raises bwIntra 15, 18, 20, 24 while < 2 x 12.
    // Runtime 4 x 2 = 8 (cc 80: no extra doubling).
    let r = run("aws-p4d", 2);
    check(
        "aws-p4d",
        &r,
        (Ring, 0, 4, 12.0, 12.0, Nvl, Pix, false),
        (BalancedTree, 0, 4, 24.0, 12.0, Nvl, Pix, false),
        8,
    );
    // The NIC's 75 µs reaches the graph as latencyInter.
    assert_eq!(r.graphs.ring.latency_inter, 75.0);
}

#[test]
fn one_gpu_per_nic_switch_two_nodes() {
    // p5 and NDv5: one GPU and one 50 GB/s NET per Gen5 switch; GPU -> NET 48 = maxBw.
    // Ring at 48, crossNic 0: a ring must leave through the NET it entered, but only the
    // first GPU has a PIX path to it -> nothing at PIX. typeInter rises to PXN (the last
    // GPU reaches the NET through the first one's NVLink): then every GPU sends 48 over
    // NVLink in every channel, 370.8/48 -> 7 channels = 336 < 370.8. Next crossNic 2 at PIX
    // (typeInter reset): channel c may leave through another NIC, 8 x 48 = 384 >= 370.8:
    // done. No dup (48 < 50, 8 > 4).
    // Tree: BALANCED needs the second GPU back to the same NET: not at PIX; sm90 tries the
    // simple TREE (all NET traffic on the first GPU): 8 x 48; 8 channels are fixed by the
    // ring, lower speeds are no better; pass 2 has no rung above 48.
    // Runtime 8 x 2 = 16 (the extra x2 needs fewer than 16).
    for name in ["aws-p5", "azure-ndv5"] {
        check(
            name,
            &run(name, 2),
            (Ring, 2, 8, 48.0, 48.0, Nvl, Pix, false),
            (Tree, 0, 8, 48.0, 48.0, Nvl, Pix, false),
            16,
        );
        // With NCCL_CROSS_NIC=0 the PXN ring is all there is: 7 x 48 = 336, then lower
        // speeds: 45 fits 8 channels on the NVLinks (8 x 45 = 360 <= 370.8) and one per NET:
        // 360 is better; 42 x 8 = 336 is not, and 40/45, 30/45 ... do not beat it.
        let cluster = Cluster {
            node: load(name),
            n_nodes: 2,
            net_latency_us: 0.0,
        };
        let opts = SearchOptions {
            cross_nic: 0,
            ..SearchOptions::default()
        };
        let ring = search::search(&cluster, &opts).unwrap().graphs.ring;
        assert_eq!(
            (
                ring.cross_nic,
                ring.n_channels,
                ring.bw_inter,
                ring.type_inter
            ),
            (0, 8, 45.0, PathType::Pxn),
            "{name}"
        );
    }
}

#[test]
fn two_gpus_per_switch_two_nodes() {
    // p5en: 2 GPUs and 2 NETs of 50 GB/s per Gen5 switch, like hgx-h200-8: each NET holds
    // one channel at 48 (50 - 48 < 48), the ring returns to its NET from the switch's
    // other GPU (PIX, crossNic 0): 8 x 48 = 384 >= 370.8, done. Tree 8 x 48 (BALANCED:
    // both GPUs of the switch reach the NET at PIX). Runtime 16.
    check(
        "aws-p5en",
        &run("aws-p5en", 2),
        (Ring, 0, 8, 48.0, 48.0, Nvl, Pix, false),
        (BalancedTree, 0, 8, 48.0, 48.0, Nvl, Pix, false),
        16,
    );
    // NDv4: as dgx-a100-8 (search_fixtures.rs): HDR 25 GB/s NETs, Gen4 24 -> sm80 rung 24,
    // one channel per NET: 8 x 24 = 192 < 240; 20, 18, 15 keep 8; 12 gives 16 x 12 = 192,
    // equal; 10/24 < 0.49 stops. No dup (24 < 25). Tree pass 2: 24 -> 28 -> 30 (8 x 30 =
    // 240 fits the NVLinks), 48 does not. Runtime 16.
    check(
        "azure-ndv4",
        &run("azure-ndv4", 2),
        (Ring, 0, 8, 24.0, 24.0, Nvl, Pix, false),
        (BalancedTree, 0, 8, 30.0, 24.0, Nvl, Pix, false),
        16,
    );
    // A3: 25 GB/s NETs behind 24 GB/s links -> sm90 rung 24, one channel per NET.
    // High, 4 NICs: 4 x 24 = 96; 22, 20, 17.5, 15 keep 4; 12 gives 8 x 12 = 96, equal;
    // 6/24 stops. Mega, 8 NICs: 8 x 24 = 192, 16 x 12 equal. No dup (24 < 25).
    // Trees: pass 2 raises bwIntra 30, 40, 42, 45, 48 while < 2 x 24 -> 48/24.
    // Runtime 4 x 2 = 8 and 8 x 2 = 16 (ring bw 24 is not > 45: no extra x2; NCCL would
    // double again for TCPX's unpack device below 16 channels, which planner does not model).
    check(
        "gcp-a3-high",
        &run("gcp-a3-high", 2),
        (Ring, 0, 4, 24.0, 24.0, Nvl, Pix, false),
        (BalancedTree, 0, 4, 48.0, 24.0, Nvl, Pix, false),
        8,
    );
    check(
        "gcp-a3-mega",
        &run("gcp-a3-mega", 2),
        (Ring, 0, 8, 24.0, 24.0, Nvl, Pix, false),
        (BalancedTree, 0, 8, 48.0, 24.0, Nvl, Pix, false),
        16,
    );
}

// ---------------------------------------------------------------- NCCL's pick

/// `planner explain --json` on a fixture: (algorithm, protocol, channels, time µs) of the
/// winner, and the time of `runner_up` (algorithm, protocol).
fn pick(
    name: &str,
    size: &str,
    nodes: &str,
    runner_up: (&str, &str),
) -> (String, String, u64, f64, f64) {
    let text = stdout_of(&[
        "explain",
        "--fixture",
        name,
        "--size",
        size,
        "--nodes",
        nodes,
        "--nccl-version",
        "2.28",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let w = &v["winner"];
    let other = v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["algorithm"] == runner_up.0 && p["protocol"] == runner_up.1)
        .unwrap_or_else(|| panic!("{name}: no pair {runner_up:?}"));
    (
        w["algorithm"].as_str().unwrap().to_string(),
        w["protocol"].as_str().unwrap().to_string(),
        w["channels"].as_u64().unwrap(),
        w["time_us"].as_f64().unwrap(),
        other["time_us"].as_f64().unwrap(),
    )
}

fn assert_pick(
    name: &str,
    size: &str,
    nodes: &str,
    want: (&str, &str, u64, f64),
    runner_up: (&str, &str, f64),
) {
    let (algo, proto, channels, time, other) = pick(name, size, nodes, (runner_up.0, runner_up.1));
    assert_eq!(
        (algo.as_str(), proto.as_str(), channels),
        (want.0, want.1, want.2),
        "{name} {size} on {nodes} node(s)"
    );
    assert!(close(time, want.3, 1e-4), "{name}: {time} vs {}", want.3);
    assert!(
        close(other, runner_up.2, 1e-4),
        "{name}: runner-up {other} vs {}",
        runner_up.2
    );
}

#[test]
fn one_node_16m_picks() {
    // A100 (p4d, NDv4), 12 x 20 GB/s rings, 24 runtime channels, 16 MiB = 16777216 B:
    // Ring/LL128 busBw min(240 x 0.92, 12 x 20.0) = 220.8, algbw x 8/14 = 126.17,
    //   lat 14 + 14 x 1.9 = 40.6 -> 40.6 + 16777216/126171.4 = 173.57 µs;
    // Ring/Simple 240 x 8/14 = 137.14, lat 8.4 + 14 x 3.4 = 56 -> 178.33 µs.
    for name in ["aws-p4d", "azure-ndv4"] {
        assert_pick(
            name,
            "16M",
            "1",
            ("Ring", "LL128", 24, 173.5716),
            ("Ring", "Simple", 178.3339),
        );
    }
    // H100/H200 on NVSwitch: NVLS (graph 8 heads, bwIntra 40) busBw 8 x 40 x 0.85 x 7/8 x 2
    //   = 476, algbw x 8/14 = 272, lat 25 -> 25 + 61.68 = 86.68 µs on 16 NVLS channels;
    // Ring/LL128 min(360 x 0.92, 12 x 36.7) = 331.2 x 8/14, lat 40.6 -> 129.25 µs.
    for name in [
        "aws-p5",
        "aws-p5en",
        "azure-ndv5",
        "gcp-a3-high",
        "gcp-a3-mega",
    ] {
        assert_pick(
            name,
            "16M",
            "1",
            ("NVLS", "Simple", 16, 86.6809),
            ("Ring", "LL128", 129.2477),
        );
    }
}

#[test]
fn two_node_1g_picks() {
    // 16 ranks, 1 GiB = 1073741824 B (no tree correction at this size). The NIC latency
    // enters every NET hop: interLat = hwLat[NET] + lat (+ lat again for Simple).
    //
    // p4d: Tree/Simple on 4 search channels (bwIntra 24): busBw min(96 x 0.92, 4 x 23.6) =
    //   88.32, x0.5 = 44.16; lat 8.4 + 2 x (7 x 4.0 + (14 + 75 + 75)) = 392.4
    //   -> 392.4 + 24314.8 = 24707.2 µs on 8 channels.
    // Ring/Simple: 4 x 12 x 16/30 = 25.6; lat (8.4 + 28 x 3.4 + 2 x 164) x 1.4 = 604.24
    //   -> 42547.3 µs: the 12 GB/s rings lose to the trees by 72%.
    assert_pick(
        "aws-p4d",
        "1G",
        "2",
        ("Tree", "Simple", 8, 24707.21),
        ("Ring", "Simple", 42547.28),
    );
    // p5: NVLSTree/Simple, NVLS graph 8 heads, bwIntra 40, bwInter 48: per channel min(40 x
    //   0.85 x 7/8 x 2 = 59.5, 2 x 48, 57.7) = 57.7, busBw 461.6 x 16/30 = 246.19; lat 25 +
    //   2 x (20.9 + 75 + 75) = 366.8 -> 4728.29 µs on 16 NVLS channels.
    // Ring/Simple: 8 x 48 x 16/30 = 204.8; AMD net overhead 2.0 x 3 = 6.0 per intra step:
    //   (8.4 + 28 x 6.0 + 2 x 164) x 1.4 = 706.16 -> 5949.04 µs.
    assert_pick(
        "aws-p5",
        "1G",
        "2",
        ("NVLSTree", "Simple", 16, 4728.295),
        ("Ring", "Simple", 5949.04),
    );
    // p5en: the same bandwidths, 35 µs NICs, Intel: NVLSTree lat 25 + 2 x (20.9 + 70) =
    //   206.8 -> 4568.29 µs; Ring/Simple (8.4 + 28 x 3.4 + 2 x 84) x 1.4 = 380.24 -> 5623.12.
    assert_pick(
        "aws-p5en",
        "1G",
        "2",
        ("NVLSTree", "Simple", 16, 4568.295),
        ("Ring", "Simple", 5623.12),
    );
    // NDv5: IB reports 0 µs: NVLSTree lat 25 + 2 x 20.9 = 66.8 -> 4428.29 µs;
    //   Ring/Simple (8.4 + 95.2 + 28) x 1.4 = 184.24 -> 5427.12 µs.
    assert_pick(
        "azure-ndv5",
        "1G",
        "2",
        ("NVLSTree", "Simple", 16, 4428.295),
        ("Ring", "Simple", 5427.12),
    );
    // NDv4: Ring/Simple 8 x 24 x 16/30 = 102.4, lat (8.4 + 28 x 6.0 (AMD) + 2 x 14) x 1.4 =
    //   286.16 -> 10771.92 µs; Tree/Simple min(8 x 30 x 0.92, 8 x 23.6) = 188.8 x 0.5,
    //   lat 8.4 + 2 x (28 + 14) = 92.4 -> 11466.78 µs: Ring by 6%.
    assert_pick(
        "azure-ndv4",
        "1G",
        "2",
        ("Ring", "Simple", 16, 10771.92),
        ("Tree", "Simple", 11466.78),
    );
    // A3 High: Tree/Simple on 4 channels of bwIntra 48: min(192 x 0.92, 4 x 41.4) = 165.6 x
    //   0.5, lat 92.4 -> 13060.30 µs on 8 channels; NVLSTree (4 heads of 24/24): min(24 x
    //   0.85 x 3/4 x 2 = 30.6, 48, 57.7) x 4 x 16/30, lat 66.8 -> 16515.05 µs.
    assert_pick(
        "gcp-a3-high",
        "1G",
        "2",
        ("Tree", "Simple", 8, 13060.30),
        ("NVLSTree", "Simple", 16515.05),
    );
    // A3 Mega: Tree/Simple min(8 x 48 x 0.92, 8 x 41.4) = 331.2 x 0.5 -> 92.4 + 6483.9 =
    //   6576.35 µs on 16 channels; NVLSTree (8 heads of 24/24): min(24 x 0.85 x 7/8 x 2 =
    //   35.7, 48, 57.7) x 8 x 16/30 -> 7116.05 µs.
    assert_pick(
        "gcp-a3-mega",
        "1G",
        "2",
        ("Tree", "Simple", 16, 6576.348),
        ("NVLSTree", "Simple", 7116.05),
    );
}
