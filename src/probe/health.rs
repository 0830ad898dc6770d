//! The health of each GPU as NVML reports it (`planner doctor`): the PCIe link now and at most, each NVLink's
//! state and error counters, why the clocks are held down, ECC, and who else runs on the GPU. Every value NVML
//! does not give (a VM, an older driver, a counter the GPU lacks) stays `None`, which the report prints as
//! "not reported": a missing counter is never zero errors.
//!
//! The types are plain data (serialised into doctor's result file); `read_health` is the one NVML reader.

use serde::{Deserialize, Serialize};

/// One GPU's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GpuHealth {
    /// NVML's index.
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) bus_id: String,
    /// Compute capability as (major, minor).
    pub(crate) compute_capability: (i32, i32),
    pub(crate) pcie: PcieState,
    /// Every NVLink NVML knows on this GPU (empty: none, or not reported).
    pub(crate) nvlinks: Vec<NvLinkHealth>,
    /// Why the clocks are held down now; None: not reported.
    pub(crate) throttle: Option<Vec<ThrottleReason>>,
    pub(crate) ecc: EccState,
    /// SM clock now and at most, MHz.
    pub(crate) sm_clock_mhz: Option<u32>,
    pub(crate) sm_clock_max_mhz: Option<u32>,
    pub(crate) temperature_c: Option<u32>,
    /// Compute processes on the GPU when the probe ran (other jobs share the links).
    pub(crate) compute_processes: Option<u32>,
}

/// The PCIe link of one GPU. NVML's current generation drops while the GPU idles (power saving), so `doctor`
/// reads it again under load (`under_load_*`) and judges that reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PcieState {
    pub(crate) gen: Option<u32>,
    pub(crate) width: Option<u32>,
    pub(crate) max_gen: Option<u32>,
    pub(crate) max_width: Option<u32>,
    /// Generation and width read right after a host-to-device copy (None: not read or not reported).
    #[serde(default)]
    pub(crate) under_load_gen: Option<u32>,
    #[serde(default)]
    pub(crate) under_load_width: Option<u32>,
    /// Link-level retransmissions since the driver loaded (NVML's PCIe replay counter).
    pub(crate) replay_count: Option<u64>,
}

impl PcieState {
    /// The generation and width to judge: under load when read, else the idle reading.
    pub(crate) fn trained(&self) -> (Option<u32>, Option<u32>) {
        (
            self.under_load_gen.or(self.gen),
            self.under_load_width.or(self.width),
        )
    }
}

/// One NVLink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NvLinkHealth {
    pub(crate) link: u32,
    /// Up (true), down (false), not reported (None).
    pub(crate) active: Option<bool>,
    /// The PCI bus id at the far end, when up.
    pub(crate) remote_bus_id: Option<String>,
    /// The far end is an NVSwitch (None: not reported).
    pub(crate) remote_is_switch: Option<bool>,
    /// Data-link error counters; each None when not reported.
    pub(crate) errors: NvLinkErrors,
}

/// NVML's NVLink data-link error counters (`nvmlDeviceGetNvLinkErrorCounter`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct NvLinkErrors {
    pub(crate) replay: Option<u64>,
    pub(crate) recovery: Option<u64>,
    pub(crate) crc_flit: Option<u64>,
    pub(crate) crc_data: Option<u64>,
}

impl NvLinkErrors {
    /// The counters that were reported, with their names.
    pub(crate) fn reported(&self) -> Vec<(&'static str, u64)> {
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
pub(crate) enum ThrottleReason {
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
    pub(crate) fn label(self) -> &'static str {
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
    pub(crate) fn is_slowdown(self) -> bool {
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
pub(crate) struct EccState {
    pub(crate) enabled: Option<bool>,
    pub(crate) volatile_uncorrected: Option<u64>,
    pub(crate) volatile_corrected: Option<u64>,
    pub(crate) aggregate_uncorrected: Option<u64>,
}

/// Read every GPU's health from NVML. Err: NVML cannot start or sees no GPU (one line, for exit 1).
pub(crate) fn read_health() -> crate::error::Result<Vec<GpuHealth>> {
    super::nvml::read_health()
}

/// (driver version, CUDA version the driver supports, e.g. 13000), each None when NVML does not say.
pub(crate) fn read_driver() -> (Option<String>, Option<i32>) {
    super::nvml::read_driver()
}

/// Read the PCIe generation and width of GPU `index` now (after a copy, to see the link under load).
pub(crate) fn read_pcie_now(index: u32) -> Option<(u32, u32)> {
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
