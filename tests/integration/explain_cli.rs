//! `planner explain` end to end on the capture (topology dump + NCCL's own
//! graph dump), and its bad inputs (exit 2, one clear line).

use crate::common::golden;
use assert_cmd::Command;

/// `planner explain --topo topo.xml --graph graph.xml ...` with a clean NCCL environment.
fn explain(args: &[&str]) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    for var in planner::nccl_env::VARIABLES {
        cmd.env_remove(var);
    }
    cmd.env_remove("NCCL_CROSS_NIC");
    cmd.args([
        "explain",
        "--topo",
        &golden("topo.xml"),
        "--graph",
        &golden("graph.xml"),
    ]);
    cmd.args(args);
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn bad_input(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn nccl_table_matches_the_capture_log_with_nccl_nvls_enable_0() {
    let log = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let start = log.find("NCCL INFO   Algorithm   |").unwrap();
    let expected: Vec<&str> = log[start..]
        .lines()
        .map(|l| l.strip_prefix("NCCL INFO ").unwrap())
        .take_while(|l| !l.starts_with("24 coll channels"))
        .collect();
    let out =
        stdout(explain(&["--nccl-table", "--nccl-version", "2.28"]).env("NCCL_NVLS_ENABLE", "0"));
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn nccl_calls_match_the_capture_choices() {
    let expected = std::fs::read_to_string(golden("nccl-allreduce-choices.txt")).unwrap();
    let out = stdout(&mut explain(&[
        "--nccl-calls",
        "--sweep",
        "4..4G",
        "--nvls",
        "off",
        "--nccl-version",
        "2.28",
    ]));
    assert_eq!(out, expected);
}

#[test]
fn explain_ranks_pairs_and_explains_masks() {
    let out = stdout(&mut explain(&["--size", "1M", "--nccl-version", "2.28"]));
    // Winner first and marked: Ring/LL 7.8 + 1048576/141000 = 15.24 µs.
    let first = out.lines().find(|l| l.starts_with("| >")).unwrap();
    assert!(
        first.contains("Ring") && first.contains("LL") && first.contains("15.24"),
        "{first}"
    );
    assert!(
        out.contains("NCCL picks Ring/LL on 24 channels x 512 threads: 15.24 us"),
        "{out}"
    );
    assert!(
        out.contains("PAT: NCCL has no PAT kernel for AllReduce"),
        "{out}"
    );
    assert!(out.contains("needs a CollNet (SHARP) network"), "{out}");
}

#[test]
fn explain_json_has_stable_fields() {
    let out = stdout(&mut explain(&["--size", "16M", "--json", "--nvls", "off"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["collective"], "AllReduce");
    assert_eq!(v["size_bytes"], 16777216);
    assert_eq!(v["winner"]["algorithm"], "Ring");
    assert_eq!(v["winner"]["protocol"], "Simple");
    assert_eq!(v["pairs"].as_array().unwrap().len(), 21);
    let masked = v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["algorithm"] == "NVLS" && p["protocol"] == "Simple")
        .unwrap();
    assert_eq!(masked["usable"], false);
    assert_eq!(masked["masked_by"][0], "NVLS: disabled by --nvls off");
}

#[test]
fn sweep_prints_bands_and_exact_crossover() {
    let out = stdout(&mut explain(&[
        "--sweep",
        "8..4G",
        "--nccl-version",
        "2.28",
    ]));
    assert!(out.contains("8 B - 1 MiB: Ring/LL, 1-24 channels"), "{out}");
    assert!(
        out.contains("2 MiB - 4 GiB: Ring/Simple, 24 channels"),
        "{out}"
    );
    // 7.8 + n/141000 = 15.2 + n/360000  ->  n = 7.4 / (1/141000 - 1/360000) = 1715180
    assert!(
        out.contains("Ring/LL -> Ring/Simple at 1715180 bytes"),
        "{out}"
    );
}

#[test]
fn plot_writes_an_svg() {
    let dir = std::env::temp_dir().join(format!("planner-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ar.svg");
    explain(&["--plot", path.to_str().unwrap(), "--sweep", "8..1G"])
        .assert()
        .success();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    assert!(svg.contains("Ring/LL") && svg.contains("Tree/Simple"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ops_aggregate_into_one_choice_and_spread_over_channels() {
    // 4 x 64 KiB all-reduce in one group: 256 KiB aggregate -> Ring/LL on 24 channels;
    // 2.30 scheduler: 32 KiB cells of traffic, 87392 bytes per channel.
    let out = stdout(&mut explain(&[
        "--size",
        "64K",
        "--ops",
        "4",
        "--nccl-calls",
        "--nvls",
        "off",
    ]));
    assert_eq!(
        out,
        "AllReduce: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..5}\n\
         AllReduce: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={5..10}\n\
         AllReduce: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={10..15}\n\
         AllReduce: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={16..21}\n"
    );
}

#[test]
fn bad_inputs_exit_2_with_one_clear_line() {
    let e = bad_input(&mut explain(&["--algo", "rong"]));
    assert!(
        e.contains("NCCL_ALGO: Unrecognized element token \"rong\""),
        "{e}"
    );
    let e = bad_input(&mut explain(&["--proto", "LL256"]));
    assert!(
        e.contains("NCCL_PROTO: Unrecognized element token \"LL256\""),
        "{e}"
    );
    let e = bad_input(&mut explain(&["--algo", "nvls", "--nvls", "off"]));
    assert!(
        e.contains("no algorithm/protocol available for function AllReduce"),
        "{e}"
    );
    let e = bad_input(&mut explain(&["--size", "0"]));
    assert!(e.contains("invalid size '0'"), "{e}");
    let e = bad_input(&mut explain(&["--size", "2T"]));
    assert!(e.contains("2^40"), "{e}");
    let e = bad_input(&mut explain(&["--sweep", "8..2T"]));
    assert!(e.contains("2^40"), "{e}");
    let e = bad_input(&mut explain(&["--coll", "all-to-all"]));
    assert!(e.contains("unknown collective 'all-to-all'"), "{e}");
    let e = bad_input(&mut explain(&["--ops", "0"]));
    assert!(e.contains("invalid --ops 0"), "{e}");
    // Every family from 2.18 is built in; older ones are not.
    let e = bad_input(&mut explain(&["--nccl-version", "2.17"]));
    assert!(e.contains("no tuning table for NCCL 2.17"), "{e}");
    let e = bad_input(explain(&[]).env("NCCL_PROTO", "^LL,Simple,LL128"));
    assert!(e.contains("no algorithm/protocol available"), "{e}");
}

#[test]
fn bad_tuning_table_file_names_file_and_key() {
    let dir = std::env::temp_dir().join(format!("planner-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = include_str!("../../tuning-tables/nccl-2.28.json").replace(
        "\"tree_ll_bw_divisor\": 3.8,",
        "\"tree_ll_bw_divisor\": -3.8,",
    );
    let path = dir.join("bad.json");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap().to_string();
    let e = bad_input(&mut explain(&["--tuning-table", &p]));
    assert!(
        e.contains(&format!(
            "{p}: 'factors.tree_ll_bw_divisor' = -3.8 is negative"
        )),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nccl_table_json_lists_every_entry_with_nccl_names() {
    let out = stdout(&mut explain(&[
        "--nccl-table",
        "--json",
        "--nvls",
        "off",
        "--nccl-version",
        "2.28",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 5 * 7 * 3);
    let ring_ll = entries
        .iter()
        .find(|e| {
            e["collective"] == "AllReduce" && e["algorithm"] == "Ring" && e["protocol"] == "LL"
        })
        .unwrap();
    // min(llMaxBw 141, 12*30*0.5 = 180) * 2/2 = 141; latency 6.6 + 2*0.6 = 7.8
    assert_eq!(ring_ll["bandwidth_gbs"], 141.0);
    assert!((ring_ll["latency_us"].as_f64().unwrap() - 7.8).abs() < 1e-5);
    assert_eq!(ring_ll["thread_threshold"], 16);
    assert_eq!(ring_ll["masked_by"].as_array().unwrap().len(), 0);
    let calls = stdout(&mut explain(&[
        "--nccl-calls",
        "--json",
        "--size",
        "2M",
        "--nvls",
        "off",
        "--nccl-version",
        "2.28",
    ]));
    let v: serde_json::Value = serde_json::from_str(&calls).unwrap();
    assert_eq!(v["calls"][0]["choice"]["algorithm"], "Ring");
    assert_eq!(v["calls"][0]["choice"]["protocol"], "Simple");
    assert_eq!(v["calls"][0]["tasks"][0]["channel_hi"], 23);
}

#[test]
fn channel_spreading_changed_in_2_30() {
    // 2 MiB all-reduce, Ring/Simple on 24 channels, traffic 2*2 MiB = 4194304.
    // 2.28: 16 KiB cells: cell 8192 B (256 cells, 16384 traffic each), per channel
    //   max(16384, 4194304/24 = 174762): 11 cells first, 22 x 11 middle, 3 last -> {0..23}.
    // 2.30: 32 KiB cells: cell 16384 B (128 cells, 32768 traffic), per channel
    //   roundup16(174762) = 174768: 6 first, 20 x 6 middle, 2 last -> {0..21}.
    for (version, hi) in [("2.28", 23), ("2.30", 21)] {
        let out = stdout(&mut explain(&[
            "--nccl-calls",
            "--size",
            "2M",
            "--nvls",
            "off",
            "--nccl-version",
            version,
        ]));
        assert_eq!(
            out,
            format!("AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..{hi}}}\n"),
            "{version}"
        );
    }
}

#[test]
fn all_gather_sizes_follow_nccl_tests() {
    // 1 MiB all-gather on 2 ranks: each rank sends 512 KiB, NCCL's line shows 524288 bytes,
    // the model costs 1 MiB. Ring/LL for AllGather: lat 6.6 + 1*0.6 = 7.2, bw 282:
    // 7.2 + 1048576/282000 = 10.92 vs Simple 11.8 + 1048576/720000 = 13.26 -> LL.
    let out = stdout(&mut explain(&[
        "--coll",
        "all-gather",
        "--size",
        "1M",
        "--nccl-calls",
        "--nvls",
        "off",
        "--nccl-version",
        "2.28",
    ]));
    assert_eq!(
        out,
        "AllGather: 524288 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}\n"
    );
    let e = bad_input(&mut explain(&["--coll", "all-gather", "--size", "16"]));
    assert!(e.contains("too small"), "{e}");
}

#[test]
fn the_planners_own_search_reproduces_the_capture_table_and_choices() {
    // No --graph: topology dump -> planner's search and connection -> model.
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    for var in planner::nccl_env::VARIABLES {
        cmd.env_remove(var);
    }
    cmd.env("NCCL_NVLS_ENABLE", "0");
    cmd.args([
        "explain",
        "--topo",
        &golden("topo.xml"),
        "--nccl-version",
        "2.28",
        "--nccl-table",
    ]);
    let log = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let start = log.find("NCCL INFO   Algorithm   |").unwrap();
    let expected: Vec<&str> = log[start..]
        .lines()
        .map(|l| l.strip_prefix("NCCL INFO ").unwrap())
        .take_while(|l| !l.starts_with("24 coll channels"))
        .collect();
    let out = stdout(&mut cmd);
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);

    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    for var in planner::nccl_env::VARIABLES {
        cmd.env_remove(var);
    }
    cmd.env("NCCL_NVLS_ENABLE", "0");
    cmd.args([
        "explain",
        "--topo",
        &golden("topo.xml"),
        "--nccl-version",
        "2.28",
    ]);
    cmd.args(["--nccl-calls", "--sweep", "4..4G"]);
    let expected = std::fs::read_to_string(golden("nccl-allreduce-choices.txt")).unwrap();
    assert_eq!(stdout(&mut cmd), expected);
}
