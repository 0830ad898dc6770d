//! Which NCCL families a log's line formats allow. A log without a version line still tells its family apart by
//! how it prints: the per-call line, the init table's layout, the channel-count and ring lines, the graph lines'
//! GPU names and a few init lines changed between 2.18 and 2.31. Each format below names the families that print
//! it, read in the tags' sources (`tag file:line`).

use crate::model::rules::Family;
use serde::Serialize;

/// An open range of families: `(first, last)`, `last` None for "and every later one".
pub type FamilyRange = (Family, Option<Family>);

/// A line format that only some families print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum LineFormat {
    /// `Func: N Bytes -> Algo RING proto LL channel{Lo..Hi}={a..b}`.
    CallNamed,
    /// `Func: N Bytes -> Algo 1 proto 0 time T`.
    CallNamedTimed,
    /// `N Bytes -> Algo 1 proto 0 time T` as INFO (not TRACE).
    CallTimed,
    /// `Input: { ... }` / `Best tuning { ... }`.
    Tuning231,
    /// The init table in two blocks of three algorithms (no PAT).
    TableSixAlgorithms,
    /// The init table with a PAT block.
    TableWithPat,
    /// `N coll channels, M collnet channels, ...`.
    ChannelsWithCollnet,
    /// `N coll channels, M nvls channels, ...` (no collnet count).
    ChannelsWithoutCollnet,
    /// `Channel 00/16 :    0   7 ...`: ranks as ` %3d`, at most 20.
    RingLineFixedWidth,
    /// `Channel 00/16 :  0  7 ...`: ranks padded to the width of the largest, cut at 128 characters.
    RingLineRankWidth,
    /// Graph channel lines name GPUs by topology id (`GPU/0-d8000`).
    GraphGpuTopoIds,
    /// Graph channel lines name GPUs by rank (`GPU/0`).
    GraphGpuRanks,
    /// `NVLS multicast support is ... (NVLS_NCHANNELS n)`.
    NvlsNchannelsInSupportLine,
    /// `Check P2P Type intraNodeP2pSupport a directMode b`.
    P2pTypeIntraNode,
    /// `Check P2P Type isAllDirectP2p a directMode b` (no isAllCudaP2p).
    P2pTypeTwoFields,
    /// `Check P2P Type isAllDirectP2p a directMode b isAllCudaP2p c`.
    P2pTypeThreeFields,
    /// `Connected all rings` alone.
    ConnectedRingsBare,
    /// `Connected all rings, use ring PXN p GDR g`.
    ConnectedRingsPxn,
}

impl LineFormat {
    /// How the format reads, for a warning.
    pub fn describe(self) -> &'static str {
        match self {
            LineFormat::CallNamed => {
                "per-call lines 'Func: N Bytes -> Algo NAME proto NAME channel{Lo..Hi}={a..b}'"
            }
            LineFormat::CallNamedTimed => "per-call lines 'Func: N Bytes -> Algo i proto j time T'",
            LineFormat::CallTimed => "per-call INFO lines 'N Bytes -> Algo i proto j time T'",
            LineFormat::Tuning231 => "per-call lines 'Input: { ... }' / 'Best tuning { ... }'",
            LineFormat::TableSixAlgorithms => "an init table of 6 algorithms (no PAT block)",
            LineFormat::TableWithPat => "an init table with a PAT block",
            LineFormat::ChannelsWithCollnet => "'N coll channels, M collnet channels, ...'",
            LineFormat::ChannelsWithoutCollnet => {
                "'N coll channels, M nvls channels, ...' (no collnet count)"
            }
            LineFormat::RingLineFixedWidth => {
                "ring lines 'Channel cc/nn :    0   1' (ranks as ' %3d')"
            }
            LineFormat::RingLineRankWidth => {
                "ring lines 'Channel cc/nn : 0 1' (ranks as wide as the largest)"
            }
            LineFormat::GraphGpuTopoIds => "graph channel lines naming 'GPU/0-<busid>'",
            LineFormat::GraphGpuRanks => "graph channel lines naming 'GPU/<rank>'",
            LineFormat::NvlsNchannelsInSupportLine => {
                "'NVLS multicast support is ... (NVLS_NCHANNELS n)'"
            }
            LineFormat::P2pTypeIntraNode => "'Check P2P Type intraNodeP2pSupport'",
            LineFormat::P2pTypeTwoFields => {
                "'Check P2P Type isAllDirectP2p a directMode b' (no isAllCudaP2p)"
            }
            LineFormat::P2pTypeThreeFields => "'Check P2P Type ... isAllCudaP2p c'",
            LineFormat::ConnectedRingsBare => "'Connected all rings' (no PXN/GDR)",
            LineFormat::ConnectedRingsPxn => "'Connected all rings, use ring PXN p GDR g'",
        }
    }

    /// The families that print the format (every family from 2.18, the oldest modelled, on).
    pub fn families(self) -> &'static [FamilyRange] {
        match self {
            // v2.24.3-1 src/enqueue.cc:678 .. dev src/enqueue.cc:822.
            LineFormat::CallNamed => &[((2, 24), None)],
            // v2.23.4-1 src/enqueue.cc:1855 only.
            LineFormat::CallNamedTimed => &[((2, 23), Some((2, 23)))],
            // INFO in v2.20.5-1 src/enqueue.cc:1498 .. v2.22.3-1 :1613 (TRACE in every family).
            LineFormat::CallTimed => &[((2, 20), Some((2, 22)))],
            // dev@86fa684d src/tuning/tuning.cc:176-181, :286-291.
            LineFormat::Tuning231 => &[((2, 31), None)],
            // v2.18.6-1 src/graph/tuning.cc:303-335 .. v2.22.3-1; PAT from v2.23.4-1.
            LineFormat::TableSixAlgorithms => &[((2, 18), Some((2, 22)))],
            LineFormat::TableWithPat => &[((2, 23), None)],
            // v2.18.6-1 src/init.cc:1113; collnet count from v2.20.5-1 src/init.cc:1256.
            LineFormat::ChannelsWithoutCollnet => &[((2, 18), Some((2, 19)))],
            LineFormat::ChannelsWithCollnet => &[((2, 20), None)],
            // v2.22.3-1 src/graph/rings.cc dumpLine (" %3d", MAXWIDTH 20); v2.23.4-1 :9-25 (128 characters).
            LineFormat::RingLineFixedWidth => &[((2, 18), Some((2, 22)))],
            LineFormat::RingLineRankWidth => &[((2, 23), None)],
            // v2.28.3-1 src/graph/search.cc:1192.
            LineFormat::GraphGpuTopoIds => &[((2, 28), None)],
            LineFormat::GraphGpuRanks => &[((2, 18), Some((2, 27)))],
            // v2.27.3-1 .. v2.29.7-1 src/transport/nvls.cc:201; v2.30.3-1 :264 prints no count.
            LineFormat::NvlsNchannelsInSupportLine => &[((2, 27), Some((2, 29)))],
            // v2.24.3-1 .. v2.26.6-1 src/transport.cc; v2.27.3-1 isAllDirectP2p; isAllCudaP2p from v2.28.7-1 :112.
            LineFormat::P2pTypeIntraNode => &[((2, 24), Some((2, 26)))],
            LineFormat::P2pTypeTwoFields => &[((2, 27), Some((2, 28)))],
            LineFormat::P2pTypeThreeFields => &[((2, 28), None)],
            // v2.23.4-1 src/transport/generic.cc:12; PXN/GDR from v2.24.3-1.
            LineFormat::ConnectedRingsBare => &[((2, 18), Some((2, 23)))],
            LineFormat::ConnectedRingsPxn => &[((2, 24), None)],
        }
    }

    /// Whether `family` prints the format.
    pub fn allows(self, family: Family) -> bool {
        self.families()
            .iter()
            .any(|&(first, last)| family >= first && last.is_none_or(|l| family <= l))
    }

    /// `2.20-2.22`, `2.24+`.
    pub fn families_text(self) -> String {
        let name = |f: Family| format!("{}.{}", f.0, f.1);
        self.families()
            .iter()
            .map(|&(first, last)| match last {
                Some(l) if l == first => name(first),
                Some(l) => format!("{}-{}", name(first), name(l)),
                None => format!("{}+", name(first)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A format and the first line that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FormatSeen {
    pub format: LineFormat,
    pub line: usize,
}

/// The format of a ring line's ranks (the text after `Channel cc/nn :`): rank 0 prints its rings starting from
/// itself, so the first rank is 0; up to 2.22 it is ` %3d` after `: ` (four spaces before the 0), from 2.23 ` %*d`
/// with the width of the largest rank (at most three spaces below 1000 ranks).
pub fn ring_line_format(ranks_text: &str) -> Option<LineFormat> {
    let text = ranks_text.trim_end();
    let spaces = text.len() - text.trim_start().len();
    let first = text.split_whitespace().next()?;
    if first != "0" {
        return None;
    }
    let largest = text
        .split_whitespace()
        .map_while(|w| w.parse::<i64>().ok())
        .max()?;
    let width = largest.to_string().len();
    match spaces {
        4 if largest < 1000 => Some(LineFormat::RingLineFixedWidth),
        s if s == width => Some(LineFormat::RingLineRankWidth),
        _ => None,
    }
}

/// The format of a graph channel line ` 0 : NET/0 GPU/0-d8000 ...`: GPU names with or without a bus id.
pub fn graph_channel_format(msg: &str) -> Option<LineFormat> {
    let gpu = msg.split_whitespace().find(|w| w.starts_with("GPU/"))?;
    Some(if gpu.contains('-') {
        LineFormat::GraphGpuTopoIds
    } else {
        LineFormat::GraphGpuRanks
    })
}

/// The format of a `Check P2P Type ...` line.
pub fn p2p_type_format(msg: &str) -> Option<LineFormat> {
    if msg.contains("intraNodeP2pSupport") {
        Some(LineFormat::P2pTypeIntraNode)
    } else if msg.contains("isAllCudaP2p") {
        Some(LineFormat::P2pTypeThreeFields)
    } else if msg.contains("isAllDirectP2p") {
        Some(LineFormat::P2pTypeTwoFields)
    } else {
        None
    }
}

/// The families every format of `seen` allows, among `families` (oldest first).
pub fn allowed<'a>(seen: &[FormatSeen], families: &[&'a str]) -> Vec<&'a str> {
    families
        .iter()
        .copied()
        .filter(|f| {
            crate::model::rules::parse_family(f)
                .is_some_and(|fam| seen.iter().all(|s| s.format.allows(fam)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_line_widths() {
        // v2.22.3: "Channel 00/16 : " + " %3d" per rank.
        assert_eq!(
            ring_line_format("    0   7   6   5"),
            Some(LineFormat::RingLineFixedWidth)
        );
        // v2.23+: " %*d" with the width of nranks-1.
        assert_eq!(
            ring_line_format(" 0 1 2 3"),
            Some(LineFormat::RingLineRankWidth)
        );
        assert_eq!(
            ring_line_format("  0  7  6 13"),
            Some(LineFormat::RingLineRankWidth)
        );
        // 2.23+ with 1000+ ranks: four spaces before a 4-digit rank count.
        assert_eq!(
            ring_line_format("    0 1023 1022"),
            Some(LineFormat::RingLineRankWidth)
        );
        assert_eq!(ring_line_format(" 3 1 2"), None);
    }

    #[test]
    fn families_of_formats() {
        assert!(LineFormat::CallTimed.allows((2, 22)));
        assert!(!LineFormat::CallTimed.allows((2, 30)));
        assert!(LineFormat::CallNamed.allows((2, 31)));
        assert!(!LineFormat::NvlsNchannelsInSupportLine.allows((2, 30)));
        assert_eq!(LineFormat::CallTimed.families_text(), "2.20-2.22");
        assert_eq!(LineFormat::CallNamedTimed.families_text(), "2.23");
        assert_eq!(LineFormat::CallNamed.families_text(), "2.24+");
        let seen = [
            FormatSeen {
                format: LineFormat::CallNamed,
                line: 1,
            },
            FormatSeen {
                format: LineFormat::P2pTypeTwoFields,
                line: 2,
            },
        ];
        assert_eq!(
            allowed(&seen, &["2.23", "2.24", "2.27", "2.28", "2.29"]),
            ["2.27", "2.28"]
        );
    }
}
