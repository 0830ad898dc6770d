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
        &["diff", "--nccl-version", "2.22", "--against", "2.28", "--size", "1M"],
        &["calibrate", "bench/results/verify-h200x2-final-2026-11-30/verify.json"],
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
                err.contains(&format!("--mnnvl {flag}: fixture hgx-h100-8 has no GPU with an NVLink fabric identity")),
                "{args:?}: {err}"
            );
        }
    }
    // Where the GPUs have one, the flag acts: 18 trays through their NICs instead of one NVLink domain.
    let out = planner()
        .args(["channels", "--fixture", "gb200-nvl72-tray", "--nodes", "18", "--mnnvl", "off"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(!stdout(&out).contains("MNNVL: 18 OS nodes"), "{}", stdout(&out));
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
        .args(["explain", "--fixture", "hgx-h100-8", "--size", "1001", "--coll", "all-gather"])
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
    assert!(stdout(&out).starts_with("AllReduce of 1000 B: 8 ranks"), "{}", stdout(&out));
    for args in [
        &["expect", "--fixture", "hgx-h100-8", "--coll", "all-reduce", "--size", "1001"][..],
        &["diff", "--fixture", "hgx-h100-8", "--nccl-version", "2.22", "--against", "2.28", "--size", "1001"],
    ] {
        let out = planner().args(args).output().unwrap();
        assert_exit(&out, 0);
        assert!(
            stderr(&out).contains("planner: runs 1000 B (1001 B rounded down to whole float32 elements)"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = planner()
        .args(["expect", "--fixture", "hgx-h100-8", "--coll", "all-reduce", "--size", "1001"])
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
        .args(["verify", "--fixture", "h200x2-nvswitch-vm", "--backend", "nccl", "--pair", "Ring/LL"])
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
    assert!(stdout(&out).contains("| 1000 B | Ring/LL |"), "{}", stdout(&out));
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
    assert!(text.starts_with("AllReduce of 16 MiB: 8 ranks on 1 node, 24 channels"), "{text}");
    let text = stdout(
        &planner()
            .args(["channels", "--topo", "tests/integration/logs/nccl-tests-329-t600-topo.xml"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap(),
    );
    assert!(text.contains(": 1 GPU x 1 node = 1 rank; graphs"), "{text}");
    let text = stdout(
        &planner()
            .args(["diff", "--fixture", "hgx-h100-8", "--nccl-version", "2.22", "--against", "2.28"])
            .args(["--coll", "all-reduce"])
            .output()
            .unwrap(),
    );
    assert!(text.contains("2.23 -> 2.24 (1 constant, 3 rules)"), "{text}");
    for plural in ["(s)", "1 ranks", "1 nodes", "1 channels", "1 constants", "1 rules"] {
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
        (vec!["explain", "--size", "3"], "size 3 B is too small".into()),
        (vec!["explain", "--algo", "bogus"], "--algo bogus: Unrecognized element token".into()),
        (vec!["explain", "--proto", "bogus"], "--proto bogus: Unrecognized element token".into()),
        (vec!["explain", "--ops", "0"], "invalid --ops 0".into()),
        (vec!["explain", "--sweep", "8..1M", "--ops", "0"], "invalid --ops 0".into()),
        (
            vec!["explain", "--plot", "/nonexistent-planner-dir/time.svg"],
            "/nonexistent-planner-dir/time.svg: cannot write".into(),
        ),
        (vec!["explain", "--calibration", &garbage], format!("{garbage}:1:")),
        (vec!["expect", "--size", "3"], "size 3 B is too small".into()),
        (vec!["expect", "--algo", "bogus"], "--algo bogus".into()),
        (
            vec!["expect", "--csv", "/nonexistent-planner-dir/rows.csv"],
            "/nonexistent-planner-dir/rows.csv: cannot write".into(),
        ),
        (vec!["expect", "--params", "/nonexistent-planner-dir"], "--params /nonexistent-planner-dir".into()),
        (
            vec!["topo", "--xml", "-o", "/nonexistent-planner-dir/t.xml"],
            "/nonexistent-planner-dir/t.xml: cannot write".into(),
        ),
        (vec!["channels", "--graph", "/nonexistent-planner-dir/g.xml"], "/nonexistent-planner-dir/g.xml".into()),
        (
            vec!["diff", "--nccl-version", "2.22", "--against", "2.28", "--size", "3"],
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
        "topo", "fixtures", "explain", "expect", "check", "audit", "calibrate", "channels", "verify", "run",
        "tune", "diff", "doctor", "env",
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
        cmd.args(["explain", "--fixture", "hgx-h100-8", "--nodes", "2", "--size", "1M"]);
        if json {
            cmd.arg("--json");
        }
        let text = stdout(&cmd.output().unwrap());
        assert!(text.contains("needs NVLS multicast (within one node)"), "json {json}: {text}");
        assert!(!text.contains("3+ ranks"), "json {json}: {text}");
    }
    let text = stdout(
        &planner()
            .args(["explain", "--fixture", "h200x2-nvswitch-vm", "--size", "1M", "--json"])
            .output()
            .unwrap(),
    );
    assert!(text.contains("\"needs NVLS multicast (3+ ranks)\""), "{text}");
}

/// Across the 18 trays of one NVL72 domain planner's own kernels (peer memory of one tray) are not offered: the
/// sweep never names OneShot/LL as the fastest (it did: "fastest OneShot/LL 3.50-4.42 us"), and the single size
/// says why.
#[test]
fn nvl72_domain_does_not_offer_one_tray_kernels() {
    let sweep = stdout(
        &planner()
            .args(["explain", "--fixture", "gb200-nvl72-tray", "--nodes", "18", "--sweep", "8..4G"])
            .output()
            .unwrap(),
    );
    assert!(sweep.contains("What is possible"), "{sweep}");
    assert!(!sweep.contains("OneShot"), "{sweep}");
    assert!(!sweep.contains("TwoShot"), "{sweep}");
    let single = stdout(
        &planner()
            .args(["explain", "--fixture", "gb200-nvl72-tray", "--nodes", "18", "--size", "8"])
            .output()
            .unwrap(),
    );
    assert!(
        single.contains("none here: they are modelled within one tray's NVLink (peer memory), not across the 18 trays"),
        "{single}"
    );
}
