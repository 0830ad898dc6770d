//! A generic XML element tree for NCCL's topology and graph files.
//!
//! NCCL's XML (`NCCL_TOPO_FILE`, `NCCL_TOPO_DUMP_FILE`, `NCCL_GRAPH_FILE`) uses
//! attributes only, never text, so a tree of elements with ordered attributes
//! is all we need. Keeping attribute order makes our dumps diff cleanly against
//! NCCL's own. Every element remembers the line it started on so that later
//! stages can name the file and line of a bad value.
//!
//! Reading is iterative and bounded (`crate::limits`: depth, elements, attributes,
//! string length); dropping and writing are iterative, so no input overflows the stack.

use crate::error::{Error, Result};
use quick_xml::events::Event;
use quick_xml::Reader;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct XmlNode {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<XmlNode>,
    /// 1-based line of the start tag in the source (0 when built in memory).
    pub(crate) line: usize,
}

/// Dropping drains the tree into a list first: a recursive drop of a deep tree would overflow the stack.
impl Drop for XmlNode {
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.children);
        while let Some(mut node) = pending.pop() {
            pending.append(&mut node.children);
        }
    }
}

impl XmlNode {
    pub fn new(name: impl Into<String>) -> Self {
        XmlNode {
            name: name.into(),
            attrs: Vec::new(),
            children: Vec::new(),
            line: 0,
        }
    }

    /// Builder-style attribute setter (keeps insertion order, replaces in place).
    pub fn with_attr(mut self, key: &str, value: impl Into<String>) -> Self {
        self.set_attr(key, value);
        self
    }

    pub(crate) fn with_child(mut self, child: XmlNode) -> Self {
        self.children.push(child);
        self
    }

    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Set an attribute, keeping its position if it exists.
    pub fn set_attr(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.attrs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.attrs.push((key.to_string(), value)),
        }
    }

    /// Set an attribute only if it is missing (NCCL's "init if unset").
    pub(crate) fn init_attr(&mut self, key: &str, value: impl Into<String>) {
        if self.attr(key).is_none() {
            self.attrs.push((key.to_string(), value.into()));
        }
    }

    pub(crate) fn remove_attr(&mut self, key: &str) {
        self.attrs.retain(|(k, _)| k != key);
    }

    pub(crate) fn children_named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a XmlNode> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// All descendants (depth first, pre-order), not including self.
    pub fn descendants(&self) -> Vec<&XmlNode> {
        let mut out = Vec::new();
        let mut todo: Vec<&XmlNode> = self.children.iter().rev().collect();
        while let Some(n) = todo.pop() {
            out.push(n);
            todo.extend(n.children.iter().rev());
        }
        out
    }

    /// A required attribute, or an error naming the file, line, element and attribute.
    pub(crate) fn required(&self, key: &str, source: &str) -> Result<&str> {
        self.attr(key).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <{}> is missing the attribute '{key}'",
                self.line, self.name
            ))
        })
    }

    /// Parse an attribute with `parse`, naming file, line and value on failure.
    /// Returns `Ok(None)` when the attribute is absent.
    pub(crate) fn parsed<T>(
        &self,
        key: &str,
        source: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.attr(key) {
            None => Ok(None),
            Some(v) => parse(v).map(Some).ok_or_else(|| {
                Error::bad_input(format!(
                    "{source}:{}: <{} {key}=\"{v}\">: not {what}",
                    self.line, self.name
                ))
            }),
        }
    }
}

/// Parse an integer the way NCCL's `strtol(.., 0)` does: `0x` hex, leading `0`
/// octal is not used by NCCL's files so decimal otherwise; negative allowed.
pub(crate) fn parse_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let value = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()?
    } else {
        body.parse::<i64>().ok()?
    };
    Some(if neg { -value } else { value })
}

/// Parse an unsigned 64-bit value written in hex (`0x...`) or decimal.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse::<u64>().ok()
    }
}

/// 1-based line of a byte position (one scan: for the one error message only).
fn line_of(text: &str, byte_pos: usize) -> usize {
    let end = byte_pos.min(text.len());
    count_newlines(&text.as_bytes()[..end]) + 1
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Line numbers from the parser's advancing position: each byte is counted once.
struct Lines<'t> {
    text: &'t [u8],
    pos: usize,
    line: usize,
}

impl Lines<'_> {
    fn at(&mut self, pos: usize) -> usize {
        let pos = pos.min(self.text.len());
        if pos < self.pos {
            return count_newlines(&self.text[..pos]) + 1;
        }
        self.line += count_newlines(&self.text[self.pos..pos]);
        self.pos = pos;
        self.line
    }
}

/// Parse XML bytes (UTF-8) into the root element: the entry point for any byte input (a fuzz target is one line).
pub fn parse_bytes(bytes: &[u8], source: &str) -> Result<XmlNode> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::bad_input(format!(
            "{source}:{}: not text (invalid UTF-8)",
            count_newlines(&bytes[..e.valid_up_to()]) + 1
        ))
    })?;
    parse(text, source)
}

/// Parse an XML document into its root element. `source` names the input in errors. Limits (`crate::limits`):
/// nesting depth, element count, attributes per element and string length, each named when exceeded.
pub fn parse(text: &str, source: &str) -> Result<XmlNode> {
    use crate::limits::{MAX_XML_ATTRIBUTES, MAX_XML_DEPTH, MAX_XML_ELEMENTS, MAX_XML_STRING};
    let mut reader = Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<XmlNode> = Vec::new();
    let mut root: Option<XmlNode> = None;
    let mut lines = Lines {
        text: text.as_bytes(),
        pos: 0,
        line: 1,
    };
    let mut elements = 0usize;
    let too_long = |line: usize, what: &str, value: &str| {
        Error::bad_input(format!(
            "{source}:{line}: {what} '{}...' is longer than {MAX_XML_STRING} characters (NCCL's MAX_STR_LEN)",
            value.chars().take(20).collect::<String>()
        ))
    };
    loop {
        let start_pos = reader.buffer_position() as usize;
        let event = reader.read_event().map_err(|e| {
            Error::bad_input(format!(
                "{source}:{}: malformed XML: {e}",
                line_of(text, reader.error_position() as usize)
            ))
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_empty = matches!(event, Event::Empty(_));
                // The tag starts at the first '<' at or after the previous position.
                let from = start_pos.min(text.len());
                let tag_pos = text.as_bytes()[from..]
                    .iter()
                    .position(|&b| b == b'<')
                    .map_or(from, |off| from + off);
                let line = lines.at(tag_pos);
                let qname = e.name();
                let name: &str = qname.as_ref();
                elements += 1;
                if elements > MAX_XML_ELEMENTS {
                    return Err(Error::bad_input(format!(
                        "{source}:{line}: more than {MAX_XML_ELEMENTS} elements (NCCL's largest XML, NCCL_GRAPH_XML_MAX_NODES)"
                    )));
                }
                if stack.len() >= MAX_XML_DEPTH {
                    return Err(Error::bad_input(format!(
                        "{source}:{line}: <{}> nests deeper than {MAX_XML_DEPTH} levels (planner's XML limit: NCCL reads at most 256 topology elements)",
                        name.chars().take(20).collect::<String>()
                    )));
                }
                if name.len() > MAX_XML_STRING {
                    return Err(too_long(line, "element name", name));
                }
                // quick-xml reads `< />` as an element named ""; written back it would be `<></>`, which no reader
                // takes (the fuzz campaign's round 3 found it).
                if name.is_empty() {
                    return Err(Error::bad_input(format!(
                        "{source}:{line}: malformed XML: an element without a name"
                    )));
                }
                let mut node = XmlNode::new(name);
                node.line = line;
                for attr in e.attributes() {
                    let attr = attr.map_err(|err| {
                        Error::bad_input(format!("{source}:{line}: malformed attribute: {err}"))
                    })?;
                    if node.attrs.len() == MAX_XML_ATTRIBUTES {
                        return Err(Error::bad_input(format!(
                            "{source}:{line}: <{}> has more than {MAX_XML_ATTRIBUTES} attributes (NCCL's MAX_ATTR_COUNT)",
                            node.name
                        )));
                    }
                    let key: &str = attr.key.as_ref();
                    if key.len() > MAX_XML_STRING {
                        return Err(too_long(line, "attribute name", key));
                    }
                    #[allow(deprecated)]
                    let value = attr.unescape_value().map_err(|err| {
                        Error::bad_input(format!(
                            "{source}:{line}: malformed attribute value: {err}"
                        ))
                    })?;
                    if value.len() > MAX_XML_STRING {
                        return Err(too_long(line, &format!("the value of '{key}'"), &value));
                    }
                    node.attrs.push((key.to_string(), value.into_owned()));
                }
                if is_empty {
                    attach(&mut stack, &mut root, node, source)?;
                } else {
                    stack.push(node);
                }
            }
            Event::End(_) => {
                let node = stack.pop().ok_or_else(|| {
                    Error::bad_input(format!(
                        "{source}:{}: unexpected closing tag",
                        line_of(text, start_pos)
                    ))
                })?;
                attach(&mut stack, &mut root, node, source)?;
            }
            Event::Eof => break,
            // Declarations, comments, processing instructions and whitespace carry nothing.
            _ => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(Error::bad_input(format!(
            "{source}:{}: truncated XML: <{}> is never closed",
            open.line, open.name
        )));
    }
    root.ok_or_else(|| Error::bad_input(format!("{source}: no XML element found")))
}

fn attach(
    stack: &mut [XmlNode],
    root: &mut Option<XmlNode>,
    node: XmlNode,
    source: &str,
) -> Result<()> {
    if let Some(parent) = stack.last_mut() {
        parent.children.push(node);
        Ok(())
    } else if root.is_none() {
        *root = Some(node);
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "{source}:{}: a second top-level element <{}>",
            node.line, node.name
        )))
    }
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // A reader normalises literal tabs and line breaks in values to spaces: keep them as references.
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            _ => out.push(ch),
        }
    }
    out
}

/// Write in NCCL's own layout (`xml.cc`): one element per line, two spaces per
/// level, attributes in order, `<x/>` for empty elements, no XML declaration.
pub fn write(root: &XmlNode) -> String {
    let mut out = String::new();
    // Iterative: (node, depth, closing?) so no tree is too deep to write.
    let mut todo: Vec<(&XmlNode, usize, bool)> = vec![(root, 0, false)];
    while let Some((node, depth, closing)) = todo.pop() {
        for _ in 0..depth {
            out.push_str("  ");
        }
        if closing {
            out.push_str("</");
            out.push_str(&node.name);
            out.push_str(">\n");
            continue;
        }
        out.push('<');
        out.push_str(&node.name);
        for (k, v) in &node.attrs {
            out.push(' ');
            out.push_str(k);
            out.push_str("=\"");
            out.push_str(&escape(v));
            out.push('"');
        }
        if node.children.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        todo.push((node, depth, true));
        for c in node.children.iter().rev() {
            todo.push((c, depth + 1, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = include_str!("../fixtures/h200x2-nvswitch-vm.xml");

    #[test]
    fn round_trip_of_nccl_dump_is_byte_exact() {
        // The fixture is NCCL's own dump behind a leading comment; the element
        // part must come back byte for byte.
        let root = parse(CAPTURE, "capture").unwrap();
        let body_start = CAPTURE.find("<system").unwrap();
        assert_eq!(write(&root), &CAPTURE[body_start..]);
    }

    #[test]
    fn lines_are_recorded() {
        let root = parse("<a>\n  <b x=\"1\"/>\n  <c>\n  </c>\n</a>\n", "t").unwrap();
        assert_eq!(root.line, 1);
        assert_eq!(root.children[0].line, 2);
        assert_eq!(root.children[1].line, 3);
        assert_eq!(root.children[0].attr("x"), Some("1"));
    }

    #[test]
    fn truncated_and_malformed_name_file_and_line() {
        let err = parse("<system version=\"1\">\n  <cpu>\n", "topo.xml").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().starts_with("topo.xml:2:"), "{err}");
        let err = parse("<a>\n<b></c>\n</a>", "f.xml").unwrap_err();
        assert!(err.to_string().starts_with("f.xml:2:"), "{err}");
        let err = parse("", "empty.xml").unwrap_err();
        assert!(err.to_string().contains("empty.xml"), "{err}");
        // Fuzz campaign round 3 (topo_xml): `<\t\t/>` is an element without a name, which would write as `<></>`.
        for text in [
            "<\t\t\t\t/>por\t\t\t\t\t/>po\t/>em>",
            "<system>\n< />\n</system>",
        ] {
            let err = parse(text, "n.xml").unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains("without a name"), "{err}");
        }
    }

    #[test]
    fn limits_are_named() {
        let deep = "<a>".repeat(300) + &"</a>".repeat(300);
        let err = parse(&deep, "deep.xml").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .starts_with("deep.xml:1: <a> nests deeper than 256"),
            "{err}"
        );
        let attrs: String = (0..17).map(|i| format!(" a{i}=\"1\"")).collect();
        let err = parse(&format!("<x{attrs}/>"), "f").unwrap_err();
        assert!(err.to_string().contains("more than 16 attributes"), "{err}");
        let err = parse(&format!("<x v=\"{}\"/>", "9".repeat(256)), "f").unwrap_err();
        assert!(
            err.to_string().contains("longer than 255 characters"),
            "{err}"
        );
        let flat = format!("<r>{}</r>", "<e/>".repeat(crate::limits::MAX_XML_ELEMENTS));
        let err = parse(&flat, "flat.xml").unwrap_err();
        assert!(
            err.to_string().contains("more than 65536 elements"),
            "{err}"
        );
        let err = parse_bytes(b"<a>\n<b x=\"\xff\"/></a>", "bin").unwrap_err();
        assert!(err.to_string().starts_with("bin:2: not text"), "{err}");
    }

    #[test]
    fn deep_trees_drop_and_write_without_recursion() {
        // Built in memory, deeper than any parse accepts: dropping, writing and walking are iterative.
        let chain = |depth: usize| {
            let mut root = XmlNode::new("n");
            for _ in 0..depth {
                root = XmlNode::new("n").with_child(root);
            }
            root
        };
        let root = chain(200_000);
        assert_eq!(root.descendants().len(), 200_000);
        drop(root);
        // Writing indents two spaces per level: a modest depth keeps the text small.
        assert_eq!(write(&chain(5_000)).lines().count(), 2 * 5_000 + 1);
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int("0x1"), Some(1));
        assert_eq!(parse_int("-1"), Some(-1));
        assert_eq!(parse_int("207"), Some(207));
        assert_eq!(parse_int("x"), None);
        assert_eq!(parse_u64("0xa6e8e9058c10d6af"), Some(0xa6e8e9058c10d6af));
    }
}
