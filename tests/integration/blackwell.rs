//! Blackwell: HGX B200 and GB200/GB300 NVL72 with multi-node NVLink (MNNVL). Real data: a GB300 NVL72 run of
//! NCCL 2.29.7 on 2 trays (topology, graph dump and log lines in `blackwell_data/`, sources in its README) and the
//! GB200 fabric lines of NVIDIA/nccl#1769. Everything else is a hand calculation from NCCL's source, written here.
//! No Blackwell GPU was available to check these on hardware.

use crate::common::{close, planner};
use planner::model::input::NvlsFlag;
use planner::model::{Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;
use planner::pipeline::{self, Source};
use planner::search::{ladder, SearchResult};
use planner::topo::mnnvl::{self, MnnvlEnable};
use planner::topo::{Cluster, PathType};

fn data(name: &str) -> String {
    format!(
        "{}/tests/integration/blackwell_data/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn log_lines() -> Vec<String> {
    std::fs::read_to_string(data("gb300-2tray-rank4.log"))
        .unwrap()
        .lines()
        .map(|l| l.split_once("NCCL INFO ").unwrap().1.to_string())
        .collect()
}

fn load(fixture: Option<&str>, topo: Option<String>, nodes: usize, mnnvl: MnnvlEnable) -> Cluster {
    Source {
        fixture: fixture.map(str::to_string),
        topo,
        nodes,
        mnnvl: Some(mnnvl),
        ..Default::default()
    }
    .load()
    .unwrap()
}

fn gb300_two_trays() -> Cluster {
    load(None, Some(data("gb300-tray.xml")), 2, MnnvlEnable::Auto)
}

fn search(cluster: &Cluster) -> SearchResult {
    let opts = pipeline::search_options(cluster, &NcclEnv::default(), true).unwrap();
    pipeline::channels(cluster, &opts, None).unwrap().0
}

fn model(cluster: &Cluster, family: &str) -> Model {
    let table = pipeline::choose_table(None, Some(family), None).unwrap();
    pipeline::build_model(cluster, None, table, NcclEnv::default(), NvlsFlag::Auto).unwrap()
}

/// The first rung of the sm100 intra-node ladder whose `channels` copies fit in one GPU's NVLink bandwidth
/// (`search.cc` starts there: `speedArray[i] * minChannels <= totalBw`).
fn first_rung(channels: f32, total_bw: f32) -> f32 {
    *ladder::SM100_INTRA
        .iter()
        .find(|&&r| r * channels <= total_bw)
        .unwrap()
}

/// 18 NVLink 5 links x ncclTopoNVLinkBw(sm >= 100) = 18 x 40.1 GB/s (topo.h SM100_NVLINK_BW).
const NVLINK5_X18: f64 = 18.0 * 40.1;

#[test]
fn gb300_trays_fuse_into_one_node_like_nccl() {
    let c = gb300_two_trays();
    // NCCL: the clique's XMLs fused (topo.cc:1493-1529), every rank in the system, so system->inter = 0
    // (paths.cc:802) and one node from the rings (init.cc:1099-1110): "nNodes 1 localRanks 8".
    assert_eq!((c.n_nodes, c.n_ranks(), c.gpus_per_node()), (1, 8, 8));
    assert_eq!(mnnvl::host_count(&c.node), 2);
    assert!(c.node.source.ends_with("x2 (MNNVL)"), "{}", c.node.source);
}

#[test]
fn gb300_fused_paths_match_nccl_2_29_7() {
    let c = gb300_two_trays();
    let topo = &c.node;
    let label_of = |label: &str| {
        topo.graph
            .node_indices()
            .find(|&i| topo.node(i).nccl_label() == label)
            .unwrap_or_else(|| panic!("no node {label}"))
    };
    let mut checked = 0;
    for line in log_lines().iter().filter(|l| l.contains(" :GPU/")) {
        let (from, rest) = line.split_once(" :").unwrap();
        let a = label_of(from);
        for entry in rest.split(") ").filter(|e| !e.trim().is_empty()) {
            let (to, nums) = entry.split_once(" (").unwrap();
            if to.starts_with("GIN/") {
                continue; // 2.29's GIN nodes: not in 2.28's system
            }
            let parts: Vec<&str> = nums.trim_end_matches(')').split('/').collect();
            let (hops, bw, ptype) = (
                parts[0].parse::<usize>().unwrap(),
                parts[1].parse::<f64>().unwrap(),
                parts[2],
            );
            let b = label_of(to);
            match topo.path(a, b) {
                Some(p) if p.ptype != PathType::Dis => {
                    assert_eq!(p.ptype.nccl_name(), ptype, "{from} -> {to}");
                    assert!(
                        (p.bw - bw).abs() < 0.051,
                        "{from} -> {to}: {} vs {bw}",
                        p.bw
                    );
                    assert_eq!(p.hops(), hops, "{from} -> {to}");
                }
                _ => assert_eq!(ptype, "DIS", "{from} -> {to}: planner has no path"),
            }
            checked += 1;
        }
    }
    // 4 GPU lines x 15 entries (8 GPUs, NVS, 4 CPUs, 2 NETs) + 1 NET line x 14 (no NVS path); GIN left out.
    assert_eq!(checked, 74);
}

#[test]
fn gb300_graphs_rings_and_trees_match_the_log() {
    let c = gb300_two_trays();
    let result = search(&c);
    let log = log_lines();
    let ours = planner::report::channels::nccl_log_lines(&c.node, &result, 4);
    let block = |lines: &[String], head: &str, n: usize| -> Vec<String> {
        let i = lines
            .iter()
            .position(|l| l.starts_with(head))
            .unwrap_or_else(|| panic!("no '{head}' in {lines:#?}"));
        lines[i..i + n].to_vec()
    };
    // Ring: 8 channels fit at 90 GB/s (8 x 90 = 720 <= 721.8, 9 x 90 does not); ncclTopoDupChannels doubles them
    // to 16 at 45 (search.cc: bwIntra >= 25, not (ccMin > 80 && bw < 50)). The log agrees line for line.
    assert_eq!(block(&ours, "Pattern 4", 17), block(&log, "Pattern 4", 17));
    // NVLS: 8 heads; each GPU's NVS link carries every head's bw plus its own head's: 9 x 80 = 720 <= 721.8.
    assert_eq!(block(&ours, "Pattern 5", 9), block(&log, "Pattern 5", 9));
    // Tree: 16 channels (the ring's) at the first rung with 16 x r <= 721.8: 40 on 2.28.9's ladder, 45 on 2.29.2+
    // (search.cc:986 added the 45 rung); the log is 2.29.7.
    let r = first_rung(16.0, NVLINK5_X18 as f32);
    let tree = format!(
        "Pattern 1, crossNic 0, nChannels 16, bw {r:.6}/{r:.6}, type NVL/PIX, sameChannels 1"
    );
    assert_eq!(block(&ours, "Pattern 1", 1), std::slice::from_ref(&tree));
    if ladder::SM100_INTRA.contains(&45.0) {
        assert_eq!(block(&log, "Pattern 1", 1), [tree]);
    } else {
        assert_eq!(r, 40.0);
    }
    // Runtime: 16 search channels x 2 = 32 ("32 coll channels"); rank 4's rings and trees as logged.
    assert_eq!(result.connection.n_channels, 32);
    let pick = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.starts_with("Ring ") || l.starts_with("Trees "))
            .cloned()
            .collect()
    };
    assert_eq!(pick(&ours), pick(&log));
    assert_eq!(pick(&ours).len(), 33);
}

#[test]
fn gb300_mnnvl_lines_match_the_log() {
    let c = gb300_two_trays();
    let ours = mnnvl::log_lines(&c, 4);
    let log = log_lines();
    // The run's UUID was redacted in the public log; the data file carries a stand-in, printed as NCCL's %lx.%lx
    // prints it (no leading zeros).
    assert_eq!(
        ours[0].replace("1234abcd5678ef01.fedcba987654321", "REDACTED_FABRIC_UUID"),
        log[0]
    );
    assert_eq!(ours[1], log[1]);
    let comm = log.iter().find(|l| l.starts_with("comm ")).unwrap();
    assert_eq!(
        ours[2].split_once(" rank ").unwrap().1,
        comm.split_once(" rank ").unwrap().1
    );
}

#[test]
fn gb300_graph_dump_loads_with_system_ids() {
    let c = gb300_two_trays();
    let opts = pipeline::search_options(&c, &NcclEnv::default(), true).unwrap();
    let g =
        planner::search::load_graph_file_with(&data("gb300-2tray-graph.xml"), &c, &opts).unwrap();
    // dev 0x100000000000000 = system 1, dev 0: rank 4 (search.cc:847-848).
    assert_eq!(
        g.graphs.ring.channels[0].ranks,
        (0..8).collect::<Vec<i32>>()
    );
    assert_eq!(
        (g.graphs.tree.n_channels, g.graphs.tree.bw_intra),
        (16, 45.0)
    );
    assert_eq!(g.graphs.nvls.as_ref().map(|n| n.n_channels), Some(8));
    // planner's own dump writes the ring and NVLS graphs exactly as NCCL did.
    let ours = planner::search::graph_xml::write_graphs(&search(&c).graphs, &c).unwrap();
    let theirs = std::fs::read_to_string(data("gb300-2tray-graph.xml")).unwrap();
    let section = |text: &str, id: &str| {
        let start = text.find(&format!("<graph id=\"{id}\"")).unwrap();
        let end = start + text[start..].find("</graph>").unwrap();
        text[start..end].to_string()
    };
    assert_eq!(section(&ours, "0"), section(&theirs, "0"));
    assert_eq!(section(&ours, "3"), section(&theirs, "3"));
}

#[test]
fn gb300_nvls_and_coll_channels_as_logged() {
    let c = gb300_two_trays();
    // "NVLS_NCHANNELS 24": sm100 and one clique holding every rank (nvls.cc:180-194 in 2.28.9, :211 in 2.30.7).
    for family in ["2.28", "2.30"] {
        let m = model(&c, family);
        assert_eq!(m.input.nvls_channels, 24, "{family}");
        assert_eq!((m.input.n_nodes, m.input.local_ranks), (1, 8), "{family}");
    }
}

#[test]
fn nvl72_rack_is_one_nvlink_domain() {
    let c = load(Some("gb200-nvl72-tray"), None, 18, MnnvlEnable::Auto);
    assert_eq!((c.n_nodes, c.n_ranks()), (1, 72));
    assert_eq!(mnnvl::host_count(&c.node), 18);
    let r = search(&c);
    let g = &r.graphs;
    // Same per-GPU NVLink bandwidth as one tray, so the same ring as the GB300 pair (nccl#1429: the channel count
    // does not grow with the domain): 8 at 90 doubled to 16 at 45.
    assert_eq!((g.ring.n_channels, g.ring.bw_intra), (16, 45.0));
    assert_eq!(g.tree.n_channels, 16);
    assert_eq!(g.tree.bw_intra, first_rung(16.0, NVLINK5_X18 as f32) as f64);
    // NVLS on one node pulls from every GPU evenly (search.cc:1043-1046: min = max channels) with at most
    // NCCL_MAX_NVLS_ARITY = 32 heads (search.cc:1038): each GPU link carries 32 r + r for its own head,
    // 33 r <= 721.8 -> r <= 21.87 -> 20 on the sm100 intra ladder.
    let nvls = g.nvls.as_ref().unwrap();
    assert_eq!((nvls.n_channels, nvls.bw_intra), (32, 20.0));
    assert_eq!(r.connection.n_channels, 32);
    let lines = mnnvl::log_lines(&c, 0);
    // nccl#1769's GB200: the fixture's rank 0 prints exactly the log's line.
    assert_eq!(
        lines[0],
        "MNNVL busId 0x801000 fabric UUID 3143b15bc2cd192b.28cc9b5473fb5b93 cliqueId 0x7ffe state 3 healthMask 0xaa"
    );
    assert_eq!(lines[1], "MNNVL 1 cliqueId 7ffe cliqueSize 72 cliqueRank 0");
    assert_eq!(
        lines[2],
        "comm - rank 0 nRanks 72 nNodes 1 localRanks 72 localRank 0 MNNVL 1"
    );
    // nccl#1769's other GPUs: ranks 1-3 of a tray (and 5-7 of the next) print busIds 0x901000, 0x1801000, 0x1901000.
    for (rank, bus) in [(1, "0x901000"), (2, "0x1801000"), (7, "0x1901000")] {
        assert!(
            mnnvl::log_lines(&c, rank)[0].starts_with(&format!("MNNVL busId {bus} ")),
            "rank {rank}"
        );
    }
}

#[test]
fn nvl72_per_size_choices_from_tuning_cc() {
    let c = load(Some("gb200-nvl72-tray"), None, 18, MnnvlEnable::Auto);
    let ar = Coll::AllReduce as usize;
    for family in ["2.28", "2.30"] {
        let m = model(&c, family);
        let lat = |a: Algo, p: Proto| m.tuned.latency[ar][a as usize][p as usize] as f64;
        let bw = |a: Algo, p: Proto| m.tuned.bandwidth[ar][a as usize][p as usize] as f64;
        // Latencies on one node of 72 ranks (tuning.cc, hwLat[NVLINK], baseLat):
        // NVLS/Simple 0 + 25 = 25 us; Ring/LL 6.6 + 2(72-1) x 0.6 = 91.8 us; Tree/LL 6.8 + 2 x (71 x 0.6) = 92.0 us.
        assert!(
            close(lat(Algo::Nvls, Proto::Simple), 25.0, 1e-4),
            "{family}"
        );
        assert!(
            close(lat(Algo::Ring, Proto::Ll), 91.8, 1e-4),
            "{family}: {}",
            lat(Algo::Ring, Proto::Ll)
        );
        assert!(
            close(lat(Algo::Tree, Proto::Ll), 92.0, 1e-4),
            "{family}: {}",
            lat(Algo::Tree, Proto::Ll)
        );
        // NVLS bandwidth: graph 32 heads at 20 GB/s, nvlsEfficiency(Blackwell) 0.74: per channel
        // min(20 x 0.74 x 31/32 x 2 (AllReduce), bwInter) = 28.675, x 32 channels x nRanks/nsteps (72/142) = 465.27.
        let nvls_bw = 32.0 * (20.0 * 0.74 * 31.0 / 32.0 * 2.0) * 72.0 / 142.0;
        assert!(
            close(bw(Algo::Nvls, Proto::Simple), nvls_bw, 1e-3),
            "{family}: {}",
            bw(Algo::Nvls, Proto::Simple)
        );
        // Ring/Simple at most 16 channels x 45 GB/s x 72/142 = 365.07: NVLS wins the large sizes too.
        assert!(bw(Algo::Ring, Proto::Simple) <= 16.0 * 45.0 * 72.0 / 142.0 + 1e-3);
        // NVLSTree needs several nodes: masked.
        assert!(
            m.tuned.bandwidth[ar][Algo::NvlsTree as usize][2] <= 0.0,
            "{family}"
        );
        for size in [8u64, 1 << 20, 4 << 30] {
            let pick = m.choose(Coll::AllReduce, size, 1).unwrap();
            assert_eq!(
                (pick.algo, pick.proto),
                (Algo::Nvls, Proto::Simple),
                "{family} {size}"
            );
        }
        // 24 NVLS channels for one clique on sm100 (nvls.cc).
        assert_eq!(m.input.nvls_channels, 24);
    }
}

#[test]
fn mnnvl_off_joins_the_trays_through_their_nics() {
    let c = load(Some("gb200-nvl72-tray"), None, 18, MnnvlEnable::Off);
    assert_eq!((c.n_nodes, c.gpus_per_node(), c.n_ranks()), (18, 4, 72));
    assert_eq!(mnnvl::host_count(&c.node), 1);
    assert!(mnnvl::log_lines(&c, 0).is_empty());
    // And through the environment, as NCCL_MNNVL_ENABLE=0.
    let out = planner()
        .env("NCCL_MNNVL_ENABLE", "0")
        .args(["channels", "--fixture", "gb200-nvl72-tray", "--nodes", "18"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("fixture gb200-nvl72-tray: 4 GPUs x 18 nodes = 72 ranks"),
        "{text}"
    );
    assert!(!text.contains("MNNVL"));
}

#[test]
fn several_racks_and_bad_node_counts() {
    // Two racks: two NVLink domains of 72 joined through the NICs (NCCL_MAX_LOCAL_RANKS = 72 per clique).
    let c = load(Some("gb200-nvl72-tray"), None, 36, MnnvlEnable::Auto);
    assert_eq!((c.n_nodes, c.gpus_per_node(), c.n_ranks()), (2, 72, 144));
    // One tray alone is an ordinary node (NCCL checks MNNVL only across OS nodes unless NCCL_MNNVL_ENABLE=1).
    let one = load(Some("gb200-nvl72-tray"), None, 1, MnnvlEnable::Auto);
    assert_eq!(
        (one.n_nodes, one.n_ranks(), mnnvl::host_count(&one.node)),
        (1, 4, 1)
    );
    // 20 trays do not fill racks of 18: bad input, exit 2, naming the flag.
    let out = planner()
        .args(["channels", "--fixture", "gb200-nvl72-tray", "--nodes", "20"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--nodes 20"));
}

#[test]
fn nvl72_commands_run_and_show_mnnvl() {
    let run = |args: &[&str]| {
        let out = planner().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let base = ["--fixture", "gb200-nvl72-tray", "--nodes", "18"];
    let topo = run(&[&["topo"][..], &base].concat());
    assert!(
        topo.contains("MNNVL: 18 OS nodes x 4 GPUs in one NVLink domain (one clique of 72 ranks)")
    );
    let channels = run(&[&["channels"][..], &base].concat());
    assert!(channels.contains("MNNVL 1 cliqueId 7ffe cliqueSize 72 cliqueRank 0"));
    assert!(channels.contains("comm - rank 0 nRanks 72 nNodes 1 localRanks 72 localRank 0 MNNVL 1"));
    let sweep = run(&[&["explain", "--sweep", "8..4G"][..], &base].concat());
    assert!(sweep.contains("72 ranks on 1 node"), "{sweep}");
    assert!(
        sweep.contains("8 B - 4 GiB: NVLS/Simple, 24 channels"),
        "{sweep}"
    );
    for fixture in ["gb200-nvl72-tray", "hgx-b200-8"] {
        for cmd in ["topo", "channels"] {
            run(&[cmd, "--fixture", fixture]);
        }
        run(&["explain", "--fixture", fixture, "--sweep", "8..4G"]);
    }
}

#[test]
fn hgx_b200_graphs_and_multi_node_nvls_channels() {
    let c = load(Some("hgx-b200-8"), None, 1, MnnvlEnable::Auto);
    let (a, b) = (
        c.node.nodes(planner::topo::NodeKind::Gpu)[0],
        c.node.nodes(planner::topo::NodeKind::Gpu)[1],
    );
    let p = c.node.path(a, b).unwrap();
    // NVLink 5 through the NVSwitch: 2 hops, 18 x 40.1 = 721.8 GB/s.
    assert_eq!((p.ptype, p.hops()), (PathType::Nvl, 2));
    assert!(close(p.bw, NVLINK5_X18, 1e-6));
    let g = search(&c).graphs;
    assert_eq!((g.ring.n_channels, g.ring.bw_intra), (16, 45.0));
    let nvls = g.nvls.unwrap();
    assert_eq!((nvls.n_channels, nvls.bw_intra), (8, 80.0));
    // 2.30's ncclNvlsTreeSm100Tuning (nvls.cc:164-200): minNetBw = GPU->NIC path bandwidth
    // min(PCIe Gen5 x16 = 240 x 16 / 80 = 48, NET 400000 / 8000 = 50) = 48 >= 48: 2 nodes -> 32 channels, 4 nodes
    // (<= 8 GPUs per node, NIC < 96) -> 24. 2.28 keeps the multi-node default, 32 (NVLS_NCHANNELS_SM100).
    let nvls_channels = |nodes: usize, family: &str| {
        let c = load(Some("hgx-b200-8"), None, nodes, MnnvlEnable::Auto);
        assert_eq!(planner::model::input::min_net_bw(&c), 48.0);
        model(&c, family).input.nvls_channels
    };
    assert_eq!(nvls_channels(2, "2.30"), 32);
    assert_eq!(nvls_channels(4, "2.30"), 24);
    assert_eq!(nvls_channels(4, "2.28"), 32);
    assert_eq!(
        planner::model::input::nvls_sm100_multi_node_channels(32, 8, 16, 100.0),
        32
    );
    assert_eq!(
        planner::model::input::nvls_sm100_multi_node_channels(32, 8, 8, 100.0),
        24
    );
    assert_eq!(
        planner::model::input::nvls_sm100_multi_node_channels(32, 8, 4, 25.0),
        32
    );
}

#[test]
fn probe_records_the_nvml_fabric_identity() {
    use planner::probe::facts::{FabricFacts, GpuFacts, MachineFacts};
    use planner::probe::{from_facts, ProbeEnv, SysFs, Warnings};
    // One GB200 GPU as NVML reports it in nccl#1769 (no sysfs here: a container).
    let fabric = FabricFacts {
        cluster_uuid: [0x3143_b15b_c2cd_192b, 0x28cc_9b54_73fb_5b93],
        clique_id: 0x7ffe,
        state: 3,
        health_mask: 0xaa,
    };
    let facts = MachineFacts {
        gpus: vec![GpuFacts {
            index: 0,
            bus_id: "00000008:01:00.0".to_string(),
            compute_capability: (10, 0),
            gdr: Some(true),
            pcie_gen: Some(5),
            pcie_width: Some(16),
            fabric: Some(fabric),
            ..Default::default()
        }],
        ..Default::default()
    };
    let env = ProbeEnv {
        nccl_hostid: Some("gb200".to_string()),
        ..Default::default()
    };
    let xml = from_facts(
        &facts,
        &SysFs::new("/nonexistent-planner-blackwell-sysfs"),
        "aarch64",
        &env,
        &mut Warnings::new(),
    );
    let text = planner::xml::write(&xml);
    assert!(
        text.contains(r#"fabric_uuid="3143b15bc2cd192b.28cc9b5473fb5b93" fabric_clique="0x7ffe" fabric_state="3" fabric_health="0xaa""#),
        "{text}"
    );
    // Read back: 18 copies of this host form one clique of 18 GPUs.
    let topo = planner::topo::build::from_xml(&xml, "probe").unwrap();
    match mnnvl::decide(&topo, 18, MnnvlEnable::Auto, None).unwrap() {
        mnnvl::Decision::Domain(d) => {
            assert_eq!((d.trays, d.cliques, d.clique_size()), (18, 1, 18));
            assert_eq!(d.fabric.clique_id, 0x7ffe);
        }
        other => panic!("{other:?}"),
    }
    // A GPU whose fabric is still being set up (state 2): NCCL leaves MNNVL off (mnnvl.cc:28).
    let mut facts2 = facts.clone();
    facts2.gpus[0].fabric = Some(FabricFacts { state: 2, ..fabric });
    let xml2 = from_facts(
        &facts2,
        &SysFs::new("/nonexistent-planner-blackwell-sysfs"),
        "aarch64",
        &env,
        &mut Warnings::new(),
    );
    let topo2 = planner::topo::build::from_xml(&xml2, "probe").unwrap();
    assert!(matches!(
        mnnvl::decide(&topo2, 18, MnnvlEnable::Auto, None).unwrap(),
        mnnvl::Decision::Off(_)
    ));
    // A GPU without fabric (x86 HGX): no attributes, no MNNVL.
    assert!(!mnnvl::has_fabric(
        &planner::pipeline::load_fixture("hgx-b200-8").unwrap()
    ));
}

#[test]
fn json_describes_the_domain() {
    let out = planner()
        .args([
            "channels",
            "--fixture",
            "gb200-nvl72-tray",
            "--nodes",
            "36",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["mnnvl"],
        serde_json::json!({"os_nodes": 18, "gpus_per_os_node": 4, "clique_size": 72, "domains": 2})
    );
    assert_eq!(
        (v["nodes"].as_u64(), v["ranks"].as_u64()),
        (Some(2), Some(144))
    );
    // Not on an ordinary machine: the key is absent, existing JSON unchanged.
    let plain = planner()
        .args(["topo", "--fixture", "hgx-b200-8", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(v.get("mnnvl").is_none());
}
