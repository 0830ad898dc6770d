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

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

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
