//! `planner doctor`: is this live machine healthy, and if not, which link or setting is to blame.
//!
//! Stage: after `nccl` and `verify` (its NCCL sweep runs through verify's NCCL backend), before `calibrate`,
//! `check` and `report`.
//! - `rates`: the physical link rates (`tuning-tables/doctor.json`) the figures are judged by;
//! - `expected`: the NCCL sweep's expectation from planner's expected model (`crate::expect`);
//! - `judge`: each figure beside its expectation (ok / slow / suspiciously fast) and the verdict, causes first;
//! - `run`: the run itself (NVML health, the link tests under a watchdog, the NCCL sweep), on the live backend
//!   (`live`) or the fake one (`fake`, for tests without a GPU);
//! - this file: the result file (`DoctorRun`), written as the run goes and read back by `doctor --load` and by
//!   `check`, anywhere, without a GPU.

pub(crate) mod expected;
pub(crate) mod fake;
pub(crate) mod judge;
pub(crate) mod live;
pub(crate) mod rates;
pub(crate) mod run;

use crate::error::{Error, Result};
use crate::probe::health::GpuHealth;
use serde::{Deserialize, Serialize};

pub use judge::{Figure, Finding, Severity, Verdict};

/// The result file's schema name and version.
pub(crate) const DOCTOR_FORMAT: &str = "planner-doctor";
pub(crate) const DOCTOR_VERSION: u32 = 1;

/// One link test, named as nvbandwidth names its test cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TestKind {
    HostToDeviceMemcpyCe,
    DeviceToHostMemcpyCe,
    HostToDeviceBidirectionalMemcpyCe,
    DeviceToDeviceMemcpyReadCe,
    DeviceToDeviceMemcpyWriteCe,
    DeviceToDeviceBidirectionalMemcpyReadCe,
    DeviceToDeviceBidirectionalMemcpyWriteCe,
    DeviceToDeviceMemcpyReadSm,
    DeviceToDeviceMemcpyWriteSm,
    DeviceToDeviceBidirectionalMemcpyReadSm,
    DeviceToDeviceBidirectionalMemcpyWriteSm,
}

impl TestKind {
    pub(crate) const HOST: [TestKind; 3] = [
        TestKind::HostToDeviceMemcpyCe,
        TestKind::DeviceToHostMemcpyCe,
        TestKind::HostToDeviceBidirectionalMemcpyCe,
    ];
    pub(crate) const PEER: [TestKind; 8] = [
        TestKind::DeviceToDeviceMemcpyReadCe,
        TestKind::DeviceToDeviceMemcpyWriteCe,
        TestKind::DeviceToDeviceBidirectionalMemcpyReadCe,
        TestKind::DeviceToDeviceBidirectionalMemcpyWriteCe,
        TestKind::DeviceToDeviceMemcpyReadSm,
        TestKind::DeviceToDeviceMemcpyWriteSm,
        TestKind::DeviceToDeviceBidirectionalMemcpyReadSm,
        TestKind::DeviceToDeviceBidirectionalMemcpyWriteSm,
    ];

    /// nvbandwidth's name of the test case.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TestKind::HostToDeviceMemcpyCe => "host_to_device_memcpy_ce",
            TestKind::DeviceToHostMemcpyCe => "device_to_host_memcpy_ce",
            TestKind::HostToDeviceBidirectionalMemcpyCe => "host_to_device_bidirectional_memcpy_ce",
            TestKind::DeviceToDeviceMemcpyReadCe => "device_to_device_memcpy_read_ce",
            TestKind::DeviceToDeviceMemcpyWriteCe => "device_to_device_memcpy_write_ce",
            TestKind::DeviceToDeviceBidirectionalMemcpyReadCe => {
                "device_to_device_bidirectional_memcpy_read_ce"
            }
            TestKind::DeviceToDeviceBidirectionalMemcpyWriteCe => {
                "device_to_device_bidirectional_memcpy_write_ce"
            }
            TestKind::DeviceToDeviceMemcpyReadSm => "device_to_device_memcpy_read_sm",
            TestKind::DeviceToDeviceMemcpyWriteSm => "device_to_device_memcpy_write_sm",
            TestKind::DeviceToDeviceBidirectionalMemcpyReadSm => {
                "device_to_device_bidirectional_memcpy_read_sm"
            }
            TestKind::DeviceToDeviceBidirectionalMemcpyWriteSm => {
                "device_to_device_bidirectional_memcpy_write_sm"
            }
        }
    }

    pub(crate) fn is_peer(self) -> bool {
        TestKind::PEER.contains(&self)
    }
    pub(crate) fn is_bidirectional(self) -> bool {
        matches!(
            self,
            TestKind::HostToDeviceBidirectionalMemcpyCe
                | TestKind::DeviceToDeviceBidirectionalMemcpyReadCe
                | TestKind::DeviceToDeviceBidirectionalMemcpyWriteCe
                | TestKind::DeviceToDeviceBidirectionalMemcpyReadSm
                | TestKind::DeviceToDeviceBidirectionalMemcpyWriteSm
        )
    }
    /// Through SM kernels (a copy kernel) rather than the copy engines.
    pub(crate) fn is_sm(self) -> bool {
        matches!(
            self,
            TestKind::DeviceToDeviceMemcpyReadSm
                | TestKind::DeviceToDeviceMemcpyWriteSm
                | TestKind::DeviceToDeviceBidirectionalMemcpyReadSm
                | TestKind::DeviceToDeviceBidirectionalMemcpyWriteSm
        )
    }
    /// The reading GPU issues the copy (it pulls from its peer); otherwise the writer pushes.
    pub(crate) fn is_read(self) -> bool {
        matches!(
            self,
            TestKind::DeviceToDeviceMemcpyReadCe
                | TestKind::DeviceToDeviceBidirectionalMemcpyReadCe
                | TestKind::DeviceToDeviceMemcpyReadSm
                | TestKind::DeviceToDeviceBidirectionalMemcpyReadSm
        )
    }
}

/// One test to run: host tests on `gpu`; peer tests from `gpu` to `peer` (the data moves gpu -> peer; both ways
/// when bidirectional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTest {
    pub(crate) test: TestKind,
    pub(crate) gpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) peer: Option<u32>,
    pub(crate) bytes: u64,
    pub(crate) repeats: u32,
}

impl LinkTest {
    /// "GPU 0 -> GPU 1", "host -> GPU 0", "GPU 0 <-> host".
    pub(crate) fn route(&self) -> String {
        match (self.test, self.peer) {
            (TestKind::HostToDeviceMemcpyCe, _) => format!("host -> GPU {}", self.gpu),
            (TestKind::DeviceToHostMemcpyCe, _) => format!("GPU {} -> host", self.gpu),
            (TestKind::HostToDeviceBidirectionalMemcpyCe, _) => {
                format!("host <-> GPU {}", self.gpu)
            }
            (t, Some(p)) if t.is_bidirectional() => format!("GPU {} <-> GPU {p}", self.gpu),
            (_, Some(p)) => format!("GPU {} -> GPU {p}", self.gpu),
            (_, None) => format!("GPU {}", self.gpu),
        }
    }
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    Ok,
    /// The driver refused peer access between the two GPUs.
    Refused,
    /// A CUDA call failed (the GPU busy, lost, out of memory): `note` says which.
    Failed,
    /// No completion within the watchdog's timeout.
    Hung,
    /// Not run (an earlier hang, a stop request, or not possible here): `note` says why.
    NotRun,
}

/// One test's result: the raw times, and (derived on every load) the figure beside its expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkResult {
    #[serde(flatten)]
    pub test: LinkTest,
    pub status: TestStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// Per repeat, ms of the copy (bidirectional: the forward direction).
    pub(crate) times_ms: Vec<f64>,
    /// Bidirectional: per repeat, ms of the reverse direction while the forward one ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) reverse_times_ms: Vec<f64>,
    /// Derived: the figure, its expectation and status (recomputed on load).
    #[serde(default)]
    pub(crate) figure: Option<Figure>,
}

impl LinkResult {
    pub(crate) fn new(test: LinkTest, status: TestStatus, note: Option<String>) -> LinkResult {
        LinkResult {
            test,
            status,
            note,
            times_ms: Vec::new(),
            reverse_times_ms: Vec::new(),
            figure: None,
        }
    }

    /// Measured GB/s per direction (median over the repeats); bidirectional: the slower direction.
    pub(crate) fn measured_gbs(&self) -> Option<f64> {
        if self.status != TestStatus::Ok {
            return None;
        }
        let rate = |times: &[f64]| {
            crate::measure::median(times)
                .filter(|t| *t > 0.0)
                .map(|ms| self.test.bytes as f64 / (ms * 1e6))
        };
        let forward = rate(&self.times_ms)?;
        if self.test.test.is_bidirectional() {
            Some(forward.min(rate(&self.reverse_times_ms)?))
        } else {
            Some(forward)
        }
    }
}

/// One size of the NCCL all-reduce sweep (NCCL's free choice, as verify's `auto` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NcclPoint {
    pub(crate) bytes: u64,
    /// verify's row status ("ok", "failed", ...).
    pub(crate) status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// Per repeat, µs per call.
    pub(crate) times_us: Vec<f64>,
    /// NCCL's pick at this size, as its TUNING log said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_choice: Option<String>,
    /// Derived: busbw beside its expectation.
    #[serde(default)]
    pub(crate) figure: Option<Figure>,
}

impl NcclPoint {
    /// Bus bandwidth of all-reduce (nccl-tests' busbw: algbw x 2(n-1)/n) at the median time.
    pub(crate) fn busbw_gbs(&self, ranks: usize) -> Option<f64> {
        let t = crate::measure::median(&self.times_us).filter(|t| *t > 0.0)?;
        let algbw = self.bytes as f64 / (t * 1e3);
        let n = ranks.max(1) as f64;
        Some(algbw * 2.0 * (n - 1.0) / n)
    }
}

/// The machine as the run saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorMachine {
    pub(crate) hosts: Vec<String>,
    /// "live" or "fake (SCENARIO)".
    pub(crate) backend: String,
    pub(crate) gpus: Vec<GpuHealth>,
    pub(crate) driver_version: Option<String>,
    /// The CUDA version the driver supports (e.g. 13000).
    pub(crate) cuda_driver_version: Option<i32>,
    /// From the NCCL sweep's children.
    pub(crate) nccl_version: Option<String>,
    pub(crate) cuda_version: Option<String>,
    /// Ranks of the NCCL sweep (GPUs of this process, or the launcher's world).
    pub(crate) nccl_ranks: usize,
    /// "one process" or the launcher (as verify records it).
    pub(crate) launch: String,
}

/// What was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorOptions {
    /// Bytes per link-test copy.
    pub(crate) bytes: u64,
    pub(crate) repeats: u32,
    /// The watchdog: seconds one test (or one NCCL size) may take.
    pub(crate) timeout_s: u64,
    pub(crate) nccl_sizes: Vec<u64>,
    /// The command line, as typed.
    pub(crate) command: String,
}

/// One `planner doctor` run: the result file and the `--json` document (one schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorRun {
    pub(crate) format: String,
    pub(crate) version: u32,
    pub(crate) planner_version: String,
    pub(crate) created_unix: u64,
    /// The same instant as `created_unix`, as text (UTC).
    pub created_utc: String,
    pub machine: DoctorMachine,
    pub options: DoctorOptions,
    pub links: Vec<LinkResult>,
    pub(crate) nccl: Vec<NcclPoint>,
    /// Every planned test and size ran (false: stopped, hung or failed before the end; `stopped` says why).
    pub(crate) complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Derived: the verdict (recomputed on load from the figures above and the rate table).
    #[serde(default)]
    pub verdict: Option<Verdict>,
}

impl DoctorRun {
    /// Recompute every figure and the verdict with `rates`.
    pub(crate) fn judge(&mut self, rates: &rates::Rates) {
        judge::judge(self, rates);
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Error::runtime(format!("cannot serialise the doctor result: {e}")))
    }

    /// Read a result file: its header first (format, version), then the body, then physics (times positive and
    /// finite, sizes positive, GPU indices that exist); figures and verdict are recomputed with the built-in rates.
    pub fn from_json(text: &str, source: &str) -> Result<DoctorRun> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::bad_input(format!(
                "{source}:{}:{}: not a planner doctor result file: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let format = value.get("format").and_then(|v| v.as_str());
        if format != Some(DOCTOR_FORMAT) {
            return Err(Error::bad_input(format!(
                "{source}: not a planner doctor result file (format is {}, expected \"{DOCTOR_FORMAT}\")",
                format
                    .map(|f| format!("\"{f}\""))
                    .unwrap_or_else(|| "missing".into())
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64());
        if version != Some(DOCTOR_VERSION as u64) {
            return Err(Error::bad_input(format!(
                "{source}: doctor result file version {} is not supported (this planner reads version {DOCTOR_VERSION})",
                version
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "missing".into())
            )));
        }
        // Every string is echoed by --load / the reports: no control character or escape sequence reaches a terminal.
        let mut value = value;
        crate::fsio::printable_strings(&mut value, &[]);
        let mut run: DoctorRun = serde_json::from_value(value)
            .map_err(|e| Error::bad_input(format!("{source}: bad doctor result file: {e}")))?;
        run.check(source)?;
        let rates = rates::Rates::built_in()?;
        run.judge(&rates);
        Ok(run)
    }

    fn check(&self, source: &str) -> Result<()> {
        let gpus = self.machine.gpus.len() as u32;
        let bad = |what: String| Err(Error::bad_input(format!("{source}: {what}")));
        for (i, l) in self.links.iter().enumerate() {
            let t = &l.test;
            if t.bytes == 0 || t.bytes > 1 << 40 {
                return bad(format!(
                    "links[{i}] ({}): {} bytes is not a copy size",
                    t.test.name(),
                    t.bytes
                ));
            }
            if t.gpu >= gpus || t.peer.is_some_and(|p| p >= gpus || p == t.gpu) {
                return bad(format!(
                    "links[{i}] ({}): GPU {} / peer {:?} is not a GPU of the file's {gpus}",
                    t.test.name(),
                    t.gpu,
                    t.peer
                ));
            }
            if t.test.is_peer() != t.peer.is_some() {
                return bad(format!(
                    "links[{i}] ({}): a peer test needs a peer and a host test has none",
                    t.test.name()
                ));
            }
            for v in l.times_ms.iter().chain(&l.reverse_times_ms) {
                if !v.is_finite() || *v <= 0.0 {
                    return bad(format!(
                        "links[{i}] ({} {}): time {v} ms is not positive",
                        t.test.name(),
                        t.route()
                    ));
                }
            }
            if l.status == TestStatus::Ok && l.times_ms.is_empty() {
                return bad(format!(
                    "links[{i}] ({} {}): status ok without times",
                    t.test.name(),
                    t.route()
                ));
            }
        }
        for (i, p) in self.nccl.iter().enumerate() {
            if p.bytes == 0 {
                return bad(format!("nccl[{i}]: size 0"));
            }
            if let Some(v) = p.times_us.iter().find(|v| !v.is_finite() || **v <= 0.0) {
                return bad(format!(
                    "nccl[{i}] ({} B): time {v} us is not positive",
                    p.bytes
                ));
            }
        }
        Ok(())
    }

    pub fn load(path: &str) -> Result<DoctorRun> {
        let text = crate::units::read_input_file(path)?;
        DoctorRun::from_json(&text, path)
    }

    /// Written whole under a temporary name and renamed (a kill at any instant leaves the old or the new file).
    pub(crate) fn save(&self, path: &str) -> Result<()> {
        crate::fsio::write_output(path, (self.to_json()? + "\n").as_bytes())
    }
}

/// `created_unix` as `2026-12-01 00:20:00 UTC` (civil-from-days, Howard Hinnant's algorithm).
pub(crate) fn utc_text(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_text_by_hand() {
        // 1764547200 = 2025-12-01 00:00:00 UTC (date -u -d @1764547200).
        assert_eq!(utc_text(1_764_547_200), "2025-12-01 00:00:00 UTC");
        assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
        // 951782400 = 2000-02-29 00:00:00 (a leap day), plus 1 h 2 min 3 s.
        assert_eq!(utc_text(951_782_400 + 3723), "2000-02-29 01:02:03 UTC");
    }

    #[test]
    fn a_bidirectional_figure_is_its_slower_direction() {
        let test = LinkTest {
            test: TestKind::HostToDeviceBidirectionalMemcpyCe,
            gpu: 0,
            peer: None,
            bytes: 1 << 30,
            repeats: 3,
        };
        let mut r = LinkResult::new(test, TestStatus::Ok, None);
        // 1 GiB in 20 ms = 53.69 GB/s; in 25 ms = 42.95 GB/s.
        r.times_ms = vec![20.0, 20.0, 21.0];
        r.reverse_times_ms = vec![25.0, 25.0, 24.0];
        let gbs = r.measured_gbs().unwrap();
        assert!((gbs - 42.95).abs() < 0.01, "{gbs}");
        r.status = TestStatus::Hung;
        assert_eq!(r.measured_gbs(), None);
    }
}
