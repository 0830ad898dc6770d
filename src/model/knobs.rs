//! The NCCL environment variables the cost model reads, and NCCL's list syntax
//! for `NCCL_ALGO` / `NCCL_PROTO` (`parseList` in `src/graph/tuning.cc`).
//!
//! The model never reads the process environment itself: the CLI builds an
//! `NcclEnv` with `from_process()`, the audit from the "set by environment"
//! lines of a log, tests by hand.

use super::{Algo, Coll, Proto};
use crate::error::{Error, Result};
use serde::Serialize;

/// NCCL knobs that change the model. `None` = unset (NCCL's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NcclEnv {
    /// `NCCL_ALGO`.
    pub algo: Option<String>,
    /// `NCCL_PROTO`.
    pub proto: Option<String>,
    /// `NCCL_NTHREADS`.
    pub nthreads: Option<i64>,
    /// `NCCL_LL128_NTHREADS`.
    pub ll128_nthreads: Option<i64>,
    /// `NCCL_THREAD_THRESHOLDS` ("Tree LL LL128 Simple Ring LL LL128 Simple").
    pub thread_thresholds: Option<String>,
    /// `NCCL_NET_OVERHEAD` in ns.
    pub net_overhead_ns: Option<i64>,
    /// `NCCL_PAT_ENABLE` (0, 1, 2 = auto).
    pub pat_enable: Option<i64>,
    /// `NCCL_LL128_C2C` (default 1).
    pub ll128_c2c: Option<i64>,
    /// `NCCL_NVLS_ENABLE` (0, 1, 2 = use the multicast attribute).
    pub nvls_enable: Option<i64>,
    /// `NCCL_COLLNET_ENABLE` (default 0).
    pub collnet_enable: Option<i64>,
}

/// The variables `NcclEnv` reads, by name.
pub const VARIABLES: [&str; 10] = [
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NTHREADS",
    "NCCL_LL128_NTHREADS",
    "NCCL_THREAD_THRESHOLDS",
    "NCCL_NET_OVERHEAD",
    "NCCL_PAT_ENABLE",
    "NCCL_LL128_C2C",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
];

impl NcclEnv {
    /// Read the variables from this process's environment.
    pub fn from_process() -> NcclEnv {
        NcclEnv::from_pairs(
            VARIABLES
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v))),
        )
    }

    /// Build from (name, value) pairs; unknown names are ignored. Integer
    /// values NCCL would reject (`strtoll` leaving characters) are dropped
    /// with a warning, as NCCL falls back to its default.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> NcclEnv {
        let mut env = NcclEnv::default();
        for (name, value) in pairs {
            env.set(&name, &value);
        }
        env
    }

    /// Set one variable by name; returns false when the name is not a model knob.
    pub fn set(&mut self, name: &str, value: &str) -> bool {
        let int = |v: &str| -> Option<i64> {
            let parsed = parse_c_integer(v);
            if parsed.is_none() {
                eprintln!(
                    "planner: warning: invalid value '{v}' for {name}, NCCL uses its default"
                );
            }
            parsed
        };
        match name {
            "NCCL_ALGO" => self.algo = Some(value.to_string()),
            "NCCL_PROTO" => self.proto = Some(value.to_string()),
            "NCCL_NTHREADS" => self.nthreads = int(value),
            "NCCL_LL128_NTHREADS" => self.ll128_nthreads = int(value),
            "NCCL_THREAD_THRESHOLDS" => self.thread_thresholds = Some(value.to_string()),
            "NCCL_NET_OVERHEAD" => self.net_overhead_ns = int(value),
            "NCCL_PAT_ENABLE" => self.pat_enable = int(value),
            "NCCL_LL128_C2C" => self.ll128_c2c = int(value),
            "NCCL_NVLS_ENABLE" => self.nvls_enable = int(value),
            "NCCL_COLLNET_ENABLE" => self.collnet_enable = int(value),
            _ => return false,
        }
        true
    }

    /// True when `NCCL_ALGO` or `NCCL_PROTO` is set (NCCL then calls an
    /// empty table a usage error instead of an internal one).
    pub fn user_lists_set(&self) -> bool {
        self.algo.is_some() || self.proto.is_some()
    }
}

/// `strtoll(s, &end, 0)` with NCCL's "whole string must parse" rule:
/// decimal, `0x` hex, leading-`0` octal, optional sign and leading blanks.
pub fn parse_c_integer(text: &str) -> Option<i64> {
    match crate::units::c_strtol(text) {
        (value, "") => value,
        _ => None,
    }
}

/// Which protocols and algorithms each function may use, after the user
/// lists (NCCL's `protoEnable` / `algoEnable`). Protocol value 2 is LL128's
/// "auto": decided later by the LL128 gates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnableMatrix {
    pub proto: [[i32; 3]; 5],
    pub algo: [[i32; 7]; 5],
}

impl Default for EnableMatrix {
    fn default() -> Self {
        EnableMatrix {
            proto: [[1, 2, 1]; 5],
            algo: [[1; 7]; 5],
        }
    }
}

impl EnableMatrix {
    /// Apply `NCCL_PROTO` then `NCCL_ALGO` as NCCL does. A syntax error is a
    /// bad input quoting NCCL's own message.
    pub fn from_env(env: &NcclEnv) -> Result<EnableMatrix> {
        let mut m = EnableMatrix::default();
        let funcs = Coll::ALL.map(|c| c.nccl_name());
        if let Some(text) = &env.proto {
            let protos = Proto::ALL.map(|p| p.nccl_name());
            let mut flat: Vec<i32> = m.proto.iter().flatten().copied().collect();
            parse_list(text, &funcs, &protos, &mut flat)
                .map_err(|e| Error::bad_input(format!("NCCL_PROTO: {e}")))?;
            for (f, row) in m.proto.iter_mut().enumerate() {
                row.copy_from_slice(&flat[f * 3..f * 3 + 3]);
            }
        }
        if let Some(text) = &env.algo {
            let algos = Algo::ALL.map(|a| a.nccl_name());
            let mut flat: Vec<i32> = m.algo.iter().flatten().copied().collect();
            parse_list(text, &funcs, &algos, &mut flat)
                .map_err(|e| Error::bad_input(format!("NCCL_ALGO: {e}")))?;
            for (f, row) in m.algo.iter_mut().enumerate() {
                row.copy_from_slice(&flat[f * 7..f * 7 + 7]);
            }
        }
        Ok(m)
    }
}

impl EnableMatrix {
    /// `NCCL_PROTO` then `NCCL_ALGO` as NCCL 2.18-2.23 read them
    /// (`parseList`, v2.23.4-1 src/graph/tuning.cc:34-52): one list for every
    /// function, `^` as the first character negates, names are
    /// case-insensitive and unknown names are ignored (no error).
    pub fn from_env_flat(env: &NcclEnv) -> EnableMatrix {
        let mut m = EnableMatrix::default();
        if let Some(text) = &env.proto {
            let names = Proto::ALL.map(|p| p.nccl_name());
            let row = parse_flat_list(text, &names);
            for r in m.proto.iter_mut() {
                r.copy_from_slice(&row);
            }
        }
        if let Some(text) = &env.algo {
            let names = Algo::ALL.map(|a| a.nccl_name());
            let row = parse_flat_list(text, &names);
            for r in m.algo.iter_mut() {
                r.copy_from_slice(&row);
            }
        }
        m
    }
}

/// The pre-2.24 `parseList`: every element starts at the default (1 for a
/// `^` list, 0 otherwise), listed names get the other value.
pub fn parse_flat_list(text: &str, elems: &[&str]) -> Vec<i32> {
    let (default, set, list) = match text.strip_prefix('^') {
        Some(rest) => (1, 0, rest),
        None => (0, 1, text),
    };
    let mut out = vec![default; elems.len()];
    for (_, token) in strtok(list, ',') {
        for (i, e) in elems.iter().enumerate() {
            if e.eq_ignore_ascii_case(token) {
                out[i] = set;
            }
        }
    }
    out
}

/// Split like C's `strtok`: runs of delimiters are one separator, empty
/// tokens never appear. Returns (byte offset, token).
fn strtok(text: &str, delim: char) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in text.char_indices() {
        if ch == delim {
            if let Some(s) = start.take() {
                out.push((s, &text[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// NCCL's `parseList`: `[list][;func:list]*`, `^` negates, names are
/// case-insensitive, only the first entry may omit the function prefix, and a
/// prefixed entry resets that function's row before setting. `list` is
/// row-major `[prefix][elem]`. Errors carry NCCL's WARN text.
pub fn parse_list(
    text: &str,
    prefixes: &[&str],
    elems: &[&str],
    list: &mut [i32],
) -> std::result::Result<(), String> {
    let n = elems.len();
    for (offset, full_token) in strtok(text, ';') {
        let parts = strtok(full_token, ':');
        // strtok on ':' : the first piece is the prefix, the second the list;
        // anything after a second ':' is ignored, as in NCCL.
        let (prefix, elem_list) = match parts.as_slice() {
            [] => continue,
            [(_, only)] => {
                if offset != 0 {
                    return Err(format!(
                        "All entries except the first must have a prefix: \"{text}\""
                    ));
                }
                (None, *only)
            }
            [(_, p), (_, l), ..] => (Some(*p), *l),
        };
        let (unset, set, elem_list) = match elem_list.strip_prefix('^') {
            Some(rest) => (1, 0, rest),
            None => (0, 1, elem_list),
        };
        let mut found_prefix = false;
        for (p, name) in prefixes.iter().enumerate() {
            if let Some(pf) = prefix {
                if !pf.eq_ignore_ascii_case(name) {
                    continue;
                }
            }
            found_prefix = true;
            for slot in &mut list[p * n..p * n + n] {
                *slot = unset;
            }
            for (_, elem) in strtok(elem_list, ',') {
                match elems.iter().position(|e| e.eq_ignore_ascii_case(elem)) {
                    Some(e) => list[p * n + e] = set,
                    None => {
                        return Err(format!(
                            "Unrecognized element token \"{elem}\" when parsing \"{text}\""
                        ))
                    }
                }
            }
        }
        if !found_prefix {
            return Err(format!(
                "Unrecognized prefix token \"{}\" when parsing \"{text}\"",
                prefix.unwrap_or("")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_integers() {
        assert_eq!(parse_c_integer("512"), Some(512));
        assert_eq!(parse_c_integer("0x200"), Some(512));
        assert_eq!(parse_c_integer("010"), Some(8));
        assert_eq!(parse_c_integer("-2"), Some(-2));
        assert_eq!(parse_c_integer("0"), Some(0));
        assert_eq!(parse_c_integer("12abc"), None);
        assert_eq!(parse_c_integer(""), None);
    }

    #[test]
    fn flat_lists_ignore_unknown_names_and_prefixes() {
        let names = ["LL", "LL128", "Simple"];
        assert_eq!(parse_flat_list("^ll128", &names), vec![1, 0, 1]);
        assert_eq!(parse_flat_list("Simple,foo", &names), vec![0, 0, 1]);
        // A 2.24 prefixed entry is one unknown token before 2.24: nothing is set.
        assert_eq!(parse_flat_list("allreduce:LL", &names), vec![0, 0, 0]);
        let env = NcclEnv {
            algo: Some("ring".to_string()),
            ..Default::default()
        };
        let m = EnableMatrix::from_env_flat(&env);
        assert!(m.algo.iter().all(|r| *r == [0, 1, 0, 0, 0, 0, 0]));
        assert!(m.proto.iter().all(|r| *r == [1, 2, 1]));
    }

    #[test]
    fn strtok_collapses_delimiters() {
        let toks: Vec<&str> = strtok(";;a;;b;", ';').into_iter().map(|t| t.1).collect();
        assert_eq!(toks, vec!["a", "b"]);
        assert_eq!(strtok(";ring", ';')[0].0, 1);
    }
}
