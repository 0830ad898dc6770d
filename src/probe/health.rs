//! The health of each GPU as NVML reports it (`planner doctor`): the PCIe link now and at most, each NVLink's
//! state and error counters, why the clocks are held down, ECC, and who else runs on the GPU. Every value NVML
//! does not give (a VM, an older driver, a counter the GPU lacks) stays `None`, which the report prints as
//! "not reported": a missing counter is never zero errors.
//!
//! The types are plain data (serialised into doctor's result file); `read_health` is the one NVML reader.

use serde::{Deserialize, Serialize};

/// One GPU's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHealth {
    /// NVML's index.
    pub index: u32,
    pub name: String,
    pub bus_id: String,
    /// Compute capability as (major, minor).
    pub compute_capability: (i32, i32),
    pub pcie: PcieState,
    /// Every NVLink NVML knows on this GPU (empty: none, or not reported).
    pub nvlinks: Vec<NvLinkHealth>,
    /// Why the clocks are held down now; None: not reported.
    pub throttle: Option<Vec<ThrottleReason>>,
    pub ecc: EccState,
    /// SM clock now and at most, MHz.
    pub sm_clock_mhz: Option<u32>,
    pub sm_clock_max_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// Compute processes on the GPU when the probe ran (other jobs share the links).
    pub compute_processes: Option<u32>,
}

/// The PCIe link of one GPU. NVML's current generation drops while the GPU idles (power saving), so `doctor`
/// reads it again under load (`under_load_*`) and judges that reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieState {
    pub gen: Option<u32>,
    pub width: Option<u32>,
    pub max_gen: Option<u32>,
    pub max_width: Option<u32>,
    /// Generation and width read right after a host-to-device copy (None: not read or not reported).
    #[serde(default)]
    pub under_load_gen: Option<u32>,
    #[serde(default)]
    pub under_load_width: Option<u32>,
    /// Link-level retransmissions since the driver loaded (NVML's PCIe replay counter).
    pub replay_count: Option<u64>,
}

impl PcieState {
    /// The generation and width to judge: under load when read, else the idle reading.
    pub fn trained(&self) -> (Option<u32>, Option<u32>) {
        (
            self.under_load_gen.or(self.gen),
            self.under_load_width.or(self.width),
        )
    }
}

/// One NVLink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLinkHealth {
    pub link: u32,
    /// Up (true), down (false), not reported (None).
    pub active: Option<bool>,
    /// The PCI bus id at the far end, when up.
    pub remote_bus_id: Option<String>,
    /// The far end is an NVSwitch (None: not reported).
    pub remote_is_switch: Option<bool>,
    /// Data-link error counters; each None when not reported.
    pub errors: NvLinkErrors,
}

/// NVML's NVLink data-link error counters (`nvmlDeviceGetNvLinkErrorCounter`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLinkErrors {
    pub replay: Option<u64>,
    pub recovery: Option<u64>,
    pub crc_flit: Option<u64>,
    pub crc_data: Option<u64>,
}

impl NvLinkErrors {
    /// The counters that were reported, with their names.
    pub fn reported(&self) -> Vec<(&'static str, u64)> {
        [
            ("replay", self.replay),
            ("recovery", self.recovery),
            ("CRC flit", self.crc_flit),
            ("CRC data", self.crc_data),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .collect()
    }
}

/// A reason NVML gives for clocks below their maximum (`nvmlClocksEventReasons`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    GpuIdle,
    ApplicationsClocksSetting,
    SwPowerCap,
    HwSlowdown,
    SyncBoost,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrakeSlowdown,
    DisplayClockSetting,
}

impl ThrottleReason {
    /// As nvidia-smi -q names it.
    pub fn label(self) -> &'static str {
        match self {
            ThrottleReason::GpuIdle => "idle",
            ThrottleReason::ApplicationsClocksSetting => "applications clocks setting",
            ThrottleReason::SwPowerCap => "SW power cap",
            ThrottleReason::HwSlowdown => "HW slowdown",
            ThrottleReason::SyncBoost => "sync boost",
            ThrottleReason::SwThermalSlowdown => "SW thermal slowdown",
            ThrottleReason::HwThermalSlowdown => "HW thermal slowdown",
            ThrottleReason::HwPowerBrakeSlowdown => "HW power brake slowdown",
            ThrottleReason::DisplayClockSetting => "display clock setting",
        }
    }

    /// A reason that slows a busy GPU (not idling, not a clock setting someone chose).
    pub fn is_slowdown(self) -> bool {
        matches!(
            self,
            ThrottleReason::HwSlowdown
                | ThrottleReason::SwThermalSlowdown
                | ThrottleReason::HwThermalSlowdown
                | ThrottleReason::HwPowerBrakeSlowdown
        )
    }
}

/// ECC mode and counts of device-memory errors since the driver loaded (volatile) and in the GPU's life
/// (aggregate).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EccState {
    pub enabled: Option<bool>,
    pub volatile_uncorrected: Option<u64>,
    pub volatile_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
}

/// Read every GPU's health from NVML. Err: NVML cannot start or sees no GPU (one line, for exit 1).
pub fn read_health() -> crate::error::Result<Vec<GpuHealth>> {
    super::nvml::read_health()
}

/// (driver version, CUDA version the driver supports, e.g. 13000), each None when NVML does not say.
pub fn read_driver() -> (Option<String>, Option<i32>) {
    super::nvml::read_driver()
}

/// Read the PCIe generation and width of GPU `index` now (after a copy, to see the link under load).
pub fn read_pcie_now(index: u32) -> Option<(u32, u32)> {
    super::nvml::read_pcie_now(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaded_reading_wins_over_the_idle_one() {
        let idle = PcieState {
            gen: Some(1),
            width: Some(16),
            max_gen: Some(5),
            max_width: Some(16),
            ..Default::default()
        };
        assert_eq!(idle.trained(), (Some(1), Some(16)));
        let loaded = PcieState {
            under_load_gen: Some(5),
            under_load_width: Some(16),
            ..idle
        };
        assert_eq!(loaded.trained(), (Some(5), Some(16)));
    }

    #[test]
    fn only_reported_counters_are_listed() {
        let errors = NvLinkErrors {
            replay: Some(3),
            crc_data: Some(0),
            ..Default::default()
        };
        assert_eq!(errors.reported(), vec![("replay", 3), ("CRC data", 0)]);
        assert!(NvLinkErrors::default().reported().is_empty());
    }
}
