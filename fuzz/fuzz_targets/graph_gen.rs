//! Grammar-aware graph XML: the bytes pick mostly valid `<graphs>` for the 2x H200 capture (channel orders,
//! patterns, speeds, NET ends for two nodes) with perturbations, from `tests/integration/robust_gen.rs`.
//! Reading them never panics; a refusal is bad input (exit 2); graphs it accepts feed the model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::nccl_env::NcclEnv;
use planner::search::{self, SearchOptions};

#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/integration/robust_gen.rs"]
mod robust_gen;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let multi = first & 1 == 1;
    let setup = common::setup(multi);
    let text = robust_gen::generated_graphs(rest, &["0", "0x1"], &["0"], multi);
    match search::graphs_from_text(
        &text,
        "gen-graph.xml",
        &setup.cluster,
        &SearchOptions::default(),
    ) {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(result) => {
            let model = planner::pipeline::model_from_graphs(
                &setup.cluster,
                &result.graphs,
                result.connection.n_channels,
                planner::model::table::builtin(planner::model::table::newest_family()).unwrap(),
                NcclEnv::default(),
                planner::model::input::NvlsFlag::Auto,
            );
            if let Ok(model) = model {
                common::exercise(&model, &[1, 65536, 1 << 30]);
            }
        }
    }
});
