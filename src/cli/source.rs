//! The global flags that say where the topology comes from (`pipeline::Source`), and `--graph FILE`.

use crate::error::Result;
use crate::model::TuningTable;
use crate::pipeline::{self, Source};

#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Use a built-in topology instead of probing (see `planner fixtures`)
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "topo")]
    pub fixture: Option<String>,
    /// Use an NCCL topology XML file (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format)
    #[arg(long, global = true, value_name = "FILE")]
    pub topo: Option<String>,
    /// Fill a partial --topo file (a vendor file with no <gpu>) with this GPU model when no GPU is probed: a100-sxm, a100-pcie, h100-sxm, h100-pcie, h200-sxm, b200-sxm
    #[arg(long, global = true, value_name = "MODEL")]
    pub gpu: Option<String>,
    /// With --gpu: speed in Gb/s of the NICs filled into the file (default: from the NIC's PCI id, else the GPU model's reference NIC)
    #[arg(long, global = true, value_name = "GBITS")]
    pub nic_speed: Option<f64>,
    /// Replicate the node N times, joined through its NICs
    #[arg(long, global = true, value_name = "N", default_value_t = 1)]
    pub nodes: usize,
    /// Network latency in µs added to every NIC (NCCL's built-in IB plugin reports 0)
    #[arg(long, global = true, value_name = "US", default_value_t = 0.0)]
    pub net_latency: f64,
    /// Multi-node NVLink across the nodes (NCCL_MNNVL_ENABLE=1/0); default: NCCL's rule
    #[arg(long, global = true, value_name = "on|off")]
    pub mnnvl: Option<OnOff>,
    /// NCCL's environment, read once by `cli::run` (not a flag).
    #[arg(skip)]
    pub nccl_env: crate::nccl_env::NcclEnv,
}

impl SourceArgs {
    pub fn source(&self) -> Source {
        Source {
            fixture: self.fixture.clone(),
            topo: self.topo.clone(),
            gpu: self.gpu.clone(),
            nic_speed_gbits: self.nic_speed,
            nodes: self.nodes,
            net_latency_us: self.net_latency,
            mnnvl: self.mnnvl.map(|m| match m {
                OnOff::On => crate::topo::mnnvl::MnnvlEnable::On,
                OnOff::Off => crate::topo::mnnvl::MnnvlEnable::Off,
            }),
            nccl_env: self.nccl_env.clone(),
        }
    }
}

/// `--graph FILE`, shared by every command that needs channels.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GraphArgs {
    /// Use the graphs in an NCCL graph XML (NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE format)
    /// instead of searching; graphs the file lacks are searched
    #[arg(long, global = true, value_name = "FILE")]
    pub graph: Option<String>,
}

/// `--nvls on|off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// `--nvls`, or NCCL_NVLS_ENABLE's own rule when absent.
pub fn nvls_flag(nvls: Option<OnOff>) -> crate::model::input::NvlsFlag {
    use crate::model::input::NvlsFlag;
    match nvls {
        Some(OnOff::On) => NvlsFlag::On,
        Some(OnOff::Off) => NvlsFlag::Off,
        None => NvlsFlag::Auto,
    }
}

/// Flags that choose the model (shared with `audit`).
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// NCCL version family whose tuning table to use (2.18 to 2.30, or a full version such as 2.22.3; default: the libnccl on this machine, else the newest)
    #[arg(long, value_name = "VERSION")]
    pub nccl_version: Option<String>,
    /// Use a tuning table from a file instead of the built-in ones
    #[arg(long, value_name = "FILE", conflicts_with = "nccl_version")]
    pub tuning_table: Option<String>,
}

impl ModelArgs {
    /// The tuning table these flags choose (`log_version`: the NCCL version a log names).
    pub fn table(&self, log_version: Option<&str>) -> Result<TuningTable> {
        pipeline::choose_table(
            self.tuning_table.as_deref(),
            self.nccl_version.as_deref(),
            log_version,
        )
    }
}
