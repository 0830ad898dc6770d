//! The fake doctor backend (`PLANNER_FAKE_BACKEND=1`, scenario in `PLANNER_FAKE_DOCTOR`): `planner doctor`
//! without a GPU, for tests of the verdicts and of what happens around a measurement (the watchdog, a GPU lost
//! mid-run, the result file, Ctrl-C). The machine is four H100 SXM GPUs on NVSwitch (18 NVLink 4 links each,
//! PCIe Gen5 x16), or one H200 on a VM that reports no counters (`vm`); each link test shows its expectation x
//! 0.97 unless the scenario degrades it. `PLANNER_FAKE_DELAY_MS` (default 0) delays every test.

use super::judge::expectation;
use super::rates::Rates;
use super::run::{DoctorBackend, DoctorProgress, LinkTester, NcclSweep, TesterFactory};
use super::{LinkResult, LinkTest, NcclPoint, TestKind, TestStatus};
use crate::error::{Error, Result};
use crate::probe::health::{
    EccState, GpuHealth, NvLinkErrors, NvLinkHealth, PcieState, ThrottleReason,
};
use std::time::Duration;

pub(crate) const SCENARIO_ENV: &str = "PLANNER_FAKE_DOCTOR";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scenario {
    Healthy,
    /// GPU 2's PCIe link trained at Gen4 x8.
    PcieDegraded,
    /// GPU 1's NVLinks 4, 9 and 13 down.
    NvlinkDown,
    /// GPU 2 in HW slowdown at half its SM clock.
    Throttled,
    /// No P2P between GPU 0 and GPU 1.
    P2pRefused,
    /// GPU 0's device-to-host copy never finishes.
    Hang,
    /// GPU 3 is lost during its device-to-host test.
    Lost,
    /// One H200 on a VM: NVML reports no NVLink, throttle, ECC or replay counters.
    Vm,
}

impl Scenario {
    pub(crate) const ALL: [(&'static str, Scenario); 8] = [
        ("healthy", Scenario::Healthy),
        ("pcie-degraded", Scenario::PcieDegraded),
        ("nvlink-down", Scenario::NvlinkDown),
        ("throttled", Scenario::Throttled),
        ("p2p-refused", Scenario::P2pRefused),
        ("hang", Scenario::Hang),
        ("lost", Scenario::Lost),
        ("vm", Scenario::Vm),
    ];

    pub(crate) fn name(self) -> &'static str {
        Scenario::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map(|(n, _)| *n)
            .unwrap_or("healthy")
    }

    /// The scenario `PLANNER_FAKE_DOCTOR` names (default healthy); bad input for any other value.
    pub(crate) fn from_var(value: Option<&str>) -> Result<Scenario> {
        let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Scenario::Healthy);
        };
        Scenario::ALL
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "{SCENARIO_ENV}={v}: expected one of {}",
                    Scenario::ALL.map(|(n, _)| n).join(", ")
                ))
            })
    }
}

pub(crate) struct FakeDoctor {
    pub(crate) scenario: Scenario,
    pub(crate) delay: Duration,
    pub(crate) rates: Rates,
}

impl FakeDoctor {
    pub(crate) fn from_env(rates: Rates) -> Result<FakeDoctor> {
        let scenario = Scenario::from_var(std::env::var(SCENARIO_ENV).ok().as_deref())?;
        let delay_ms = match std::env::var("PLANNER_FAKE_DELAY_MS") {
            Err(_) => 0,
            Ok(v) => v.trim().parse().map_err(|_| {
                Error::bad_input(format!(
                    "PLANNER_FAKE_DELAY_MS={v}: give milliseconds, such as 50"
                ))
            })?,
        };
        Ok(FakeDoctor {
            scenario,
            delay: Duration::from_millis(delay_ms),
            rates,
        })
    }

    fn gpus(&self) -> Vec<GpuHealth> {
        if self.scenario == Scenario::Vm {
            return vec![GpuHealth {
                index: 0,
                name: "NVIDIA H200".into(),
                bus_id: "00000000:00:05.0".into(),
                compute_capability: (9, 0),
                pcie: PcieState {
                    gen: Some(5),
                    width: Some(16),
                    max_gen: Some(5),
                    max_width: Some(16),
                    ..Default::default()
                },
                nvlinks: Vec::new(),
                throttle: None,
                ecc: EccState::default(),
                sm_clock_mhz: Some(1980),
                sm_clock_max_mhz: Some(1980),
                temperature_c: None,
                compute_processes: Some(0),
            }];
        }
        let buses = ["18", "2a", "3a", "5d"];
        (0..4u32)
            .map(|i| {
                let degraded = self.scenario == Scenario::PcieDegraded && i == 2;
                let throttled = self.scenario == Scenario::Throttled && i == 2;
                let nvlinks = (0..18u32)
                    .map(|l| {
                        let down = self.scenario == Scenario::NvlinkDown
                            && i == 1
                            && [4, 9, 13].contains(&l);
                        NvLinkHealth {
                            link: l,
                            active: Some(!down),
                            remote_bus_id: (!down).then(|| "00000000:c1:00.0".to_string()),
                            remote_is_switch: (!down).then_some(true),
                            errors: NvLinkErrors {
                                replay: Some(0),
                                recovery: Some(0),
                                crc_flit: Some(0),
                                crc_data: Some(0),
                            },
                        }
                    })
                    .collect();
                GpuHealth {
                    index: i,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    bus_id: format!("00000000:{}:00.0", buses[i as usize]),
                    compute_capability: (9, 0),
                    pcie: PcieState {
                        gen: Some(if degraded { 4 } else { 5 }),
                        width: Some(if degraded { 8 } else { 16 }),
                        max_gen: Some(5),
                        max_width: Some(16),
                        under_load_gen: None,
                        under_load_width: None,
                        replay_count: Some(0),
                    },
                    nvlinks,
                    throttle: Some(if throttled {
                        vec![ThrottleReason::HwSlowdown]
                    } else {
                        Vec::new()
                    }),
                    ecc: EccState {
                        enabled: Some(true),
                        volatile_uncorrected: Some(0),
                        volatile_corrected: Some(0),
                        aggregate_uncorrected: Some(0),
                    },
                    sm_clock_mhz: Some(if throttled { 990 } else { 1980 }),
                    sm_clock_max_mhz: Some(1980),
                    temperature_c: Some(if throttled { 92 } else { 41 }),
                    compute_processes: Some(0),
                }
            })
            .collect()
    }
}

impl DoctorBackend for FakeDoctor {
    fn describe(&self) -> String {
        format!("fake ({})", self.scenario.name())
    }
    fn health(&self) -> Result<Vec<GpuHealth>> {
        Ok(self.gpus())
    }
    fn driver(&self) -> (Option<String>, Option<i32>) {
        (Some("fake".into()), None)
    }
    fn tester(&self, _gpus: &[GpuHealth]) -> TesterFactory {
        let tester = FakeTester {
            scenario: self.scenario,
            delay: self.delay,
            rates: self.rates.clone(),
            healthy: FakeDoctor {
                scenario: Scenario::Healthy,
                delay: self.delay,
                rates: self.rates.clone(),
            }
            .gpus(),
        };
        Box::new(move || Ok(Box::new(tester) as Box<dyn LinkTester>))
    }
    fn nccl_sweep(
        &self,
        sizes: &[u64],
        _timeout: Duration,
        progress: &dyn DoctorProgress,
    ) -> Result<NcclSweep> {
        let ranks = self.gpus().len();
        // 360 GB/s busbw on the healthy NVSwitch box, less where the scenario hurts the links NCCL uses.
        let busbw = match self.scenario {
            Scenario::NvlinkDown => 300.0,
            Scenario::P2pRefused => 20.0,
            _ => 360.0,
        };
        let points = sizes
            .iter()
            .map(|&bytes| {
                let n = ranks.max(1) as f64;
                let factor = if ranks > 1 { 2.0 * (n - 1.0) / n } else { 1.0 };
                let t_us = 5.0 + bytes as f64 * factor / (busbw * 1e3);
                progress.line(&format!(
                    "NCCL all-reduce {}",
                    crate::units::format_size(bytes)
                ));
                NcclPoint {
                    bytes,
                    status: "ok".into(),
                    note: None,
                    times_us: vec![t_us, t_us * 1.01, t_us * 1.02],
                    nccl_choice: Some("Ring/Simple".into()),
                    figure: None,
                }
            })
            .collect();
        Ok(NcclSweep {
            points,
            ranks,
            nccl_version: Some("2.28.9".into()),
            cuda_version: Some("13.0".into()),
            launch: "one process".into(),
            hosts: Vec::new(),
            stopped: None,
        })
    }
}

struct FakeTester {
    scenario: Scenario,
    delay: Duration,
    rates: Rates,
    /// The healthy machine, whose expectations the fake figures follow.
    healthy: Vec<GpuHealth>,
}

impl LinkTester for FakeTester {
    fn run(&mut self, test: &LinkTest) -> LinkResult {
        std::thread::sleep(self.delay);
        let s = self.scenario;
        let touches = |g: u32| test.gpu == g || test.peer == Some(g);
        if s == Scenario::P2pRefused && test.test.is_peer() && touches(0) && touches(1) {
            return LinkResult::new(
                *test,
                TestStatus::Refused,
                Some("cuDeviceCanAccessPeer: GPU 0 cannot access GPU 1 (fake)".into()),
            );
        }
        if s == Scenario::Hang && test.test == TestKind::DeviceToHostMemcpyCe && test.gpu == 0 {
            // Never returns: the watchdog must give up on this thread.
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        if s == Scenario::Lost && test.test == TestKind::DeviceToHostMemcpyCe && test.gpu == 3 {
            return LinkResult::new(
                *test,
                TestStatus::Failed,
                Some("GPU 3: waiting for the copy (cuEventSynchronize) failed: CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure) (fake)".into()),
            );
        }
        let mut result = LinkResult::new(*test, TestStatus::Ok, None);
        let gbs = expectation(&self.rates, &self.healthy, &result)
            .map(|(v, _)| v)
            .unwrap_or(50.0);
        let mut factor = 0.97;
        if s == Scenario::PcieDegraded && test.gpu == 2 && !test.test.is_peer() {
            // Gen4 x8 of Gen5 x16: a quarter of the lanes' rate.
            factor *= 0.25;
        }
        if s == Scenario::NvlinkDown && test.test.is_peer() && touches(1) {
            factor *= 15.0 / 18.0;
        }
        if s == Scenario::Throttled && test.test.is_sm() && touches(2) {
            factor *= 0.5;
        }
        let ms = test.bytes as f64 / (gbs * factor * 1e6);
        result.times_ms = (0..test.repeats)
            .map(|i| ms * (1.0 + 0.002 * f64::from(i)))
            .collect();
        if test.test.is_bidirectional() {
            result.reverse_times_ms = result.times_ms.clone();
        }
        result
    }

    fn pcie_now(&mut self, gpu: u32) -> Option<(u32, u32)> {
        if self.scenario == Scenario::PcieDegraded && gpu == 2 {
            Some((4, 8))
        } else {
            Some((5, 16))
        }
    }
}
