//! planner verify result files (`"format": "planner-verify"`): both backends, NCCL's free choice with the pair
//! NCCL chose, the stock model's prediction at measurement time.

use super::{
    array_element_lines, InputFormat, MachineInfo, Measurement, Measurements, ReadOptions, Reader,
};
use crate::calibrate::stats::spread;
use crate::error::{Error, Result};
use crate::measure::{Backend, Row, RowStatus};
use crate::model::Coll;
use crate::result_file::VerifyRun;

pub(super) struct PlannerVerifyReader;

impl Reader for PlannerVerifyReader {
    fn read(&self, text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
        let run = VerifyRun::from_json(text, source)?;
        if let Some(p) = options.pair {
            return Err(Error::bad_input(format!(
                "{source}: --pair {p} does not apply to a planner verify result, which records the pair of every row"
            )));
        }
        if let Some(c) = options.coll.filter(|c| *c != run.options.collective) {
            return Err(Error::bad_input(format!(
                "{source}: --coll {} contradicts the file, which ran {}",
                c.cli_name(),
                run.options.collective.cli_name()
            )));
        }
        let lines = array_element_lines(text, "rows");
        let mut out = Measurements::new(source, InputFormat::PlannerVerify);
        out.machine = machine_of(&run, source)?;
        let mut skipped = 0;
        for (i, row) in run.rows.iter().enumerate() {
            let line = lines.get(i).copied().unwrap_or(0);
            match measurement_of(row, run.options.collective, source, line) {
                Some(m) => out.rows.push(m),
                None => skipped += 1,
            }
        }
        if skipped > 0 {
            out.notes.push(format!(
                "{skipped} row(s) not ok (failed, skipped or unavailable) left out"
            ));
        }
        Ok(out)
    }
}

fn machine_of(run: &VerifyRun, source: &str) -> Result<MachineInfo> {
    let m = &run.machine;
    let mut machine = MachineInfo {
        hosts: m.hosts.clone(),
        gpus: m.gpus.iter().map(|g| g.name.clone()).collect(),
        gpu_count: Some(m.world_size),
        driver_version: m.driver_version.clone(),
        cuda_version: m.cuda_version.clone(),
        nccl_version: m.nccl_version.clone(),
        ..Default::default()
    };
    // NCCL's own dump when the run took one (what NCCL used), else the
    // planner's view; both hash alike when they agree.
    if let Some(xml) = m.nccl_topology_xml.as_ref().or(m.topology_xml.as_ref()) {
        machine.topology_hash = Some(super::super::file::topology_hash(xml, source)?);
    }
    Ok(machine)
}

/// One row as a measurement; None for a row the calibration does not model or that measured nothing.
fn measurement_of(row: &Row, coll: Coll, source: &str, line: usize) -> Option<Measurement> {
    // A `tuned` row measures NCCL steered by a plugin and a `symm` row NCCL on symmetric windows: neither is
    // NCCL's default configuration, which is what the calibration models.
    if row.tuned || row.backend == Backend::NcclSymm {
        return None;
    }
    let median = match (row.status, row.median_us) {
        (RowStatus::Ok, Some(t)) if t > 0.0 => t,
        _ => return None,
    };
    let spread_pct = spread(&row.times_us, median).map(|s| s * 100.0);
    Some(Measurement {
        backend: row.backend,
        coll,
        pair: row.pair,
        nccl_choice: row.nccl_choice.map(|c| c.pair),
        bytes: row.bytes,
        time_us: median,
        repeats: Some(row.times_us.len() as u32),
        spread_pct,
        stock_us: row.predicted_us.filter(|p| p.is_finite() && *p > 0.0),
        in_place: None,
        per_iteration: None,
        source: source.to_string(),
        line,
    })
}
