//! `verify --backend nccl --tuner PLAN.json`: one more NCCL run with the
//! planner tuner plugin (the workspace crate `tuner/`) steering NCCL's free
//! choice with the plan, measured as the `tuned` row beside NCCL's own `auto`
//! row. The child gets `NCCL_TUNER_PLUGIN=<plugin>` and
//! `PLANNER_TUNER_PLAN=<plan>`; every other child of the run gets
//! `NCCL_TUNER_PLUGIN=none`, so `auto` is NCCL alone.

use crate::error::{Error, Result};
use crate::result_file::TunerRecord;
use nccl_tuner_planner::plan::{fnv1a64_hex, Plan};
use std::path::{Path, PathBuf};

pub(crate) use crate::nccl::tuner_plugin::PLUGIN_FILE;

/// A checked `--tuner` request: the plan parses, the plugin exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TunerSetup {
    /// The plan file, absolute (the child may not share our directory).
    pub(crate) plan: PathBuf,
    /// FNV-1a 64 of the plan's bytes, 16 hex digits (the hash `planner tune`
    /// writes into plan provenance for its source files).
    pub(crate) plan_hash: String,
    /// Rules in the plan.
    pub(crate) rules: usize,
    /// The plugin, absolute.
    pub(crate) plugin: PathBuf,
}

impl TunerSetup {
    /// Check `--tuner PLAN` and find the plugin: `--tuner-plugin PATH`, else
    /// `libnccl_tuner_planner.so` beside `exe` (the planner binary) or in its
    /// `../lib` (the wheel). Bad input (exit 2, one line naming the file) when the plan
    /// cannot be read or is not a valid plan, or the plugin is not there.
    pub(crate) fn resolve(plan: &str, plugin: Option<&str>, exe: &Path) -> Result<TunerSetup> {
        // Capped like every input file (limits::MAX_INPUT_FILE_BYTES); the message names the flag too.
        let text = crate::units::read_input_file(plan).map_err(|e| {
            let why = e.message();
            let why = why
                .strip_prefix(plan)
                .and_then(|w| w.strip_prefix(": "))
                .unwrap_or(why);
            Error::bad_input(format!("--tuner {plan}: cannot read the plan: {why}"))
        })?;
        let parsed = Plan::from_json(&text).map_err(|e| {
            Error::bad_input(format!("--tuner {plan}: not a valid tuner plan: {e}"))
        })?;
        let plugin = match plugin {
            Some(path) => {
                let path = PathBuf::from(path);
                if let Some(why) = crate::fsio::not_a_regular_file(&path) {
                    return Err(Error::bad_input(format!(
                        "--tuner-plugin {}: {why}",
                        path.display()
                    )));
                }
                path
            }
            None => crate::nccl::tuner_plugin::find_installed(exe).ok_or_else(|| {
                let dir = exe.parent().unwrap_or_else(|| Path::new("."));
                Error::bad_input(format!(
                    "--tuner: no {PLUGIN_FILE} next to the planner binary in {} nor in its ../lib; build it with \
                     `cargo build --release` (workspace member tuner/), install the wheel, or give --tuner-plugin PATH",
                    dir.display()
                ))
            })?,
        };
        Ok(TunerSetup {
            plan: absolute(Path::new(plan)),
            plan_hash: fnv1a64_hex(text.as_bytes()),
            rules: parsed.rules.len(),
            plugin: absolute(&plugin),
        })
    }

    /// The result file's record, with what the log said.
    pub(crate) fn record(&self, plugin_log: Vec<String>) -> TunerRecord {
        TunerRecord {
            plan_path: self.plan.display().to_string(),
            plan_hash: self.plan_hash.clone(),
            plugin_path: self.plugin.display().to_string(),
            plugin_log,
        }
    }
}

/// `path` made absolute against the current directory (not resolving links:
/// the path the user named is the one recorded).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid plan: one rule, Ring/LL for AllReduce up to 64 KiB on 2 ranks.
    const PLAN: &str = r#"{"format":"planner-tuner-plan","version":1,
 "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"test","nccl_version":"2.28.3",
               "topology_hash":null,"source_kind":"verify","source_file":"verify.json",
               "source_hash":"0000000000000000","margin_percent":2.0},
 "rules":[{"collective":"AllReduce","n_ranks":2,"n_nodes":1,"min_bytes":0,"max_bytes":65535,
           "algorithm":"Ring","protocol":"LL","channels":null}]}"#;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("planner-tuner-setup-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_plugin_is_found_next_to_the_binary_or_named() {
        let dir = scratch("found");
        let plan = dir.join("plan.json");
        std::fs::write(&plan, PLAN).unwrap();
        std::fs::write(dir.join(PLUGIN_FILE), b"\x7fELF").unwrap();
        let exe = dir.join("planner");
        let setup = TunerSetup::resolve(plan.to_str().unwrap(), None, &exe).unwrap();
        assert_eq!(setup.plugin, dir.join(PLUGIN_FILE));
        assert_eq!(setup.rules, 1);
        assert_eq!(setup.plan_hash, fnv1a64_hex(PLAN.as_bytes()));
        assert_eq!(setup.plan_hash.len(), 16);
        // --tuner-plugin wins over the directory of the binary
        let other = dir.join("other.so");
        std::fs::write(&other, b"x").unwrap();
        let named = TunerSetup::resolve(
            plan.to_str().unwrap(),
            Some(other.to_str().unwrap()),
            Path::new("/nonexistent/planner"),
        )
        .unwrap();
        assert_eq!(named.plugin, other);
        let record = named.record(vec!["Successfully loaded external tuner plugin x".into()]);
        assert_eq!(record.plan_hash, setup.plan_hash);
        assert!(record.plan_path.ends_with("plan.json"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_plans_and_missing_plugins_are_input_errors() {
        let dir = scratch("bad");
        let plan = dir.join("plan.json");
        std::fs::write(&plan, PLAN).unwrap();
        let exe = dir.join("planner"); // no plugin beside it
        let err = TunerSetup::resolve(plan.to_str().unwrap(), None, &exe).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains(PLUGIN_FILE), "{err}");
        assert!(err.to_string().contains("--tuner-plugin"), "{err}");
        let err = TunerSetup::resolve(plan.to_str().unwrap(), Some("/nonexistent/x.so"), &exe)
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("/nonexistent/x.so"), "{err}");

        std::fs::write(dir.join(PLUGIN_FILE), b"x").unwrap();
        let err = TunerSetup::resolve("/nonexistent/plan.json", None, &exe).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("/nonexistent/plan.json"), "{err}");
        // a plan with a misspelt field names it
        let garbled = dir.join("garbled.json");
        std::fs::write(&garbled, PLAN.replace("\"channels\"", "\"chanels\"")).unwrap();
        let err = TunerSetup::resolve(garbled.to_str().unwrap(), None, &exe).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("garbled.json"), "{err}");
        assert!(err.to_string().contains("rules[0]"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
