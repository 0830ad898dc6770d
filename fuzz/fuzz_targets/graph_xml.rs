//! Graph XML (`--graph FILE`, `NCCL_GRAPH_FILE`) as bytes, read against the 2x H200 capture on one node and on
//! two: `search::graphs_from_text` never panics and refuses with bad input (exit 2). The first byte picks the
//! node count; the rest is the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::search::{self, SearchOptions};

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let setup = common::setup(first & 1 == 1);
    let text = String::from_utf8_lossy(rest);
    common::bad_input(search::graphs_from_text(
        &text,
        "fuzz-graph.xml",
        &setup.cluster,
        &SearchOptions::default(),
    ));
});
