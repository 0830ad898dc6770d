//! nccl-tests `-J` JSON: the rows of the text output, the environment in `env`, the devices in `config`.

use super::nccl_tests::{
    coll_of_program, nccl_version_of_code, pair_of_env, resolve_coll, unmodelled_program, TestsRow,
};
use super::{array_element_lines, InputFormat, Measurements, ReadOptions, Reader};
use crate::error::{Error, Result};
use crate::model::{Coll, Pair};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

pub(super) struct NcclTestsJsonReader;

impl Reader for NcclTestsJsonReader {
    fn read(&self, text: &str, source: &str, options: &ReadOptions) -> Result<Measurements> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::bad_input(format!("{source}:{}:{}: {e}", e.line(), e.column())))?;
        let mut out = Measurements::new(source, InputFormat::NcclTestsJson);
        let program = value
            .get("args")
            .and_then(|a| a.get(0))
            .and_then(|a| a.as_str());
        let program_coll = match program {
            Some(p) => Some(coll_of_program(p).ok_or_else(|| unmodelled_program(source, p))?),
            None => None,
        };
        let coll = resolve_coll(program_coll, options, source)?;
        let env = env_of(&value);
        let algo = env.get("NCCL_ALGO").map(|s| s.as_str());
        let proto = env.get("NCCL_PROTO").map(|s| s.as_str());
        let pair = pair_of_env(algo, proto, options, source)?;
        out.machine.nccl_version = value
            .get("nccl_version")
            .and_then(|v| v.as_u64())
            .map(nccl_version_of_code);
        read_config(&value, source, &mut out)?;
        let results = value
            .get("results")
            .and_then(|r| r.as_array())
            .ok_or_else(|| Error::bad_input(format!("{source}: \"results\" is not a list")))?;
        read_results(results, text, coll, pair, &mut out)?;
        Ok(out)
    }
}

/// The `env` list (`NAME=value` strings) as a map.
fn env_of(value: &Value) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for item in value
        .get("env")
        .and_then(|e| e.as_array())
        .into_iter()
        .flatten()
    {
        if let Some((k, v)) = item.as_str().and_then(|s| s.split_once('=')) {
            env.insert(k.to_string(), v.to_string());
        }
    }
    env
}

/// The GPU count, GPU names and hosts of `config`.
fn read_config(value: &Value, source: &str, out: &mut Measurements) -> Result<()> {
    let config = value.get("config");
    let devices: Vec<&Value> = config
        .and_then(|c| c.get("devices"))
        .and_then(|d| d.as_array())
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    // nccl-tests lists one device per process (the first of its GPUs). Untrusted counts, as in the text reader:
    // nthreads x ngpus x devices is checked against the rank limit, not overflowed.
    let counts =
        config.and_then(|c| Some((c.get("nthreads")?.as_u64()?, c.get("ngpus")?.as_u64()?)));
    out.machine.gpu_count = match counts {
        None => None,
        Some((threads, gpus)) => {
            let processes = devices.len().max(1) as u64;
            let max = crate::limits::MAX_RANKS;
            match threads
                .checked_mul(gpus)
                .and_then(|n| n.checked_mul(processes))
                .filter(|n| *n <= max as u64)
            {
                Some(n) => Some(n as usize),
                None => {
                    return Err(Error::bad_input(format!(
                        "{source}: config nthreads {threads} x ngpus {gpus} x {processes} devices is more than planner's limit of {max} ranks"
                    )))
                }
            }
        }
    };
    let mut seen_hosts = HashSet::new();
    for d in &devices {
        if let Some(name) = d.get("device_info").and_then(|v| v.as_str()) {
            out.machine.gpus.push(name.to_string());
        }
        if let Some(host) = d.get("hostname").and_then(|v| v.as_str()) {
            out.machine.add_host(&mut seen_hosts, host);
        }
    }
    Ok(())
}

/// `out_of_place_per_iter` / `in_place_per_iter` of `-I 1` (nccl-tests 2.19.2+, `writePerIterReport` in
/// src/util.cu of v2.19.6): the summary over the iterations after `skipped_iterations`, the iteration times, and
/// with several processes each process's times (`per_process_max_times_us`, one list per process).
fn per_iteration(p: &Value, bad: &dyn Fn(&str) -> Error, key: &str) -> Result<super::IterStats> {
    let num = |name: &str| {
        p.get(name)
            .and_then(|v| v.as_f64())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| bad(&format!("{key}_per_iter: no non-negative \"{name}\"")))
    };
    let count = |name: &str| {
        p.get(name)
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok())
    };
    let skipped = count("skipped_iterations");
    let times = p.get("times_us").and_then(|t| t.as_array());
    let iterations = times.map(|t| (t.len() as u32).saturating_sub(skipped.unwrap_or(0)));
    let per_process_median_us = p
        .get("per_process_max_times_us")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
        .filter_map(|row| {
            let times: Vec<f64> = row
                .as_array()?
                .iter()
                .skip(skipped.unwrap_or(0) as usize)
                .filter_map(|t| t.as_f64())
                .collect();
            crate::measure::median(&times)
        })
        .collect();
    Ok(super::IterStats {
        iterations,
        skipped_iterations: skipped,
        min_us: num("min_us")?,
        max_us: num("max_us")?,
        p50_us: Some(num("p50_us")?),
        p99_us: num("p99_us")?,
        stdev_us: Some(num("stdev_us")?),
        cv_pct: num("cv_pct")?,
        per_process_median_us,
    })
}

/// The `results` list: both halves of every row whose halves are right.
fn read_results(
    results: &[Value],
    text: &str,
    coll: Coll,
    pair: Option<Pair>,
    out: &mut Measurements,
) -> Result<()> {
    let source = out.source.clone();
    let source = source.as_str();
    let lines = array_element_lines(text, "results");
    let mut wrong_rows = 0;
    for (i, result) in results.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or(0);
        let bad = |what: &str| Error::bad_input(format!("{source}:{line}: results[{i}]: {what}"));
        let bytes = result
            .get("size")
            .and_then(|s| s.as_u64())
            .ok_or_else(|| bad("no integer \"size\""))?;
        let mut halves = Vec::new();
        for (key, in_place) in [("out_of_place", false), ("in_place", true)] {
            let Some(half) = result.get(key).filter(|h| !h.is_null()) else {
                continue;
            };
            if half.get("cpu_time").is_some() && out.notes.is_empty() {
                out.notes
                    .push("times are CPU times (nccl-tests -C 1), not GPU times".into());
            }
            let time = half
                .get("time")
                .or_else(|| half.get("cpu_time"))
                .and_then(|t| t.as_f64())
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| bad(&format!("{key}: no positive \"time\"")))?;
            let wrong = half.get("nwrong").and_then(|w| w.as_f64()).unwrap_or(0.0);
            let per_iteration = result
                .get(format!("{key}_per_iter").as_str())
                .filter(|p| !p.is_null())
                .map(|p| per_iteration(p, &bad, key))
                .transpose()?;
            halves.push((time, in_place, wrong > 0.0, per_iteration));
        }
        if halves.is_empty() {
            return Err(bad("neither \"out_of_place\" nor \"in_place\" times"));
        }
        if halves.iter().any(|h| h.2) {
            wrong_rows += 1;
            continue;
        }
        for (time_us, in_place, _, per_iteration) in halves {
            let half = TestsRow {
                coll,
                pair,
                bytes,
                time_us,
                in_place,
                source,
                line,
                per_iteration,
            };
            out.rows.push(half.measurement());
        }
    }
    if wrong_rows > 0 {
        out.notes
            .push(format!("{wrong_rows} row(s) with nwrong > 0 left out"));
    }
    Ok(())
}
