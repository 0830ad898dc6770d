//! Grammar-aware topology XML: the bytes pick a mostly valid system (CPUs, switches, GPUs with NVLinks and C2C,
//! NICs, PCI links) with perturbations (shared bus ids, self links, Broadcom ids, extreme numbers), from the same
//! generator the proptest properties use (`tests/integration/robust_gen.rs`). Building, reporting and searching
//! (one node and two) never panic; every refusal is bad input (exit 2).
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::search::{self, SearchOptions};
use planner::topo::{build, Cluster};
use planner::xml;

#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/integration/robust_gen.rs"]
mod robust_gen;

fuzz_target!(|data: &[u8]| {
    let text = xml::write(&robust_gen::generated_topology(data));
    match build::from_bytes(text.as_bytes(), "gen.xml") {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(topo) => {
            let cluster = Cluster::single(topo);
            let report = planner::report::topo::report(&cluster);
            let _ = planner::report::topo::render_text(&report);
            for nodes in [1, 2] {
                let mut c = cluster.clone();
                c.n_nodes = nodes;
                common::bad_input(search::search(&c, &SearchOptions::default()));
            }
        }
    }
});
