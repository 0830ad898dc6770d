//! The stage order is kept, not only declared: `src/lib.rs` lists the modules in stage order, and a module may
//! reference (`use crate::x` / `crate::x::...`, `use crate::{x, ...}`) only modules listed above it. Test code
//! (`#[cfg(test)]` modules) is exempt: a unit test may build its input with a later stage (`pipeline::load_fixture`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `pub mod` names of `lib.rs`, in order.
fn stage_order(lib_rs: &str) -> Vec<String> {
    lib_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';').trim().to_string())
        .collect()
}

/// The text of a source file without `//` comments and without its test module (everything from the first
/// `#[cfg(test)]`).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::`.
fn referenced_modules(code: &str, modules: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut add = |name: &str| {
        if modules.iter().any(|m| m == name) && !found.iter().any(|f: &String| f == name) {
            found.push(name.to_string());
        }
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e, f}}`: the first segment of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            let mut word = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_alphanumeric() || c == '_' => {
                        if item_start {
                            word.push(c)
                        }
                    }
                    _ => {
                        if item_start && !word.is_empty() {
                            add(&word);
                            word.clear();
                            item_start = false;
                        }
                    }
                }
                if c == ',' && depth == 0 && !word.is_empty() {
                    add(&word);
                    word.clear();
                }
            }
            if !word.is_empty() {
                add(&word);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            add(&name);
        }
        rest = after;
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every reference of a module to one declared after it (or to itself through a later name), as
/// "src/file.rs: module -> later".
fn back_references(src: &Path) -> Vec<String> {
    let order = stage_order(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let first = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let Some(&own) = rank.get(first.as_str()) else {
            continue; // lib.rs, main.rs (the binary, which calls cli)
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for m in referenced_modules(&code, &order) {
            if rank[m.as_str()] > own {
                bad.push(format!("src/{rel}: {first} -> {m}"));
            }
        }
    }
    bad
}

#[test]
fn no_stage_imports_a_later_stage() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = stage_order(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    assert!(
        order.len() > 10,
        "lib.rs lists its modules as `pub mod name;`: found {order:?}"
    );
    let bad = back_references(&src);
    assert!(
        bad.is_empty(),
        "a stage reads a later one (the order is src/lib.rs's):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_reader_sees_every_spelling_of_a_reference() {
    let modules: Vec<String> = ["error", "model", "topo", "verify", "cli"]
        .map(String::from)
        .to_vec();
    let code = "use crate::model::Pair;\nfn f() { crate::topo::build(); }\nuse crate::{error::Result, verify::{a, b}};";
    assert_eq!(
        referenced_modules(code, &modules),
        ["model", "topo", "error", "verify"]
    );
    let code = code_of("use crate::error;\n// crate::cli in a comment\n#[cfg(test)]\nmod tests { use crate::cli; }");
    assert_eq!(referenced_modules(&code, &modules), ["error"]);
}

#[test]
fn nccl_logs_are_read_in_one_module_before_every_stage_that_reads_them() {
    // audit, the NCCL backend, calibrate and `explain --from-log` (cli) read logs through `nccl_log`, which reads
    // text only: it stands after the vocabulary it fills (model, search, topo) and before its readers.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = stage_order(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let at = |name: &str| {
        order
            .iter()
            .position(|m| m == name)
            .unwrap_or_else(|| panic!("lib.rs has no `pub mod {name};`"))
    };
    for reader in ["audit", "nccl", "calibrate", "verify", "check", "cli"] {
        assert!(at("nccl_log") < at(reader), "nccl_log after {reader}");
    }
    for vocabulary in ["model", "search", "topo", "units"] {
        assert!(
            at(vocabulary) < at("nccl_log"),
            "nccl_log before {vocabulary}"
        );
    }
    // No second reader of the per-call line: its marker appears in nccl_log only.
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let readers: Vec<String> = files
        .iter()
        .filter(|f| code_of(&std::fs::read_to_string(f).unwrap()).contains("\"channel{Lo..Hi}={\""))
        .map(|f| f.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(readers, ["nccl_log/lines.rs"], "per-call line readers");
}
