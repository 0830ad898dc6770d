//! Output for people and scripts.

pub mod audit;
pub mod channels;
pub(crate) mod check;
pub(crate) mod diff;
pub mod doctor;
pub(crate) mod expect;
pub mod explain;
pub mod json;
pub(crate) mod run;
pub mod topo;
pub mod verify;

use crate::model::select::Call;
use crate::units::format_size;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// The bytes a call runs (one op), and where the size asked for was rounded down as nccl-tests does, what was
/// asked and why: "1000 B (1001 B rounded down to whole float32 elements)".
pub fn call_size_text(call: &Call) -> String {
    let runs = call.model_bytes;
    if runs == call.size {
        return format_size(runs);
    }
    format!("{} ({})", format_size(runs), rounded_note(call))
}

/// "1001 B rounded down to whole float32 elements" (all-gather/reduce-scatter: "to 16 B per rank").
pub fn rounded_note(call: &Call) -> String {
    let to = if call.coll.is_ag_rs() {
        "a multiple of 16 B per rank"
    } else {
        "whole float32 elements"
    };
    format!("{} B rounded down to {to}", call.size)
}

/// A table in the reports' style (condensed box borders, no wrapping) with this header.
pub(crate) fn table(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    t
}

/// Right-align these columns (numbers).
pub(crate) fn right_align(t: &mut Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Text for stdout: as rendered on a terminal; piped or redirected, plain ASCII (box borders as `+-|`, `µs` as
/// `us`, the pick marker `▶` as `>`), so logs, `grep` and old terminals read it. Each table character maps to one
/// ASCII character: columns stay aligned.
pub(crate) fn text(rendered: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        std::borrow::Cow::Borrowed(rendered)
    } else {
        std::borrow::Cow::Owned(ascii(rendered))
    }
}

/// `rendered` in ASCII (see `text`).
pub(crate) fn ascii(rendered: &str) -> String {
    let mut out = String::with_capacity(rendered.len());
    // " · " separates the facts of a header line: a comma there.
    for c in rendered.replace(" · ", ", ").chars() {
        match c {
            '┌' | '┐' | '└' | '┘' | '┬' | '┴' | '├' | '┤' | '┼' | '╞' | '╪' | '╡' | '╭' | '╮'
            | '╰' | '╯' => out.push('+'),
            '─' | '╌' | '┄' => out.push('-'),
            '═' => out.push('='),
            '│' | '┆' | '┊' => out.push('|'),
            'µ' | 'μ' => out.push('u'),
            '▶' | '►' => out.push('>'),
            '×' => out.push('x'),
            '–' | '—' | '−' => out.push('-'),
            '≈' | '~' => out.push('~'),
            '…' => out.push_str("..."),
            '→' => out.push_str("->"),
            '←' => out.push_str("<-"),
            '≤' => out.push_str("<="),
            '≥' => out.push_str(">="),
            '±' => out.push_str("+/-"),
            '✓' | '✔' => out.push_str("ok"),
            '✗' | '✘' => out.push('x'),
            '’' | '‘' => out.push('\''),
            '“' | '”' => out.push('"'),
            '·' | '•' => out.push('*'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ascii_keeps_table_columns() {
        let t = "┌───┬──┐\n│ ▶ ┆ 5 µs │\n╞═══╪══╡\n";
        let a = super::ascii(t);
        assert_eq!(a, "+---+--+\n| > | 5 us |\n+===+==+\n");
        assert!(a.is_ascii());
        for (x, y) in t.lines().zip(a.lines()) {
            assert_eq!(x.chars().count(), y.chars().count());
        }
    }
}
