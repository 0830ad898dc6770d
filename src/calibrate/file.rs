//! The calibration file: self-describing, versioned JSON
//! (`"format": "planner-calibration"`), and the topology hash that says which
//! machines it applies to.

use super::cv::RegimeRow;
use super::expected::{FormBasis, Physical};
use super::input::MachineInfo;
use super::model::PairParams;
use super::stats::ErrorStats;
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::Pair;
use crate::model::{AnyAlgo, Coll, Proto};
use crate::xml;
use nccl_tuner_planner::plan::fnv1a64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// First field of every calibration file.
pub(crate) const CALIBRATION_FORMAT: &str = "planner-calibration";
/// Bumped when a field changes meaning; `from_json` reads this version and every older one it lists in
/// `READABLE_VERSIONS`, and refuses others. 2: the form (`form`, `expected_form`, each pair's `physical`).
pub const CALIBRATION_VERSION: u32 = 2;
/// Versions `from_json` reads: 1 (the empirical form only: no `form` field) and 2.
pub const READABLE_VERSIONS: [u32; 2] = [1, 2];
/// `form` of a calibration on planner's empirical form (`model::PairParams`): every version-1 file.
pub const FORM_EMPIRICAL: &str = "empirical";
/// `form` of a calibration on the expected model's form (`expected`).
pub const FORM_EXPECTED: &str = "expected";

fn empirical() -> String {
    FORM_EMPIRICAL.to_string()
}

/// What `topology_hash` covers, written into every file.
pub(crate) const TOPOLOGY_HASH_COVERS: &str = "FNV-1a 64 of a canonical form of the NCCL topology XML: every element \
(system, cpu, pci, gpu, nvlink, nic, net, ...) with its attributes sorted by name and its children sorted by their \
canonical text; left out: cpu host_hash and affinity, pci busid, net name and guid (per-boot or per-host identifiers \
the model does not read); an nvlink/pcilink target that is a GPU's bus id becomes that GPU's dev, any other target is \
left out (its class, tclass, stays). So it covers the GPUs (sm, dev, rank, gdr), links and their counts, PCI classes, \
device ids and link speeds/widths, CPU kind and NUMA ids, and NICs (speed, latency, port, gdr), from which the model \
derives paths and bandwidths.";

/// The model's form, in words, so the file explains its own numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDescription {
    pub(crate) time_us: String,
    pub(crate) transfer_us: String,
    pub(crate) fit: String,
    pub(crate) terms: String,
}

impl ModelDescription {
    /// The expected model's form (`expected`), with its residual terms.
    pub fn expected() -> ModelDescription {
        ModelDescription {
            time_us: "launch_us + fill + steps x max(step_us, step_bytes / rate x residual): the expected model \
                      (src/expect) on the measured machine's plan (expected_form: its links, flows, NCCL's channels \
                      per call, the protocol's steps and chunks), its other constants in expected_form.resolved"
                .into(),
            transfer_us: "rate = min(busiest link's rate x wire efficiency x link_efficiency / its flows, \
                          channel_gbs) per channel; residual = (1 + (ramp2_bytes / bytes)^ramp2_exponent) / (1 + \
                          (cache_speedup - 1) / (1 + exp(-log2(cache_bytes / bytes) / cache_width_octaves))); \
                          latency_us and bandwidth_gbs of a pair are the form's time at 8 B and its rate at 1 TiB \
                          (for reading, not used)"
                .into(),
            fit: "per (collective, algorithm, protocol): median time per size (at most 256 log-spaced bins); \
                  soft-L1 loss (scale 2 %) on ln(predicted / measured) plus a weak pull of each physical constant \
                  towards the expected model's own (ln, weight 0.5 x the loss scale), Levenberg-Marquardt from \
                  the expected model's constants and four starts around them"
                .into(),
            terms: "physical (launch_us, step_us, channel_gbs, link_efficiency) from 4 sizes; then measured_ratio: \
                    [bytes, measured / form] at each fitted size, the time multiplied by it interpolated linearly in \
                    ln over log2(bytes), the nearest beyond the fitted sizes (the empirical terms ramp2 and cache \
                    were tried as residuals kept by BIC and extrapolated worse: ramp2_bytes 0, cache_bytes 0)"
                .into(),
        }
    }

    pub(crate) fn current() -> ModelDescription {
        ModelDescription {
            time_us: "(latency_us^overlap + transfer_us^overlap)^(1/overlap)".into(),
            transfer_us: "bytes / (1000 * bandwidth_gbs) * (1 + (ramp_bytes / bytes)^ramp_exponent \
                          + (ramp2_bytes / bytes)^ramp2_exponent) / (1 + (cache_speedup - 1) \
                          / (1 + exp(-log2(cache_bytes / bytes) / cache_width_octaves)))"
                .into(),
            fit: "per (collective, algorithm, protocol): median time per size; soft-L1 loss (scale 2 %) on \
                  ln(predicted / measured), Levenberg-Marquardt from a grid of starts"
                .into(),
            terms: "latency and bandwidth (NCCL's form) from 2 sizes; overlap from 5; ramp from 10; \
                    ramp2 (a second, slower ramp) and cache (the L2 step) tried from 20, kept where BIC \
                    says they pay. Without a term: ramp_bytes 0, overlap 1, ramp2_bytes 0, cache_bytes 0"
                .into(),
        }
    }
}

/// One input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRef {
    pub(crate) path: String,
    pub(crate) format: String,
    /// FNV-1a 64 of the file's bytes, hex.
    pub fnv1a64: String,
    pub(crate) rows: usize,
    /// Rows of the calibrated backend with a known pair.
    pub rows_used: usize,
}

/// The fitted parameters of one (collective, algorithm, protocol).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairFit {
    #[serde(rename = "collective")]
    pub coll: Coll,
    #[serde(rename = "algorithm")]
    pub algo: AnyAlgo,
    #[serde(rename = "protocol")]
    pub proto: Proto,
    #[serde(flatten)]
    pub params: PairParams,
    /// On the expected form: the fitted physical constants (`params` then holds the residual terms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<Physical>,
    /// On the expected form: [bytes, measured / form] at the fitted sizes (`expected::ratio_at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured_ratio: Vec<[f64; 2]>,
    /// The terms fitted ("latency", "bandwidth", "ramp", "overlap").
    pub terms: Vec<String>,
    /// Distinct sizes fitted, and their range.
    pub sizes: usize,
    pub(crate) min_bytes: u64,
    pub(crate) max_bytes: u64,
    /// |predicted - measured| / measured on the fitted sizes.
    pub fit: Option<ErrorStats>,
    /// The same on held-out size bands (k-fold by size).
    pub cv: Option<ErrorStats>,
}

impl PairFit {
    pub fn pair(&self) -> Pair {
        Pair::new(self.algo, self.proto)
    }

    /// The calibrated time at `bytes` (µs) on the calibration's form (`basis`: its `expected_form`).
    #[inline]
    pub fn time_us(&self, bytes: u64, basis: Option<&FormBasis>) -> Option<f64> {
        match (&self.physical, basis) {
            (Some(phys), Some(b)) => b.time_us(
                self.coll,
                self.pair(),
                phys,
                &self.params,
                &self.measured_ratio,
                bytes,
            ),
            (Some(_), None) => None,
            (None, _) => Some(self.params.time_us(bytes as f64)),
        }
    }
}

/// The k-fold summary kept in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationCv {
    pub(crate) method: String,
    pub regimes: Vec<RegimeRow>,
}

/// A fitted model of one machine and one backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: String,
    pub version: u32,
    pub planner_version: String,
    pub created_unix: u64,
    /// Whose times: NCCL's, or the native kernels'.
    pub backend: Backend,
    pub machine: MachineInfo,
    /// "empirical" (every version-1 file) or "expected" (`FORM_EXPECTED`).
    #[serde(default = "empirical")]
    pub form: String,
    pub model: ModelDescription,
    /// On the expected form: the measured machine as the form evaluates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_form: Option<FormBasis>,
    pub sources: Vec<SourceRef>,
    pub pairs: Vec<PairFit>,
    pub cross_validation: Option<CalibrationCv>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// Where it was read from (messages only).
    #[serde(skip)]
    pub(crate) source: String,
}

impl Calibration {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        backend: Backend,
        mut machine: MachineInfo,
        model: ModelDescription,
        sources: Vec<SourceRef>,
        pairs: Vec<PairFit>,
        regimes: Option<Vec<RegimeRow>>,
        notes: Vec<String>,
    ) -> Calibration {
        machine.topology_hash_covers = TOPOLOGY_HASH_COVERS.to_string();
        Calibration {
            format: CALIBRATION_FORMAT.to_string(),
            version: CALIBRATION_VERSION,
            planner_version: env!("CARGO_PKG_VERSION").to_string(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            backend,
            machine,
            form: FORM_EMPIRICAL.to_string(),
            model,
            expected_form: None,
            sources,
            pairs,
            cross_validation: regimes.map(|regimes| CalibrationCv {
                method: "k-fold by size: the sizes split into contiguous bands, each band predicted by a fit \
                         on the others"
                    .into(),
                regimes,
            }),
            notes,
            source: String::new(),
        }
    }

    /// Calibrated time of one call, µs; None for a pair that was not fitted.
    /// Outside `min_bytes..=max_bytes` of the pair it extrapolates.
    #[inline]
    pub fn predict_us(
        &self,
        coll: Coll,
        algo: impl Into<AnyAlgo>,
        proto: Proto,
        bytes: u64,
    ) -> Option<f64> {
        let algo = algo.into();
        self.pairs
            .iter()
            .find(|p| p.coll == coll && p.algo == algo && p.proto == proto)
            .and_then(|p| p.time_us(bytes, self.expected_form.as_ref()))
    }

    /// The fitted pair with the lowest calibrated time, among `candidates`
    /// (all fitted pairs of `coll` when empty).
    pub fn pick(&self, coll: Coll, bytes: u64, candidates: &[Pair]) -> Option<(Pair, f64)> {
        self.pairs
            .iter()
            .filter(|p| p.coll == coll && (candidates.is_empty() || candidates.contains(&p.pair())))
            .filter_map(|p| Some((p.pair(), p.time_us(bytes, self.expected_form.as_ref())?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Refuse (bad input, one line) to apply this calibration to a machine
    /// whose topology hash or GPU count differ, unless `force`. A fact the
    /// calibration does not record cannot differ.
    pub fn check_applies(&self, topology_hash: &str, gpu_count: usize, force: bool) -> Result<()> {
        if force {
            return Ok(());
        }
        let name = if self.source.is_empty() {
            "the calibration".to_string()
        } else {
            self.source.clone()
        };
        if let Some(h) = &self.machine.topology_hash {
            if h != topology_hash {
                return Err(Error::bad_input(format!(
                    "{name} was measured on topology {h}, this one is {topology_hash}: not the same machine \
                     (--force to apply it anyway)"
                )));
            }
        }
        if let Some(n) = self.machine.gpu_count {
            if n != gpu_count {
                return Err(Error::bad_input(format!(
                    "{name} was measured on {n} GPUs, this run has {gpu_count} (--force to apply it anyway)"
                )));
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Error::runtime(format!("cannot serialise the calibration: {e}")))
    }

    /// Read a calibration file, checking its format and version.
    pub fn from_json(text: &str, source: &str) -> Result<Calibration> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::bad_input(format!(
                "{source}:{}:{}: not a calibration file: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let format = value.get("format").and_then(|f| f.as_str());
        if format != Some(CALIBRATION_FORMAT) {
            return Err(Error::bad_input(format!(
                "{source}: not a calibration file (format is {}, expected \"{CALIBRATION_FORMAT}\")",
                format
                    .map(|f| format!("\"{f}\""))
                    .unwrap_or_else(|| "missing".into())
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64());
        if !version.is_some_and(|v| READABLE_VERSIONS.iter().any(|r| u64::from(*r) == v)) {
            return Err(Error::bad_input(format!(
                "{source}: calibration version {} is not supported (this planner reads versions 1 and {CALIBRATION_VERSION})",
                version
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "missing".into())
            )));
        }
        // Every string is echoed by --load / the reports: no control character or escape sequence reaches a terminal.
        let mut value = value;
        crate::fsio::printable_strings(&mut value, &[]);
        let mut cal: Calibration = serde_json::from_value(value)
            .map_err(|e| Error::bad_input(format!("{source}: bad calibration file: {e}")))?;
        for p in &cal.pairs {
            check_params(&p.params).map_err(|why| {
                Error::bad_input(format!(
                    "{source}: {} {}/{}: parameters out of range: {why}",
                    p.coll.nccl_name(),
                    p.algo.name(),
                    p.proto.nccl_name()
                ))
            })?;
        }
        match (cal.form.as_str(), &cal.expected_form) {
            (FORM_EMPIRICAL, _) => {
                if cal.pairs.iter().any(|p| p.physical.is_some()) {
                    return Err(Error::bad_input(format!(
                        "{source}: form \"{FORM_EMPIRICAL}\" with a pair's physical constants: not a file calibrate wrote"
                    )));
                }
            }
            (FORM_EXPECTED, Some(b)) => b.check(source)?,
            (FORM_EXPECTED, None) => {
                return Err(Error::bad_input(format!(
                    "{source}: form \"{FORM_EXPECTED}\" without expected_form"
                )))
            }
            (other, _) => {
                return Err(Error::bad_input(format!(
                    "{source}: form \"{other}\" is not one this planner reads (\"{FORM_EMPIRICAL}\", \"{FORM_EXPECTED}\")"
                )))
            }
        }
        for p in &cal.pairs {
            if let Some(q) = &p.physical {
                let ok = [q.launch_us, q.step_us, q.channel_gbs, q.link_efficiency]
                    .iter()
                    .all(|v| v.is_finite() && *v > 0.0);
                if !ok {
                    return Err(Error::bad_input(format!(
                        "{source}: {} {}/{}: physical constants out of range ({q:?})",
                        p.coll.nccl_name(),
                        p.algo.name(),
                        p.proto.nccl_name()
                    )));
                }
            }
        }
        cal.source = source.to_string();
        Ok(cal)
    }

    pub fn load(path: &str) -> Result<Calibration> {
        let text = crate::units::read_input_file(path)?;
        Calibration::from_json(&text, path)
    }

    pub fn save(&self, path: &str) -> Result<()> {
        crate::fsio::write_output(path, (self.to_json()? + "\n").as_bytes())
    }
}

/// Each parameter of a fitted pair against physics, naming the field: finite, and inside a range wide enough for
/// any machine (a latency up to 1,000 s, a bandwidth of 1 kB/s to 10 PB/s, ramp and cache sizes up to 10^15 B,
/// exponents up to 16, an overlap of 1 to 64, a cache factor of 1/1000 to 1000, a step 1/1000 to 64 octaves
/// wide). Inside these ranges the time of every size from 1 B to 1 TiB is a finite positive number, which is
/// checked at each power of two as well: a file with finite but absurd values would otherwise print inf or NaN.
fn check_params(q: &PairParams) -> std::result::Result<(), String> {
    let fields = [
        ("latency_us", q.latency_us, 0.0, 1e9),
        ("bandwidth_gbs", q.bandwidth_gbs, 1e-6, 1e7),
        ("ramp_bytes", q.ramp_bytes, 0.0, 1e15),
        ("ramp_exponent", q.ramp_exponent, 0.0, 16.0),
        ("overlap", q.overlap, 1.0, 64.0),
        ("ramp2_bytes", q.ramp2_bytes, 0.0, 1e15),
        ("ramp2_exponent", q.ramp2_exponent, 0.0, 16.0),
        ("cache_bytes", q.cache_bytes, 0.0, 1e15),
        ("cache_speedup", q.cache_speedup, 1e-3, 1e3),
        ("cache_width_octaves", q.cache_width_octaves, 1e-3, 64.0),
    ];
    for (name, value, lo, hi) in fields {
        if !(lo..=hi).contains(&value) {
            return Err(format!(
                "{name} {} is outside {}..{}",
                crate::limits::short_number(value),
                crate::limits::short_number(lo),
                crate::limits::short_number(hi)
            ));
        }
    }
    for shift in 0..=40 {
        let bytes = (1u64 << shift) as f64;
        let t = q.time_us(bytes);
        if !(t.is_finite() && t > 0.0) {
            return Err(format!(
                "the parameters give {} µs at {} B (a time is finite and above 0)",
                crate::limits::short_number(t),
                1u64 << shift
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The topology hash

/// A PCI bus id in one spelling: domain as 8 hex digits, lower case
/// (NCCL writes `0000:00:06.0` for a GPU and `fffffff:ff:ff.0` for an
/// NVSwitch it cannot see).
fn normal_bus_id(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) => match u64::from_str_radix(domain, 16) {
            Ok(d) => format!("{d:08x}:{rest}"),
            Err(_) => id,
        },
        None => id,
    }
}

const DROPPED: [(&str, &str); 6] = [
    ("cpu", "host_hash"),
    ("cpu", "affinity"),
    ("pci", "busid"),
    ("net", "name"),
    ("net", "guid"),
    ("*", "target"),
];

fn canonical_node(node: &xml::XmlNode, gpu_of_bus: &BTreeMap<String, String>) -> String {
    let mut attrs: Vec<(String, String)> = Vec::new();
    for (k, v) in &node.attrs {
        if k == "target" {
            if let Some(dev) = gpu_of_bus.get(&normal_bus_id(v)) {
                attrs.push(("target_gpu".into(), dev.clone()));
            }
            continue;
        }
        if DROPPED
            .iter()
            .any(|(n, a)| (*n == node.name || *n == "*") && a == k)
        {
            continue;
        }
        attrs.push((k.clone(), v.trim().to_string()));
    }
    attrs.sort();
    let mut children: Vec<String> = node
        .children
        .iter()
        .map(|c| canonical_node(c, gpu_of_bus))
        .collect();
    children.sort();
    let attrs: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "{}({}){{{}}}",
        node.name,
        attrs.join(","),
        children.join(";")
    )
}

fn canonical_of_root(root: &xml::XmlNode) -> String {
    // GPU bus ids -> "dev" of the GPU under that pci node.
    let mut gpu_of_bus = BTreeMap::new();
    for node in root.descendants() {
        if node.name == "pci" {
            if let (Some(bus), Some(gpu)) = (node.attr("busid"), node.children_named("gpu").next())
            {
                let dev = gpu.attr("dev").unwrap_or("?").to_string();
                gpu_of_bus.insert(normal_bus_id(bus), dev);
            }
        }
    }
    canonical_node(root, &gpu_of_bus)
}

/// FNV-1a 64 (hex) of `canonical_topology`: equal for two dumps of machines
/// of the same kind, whatever their host hashes, bus numbering or NIC names.
pub fn topology_hash(xml_text: &str, source: &str) -> Result<String> {
    Ok(topology_hash_of_root(&xml::parse(xml_text, source)?))
}

/// `topology_hash` of an XML tree already read (a loaded topology keeps its
/// own: `Topology::xml`).
pub fn topology_hash_of_root(root: &xml::XmlNode) -> String {
    let canonical = canonical_of_root(root);
    format!("{:016x}", fnv1a64(canonical.as_bytes()))
}
