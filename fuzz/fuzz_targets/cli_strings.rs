//! The strings users type: `--size`, `--sweep`/`--sizes` ranges, `--pair`/`--pairs`, `--coll`, `--dtype`,
//! `--backend`, `NCCL_ALGO`/`NCCL_PROTO` lists (2.24+ and older syntax), path levels (`NCCL_P2P_LEVEL`), NCCL
//! version families. Every parser never panics, refuses with bad input (exit 2), and what it accepts is in range
//! and reads back the same from its own spelling. The first byte picks the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::model::knobs::{parse_flat_list, parse_list, EnableMatrix};
use planner::nccl_env::NcclEnv;
use planner::model::{Algo, Coll, OwnAlgo, Pair, Proto};
use planner::units::{self, MAX_SIZE};

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 10 {
        0 => match units::parse_size(text) {
            Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
            Ok(v) => {
                assert!((1..=MAX_SIZE).contains(&v), "{text} -> {v}");
                assert_eq!(units::parse_size(&v.to_string()).ok(), Some(v));
                // format_size is for people (one decimal): it reads back within 5 %.
                let shown = units::format_size(v);
                let back = units::parse_size(&shown).expect("format_size's spelling reads back");
                assert!(back.abs_diff(v) <= v / 20 + 1, "{text}: {v} shown as {shown} reads {back}");
            }
        },
        1 => match units::parse_size_range(text) {
            Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
            Ok(sizes) => {
                assert!(
                    !sizes.is_empty() && sizes.len() <= 41,
                    "{text}: {} sizes",
                    sizes.len()
                );
                assert!(sizes.iter().all(|s| (1..=MAX_SIZE).contains(s)));
                assert!(
                    sizes.windows(2).all(|w| w[1] == 2 * w[0]),
                    "{text}: {sizes:?}"
                );
            }
        },
        2 => match Pair::parse(text) {
            Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
            Ok(pair) => assert_eq!(Pair::parse(&pair.to_string()).ok(), Some(pair)),
        },
        3 => {
            if let Ok(c) = Coll::parse(text) {
                assert_eq!(Coll::parse(c.cli_name()).ok(), Some(c));
            }
            if let Ok(a) = Algo::parse(text) {
                assert_eq!(Algo::parse(a.nccl_name()).ok(), Some(a));
            }
            if let Ok(p) = Proto::parse(text) {
                assert_eq!(Proto::parse(p.nccl_name()).ok(), Some(p));
            }
            let _ = OwnAlgo::parse(text);
            common::bad_input(planner::exec::plan::parse_collective(text));
            common::bad_input(planner::exec::plan::parse_pair(text));
        }
        4 => {
            common::bad_input(planner::dtype::Dtype::parse(text));
            common::bad_input(planner::measure::Backend::parse_list(text));
            common::bad_input(planner::verify::PairSelection::parse(text));
        }
        5 | 6 => {
            let var = if which % 10 == 5 {
                "NCCL_ALGO"
            } else {
                "NCCL_PROTO"
            };
            let env = NcclEnv::from_pairs([(var.to_string(), text.to_string())]);
            common::bad_input(EnableMatrix::from_env(&env));
            let m = EnableMatrix::from_env_flat(&env);
            assert!(m
                .proto
                .iter()
                .flatten()
                .chain(m.algo.iter().flatten())
                .all(|v| (0..=2).contains(v)));
            let names = Algo::ALL.map(|a| a.nccl_name());
            let _ = parse_flat_list(text, &names);
            let mut flat = vec![1; 5 * names.len()];
            let funcs = Coll::ALL.map(|c| c.nccl_name());
            let _ = parse_list(text, &funcs, &names, &mut flat);
        }
        7 => {
            // ncclGetLevel's reading: a path name, an old numeric level, or ignored (never an error).
            let _ = planner::nccl_env::nccl_level(text);
            for var in ["NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE"] {
                let _ = planner::nccl_env::NcclEnv::from_pairs([(var.to_string(), text.to_string())]);
            }
        }
        8 => {
            let _ = planner::model::rules::parse_family(text);
            let _ = planner::nccl_log::version_family(text);
            let _ = planner::model::knobs::parse_c_integer(text);
            let _ = units::c_strtol(text);
        }
        _ => {
            // `--size` and `--sweep` as the command line reads them (cli::source::SizeArgs).
            if let Ok(v) = units::parse_size(text) {
                assert!((1..=MAX_SIZE).contains(&v));
            }
            common::bad_input(units::parse_sweep(text));
        }
    }
});
