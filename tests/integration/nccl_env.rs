//! NCCL's environment, honoured where NCCL applies it and shown (stderr, `--json`'s `nccl_env`). One test per
//! variable; each expected effect is worked out by hand from NCCL's source (v2.30.7-1 lines unless named).
//! `planner()` scrubs the caller's NCCL_* variables; each test sets its own.

use crate::common::{golden, planner};
use serde_json::Value;

/// stdout as JSON and stderr of `planner ARGS` under `env`.
fn run_json(env: &[(&str, &str)], args: &[&str]) -> (Value, String) {
    let mut cmd = planner();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).assert().success().get_output().clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (json, String::from_utf8(out.stderr).unwrap())
}

fn channels(env: &[(&str, &str)], fixture: &str, nodes: &str) -> (Value, String) {
    run_json(
        env,
        &["channels", "--fixture", fixture, "--nodes", nodes, "--json"],
    )
}

fn explain(env: &[(&str, &str)]) -> (Value, String) {
    run_json(env, &["explain", "--fixture", "hgx-h200-8", "--json"])
}

/// The explain row of one algorithm/protocol pair.
fn pair<'a>(json: &'a Value, algo: &str, proto: &str) -> &'a Value {
    json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["algorithm"] == algo && p["protocol"] == proto)
        .unwrap_or_else(|| panic!("no {algo}/{proto} row"))
}

fn nccl_env(json: &Value) -> Vec<(String, String)> {
    json["nccl_env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn nothing_set_nothing_applied() {
    let (json, stderr) = explain(&[]);
    assert_eq!(json["runtime_channels"], 24);
    assert!(nccl_env(&json).is_empty());
    assert!(!stderr.contains("NCCL_* applied"), "{stderr}");
}

#[test]
fn max_nchannels_caps_the_runtime_channels() {
    // hgx-h200-8: 12 search channels, x2 = 24 runtime channels (connect.cc:460). connect.cc:503:
    // nChannels = min(ncclMaxNchannels() = 4, 24, maxCTAs = 64) = 4. NCCL's times do not change: it prices each
    // algorithm with its graph's 12 channels (tuning.cc:324), the channel count only caps `nc` per call.
    let (base, _) = explain(&[]);
    let (json, stderr) = explain(&[("NCCL_MAX_NCHANNELS", "4")]);
    assert_eq!(json["runtime_channels"], 4);
    assert_eq!(pair(&json, "Ring", "Simple")["channels"], 4);
    assert_eq!(
        pair(&json, "Ring", "Simple")["time_us"],
        pair(&base, "Ring", "Simple")["time_us"]
    );
    // NVLS channels are bounded by NCCL_MAX_CTAS only (nvls.cc:235): still 16 (NVLS_NCHANNELS_SM90).
    assert_eq!(pair(&json, "NVLS", "Simple")["channels"], 16);
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_MAX_NCHANNELS", "4")]));
    assert!(
        stderr.contains("NCCL_* applied: NCCL_MAX_NCHANNELS=4"),
        "{stderr}"
    );
    // The legacy name (connect.cc:350) works alone; the new one wins when both are set (connect.cc:351).
    let (json, _) = explain(&[("NCCL_MAX_NRINGS", "8")]);
    assert_eq!(json["runtime_channels"], 8);
    let (json, _) = explain(&[("NCCL_MAX_NRINGS", "8"), ("NCCL_MAX_NCHANNELS", "6")]);
    assert_eq!(json["runtime_channels"], 6);
    // 0 (and "abc", which strtoll reads as 0, misc/param.cc:95): NCCL sets it to 1 (connect.cc:353-356).
    let (json, stderr) = explain(&[("NCCL_MAX_NCHANNELS", "abc")]);
    assert_eq!(json["runtime_channels"], 1);
    assert!(stderr.contains("NCCL_MAX_NCHANNELS=abc"), "{stderr}");
}

#[test]
fn min_nchannels_copies_channels_after_the_max() {
    // connect.cc:503-505: max first (24 -> 4), then copyChannels up to max(ncclMinNchannels() = 6, minCTAs = 1):
    // channels 4 and 5 repeat channels 0 and 1.
    let (json, stderr) = channels(
        &[("NCCL_MAX_NCHANNELS", "4"), ("NCCL_MIN_NCHANNELS", "6")],
        "hgx-h200-8",
        "1",
    );
    let conn = &json["connection"];
    assert_eq!(conn["n_channels"], 6);
    assert_eq!(conn["rings"][4], conn["rings"][0]);
    assert_eq!(conn["rings"][5], conn["rings"][1]);
    assert_eq!(
        nccl_env(&json),
        pairs(&[("NCCL_MAX_NCHANNELS", "4"), ("NCCL_MIN_NCHANNELS", "6")])
    );
    assert!(stderr.contains("NCCL_MIN_NCHANNELS=6, NCCL_MAX_NCHANNELS=4"));
    // Alone, 32 > 24: copies up to 32; 100 is limited to MAXCHANNELS = 64 (connect.cc:338-341).
    let (json, _) = channels(&[("NCCL_MIN_NCHANNELS", "32")], "hgx-h200-8", "1");
    assert_eq!(json["connection"]["n_channels"], 32);
    let (json, stderr) = channels(&[("NCCL_MIN_NCHANNELS", "100")], "hgx-h200-8", "1");
    assert_eq!(json["connection"]["n_channels"], 64);
    assert!(stderr.contains("NCCL_MIN_NCHANNELS=100"), "{stderr}");
}

#[test]
fn max_ctas_caps_both_runtime_and_nvls_channels() {
    // init.cc:2025-2035 sets config.maxCTAs = 8; connect.cc:503 min(64, 24, 8) = 8; nvls.cc:235 clamps the 16
    // NVLS channels to [minCTAs 1, maxCTAs 8] = 8.
    let (json, _) = explain(&[("NCCL_MAX_CTAS", "8")]);
    assert_eq!(json["runtime_channels"], 8);
    assert_eq!(pair(&json, "NVLS", "Simple")["channels"], 8);
    // A value <= 0 is ignored (init.cc:2027-2028).
    let (json, stderr) = explain(&[("NCCL_MAX_CTAS", "0")]);
    assert_eq!(json["runtime_channels"], 24);
    assert!(nccl_env(&json).is_empty());
    assert!(stderr.contains("NCCL_MAX_CTAS=0"), "{stderr}");
    // NCCL_NVLS_NCHANNELS replaces the NVLS default (nvls.cc:222): 4 channels, ring channels unchanged.
    let (json, _) = explain(&[("NCCL_NVLS_NCHANNELS", "4")]);
    assert_eq!(pair(&json, "NVLS", "Simple")["channels"], 4);
    assert_eq!(json["runtime_channels"], 24);
}

#[test]
fn p2p_disable_routes_gpu_pairs_through_the_cpu_but_nvls_keeps_nvlink() {
    // paths.cc:250-251: NCCL_P2P_DISABLE=1 -> p2pLevel LOC; paths.cc:762-775: every GPU pair (path NVL > LOC) goes
    // through the CPU local to the destination. hgx-h200-8 has two sockets: the ring must cross them, typeIntra SYS,
    // one channel at 20 (the SYS link), x2 = 2 runtime channels.
    let (json, stderr) = channels(&[("NCCL_P2P_DISABLE", "1")], "hgx-h200-8", "1");
    let ring = &json["graphs"]["ring"];
    assert_eq!(
        (&ring["type_intra"], &ring["n_channels"]),
        (&Value::from("SYS"), &Value::from(1))
    );
    assert_eq!(json["connection"]["n_channels"], 2);
    // The NVLS search follows GPU<->NVSwitch paths, which P2P does not touch (search.cc:410-440), but starts at the
    // smallest GPU<->GPU type (search.cc:1088-1091), now PHB: 8 heads at bwIntra 40, typeIntra PHB.
    let nvls = &json["graphs"]["nvls"];
    assert_eq!(
        (
            &nvls["type_intra"],
            &nvls["n_channels"],
            &nvls["bw_intra_gbs"]
        ),
        (&Value::from("PHB"), &Value::from(8), &Value::from(40.0))
    );
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_P2P_DISABLE", "1")]));
    assert!(stderr.contains("NCCL_* applied: NCCL_P2P_DISABLE=1"));
}

#[test]
fn p2p_disable_nvls_is_priced_as_nccl_prices_it() {
    // NCCL still runs NVLS without P2P (nvls.cc:248-279 asks NCCL_NVLS_ENABLE and multicast only). Its model:
    // intraHw = PCI since typeIntra PHB != NVL (tuning.cc:285); latency = hwLatencies[PCI][NVLS][Simple] = 0
    // (tuning.cc:167, NVLS has no base latency, tuning.cc:153); bandwidth per channel
    // min(40 x 0.85 x 7/8 x 2, bwInter 60) = 59.5, x 8 channels = 476 GB/s busbw, algbw 476 x 8/14 = 272 GB/s,
    // exactly as with P2P (the NVLS graph's bandwidth does not change): 16 MiB / 272 GB/s = 61.68 µs.
    let (base, _) = explain(&[]);
    let (json, stderr) = explain(&[("NCCL_P2P_DISABLE", "1")]);
    let nvls = pair(&json, "NVLS", "Simple");
    assert_eq!(nvls["latency_us"], 0.0);
    assert_eq!(pair(&base, "NVLS", "Simple")["latency_us"], 25.0);
    let bw_term = |p: &Value| p["time_us"].as_f64().unwrap() - p["latency_us"].as_f64().unwrap();
    let expected = 16.0 * 1048576.0 / (1000.0 * 476.0 * 8.0 / 14.0);
    assert!((bw_term(nvls) - expected).abs() < 0.01, "{}", bw_term(nvls));
    assert!((bw_term(pair(&base, "NVLS", "Simple")) - expected).abs() < 0.01);
    // The pick stays NVLS, and planner says why the latency reads 0.
    assert_eq!(json["winner"]["algorithm"], "NVLS");
    assert!(stderr.contains("PCI latency row"), "{stderr}");
    assert!(!explain(&[]).1.contains("PCI latency row"));
}

#[test]
fn p2p_level_is_read_as_nccl_get_level_reads_it() {
    // paths.cc:258-277: exact upper-case names; "0" is old level 0 = LOC; "loc" matches nothing and is ignored.
    let ring_type = |env: &[(&str, &str)]| {
        let (json, stderr) = channels(env, "hgx-h200-8", "1");
        (json["graphs"]["ring"]["type_intra"].clone(), stderr)
    };
    assert_eq!(ring_type(&[("NCCL_P2P_LEVEL", "LOC")]).0, "SYS");
    assert_eq!(ring_type(&[("NCCL_P2P_LEVEL", "0")]).0, "SYS");
    let (t, stderr) = ring_type(&[("NCCL_P2P_LEVEL", "loc")]);
    assert_eq!(t, "NVL");
    assert!(stderr.contains("NCCL_P2P_LEVEL=loc"), "{stderr}");
    assert!(!stderr.contains("NCCL_* applied"), "{stderr}");
    // NCCL_P2P_DISABLE=1 comes first: NCCL_P2P_LEVEL is not read (paths.cc:247-255).
    let (t, stderr) = ring_type(&[("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "NVL")]);
    assert_eq!(t, "SYS");
    assert!(stderr.contains("NCCL_P2P_LEVEL=NVL: not read"), "{stderr}");
    // Only 1 disables (paths.cc:251): 0 leaves NVLink on.
    assert_eq!(ring_type(&[("NCCL_P2P_DISABLE", "0")]).0, "NVL");
}

#[test]
fn net_gdr_level_below_the_nic_distance_goes_through_the_cpu() {
    // hgx-h200-8 x 2 nodes: each GPU reaches its NIC through a PCIe switch (PIX). NCCL_NET_GDR_LEVEL=LOC: distance
    // PIX > LOC, no GPU Direct RDMA (paths.cc:528), so paths.cc:845-852 routes GPU<->NIC through the CPU: PHB.
    let (base, _) = channels(&[], "hgx-h200-8", "2");
    assert_eq!(base["graphs"]["ring"]["type_inter"], "PIX");
    let (json, _) = channels(&[("NCCL_NET_GDR_LEVEL", "LOC")], "hgx-h200-8", "2");
    assert_eq!(json["graphs"]["ring"]["type_inter"], "PHB");
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_NET_GDR_LEVEL", "LOC")]));
    // PIX allows it: unchanged.
    let (json, _) = channels(&[("NCCL_NET_GDR_LEVEL", "PIX")], "hgx-h200-8", "2");
    assert_eq!(json["graphs"]["ring"], base["graphs"]["ring"]);
}

#[test]
fn ib_disable_leaves_the_nics_without_gpu_direct_rdma() {
    // net_ib/init.cc:291: NCCL_IB_DISABLE=1 fails the IB plugin; NCCL's socket transport takes host memory only
    // (net_socket.cc:170), so no NIC has GDR: the same paths as NCCL_NET_GDR_LEVEL=LOC above.
    let (json, _) = channels(&[("NCCL_IB_DISABLE", "1")], "hgx-h200-8", "2");
    let (gdr_off, _) = channels(&[("NCCL_NET_GDR_LEVEL", "LOC")], "hgx-h200-8", "2");
    assert_eq!(json["graphs"]["ring"]["type_inter"], "PHB");
    assert_eq!(json["graphs"], gdr_off["graphs"]);
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_IB_DISABLE", "1")]));
    // One node uses no NIC: nothing changes.
    let (one, _) = channels(&[("NCCL_IB_DISABLE", "1")], "hgx-h200-8", "1");
    let (base, _) = channels(&[], "hgx-h200-8", "1");
    assert_eq!(one["graphs"], base["graphs"]);
}

#[test]
fn cross_nic_values_as_the_search_reads_them() {
    // aws-p5 x 2 (see cloud_fixtures): default 2 finds crossNic rings, 8 x 48. With 0 a ring must leave by the NIC it
    // entered: 8 x 45 over PXN. search.cc:1080-1085,1236-1242: any value other than 1 and 2 searches as 0.
    let ring = |v: &str| {
        let (json, stderr) = channels(&[("NCCL_CROSS_NIC", v)], "aws-p5", "2");
        let r = &json["graphs"]["ring"];
        (
            (
                r["cross_nic"].clone(),
                r["bw_inter_gbs"].clone(),
                r["type_inter"].clone(),
            ),
            stderr,
        )
    };
    let v = |c: i64, bw: f64, t: &str| (Value::from(c), Value::from(bw), Value::from(t));
    assert_eq!(ring("2").0, v(2, 48.0, "PIX"));
    assert_eq!(ring("0").0, v(0, 45.0, "PXN"));
    let (five, stderr) = ring("5");
    assert_eq!(five, v(0, 45.0, "PXN"));
    assert!(stderr.contains("NCCL_CROSS_NIC=5"), "{stderr}");
    assert_eq!(ring("1").0, v(1, 48.0, "PIX"));
}

#[test]
fn nthreads_sets_simple_and_ll_threads() {
    // tuning.cc:245-256: NCCL_NTHREADS=256 is a multiple of 32 within [64, 512]: Ring/Simple and Ring/LL get 256
    // threads (Ring/Simple one more warp per call for sync, enqueue.cc:2106-2107: 288, instead of 512 + 32 = 544);
    // LL128 reads NCCL_LL128_NTHREADS only (640). 16 MiB is large enough that no call halves them.
    let (base, _) = explain(&[]);
    assert_eq!(pair(&base, "Ring", "Simple")["threads"], 544);
    let (json, _) = explain(&[("NCCL_NTHREADS", "256")]);
    assert_eq!(pair(&json, "Ring", "Simple")["threads"], 288);
    assert_eq!(pair(&json, "Ring", "LL")["threads"], 256);
    assert_eq!(pair(&json, "Ring", "LL128")["threads"], 640);
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_NTHREADS", "256")]));
    // 100 is not a multiple of 32: NCCL uses the maximum, 512 (tuning.cc:20-22), and planner says so.
    let (json, stderr) = explain(&[("NCCL_NTHREADS", "100")]);
    assert_eq!(pair(&json, "Ring", "LL")["threads"], 512);
    assert!(
        stderr.contains("NCCL_NTHREADS=100: not a multiple of 32"),
        "{stderr}"
    );
}

#[test]
fn buffsize_is_named_but_not_applied() {
    // init.cc:822-829: buffSizes only set the step/chunk size (enqueue.cc:2222), never the choice or NCCL's times.
    let (base, _) = explain(&[]);
    let (json, stderr) = explain(&[("NCCL_BUFFSIZE", "8388608")]);
    assert_eq!(json["pairs"], base["pairs"]);
    assert!(nccl_env(&json).is_empty());
    assert!(
        stderr.contains("NCCL_BUFFSIZE=8388608 not applied"),
        "{stderr}"
    );
}

#[test]
fn topo_json_shows_the_path_knobs() {
    let (json, _) = run_json(
        &[("NCCL_P2P_LEVEL", "PIX"), ("NCCL_ALGO", "ring")],
        &["topo", "--fixture", "hgx-h200-8", "--json"],
    );
    // Both are applied and shown; the JSON object lists names in order.
    assert_eq!(
        nccl_env(&json),
        pairs(&[("NCCL_ALGO", "ring"), ("NCCL_P2P_LEVEL", "PIX")])
    );
}

#[test]
fn audit_applies_the_logs_environment_not_the_shells() {
    // The capture ran with NCCL_NVLS_ENABLE=0 ("NCCL_NVLS_ENABLE set by environment to 0."); a NCCL_MAX_NCHANNELS
    // in planner's own environment is not what NCCL ran with, so the audit still finds the log's 24 channels.
    let (json, stderr) = run_json(
        &[("NCCL_MAX_NCHANNELS", "4")],
        &["audit", &golden("nccl-init-rank0.log"), "--json"],
    );
    assert_eq!(nccl_env(&json), pairs(&[("NCCL_NVLS_ENABLE", "0")]));
    // On stderr the audit keeps to its notices (the variables are the log's own lines).
    assert!(!stderr.contains("NCCL_* applied"), "{stderr}");
    let (plain, _) = run_json(&[], &["audit", &golden("nccl-init-rank0.log"), "--json"]);
    assert_eq!(json["differences"], Value::Array(vec![]));
    assert_eq!(json["differences"], plain["differences"]);
}

/// `explain --nccl-calls --json` and `diff --against --json` carry the variables their models ran under.
#[test]
fn nccl_calls_and_version_diff_json_carry_nccl_env() {
    for args in [
        &[
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--nccl-calls",
            "--sweep",
            "1M..2M",
            "--json",
        ][..],
        &[
            "diff",
            "--fixture",
            "hgx-h100-8",
            "--nccl-version",
            "2.22",
            "--against",
            "2.28",
            "--sweep",
            "1M..4M",
            "--coll",
            "all-reduce",
            "--json",
        ][..],
    ] {
        let out = planner()
            .args(args)
            .env("NCCL_MAX_NCHANNELS", "4")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["nccl_env"]["NCCL_MAX_NCHANNELS"], "4", "{args:?}");
        assert_eq!(v["schema_version"], 1, "{args:?}");
    }
}
