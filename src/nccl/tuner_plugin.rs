//! Which tuner plugin NCCL loads, and where planner's own is installed.
//!
//! NCCL loads one tuner plugin per process (src/plugin/tuner.cc of NCCL 2.2x): `NCCL_TUNER_PLUGIN=none` loads none;
//! a value is opened as given (a path, or a name the loader finds), then, when it is a bare name (no `/`, not
//! `lib*.so`), as `libnccl-tuner-NAME.so`; unset, NCCL opens `libnccl-tuner.so`. Only when that fails does NCCL look
//! for a tuner inside the net plugin library (aws-ofi-nccl carries one). The environment wins over nccl.conf files.

use std::path::{Path, PathBuf};

/// The plugin's file name, as `cargo build --release` writes it into `target/release/` beside the planner binary,
/// and as the wheel installs it into `<env>/lib/` beside `<env>/bin/planner`.
pub(crate) const PLUGIN_FILE: &str = "libnccl_tuner_planner.so";

/// The places planner's plugin is looked for, relative to the planner binary `exe`, in order: its own directory
/// (`cargo build`, `cargo install` with the plugin copied beside it) and `../lib` (the Python wheel's data directory).
pub(crate) fn plugin_candidates(exe: &Path) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or_else(|| Path::new("."));
    let mut out = vec![dir.join(PLUGIN_FILE)];
    if let Some(prefix) = dir.parent() {
        out.push(prefix.join("lib").join(PLUGIN_FILE));
    }
    out
}

/// `NCCL_TUNER_PLUGIN` as this process has it (None when unset or not text). Read here, not in `NcclEnv`: it
/// steers no model choice, only which plugin a child NCCL loads.
pub(crate) fn from_process() -> Option<String> {
    std::env::var("NCCL_TUNER_PLUGIN").ok()
}

/// The first of `plugin_candidates` that is a file.
pub(crate) fn find_installed(exe: &Path) -> Option<PathBuf> {
    plugin_candidates(exe).into_iter().find(|p| p.is_file())
}

/// What NCCL loads given the `NCCL_TUNER_PLUGIN` already in the environment, once planner's plugin is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Not set: NCCL would open `libnccl-tuner.so` (or the net plugin's tuner); exporting planner's replaces that.
    Unset,
    /// Already planner's plugin (the same file).
    Same,
    /// `none`: NCCL runs without a tuner; exporting planner's enables it.
    NoneSet(String),
    /// Another tuner: only one loads, and after the export it is planner's, not this one.
    Other(String),
}

impl Conflict {
    /// Compare the environment's `NCCL_TUNER_PLUGIN` (`current`) with planner's plugin `ours`.
    pub(crate) fn of(current: Option<&str>, ours: &Path) -> Conflict {
        let Some(value) = current.filter(|v| !v.is_empty()) else {
            return Conflict::Unset;
        };
        if value.eq_ignore_ascii_case("none") {
            return Conflict::NoneSet(value.to_string());
        }
        let same = Path::new(value) == ours
            || std::fs::canonicalize(value)
                .ok()
                .zip(std::fs::canonicalize(ours).ok())
                .is_some_and(|(a, b)| a == b);
        if same {
            Conflict::Same
        } else {
            Conflict::Other(value.to_string())
        }
    }

    /// One line for stderr: which tuner NCCL loads, and with what the user replaces what; None when nothing changes.
    pub fn describe(&self, ours: &Path) -> Option<String> {
        let ours = ours.display();
        match self {
            Conflict::Unset | Conflict::Same => None,
            Conflict::NoneSet(v) => Some(format!(
                "NCCL_TUNER_PLUGIN={v} is set (no tuner); with these exports NCCL loads planner's {ours} instead"
            )),
            Conflict::Other(v) => Some(format!(
                "NCCL_TUNER_PLUGIN={v} is already set, and NCCL loads only one tuner plugin: the one NCCL_TUNER_PLUGIN \
                 names. With these exports it loads planner's {ours}, not {v}; leave NCCL_TUNER_PLUGIN as it is to keep {v}"
            )),
        }
    }
}

/// `value` as one shell word: unquoted when it has only safe characters, else in single quotes.
pub(crate) fn shell_word(value: &str) -> String {
    let safe = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if safe {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_found_beside_the_binary_or_in_the_wheels_lib() {
        let root =
            std::env::temp_dir().join(format!("planner-tuner-plugin-{}", std::process::id()));
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let exe = bin.join("planner");
        assert_eq!(
            plugin_candidates(&exe),
            vec![bin.join(PLUGIN_FILE), root.join("lib").join(PLUGIN_FILE)]
        );
        assert_eq!(find_installed(&exe), None);
        // the wheel's layout: <env>/bin/planner, <env>/lib/libnccl_tuner_planner.so
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("lib").join(PLUGIN_FILE), b"").unwrap();
        assert_eq!(
            find_installed(&exe),
            Some(root.join("lib").join(PLUGIN_FILE))
        );
        // cargo's layout wins: target/release/planner beside target/release/libnccl_tuner_planner.so
        std::fs::write(bin.join(PLUGIN_FILE), b"").unwrap();
        assert_eq!(find_installed(&exe), Some(bin.join(PLUGIN_FILE)));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_existing_tuner_is_named_with_the_one_nccl_loads() {
        let ours = Path::new("/env/lib/libnccl_tuner_planner.so");
        assert_eq!(Conflict::of(None, ours), Conflict::Unset);
        assert_eq!(Conflict::of(Some(""), ours), Conflict::Unset);
        assert_eq!(
            Conflict::of(Some("/env/lib/libnccl_tuner_planner.so"), ours),
            Conflict::Same
        );
        assert_eq!(
            Conflict::of(Some("NONE"), ours),
            Conflict::NoneSet("NONE".into())
        );
        let other = Conflict::of(Some("/opt/amazon/ofi-nccl/lib/libnccl-tuner-ofi.so"), ours);
        assert_eq!(
            other,
            Conflict::Other("/opt/amazon/ofi-nccl/lib/libnccl-tuner-ofi.so".into())
        );
        let line = other.describe(ours).unwrap();
        assert!(line.contains("loads only one tuner plugin"), "{line}");
        assert!(
            line.contains("it loads planner's /env/lib/libnccl_tuner_planner.so, not /opt/amazon"),
            "{line}"
        );
        assert_eq!(Conflict::Same.describe(ours), None);
        assert_eq!(Conflict::Unset.describe(ours), None);
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/a/b-c_d.so"), "/a/b-c_d.so");
        assert_eq!(shell_word("/my dir/p.json"), "'/my dir/p.json'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
