//! The live doctor backend: NVML (`probe::health`), the copy tests (`gpu::bandwidth`), and the NCCL sweep through
//! verify's NCCL backend (NCCL's free choice, the `auto` row, in child processes; under a launcher one rank per
//! process, as `planner verify` runs).

use super::run::{DoctorBackend, DoctorProgress, LinkTester, NcclSweep, TesterFactory};
use super::{LinkResult, LinkTest, NcclPoint, TestKind, TestStatus};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::gpu::bandwidth::{CopyTester, Engine, PeerCopy};
use crate::measure::{Backend, IterPlan};
use crate::model::Coll;
use crate::predict::NoModel;
use crate::probe::health::{self, GpuHealth};
use crate::verify::rendezvous::LauncherEnv;
use crate::verify::run::{Progress, TopologyRecord, VerifyRequest};
use crate::verify::PairSelection;
use std::time::Duration;

pub(crate) struct LiveDoctor {
    pub(crate) launcher: Option<LauncherEnv>,
}

impl DoctorBackend for LiveDoctor {
    fn describe(&self) -> String {
        "live".into()
    }

    fn health(&self) -> Result<Vec<GpuHealth>> {
        health::read_health()
    }

    fn driver(&self) -> (Option<String>, Option<i32>) {
        health::read_driver()
    }

    fn tester(&self, gpus: &[GpuHealth]) -> TesterFactory {
        let bus_ids: Vec<String> = gpus.iter().map(|g| g.bus_id.clone()).collect();
        Box::new(move || {
            let copies = CopyTester::open(&bus_ids)?;
            Ok(Box::new(LiveTester {
                copies,
                nvrtc: crate::gpu::nvrtc_available(),
            }) as Box<dyn LinkTester>)
        })
    }

    fn nccl_sweep(
        &self,
        sizes: &[u64],
        timeout: Duration,
        progress: &dyn DoctorProgress,
    ) -> Result<NcclSweep> {
        crate::nccl::check_libraries()?;
        let request = VerifyRequest {
            collective: Coll::AllReduce,
            dtype: Dtype::F32,
            sizes: sizes.to_vec(),
            // No pinned pair: NCCL's own choice alone (and its TUNING read-out, which says what it picked).
            pairs: PairSelection::List(Vec::new()),
            pairs_text: "none (NCCL's choice)".into(),
            backends: vec![Backend::Nccl],
            plan: IterPlan::default(),
            graph: false,
            timeout,
            gpus: None,
            tuner: None,
        };
        let exe = std::env::current_exe().map_err(|e| {
            Error::runtime(format!(
                "cannot find the planner binary to start NCCL children: {e}"
            ))
        })?;
        let bridge = Bridge(progress);
        let topology = TopologyRecord::default();
        let verify_run = match &self.launcher {
            Some(env) => {
                match crate::verify::run::run_distributed(
                    &exe, env, &request, &topology, &NoModel, &bridge,
                )? {
                    Some(run) => run,
                    // Another rank: rank 0 reports.
                    None => return Ok(NcclSweep::default()),
                }
            }
            None => {
                crate::verify::run::run_local(&exe, &request, &topology, &NoModel, None, &bridge)?
            }
        };
        let points = verify_run
            .rows
            .iter()
            .filter(|r| r.is_auto())
            .map(|r| NcclPoint {
                bytes: r.bytes,
                status: serde_json::to_value(r.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_else(|| "failed".into()),
                note: r.note.clone(),
                times_us: r.times_us.clone(),
                nccl_choice: r.nccl_choice.map(|c| c.pair.to_string()),
                figure: None,
            })
            .collect();
        let m = &verify_run.machine;
        Ok(NcclSweep {
            points,
            ranks: m.world_size,
            nccl_version: m.nccl_version.clone(),
            cuda_version: m.cuda_version.clone(),
            launch: verify_run.options.launch.clone(),
            hosts: m.hosts.clone(),
            stopped: verify_run.stopped.as_ref().map(|s| s.detail.clone()),
        })
    }
}

/// verify's progress callbacks as doctor's lines.
struct Bridge<'a>(&'a dyn DoctorProgress);

impl Progress for Bridge<'_> {
    fn start(&self, _total: u64) {}
    fn job(&self, label: &str) {
        self.0.line(&format!("NCCL: {label}"));
    }
    fn step(&self, label: &str) {
        self.0.line(&format!("NCCL: {label} done"));
    }
    fn note(&self, text: &str) {
        self.0.line(&format!("NCCL: {text}"));
    }
    fn finish(&self) {}
}

struct LiveTester {
    copies: CopyTester,
    nvrtc: bool,
}

impl LinkTester for LiveTester {
    fn run(&mut self, test: &LinkTest) -> LinkResult {
        let bytes = test.bytes as usize;
        let n = test.repeats;
        let kind = test.test;
        let outcome = match (kind, test.peer) {
            (TestKind::HostToDeviceMemcpyCe, _) => self
                .copies
                .host_copy(test.gpu, true, bytes, n)
                .map(|t| (t, Vec::new())),
            (TestKind::DeviceToHostMemcpyCe, _) => self
                .copies
                .host_copy(test.gpu, false, bytes, n)
                .map(|t| (t, Vec::new())),
            (TestKind::HostToDeviceBidirectionalMemcpyCe, _) => {
                self.copies.host_bidirectional(test.gpu, bytes, n)
            }
            (_, Some(peer)) => {
                if kind.is_sm() && !self.nvrtc {
                    return LinkResult::new(
                        *test,
                        TestStatus::NotRun,
                        Some("NVRTC (libnvrtc.so.13) not found: the SM copy kernel cannot be compiled".into()),
                    );
                }
                for (a, b) in [(test.gpu, peer), (peer, test.gpu)] {
                    if let Err(why) = self.copies.enable_peer(a, b) {
                        return LinkResult::new(*test, TestStatus::Refused, Some(why));
                    }
                }
                let engine = if kind.is_sm() {
                    Engine::Sm
                } else {
                    Engine::CopyEngine
                };
                let copy = PeerCopy {
                    from: test.gpu,
                    to: peer,
                    read: kind.is_read(),
                    bidirectional: kind.is_bidirectional(),
                    engine,
                };
                self.copies.peer_copy(copy, bytes, n)
            }
            (_, None) => Err(Error::runtime("a peer test without a peer")),
        };
        match outcome {
            Ok((times, reverse)) => {
                let mut r = LinkResult::new(*test, TestStatus::Ok, None);
                r.times_ms = times;
                r.reverse_times_ms = reverse;
                r
            }
            Err(e) => LinkResult::new(*test, TestStatus::Failed, Some(e.to_string())),
        }
    }

    fn pcie_now(&mut self, gpu: u32) -> Option<(u32, u32)> {
        health::read_pcie_now(gpu)
    }
}
