//! Helpers shared by every integration test.

use assert_cmd::Command;

/// The binary with a clean NCCL environment: every NCCL_* variable of the caller's shell is removed (and every one
/// the model reads, set or not), so the shell cannot change what a test sees.
pub fn planner() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("NCCL_") {
            cmd.env_remove(var);
        }
    }
    for var in planner::nccl_env::VARIABLES {
        cmd.env_remove(var);
    }
    cmd
}

/// `a` and `b` agree within the relative tolerance `rel_tol` (of the larger magnitude, at least 1).
pub fn close(a: f64, b: f64, rel_tol: f64) -> bool {
    (a - b).abs() <= rel_tol * a.abs().max(b.abs()).max(1.0)
}

/// A file of the real 2x H200 capture (NCCL's own dumps, copied from shared/captures into tests/golden).
pub fn golden(name: &str) -> String {
    format!(
        "{}/tests/golden/h200x2-nvswitch-vm/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `planner ARGS`, which must succeed: its stdout (stderr in the failure message).
pub fn run_ok(args: &[&str]) -> String {
    let out = planner().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The process exited with `code` (stderr in the failure message).
pub fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The process's stdout as JSON (stdout and stderr in the failure message).
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
