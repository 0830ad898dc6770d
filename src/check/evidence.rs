//! What an `NCCL_DEBUG=INFO` log (in an nccl-tests output, or beside it) says about how NCCL ran: the transports
//! of its connections, the network and the NICs it used, channels, NVLS, GDR, PXN, the environment it reports, and
//! the command line the user printed. These are the lines `check` reads for its causes (formats: NCCL's
//! `src/transport/*.cc` connection lines `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`, `src/init.cc` `Using network
//! X`, `comm ... nRanks N nNodes M`, `N coll channels, ... M nvls channels`, `src/transport/net_ib.cc` `NET/IB : Using
//! [0]mlx5_0:1/IB ...`, `src/graph/connect.cc` `Connected all rings, use ring PXN P GDR G`; all NCCL 2.x).
//!
//! Every line is read on its own and a line this reader does not know is skipped: a log is evidence, never a
//! format to refuse (a log from any NCCL version, cut or interleaved with other output, still says what it says).

use crate::nccl_log::{bare_version, word_after};
use serde::Serialize;
use std::collections::BTreeMap;

/// A fact with the log line it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seen<T> {
    pub value: T,
    /// 1-based line in the file.
    pub line: usize,
}

/// How one connection of a channel moves data (the word after ` via `).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum Transport {
    /// `P2P/IPC`, `P2P/CUMEM/read`, `P2P/direct pointer`: GPU to GPU (NVLink or PCIe).
    P2p { detail: String },
    /// `SHM/direct/direct`: staged through host memory.
    Shm,
    /// `NET/IB/0/GDRDMA`, `NET/Socket/1`, `NET/AWS Libfabric/0/GDRDMA`: through a network device.
    Net { network: String, gdr: bool },
    /// `CollNet`, `NVLS` and anything else NCCL may print.
    Other { name: String },
}

impl Transport {
    /// `P2P`, `SHM`, `NET/IB`, `NET/Socket`: the name the report groups by.
    pub(crate) fn label(&self) -> String {
        match self {
            Transport::P2p { .. } => "P2P".into(),
            Transport::Shm => "SHM".into(),
            Transport::Net { network, .. } => format!("NET/{network}"),
            Transport::Other { name } => name.clone(),
        }
    }
}

/// One `Channel cc/.. : a[x] -> b[y] via T` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connection {
    pub(crate) channel: usize,
    pub(crate) from_rank: usize,
    pub(crate) to_rank: usize,
    pub(crate) transport: Transport,
    /// The network device index of a NET connection (`NET/IB/3` -> 3).
    pub(crate) net_dev: Option<usize>,
    /// A NET connection sent through a peer GPU's NIC (PXN: `NET/IB/0(8)`).
    pub(crate) proxied: bool,
    pub line: usize,
}

/// Everything `check` reads from the log lines of one file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogEvidence {
    /// `NCCL version 2.23.4+cuda12.6`.
    pub nccl_version: Option<Seen<String>>,
    /// `X set by environment to Y` (INFO) lines, and `NCCL_X=Y` words of a printed command line, in order; the
    /// last one of a name wins.
    pub env: Vec<(String, Seen<String>)>,
    pub n_ranks: Option<Seen<usize>>,
    pub(crate) n_nodes: Option<Seen<usize>>,
    /// `Using network IB` / `Socket` / `AWS Libfabric`.
    pub(crate) network: Option<Seen<String>>,
    /// NICs the network plugin listed (`NET/IB : Using [0]mlx5_0:1/IB [1]...`), by plugin name.
    pub(crate) nics_listed: BTreeMap<String, Seen<Vec<String>>>,
    /// `NET/IB : No device found.`
    pub no_ib_device: Option<usize>,
    pub connections: Vec<Connection>,
    /// The first `N coll channels` line.
    pub(crate) coll_channels: Option<Seen<usize>>,
    /// The first `... M nvls channels` line.
    pub(crate) nvls_channels: Option<Seen<usize>>,
    /// `NVLS multicast support is not available`.
    pub(crate) nvls_unavailable: Option<usize>,
    /// `Connected all rings, use ring PXN P GDR G`.
    pub(crate) ring_pxn: Option<Seen<bool>>,
    pub(crate) ring_gdr: Option<Seen<bool>>,
    /// `GPU Direct RDMA Disabled for HCA ...`.
    pub(crate) gdr_disabled_hca: Option<Seen<String>>,
    /// `Check P2P Type intraNodeP2pSupport 0`.
    pub(crate) intra_node_p2p_unsupported: Option<usize>,
    /// Lines that belong to an NCCL log at all (0: the file has no log).
    pub(crate) nccl_lines: usize,
    /// nccl-tests' header `# nThread 1 nGpus 8 minBytes ... graph: 0`: the GPUs one of its threads drives (`-g`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpus_per_thread: Option<Seen<usize>>,
    /// The same header's `graph: 1` (nccl-tests `-G`: calls launched as CUDA graphs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cuda_graph: Option<Seen<bool>>,
}

impl LogEvidence {
    /// The value of an NCCL variable the log reports (its last setting).
    pub fn env_value(&self, name: &str) -> Option<&Seen<String>> {
        self.env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Connections by transport label: how many and the first line.
    pub fn transports(&self) -> BTreeMap<String, (usize, usize)> {
        let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for c in &self.connections {
            let e = out.entry(c.transport.label()).or_insert((0, c.line));
            e.0 += 1;
            e.1 = e.1.min(c.line);
        }
        out
    }

    /// Distinct network devices the NET connections used.
    pub fn net_devs_used(&self) -> Vec<usize> {
        let mut devs: Vec<usize> = self.connections.iter().filter_map(|c| c.net_dev).collect();
        devs.sort_unstable();
        devs.dedup();
        devs
    }

    /// The first connection of a kind.
    pub(crate) fn first_connection(
        &self,
        pred: impl Fn(&Connection) -> bool,
    ) -> Option<&Connection> {
        self.connections.iter().find(|c| pred(c))
    }

    fn set_env(&mut self, name: &str, value: &str, line: usize) {
        self.env.push((
            name.to_string(),
            Seen {
                value: value.to_string(),
                line,
            },
        ));
    }
}

/// Read the log lines of `text` (any file: nccl-tests output with its log, a bare log, a launcher's tagged lines).
pub fn scan(text: &str) -> LogEvidence {
    let mut ev = LogEvidence::default();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        // A log line is cut at the first NUL or control character NCCL would never print; a line of a few
        // hundred kilobytes is not NCCL's (its lines are at most 1 KiB) and is skipped whole.
        if raw.len() > 64 * 1024 {
            continue;
        }
        if let Some(at) = raw.find("NCCL INFO ") {
            ev.nccl_lines += 1;
            info_line(&mut ev, raw[at + "NCCL INFO ".len()..].trim(), number);
        } else if raw.contains("NCCL WARN") {
            ev.nccl_lines += 1;
        } else if raw.trim_start().starts_with("NCCL_") && raw.contains(" set by environment to ") {
            // The line as people quote it, without its log prefix.
            ev.nccl_lines += 1;
            info_line(&mut ev, raw.trim(), number);
        }
        if ev.nccl_version.is_none() {
            if let Some(v) = bare_version(raw) {
                ev.nccl_version = Some(Seen {
                    value: v,
                    line: number,
                });
            }
        }
        if raw.contains("_perf") && !raw.trim_start().starts_with('#') {
            command_line(&mut ev, raw, number);
        }
        if ev.gpus_per_thread.is_none()
            && raw.trim_start().starts_with('#')
            && raw.contains(" nGpus ")
        {
            nccl_tests_header(&mut ev, raw, number);
        }
    }
    ev
}

/// `# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
/// validation: 1 graph: 0` (nccl-tests src/common.cu): how the run launched its calls.
fn nccl_tests_header(ev: &mut LogEvidence, raw: &str, line: usize) {
    let after = |key: &str| word_after(raw, key).and_then(|v| v.parse::<usize>().ok());
    // a GPU count beyond any host's is not nccl-tests' (it drives GPUs of its own host)
    if let Some(n) = after("nGpus").filter(|n| (1..=crate::limits::MAX_RANKS).contains(n)) {
        ev.gpus_per_thread = Some(Seen { value: n, line });
    }
    if let Some(g) = after("graph:").filter(|g| *g <= 1) {
        ev.cuda_graph = Some(Seen {
            value: g == 1,
            line,
        });
    }
}

/// `NCCL_P2P_DISABLE=1 ./build/all_reduce_perf ...` or `mpirun -x NCCL_IB_HCA=mlx5_0 ... all_reduce_perf`: the
/// environment the user says the run had (a prompt line printed with the output).
fn command_line(ev: &mut LogEvidence, raw: &str, line: usize) {
    for word in raw.split_whitespace() {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        if let Some((name, value)) = word.split_once('=') {
            if name.starts_with("NCCL_")
                && name.len() > 5
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            {
                ev.set_env(name, value.trim_matches(|c| c == '"' || c == '\''), line);
            }
        }
    }
}

fn info_line(ev: &mut LogEvidence, msg: &str, line: usize) {
    if let Some((name, value)) = msg.split_once(" set by environment to ") {
        let name = name.trim();
        if name.starts_with("NCCL_") && !name.contains(' ') {
            ev.set_env(name, value.trim().trim_end_matches('.'), line);
        }
        return;
    }
    if let Some(network) = msg.strip_prefix("Using network ") {
        ev.network.get_or_insert(Seen {
            value: network.trim().to_string(),
            line,
        });
        return;
    }
    if msg.starts_with("Channel ") && msg.contains(" via ") {
        if let Some(c) = connection_line(msg, line) {
            ev.connections.push(c);
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("NET/") {
        nic_line(ev, rest, line);
        return;
    }
    if msg.contains(" coll channels") {
        let first = msg.split_whitespace().next().and_then(|w| w.parse().ok());
        if let (Some(n), None) = (first, &ev.coll_channels) {
            ev.coll_channels = Some(Seen { value: n, line });
        }
        if ev.nvls_channels.is_none() {
            if let Some(n) = number_before(msg, " nvls channels") {
                ev.nvls_channels = Some(Seen { value: n, line });
            }
        }
        return;
    }
    if msg.contains("NVLS multicast support is not available") {
        ev.nvls_unavailable.get_or_insert(line);
        return;
    }
    if let Some(rest) = msg.strip_prefix("Connected all rings") {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let flag = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .and_then(|v| v.trim_end_matches(',').parse::<u32>().ok())
                .map(|v| v != 0)
        };
        if let (Some(v), None) = (flag("PXN"), &ev.ring_pxn) {
            ev.ring_pxn = Some(Seen { value: v, line });
        }
        if let (Some(v), None) = (flag("GDR"), &ev.ring_gdr) {
            ev.ring_gdr = Some(Seen { value: v, line });
        }
        return;
    }
    if msg.contains("intraNodeP2pSupport 0") {
        ev.intra_node_p2p_unsupported.get_or_insert(line);
        return;
    }
    if ev.n_ranks.is_none() || ev.n_nodes.is_none() {
        shape_line(ev, msg, line);
    }
}

/// `comm 0x.. rank 0 nRanks 16 nNodes 2 localRanks 8 ...` (2.19+), `comm 0x.. rank 0 nranks 16 cudaDev 0 ... -
/// Init COMPLETE` (older).
fn shape_line(ev: &mut LogEvidence, msg: &str, line: usize) {
    if !msg.contains("comm ") {
        return;
    }
    let after = |key: &str| word_after(msg, key).and_then(|v| v.parse::<usize>().ok());
    if ev.n_ranks.is_none() {
        if let Some(n) = after("nRanks").or_else(|| after("nranks")) {
            ev.n_ranks = Some(Seen { value: n, line });
        }
    }
    if ev.n_nodes.is_none() {
        if let Some(n) = after("nNodes") {
            ev.n_nodes = Some(Seen { value: n, line });
        }
    }
}

/// The number in front of `suffix` (`..., 16 nvls channels` -> 16).
fn number_before(msg: &str, suffix: &str) -> Option<usize> {
    let end = msg.find(suffix)?;
    msg[..end].split_whitespace().last()?.parse().ok()
}

/// `IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>`, `Socket : Using [0]eth0:10.0.0.1<0>`,
/// `IB : No device found.`, `IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' ...` (after `NET/`).
fn nic_line(ev: &mut LogEvidence, rest: &str, line: usize) {
    let Some((plugin, body)) = rest.split_once(':') else {
        return;
    };
    let plugin = plugin.trim();
    let body = body.trim();
    if body.starts_with("No device found") && plugin == "IB" {
        ev.no_ib_device.get_or_insert(line);
        return;
    }
    if body.contains("GPU Direct RDMA Disabled") {
        ev.gdr_disabled_hca.get_or_insert(Seen {
            value: body.to_string(),
            line,
        });
        return;
    }
    let Some(list) = body.strip_prefix("Using ") else {
        return;
    };
    // The list ends where the out-of-band interface starts (`; OOB ...`).
    let list = list.split(';').next().unwrap_or(list);
    let nics: Vec<String> = list
        .split_whitespace()
        .filter_map(|w| {
            let rest = w.strip_prefix('[')?;
            let (index, name) = rest.split_once(']')?;
            index.parse::<usize>().ok()?;
            let name = name.split([':', '<']).next().unwrap_or(name);
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect();
    if !nics.is_empty() {
        ev.nics_listed
            .entry(plugin.to_string())
            .or_insert(Seen { value: nics, line });
    }
}

/// `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`, `Channel 01/1 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA`,
/// `Channel 00 : 0[60000] -> 1[70000] via P2P/IPC` (older, no `/cc`), `... via NET/IB/1(9)/GDRDMA` (PXN).
fn connection_line(msg: &str, line: usize) -> Option<Connection> {
    let rest = msg.strip_prefix("Channel ")?;
    let (head, tail) = rest.split_once(" : ")?;
    let channel = head.split('/').next()?.trim().parse::<usize>().ok()?;
    let (ranks, via) = tail.split_once(" via ")?;
    let (from, to) = ranks.split_once("->")?;
    let rank_of = |w: &str| -> Option<usize> {
        let w = w.split_whitespace().next()?;
        w.split('[').next()?.parse().ok()
    };
    let from_rank = rank_of(from)?;
    let to_rank = rank_of(to)?;
    let via = via.trim();
    let (transport, net_dev, proxied) = if let Some(p) = via.strip_prefix("P2P") {
        (
            Transport::P2p {
                detail: p.trim_start_matches('/').to_string(),
            },
            None,
            false,
        )
    } else if via.starts_with("SHM") {
        (Transport::Shm, None, false)
    } else if let Some(net) = via.strip_prefix("NET/") {
        // NET/<name>/<dev>[(proxy)][/GDRDMA][/Shared]; the name may hold spaces (AWS Libfabric) but no '/'.
        let mut parts = net.split('/');
        let network = parts.next().unwrap_or("").trim().to_string();
        let dev_word = parts.next().unwrap_or("");
        let proxied = dev_word.contains('(');
        let net_dev = dev_word
            .split('(')
            .next()
            .and_then(|d| d.trim().parse().ok());
        let gdr = parts.any(|p| p.starts_with("GDRDMA"));
        (Transport::Net { network, gdr }, net_dev, proxied)
    } else {
        (
            Transport::Other {
                name: via.split(['/', ' ']).next().unwrap_or(via).to_string(),
            },
            None,
            false,
        )
    };
    Some(Connection {
        channel,
        from_rank,
        to_rank,
        transport,
        net_dev,
        proxied,
        line,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn nccl_tests_header_says_gpus_per_thread_and_graph_launch() {
        let ev = scan("# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n");
        assert_eq!(ev.gpus_per_thread, Some(Seen { value: 8, line: 1 }));
        assert_eq!(
            ev.cuda_graph,
            Some(Seen {
                value: false,
                line: 1
            })
        );
        let ev = scan("x\n#  nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 1\n");
        assert_eq!(ev.gpus_per_thread, Some(Seen { value: 1, line: 2 }));
        assert_eq!(
            ev.cuda_graph,
            Some(Seen {
                value: true,
                line: 2
            })
        );
        // older nccl-tests print no graph field; nonsense counts are not taken
        let ev = scan("# nThread 1 nGpus 2 minBytes 8 maxBytes 128\n# nThread 1 nGpus 4\n");
        assert_eq!(
            (ev.gpus_per_thread.map(|s| s.value), ev.cuda_graph),
            (Some(2), None)
        );
        let ev = scan("# nThread 1 nGpus 0 graph: 7\n# nThread 1 nGpus 99999999999999999999\n");
        assert_eq!((ev.gpus_per_thread, ev.cuda_graph), (None, None));
    }
    use super::*;

    #[test]
    fn connection_lines_of_every_transport() {
        let log = "\
h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
h:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct
h:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/3/GDRDMA
h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/1(9)/GDRDMA
h:1:2 [0] NCCL INFO Channel 00 : 0[60000] -> 1[70000] via NET/Socket/0
h:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/2/GDRDMA
";
        let ev = scan(log);
        assert_eq!(ev.connections.len(), 6);
        assert_eq!(ev.connections[0].transport.label(), "P2P");
        assert_eq!(ev.connections[1].transport, Transport::Shm);
        assert_eq!(ev.connections[2].net_dev, Some(3));
        assert!(matches!(
            ev.connections[2].transport,
            Transport::Net { gdr: true, .. }
        ));
        assert!(ev.connections[3].proxied);
        assert_eq!(ev.connections[4].transport.label(), "NET/Socket");
        assert!(matches!(
            ev.connections[4].transport,
            Transport::Net { gdr: false, .. }
        ));
        assert_eq!(ev.connections[5].transport.label(), "NET/AWS Libfabric");
        assert_eq!(ev.net_devs_used(), vec![0, 1, 2, 3]);
        assert_eq!(ev.transports()["NET/IB"], (2, 3));
    }

    #[test]
    fn network_nics_channels_and_flags() {
        let log = "\
NCCL version 2.21.5+cuda12.4
h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/RoCE [RO]; OOB ib0:10.0.0.1<0>
h:1:2 [0] NCCL INFO Using network IB
h:1:2 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
h:1:2 [0] NCCL INFO comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
h:1:2 [0] NCCL INFO 4 coll channels, 4 collnet channels, 0 nvls channels, 4 p2p channels, 2 p2p channels per peer
h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
";
        let ev = scan(log);
        assert_eq!(
            ev.nccl_version.as_ref().map(|v| v.value.as_str()),
            Some("2.21.5+cuda12.4")
        );
        assert_eq!(
            ev.nics_listed["IB"].value,
            vec!["mlx5_0", "mlx5_1", "mlx5_2"]
        );
        assert_eq!(ev.network.as_ref().map(|n| n.value.as_str()), Some("IB"));
        assert_eq!(ev.env_value("NCCL_P2P_DISABLE").map(|v| v.line), Some(4));
        assert_eq!(ev.n_ranks.as_ref().map(|n| n.value), Some(16));
        assert_eq!(ev.n_nodes.as_ref().map(|n| n.value), Some(2));
        assert_eq!(ev.coll_channels.as_ref().map(|n| n.value), Some(4));
        assert_eq!(ev.nvls_channels.as_ref().map(|n| n.value), Some(0));
        assert_eq!(ev.ring_pxn.as_ref().map(|n| n.value), Some(false));
        assert_eq!(ev.ring_gdr.as_ref().map(|n| n.value), Some(true));
    }

    #[test]
    fn a_printed_command_line_is_environment() {
        let ev = scan(
            "$ NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 128M -g 2\n",
        );
        assert_eq!(
            ev.env_value("NCCL_P2P_DISABLE").map(|v| v.value.as_str()),
            Some("1")
        );
        let ev = scan("mpirun -x NCCL_IB_HCA=mlx5_0 -np 2 ./all_reduce_perf\n");
        assert_eq!(
            ev.env_value("NCCL_IB_HCA").map(|v| v.value.as_str()),
            Some("mlx5_0")
        );
        assert_eq!(ev.nccl_lines, 0);
    }

    #[test]
    fn unknown_and_cut_lines_are_skipped() {
        let ev = scan(
            "x NCCL INFO Channel 00/0 : garbage via\nNCCL INFO NET/IB\nNCCL INFO 7 coll channels\n",
        );
        assert!(ev.connections.is_empty());
        assert_eq!(ev.coll_channels.map(|c| c.value), Some(7));
    }
}
