//! The flags that say where the topology comes from (`pipeline::Source`), and `--graph FILE`, flattened into
//! the commands that use them (a command that would ignore one does not take it).

use crate::error::{Error, Result};
use crate::model::TuningTable;
use crate::pipeline::{self, Source};

/// Where the topology comes from: on the commands that build one (not `fixtures`; `audit` has its own).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct SourceArgs {
    /// Use a built-in topology instead of probing (see `planner fixtures`)
    #[arg(long, value_name = "NAME", conflicts_with = "topo")]
    pub(crate) fixture: Option<String>,
    /// Use an NCCL topology XML file (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format)
    #[arg(long, value_name = "FILE")]
    pub(crate) topo: Option<String>,
    /// Fill a partial --topo file (a vendor file with no <gpu>) with this GPU model when no GPU is probed: a100-sxm, a100-pcie, h100-sxm, h100-pcie, h200-sxm, b200-sxm, h800-sxm, l40s, rtx4090, rtx5090, h20, rtxpro6000, gb10
    #[arg(long, value_name = "MODEL", requires = "topo")]
    pub(crate) gpu: Option<String>,
    /// With --gpu: speed in Gb/s of the NICs filled into the file (default: from the NIC's PCI id, else the GPU model's reference NIC)
    #[arg(long, value_name = "GBITS", requires = "topo")]
    pub(crate) nic_speed: Option<f64>,
    /// Replicate the node N times, joined through its NICs [default: 1]
    #[arg(long, value_name = "N")]
    pub(crate) nodes: Option<usize>,
    /// Network latency in us added to every NIC (NCCL's built-in IB plugin reports 0) [default: 0]
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    pub(crate) net_latency: Option<f64>,
    /// Multi-node NVLink across the nodes (NCCL_MNNVL_ENABLE=1/0); default: NCCL's rule
    #[arg(long, value_name = "on|off")]
    pub(crate) mnnvl: Option<OnOff>,
    /// NCCL's environment, read once by `cli::run` (not a flag).
    #[arg(skip)]
    pub(crate) nccl_env: crate::nccl_env::NcclEnv,
}

impl SourceArgs {
    pub(crate) fn source(&self) -> Source {
        Source {
            fixture: self.fixture.clone(),
            topo: self.topo.clone(),
            gpu: self.gpu.clone(),
            nic_speed_gbits: self.nic_speed,
            nodes: self.nodes.unwrap_or(1),
            net_latency_us: self.net_latency.unwrap_or(0.0),
            mnnvl: self.mnnvl.map(|m| match m {
                OnOff::On => crate::topo::mnnvl::MnnvlEnable::On,
                OnOff::Off => crate::topo::mnnvl::MnnvlEnable::Off,
            }),
            nccl_env: self.nccl_env.clone(),
        }
    }

    /// The source flags given on the command line, as typed.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        [
            (self.fixture.is_some(), "--fixture"),
            (self.topo.is_some(), "--topo"),
            (self.gpu.is_some(), "--gpu"),
            (self.nic_speed.is_some(), "--nic-speed"),
            (self.nodes.is_some(), "--nodes"),
            (self.net_latency.is_some(), "--net-latency"),
            (self.mnnvl.is_some(), "--mnnvl"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect()
    }

    /// Refuse the source flags where `mode` (e.g. "--load FILE") reads no topology.
    pub(crate) fn refuse_with(&self, mode: &str, why: &str) -> Result<()> {
        match self.given().first() {
            Some(flag) => Err(Error::bad_input(format!(
                "{flag} cannot be used with {mode}: {why}"
            ))),
            None => Ok(()),
        }
    }
}

/// `audit`'s topology flags: the log says how many nodes the job had (`--nodes` only where it does not).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct AuditSourceArgs {
    /// Use a built-in topology instead of the log's NCCL_TOPO_DUMP_FILE
    #[arg(long, value_name = "NAME", conflicts_with = "topo")]
    pub(crate) fixture: Option<String>,
    /// Use an NCCL topology XML file instead of the log's NCCL_TOPO_DUMP_FILE
    #[arg(long, value_name = "FILE")]
    pub(crate) topo: Option<String>,
    /// Nodes of the job, for a log without the `comm ... nNodes` line (refused when it contradicts the log); default: the log's nNodes, else inferred from the ranks its lines name
    #[arg(long, value_name = "N")]
    pub nodes: Option<usize>,
    /// Network latency in us added to every NIC (NCCL's built-in IB plugin reports 0) [default: 0]
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    pub(crate) net_latency: Option<f64>,
}

impl AuditSourceArgs {
    pub(crate) fn source(&self) -> Source {
        Source {
            fixture: self.fixture.clone(),
            topo: self.topo.clone(),
            nodes: 1,
            net_latency_us: self.net_latency.unwrap_or(0.0),
            ..Default::default()
        }
    }
}

/// `--graph FILE`, on every command that needs channels.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct GraphArgs {
    /// Use the graphs in an NCCL graph XML (NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE format)
    /// instead of searching; graphs the file lacks are searched
    #[arg(long, value_name = "FILE")]
    pub(crate) graph: Option<String>,
}

/// `--nvls on|off` (the same flag on every command that has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnOff {
    On,
    Off,
}

/// `--nvls`, or NCCL_NVLS_ENABLE's own rule when absent.
pub(crate) fn nvls_flag(nvls: Option<OnOff>) -> crate::model::input::NvlsFlag {
    use crate::model::input::NvlsFlag;
    match nvls {
        Some(OnOff::On) => NvlsFlag::On,
        Some(OnOff::Off) => NvlsFlag::Off,
        None => NvlsFlag::Auto,
    }
}

/// Flags that choose the model (shared with `audit`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ModelArgs {
    /// NCCL version family whose tuning table to use (2.18 to 2.30, or a full version such as 2.22.3; default: the libnccl on this machine, else the newest)
    #[arg(long, value_name = "VERSION")]
    pub(crate) nccl_version: Option<String>,
    /// Use a tuning table from a file instead of the built-in ones
    #[arg(long, value_name = "FILE", conflicts_with = "nccl_version")]
    pub(crate) tuning_table: Option<String>,
}

impl ModelArgs {
    /// The tuning table these flags choose (`log_version`: the NCCL version a log names).
    pub(crate) fn table(&self, log_version: Option<&str>) -> Result<TuningTable> {
        pipeline::choose_table(
            self.tuning_table.as_deref(),
            self.nccl_version.as_deref(),
            log_version,
        )
    }
}

/// `--nvls on|off`, spelled and explained the same on every command that has it.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub(crate) struct NvlsArgs {
    /// NVLink SHARP: on/off overrides NCCL_NVLS_ENABLE; by default NCCL's rule (an NVSwitch, sm90+,
    /// NCCL_NVLS_ENABLE not 0)
    #[arg(long, value_enum, value_name = "on|off")]
    pub(crate) nvls: Option<OnOff>,
}

impl NvlsArgs {
    pub(crate) fn flag(&self) -> crate::model::input::NvlsFlag {
        nvls_flag(self.nvls)
    }
}

/// `--size S` (one size) or `--sweep LO..HI` (doubling), the same on every command that takes sizes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SizeArgs {
    /// One message size in bytes; units are binary (16K, 16M = 16 MiB, 1G; also 16KiB, 16Mi)
    #[arg(
        long,
        value_name = "SIZE",
        allow_hyphen_values = true,
        conflicts_with = "sweep"
    )]
    pub(crate) size: Option<String>,
    /// A range of sizes LO..HI, both included, doubling each step (e.g. 8..4G)
    #[arg(long, value_name = "LO..HI", allow_hyphen_values = true)]
    pub(crate) sweep: Option<String>,
}

impl SizeArgs {
    /// The sizes asked for, or `default` (a size or a range) when neither flag is given.
    pub(crate) fn sizes(&self, default: &str) -> Result<Vec<u64>> {
        match (&self.size, &self.sweep) {
            (Some(size), _) => Ok(vec![crate::units::parse_size(size)
                .map_err(|e| Error::bad_input(format!("--size: {e}")))?]),
            (None, Some(range)) => crate::units::parse_sweep(range)
                .map_err(|e| Error::bad_input(format!("--sweep: {e}"))),
            (None, None) => crate::units::parse_size_range(default),
        }
    }

    /// The sizes as they run: each rounded down to whole elements of `elem_bytes` bytes (`elem_name`), as
    /// nccl-tests counts them, with one line on stderr naming each size that was rounded. A size below one element
    /// is kept as given (the command refuses or skips it, as before).
    pub fn as_run(sizes: &[u64], elem_bytes: u64, elem_name: &str) -> Vec<u64> {
        let elem = elem_bytes.max(1);
        let mut rounded = Vec::new();
        let out = sizes
            .iter()
            .map(|&s| {
                let r = s / elem * elem;
                if r == s || r == 0 {
                    s
                } else {
                    rounded.push(format!(
                        "{} ({s} B rounded down to whole {elem_name} elements)",
                        crate::units::format_size(r)
                    ));
                    r
                }
            })
            .collect();
        if !rounded.is_empty() {
            eprintln!("planner: runs {}", rounded.join(", "));
        }
        out
    }
}

/// What a command checks before it probes or loads a topology, so that a bad flag or file is one error line and
/// never arrives after the "no GPU found" notice (issue 26).
pub mod preflight {
    use crate::error::{Error, Result};
    use crate::model::select::Call;

    /// `--algo`/`--proto` in NCCL_ALGO / NCCL_PROTO syntax, named by the flag.
    pub fn algo_proto(algo: Option<&str>, proto: Option<&str>) -> Result<()> {
        for (flag, text) in [("--algo", algo), ("--proto", proto)] {
            let Some(text) = text else { continue };
            let mut env = crate::nccl_env::NcclEnv::default();
            if flag == "--algo" {
                env.algo = Some(text.to_string());
            } else {
                env.proto = Some(text.to_string());
            }
            crate::model::knobs::EnableMatrix::from_env(&env)
                .map_err(|e| Error::bad_input(format!("{flag} {text}: {e}")))?;
        }
        Ok(())
    }

    /// `--ops N`, and one `--size` too small for a single float32 element (a sweep skips such sizes instead).
    pub fn sizes(sizes: &[u64], single: bool, ops: usize) -> Result<()> {
        for &size in sizes {
            Call::check(size, ops)?;
        }
        if single {
            if let Some(&size) = sizes.first() {
                // The element rule of every collective; all-gather/reduce-scatter's per-rank rule needs the ranks.
                Call::new(crate::model::Coll::AllReduce, size, 1, ops)?;
            }
        }
        Ok(())
    }

    /// An output file's directory exists and is writable (the file is written after the work).
    pub fn output(path: Option<&str>) -> Result<()> {
        match path {
            Some(p) => crate::fsio::check_output_path(p),
            None => Ok(()),
        }
    }

    /// An input file exists and is a readable regular file within the limits (it is read again where it is used).
    pub fn input(path: Option<&str>) -> Result<()> {
        match path {
            Some(p) => crate::fsio::open_input(p).map(|_| ()),
            None => Ok(()),
        }
    }

    /// A directory given as input exists.
    pub fn input_dir(flag: &str, path: Option<&str>) -> Result<()> {
        match path {
            Some(p) if !std::path::Path::new(p).is_dir() => {
                Err(Error::bad_input(format!("{flag} {p}: not a directory")))
            }
            _ => Ok(()),
        }
    }
}
