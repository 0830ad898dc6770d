//! Issue 26, a user's first hour (round 2), from the outside: no silent flags (`--mnnvl` where it changes nothing),
//! the bytes that run printed, counts in the singular, bad input refused before the probe, short `--help` with the
//! defaults, NVLS reasons that apply, and the 18-tray NVL72 domain without planner's one-tray kernels.

use crate::common::{assert_exit, planner};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--mnnvl on|off` on a topology whose GPUs have no NVLink fabric identity would change nothing (NCCL's
/// ncclMnnvlCheck returns without MNNVL there): every command taking the flag refuses it with exit 2, naming why.
#[test]
fn mnnvl_without_fabric_identity_is_refused_on_every_command() {
    let commands: [&[&str]; 6] = [
        &["explain", "--size", "16M"],
        &["channels"],
        &["topo"],
        &["expect", "--size", "16M", "--coll", "all-reduce"],
        &[
            "diff",
            "--nccl-version",
            "2.22",
            "--against",
            "2.28",
            "--size",
            "1M",
        ],
        &[
            "calibrate",
            "bench/results/verify-h200x2-final-2026-11-30/verify.json",
        ],
    ];
    for args in commands {
        for flag in ["on", "off"] {
            let out = planner()
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(args)
                .args(["--fixture", "hgx-h100-8", "--nodes", "2", "--mnnvl", flag])
                .output()
                .unwrap();
            assert_exit(&out, 2);
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains(&format!(
                    "--mnnvl {flag}: fixture hgx-h100-8 has no GPU with an NVLink fabric identity"
                )),
                "{args:?}: {err}"
            );
        }
    }
    // Where the GPUs have one, the flag acts: 18 trays through their NICs instead of one NVLink domain.
    let out = planner()
        .args([
            "channels",
            "--fixture",
            "gb200-nvl72-tray",
            "--nodes",
            "18",
            "--mnnvl",
            "off",
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        !stdout(&out).contains("MNNVL: 18 OS nodes"),
        "{}",
        stdout(&out)
    );
}

/// `--size 1001` runs 1000 bytes (250 float32 elements, as nccl-tests): explain's header says so, and expect, diff
/// and verify say on stderr what runs.
#[test]
fn a_rounded_size_prints_the_bytes_that_run() {
    let out = planner()
        .args(["explain", "--fixture", "hgx-h100-8", "--size", "1001"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let first = stdout(&out).lines().next().unwrap().to_string();
    assert!(
        first.starts_with(
            "AllReduce of 1000 B (1001 B rounded down to whole float32 elements): 8 ranks on 1 node, 24 channels"
        ),
        "{first}"
    );
    // All-gather: 1001 B over 8 ranks is 31 floats... each rank's share rounded down to 16 B: 8 x 112 B = 896 B.
    let out = planner()
        .args([
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--size",
            "1001",
            "--coll",
            "all-gather",
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with(
            "AllGather of 896 B (1001 B rounded down to a multiple of 16 B per rank): 8 ranks on 1 node"
        ),
        "{}",
        stdout(&out)
    );
    // A size that needs no rounding is printed as before.
    let out = planner()
        .args(["explain", "--fixture", "hgx-h100-8", "--size", "1000"])
        .output()
        .unwrap();
    assert!(
        stdout(&out).starts_with("AllReduce of 1000 B: 8 ranks"),
        "{}",
        stdout(&out)
    );
    for args in [
        &[
            "expect",
            "--fixture",
            "hgx-h100-8",
            "--coll",
            "all-reduce",
            "--size",
            "1001",
        ][..],
        &[
            "diff",
            "--fixture",
            "hgx-h100-8",
            "--nccl-version",
            "2.22",
            "--against",
            "2.28",
            "--size",
            "1001",
        ],
    ] {
        let out = planner().args(args).output().unwrap();
        assert_exit(&out, 0);
        assert!(
            stderr(&out)
                .contains("planner: runs 1000 B (1001 B rounded down to whole float32 elements)"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = planner()
        .args([
            "expect",
            "--fixture",
            "hgx-h100-8",
            "--coll",
            "all-reduce",
            "--size",
            "1001",
        ])
        .output()
        .unwrap();
    let row = stdout(&out).lines().last().unwrap().to_string();
    assert!(row.trim_start().starts_with("1000          250"), "{row}");
    // verify (fake backend): the rows are of the 1000 bytes that ran.
    let dir = std::env::temp_dir().join(format!("planner-first-hour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.json");
    let out = planner()
        .env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DELAY_MS", "1")
        .env_remove("PLANNER_FAKE_FAULT")
        .args([
            "verify",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--backend",
            "nccl",
            "--pair",
            "Ring/LL",
        ])
        .args(["--size", "1001", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("planner: runs 1000 B (1001 B rounded down to whole float elements)"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("| 1000 B | Ring/LL |"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts take the singular for one ("1 node", "1 rank", "1 channel", "1 constant"), from one helper.
#[test]
fn one_is_singular() {
    let text = stdout(
        &planner()
            .args(["explain", "--fixture", "hgx-h100-8", "--size", "16M"])
            .output()
            .unwrap(),
    );
    assert!(
        text.starts_with("AllReduce of 16 MiB: 8 ranks on 1 node, 24 channels"),
        "{text}"
    );
    let text = stdout(
        &planner()
            .args([
                "channels",
                "--topo",
                "tests/integration/logs/nccl-tests-329-t600-topo.xml",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap(),
    );
    assert!(text.contains(": 1 GPU x 1 node = 1 rank; graphs"), "{text}");
    let text = stdout(
        &planner()
            .args([
                "diff",
                "--fixture",
                "hgx-h100-8",
                "--nccl-version",
                "2.22",
                "--against",
                "2.28",
            ])
            .args(["--coll", "all-reduce"])
            .output()
            .unwrap(),
    );
    assert!(
        text.contains("2.23 -> 2.24 (1 constant, 3 rules)"),
        "{text}"
    );
    for plural in [
        "(s)",
        "1 ranks",
        "1 nodes",
        "1 channels",
        "1 constants",
        "1 rules",
    ] {
        assert!(!text.contains(plural), "{plural}: {text}");
    }
    assert_eq!(planner::units::count(1, "rank"), "1 rank");
    assert_eq!(planner::units::count(0, "rank"), "0 ranks");
    assert_eq!(planner::units::count(72, "rank"), "72 ranks");
}

/// A bad flag or file is refused before the topology is probed: the error is the only line on stderr, never after
/// "no GPU found" (these run without --fixture, so on this machine they would probe and fall back).
#[test]
fn bad_input_is_refused_before_the_probe() {
    let dir = std::env::temp_dir().join(format!("planner-preflight-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "not a calibration").unwrap();
    let garbage = garbage.to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["explain", "--size", "3"],
            "size 3 B is too small".into(),
        ),
        (
            vec!["explain", "--algo", "bogus"],
            "--algo bogus: NCCL_ALGO: Unrecognized element token".into(),
        ),
        (
            vec!["explain", "--proto", "bogus"],
            "--proto bogus: NCCL_PROTO: Unrecognized element token".into(),
        ),
        (vec!["explain", "--ops", "0"], "invalid --ops 0".into()),
        (
            vec!["explain", "--sweep", "8..1M", "--ops", "0"],
            "invalid --ops 0".into(),
        ),
        (
            vec!["explain", "--plot", "/nonexistent-planner-dir/time.svg"],
            "/nonexistent-planner-dir/time.svg: cannot write".into(),
        ),
        (
            vec!["explain", "--calibration", &garbage],
            format!("{garbage}:1:"),
        ),
        (
            vec!["expect", "--size", "3"],
            "size 3 B is too small".into(),
        ),
        (vec!["expect", "--algo", "bogus"], "--algo bogus".into()),
        (
            vec!["expect", "--csv", "/nonexistent-planner-dir/rows.csv"],
            "/nonexistent-planner-dir/rows.csv: cannot write".into(),
        ),
        (
            vec!["expect", "--params", "/nonexistent-planner-dir"],
            "--params /nonexistent-planner-dir".into(),
        ),
        (
            vec!["topo", "--xml", "-o", "/nonexistent-planner-dir/t.xml"],
            "/nonexistent-planner-dir/t.xml: cannot write".into(),
        ),
        (
            vec!["channels", "--graph", "/nonexistent-planner-dir/g.xml"],
            "/nonexistent-planner-dir/g.xml".into(),
        ),
        (
            vec![
                "diff",
                "--nccl-version",
                "2.22",
                "--against",
                "2.28",
                "--size",
                "3",
            ],
            "size 3 B is too small".into(),
        ),
    ];
    for (args, says) in cases {
        let out = planner().args(&args).output().unwrap();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("planner: error: "), "{args:?}: {err}");
        assert!(err.contains(&says), "{args:?}: {err}");
        assert!(!err.contains("no GPU found"), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--help` is clap's short layout on every command (one line per flag: `tune` was 62 lines), and the size flags
/// state their defaults.
#[test]
fn help_is_short_and_states_the_size_defaults() {
    let commands = [
        "topo",
        "fixtures",
        "explain",
        "expect",
        "check",
        "audit",
        "calibrate",
        "channels",
        "verify",
        "run",
        "tune",
        "diff",
        "doctor",
        "env",
    ];
    for c in commands {
        let long = stdout(&planner().args([c, "--help"]).output().unwrap());
        let short = stdout(&planner().args([c, "-h"]).output().unwrap());
        assert_eq!(long, short, "{c}: --help is not the short layout");
        assert!(!long.contains("see more with '--help'"), "{c}");
    }
    for (c, size, sweep) in [
        ("explain", "[default: 16M", "[default: one size, --size]"),
        ("run", "[default: 16M]", "[default: one size, --size]"),
        ("verify", "[default: the --sweep]", "[default: 8..4G]"),
        ("expect", "[default: the --sweep]", "[default: 8..8G]"),
        ("diff", "[default: the --sweep]", "[default: 8..4G]"),
    ] {
        let help = stdout(&planner().args([c, "--help"]).output().unwrap());
        let line = |flag: &str| {
            help.lines()
                .find(|l| l.trim_start().starts_with(flag))
                .unwrap_or_else(|| panic!("{c}: no {flag} line"))
                .to_string()
        };
        assert!(line("--size").contains(size), "{c}: {}", line("--size"));
        assert!(line("--sweep").contains(sweep), "{c}: {}", line("--sweep"));
    }
}

/// A 16-rank job over 2 nodes of hgx-h100-8 can run NVLS multicast kernels on neither: the reason is that they stay
/// within one node (text and JSON alike), not "3+ ranks"; "3+ ranks" is the reason on the 2-GPU machine.
#[test]
fn nvls_multicast_reasons_are_the_ones_that_apply() {
    for json in [false, true] {
        let mut cmd = planner();
        cmd.args([
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--nodes",
            "2",
            "--size",
            "1M",
        ]);
        if json {
            cmd.arg("--json");
        }
        let text = stdout(&cmd.output().unwrap());
        assert!(
            text.contains("needs NVLS multicast (within one node)"),
            "json {json}: {text}"
        );
        assert!(!text.contains("3+ ranks"), "json {json}: {text}");
    }
    let text = stdout(
        &planner()
            .args([
                "explain",
                "--fixture",
                "h200x2-nvswitch-vm",
                "--size",
                "1M",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert!(
        text.contains("\"needs NVLS multicast (3+ ranks)\""),
        "{text}"
    );
}

/// Across the 18 trays of one NVL72 domain planner's own kernels (peer memory of one tray) are not offered: the
/// sweep never names OneShot/LL as the fastest (it did: "fastest OneShot/LL 3.50-4.42 us"), and the single size
/// says why.
#[test]
fn nvl72_domain_does_not_offer_one_tray_kernels() {
    let sweep = stdout(
        &planner()
            .args([
                "explain",
                "--fixture",
                "gb200-nvl72-tray",
                "--nodes",
                "18",
                "--sweep",
                "8..4G",
            ])
            .output()
            .unwrap(),
    );
    assert!(sweep.contains("What is possible"), "{sweep}");
    assert!(!sweep.contains("OneShot"), "{sweep}");
    assert!(!sweep.contains("TwoShot"), "{sweep}");
    let single = stdout(
        &planner()
            .args([
                "explain",
                "--fixture",
                "gb200-nvl72-tray",
                "--nodes",
                "18",
                "--size",
                "8",
            ])
            .output()
            .unwrap(),
    );
    assert!(
        single.contains("none here: they are modelled within one tray's NVLink (peer memory), not across the 18 trays"),
        "{single}"
    );
}

/// A config in the layout of NCCL's example tuner (written for this test): Ring/LL up to 1 MiB on 2 ranks of one
/// node; from 1 MiB + 1 to 8 MiB Tree/Simple first and Ring/Simple second; above 8 MiB Tree/Simple.
const TUNER_CSV: &str =
    "# colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
allreduce,0,1048576,ring,ll,-1,1,2

allreduce,1048577,8388608,tree,simple,-1,-1,-1
allreduce , 1048577 , 8388608 , ring , simple , 4 , -1 , -1 , 1
allreduce,8388609,17179869184,tree,simple,-1,1,-1,-1,-1
";

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("planner-first-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tune --show FILE.conf` reads NCCL's example tuner CSV (what `tune --format nccl-csv` writes, and what users
/// already have): the rules in file order, -1 as "any" / "-", plain ASCII when piped; a bad line exits 2 naming it.
#[test]
fn tune_show_reads_nccl_example_tuner_csv() {
    let dir = scratch("csv");
    let conf = dir.join("nccl_tuner.conf");
    std::fs::write(&conf, TUNER_CSV).unwrap();
    let out = planner()
        .args(["tune", "--show"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains(": 4 rules, first match wins"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains("collective"))
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(
        rows[0].contains("| AllReduce  |         0 |     1048576 | 0 B - 1 MiB"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains("| Ring/LL     |        - |      1 |      2 |        any |     any |"),
        "{}",
        rows[0]
    );
    assert!(rows[2].starts_with("|    5 |"), "{}", rows[2]);
    assert!(
        rows[2].contains("| Ring/Simple |        4 |    any |    any |          1 |     any |"),
        "{}",
        rows[2]
    );
    let json: serde_json::Value = serde_json::from_slice(
        &planner()
            .args(["tune", "--show"])
            .arg(&conf)
            .arg("--json")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["rules"][3]["max_bytes"], 17179869184u64);
    assert_eq!(json["rules"][3]["algorithm"], "Tree");
    assert_eq!(json["rules"][1]["n_ranks"], -1);
    // What planner writes reads back: the same rules as the JSON plan made from the same run.
    let written = dir.join("written.conf");
    let out = planner()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tune",
            "--from",
            "bench/results/verify-h200x2-final-2026-11-30/verify.json",
        ])
        .args(["--format", "nccl-csv", "-o"])
        .arg(&written)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let back = stdout(
        &planner()
            .args(["tune", "--show"])
            .arg(&written)
            .output()
            .unwrap(),
    );
    assert!(back.contains(": 3 rules, first match wins"), "{back}");
    for pair in ["Ring/LL ", "Ring/LL128", "Ring/Simple"] {
        assert!(back.contains(pair), "{pair}: {back}");
    }
    // A line the plugin would misread is refused with its line.
    let bad = dir.join("bad.conf");
    std::fs::write(&bad, "allreduce,0,1024,ring,ll,-1,-1\n").unwrap();
    let out = planner()
        .args(["tune", "--show"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("bad.conf:1: 7 fields"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `planner audit` of a run that used NCCL's example tuner: the log names the config it loaded
/// (`TUNER/ExamplePlugin: Loaded N tuning configurations from PATH`), audit finds it beside the log, and compares
/// every per-call choice with the first matching rule. The log is the real 2x H200 capture with NCCL's per-call
/// lines (tests/golden), plus the two tuner lines; NCCL ran Ring/LL to 1 MiB and Ring/Simple from 2 MiB, so:
/// 4 B - 1 MiB (19 calls) follow rule 2; 2, 4, 8 MiB (3) follow the later rule 5 (as if Tree/Simple were masked);
/// 16 MiB - 4 GiB (9) differ from rule 6's Tree/Simple.
#[test]
fn audit_compares_a_run_with_its_example_tuner_config() {
    let dir = scratch("csvaudit");
    let mut log = std::fs::read_to_string(crate::common::golden("nccl-init-rank0.log")).unwrap();
    log.push_str("vm:1:1 [0] NCCL INFO TUNER/Plugin: Using Example (v4)\n");
    log.push_str("vm:1:1 [0] NCCL INFO TUNER/ExamplePlugin: Loaded 4 tuning configurations from /nonexistent/nccl_tuner.conf\n");
    for line in std::fs::read_to_string(crate::common::golden("nccl-allreduce-choices.txt"))
        .unwrap()
        .lines()
    {
        log.push_str(&format!("NCCL INFO {line}\n"));
    }
    let log_path = dir.join("run.log");
    std::fs::write(&log_path, &log).unwrap();
    std::fs::write(dir.join("nccl_tuner.conf"), TUNER_CSV).unwrap();
    let audit = |extra: &[&str]| {
        planner()
            .args(["audit", "--topo", &crate::common::golden("topo.xml")])
            .arg(&log_path)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = audit(&[]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("354 values, 0 differences") || text.contains(", 0 differences"),
        "{text}"
    );
    assert!(
        text.contains(": of 31 per-call lines NCCL ran, 0 fell in no rule's range (NCCL's own choice); NCCL ran the first matching rule's pair in 19, a later matching rule's in 3 (the first rule's pair masked), another pair in 9"),
        "{text}"
    );
    assert!(
        text.contains("| AllReduce  |   16777216 |         6 | Tree/Simple | Ring/Simple |"),
        "{text}"
    );
    assert!(
        stderr(&out).contains(": 9 differences between the log and the model and its tuner config"),
        "{}",
        stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&audit(&["--json"]).stdout).unwrap();
    assert_eq!(json["tuner_csv"]["followed"], 19);
    assert_eq!(json["tuner_csv"]["followed_later_rule"], 3);
    assert_eq!(
        json["tuner_csv"]["differences"].as_array().unwrap().len(),
        9
    );
    assert_eq!(json["tuner_csv"]["differences"][0]["rule_line"], 6);
    // --tuner-csv names the file itself; a config that keeps NCCL's choices everywhere gives no difference.
    let keep = dir.join("keep.conf");
    std::fs::write(
        &keep,
        "allreduce,0,1048576,ring,ll,-1,-1,-1\nallreduce,1048577,4294967296,ring,simple,-1,-1,-1\n",
    )
    .unwrap();
    let out = audit(&["--tuner-csv", &keep.to_string_lossy()]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("in 31, a later matching rule's in 0"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
