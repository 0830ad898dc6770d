//! The physical link rates `doctor` judges its link tests by (`tuning-tables/doctor.json`, built in), checked on
//! load against its header and against physics: every generation once, rates growing with the generation,
//! efficiencies in (0, 1], a tolerance band around 1.

use crate::error::{Error, Result};
use serde::Deserialize;

pub(crate) const RATES_FORMAT: &str = "planner-doctor-rates";
pub(crate) const RATES_VERSION: u32 = 1;
/// The committed table.
pub(crate) const BUILT_IN: &str = include_str!("../../tuning-tables/doctor.json");
pub(crate) const BUILT_IN_NAME: &str = "tuning-tables/doctor.json";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenRate {
    pub(crate) gen: u32,
    pub(crate) gbs: f64,
    pub(crate) source: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PcieEfficiency {
    pub(crate) host_to_device: f64,
    pub(crate) device_to_host: f64,
    pub(crate) bidirectional: f64,
    pub(crate) peer: f64,
    pub(crate) source: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NvLinkEfficiency {
    pub(crate) copy_engine: f64,
    pub(crate) sm: f64,
    pub(crate) source: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tolerance {
    /// A figure below `slow_below` x its expectation is slow.
    pub(crate) slow_below: f64,
    /// A figure above `fast_above` x its expectation is suspiciously fast.
    pub(crate) fast_above: f64,
    pub(crate) source: String,
}

/// The table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rates {
    pub(crate) format: String,
    pub(crate) version: u32,
    pub(crate) about: String,
    pub(crate) pcie_lane_gbs: Vec<GenRate>,
    pub(crate) pcie_efficiency: PcieEfficiency,
    pub(crate) nvlink_link_gbs: Vec<GenRate>,
    pub(crate) nvlink_efficiency: NvLinkEfficiency,
    pub(crate) tolerance: Tolerance,
}

impl Rates {
    /// The committed table (checked by a test, so this cannot fail in a released build).
    pub(crate) fn built_in() -> Result<Rates> {
        Rates::from_json(BUILT_IN, BUILT_IN_NAME)
    }

    /// Parse and check a table; bad input names `source` and the value.
    pub(crate) fn from_json(text: &str, source: &str) -> Result<Rates> {
        let rates: Rates = serde_json::from_str(text).map_err(|e| {
            Error::bad_input(format!(
                "{source}:{}:{}: not a doctor rate table: {e}",
                e.line(),
                e.column()
            ))
        })?;
        if rates.format != RATES_FORMAT || rates.version != RATES_VERSION {
            return Err(Error::bad_input(format!(
                "{source}: format \"{}\" version {} (expected \"{RATES_FORMAT}\" version {RATES_VERSION})",
                rates.format, rates.version
            )));
        }
        check_generations(source, "pcie_lane_gbs", &rates.pcie_lane_gbs, 64.0)?;
        check_generations(source, "nvlink_link_gbs", &rates.nvlink_link_gbs, 400.0)?;
        let e = &rates.pcie_efficiency;
        let n = &rates.nvlink_efficiency;
        for (name, v) in [
            ("pcie_efficiency.host_to_device", e.host_to_device),
            ("pcie_efficiency.device_to_host", e.device_to_host),
            ("pcie_efficiency.bidirectional", e.bidirectional),
            ("pcie_efficiency.peer", e.peer),
            ("nvlink_efficiency.copy_engine", n.copy_engine),
            ("nvlink_efficiency.sm", n.sm),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(Error::bad_input(format!(
                    "{source}: {name} = {v}: an efficiency is a fraction in (0, 1] (payload over the raw link rate)"
                )));
            }
        }
        let t = &rates.tolerance;
        if !(t.slow_below > 0.0 && t.slow_below < 1.0 && t.fast_above > 1.0 && t.fast_above < 10.0)
        {
            return Err(Error::bad_input(format!(
                "{source}: tolerance slow_below {} / fast_above {}: need 0 < slow_below < 1 < fast_above < 10",
                t.slow_below, t.fast_above
            )));
        }
        Ok(rates)
    }

    /// One PCIe lane of generation `gen`, GB/s per direction.
    pub(crate) fn pcie_lane(&self, gen: u32) -> Option<f64> {
        self.pcie_lane_gbs
            .iter()
            .find(|r| r.gen == gen)
            .map(|r| r.gbs)
    }

    /// One NVLink of generation `gen`, GB/s per direction.
    pub(crate) fn nvlink_link(&self, gen: u32) -> Option<f64> {
        self.nvlink_link_gbs
            .iter()
            .find(|r| r.gen == gen)
            .map(|r| r.gbs)
    }
}

/// Generations 1.. in order, each once, with rates that are positive, below `ceiling` and growing.
fn check_generations(source: &str, name: &str, rows: &[GenRate], ceiling: f64) -> Result<()> {
    if rows.is_empty() {
        return Err(Error::bad_input(format!("{source}: {name} is empty")));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.gen as usize != i + 1 {
            return Err(Error::bad_input(format!(
                "{source}: {name}[{i}] is generation {} (expected {}: generations 1.. in order, each once)",
                r.gen,
                i + 1
            )));
        }
        if !(r.gbs > 0.0 && r.gbs < ceiling) {
            return Err(Error::bad_input(format!(
                "{source}: {name} generation {}: {} GB/s is not a rate of one lane or link (0..{ceiling})",
                r.gen, r.gbs
            )));
        }
        if i > 0 && r.gbs < rows[i - 1].gbs {
            return Err(Error::bad_input(format!(
                "{source}: {name} generation {} ({} GB/s) is slower than generation {} ({} GB/s)",
                r.gen,
                r.gbs,
                r.gen - 1,
                rows[i - 1].gbs
            )));
        }
        if r.source.trim().is_empty() {
            return Err(Error::bad_input(format!(
                "{source}: {name} generation {} names no source",
                r.gen
            )));
        }
    }
    Ok(())
}

/// NVLink generation of a GPU of compute capability `cc` (the generation its architecture shipped with: P100
/// sm60 NVLink 1, V100 sm70 2, A100 sm80 3, H100/H200 sm90 4, B200 sm100 5; the whitepapers of `doctor.json`).
pub(crate) fn nvlink_gen_of(cc: (i32, i32)) -> Option<u32> {
    match cc.0 {
        6 => Some(1),
        7 => Some(2),
        8 => Some(3),
        9 => Some(4),
        10 | 12 => Some(5),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_table_loads_and_reproduces_the_h200_run() {
        let rates = Rates::built_in().unwrap();
        // Gen5 x16 with the H200 efficiencies gives back the measured 54.5 and 55.0 GB/s (issue 25).
        let lane = rates.pcie_lane(5).unwrap();
        let h2d = rates.pcie_efficiency.host_to_device * lane * 16.0;
        let d2h = rates.pcie_efficiency.device_to_host * lane * 16.0;
        assert!((h2d - 54.5).abs() < 0.05, "{h2d}");
        assert!((d2h - 55.0).abs() < 0.05, "{d2h}");
        // H100 SXM: 18 links x 25 GB/s = 450 GB/s per direction, 900 in all (the whitepaper's figure).
        assert_eq!(rates.nvlink_link(4).unwrap() * 18.0 * 2.0, 900.0);
    }

    #[test]
    fn a_table_against_physics_is_refused_by_name() {
        let swap = |from: &str, to: &str| BUILT_IN.replacen(from, to, 1);
        let e = Rates::from_json(&swap("\"gbs\": 0.5,", "\"gbs\": 0.1,"), "t.json").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("generation 2 (0.1 GB/s) is slower"),
            "{e}"
        );
        let e = Rates::from_json(
            &swap("\"host_to_device\": 0.8649", "\"host_to_device\": 1.3"),
            "t.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("host_to_device = 1.3"), "{e}");
        let e = Rates::from_json(&swap("\"gen\": 3", "\"gen\": 4"), "t.json").unwrap_err();
        assert!(
            e.to_string().contains("pcie_lane_gbs[2] is generation 4"),
            "{e}"
        );
        let e = Rates::from_json(&swap("planner-doctor-rates", "x"), "t.json").unwrap_err();
        assert!(e.to_string().contains("format \"x\""), "{e}");
    }
}
