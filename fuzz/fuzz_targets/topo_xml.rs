//! Topology XML as bytes (`--topo FILE`, `NCCL_TOPO_FILE`): `topo::build::from_bytes` never panics and refuses
//! with bad input (exit 2); the XML reader round-trips what it accepts (write, read back: the same tree); a
//! topology it builds also reports and searches without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::search::{self, SearchOptions};
use planner::topo::{build, Cluster};
use planner::xml;

#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/integration/robust_gen.rs"]
mod robust_gen;
use robust_gen::same_tree;

fuzz_target!(|data: &[u8]| {
    match xml::parse_bytes(data, "fuzz.xml") {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(root) => {
            let written = xml::write(&root);
            let again = xml::parse(&written, "again.xml").expect("written XML reads back");
            assert!(same_tree(&root, &again), "round trip changed the tree");
        }
    }
    match build::from_bytes(data, "fuzz.xml") {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(topo) => {
            let cluster = Cluster::single(topo);
            let report = planner::report::topo::report(&cluster);
            let _ = planner::report::topo::render_text(&report);
            common::bad_input(search::search(&cluster, &SearchOptions::default()));
        }
    }
});
