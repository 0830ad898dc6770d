//! `planner env` (the exports that make NCCL load planner's tuner plugin with a plan) and the conflict with a tuner
//! already named by `NCCL_TUNER_PLUGIN`, in `env` and in `verify --tuner`; `tune` tables piped as plain ASCII.

use crate::common::{assert_exit, planner, stderr, with_scratch};
use std::path::PathBuf;

const PLAN: &str = r#"{"format":"planner-tuner-plan","version":1,
 "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"test","nccl_version":"2.28.3",
               "topology_hash":null,"source_kind":"verify","source_file":"verify.json",
               "source_hash":"0000000000000000","margin_percent":2.0},
 "rules":[{"collective":"AllReduce","n_ranks":2,"n_nodes":1,"min_bytes":1048576,"max_bytes":4194303,
           "algorithm":"Ring","protocol":"LL","channels":null}]}"#;

/// A directory with a plan and a stand-in plugin file (`env` only checks that the plugin exists).
fn scratch(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    with_scratch(|s| {
        let dir = s.subdir(name);
        let plan = dir.join("plan.json");
        std::fs::write(&plan, PLAN).unwrap();
        let plugin = dir.join("libnccl_tuner_planner.so");
        std::fs::write(&plugin, b"\x7fELF").unwrap();
        (dir, plan, plugin)
    })
}

#[test]
fn env_prints_the_two_exports_and_names_a_tuner_already_set() {
    let (_dir, plan, plugin) = scratch("exports");
    let args = [
        "env",
        "--plan",
        plan.to_str().unwrap(),
        "--tuner-plugin",
        plugin.to_str().unwrap(),
    ];
    let expected = format!(
        "export NCCL_TUNER_PLUGIN={}\nexport PLANNER_TUNER_PLAN={}\n",
        plugin.display(),
        plan.display()
    );
    let out = planner().args(args).output().unwrap();
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    assert_eq!(stderr(&out), "", "nothing to warn about");

    // A cloud image's own tuner: the same exports, and one line saying which tuner NCCL loads after them.
    let other = "/opt/amazon/ofi-nccl/lib/libnccl-tuner-ofi.so";
    let out = planner()
        .args(args)
        .env("NCCL_TUNER_PLUGIN", other)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("NCCL_TUNER_PLUGIN={other} is already set")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "it loads planner's {}, not {other}",
            plugin.display()
        )),
        "{err}"
    );
    // Already planner's: nothing to say.
    let out = planner()
        .args(args)
        .env("NCCL_TUNER_PLUGIN", &plugin)
        .output()
        .unwrap();
    assert_eq!(stderr(&out), "");
}

#[test]
fn env_refuses_a_missing_or_invalid_plan_and_plugin() {
    let (dir, plan, plugin) = scratch("bad");
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{\"format\": ").unwrap();
    let cases: [(&[&str], String); 3] = [
        (
            &[
                "--plan",
                "/nonexistent/plan.json",
                "--tuner-plugin",
                plugin.to_str().unwrap(),
            ],
            "--plan /nonexistent/plan.json: no such file".to_string(),
        ),
        (
            &[
                "--plan",
                garbage.to_str().unwrap(),
                "--tuner-plugin",
                plugin.to_str().unwrap(),
            ],
            format!("--plan {}: not a valid tuner plan", garbage.display()),
        ),
        (
            &[
                "--plan",
                plan.to_str().unwrap(),
                "--tuner-plugin",
                "/nonexistent/lib.so",
            ],
            "--tuner-plugin /nonexistent/lib.so: no such file".to_string(),
        ),
    ];
    for (args, expected) in cases {
        let out = planner().arg("env").args(args).output().unwrap();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains(&expected), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn verify_tuner_names_a_tuner_already_set() {
    let (_dir, plan, plugin) = scratch("verify");
    let other = "/opt/vendor/libnccl-tuner-vendor.so";
    let out = planner()
        .args(["verify", "--sweep", "8..64", "--backend", "nccl"])
        .args([
            "--tuner",
            plan.to_str().unwrap(),
            "--tuner-plugin",
            plugin.to_str().unwrap(),
        ])
        .env("NCCL_TUNER_PLUGIN", other)
        .output()
        .unwrap();
    // No GPU here (exit 1), or one (it runs); either way the note comes first, before any GPU work.
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "NCCL_TUNER_PLUGIN={other} is set, and NCCL loads only one tuner plugin: the tuned row loads planner's {}",
            plugin.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("so {other} is not measured")),
        "{err}"
    );
}

#[test]
fn tune_show_piped_prints_ascii_box_tables() {
    let (_dir, plan, _plugin) = scratch("show");
    let out = planner()
        .args(["tune", "--show", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let table: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    // +-----+ borders above, below and under the header (=), | between cells; no markdown |---| rule
    assert!(
        table
            .first()
            .is_some_and(|l| l.starts_with("+-") && l.ends_with("-+")),
        "{stdout}"
    );
    assert!(
        table
            .last()
            .is_some_and(|l| l.starts_with("+-") && l.ends_with("-+")),
        "{stdout}"
    );
    assert!(table.iter().any(|l| l.starts_with("+=")), "{stdout}");
    assert!(
        !table
            .iter()
            .any(|l| l.starts_with("|-") || l.starts_with("|:")),
        "{stdout}"
    );
    assert!(stdout.is_ascii(), "{stdout}");
    assert!(stdout.contains("| AllReduce  |"), "{stdout}");
    assert!(
        stdout.contains(": 1 rule, made by planner"),
        "one rule, not 1 rule(s): {stdout}"
    );
}
