//! The expected model's constants as data: one file per GPU class, link class and network kind, and one of the
//! host's side of a call (`tuning-tables/expect/*.json`, embedded), each constant with its unit and source. A file is checked against
//! its header and against physics (times and sizes > 0, bandwidths finite and > 0, fractions in (0, 1]).

use crate::error::{Error, Result};
use serde_json::Value;

/// The files built into the binary (a fresh clone and an installed binary work the same).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "gpu-sm80.json",
        include_str!("../../tuning-tables/expect/gpu-sm80.json"),
    ),
    (
        "gpu-sm89.json",
        include_str!("../../tuning-tables/expect/gpu-sm89.json"),
    ),
    (
        "gpu-sm90.json",
        include_str!("../../tuning-tables/expect/gpu-sm90.json"),
    ),
    (
        "gpu-sm100.json",
        include_str!("../../tuning-tables/expect/gpu-sm100.json"),
    ),
    (
        "gpu-sm120.json",
        include_str!("../../tuning-tables/expect/gpu-sm120.json"),
    ),
    (
        "link-nvlink3.json",
        include_str!("../../tuning-tables/expect/link-nvlink3.json"),
    ),
    (
        "link-nvlink4.json",
        include_str!("../../tuning-tables/expect/link-nvlink4.json"),
    ),
    (
        "link-nvlink5.json",
        include_str!("../../tuning-tables/expect/link-nvlink5.json"),
    ),
    (
        "link-pcie.json",
        include_str!("../../tuning-tables/expect/link-pcie.json"),
    ),
    (
        "link-inter-socket.json",
        include_str!("../../tuning-tables/expect/link-inter-socket.json"),
    ),
    (
        "link-host-memory.json",
        include_str!("../../tuning-tables/expect/link-host-memory.json"),
    ),
    (
        "link-c2c.json",
        include_str!("../../tuning-tables/expect/link-c2c.json"),
    ),
    (
        "net-ib.json",
        include_str!("../../tuning-tables/expect/net-ib.json"),
    ),
    (
        "net-roce.json",
        include_str!("../../tuning-tables/expect/net-roce.json"),
    ),
    (
        "net-efa.json",
        include_str!("../../tuning-tables/expect/net-efa.json"),
    ),
    (
        "net-tcpx.json",
        include_str!("../../tuning-tables/expect/net-tcpx.json"),
    ),
    (
        "net-socket.json",
        include_str!("../../tuning-tables/expect/net-socket.json"),
    ),
    (
        "protocols.json",
        include_str!("../../tuning-tables/expect/protocols.json"),
    ),
    (
        "host.json",
        include_str!("../../tuning-tables/expect/host.json"),
    ),
    (
        "bands.json",
        include_str!("../../tuning-tables/expect/bands.json"),
    ),
];

pub(crate) const FORMAT: &str = "planner-expect-params";

/// The unit of a constant, which says what physics allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Us,
    Gbs,
    Fraction,
    Bytes,
    Count,
}

impl Unit {
    fn parse(text: &str) -> Option<Unit> {
        Some(match text {
            "us" => Unit::Us,
            "GB/s" => Unit::Gbs,
            "fraction" => Unit::Fraction,
            "bytes" => Unit::Bytes,
            "count" => Unit::Count,
            _ => return None,
        })
    }
    fn allows(self, v: f64) -> bool {
        v.is_finite()
            && v > 0.0
            && match self {
                Unit::Fraction => v <= 1.0,
                Unit::Bytes | Unit::Count => v.fract() == 0.0,
                Unit::Us | Unit::Gbs => true,
            }
    }
    fn what(self) -> &'static str {
        match self {
            Unit::Us => "a time in us, > 0",
            Unit::Gbs => "a bandwidth in GB/s, finite and > 0",
            Unit::Fraction => "a fraction in (0, 1]",
            Unit::Bytes => "a whole number of bytes, > 0",
            Unit::Count => "a whole count, > 0",
        }
    }
}

/// One constant.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub(crate) name: String,
    pub(crate) value: f64,
    /// Where a fit starts and what it is pulled towards: the spec or measured value (the value, before a fit).
    pub(crate) prior: f64,
    pub(crate) unit: Unit,
    /// `planner expect --fit` may change it.
    pub(crate) fit: bool,
    pub(crate) source: String,
}

/// One file: a GPU class, a link class, a network kind, the protocols, or the bands.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamFile {
    pub(crate) file: String,
    pub(crate) kind: String,
    pub(crate) class: String,
    pub description: String,
    pub params: Vec<Param>,
}

/// Every file the model reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub(crate) files: Vec<ParamFile>,
}

/// What each file must hold (kind, class) -> names; checked on load so a typo is named, not ignored.
fn required(kind: &str) -> &'static [&'static str] {
    match kind {
        "gpu" => &[
            "launch_eager_us",
            "launch_graph_us",
            "hop_ll_us",
            "hop_ll128_us",
            "hop_simple_us",
            "step_ll_us",
            "step_ll128_us",
            "step_simple_us",
            "channel_ll_gbs",
            "channel_ll128_gbs",
            "channel_simple_gbs",
            "nvls_efficiency",
            "nvls_tree_efficiency",
            "nvls_hop_us",
            "reduce_efficiency",
        ],
        "net" => &["efficiency", "hop_us", "step_us"],
        "host" => &["launch_per_extra_gpu_us"],
        "protocol" => &[
            "steps",
            "ll_step_bytes",
            "ll128_step_bytes",
            "simple_step_bytes",
            "nvls_chunk_bytes",
            "nvls_tree_max_chunk_bytes",
            "ll_wire_efficiency",
            "ll128_wire_efficiency",
            "simple_wire_efficiency",
        ],
        _ => &[],
    }
}

fn link_required(class: &str) -> &'static [&'static str] {
    match class {
        "nvlink3" | "nvlink4" | "nvlink5" => &["lane_gbs", "efficiency"],
        "pcie" | "c2c" => &["efficiency"],
        "inter-socket" => &["intel_gbs", "amd_gbs", "other_gbs"],
        "host-memory" => &["staging_gbs"],
        _ => &[],
    }
}

impl Params {
    /// The built-in files.
    pub fn builtin() -> Result<Params> {
        let files = BUILTIN
            .iter()
            .map(|(name, text)| ParamFile::parse(text, &format!("tuning-tables/expect/{name}")))
            .collect::<Result<Vec<_>>>()?;
        Params::checked(files)
    }

    /// The files of a directory: every built-in name must be there (the same set, so nothing is silently mixed).
    pub(crate) fn load_dir(dir: &str) -> Result<Params> {
        let mut files = Vec::new();
        for (name, _) in BUILTIN {
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            let text = crate::units::read_input_file(&path)?;
            files.push(ParamFile::parse(&text, &path)?);
        }
        Params::checked(files)
    }

    fn checked(files: Vec<ParamFile>) -> Result<Params> {
        for f in &files {
            let names: &[&str] = if f.kind == "link" {
                link_required(&f.class)
            } else {
                required(&f.kind)
            };
            for n in names {
                if !f.params.iter().any(|p| p.name == *n) {
                    return Err(Error::bad_input(format!(
                        "{}: missing the constant '{n}' (a {} file needs {})",
                        f.file,
                        f.kind,
                        names.join(", ")
                    )));
                }
            }
        }
        Ok(Params { files })
    }

    pub fn file(&self, kind: &str, class: &str) -> Option<&ParamFile> {
        self.files
            .iter()
            .find(|f| f.kind == kind && f.class == class)
    }

    /// A constant's value; 0 where it is absent (never for a checked set and a required name).
    pub fn get(&self, kind: &str, class: &str, name: &str) -> f64 {
        self.file(kind, class)
            .and_then(|f| f.params.iter().find(|p| p.name == name))
            .map(|p| p.value)
            .unwrap_or(0.0)
    }

    /// (file index, param index) of every constant `--fit` may change.
    pub(crate) fn fit_slots(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            for (j, p) in f.params.iter().enumerate() {
                if p.fit {
                    out.push((i, j));
                }
            }
        }
        out
    }

    /// The files as JSON, their order and sources kept, values replaced by this set's (what `--fit --write` saves).
    pub(crate) fn to_json(&self, file_index: usize, original: &str) -> Result<String> {
        let f = &self.files[file_index];
        let mut v: Value = serde_json::from_str(original)
            .map_err(|e| Error::runtime(format!("{}: {e}", f.file)))?;
        if let Some(obj) = v.get_mut("params").and_then(Value::as_object_mut) {
            for p in f.params.iter().filter(|p| p.fit || f.kind == "bands") {
                if let Some(entry) = obj.get_mut(&p.name).and_then(Value::as_object_mut) {
                    let round = |v: f64| (v * 1e4).round() / 1e4;
                    entry.insert("value".into(), Value::from(round(p.value)));
                    if p.fit {
                        entry.insert("prior".into(), Value::from(round(p.prior)));
                    }
                }
            }
        }
        serde_json::to_string_pretty(&v)
            .map(|s| s + "\n")
            .map_err(|e| Error::runtime(format!("{}: {e}", f.file)))
    }
}

impl ParamFile {
    pub(crate) fn parse(text: &str, file: &str) -> Result<ParamFile> {
        let bad = |what: String| Error::bad_input(format!("{file}: {what}"));
        let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let field = |name: &str| -> Result<&str> {
            v.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("missing the header field '{name}' (a string)")))
        };
        if field("format")? != FORMAT {
            return Err(bad(format!("format is not '{FORMAT}'")));
        }
        if v.get("version").and_then(Value::as_u64) != Some(1) {
            return Err(bad("version is not 1".to_string()));
        }
        let kind = field("kind")?.to_string();
        if !["gpu", "link", "net", "protocol", "host", "bands"].contains(&kind.as_str()) {
            return Err(bad(format!(
                "kind '{kind}' is not one of gpu, link, net, protocol, host, bands"
            )));
        }
        let class = field("class")?.to_string();
        let description = field("description")?.to_string();
        let obj = v
            .get("params")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("missing the object 'params'".to_string()))?;
        let mut params = Vec::with_capacity(obj.len());
        for (name, entry) in obj {
            let value = entry
                .get("value")
                .and_then(Value::as_f64)
                .ok_or_else(|| bad(format!("{name}: missing the number 'value'")))?;
            let unit_text = entry
                .get("unit")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("{name}: missing the string 'unit'")))?;
            let unit = Unit::parse(unit_text).ok_or_else(|| {
                bad(format!(
                    "{name}: unit '{unit_text}' is not one of us, GB/s, fraction, bytes, count"
                ))
            })?;
            if !unit.allows(value) {
                return Err(bad(format!("{name}: value {value} is not {}", unit.what())));
            }
            let source = entry
                .get("source")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| {
                    bad(format!(
                        "{name}: missing its 'source' (where the number comes from)"
                    ))
                })?
                .to_string();
            let fit = entry.get("fit").and_then(Value::as_bool).unwrap_or(false);
            let prior = match entry.get("prior") {
                None => value,
                Some(p) => p
                    .as_f64()
                    .filter(|p| unit.allows(*p))
                    .ok_or_else(|| bad(format!("{name}: prior is not {}", unit.what())))?,
            };
            params.push(Param {
                name: name.clone(),
                value,
                prior,
                unit,
                fit,
                source,
            });
        }
        Ok(ParamFile {
            file: file.to_string(),
            kind,
            class,
            description,
            params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_files_load() {
        let p = Params::builtin().unwrap();
        assert!(p.get("gpu", "sm90", "launch_eager_us") > 0.0);
        assert_eq!(p.get("protocol", "protocols", "steps"), 8.0);
    }

    #[test]
    fn bad_values_name_file_and_field() {
        let text = r#"{"format":"planner-expect-params","version":1,"kind":"net","class":"ib","description":"x",
            "params":{"efficiency":{"value":1.5,"unit":"fraction","source":"s"}}}"#;
        let e = ParamFile::parse(text, "net-ib.json").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().contains("net-ib.json: efficiency: value 1.5"),
            "{}",
            e.message()
        );
        let text = text.replace("1.5", "-1").replace("fraction", "us");
        let e = ParamFile::parse(&text, "f.json").unwrap_err();
        assert!(
            e.message().contains("is not a time in us"),
            "{}",
            e.message()
        );
        let e = ParamFile::parse("{}", "g.json").unwrap_err();
        assert!(e
            .message()
            .contains("g.json: missing the header field 'format'"));
        let text = r#"{"format":"planner-expect-params","version":1,"kind":"net","class":"ib","description":"x",
            "params":{"efficiency":{"value":0.5,"unit":"fraction","source":"s"}}}"#;
        let file = ParamFile::parse(text, "n.json").unwrap();
        let e = Params::checked(vec![file]).unwrap_err();
        assert!(
            e.message()
                .contains("n.json: missing the constant 'hop_us'"),
            "{}",
            e.message()
        );
    }
}
