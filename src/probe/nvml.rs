//! The live NVML (and CUDA driver) reads that fill `MachineFacts`.
//!
//! nvml-wrapper 0.13 has two gaps: `remote_device_type`
//! always answers Unknown, and `field_values_for` always sends scopeId 0. Both
//! are read here through the raw function table instead.

use super::facts::{
    C2cLinkFacts, FabricFacts, GpuFacts, MachineFacts, NvLinkFacts, P2pFacts, RemoteType,
};
use super::warnings::{Oddity, Warnings};
use super::ProbeError;
use crate::error::Error;
use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus};
use nvml_wrapper::enum_wrappers::nv_link::Capability;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;

/// NVML's field ids (nvml.h).
const FI_NVLINK_GET_STATE: u32 = 165;
const FI_C2C_LINK_COUNT: u32 = 170;
const FI_C2C_LINK_GET_STATUS: u32 = 171;
const FI_C2C_LINK_GET_MAX_BW: u32 = 172;
/// Words of 64 CPUs asked for in the affinity mask (4096 CPUs).
const AFFINITY_WORDS: usize = 64;

/// Read everything the probe needs from NVML and the CUDA driver.
pub(crate) fn read_facts(warnings: &mut Warnings) -> Result<MachineFacts, ProbeError> {
    let nvml =
        Nvml::init().map_err(|e| ProbeError::Unavailable(format!("NVML could not start: {e}")))?;
    let count = nvml
        .device_count()
        .map_err(|e| ProbeError::Unavailable(format!("NVML cannot count GPUs: {e}")))?;
    if count == 0 {
        return Err(ProbeError::Unavailable("NVML sees no GPU".to_string()));
    }
    let failed = |what: String| ProbeError::Failed(Error::runtime(what));
    let mut devices: Vec<Device> = Vec::new();
    for i in 0..count {
        devices.push(
            nvml.device_by_index(i)
                .map_err(|e| failed(format!("NVML device {i}: {e}")))?,
        );
    }
    let mut facts = MachineFacts {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        ..Default::default()
    };
    for (i, dev) in devices.iter().enumerate() {
        let index = i as u32;
        let pci = dev
            .pci_info()
            .map_err(|e| failed(format!("NVML device {i}: PCI info: {e}")))?;
        let cc = dev
            .cuda_compute_capability()
            .map_err(|e| failed(format!("NVML device {i}: compute capability: {e}")))?;
        let sm = cc.major * 10 + cc.minor;
        let nvlinks = (0..sys::NVML_NVLINK_MAX_LINKS)
            .map(|l| read_link(&nvml, dev, l, sm))
            .collect();
        let c2c = if sm >= 90 { read_c2c(&nvml, dev) } else { None };
        let mut ok_or_warn = |what: &str, r: Result<u32, nvml_wrapper::error::NvmlError>| match r {
            Ok(v) => Some(v),
            Err(e) => {
                // "Not Supported" is an answer (a VM, no NUMA), not an oddity to report.
                if !matches!(e, nvml_wrapper::error::NvmlError::NotSupported) {
                    warnings.add(Oddity::NvmlQueryFailed, format!("GPU {i} {what}: {e}"));
                }
                None
            }
        };
        let pcie_gen = ok_or_warn("PCIe generation", dev.current_pcie_link_gen());
        let pcie_width = ok_or_warn("PCIe width", dev.current_pcie_link_width());
        let pcie_max_gen = ok_or_warn("max PCIe generation", dev.max_pcie_link_gen());
        let pcie_max_width = ok_or_warn("max PCIe width", dev.max_pcie_link_width());
        let numa_node = ok_or_warn("NUMA node", dev.numa_node_id());
        let cpu_affinity = dev.cpu_affinity(AFFINITY_WORDS).ok().map(|words| {
            // c_ulong is 64 bits on the Linux targets NVML exists for.
            #[allow(clippy::unnecessary_cast)]
            let mut w: Vec<u64> = words.into_iter().map(|x| x as u64).collect();
            while w.len() > 1 && w.last() == Some(&0) {
                w.pop();
            }
            w
        });
        // NVML_AFFINITY_SCOPE_NODE: the NUMA nodes nearest the GPU, as nvidia-smi's "NUMA Affinity" reads them.
        let memory_affinity = dev
            .memory_affinity(AFFINITY_WORDS, sys::NVML_AFFINITY_SCOPE_NODE)
            .ok()
            .map(|words| {
                #[allow(clippy::unnecessary_cast)]
                let w: Vec<u64> = words.into_iter().map(|x| x as u64).collect();
                w
            });
        facts.gpus.push(GpuFacts {
            index,
            name: dev.name().unwrap_or_default(),
            bus_id: pci.bus_id.clone(),
            cuda_ordinal: None,
            compute_capability: (cc.major, cc.minor),
            nvlinks,
            c2c,
            gdr: None,
            pcie_gen,
            pcie_width,
            pcie_max_gen,
            pcie_max_width,
            cpu_affinity,
            memory_affinity,
            numa_node,
            fabric: read_fabric(&nvml, dev),
        });
    }
    for (a, da) in devices.iter().enumerate() {
        for (b, db) in devices.iter().enumerate() {
            if a == b {
                continue;
            }
            let ok = |idx| da.p2p_status(db, idx).ok().map(|s| s == P2pStatus::Ok);
            facts.p2p.push(P2pFacts {
                from: a as u32,
                to: b as u32,
                read_ok: ok(P2pCapabilitiesIndex::Read),
                write_ok: ok(P2pCapabilitiesIndex::Write),
            });
        }
    }
    add_cuda_view(&mut facts);
    Ok(facts)
}

fn read_link(nvml: &Nvml, dev: &Device, link: u32, sm: i32) -> NvLinkFacts {
    let wrapper = dev.link_wrapper_for(link);
    let p2p_capable = wrapper.has_capability(Capability::P2p).ok();
    // NCCL reads the state from the scoped field on sm90+ (the old call is unreliable there).
    let active = if sm >= 90 {
        field_value(nvml, dev, FI_NVLINK_GET_STATE, link)
            .map(|v| v == u64::from(sys::nvmlEnableState_enum_NVML_FEATURE_ENABLED))
    } else {
        wrapper.is_active().ok()
    };
    let (remote_bus_id, remote_type) = if p2p_capable == Some(true) && active == Some(true) {
        (
            wrapper.remote_pci_info().ok().map(|p| p.bus_id),
            remote_type(nvml, dev, link),
        )
    } else {
        (None, None)
    };
    NvLinkFacts {
        link,
        p2p_capable,
        active,
        version: wrapper.version().ok(),
        remote_bus_id,
        remote_type,
    }
}

fn read_c2c(nvml: &Nvml, dev: &Device) -> Option<Vec<C2cLinkFacts>> {
    let count = field_value(nvml, dev, FI_C2C_LINK_COUNT, 0)?;
    Some(
        (0..count as u32)
            .map(|l| C2cLinkFacts {
                up: field_value(nvml, dev, FI_C2C_LINK_GET_STATUS, l).map(|v| v == 1),
                max_bw: field_value(nvml, dev, FI_C2C_LINK_GET_MAX_BW, l).map(|v| v as u32),
            })
            .collect(),
    )
}

/// One NVML field value with its scope (the link), as an unsigned number.
fn field_value(nvml: &Nvml, dev: &Device, field: u32, scope: u32) -> Option<u64> {
    let get = nvml.lib().nvmlDeviceGetFieldValues.as_ref().ok()?;
    // SAFETY: nvmlFieldValue_t is a plain C struct of integers and a union of
    // numbers, for which all-zero bytes are a valid value.
    let mut fv: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
    fv.fieldId = field;
    fv.scopeId = scope;
    // SAFETY: the handle comes from a live `Device` that borrows `nvml`, so the
    // library is loaded and the handle valid; NVML writes one element, the
    // array length we pass.
    let ret = unsafe { get(dev.handle(), 1, &mut fv) };
    if ret != sys::nvmlReturn_enum_NVML_SUCCESS
        || fv.nvmlReturn != sys::nvmlReturn_enum_NVML_SUCCESS
    {
        return None;
    }
    // SAFETY: NVML says which union member it wrote in `valueType`; we read that one.
    unsafe {
        match fv.valueType {
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => Some(u64::from(fv.value.uiVal)),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => Some(fv.value.ulVal as u64),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => Some(fv.value.ullVal),
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => {
                u64::try_from(fv.value.sllVal).ok()
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => {
                u64::try_from(fv.value.siVal).ok()
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => {
                Some(u64::from(fv.value.usVal))
            }
            _ => None,
        }
    }
}

/// NVML's fabric identity, asked as NCCL asks it (`nvmlGpuFabricInfo_v2`, v2.28.9-1 `misc/nvmlwrap.cc:295-299`);
/// `None` when the driver lacks the call, the call fails, or the GPU has no fabric (state NOT_SUPPORTED).
fn read_fabric(nvml: &Nvml, dev: &Device) -> Option<FabricFacts> {
    let get = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().ok()?;
    // SAFETY: the v3 struct is plain integers and byte arrays, for which all-zero bytes are valid.
    let mut info: sys::nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
    // NVML_STRUCT_VERSION(GpuFabricInfo, 2): the v2 size with the version in the top byte. Asking for v2 (as NCCL
    // does) works on drivers that predate v3; the v3 buffer is larger than v2, so NVML's v2 write fits.
    info.version = (std::mem::size_of::<sys::nvmlGpuFabricInfo_v2_t>() as u32) | (2 << 24);
    // SAFETY: the handle comes from a live `Device` that borrows `nvml`, so the library is loaded and the handle
    // valid; `info` is a writable struct at least as large as the version we name.
    let ret = unsafe { get(dev.handle(), &mut info) };
    if ret != sys::nvmlReturn_enum_NVML_SUCCESS
        || u32::from(info.state) == sys::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
    {
        return None;
    }
    let half = |bytes: &[u8]| {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        u64::from_le_bytes(b)
    };
    Some(FabricFacts {
        cluster_uuid: [half(&info.clusterUuid[..8]), half(&info.clusterUuid[8..])],
        clique_id: info.cliqueId,
        state: u32::from(info.state),
        health_mask: info.healthMask,
    })
}

/// The far end's type through the raw call (the wrapper's answer is always Unknown).
fn remote_type(nvml: &Nvml, dev: &Device, link: u32) -> Option<RemoteType> {
    let get = nvml
        .lib()
        .nvmlDeviceGetNvLinkRemoteDeviceType
        .as_ref()
        .ok()?;
    let mut t: sys::nvmlIntNvLinkDeviceType_t =
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    // SAFETY: valid handle (see `field_value`); NVML writes one enum value to `t`.
    let ret = unsafe { get(dev.handle(), link, &mut t) };
    if ret != sys::nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    Some(match t {
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU => RemoteType::Gpu,
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU => RemoteType::IbmNpu,
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH => RemoteType::Switch,
        _ => RemoteType::Unknown,
    })
}

/// CUDA ordinals (NCCL's rank order, honouring CUDA_VISIBLE_DEVICES) and
/// GPUDirect RDMA support, matched to NVML's GPUs by PCI location.
fn add_cuda_view(facts: &mut MachineFacts) {
    use cudarc::driver::{result, sys as cu};
    // SAFETY: only tries to dlopen the driver library; no CUDA call is made.
    if !unsafe { cu::is_culib_present() } {
        return;
    }
    if result::init().is_err() {
        return;
    }
    let Ok(count) = result::device::get_count() else {
        return;
    };
    facts.cuda_available = true;
    for ordinal in 0..count {
        let Ok(dev) = result::device::get(ordinal) else {
            continue;
        };
        // SAFETY: `dev` was just returned by cuDeviceGet for a valid ordinal.
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.ok();
        let domain = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
        let bus = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
        let device = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
        let gdr = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
        let (Some(domain), Some(bus), Some(device)) = (domain, bus, device) else {
            continue;
        };
        let location = format!("{domain:04x}:{bus:02x}:{device:02x}");
        if let Some(g) = facts
            .gpus
            .iter_mut()
            .find(|g| g.nccl_bus_id().starts_with(&location))
        {
            g.cuda_ordinal = Some(ordinal as u32);
            g.gdr = gdr.map(|v| v != 0);
        }
    }
}

// ---------------------------------------------------------------------------
// Health (`planner doctor`): what NVML says about each GPU's links, clocks and memory. NotSupported (a VM, a GPU
// without the counter) leaves a field None: "not reported", never zero.

/// Every GPU's health; Err when NVML cannot start or sees no GPU.
pub(super) fn read_health() -> crate::error::Result<Vec<super::health::GpuHealth>> {
    use super::health::{EccState, GpuHealth, NvLinkErrors, NvLinkHealth, PcieState};
    use nvml_wrapper::enum_wrappers::device::{
        Clock, EccCounter, MemoryError, MemoryLocation, TemperatureSensor,
    };
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    let nvml = Nvml::init().map_err(|e| Error::runtime(format!("NVML could not start: {e}")))?;
    let count = nvml
        .device_count()
        .map_err(|e| Error::runtime(format!("NVML cannot count GPUs: {e}")))?;
    if count == 0 {
        return Err(Error::runtime("NVML sees no GPU"));
    }
    let mut out = Vec::new();
    for i in 0..count {
        let dev = nvml
            .device_by_index(i)
            .map_err(|e| Error::runtime(format!("NVML device {i}: {e}")))?;
        let cc = dev
            .cuda_compute_capability()
            .map(|c| (c.major, c.minor))
            .unwrap_or((0, 0));
        let sm = cc.0 * 10 + cc.1;
        let mut nvlinks = Vec::new();
        for l in 0..sys::NVML_NVLINK_MAX_LINKS {
            let wrapper = dev.link_wrapper_for(l);
            let active = if sm >= 90 {
                field_value(&nvml, &dev, FI_NVLINK_GET_STATE, l)
                    .map(|v| v == u64::from(sys::nvmlEnableState_enum_NVML_FEATURE_ENABLED))
            } else {
                wrapper.is_active().ok()
            };
            // A link index NVML knows nothing about is not a link of this GPU.
            let Some(active) = active else { continue };
            let (remote_bus_id, remote_is_switch) = if active {
                (
                    wrapper.remote_pci_info().ok().map(|p| p.bus_id),
                    remote_type(&nvml, &dev, l).map(|t| t == RemoteType::Switch),
                )
            } else {
                (None, None)
            };
            let counter = |c| wrapper.error_counter(c).ok();
            nvlinks.push(NvLinkHealth {
                link: l,
                active: Some(active),
                remote_bus_id,
                remote_is_switch,
                errors: NvLinkErrors {
                    replay: counter(ErrorCounter::DlReplay),
                    recovery: counter(ErrorCounter::DlRecovery),
                    crc_flit: counter(ErrorCounter::DlCrcFlit),
                    crc_data: counter(ErrorCounter::DlCrcData),
                },
            });
        }
        let ecc_count = |t, c| {
            dev.memory_error_counter(t, c, MemoryLocation::Device)
                .or_else(|_| dev.total_ecc_errors(t, c))
                .ok()
        };
        out.push(GpuHealth {
            index: i,
            name: dev.name().unwrap_or_default(),
            bus_id: dev.pci_info().map(|p| p.bus_id).unwrap_or_default(),
            compute_capability: cc,
            pcie: PcieState {
                gen: dev.current_pcie_link_gen().ok(),
                width: dev.current_pcie_link_width().ok(),
                max_gen: dev.max_pcie_link_gen().ok(),
                max_width: dev.max_pcie_link_width().ok(),
                under_load_gen: None,
                under_load_width: None,
                replay_count: dev.pcie_replay_counter().ok().map(u64::from),
            },
            nvlinks,
            throttle: dev.current_throttle_reasons().ok().map(throttle_reasons),
            ecc: EccState {
                enabled: dev.is_ecc_enabled().ok().map(|m| m.currently_enabled),
                volatile_uncorrected: ecc_count(MemoryError::Uncorrected, EccCounter::Volatile),
                volatile_corrected: ecc_count(MemoryError::Corrected, EccCounter::Volatile),
                aggregate_uncorrected: ecc_count(MemoryError::Uncorrected, EccCounter::Aggregate),
            },
            sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
            sm_clock_max_mhz: dev.max_clock_info(Clock::SM).ok(),
            temperature_c: dev.temperature(TemperatureSensor::Gpu).ok(),
            compute_processes: dev.running_compute_processes_count().ok(),
        });
    }
    Ok(out)
}

fn throttle_reasons(
    bits: nvml_wrapper::bitmasks::device::ThrottleReasons,
) -> Vec<super::health::ThrottleReason> {
    use super::health::ThrottleReason as R;
    use nvml_wrapper::bitmasks::device::ThrottleReasons as B;
    [
        (B::GPU_IDLE, R::GpuIdle),
        (B::APPLICATIONS_CLOCKS_SETTING, R::ApplicationsClocksSetting),
        (B::SW_POWER_CAP, R::SwPowerCap),
        (B::HW_SLOWDOWN, R::HwSlowdown),
        (B::SYNC_BOOST, R::SyncBoost),
        (B::SW_THERMAL_SLOWDOWN, R::SwThermalSlowdown),
        (B::HW_THERMAL_SLOWDOWN, R::HwThermalSlowdown),
        (B::HW_POWER_BRAKE_SLOWDOWN, R::HwPowerBrakeSlowdown),
        (B::DISPLAY_CLOCK_SETTING, R::DisplayClockSetting),
    ]
    .into_iter()
    .filter(|(b, _)| bits.contains(*b))
    .map(|(_, r)| r)
    .collect()
}

/// GPU `index`'s PCIe generation and width now.
pub(super) fn read_pcie_now(index: u32) -> Option<(u32, u32)> {
    let nvml = Nvml::init().ok()?;
    let dev = nvml.device_by_index(index).ok()?;
    Some((
        dev.current_pcie_link_gen().ok()?,
        dev.current_pcie_link_width().ok()?,
    ))
}

/// (driver version, CUDA version the driver supports) as NVML reports them.
pub(super) fn read_driver() -> (Option<String>, Option<i32>) {
    match Nvml::init() {
        Ok(nvml) => (
            nvml.sys_driver_version().ok(),
            nvml.sys_cuda_driver_version().ok(),
        ),
        Err(_) => (None, None),
    }
}
