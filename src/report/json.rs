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
pub(crate) const SCHEMA_VERSION: u64 = 1;

/// Significant digits kept of a float that is not an f32 value: an f32 holds
/// about 7, and every time planner measures comes from f32 CUDA events.
const SIGNIFICANT_DIGITS: usize = 7;

/// A serialisable value as the schema prints it; `list_key` names a top-level
/// list (e.g. "fixtures").
pub(crate) fn render(value: &impl serde::Serialize, list_key: &str) -> Result<String> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    render_value(value, list_key)
}

/// JSON text from a stage (e.g. a calibration) as the schema prints it.
pub(crate) fn render_text(text: &str, list_key: &str) -> Result<String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    render_value(value, list_key)
}

/// The value with the schema's conventions and `schema_version`, pretty-printed.
pub fn render_value(value: Value, list_key: &str) -> Result<String> {
    serde_json::to_string_pretty(&document(value, list_key))
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))
}

/// The value with the schema's conventions and `schema_version` first.
fn document(value: Value, list_key: &str) -> Value {
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
    Value::Object(top)
}

/// A list too long to hold as one `Value` (`topo --json` at 576 GPUs x 576 NICs has 663,552 paths and a
/// 1152 x 1152 matrix): the document carries `Placeholder(i)` where the list goes, and `write_streamed`
/// writes `lists[i]` there item by item.
pub(crate) struct StreamedList<'a> {
    pub(crate) len: usize,
    /// Item `i` (0..len) as the stage serialises it; the schema's conventions are applied per item.
    pub(crate) item: Box<dyn Fn(usize) -> serde_json::Result<Value> + 'a>,
    /// Optional, for lists of hundreds of thousands of items already in the schema's form (its keys and
    /// spellings, floats through `round_float`): item `i` pretty-printed into the buffer straight from its type,
    /// a `Value` and its allocations saved. Every `CHECKED_EVERY`-th item and the last are checked against
    /// `item` with the conventions applied; a difference fails the write.
    pub(crate) text: Option<ItemText<'a>>,
}

/// See `StreamedList::text`.
pub(crate) type ItemText<'a> = Box<dyn Fn(usize, &mut Vec<u8>) -> serde_json::Result<()> + 'a>;

/// How often `write_streamed` checks `StreamedList::text` against `StreamedList::item`.
const CHECKED_EVERY: usize = 1000;

/// Stands in for `lists[index]` of `write_streamed` in the document; serialises as a marker string.
pub(crate) struct Placeholder(pub(crate) usize);

impl serde::Serialize for Placeholder {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&placeholder_marker(self.0))
    }
}

/// Control characters and upper case: no topology or stage string looks like it, and the schema's
/// conventions (upper-casing `type`) leave it as it is.
fn placeholder_marker(index: usize) -> String {
    format!("\u{1}PLANNER STREAMED LIST {index}\u{1}")
}

/// What `render` prints followed by a newline, written to `out` with each `Placeholder(i)` in `value` replaced
/// by `lists[i]`: the same bytes as `render` of the document with the lists in place, without building them.
/// Each item gets the conventions its list's key gives it (`normalize` with that key as parent).
pub(crate) fn write_streamed(
    out: &mut dyn std::io::Write,
    value: &impl serde::Serialize,
    list_key: &str,
    lists: &[StreamedList],
) -> std::io::Result<()> {
    let doc = document(serde_json::to_value(value)?, list_key);
    // Each placeholder's parent key, as `normalize` gives it to the list's items, and how often it occurs.
    let mut found: Vec<(Option<String>, usize)> = vec![(None, 0); lists.len()];
    find_placeholders(&doc, None, &mut found);
    let head = serde_json::to_string_pretty(&doc)?;
    let mut places = Vec::with_capacity(lists.len());
    for (index, (_, count)) in found.iter().enumerate() {
        let quoted = serde_json::to_string(&placeholder_marker(index))?;
        match head.find(&quoted) {
            Some(at) if *count == 1 => places.push((at, quoted.len(), index)),
            _ => {
                return Err(std::io::Error::other(format!(
                    "JSON list {index}: {count} placeholders in the document, not one"
                )))
            }
        }
    }
    places.sort_unstable();
    let mut written = 0;
    for (at, marker_len, index) in places {
        let before = &head[written..at];
        out.write_all(before.as_bytes())?;
        // The list's own line sets its indent (serde_json's pretty printer: two spaces a level).
        let line = &head[head[..at].rfind('\n').map_or(0, |i| i + 1)..at];
        let indent = line.len() - line.trim_start_matches(' ').len();
        write_list(out, &lists[index], found[index].0.as_deref(), indent)?;
        written = at + marker_len;
    }
    out.write_all(&head.as_bytes()[written..])?;
    out.write_all(b"\n")
}

fn find_placeholders(value: &Value, parent: Option<&str>, found: &mut [(Option<String>, usize)]) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                find_placeholders(v, Some(key), found);
            }
        }
        Value::Array(items) => {
            for item in items {
                find_placeholders(item, parent, found);
            }
        }
        Value::String(s) if s.starts_with('\u{1}') => {
            if let Some(slot) = (0..found.len())
                .find(|&i| *s == placeholder_marker(i))
                .and_then(|i| found.get_mut(i))
            {
                *slot = (parent.map(str::to_string), slot.1 + 1);
            }
        }
        _ => {}
    }
}

/// `[`, the items one per line at `indent + 2` as `to_string_pretty` places them, `]` at `indent`.
fn write_list(
    out: &mut dyn std::io::Write,
    list: &StreamedList,
    parent: Option<&str>,
    indent: usize,
) -> std::io::Result<()> {
    if list.len == 0 {
        return out.write_all(b"[]");
    }
    let item_indent = " ".repeat(indent + 2);
    let mut text = Vec::new();
    out.write_all(b"[")?;
    for i in 0..list.len {
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        out.write_all(item_indent.as_bytes())?;
        text.clear();
        let by_value = |i| -> serde_json::Result<Vec<u8>> {
            serde_json::to_vec_pretty(&normalize((list.item)(i)?, parent))
        };
        match &list.text {
            Some(write_text) => {
                write_text(i, &mut text)?;
                if i % CHECKED_EVERY == 0 || i + 1 == list.len {
                    let expected = by_value(i)?;
                    if expected != text {
                        return Err(std::io::Error::other(format!(
                            "JSON list item {i}: {} is not the schema's {}",
                            String::from_utf8_lossy(&text),
                            String::from_utf8_lossy(&expected)
                        )));
                    }
                }
            }
            None => text = by_value(i)?,
        }
        // serde_json escapes newlines inside strings: each newline it writes starts a line of the structure.
        let mut lines = text.split(|&b| b == b'\n');
        if let Some(first) = lines.next() {
            out.write_all(first)?;
        }
        for line in lines {
            out.write_all(b"\n")?;
            out.write_all(item_indent.as_bytes())?;
            out.write_all(line)?;
        }
    }
    out.write_all(b"\n")?;
    out.write_all(&item_indent.as_bytes()[2..])?;
    out.write_all(b"]")
}

/// One key's schema name. `parent` is the key of the enclosing object or list
/// (bands carry bare `from`/`to`).
fn key_name<'k>(key: &'k str, parent: Option<&str>) -> std::borrow::Cow<'k, str> {
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
            return format!("{key}_bytes").into();
        }
        _ => {
            if let Some(stem) = key.strip_suffix("_gbps") {
                return format!("{stem}_gbs").into();
            }
            if let Some(stem) = key.strip_suffix("_percent") {
                return format!("{stem}_pct").into();
            }
            key
        }
    };
    renamed.into()
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

/// The value of `key` (already the schema's name) in an object under `parent`.
fn member(key: &str, parent: Option<&str>, value: Value) -> Value {
    match value {
        Value::String(s) => string_value(key, parent, s),
        // Audit's values carry the digits the log or the model printed: rounding
        // would change NCCL's 25.229528 into 25.22953.
        Value::Number(n) if is_audit_value(key, parent) => Value::Number(n),
        other => normalize(other, Some(key)),
    }
}

fn normalize(value: Value, parent: Option<&str>) -> Value {
    match value {
        // No key renamed (most objects): the values changed in place, no new map.
        Value::Object(mut map) if map.keys().all(|k| key_name(k, parent) == k.as_str()) => {
            for (key, v) in map.iter_mut() {
                *v = member(key, parent, std::mem::take(v));
            }
            Value::Object(map)
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = key_name(&k, parent).into_owned();
                let v = member(&key, parent, v);
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

    fn streamed(values: Vec<Value>) -> StreamedList<'static> {
        StreamedList {
            len: values.len(),
            item: Box::new(move |i| Ok(values[i].clone())),
            text: None,
        }
    }

    #[test]
    fn streamed_lists_write_what_render_writes() {
        // Lists at the top, nested two levels down, empty, of lists, and of objects the conventions change.
        let items = vec![
            json!({"algo": "ring", "type": "nvl", "bw_gbps": 0.4666666666666667, "hops": 2}),
            json!({"coll": "allreduce", "nested": {"size": 8, "list": [1.5, "x"]}}),
        ];
        let rows = vec![json!(["X", "NV18"]), json!(["NV18", "X"])];
        let whole = json!({
            "source": "s",
            "entries": items.clone(),
            "matrix": {"columns": ["GPU0", "GPU1"], "rows": rows.clone(), "legend": []},
            "none": [],
            "after": {"k": 1},
        });
        let with_placeholders = json!({
            "source": "s",
            "entries": Placeholder(1),
            "matrix": {"columns": ["GPU0", "GPU1"], "rows": Placeholder(0), "legend": []},
            "none": Placeholder(2),
            "after": {"k": 1},
        });
        let mut out = Vec::new();
        let lists = [streamed(rows), streamed(items), streamed(Vec::new())];
        write_streamed(&mut out, &with_placeholders, "", &lists).unwrap();
        let expected = render_value(whole, "").unwrap() + "\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        // A top-level list, wrapped under its key.
        let mut out = Vec::new();
        write_streamed(
            &mut out,
            &Placeholder(0),
            "calls",
            &[streamed(vec![json!(1), json!({"algo": "Tree"})])],
        )
        .unwrap();
        let expected = render_value(json!([1, {"algo": "Tree"}]), "calls").unwrap() + "\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn a_placeholder_missing_or_twice_fails() {
        let lists = [streamed(vec![json!(1)])];
        assert!(write_streamed(&mut Vec::new(), &json!({"a": 1}), "", &lists).is_err());
        let twice = json!({"a": Placeholder(0), "b": Placeholder(0)});
        assert!(write_streamed(&mut Vec::new(), &twice, "", &lists).is_err());
    }

    #[test]
    fn item_text_is_checked_against_the_conventions() {
        // Text that skips the conventions (an unrounded float) fails at the first item.
        let list = |text: &'static str| StreamedList {
            len: 1,
            item: Box::new(|_| Ok(json!({"bw_gbs": 0.4666666666666667}))),
            text: Some(Box::new(move |_, buf: &mut Vec<u8>| {
                buf.extend_from_slice(text.as_bytes());
                Ok(())
            })),
        };
        let doc = json!({"paths": Placeholder(0)});
        let err = write_streamed(
            &mut Vec::new(),
            &doc,
            "",
            &[list("{\n  \"bw_gbs\": 0.4666666666666667\n}")],
        );
        assert!(err.unwrap_err().to_string().contains("0.4666667"));
        let mut out = Vec::new();
        write_streamed(&mut out, &doc, "", &[list("{\n  \"bw_gbs\": 0.4666667\n}")]).unwrap();
        let expected = render_value(json!({"paths": [{"bw_gbs": 0.4666667}]}), "").unwrap() + "\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
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
