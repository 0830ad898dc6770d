//! NCCL's list syntax for `NCCL_ALGO` / `NCCL_PROTO` (`parseList` in `src/graph/tuning.cc`).
//!
//! The model never reads the process environment itself: `crate::nccl_env`
//! reads it once (the CLI), the audit builds it from the "set by environment"
//! lines of a log, tests by hand.

use super::cells::{NUM_ALGORITHMS, NUM_FUNCTIONS, NUM_PROTOCOLS};
use super::{Algo, Coll, Proto};
use crate::error::{Error, Result};
use serde::Serialize;

/// The environment, read in one place (`crate::nccl_env`); the model reads the knobs from it.
use crate::nccl_env::NcclEnv;

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
    pub proto: [[i32; NUM_PROTOCOLS]; NUM_FUNCTIONS],
    pub algo: [[i32; NUM_ALGORITHMS]; NUM_FUNCTIONS],
}

impl Default for EnableMatrix {
    fn default() -> Self {
        EnableMatrix {
            proto: [[1, 2, 1]; NUM_FUNCTIONS],
            algo: [[1; NUM_ALGORITHMS]; NUM_FUNCTIONS],
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
    /// 2.31 (`algo_env_zero_fills_unnamed_functions`): a non-empty `NCCL_ALGO`
    /// zero-fills every function's algorithm row before it is parsed, and the
    /// rows are applied only to functions some list forces (names an element
    /// for them); so a function `NCCL_PROTO` forces but `NCCL_ALGO` leaves
    /// out has no algorithm (dev@86fa684d src/tuning/cost_model.cc:315-318,349-361).
    /// `self` is the matrix of [`EnableMatrix::from_env`], whose lists parsed.
    pub(crate) fn zero_fill_unnamed(mut self, env: &NcclEnv, applies: bool) -> EnableMatrix {
        let Some(algo) = env.algo.as_deref().filter(|a| applies && !a.is_empty()) else {
            return self;
        };
        let named_by_algo = forced_functions(algo);
        let forced_by_proto = env
            .proto
            .as_deref()
            .map(forced_functions)
            .unwrap_or_default();
        for f in 0..self.algo.len() {
            if forced_by_proto[f] && !named_by_algo[f] {
                self.algo[f] = [0; 7];
            }
        }
        self
    }
}

/// The functions (NCCL's order) a `parseList` text forces: an entry that names
/// at least one element forces its prefix's function, or every function
/// without a prefix (`forced[p] = 1` in NCCL's `parseList`).
fn forced_functions(text: &str) -> [bool; 5] {
    let funcs = Coll::ALL.map(|c| c.nccl_name());
    let mut forced = [false; 5];
    for (_, token) in strtok(text, ';') {
        let parts = strtok(token, ':');
        let (prefix, list) = match parts.as_slice() {
            [(_, only)] => (None, *only),
            [(_, p), (_, l), ..] => (Some(*p), *l),
            [] => continue,
        };
        if strtok(list.trim_start_matches('^'), ',').is_empty() {
            continue;
        }
        for (f, name) in funcs.iter().enumerate() {
            if prefix.is_none_or(|p| p.eq_ignore_ascii_case(name)) {
                forced[f] = true;
            }
        }
    }
    forced
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
    fn algo_env_zero_fills_functions_it_does_not_name() {
        // NCCL_PROTO forces every function; NCCL_ALGO names AllReduce only:
        // in 2.31 the other functions have no algorithm (cost_model.cc:315-318,349-361).
        let env = NcclEnv {
            algo: Some("allreduce:ring".to_string()),
            proto: Some("Simple".to_string()),
            ..Default::default()
        };
        let m = EnableMatrix::from_env(&env).unwrap();
        let before = m.clone();
        let after = m.zero_fill_unnamed(&env, true);
        let ar = Coll::AllReduce as usize;
        assert_eq!(after.algo[ar], [0, 1, 0, 0, 0, 0, 0]);
        for f in (0..5).filter(|&f| f != ar) {
            assert_eq!(before.algo[f], [1; 7], "2.30 keeps function {f}");
            assert_eq!(after.algo[f], [0; 7], "2.31 zero-fills function {f}");
        }
        // Without NCCL_PROTO nothing else is forced: the defaults stay.
        let alone = NcclEnv {
            algo: Some("allreduce:ring".to_string()),
            ..Default::default()
        };
        let m = EnableMatrix::from_env(&alone)
            .unwrap()
            .zero_fill_unnamed(&alone, true);
        assert_eq!(m.algo[Coll::AllGather as usize], [1; 7]);
        // A prefixed NCCL_PROTO entry forces its function only.
        let env = NcclEnv {
            algo: Some("allreduce:ring".to_string()),
            proto: Some("allgather:^LL".to_string()),
            ..Default::default()
        };
        let m = EnableMatrix::from_env(&env)
            .unwrap()
            .zero_fill_unnamed(&env, true);
        assert_eq!(m.algo[Coll::AllGather as usize], [0; 7]);
        assert_eq!(m.algo[Coll::Broadcast as usize], [1; 7]);
        // The rule off (2.30): unchanged.
        let m = EnableMatrix::from_env(&env).unwrap();
        assert_eq!(m.clone().zero_fill_unnamed(&env, false), m);
    }

    #[test]
    fn strtok_collapses_delimiters() {
        let toks: Vec<&str> = strtok(";;a;;b;", ';').into_iter().map(|t| t.1).collect();
        assert_eq!(toks, vec!["a", "b"]);
        assert_eq!(strtok(";ring", ';')[0].0, 1);
    }
}
