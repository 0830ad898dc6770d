//! Issue 15, part A: every input the fuzz campaign broke the tool with, run through the binary. Each must exit 2
//! with one line naming the input and the limit, or succeed; never panic (exit 101) or abort. Time bounds here are
//! loose (a shared 2-core machine, debug builds): they catch the quadratic and worse behaviour the issue found
//! (25 s, 14 s, minutes), not the 1 s target, which README "Limits" states as measured.

use crate::common::{assert_exit, golden, planner};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `contents` in the file `name` of this test's scratch directory.
fn scratch(name: &str, contents: &[u8]) -> PathBuf {
    crate::common::with_scratch(|s| s.write(name, contents))
}

/// Run planner with `args`; the exit code, stderr, and how long it took.
fn run(args: &[&str]) -> (i32, String, Duration) {
    let start = Instant::now();
    let out = planner().args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

/// Exit 2 with exactly one line on stderr that contains every one of `needles`.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let (code, err, took) = run(args);
    assert_eq!(code, 2, "{args:?}: exit {code}, stderr {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' missing from: {err}");
    }
    assert!(took < Duration::from_secs(20), "{args:?} took {took:?}");
    err
}

const CPU_OPEN: &str = r#"<system version="1">
  <cpu host_hash="0x1" numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
"#;
const CPU_CLOSE: &str = "  </cpu>\n</system>\n";

/// One GPU (sm90, 18 NVLinks to the NVSwitch) with bus id `bus` (< 0x10000), no switch above it.
fn gpu(bus: usize, rank: usize) -> String {
    format!(
        r#"    <pci busid="{:04x}:{:02x}:00.0" class="0x030200" vendor="0x10de" device="0x2335" subsystem_vendor="0x10de" subsystem_device="0x18be" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="{rank}" sm="90" rank="{rank}" gdr="1">
        <nvlink target="ffff:ff:1f.0" count="18" tclass="0x068000"/>
      </gpu>
    </pci>
"#,
        bus >> 8,
        bus & 0xff
    )
}

/// A 400 Gb/s NIC (NET `mlx5_{dev}`) with bus id `0x2000 + bus`.
fn nic(bus: usize, dev: usize) -> String {
    format!(
        r#"    <pci busid="{:04x}:{:02x}:00.0" class="0x020000" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" subsystem_device="0x0023" link_speed="32.0 GT/s PCIe" link_width="16">
      <nic><net name="mlx5_{dev}" dev="{dev}" latency="0" speed="400000" port="1" guid="0x{bus:x}" maxconn="131072" gdr="1"/></nic>
    </pci>
"#,
        0x2000 + (bus >> 8),
        bus & 0xff,
    )
}

/// `n` NVSwitch GPUs on one CPU, NICs beside the first `nics` of them: the shape of an HGX board, scaled.
fn board(n: usize, nics: usize) -> String {
    let mut xml = CPU_OPEN.to_string();
    for g in 0..n {
        xml += &gpu(g + 1, g);
        if g < nics {
            xml += &nic(g + 1, g);
        }
    }
    xml + CPU_CLOSE
}

/// `n` NVSwitch GPUs, each sharing a PCIe switch with its own NIC (PIX), as on an HGX board: every other GPU reaches
/// that NIC through its NVLink peer (PXN), so NCCL rewrites most GPU-NIC paths.
fn switched_board(n: usize) -> String {
    let mut xml = CPU_OPEN.to_string();
    for g in 0..n {
        let bus = g + 1;
        xml += &format!(
            r#"  <pci busid="{:04x}:{:02x}:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">
"#,
            0x4000 + (bus >> 8),
            bus & 0xff
        );
        xml += &gpu(bus, g);
        xml += &nic(bus, g);
        xml += "  </pci>\n";
    }
    xml + CPU_CLOSE
}

#[test]
fn broadcom_switch_linked_to_itself_or_nested_on_its_bus_id_does_not_panic() {
    // The issue's minimal input: a Gen4 Broadcom switch whose <pcilink> targets its own bus id. It has no GPU.
    let minimal = r#"<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD"><pci busid="0000:01:00.0" class="0x060400"
vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0xa000"><pcilink target="0000:01:00.0"/>
</pci></cpu></system>"#;
    let f = scratch("bcm-minimal.xml", minimal.as_bytes());
    refused(
        &["topo", "--topo", f.to_str().unwrap()],
        &["bcm-minimal.xml", "no GPU"],
    );

    // The same switch holding two GPUs, and a sub-switch on the same bus id: both are flattened into one switch,
    // as NCCL does, and the GPUs sit behind it (PIX through the one switch).
    let bcm = |sub: u32| {
        format!(
            r#"<pci busid="0000:01:00.0" class="0x060400" vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0x{sub:x}" link_speed="16.0 GT/s PCIe" link_width="16">"#
        )
    };
    let two_gpus = gpu(2, 0) + &gpu(3, 1);
    let cases = [
        (
            "bcm-self-link.xml",
            format!(
                "{CPU_OPEN}{}\n<pcilink target=\"0000:01:00.0\"/>\n{two_gpus}</pci>\n{CPU_CLOSE}",
                bcm(0xa000)
            ),
        ),
        (
            "bcm-nested-same-bus.xml",
            format!(
                "{CPU_OPEN}{}\n{}\n<pcilink target=\"0000:01:00.0\"/>\n{two_gpus}</pci>\n</pci>\n{CPU_CLOSE}",
                bcm(0xa000),
                bcm(0xa001)
            ),
        ),
    ];
    for (name, xml) in cases {
        let f = scratch(name, xml.as_bytes());
        let out = planner()
            .args(["topo", "--topo", f.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("GPU0\t X \tNV18"), "{name}: {text}");
        // Both GPUs reach each other over the NVSwitch (NVL, 18 x 20.6 GB/s).
        assert!(text.contains("NVL 370.8"), "{name}: {text}");
        // And a channel search runs on the flattened switch.
        planner()
            .args(["channels", "--topo", f.to_str().unwrap()])
            .assert()
            .success();
    }
}

#[test]
fn node_counts_beyond_the_limit_are_refused_before_allocating() {
    // A log claiming u64::MAX nodes (the fuzzer's capacity overflow) and one claiming 10^9 (7.8 GB in 20 s).
    let log = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    for nodes in ["18446744073709551615", "1000000000"] {
        let bad = log.replace("nRanks 2 nNodes 1", &format!("nRanks 2 nNodes {nodes}"));
        assert_ne!(bad, log);
        let f = scratch(&format!("nnodes-{}.log", nodes.len()), bad.as_bytes());
        let topo = golden("topo.xml");
        refused(
            &["audit", f.to_str().unwrap(), "--topo", &topo],
            &["nNodes", nodes, "65536"],
        );
    }
    // --nodes already had its limit; nodes x GPUs has one too: 4096 nodes of 576 GPUs would be 2.4 M ranks, over
    // planner's 65,536 x 8 = 524,288.
    let big = scratch("board-576.xml", board(576, 8).as_bytes());
    refused(
        &[
            "channels",
            "--topo",
            big.to_str().unwrap(),
            "--nodes",
            "4096",
        ],
        &["board-576.xml", "524288 ranks"],
    );
}

#[test]
fn nodes_up_to_65536_are_accepted_and_65537_refused() {
    // NCCL has no node limit; planner's is 65,536 nodes (src/limits.rs). One more is one line, exit 2.
    refused(
        &["explain", "--fixture", "hgx-h200-8", "--nodes", "65537"],
        &["--nodes 65537", "65536"],
    );
    // 65,536 nodes of 8 GPUs = 524,288 ranks, the rank limit itself: accepted, and channels' JSON summarises the
    // connection instead of listing 16 rings and 16 trees of 524,288 ranks each (over a GB of text).
    let out = planner()
        .args([
            "channels",
            "--fixture",
            "hgx-h200-8",
            "--nodes",
            "65536",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.len() < 64 << 10, "{} bytes", out.stdout.len());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ranks"], 524_288);
    let conn = &doc["connection"];
    assert!(conn["rings"].is_null() && conn["trees"].is_null(), "{conn}");
    assert_eq!(conn["per_rank_listed_up_to_ranks"], 65_536);
    // Rank 0 of hgx-h200-8's ring 0 (text: `Ring 00 : 524281 -> 0 -> 7`): it receives from the last node's ring
    // end, rank 65535 x 8 + 1 = 524281 (ring 0 enters a node at local rank 0 and leaves it at local rank 1), and
    // sends to local rank 7 of its own node.
    assert_eq!(conn["rank_view"]["rings"][0]["prev"], 524_281);
    assert_eq!(conn["rank_view"]["rings"][0]["next"], 7);
    // Tree 0: rank 0 is the root of node 0; its children are local rank 1 and node 0's tree child, node 32768
    // (the largest power of two below 65,536), entered at its rank 32768 x 8 = 262144.
    assert_eq!(
        conn["rank_view"]["trees"][0],
        serde_json::json!({"up": -1, "down": [1, 262_144, -1]})
    );
    assert_eq!(
        conn["rank_view"]["rings"].as_array().map(Vec::len),
        Some(16)
    );
    // The text view says the JSON is summarised (the threshold itself: report::channels' unit test).
    let out = planner()
        .args(["channels", "--fixture", "hgx-h200-8", "--nodes", "65536"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("More than 65536 ranks: --json summarises the connection"),
        "{text}"
    );
    assert!(text.contains("Ring 00 : 524281 -> 0 -> 7"), "{text}");
}

#[test]
fn a_result_file_with_a_huge_node_count_does_not_allocate() {
    let path = format!(
        "{}/bench/results/verify-h200x2-both-eager.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut run_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    run_file["machine"]["nodes"] = serde_json::json!(u64::MAX);
    let f = scratch("huge-nodes.json", run_file.to_string().as_bytes());
    let (code, err, took) = run(&["verify", "--load", f.to_str().unwrap()]);
    // Refused on load (issue 28: more nodes than ranks contradicts the file's own header), before anything is sized
    // by the node count.
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("machine.nodes 18446744073709551615 but world_size 2"),
        "{err}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn deep_and_wide_xml_is_refused_with_the_limit_named() {
    // 100,000 nested elements: the recursive drop overflowed the stack.
    let deep = "<a>".repeat(100_000) + &"</a>".repeat(100_000);
    let f = scratch("deep.xml", deep.as_bytes());
    refused(
        &["topo", "--topo", f.to_str().unwrap()],
        &["deep.xml:1:", "256 levels"],
    );

    // 20,000 nested <pci> (Builder::add_pci's recursion) and 10,000 nested switches (4.5 GB for 0.9 MB).
    for (name, depth) in [("pci-20000.xml", 20_000), ("switch-10000.xml", 10_000)] {
        let mut xml = CPU_OPEN.to_string();
        for i in 0..depth {
            xml += &format!(
                "<pci busid=\"{:04x}:{:02x}:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n",
                i >> 8,
                i & 0xff
            );
        }
        xml += &"</pci>\n".repeat(depth);
        xml += CPU_CLOSE;
        let f = scratch(name, xml.as_bytes());
        refused(
            &["topo", "--topo", f.to_str().unwrap()],
            &[name, "256 levels"],
        );
    }

    // Just inside the limit a deep switch chain is built, in this process too (a test thread has 2 MiB of stack).
    let depth = 250;
    let mut xml = CPU_OPEN.to_string();
    for i in 0..depth {
        xml += &format!(
            "<pci busid=\"0000:{:02x}:{:02x}.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n",
            i >> 8,
            i & 0xff
        );
    }
    xml += &(gpu(0x1001, 0) + &gpu(0x1002, 1));
    xml += &"</pci>\n".repeat(depth);
    xml += CPU_CLOSE;
    let root = planner::xml::parse(&xml, "deep-ok.xml").unwrap();
    let topo = planner::topo::build::from_xml(&root, "deep-ok.xml").unwrap();
    assert_eq!(topo.gpu_count(), 2);
    let f = scratch("deep-ok.xml", xml.as_bytes());
    planner()
        .args(["channels", "--topo", f.to_str().unwrap()])
        .assert()
        .success();

    // A flat file of 200,000 elements (25 s to reject while line numbers were rescanned): the element limit.
    let flat = format!(
        "<graphs version=\"1\">\n{}</graphs>\n",
        "<graph/>\n".repeat(200_000)
    );
    let f = scratch("flat.xml", flat.as_bytes());
    refused(
        &[
            "channels",
            "--fixture",
            "hgx-h200-8",
            "--graph",
            f.to_str().unwrap(),
        ],
        &["flat.xml:65537:", "65536 elements"],
    );
    // Below the limit the same file is read quickly and refused for what it says (a <graph> without an id), with
    // the right line.
    let flat = format!(
        "<graphs version=\"1\">\n{}</graphs>\n",
        "<graph/>\n".repeat(60_000)
    );
    let f = scratch("flat-ok.xml", flat.as_bytes());
    refused(
        &[
            "channels",
            "--fixture",
            "hgx-h200-8",
            "--graph",
            f.to_str().unwrap(),
        ],
        &["flat-ok.xml:2:", "'id'"],
    );
}

#[test]
fn node_kinds_beyond_nccl_topo_max_nodes_are_refused() {
    // NCCL 2.28 holds at most 576 nodes of a kind (NCCL_TOPO_MAX_NODES); the 577th GPU is named.
    let f = scratch("board-577.xml", board(577, 0).as_bytes());
    refused(
        &["topo", "--topo", f.to_str().unwrap()],
        &[
            "board-577.xml:",
            "<gpu>",
            "576 GPU nodes",
            "NCCL_TOPO_MAX_NODES",
        ],
    );
    // 10,000 GPUs (paths were O(GPUs^2): abort at 10 GiB after 181 s) stop at the same place.
    let f = scratch("board-10000.xml", board(10_000, 0).as_bytes());
    refused(&["topo", "--topo", f.to_str().unwrap()], &["576 GPU nodes"]);
}

#[test]
fn the_largest_node_is_shown_and_searched() {
    // At the limit (576 GPUs, one NIC per GPU for the first 8) topo and explain finish; the NCCL view was
    // O(GPUs^4) (14 s at 256 GPUs) and the paths O(all nodes^2).
    let f = scratch("board-576-ok.xml", board(576, 8).as_bytes());
    let path = f.to_str().unwrap();
    for args in [
        vec!["topo", "--topo", path],
        vec!["explain", "--topo", path, "--size", "16M"],
        vec!["explain", "--topo", path, "--size", "16M", "--nodes", "2"],
    ] {
        let (code, err, took) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(took < Duration::from_secs(60), "{args:?} took {took:?}");
    }
    let out = planner().args(["topo", "--topo", path]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Per node: 576 GPUs"), "{}", &text[..200]);
    // Above 128 GPUs the views count the pairs instead of listing them.
    assert!(text.contains("576 GPUs (first GPU0)"), "{text}");
    assert!(text.contains("| GPU-GPU | NV18 | 331200 |"), "{text}");
}

#[test]
fn the_channel_search_at_256_gpus_fits_its_stack() {
    // The recursion goes one level per GPU and channel; the debug build overflowed the main thread's stack here.
    let f = scratch("board-256.xml", board(256, 0).as_bytes());
    let out = planner()
        .args(["channels", "--topo", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Channel 00/"),
        "{}",
        &text[..text.len().min(2000)]
    );
}

#[test]
fn endless_and_huge_input_files_are_refused_at_the_size_limit() {
    // A sparse 65 MiB file is refused from its size without reading it; /dev/zero (read forever before the cap)
    // and a FIFO without a writer (its open blocked forever) are refused as not regular files, at once.
    let huge = scratch("huge.xml", b"");
    std::fs::File::options()
        .write(true)
        .open(&huge)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    let huge = huge.to_str().unwrap().to_string();
    let fifo = scratch("fifo-dir-marker", b"").with_file_name("input.fifo");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path in the test's own directory; mkfifo only creates an entry.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let fifo = fifo.to_str().unwrap().to_string();
    let topo = golden("topo.xml");
    let log = golden("nccl-init-rank0.log");
    let results = format!(
        "{}/bench/results/verify-h200x2-both-eager.json",
        env!("CARGO_MANIFEST_DIR")
    );
    for (file, says) in [
        (huge.as_str(), "64 MiB input file limit"),
        ("/dev/zero", "is a character device, not a regular file"),
        (fifo.as_str(), "is a FIFO, not a regular file"),
    ] {
        for args in [
            vec!["topo", "--topo", file],
            vec!["channels", "--topo", &topo, "--graph", file],
            vec!["audit", file, "--topo", &topo],
            vec!["audit", &log, "--topo", &topo, "--graph", file],
            vec!["explain", "--fixture", "hgx-h200-8", "--tuning-table", file],
            vec!["explain", "--fixture", "hgx-h200-8", "--calibration", file],
            vec!["verify", "--load", file],
            vec!["calibrate", file],
            vec!["tune", "--show", file],
            vec!["tune", "--from", file, "-o", "/nonexistent-dir/plan.json"],
            vec![
                "tune",
                "--calibration",
                file,
                "-o",
                "/nonexistent-dir/plan.json",
            ],
            vec!["diff", file, file],
            // Every other command that reads a named file (issue 28 class 3).
            vec!["check", file],
            vec!["check", &results, "--topo", file],
            vec!["doctor", "--load", file],
            vec!["explain", "--from-log", file],
            vec!["expect", "--fit", file],
            vec!["expect", "--fixture", "hgx-h200-8", "--graph", file],
            vec!["verify", "--load", &results, "--calibration", file],
            vec!["calibrate", &results, "--topo", file],
            vec!["env", "--plan", file, "--tuner-plugin", &results],
        ] {
            refused(&args, &[file, says]);
        }
    }
}

#[test]
fn net_latency_must_be_finite_and_sane() {
    let capture = std::fs::read_to_string(golden("topo.xml")).unwrap();
    for bad in ["NaN", "inf", "-1", "1e308"] {
        let xml = capture.replacen("latency=\"0\"", &format!("latency=\"{bad}\""), 1);
        assert_ne!(xml, capture);
        let f = scratch(&format!("latency-{bad}.xml"), xml.as_bytes());
        refused(
            &["explain", "--topo", f.to_str().unwrap(), "--nodes", "2"],
            &["latency-", &format!("<net latency=\"{bad}\">"), "1000000"],
        );
    }
    // "no algorithm/protocol available" (exit 1) before: now the flag is refused, naming its limit.
    refused(
        &[
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--nodes",
            "2",
            "--net-latency",
            "1e308",
        ],
        &["--net-latency 1e308", "1000000"],
    );
    for ok in ["0", "2.5", "1000000"] {
        planner()
            .args([
                "explain",
                "--fixture",
                "hgx-h200-8",
                "--nodes",
                "2",
                "--net-latency",
                ok,
            ])
            .assert()
            .success();
    }
}

#[test]
fn sizes_that_overflow_name_the_limit() {
    // "must be at least 1 byte" before (the parse wrapped to 0; a panic in debug builds).
    refused(
        &[
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--size",
            "18446744073709551615.5M",
        ],
        &["18446744073709551615.5M", "1 TiB"],
    );
    refused(
        &[
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--sweep",
            "8..184467440737095516155",
        ],
        &["1 TiB"],
    );
    refused(
        &[
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--size",
            "0.000000000000000000123456789012345678901M",
        ],
        &["19 significant digits"],
    );
}

#[test]
fn untrusted_numbers_in_topology_files_do_not_overflow() {
    // <c2c> bw x count overflowed an i64 (debug: panic); both are ints in NCCL.
    let c2c = format!(
        "{CPU_OPEN}{}{}",
        gpu(1, 0).replace(
            "</gpu>",
            "  <c2c bw=\"9223372036854775807\" count=\"9223372036854775807\"/>\n      </gpu>"
        ),
        gpu(2, 1) + CPU_CLOSE
    );
    let f = scratch("c2c.xml", c2c.as_bytes());
    refused(
        &["topo", "--topo", f.to_str().unwrap()],
        &["c2c.xml:", "<c2c>", "not between 0 and 2147483647"],
    );
    // A huge link_width is a (silly) bandwidth, not an overflow: debug and release agree.
    let wide = format!(
        "{CPU_OPEN}{}{}{CPU_CLOSE}",
        gpu(1, 0).replace("link_width=\"16\"", "link_width=\"9223372036854775807\""),
        gpu(2, 1)
    );
    let f = scratch("wide.xml", wide.as_bytes());
    let (code, err, _) = run(&["explain", "--topo", f.to_str().unwrap(), "--size", "1M"]);
    assert!(code == 0 || code == 2, "exit {code}: {err}");
}

#[test]
fn a_bad_graph_file_under_audit_is_bad_input() {
    // Every bad --graph file under `audit` exited 1 (wrapped as a search failure); `channels --graph` gave 2.
    let log = golden("nccl-init-rank0.log");
    let topo = golden("topo.xml");
    let not_xml = scratch("audit-graph-not-xml.xml", b"<graphs version=\"1\"><graph");
    let no_id = scratch(
        "audit-graph-no-id.xml",
        b"<graphs version=\"1\">\n<graph/>\n</graphs>\n",
    );
    refused(
        &[
            "audit",
            &log,
            "--topo",
            &topo,
            "--graph",
            not_xml.to_str().unwrap(),
        ],
        &["audit-graph-not-xml.xml"],
    );
    refused(
        &[
            "audit",
            &log,
            "--topo",
            &topo,
            "--graph",
            no_id.to_str().unwrap(),
        ],
        &["audit-graph-no-id.xml:2:", "'id'"],
    );
    refused(
        &["audit", &log, "--topo", &topo, "--graph", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    // The committed graph dump still audits.
    let graph = golden("graph.xml");
    let (code, err, _) = run(&["audit", &log, "--topo", &topo, "--graph", &graph]);
    assert_eq!(code, 0, "{err}");
}

/// The committed verify result with `edit` applied to its first row.
fn result_file_with(name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let path = format!(
        "{}/bench/results/verify-h200x2-both-eager.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut run_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut run_file["rows"][0]);
    scratch(name, run_file.to_string().as_bytes())
}

#[test]
fn verify_output_paths_that_cannot_be_written_are_bad_input() {
    // Exit 1 before; `topo -o` and `explain --plot` already gave 2.
    let run_file = result_file_with("verify-ok.json", |_| {});
    let load = run_file.to_str().unwrap();
    for flag in ["--csv", "--plot"] {
        refused(
            &["verify", "--load", load, flag, "/nonexistent-dir/out"],
            &["/nonexistent-dir/out", "cannot write"],
        );
    }
}

#[test]
fn verify_plots_skip_rows_a_log_axis_cannot_hold() {
    // The plotting library's log axis looped without end on a row of 0 bytes or a time near 1e308.
    let svg = std::env::temp_dir().join(format!("planner-robust-{}-plot.svg", std::process::id()));
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 3] = [
        ("plot-zero-bytes.json", |row| row["bytes"] = 0.into()),
        ("plot-huge-time.json", |row| {
            let n = row["times_us"].as_array().unwrap().len();
            row["times_us"] = serde_json::json!(vec![1e308; n]);
        }),
        ("plot-tiny-time.json", |row| {
            let n = row["times_us"].as_array().unwrap().len();
            row["times_us"] = serde_json::json!(vec![1e-300; n]);
        }),
    ];
    for (name, edit) in cases {
        let f = result_file_with(name, edit);
        let _ = std::fs::remove_file(&svg);
        if name == "plot-zero-bytes.json" {
            // A row of 0 bytes is no measurement: the file is refused where it is read, naming the row.
            let args = [
                "verify",
                "--load",
                f.to_str().unwrap(),
                "--plot",
                svg.to_str().unwrap(),
            ];
            refused(&args, &["row 0", "the size must be 1 B to 1 TiB"]);
            continue;
        }
        let (code, err, took) = run(&[
            "verify",
            "--load",
            f.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(took < Duration::from_secs(20), "{name} took {took:?}");
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("polyline"), "{name}");
    }
}

#[test]
fn tuner_plans_are_read_with_the_input_file_cap() {
    // `verify --tuner` and `tune --from` read their files whole, uncapped: /dev/zero read forever.
    refused(
        &[
            "verify",
            "--tuner",
            "/dev/zero",
            "--tuner-plugin",
            "/dev/null",
        ],
        &["--tuner /dev/zero", "not a regular file"],
    );
    refused(
        &[
            "tune",
            "--from",
            "/dev/zero",
            "--out",
            "/nonexistent-dir/plan.json",
        ],
        &["/dev/zero", "not a regular file"],
    );
    refused(
        &["tune", "--show", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
}

#[test]
fn huge_thread_thresholds_and_nthreads_saturate() {
    // NCCL_THREAD_THRESHOLDS is a list of C longs: channels x threads x threshold overflowed an i64 (a panic in
    // debug builds; in release the product wrapped and the channel count did not drop). Saturated, a threshold of
    // i64::MAX means the fewest channels, as any threshold above the message size does.
    use planner::model::input::NvlsFlag;
    use planner::model::{Algo, Proto};
    use planner::nccl_env::NcclEnv;
    let cluster =
        planner::topo::Cluster::single(planner::pipeline::load_fixture("hgx-h200-8").unwrap());
    let max = i64::MAX.to_string();
    let model_with = |vars: &[(&str, &str)]| {
        let env = NcclEnv::from_pairs(vars.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        let table = planner::model::table::builtin(planner::model::table::newest_family()).unwrap();
        planner::pipeline::build_model(&cluster, None, table, env, NvlsFlag::Auto).unwrap()
    };
    let stock = model_with(&[]);
    let thresholds = [max.as_str(); 6].join(" ");
    let huge = model_with(&[
        ("NCCL_THREAD_THRESHOLDS", &thresholds),
        ("NCCL_NTHREADS", &max),
        ("NCCL_LL128_NTHREADS", &max),
    ]);
    for algo in [Algo::Ring, Algo::Tree] {
        for proto in Proto::ALL {
            let (stock_channels, _) = stock.channels_threads(algo, proto, 1 << 30);
            assert!(stock_channels > 1, "{algo:?}/{proto:?}");
            let (channels, threads) = huge.channels_threads(algo, proto, 1 << 30);
            assert_eq!(channels, 1, "{algo:?}/{proto:?}");
            // NCCL_NTHREADS above the maximum falls back to the maximum (getNthreads), within NCCL's 640.
            assert!(
                (96..=640).contains(&threads),
                "{algo:?}/{proto:?}: {threads}"
            );
        }
    }
    // Through the binary, the same environment explains normally.
    let (code, err, _) = {
        let start = Instant::now();
        let out = planner()
            .args(["explain", "--fixture", "hgx-h200-8", "--size", "1G"])
            .env("NCCL_THREAD_THRESHOLDS", &thresholds)
            .env("NCCL_NTHREADS", &max)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            start.elapsed(),
        )
    };
    assert_eq!(code, 0, "{err}");
}

/// Run planner with `args` under GNU time (`/usr/bin/time -f %M`): (exit code, peak resident memory in bytes,
/// wall time). None when /usr/bin/time is missing. (The kernel's rusage of a child spawned straight from this
/// test process would count the test process's own pages, copied at fork, as the child's peak.)
fn peak_rss(args: &[&str]) -> Option<(i32, u64, Duration)> {
    peak_rss_and_stdout(args).map(|(code, rss, took, _)| (code, rss, took))
}

/// `peak_rss` and the command's stdout.
fn peak_rss_and_stdout(args: &[&str]) -> Option<(i32, u64, Duration, Vec<u8>)> {
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    // Tests run in parallel threads: one report file per call.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let report =
        std::env::temp_dir().join(format!("planner-robust-{}-rss-{call}", std::process::id()));
    let start = Instant::now();
    let out = std::process::Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(assert_cmd::cargo::cargo_bin!("planner"))
        .args(args)
        .env_remove("NCCL_TOPO_FILE")
        .output()
        .unwrap();
    let took = start.elapsed();
    let kib: u64 = std::fs::read_to_string(&report)
        .unwrap()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("GNU time's %M");
    let _ = std::fs::remove_file(&report);
    Some((
        out.status.code().unwrap_or(-1),
        kib * 1024,
        took,
        out.stdout,
    ))
}

#[test]
fn topo_of_the_largest_node_fits_in_100_mb() {
    // NCCL's largest node: 576 GPUs and 576 NICs, a 1152 x 1152 link matrix and 663,552 paths. The text view
    // summarises the pairs; --json lists every one (100 MB of text), written item by item.
    let f = scratch("board-576-576.xml", board(576, 576).as_bytes());
    let path = f.to_str().unwrap();
    let json_file =
        std::env::temp_dir().join(format!("planner-robust-{}-576.json", std::process::id()));
    let json_out = json_file.to_str().unwrap();
    let text_args = ["topo", "--topo", path];
    let json_args = ["topo", "--topo", path, "--json", "-o", json_out];
    let mut text = String::new();
    for args in [text_args.as_slice(), json_args.as_slice()] {
        let stdout = match peak_rss_and_stdout(args) {
            Some((code, rss, took, stdout)) => {
                assert_eq!(code, 0, "{args:?}");
                assert!(
                    rss < 100_000_000,
                    "{args:?}: peak RSS {} MB",
                    rss / 1_000_000
                );
                assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
                stdout
            }
            None => {
                eprintln!("no /usr/bin/time: peak memory of {args:?} not measured");
                let out = planner().args(args).output().unwrap();
                assert_eq!(out.status.code(), Some(0), "{args:?}");
                out.stdout
            }
        };
        if args == text_args.as_slice() {
            text = String::from_utf8(stdout).unwrap();
        }
    }
    // The header says the matrices are summarised, and each view names its grouping.
    assert!(
        text.contains("More than 128 GPUs or NICs per node: the matrices below are summarised"),
        "{}",
        &text[..400]
    );
    assert!(text.contains("cells by pair and link"), "{text}");
    assert!(text.contains("| GPU-GPU | NV18 | 331200 |"), "{text}");
    assert!(
        text.contains("331200 pairs by type and bandwidth"),
        "{text}"
    );
    assert!(
        text.contains("331776 pairs by type and bandwidth"),
        "{text}"
    );
    assert!(text.contains("| NVL  | 370.8 | 331200 |"), "{text}");
    assert!(text.contains("576 NICs (first mlx5_0)"), "{text}");
    assert!(text.lines().count() < 100, "{} lines", text.lines().count());
    // The JSON parses, every pair in it, without holding it as one value here.
    #[derive(serde::Deserialize)]
    struct Counts {
        gpu_paths: Vec<serde::de::IgnoredAny>,
        net_paths: Vec<serde::de::IgnoredAny>,
        matrix: Matrix,
    }
    #[derive(serde::Deserialize)]
    struct Matrix {
        rows: Vec<Vec<String>>,
    }
    let file = std::fs::File::open(&json_file).unwrap();
    let counts: Counts = serde_json::from_reader(std::io::BufReader::new(file)).unwrap();
    let _ = std::fs::remove_file(&json_file);
    assert_eq!(counts.gpu_paths.len(), 576 * 575);
    assert_eq!(counts.net_paths.len(), 576 * 576);
    assert_eq!(counts.matrix.rows.len(), 1152);
    assert!(counts.matrix.rows.iter().all(|r| r.len() == 1152));
    assert_eq!(counts.matrix.rows[0][0], "X");
    assert_eq!(counts.matrix.rows[0][1], "NV18");
}

/// `planner ARGS` exits 0 with a peak RSS under the issue's 100 MB (checked where /usr/bin/time exists) and within
/// a loose 30 s (the 1 s target is measured and stated in README "Limits", not asserted on a shared machine).
fn succeeds_within_100_mb(args: &[&str]) {
    succeeds_within_mb(args, 100);
}

/// `planner ARGS` exits 0 with a peak RSS under `limit_mb` MB (where /usr/bin/time exists) and within a loose 30 s.
fn succeeds_within_mb(args: &[&str], limit_mb: u64) {
    let Some((code, rss, took)) = peak_rss(args) else {
        eprintln!("no /usr/bin/time: peak memory not measured");
        let (code, err, _) = run(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        return;
    };
    assert_eq!(code, 0, "{args:?}");
    assert!(
        rss < limit_mb * 1_000_000,
        "{args:?}: peak RSS {} MB",
        rss / 1_000_000
    );
    assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
}

#[test]
fn the_largest_job_of_100k_gpus_fits_in_1_gb() {
    // 12,500 nodes of 8 H200 = 100,000 ranks (issue 24's target: < 1 s and < 1 GB whole-process; measured 0.07 s
    // and 70 MB, bench/results/large-cluster-2026-12-01). The per-rank tables: 16 runtime channels x 100,000 ranks
    // x 16 bytes of tree links, twice (runtime and preset), 51 MB, plus 16 rings of 4-byte ranks, 6.4 MB.
    for args in [
        [
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--nodes",
            "12500",
            "--size",
            "16M",
        ]
        .as_slice(),
        [
            "channels",
            "--fixture",
            "hgx-h200-8",
            "--nodes",
            "12500",
            "--json",
        ]
        .as_slice(),
    ] {
        succeeds_within_mb(args, 1000);
    }
}

#[test]
fn a_576_gpu_cluster_fits_in_100_mb() {
    // 72 nodes of 8 H100 (576 GPUs, NVL72-sized): topo and explain stay under the issue's 100 MB.
    for args in [
        ["topo", "--fixture", "hgx-h100-8", "--nodes", "72"].as_slice(),
        [
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--nodes",
            "72",
            "--size",
            "16M",
        ]
        .as_slice(),
    ] {
        succeeds_within_100_mb(args);
    }
}

#[test]
fn the_largest_node_with_a_nic_per_gpu_fits_in_100_mb() {
    // NCCL 2.28's largest host: 576 GPUs and 576 NICs, 1.3 million paths between CPU, GPU, NET and NVS nodes. The
    // path table keeps 16 bytes per path and one shared list of links that the search follows too (before: 210 MB
    // and 2.5 s, most of it in `ncclTopoGetLocal` asked a billion times). Time is measured, not asserted tightly:
    // README "Limits" states it.
    // Two placements: every NIC on the CPU's root (every GPU equally close to every NIC, the search's worst case)
    // and each NIC beside its GPU under a PCIe switch (PIX; the other GPUs' paths to it rewritten as PXN).
    for (name, xml) in [
        ("board-576-576.xml", board(576, 576)),
        ("board-576-switched.xml", switched_board(576)),
    ] {
        let f = scratch(name, xml.as_bytes());
        let path = f.to_str().unwrap();
        for args in [
            ["topo", "--topo", path, "--json"].as_slice(),
            ["channels", "--topo", path].as_slice(),
            ["explain", "--topo", path, "--size", "16M"].as_slice(),
            ["explain", "--topo", path, "--size", "16M", "--nodes", "2"].as_slice(),
        ] {
            succeeds_within_100_mb(args);
        }
    }
    // The switched board's rings leave through a NVLink peer's NIC (PXN), so the rewritten paths were followed.
    let f = scratch("board-576-switched.xml", switched_board(576).as_bytes());
    let out = planner()
        .args(["channels", "--topo", f.to_str().unwrap(), "--nodes", "2"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NVL / PXN"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Inputs the fuzz campaign (bench/results/fuzz-campaign-2026-12-01) crashed on, each after its fix. The
/// generated ones are bytes for `robust_gen::generated_topology` (the `topo_gen` target's generator).
#[test]
fn fuzz_campaign_findings_stay_fixed() {
    use planner::search::{self, SearchOptions};
    // topo_gen: a huge link width made the search's bandwidth x 1000 beyond i64, and NCCL's roundf
    // (`round_half_away`) added 1 to i64::MAX (debug: overflow panic; release: a wrong, negative bandwidth).
    let round_overflow: [u8; 65] = [
        43, 4, 28, 170, 194, 222, 177, 28, 154, 228, 128, 15, 220, 197, 7, 237, 205, 116, 139, 8,
        234, 7, 7, 232, 212, 35, 251, 127, 0, 89, 192, 161, 29, 73, 231, 238, 105, 59, 186, 11,
        182, 143, 200, 134, 23, 36, 227, 82, 117, 164, 80, 28, 188, 214, 115, 214, 87, 190, 75, 88,
        245, 242, 239, 239, 87,
    ];
    // nccl_tests: `# nThread 5 nGpus 013967760026245616980` multiplied two untrusted counts (debug: overflow
    // panic; release: a wrapped GPU count). The product is now held to the rank limit, naming the line.
    let text = "# nccl-tests version\nimef\n# nThread 5 nGpus  013967760026245616980\n#";
    let e = planner::calibrate::read_text(text, "ngpus.txt", &Default::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("ngpus.txt:3:"), "{e}");
    let text = "# nccl-tests version\n# nThread 4294967296 nGpus 4294967296\n";
    let e = planner::calibrate::read_text(text, "ngpus.txt", &Default::default()).unwrap_err();
    assert!(e.to_string().contains("524288 ranks"), "{e}");

    for bytes in [&round_overflow[..]] {
        let xml = planner::xml::write(&crate::robust_gen::generated_topology(bytes));
        let topo = match planner::topo::build::from_bytes(xml.as_bytes(), "gen.xml") {
            Ok(topo) => topo,
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{e}");
                continue;
            }
        };
        for nodes in [1, 2] {
            let mut cluster = planner::topo::Cluster::single(topo.clone());
            cluster.n_nodes = nodes;
            match search::search(&cluster, &SearchOptions::default()) {
                Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
                Ok(result) => {
                    let g = &result.graphs;
                    for graph in [&g.ring, &g.tree] {
                        assert!(graph.bw_intra >= 0.0 && graph.bw_inter >= 0.0, "{graph:?}");
                    }
                }
            }
        }
        let f = scratch("round-overflow.xml", xml.as_bytes());
        let (code, err, _) = run(&["channels", "--topo", f.to_str().unwrap()]);
        assert!(code == 0 || code == 2, "exit {code}: {err}");
    }
}

#[test]
fn every_writer_refuses_what_is_not_a_regular_file_and_writes_through_links() {
    // `verify --out` renamed OUT.tmp over OUT, so it replaced device nodes, FIFOs and symlinks; the other writers
    // opened the path (blocking on a FIFO) and gave exit 1 or 2 for the same missing directory.
    let results = format!(
        "{}/bench/results/verify-h200x2-both-eager.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = scratch("writers-marker", b"").with_file_name("writers");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("real")).unwrap();
    let fifo = dir.join("out.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path in the test's own directory; mkfifo only creates an entry.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let points = format!(
        "{}/tests/data/expect-train/points.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let writers: Vec<(&str, Vec<&str>)> = vec![
        (
            "topo.xml",
            vec!["topo", "--fixture", "hgx-h200-8", "--xml", "-o"],
        ),
        (
            "plot.svg",
            vec!["explain", "--fixture", "hgx-h200-8", "--plot"],
        ),
        ("rows.csv", vec!["verify", "--load", &results, "--csv"]),
        ("rows.svg", vec!["verify", "--load", &results, "--plot"]),
        ("plan.json", vec!["tune", "--from", &results, "-o"]),
        ("cal.json", vec!["calibrate", &results, "-o"]),
        ("diff.svg", vec!["diff", &results, &results, "--plot"]),
        (
            "expect.csv",
            vec!["expect", "--fixture", "hgx-h200-8", "--csv"],
        ),
        (
            "points.csv",
            vec!["expect", "--fit", &points, "--points-out"],
        ),
        // The fake backend (PLANNER_FAKE_BACKEND, set by `writer`) for the two commands that measure.
        ("run.json", fake_verify_args()),
        (
            "doctor.json",
            vec!["doctor", "--repeats", "2", "--timeout", "1", "-o"],
        ),
    ];
    for (name, args) in &writers {
        let with = |path: &str| {
            let mut a = args.clone();
            a.push(path);
            a.into_iter().map(String::from).collect::<Vec<_>>()
        };
        let refs = |v: &[String]| v.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
        // A FIFO: refused at once (exit 2, naming it) and left a FIFO.
        let a = with(fifo.to_str().unwrap());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused_fake(&a, &[fifo.to_str().unwrap(), "a FIFO, not a regular file"]);
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        // A missing directory: bad input, 2, from every command.
        let missing = dir.join("no-such-dir").join(name);
        let a = with(missing.to_str().unwrap());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused_fake(&a, &["does not exist"]);
        // A symlink: its target is written, the link stays.
        let target = dir.join("real").join(name);
        let link = dir.join(name);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let a = with(link.to_str().unwrap());
        let out = fake_backend(planner()).args(&a).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            refs(&a),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(std::fs::metadata(&target).unwrap().len() > 0, "{name}");
    }
    // No temporary file is left anywhere.
    for sub in [dir.clone(), dir.join("real")] {
        for entry in std::fs::read_dir(&sub).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "{name} left in {}", sub.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_graph_naming_a_net_the_topology_lacks_is_refused() {
    // Checked only across nodes before: on one node a graph could name any NET.
    let graph = std::fs::read_to_string(golden("graph.xml")).unwrap();
    let with_net = graph.replacen(
        "<channel>\n      <gpu dev=\"0\"/>",
        "<channel>\n      <net dev=\"0x7\"/>\n      <gpu dev=\"0\"/>",
        1,
    );
    assert_ne!(with_net, graph);
    let path = scratch("graph-unknown-net.xml", with_net.as_bytes());
    refused(
        &[
            "channels",
            "--topo",
            &golden("topo.xml"),
            "--graph",
            path.to_str().unwrap(),
        ],
        &["graph-unknown-net.xml:", "<net dev=\"0x7\">: no such NET"],
    );
}

/// verify on the fake backend (PLANNER_FAKE_BACKEND=1, as `fake_backend` sets), up to its `--out`.
fn fake_verify_args() -> Vec<&'static str> {
    vec![
        "verify",
        "--fixture",
        "h200x2-nvswitch-vm",
        "--backend",
        "nccl",
        "--pair",
        "Ring/LL",
        "--sweep",
        "1K..4K",
        "--out",
    ]
}

/// `cmd` with the fake backend of verify and doctor (no GPU), 1 ms per step, and no NCCL_* of the caller.
fn fake_backend(mut cmd: assert_cmd::Command) -> assert_cmd::Command {
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("NCCL_") {
            cmd.env_remove(var);
        }
    }
    cmd.env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DELAY_MS", "1")
        .env_remove("PLANNER_FAKE_FAULT")
        .env_remove("PLANNER_FAKE_DOCTOR");
    cmd
}

/// `refused` with the fake backend set (it changes nothing for the commands that do not measure).
fn refused_fake(args: &[&str], needles: &[&str]) {
    let start = Instant::now();
    let out = fake_backend(planner()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' missing from: {err}");
    }
    assert!(start.elapsed() < Duration::from_secs(20), "{args:?}");
}

#[test]
fn a_write_that_fails_at_write_time_exits_1_from_every_writer() {
    // Issue 28 class 6: a disk that fails while the file is written is a runtime failure (1) on every command,
    // where a missing directory is bad input (2). The failure is made without a full disk or /dev/full: the
    // child's file size limit is 0 (RLIMIT_FSIZE) with SIGXFSZ ignored, so its first write fails with EFBIG, on
    // a directory of this test's own. Nothing is left behind: no output, no temporary file.
    let results = format!(
        "{}/bench/results/verify-h200x2-both-eager.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let points = format!(
        "{}/tests/data/expect-train/points.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = scratch("fsize-marker", b"").with_file_name("fsize");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out_dir = dir.to_str().unwrap();
    let at = |name: &str| format!("{out_dir}/{name}");
    let mut writers: Vec<Vec<String>> = vec![
        vec![
            "topo",
            "--fixture",
            "hgx-h200-8",
            "--xml",
            "-o",
            &at("t.xml"),
        ],
        vec!["explain", "--fixture", "hgx-h200-8", "--plot", &at("p.svg")],
        vec!["verify", "--load", &results, "--csv", &at("r.csv")],
        vec!["verify", "--load", &results, "--plot", &at("r.svg")],
        vec!["tune", "--from", &results, "-o", &at("plan.json")],
        vec!["calibrate", &results, "-o", &at("cal.json")],
        vec!["calibrate", &results, "--plot", &at("cal.svg")],
        vec!["diff", &results, &results, "--plot", &at("d.svg")],
        vec!["expect", "--fixture", "hgx-h200-8", "--csv", &at("e.csv")],
        vec!["expect", "--fit", &points, "--points-out", &at("pts.csv")],
        vec!["expect", "--fit", &points, "--write", out_dir],
        vec![
            "doctor",
            "--repeats",
            "2",
            "--timeout",
            "1",
            "-o",
            &at("doc.json"),
        ],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(String::from).collect())
    .collect();
    let mut verify: Vec<String> = fake_verify_args().into_iter().map(String::from).collect();
    verify.push(at("run.json"));
    writers.push(verify);
    for args in &writers {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("planner"));
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("NCCL_") {
                cmd.env_remove(var);
            }
        }
        for var in planner::nccl_env::VARIABLES {
            cmd.env_remove(var);
        }
        cmd.env("PLANNER_FAKE_BACKEND", "1")
            .env("PLANNER_FAKE_DELAY_MS", "1")
            .env_remove("PLANNER_FAKE_FAULT")
            .env_remove("PLANNER_FAKE_DOCTOR")
            .args(args);
        // SAFETY: between fork and exec only async-signal-safe calls (setrlimit, signal) on the child's own state.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: libc::RLIM_INFINITY,
                };
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &none) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.contains(out_dir) && last.contains("cannot write: File too large"),
            "{args:?}: {err}"
        );
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A committed fuzz seed (issue 28's are named `issue28-*`), without the option byte of the measurement targets.
fn corpus(path: &str) -> String {
    let full = format!("{}/fuzz/corpus/{path}", env!("CARGO_MANIFEST_DIR"));
    if path.starts_with("nccl_tests/") || path.starts_with("inspector/") {
        let bytes = std::fs::read(&full).unwrap();
        let name = path.replace('/', "-");
        return scratch(&name, &bytes[1..]).to_str().unwrap().to_string();
    }
    full
}

#[test]
fn files_that_parse_but_contradict_themselves_or_physics_are_refused_naming_the_field() {
    // Issue 28 class 5 (and 4): each was exit 0 (or printed inf/NaN, or wrapped) before.
    for (args, says) in [
        (
            vec![
                "verify",
                "--load",
                "verify_result/issue28-nodes-above-world.json",
            ],
            "machine.nodes 3 but world_size 2: every node holds at least one rank",
        ),
        (
            vec![
                "verify",
                "--load",
                "verify_result/issue28-world-above-topology.json",
            ],
            "machine.world_size 8 but topology_xml holds 2 GPU(s) per node x 1 node(s)",
        ),
        (
            vec![
                "verify",
                "--load",
                "verify_result/issue28-wrong-overflow.json",
            ],
            "wrong 9223372036854775808 is more elements than its 2 ranks hold",
        ),
        (
            vec!["tune", "--show", "tuner_plan/issue28-duplicate-key.json"],
            "duplicate key \"algorithm\"",
        ),
        (
            vec!["tune", "--show", "tuner_plan/issue28-nvls-ll.json"],
            "NCCL never runs AllReduce NVLS/LL",
        ),
        (
            vec![
                "calibrate",
                "nccl_tests/issue28-J-nthreads-ngpus-overflow.json",
            ],
            "nthreads 4294967296 x ngpus 4294967296 x 1 devices is more than planner's limit",
        ),
        (
            vec![
                "calibrate",
                "inspector/issue28-allgather-bytes-x-ranks-overflow.jsonl",
            ],
            "coll_msg_size_bytes 4611686018427387904 x n_ranks 8 overflows a byte count",
        ),
    ] {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains('/') {
                    corpus(a)
                } else {
                    a.to_string()
                }
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, &[says]);
    }
    for (flag, file, says) in [
        (
            "--calibration",
            "calibration/issue28-absurd-bandwidth.json",
            "AllReduce Tree/LL: parameters out of range: bandwidth_gbs 1e-300 is outside 0.000001..10000000",
        ),
        (
            "--calibration",
            "calibration/issue28-absurd-ramp-exponent.json",
            "parameters out of range: ramp_exponent 1e300 is outside 0..16",
        ),
        (
            "--tuning-table",
            "tuning_table/issue28-absurd-latency.json",
            "'base_latencies.Tree[0]' = 1e300 is outside 1e-6..1e15",
        ),
    ] {
        let path = corpus(file);
        refused(&["explain", "--fixture", "h200x2-nvswitch-vm", flag, &path], &[&path, says]);
    }
    // A 0-byte row (its in-place and out-of-place halves) is left out with a note; the pair is still fitted (it was dropped: "too few to fit").
    let out = planner()
        .args(["calibrate", &corpus("nccl_tests/issue28-zero-byte-row.txt")])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fitted 1 pair(s)"), "{err}");
    assert!(
        err.contains("2 row(s) of 0 bytes or with a time that is not above 0 left out"),
        "{err}"
    );
    // A row whose result was wrong is never the measured best, however fast.
    let out = planner()
        .args([
            "verify",
            "--json",
            "--load",
            &corpus("verify_result/issue28-wrong-row-fastest.json"),
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let scored: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = scored["rows"].as_array().unwrap();
    let wrong: Vec<&serde_json::Value> = rows.iter().filter(|r| r["wrong"] == 5).collect();
    assert_eq!(wrong.len(), 1);
    assert_eq!(wrong[0]["measured_best"], false, "{}", wrong[0]);
}

#[test]
fn nothing_a_file_says_reaches_the_terminal_as_a_control_character() {
    // Issue 28 class 7: escape sequences and newlines from result files, plans and nccl-tests output were echoed
    // raw (a newline in a plan's source_file forged a line of `tune --show`).
    let check_file = {
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/check/h200-2node-sockets-e09.txt",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let text = text.replacen(
            "NCCL version 2.27.3+cuda12.9",
            "NCCL version 2.27.3+cuda12.9\u{1b}[31m\u{1b}]0;pwn\u{7}",
            1,
        );
        scratch("check-escapes.txt", text.as_bytes())
    };
    for args in [
        vec![
            "verify".to_string(),
            "--load".into(),
            corpus("verify_result/issue28-escapes.json"),
        ],
        vec![
            "tune".into(),
            "--show".into(),
            corpus("tuner_plan/issue28-newline-in-source-file.json"),
        ],
        vec![
            "check".into(),
            check_file.to_str().unwrap().into(),
            "--coll".into(),
            "all-reduce".into(),
            "--fixture".into(),
            "hgx-h200-8".into(),
            "--nodes".into(),
            "2".into(),
        ],
    ] {
        let out = planner().args(&args).output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {out:?}"
        );
        for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
                "{args:?} {what}: {text}"
            );
            assert!(
                !text
                    .lines()
                    .any(|l| l.starts_with("[0] NCCL INFO forged")
                        || l.starts_with("planner: forged")),
                "{args:?} {what}: {text}"
            );
        }
    }
}

#[test]
fn a_tuner_plugin_that_is_not_a_regular_file_is_refused_by_name() {
    // `--tuner-plugin FIFO` (or a directory) said "no such file"; it names what the path is instead, exit 2.
    let plan = scratch(
        "plugin-plan.json",
        br#"{"format":"planner-tuner-plan","version":1,
 "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"test","nccl_version":"2.28.3",
               "topology_hash":null,"source_kind":"verify","source_file":"verify.json",
               "source_hash":"0000000000000000","margin_percent":2.0},
 "rules":[{"collective":"AllReduce","n_ranks":2,"n_nodes":1,"min_bytes":1048576,"max_bytes":4194303,
           "algorithm":"Ring","protocol":"LL","channels":null}]}"#,
    );
    let fifo = plan.with_file_name("plugin.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let dir = plan.with_file_name("plugin-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let (plan, fifo, dir) = (
        plan.to_str().unwrap(),
        fifo.to_str().unwrap(),
        dir.to_str().unwrap(),
    );
    for (file, says) in [
        (fifo, "is a FIFO, not a regular file"),
        (dir, "is a directory, not a regular file"),
    ] {
        for args in [
            vec!["verify", "--tuner", plan, "--tuner-plugin", file],
            vec!["env", "--plan", plan, "--tuner-plugin", file],
        ] {
            let err = refused(&args, &["--tuner-plugin", file, says]);
            assert!(!err.contains("no such file"), "{args:?}: {err}");
        }
    }
}
