//! The one way every command prints `--json`: the schema's conventions
//! (docs/json.md) applied to whatever a stage serialises, so a script reads
//! one vocabulary everywhere:
//! - a top-level object with `schema_version` first (a top-level list is
//!   wrapped under one key named for what it lists);
//! - NCCL spellings under one key each: `collective` ("AllReduce"),
//!   `algorithm` ("Ring"), `protocol` ("LL128"), path types upper case ("NVL");
//! - units in key names: `_us`, `_bytes`, `_gbs` (GB/s, 1e9 bytes/s), `_pct`;
//! - numbers as numbers, floats rounded to what was measured or computed.
//!
//! Files that commands write (verify results, calibrations, plans) keep their
//! own formats; this is what stdout carries.

use crate::error::{Error, Result};
use crate::model::Coll;
use serde_json::{Map, Number, Value};

/// Bumped when a key is renamed or removed, or a value changes meaning.
pub const SCHEMA_VERSION: u64 = 1;

/// Significant digits kept of a float that is not an f32 value: an f32 holds
/// about 7, and every time planner measures comes from f32 CUDA events.
const SIGNIFICANT_DIGITS: usize = 7;

/// A serialisable value as the schema prints it; `list_key` names a top-level
/// list (e.g. "fixtures").
pub fn render(value: &impl serde::Serialize, list_key: &str) -> Result<String> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    render_value(value, list_key)
}

/// JSON text from a stage (e.g. a calibration) as the schema prints it.
pub fn render_text(text: &str, list_key: &str) -> Result<String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    render_value(value, list_key)
}

/// The value with the schema's conventions and `schema_version`, pretty-printed.
pub fn render_value(value: Value, list_key: &str) -> Result<String> {
    let value = normalize(value, None);
    let mut top = Map::new();
    top.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k != "schema_version" {
                    top.insert(k, v);
                }
            }
        }
        other => {
            top.insert(list_key.to_string(), other);
        }
    }
    serde_json::to_string_pretty(&Value::Object(top))
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))
}

/// One key's schema name. `parent` is the key of the enclosing object or list
/// (bands carry bare `from`/`to`).
fn key_name(key: &str, parent: Option<&str>) -> String {
    let renamed = match key {
        "algo" => "algorithm",
        "proto" => "protocol",
        "coll" | "function" => "collective",
        "cpus" => "sockets",
        "size" => "size_bytes",
        "bw_intra" => "bw_intra_gbs",
        "bw_inter" => "bw_inter_gbs",
        "latency_inter" => "latency_inter_us",
        "from" | "to" | "starts_at" if parent == Some("bands") => {
            return format!("{key}_bytes");
        }
        _ => {
            if let Some(stem) = key.strip_suffix("_gbps") {
                return format!("{stem}_gbs");
            }
            if let Some(stem) = key.strip_suffix("_percent") {
                return format!("{stem}_pct");
            }
            key
        }
    };
    renamed.to_string()
}

/// A string value under `key` in the schema's spelling.
fn string_value(key: &str, parent: Option<&str>, text: String) -> Value {
    match key {
        // NCCL's spelling whatever the stage wrote ("allreduce", "all-reduce").
        "collective" => match Coll::parse(&text) {
            Ok(c) => Value::from(c.nccl_name()),
            Err(_) => Value::from(text),
        },
        // Path and link types as NCCL prints them (NVL, PIX, PHB, SYS, NET).
        "type" | "type_intra" | "type_inter" => Value::from(text.to_ascii_uppercase()),
        // Audit compares values as text; a number stays a number.
        _ if is_audit_value(key, parent) => match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Number::from_f64(v).map_or(Value::from(text), Value::Number),
            _ => Value::from(text),
        },
        _ => Value::from(text),
    }
}

/// A float rounded to what it holds: an f32 value (the model's tables, CUDA
/// event times) to its shortest f32 spelling (370.8, not 370.79998779296875),
/// anything else to `SIGNIFICANT_DIGITS`.
pub fn round_float(v: f64) -> f64 {
    if !v.is_finite() || v == v.trunc() {
        return v;
    }
    let single = v as f32;
    let text = if single as f64 == v {
        format!("{single}")
    } else {
        format!("{:.*e}", SIGNIFICANT_DIGITS - 1, v)
    };
    text.parse().unwrap_or(v)
}

fn number(v: f64) -> Value {
    Number::from_f64(round_float(v))
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// A compared value of an audit difference (`differences[].nccl` / `.planner`).
fn is_audit_value(key: &str, parent: Option<&str>) -> bool {
    matches!(key, "nccl" | "planner") && parent == Some("differences")
}

fn normalize(value: Value, parent: Option<&str>) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = key_name(&k, parent);
                let v = match v {
                    Value::String(s) => string_value(&key, parent, s),
                    // Audit's values carry the digits the log or the model printed: rounding
                    // would change NCCL's 25.229528 into 25.22953.
                    Value::Number(n) if is_audit_value(&key, parent) => Value::Number(n),
                    other => normalize(other, Some(&key)),
                };
                out.insert(key, v);
            }
            Value::Object(out)
        }
        // Elements of a list keep the list's key as their parent.
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| normalize(item, parent))
                .collect(),
        ),
        Value::Number(n) if n.is_f64() => n.as_f64().map(number).unwrap_or(Value::Number(n)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_round_to_what_they_hold() {
        assert_eq!(round_float(370.8f32 as f64), 370.8);
        assert_eq!(round_float(5.737600103020668), 5.7376);
        assert_eq!(round_float(0.4666666666666667), 0.4666667);
        assert_eq!(round_float(2097152.0), 2097152.0);
    }

    #[test]
    fn one_spelling_per_concept() {
        let v = json!({
            "cpus": 2,
            "pair": {"algo": "Ring", "proto": "LL"},
            "coll": "allreduce",
            "entries": [{"function": "all-reduce", "bandwidth_gbps": 1.5}],
            "bands": [{"from": 8, "to": 16}],
            "steps": [{"from": 1, "to": 2}],
            "type_intra": "Nvl",
            "differences": [{"nccl": "19.5", "planner": "Ring/LL"}],
            "gain_percent": 3.0,
        });
        let text = render_value(v, "x").unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            json!({
                "schema_version": SCHEMA_VERSION,
                "sockets": 2,
                "pair": {"algorithm": "Ring", "protocol": "LL"},
                "collective": "AllReduce",
                "entries": [{"collective": "AllReduce", "bandwidth_gbs": 1.5}],
                "bands": [{"from_bytes": 8, "to_bytes": 16}],
                "steps": [{"from": 1, "to": 2}],
                "type_intra": "NVL",
                "differences": [{"nccl": 19.5, "planner": "Ring/LL"}],
                "gain_pct": 3.0,
            })
        );
        assert!(text.starts_with("{\n  \"schema_version\": 1,"), "{text}");
    }

    #[test]
    fn audit_values_keep_the_digits_printed() {
        // NCCL printed 25.229528 (issue 1453's log); 7 significant digits would make it 25.22953.
        let v =
            json!({"differences": [{"nccl": 25.229528, "planner": "25.229528"}], "t": 25.229528});
        let back: Value = serde_json::from_str(&render_value(v, "x").unwrap()).unwrap();
        assert_eq!(back["differences"][0]["nccl"], 25.229528);
        assert_eq!(back["differences"][0]["planner"], 25.229528);
        assert_eq!(back["t"], 25.22953);
    }

    #[test]
    fn top_level_lists_are_wrapped() {
        let text = render_value(json!([1, 2]), "calls").unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            json!({"schema_version": SCHEMA_VERSION, "calls": [1, 2]})
        );
    }
}
