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

/// A scratch directory of one test (as ripgrep's `Dir::new(test_name)`): uniquely named under the system's
/// temporary directory (the test's name, the process id and a counter), created empty, removed with everything in
/// it when dropped.
pub struct Scratch {
    dir: std::path::PathBuf,
}

impl Scratch {
    /// A fresh, empty directory for the test `test_name`.
    pub fn new(test_name: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name: String = test_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("planner-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    /// The directory itself.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The path of `name` inside it (not created).
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(name)
    }

    /// `contents` written to `name` inside it; the file's path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// The text of `name` inside it.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }

    /// A fresh, empty directory `name` inside it; its path.
    pub fn subdir(&self, name: &str) -> std::path::PathBuf {
        let path = self.path(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

thread_local! {
    /// The running test's scratch directory: libtest runs each test on a thread of its own (named after it), so
    /// this is one directory per test, removed when the test's thread ends. Named by the test's module only: a
    /// test's name (`..._not_an_error`) in a path it prints must not change what the test reads.
    static TEST_SCRATCH: Scratch = Scratch::new(
        std::thread::current()
            .name()
            .and_then(|n| n.split("::").next())
            .unwrap_or("test"),
    );
}

/// `f` on the running test's scratch directory (made on first use, removed when the test ends): for helpers that
/// hand back paths which must outlive them.
pub fn with_scratch<T>(f: impl FnOnce(&Scratch) -> T) -> T {
    TEST_SCRATCH.with(f)
}

/// NCCL's model of `input` under `env` with the built-in table of NCCL `family` ("2.30").
pub fn model_of(
    input: planner::model::ModelInput,
    env: planner::nccl_env::NcclEnv,
    family: &str,
) -> planner::model::Model {
    planner::model::Model::new(input, env, planner::model::table::builtin(family).unwrap()).unwrap()
}

/// A process's stdout as text.
pub fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A process's stderr as text.
pub fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_scratch_directory_is_unique_holds_what_is_written_and_goes_with_its_value() {
    let a = Scratch::new("common::scratch");
    let b = Scratch::new("common::scratch");
    assert_ne!(a.dir(), b.dir());
    let file = a.write("x.txt", "one\n");
    assert_eq!(file, a.path("x.txt"));
    assert_eq!(a.read("x.txt"), "one\n");
    assert!(!b.path("x.txt").exists());
    let sub = a.subdir("sub");
    assert!(sub.is_dir() && sub.starts_with(a.dir()));
    let gone = a.dir().to_path_buf();
    drop(a);
    assert!(!gone.exists(), "{} left behind", gone.display());
    assert!(b.dir().is_dir());
}
