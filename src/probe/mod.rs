//! The probe stage: read the live machine (NVML + sysfs) into NCCL's topology
//! XML, exactly as NCCL's own detection would write it, so that everything
//! after the probe works the same on a live machine, a fixture or a file.
//!
//! The reads are split from the logic so that tests need no GPU:
//! - `nvml` fills plain data (`facts::MachineFacts`) from NVML and the CUDA driver;
//! - `sysfs::SysFs` reads /sys and /proc under a root directory;
//! - `detect` is NCCL's detection over those two, producing the XML tree.

pub(crate) mod cpu;
pub(crate) mod detect;
pub mod facts;
pub(crate) mod health;
pub(crate) mod net;
mod nvml;
pub(crate) mod sysfs;
pub(crate) mod warnings;

pub(crate) mod nccl_version;

use crate::error::Error;
use crate::xml::XmlNode;
pub use facts::MachineFacts;
pub use sysfs::SysFs;
pub use warnings::{Oddity, Warnings};

/// Why the probe gave no topology.
#[derive(Debug)]
pub(crate) enum ProbeError {
    /// No NVIDIA driver, no NVML library or no GPU: the caller falls back to a fixture.
    Unavailable(String),
    /// The machine has GPUs but reading them failed.
    Failed(Error),
}

/// The environment variables NCCL's detection listens to, read once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeEnv {
    /// NCCL_HOSTID: replaces host name + boot id in the host hash.
    pub nccl_hostid: Option<String>,
    pub net: net::NetEnv,
}

impl ProbeEnv {
    pub(crate) fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok();
        ProbeEnv {
            nccl_hostid: var("NCCL_HOSTID"),
            net: net::NetEnv {
                socket_ifname: var("NCCL_SOCKET_IFNAME"),
                ib_hca: var("NCCL_IB_HCA"),
                ib_merge_vfs: var("NCCL_IB_MERGE_VFS").map(|v| sysfs::strtol(&v) != 0),
            },
        }
    }
}

/// Everything one probe found.
#[derive(Debug, Clone)]
pub(crate) struct Probed {
    /// NCCL's topology XML (`<system>`).
    pub(crate) xml: XmlNode,
    /// What NVML said, including what the XML has no place for (P2P status,
    /// NVML CPU affinity, PCIe gen/width, driver version).
    pub(crate) facts: MachineFacts,
    pub(crate) warnings: Warnings,
}

/// Probe this machine. Warnings about oddities (invisible NVLink ends, NUMA -1,
/// missing sysfs files) go to stderr, one line per kind of oddity.
pub(crate) fn probe() -> Result<XmlNode, ProbeError> {
    let probed = probe_detailed()?;
    eprint!("{}", probed.warnings);
    Ok(probed.xml)
}

/// Probe this machine without printing anything.
pub(crate) fn probe_detailed() -> Result<Probed, ProbeError> {
    let mut warnings = Warnings::new();
    let facts = nvml::read_facts(&mut warnings)?;
    if facts.cuda_available && facts.gpus.iter().all(|g| g.cuda_ordinal.is_none()) {
        return Err(ProbeError::Unavailable(
            "CUDA sees none of NVML's GPUs (CUDA_VISIBLE_DEVICES?)".to_string(),
        ));
    }
    let sys = SysFs::live();
    let env = ProbeEnv::from_env();
    let xml = from_facts(&facts, &sys, std::env::consts::ARCH, &env, &mut warnings);
    Ok(Probed {
        xml,
        facts,
        warnings,
    })
}

/// NCCL's detection over recorded NVML facts and a sysfs root: what `probe()`
/// does after the NVML reads. `rust_arch` is `std::env::consts::ARCH` of the
/// probed machine.
pub fn from_facts(
    facts: &MachineFacts,
    sys: &SysFs,
    rust_arch: &str,
    env: &ProbeEnv,
    warnings: &mut Warnings,
) -> XmlNode {
    let arch = cpu::nccl_arch(rust_arch);
    let identity = cpu::host_identity(sys, env.nccl_hostid.as_deref());
    let host = detect::HostInfo {
        arch: arch.to_string(),
        cpu: if arch == "x86_64" {
            cpu::read_cpuid(sys)
        } else {
            None
        },
        host_hash: cpu::host_hash_attr(&identity),
    };
    let nets = net::discover(sys, &env.net);
    detect::build(facts, &nets, sys, &host, warnings)
}
