//! Partial vendor topology files (`--topo FILE` with bare `<pci>` endpoints and no `<gpu>`, as Azure's and AWS's
//! files are): `topo::vendor::fill_from_model` (`--gpu MODEL`, `--nic-speed`) and `merge_with_detected` (NCCL's
//! merge with the GPUs it detects; the detected side here is a committed fixture's XML). Input: byte 0 picks the
//! GPU model and the detected fixture, byte 1 the NIC speed in Gb/s (0: not given), the rest is the file.
//! Checks: never a panic; a refusal is bad input (exit 2); a filled file is no longer partial and has one `<gpu>`
//! per GPU endpoint it named, with dev and rank 0..n; filled or merged, the XML builds or is refused as bad input,
//! and what builds also searches.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::search::{self, SearchOptions};
use planner::topo::{build, fixtures, gpu_models, vendor, Cluster};
use planner::xml::{self, XmlNode};
use std::sync::OnceLock;

#[path = "../common/mod.rs"]
mod common;

/// What a probe detects on two machines: the 2x H200 capture and an 8-GPU HGX H100 board.
fn detected(pick: u8) -> &'static XmlNode {
    static DETECTED: OnceLock<Vec<XmlNode>> = OnceLock::new();
    let all = DETECTED.get_or_init(|| {
        ["h200x2-nvswitch-vm", "hgx-h100-8"]
            .iter()
            .map(|name| {
                let fixture = fixtures::find(name).expect("committed fixture");
                xml::parse(fixture.xml, name).expect("the fixture reads")
            })
            .collect()
    });
    &all[pick as usize % all.len()]
}

/// The topology built from `root` searches without a panic; a refusal anywhere is bad input.
fn builds_and_searches(root: &XmlNode) {
    match build::from_xml(root, "fuzz.xml") {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(topo) => {
            let cluster = Cluster::single(topo);
            common::bad_input(search::search(&cluster, &SearchOptions::default()));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [pick, speed, file @ ..] = data else {
        return;
    };
    let root = match xml::parse_bytes(file, "fuzz.xml") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(root) => root,
    };
    if !vendor::is_partial(&root) {
        return;
    }
    let model = &gpu_models::GPU_MODELS[*pick as usize % gpu_models::GPU_MODELS.len()];
    let nic = vendor::NicChoice {
        speed_gbits: (*speed > 0).then_some(f64::from(*speed) * 25.0),
    };
    match vendor::fill_from_model(&root, model, nic, "fuzz.xml") {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok((filled, warnings)) => {
            assert!(!warnings.is_empty(), "every fill assumes something");
            assert!(!vendor::is_partial(&filled), "a filled file is complete");
            let gpus: Vec<&XmlNode> = filled
                .descendants()
                .into_iter()
                .filter(|n| n.name == "gpu")
                .collect();
            assert!(!gpus.is_empty());
            let mut ranks: Vec<usize> = gpus
                .iter()
                .filter_map(|g| g.attr("rank")?.parse().ok())
                .collect();
            ranks.sort_unstable();
            assert!(
                ranks.iter().copied().eq(0..gpus.len()),
                "ranks 0..{}: {ranks:?}",
                gpus.len()
            );
            builds_and_searches(&filled);
        }
    }
    let merged = vendor::merge_with_detected(&root, detected(*pick / 16));
    builds_and_searches(&merged);
});
