//! Init lines that hold a value of the communicator but are neither graphs, channel counts, rings, trees nor the
//! tuning table: audit checks them where the model has the value and lists them as not checked otherwise.
//!
//! ```text
//! NVLS Head  0:  0  8 16                                       (v2.28.9-1 src/graph/connect.cc:280, node 0, nNodes > 1)
//! NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)   (2.27-2.29, src/transport/nvls.cc:201)
//! P2P Chunksize set to 524288                                  (v2.18.6-1 .. dev src/init.cc, computeBuffSizes)
//! Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1  (src/transport.cc:112; 2.24-2.26: intraNodeP2pSupport)
//! Connected all rings, use ring PXN 0 GDR 1                    (src/transport/generic.cc:37, 2.24+)
//! ```

use serde::Serialize;

/// `NVLS Head  h: r0 r1 ...`: the global rank of head `h` on each node (at most 20 nodes printed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogNvlsHead {
    pub head: usize,
    pub ranks: Vec<i32>,
    pub line: usize,
    pub stream: usize,
}

/// One init line with a value, as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogInitValue {
    /// The line's message after `NCCL INFO `, trimmed.
    pub text: String,
    /// The number the line gives (`NVLS_NCHANNELS n`, the chunk size); None for lines read as text only.
    pub value: Option<i64>,
    pub line: usize,
    pub stream: usize,
}

/// The init lines of each rank's first communicator (the first of each kind per stream).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct InitLines {
    pub nvls_heads: Vec<LogNvlsHead>,
    /// `NVLS multicast support is [not ]available on dev d (NVLS_NCHANNELS n)` (2.27-2.29; other families print
    /// no count, and their lines are not kept).
    pub nvls_nchannels: Vec<LogInitValue>,
    pub p2p_chunksize: Vec<LogInitValue>,
    /// `Check P2P Type ...` (text).
    pub p2p_type: Vec<LogInitValue>,
    /// `Connected all rings, use ring PXN p GDR g` (text).
    pub ring_pxn: Vec<LogInitValue>,
}

impl InitLines {
    pub fn is_empty(&self) -> bool {
        self.nvls_heads.is_empty()
            && self.nvls_nchannels.is_empty()
            && self.p2p_chunksize.is_empty()
            && self.p2p_type.is_empty()
            && self.ring_pxn.is_empty()
    }
}

/// What one init line is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum InitLine {
    NvlsHead(usize, Vec<i32>),
    NvlsNchannels(i64),
    P2pChunksize(i64),
    P2pType,
    RingPxn,
}

/// The kind of an init line, or None for any other line; a line that starts like one and does not parse is an
/// error naming it.
pub(super) fn init_line(msg: &str) -> Option<Result<InitLine, String>> {
    let bad = || format!("init line does not parse: '{msg}'");
    if let Some(rest) = msg.strip_prefix("NVLS Head ") {
        let (head, ranks) = rest.split_once(':')?;
        let parsed = (|| {
            let head = head.trim().parse::<usize>().ok()?;
            let ranks = ranks
                .split_whitespace()
                .map(|w| w.parse::<i32>().ok())
                .collect::<Option<Vec<i32>>>()?;
            Some(InitLine::NvlsHead(head, ranks))
        })();
        return Some(parsed.ok_or_else(bad));
    }
    if msg.starts_with("NVLS multicast support is ") {
        let rest = msg.split_once("(NVLS_NCHANNELS ")?.1;
        let n = rest
            .strip_suffix(')')
            .and_then(|n| n.trim().parse::<i64>().ok());
        return Some(n.map(InitLine::NvlsNchannels).ok_or_else(bad));
    }
    if let Some(rest) = msg.strip_prefix("P2P Chunksize set to ") {
        return Some(
            rest.trim()
                .parse::<i64>()
                .map(InitLine::P2pChunksize)
                .map_err(|_| bad()),
        );
    }
    if msg.starts_with("Check P2P Type ") {
        return Some(Ok(InitLine::P2pType));
    }
    if msg.starts_with("Connected all rings, use ring PXN ") {
        return Some(Ok(InitLine::RingPxn));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_lines_parse() {
        assert_eq!(
            init_line("NVLS Head  7:  7 15 23"),
            Some(Ok(InitLine::NvlsHead(7, vec![7, 15, 23])))
        );
        assert_eq!(
            init_line("NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)"),
            Some(Ok(InitLine::NvlsNchannels(0)))
        );
        // 2.18-2.26 and 2.30+ print no count: not a line with a value.
        assert_eq!(
            init_line("NVLS multicast support is available on dev 0"),
            None
        );
        assert_eq!(
            init_line("P2P Chunksize set to 131072"),
            Some(Ok(InitLine::P2pChunksize(131072)))
        );
        assert_eq!(
            init_line("Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1"),
            Some(Ok(InitLine::P2pType))
        );
        assert_eq!(
            init_line("Connected all rings, use ring PXN 0 GDR 1"),
            Some(Ok(InitLine::RingPxn))
        );
        assert_eq!(init_line("Connected all rings"), None);
        assert!(init_line("P2P Chunksize set to big").unwrap().is_err());
        assert!(init_line("NVLS Head  x:  1").unwrap().is_err());
    }
}
