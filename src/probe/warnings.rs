//! Oddities the probe met and worked around. Each kind of oddity becomes one
//! line on stderr that names every place it was seen, so a VM with 8 GPUs on
//! the root bus gives one line, not eight.

use std::fmt;

/// The kinds of oddity, in the order their lines are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Oddity {
    /// NVLink whose far end is not visible here (`ffffffff:ff:ff.0`, a VM): taken as an NVSwitch.
    InvisibleNvlinkPeer,
    /// NVLink far end that NCCL would take as an NVSwitch although NVML says otherwise.
    NvlinkPeerTypeMismatch,
    /// A PCI device directly on a root bus: no upstream port, so no port link speed/width.
    RootBusDevice,
    /// sysfs says NUMA node -1 (no NUMA information, usual in VMs).
    NumaUnknown,
    /// A GPU with no sysfs entry at all (a container without /sys/bus/pci).
    GpuNotInSysfs,
    /// A sysfs or procfs file that should be there but could not be read.
    MissingFile,
    /// A network interface that is not a PCI device (virtio, bridge, loopback).
    NonPciNic,
    /// GPUDirect RDMA support could not be asked (no CUDA driver library).
    GdrUnknown,
    /// GPUs that NVML sees but CUDA hides (CUDA_VISIBLE_DEVICES).
    HiddenFromCuda,
    /// NVML says peer-to-peer is not OK between two GPUs.
    P2pNotOk,
    /// An NVML query that failed; the value was left out.
    NvmlQueryFailed,
}

impl Oddity {
    fn what(self) -> &'static str {
        match self {
            Oddity::InvisibleNvlinkPeer => {
                "NVLink far end not visible here (ffffffff:ff:ff.0, a VM); taken as an NVSwitch \
                 (tclass 0x068000) as NCCL does"
            }
            Oddity::NvlinkPeerTypeMismatch => {
                "NVLink far end missing from sysfs; NCCL takes it as an NVSwitch, NVML disagrees"
            }
            Oddity::RootBusDevice => {
                "PCI device directly on a root bus (no upstream port): link_width=0 as NCCL \
                 writes it (NCCL reads 0 as x16)"
            }
            Oddity::NumaUnknown => {
                "NUMA node -1 (no NUMA information); CPU node numaid=-1 without affinity, as NCCL \
                 writes it"
            }
            Oddity::GpuNotInSysfs => {
                "GPU missing from /sys/bus/pci; attached to CPU numaid=-1 with its PCIe link from NVML"
            }
            Oddity::MissingFile => "could not read",
            Oddity::NonPciNic => {
                "network device not on PCI; attached to the first CPU as NCCL does"
            }
            Oddity::GdrUnknown => {
                "no CUDA driver library to ask for GPUDirect RDMA support; gdr=0 written"
            }
            Oddity::HiddenFromCuda => "GPU hidden from CUDA (CUDA_VISIBLE_DEVICES?); left out",
            Oddity::P2pNotOk => {
                "NVML says P2P is not OK; NCCL will route these GPUs through the CPU"
            }
            Oddity::NvmlQueryFailed => "NVML query failed; value left out",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Warnings {
    items: Vec<(Oddity, String)>,
}

impl Warnings {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one place where `oddity` was seen; repeats are dropped.
    pub(crate) fn add(&mut self, oddity: Oddity, subject: impl Into<String>) {
        let subject = subject.into();
        if !self
            .items
            .iter()
            .any(|(o, s)| *o == oddity && *s == subject)
        {
            self.items.push((oddity, subject));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn contains(&self, oddity: Oddity) -> bool {
        self.items.iter().any(|(o, _)| *o == oddity)
    }

    /// The places recorded for one kind of oddity, in the order they were seen.
    pub fn subjects(&self, oddity: Oddity) -> Vec<&str> {
        self.items
            .iter()
            .filter(|(o, _)| *o == oddity)
            .map(|(_, s)| s.as_str())
            .collect()
    }

    /// One line per kind of oddity: `what: subject, subject, ...`.
    pub fn lines(&self) -> Vec<String> {
        let mut kinds: Vec<Oddity> = self.items.iter().map(|(o, _)| *o).collect();
        kinds.sort();
        kinds.dedup();
        kinds
            .into_iter()
            .map(|k| format!("{}: {}", k.what(), self.subjects(k).join(", ")))
            .collect()
    }
}

impl fmt::Display for Warnings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "planner: probe: {line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_and_no_repeats() {
        let mut w = Warnings::new();
        w.add(Oddity::RootBusDevice, "0000:00:06.0");
        w.add(Oddity::InvisibleNvlinkPeer, "GPU 0000:00:06.0 (18 links)");
        w.add(Oddity::RootBusDevice, "0000:00:07.0");
        w.add(Oddity::RootBusDevice, "0000:00:06.0");
        let lines = w.lines();
        assert_eq!(lines.len(), 2);
        // Kinds print in their declared order, places in the order seen.
        assert!(
            lines[0].starts_with("NVLink far end not visible"),
            "{lines:?}"
        );
        assert!(
            lines[1].ends_with(": 0000:00:06.0, 0000:00:07.0"),
            "{lines:?}"
        );
        assert_eq!(w.to_string().lines().count(), 2);
        assert!(w.to_string().starts_with("planner: probe: "));
    }
}
