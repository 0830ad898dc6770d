//! The probe's detection without a GPU: recorded NVML facts plus a fake sysfs
//! tree in a temp directory must give the XML NCCL itself wrote (or would
//! write) on that machine.

use planner::probe::facts::{GpuFacts, MachineFacts, NvLinkFacts, P2pFacts, RemoteType};
use planner::probe::{from_facts, Oddity, ProbeEnv, SysFs, Warnings};
use planner::xml;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fake machine root: files and relative symlinks given by machine paths.
struct FakeRoot {
    dir: PathBuf,
}

impl FakeRoot {
    fn new(name: &str) -> FakeRoot {
        // Tests run in parallel: every root gets its own directory.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("planner-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        FakeRoot { dir }
    }

    fn host(&self, machine_path: &str) -> PathBuf {
        self.dir.join(machine_path.trim_start_matches('/'))
    }

    fn file(&self, machine_path: &str, content: &str) -> &Self {
        let p = self.host(machine_path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    fn mkdir(&self, machine_path: &str) -> &Self {
        std::fs::create_dir_all(self.host(machine_path)).unwrap();
        self
    }

    /// A symlink at `at` pointing to `target`, written relative (as sysfs does).
    fn link(&self, at: &str, target: &str) -> &Self {
        let from: Vec<&str> = at.trim_start_matches('/').split('/').collect();
        let to: Vec<&str> = target.trim_start_matches('/').split('/').collect();
        let from_dir = &from[..from.len() - 1];
        let common = from_dir
            .iter()
            .zip(to.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let mut rel: Vec<&str> = vec![".."; from_dir.len() - common];
        rel.extend(&to[common..]);
        let p = self.host(at);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(rel.join("/"), p).unwrap();
        self
    }

    /// A PCI device directory with NCCL's files and its /sys/bus/pci/devices link.
    fn pci(&self, path: &str, class: &str, ids: [&str; 4], speed: &str, width: &str, numa: &str) {
        let bdf = path.rsplit('/').next().unwrap();
        for (file, value) in [
            ("class", class),
            ("vendor", ids[0]),
            ("device", ids[1]),
            ("subsystem_vendor", ids[2]),
            ("subsystem_device", ids[3]),
            ("max_link_speed", speed),
            ("max_link_width", width),
            ("numa_node", numa),
        ] {
            self.file(&format!("{path}/{file}"), &format!("{value}\n"));
        }
        self.link(&format!("/sys/bus/pci/devices/{bdf}"), path);
        self.link(&format!("{path}/subsystem"), "/sys/bus/pci");
    }

    fn sys(&self) -> SysFs {
        SysFs::new(&self.dir)
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for FakeRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What NVML reported on the 2x H200 VM (shared/captures/h200x2-nvswitch-vm/nvml-links.txt,
/// copied verbatim; the second GPU's 18 link lines are identical to the first's).
const NVML_LINKS_TXT: &str = "\
driver 580.159.04 nvml 13.580.159.04 cuda 13000
GPU0 NVIDIA H200 00000000:00:06.0 cc (9, 0) arch 9 numa ERR:NVMLError_NotSupported:Not Supported pcie gen 5 / 5 width 16 / 16 cpuaff ['0xffffffff', '0x0', '0x0', '0x0']
  link 0 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 1 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 2 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 3 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 4 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 5 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 6 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 7 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 8 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 9 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 10 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 11 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 12 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 13 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 14 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 15 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 16 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 17 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
GPU1 NVIDIA H200 00000000:00:07.0 cc (9, 0) arch 9 numa ERR:NVMLError_NotSupported:Not Supported pcie gen 5 / 5 width 16 / 16 cpuaff ['0xffffffff', '0x0', '0x0', '0x0']
  link 0 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 1 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 2 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 3 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 4 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 5 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 6 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 7 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 8 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 9 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 10 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 11 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 12 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 13 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 14 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 15 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 16 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
  link 17 state 1 ver 6 remote FFFFFFFF:FF:FF.0 rtype 2 p2pcap 1
pair 0 1 common_ancestor HOSTBRIDGE(30) p2p_nvlink OK
";

fn word_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut words = line.split_whitespace();
    words.find(|w| *w == key)?;
    words.next()
}

/// Turn the recorded NVML text into `MachineFacts`.
fn facts_from_nvml_links(text: &str) -> MachineFacts {
    let mut facts = MachineFacts {
        cuda_available: true,
        ..Default::default()
    };
    for line in text.lines() {
        if line.starts_with("driver ") {
            facts.driver_version = word_after(line, "driver").map(str::to_string);
            facts.cuda_driver_version = word_after(line, "cuda").and_then(|c| c.parse().ok());
        } else if let Some(rest) = line.strip_prefix("GPU") {
            let index: u32 = rest.split_whitespace().next().unwrap().parse().unwrap();
            let bus_id = line
                .split_whitespace()
                .find(|w| w.len() == 16 && w.contains(':'))
                .unwrap()
                .to_string();
            let cc = line
                .split("cc (")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap();
            let (major, minor) = cc.split_once(", ").unwrap();
            let gen: Vec<&str> = line.split("gen ").nth(1).unwrap().split(' ').collect();
            let width: Vec<&str> = line.split("width ").nth(1).unwrap().split(' ').collect();
            facts.gpus.push(GpuFacts {
                index,
                name: "NVIDIA H200".to_string(),
                bus_id,
                cuda_ordinal: Some(index),
                compute_capability: (major.parse().unwrap(), minor.parse().unwrap()),
                // The capture's topo.xml has gdr="1" (cudaDevAttrGPUDirectRDMASupported).
                gdr: Some(true),
                pcie_gen: gen[0].parse().ok(),
                pcie_max_gen: gen[2].parse().ok(),
                pcie_width: width[0].parse().ok(),
                pcie_max_width: width[2].parse().ok(),
                cpu_affinity: Some(vec![0xffff_ffff, 0, 0, 0]),
                numa_node: None,
                ..Default::default()
            });
        } else if line.trim_start().starts_with("link ") {
            let gpu = facts.gpus.last_mut().unwrap();
            let rtype = match word_after(line, "rtype") {
                Some("0") => RemoteType::Gpu,
                Some("2") => RemoteType::Switch,
                _ => RemoteType::Unknown,
            };
            gpu.nvlinks.push(NvLinkFacts {
                link: word_after(line, "link").unwrap().parse().unwrap(),
                p2p_capable: word_after(line, "p2pcap").map(|v| v == "1"),
                active: word_after(line, "state").map(|v| v == "1"),
                version: word_after(line, "ver").and_then(|v| v.parse().ok()),
                remote_bus_id: word_after(line, "remote").map(str::to_string),
                remote_type: Some(rtype),
            });
        } else if line.starts_with("pair ") {
            let w: Vec<&str> = line.split_whitespace().collect();
            let (a, b): (u32, u32) = (w[1].parse().unwrap(), w[2].parse().unwrap());
            let ok = Some(line.ends_with("OK"));
            for (from, to) in [(a, b), (b, a)] {
                facts.p2p.push(P2pFacts {
                    from,
                    to,
                    read_ok: ok,
                    write_ok: ok,
                });
            }
        }
    }
    facts
}

/// The VM as sysfs showed it: both GPUs on root bus 0000:00 with no upstream
/// port files, NUMA node -1, no node-1 directory, a virtio NIC.
fn h200_vm_root() -> FakeRoot {
    let root = FakeRoot::new("h200vm");
    for bdf in ["0000:00:06.0", "0000:00:07.0"] {
        root.pci(
            &format!("/sys/devices/pci0000:00/{bdf}"),
            "0x030200",
            ["0x10de", "0x2335", "0x10de", "0x18bf"],
            "32.0 GT/s PCIe",
            "16",
            "-1",
        );
    }
    // eth0: a virtio device under a PCI function; /sys/class/net/eth0/device is the virtio node.
    let virtio = "/sys/devices/pci0000:00/0000:00:03.0/virtio2";
    root.pci(
        "/sys/devices/pci0000:00/0000:00:03.0",
        "0x020000",
        ["0x1af4", "0x1000", "0x1af4", "0x0001"],
        "",
        "",
        "-1",
    );
    root.mkdir("/sys/bus/virtio")
        .link(&format!("{virtio}/subsystem"), "/sys/bus/virtio")
        // As the lent 2x H200 VM shows it (bench/results/probe-h200x2-2026-11-29/machine.txt):
        // sysfs flags without IFF_RUNNING (0x40), which getifaddrs adds from operstate.
        .file(&format!("{virtio}/net/eth0/flags"), "0x1003\n")
        .file(&format!("{virtio}/net/eth0/operstate"), "up\n")
        .file(&format!("{virtio}/net/eth0/ifindex"), "2\n")
        .file(&format!("{virtio}/net/eth0/speed"), "-1\n")
        .link(&format!("{virtio}/net/eth0/device"), virtio)
        .link("/sys/class/net/eth0", &format!("{virtio}/net/eth0"))
        .file("/sys/devices/virtual/net/lo/flags", "0x9\n")
        .file("/sys/devices/virtual/net/lo/operstate", "unknown\n")
        .file("/sys/devices/virtual/net/ifb0/flags", "0x82\n")
        .file("/sys/devices/virtual/net/ifb0/operstate", "down\n")
        .link("/sys/class/net/ifb0", "/sys/devices/virtual/net/ifb0")
        .file("/sys/devices/virtual/net/lo/ifindex", "1\n")
        .link("/sys/class/net/lo", "/sys/devices/virtual/net/lo")
        .file(
            "/proc/net/route",
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
             eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
        )
        .file(
            "/proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n\n",
        )
        .file("/proc/sys/kernel/hostname", "h200vm\n")
        .file(
            "/proc/sys/kernel/random/boot_id",
            "0e5b8a4e-6d0c-4c52-9f6b-0c3f0b8f2d11\n",
        );
    root
}

fn env_with_hostid(id: &str) -> ProbeEnv {
    ProbeEnv {
        nccl_hostid: Some(id.to_string()),
        ..Default::default()
    }
}

const CAPTURE_FIXTURE: &str = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");

#[test]
fn recorded_h200_vm_gives_nccls_own_dump() {
    let facts = facts_from_nvml_links(NVML_LINKS_TXT);
    assert_eq!(facts.gpus.len(), 2);
    assert_eq!(facts.gpus[1].nvlinks.len(), 18);
    let root = h200_vm_root();
    let mut warnings = Warnings::new();
    let ours = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("h200vm"),
        &mut warnings,
    );

    // NCCL's dump, with its host_hash swapped for ours (that hash is of the
    // capture machine's host name and boot id, which were not recorded).
    let mut expected = xml::parse(CAPTURE_FIXTURE, "fixture").unwrap();
    let our_hash = ours.children[0].attr("host_hash").unwrap().to_string();
    assert!(our_hash.starts_with("0x"), "{our_hash}");
    expected.children[0].set_attr("host_hash", our_hash);
    // Byte for byte: same elements, attributes in NCCL's order, children in
    // NCCL's order (GPU 0's pci, the NIC, then GPU 1's pci, as fusion leaves them).
    assert_eq!(xml::write(&ours), xml::write(&expected));

    // One line per kind of oddity, each naming where it was seen.
    let lines = warnings.lines();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(
        warnings.subjects(Oddity::InvisibleNvlinkPeer),
        ["GPU 0000:00:06.0 (18 links)", "GPU 0000:00:07.0 (18 links)"]
    );
    assert_eq!(
        warnings.subjects(Oddity::RootBusDevice),
        ["0000:00:06.0", "0000:00:07.0"]
    );
    assert_eq!(warnings.subjects(Oddity::NumaUnknown), ["cpu numaid=-1"]);
    assert_eq!(warnings.subjects(Oddity::NonPciNic), ["eth0 (virtio)"]);
}

/// nvidia-smi reads CPU and NUMA affinity from the driver, which NCCL's XML of this VM lacks (numaid=-1, no
/// affinity): `planner topo` on a live probe prints the driver's, as nvidia-smi does. The capture's
/// `nvidia-smi topo -m` (../shared/captures/h200x2-nvswitch-vm/nvidia-smi-topo-m.txt) prints `0-31` and `0`.
#[test]
fn a_live_probe_prints_the_drivers_affinity_where_the_xml_has_none() {
    let mut facts = facts_from_nvml_links(NVML_LINKS_TXT);
    for g in &mut facts.gpus {
        // NVML's node-scope memory affinity of a machine with one NUMA node: node 0.
        g.memory_affinity = Some(vec![1]);
    }
    let root = h200_vm_root();
    let xml = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("h200vm"),
        &mut Warnings::new(),
    );
    let mut node = planner::topo::build::from_xml(&xml, "live probe").unwrap();
    let matrix = |node: &planner::topo::Topology| {
        let cluster = planner::topo::cluster::Cluster::single(node.clone());
        planner::report::topo::render_nvidia_smi(&planner::report::topo::report(&cluster))
    };
    // The XML alone: nothing to print, as before.
    assert!(
        matrix(&node).contains("GPU0\t X \tNV18\tN/A\tN/A\t\tN/A"),
        "{}",
        matrix(&node)
    );
    node.driver_affinity = planner::topo::DriverAffinity::from_facts(&facts);
    let text = matrix(&node);
    assert!(text.contains("GPU0\t X \tNV18\t0-31\t0\t\tN/A"), "{text}");
    assert!(text.contains("GPU1\tNV18\t X \t0-31\t0\t\tN/A"), "{text}");
}

#[test]
fn host_hash_follows_ncclhostid_then_hostname_and_boot_id() {
    let facts = facts_from_nvml_links(NVML_LINKS_TXT);
    let root = h200_vm_root();
    let hash = |env: &ProbeEnv| {
        let x = from_facts(&facts, &root.sys(), "x86_64", env, &mut Warnings::new());
        x.children[0].attr("host_hash").unwrap().to_string()
    };
    let by_host = hash(&ProbeEnv::default());
    // Without NCCL_HOSTID the identity is host name + boot id.
    let explicit = hash(&env_with_hostid(
        "h200vm0e5b8a4e-6d0c-4c52-9f6b-0c3f0b8f2d11",
    ));
    assert_eq!(by_host, explicit);
    assert_ne!(by_host, hash(&env_with_hostid("h200vm")));
}

#[test]
fn links_that_are_down_or_not_p2p_are_not_counted() {
    let mut facts = facts_from_nvml_links(NVML_LINKS_TXT);
    facts.gpus[0].nvlinks[3].active = Some(false);
    facts.gpus[0].nvlinks[4].p2p_capable = Some(false);
    facts.gpus[0].nvlinks[5].active = None; // the state query failed
    let root = h200_vm_root();
    let x = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &ProbeEnv::default(),
        &mut Warnings::new(),
    );
    let counts: Vec<&str> = x
        .descendants()
        .into_iter()
        .filter(|n| n.name == "nvlink")
        .map(|n| n.attr("count").unwrap())
        .collect();
    assert_eq!(counts, ["15", "18"]);
}

/// A two-socket bare-metal machine: each GPU behind a PCIe switch, a 200 Gb/s
/// HDR NIC beside GPU 0, GPUs joined by 12 NVLinks (A100-style, sm 80).
fn two_socket_root() -> FakeRoot {
    let root = FakeRoot::new("twosocket");
    let sw0 = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0";
    let sw1 = "/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0";
    let plx = ["0x10b5", "0xc010", "0x10b5", "0xa000"];
    let a100 = ["0x10de", "0x20b2", "0x10de", "0x1463"];
    let g5 = "32.0 GT/s PCIe";
    let g4 = "16.0 GT/s PCIe";
    // Root ports (only their link files matter: they are the "../" of the switch).
    root.pci(
        "/sys/devices/pci0000:15/0000:15:01.0",
        "0x060400",
        ["0x8086"; 4],
        g5,
        "16",
        "0",
    );
    root.pci(
        "/sys/devices/pci0000:97/0000:97:01.0",
        "0x060400",
        ["0x8086"; 4],
        g5,
        "16",
        "1",
    );
    root.pci(sw0, "0x060400", plx, g5, "16", "0");
    root.pci(sw1, "0x060400", plx, g5, "16", "1");
    // Downstream ports: a Gen4 one above GPU 0 makes its link the slower of the two.
    root.pci(
        &format!("{sw0}/0000:17:00.0"),
        "0x060400",
        plx,
        g4,
        "16",
        "0",
    );
    root.pci(
        &format!("{sw0}/0000:17:01.0"),
        "0x060400",
        plx,
        g4,
        "16",
        "0",
    );
    root.pci(
        &format!("{sw1}/0000:99:00.0"),
        "0x060400",
        plx,
        g5,
        "16",
        "1",
    );
    root.pci(
        &format!("{sw0}/0000:17:00.0/0000:18:00.0"),
        "0x030200",
        a100,
        g5,
        "16",
        "0",
    );
    root.pci(
        &format!("{sw1}/0000:99:00.0/0000:9a:00.0"),
        "0x030200",
        a100,
        g5,
        "16",
        "1",
    );
    let nic = format!("{sw0}/0000:17:01.0/0000:19:00.0");
    root.pci(
        &nic,
        "0x020700",
        ["0x15b3", "0x101b", "0x15b3", "0x0007"],
        g4,
        "16",
        "0",
    );
    root.link(
        "/sys/class/infiniband/mlx5_0",
        &format!("{nic}/infiniband/mlx5_0"),
    )
    .link(&format!("{nic}/infiniband/mlx5_0/device"), &nic)
    .file(
        &format!("{nic}/infiniband/mlx5_0/sys_image_guid"),
        "1c34:da03:00a1:b2c3\n",
    )
    .file(
        &format!("{nic}/infiniband/mlx5_0/ports/1/state"),
        "4: ACTIVE\n",
    )
    .file(
        &format!("{nic}/infiniband/mlx5_0/ports/1/link_layer"),
        "InfiniBand\n",
    )
    .file(
        &format!("{nic}/infiniband/mlx5_0/ports/1/rate"),
        "200 Gb/sec (4X HDR)\n",
    )
    .file("/sys/module/nvidia_peermem/version", "1.0\n")
    .file(
        "/sys/devices/system/node/node0/cpumap",
        "00000000,0000ffff\n",
    )
    .file(
        "/sys/devices/system/node/node1/cpumap",
        "00000000,ffff0000\n",
    )
    .file(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\n",
    );
    root
}

fn a100(index: u32, bus: &str, peer: &str) -> GpuFacts {
    GpuFacts {
        index,
        name: "NVIDIA A100-SXM4-80GB".to_string(),
        bus_id: bus.to_string(),
        cuda_ordinal: Some(index),
        compute_capability: (8, 0),
        nvlinks: (0..12)
            .map(|link| NvLinkFacts {
                link,
                p2p_capable: Some(true),
                active: Some(true),
                version: Some(3),
                remote_bus_id: Some(peer.to_string()),
                remote_type: Some(RemoteType::Gpu),
            })
            .collect(),
        gdr: Some(true),
        ..Default::default()
    }
}

#[test]
fn switches_sockets_and_an_ib_nic_as_nccl_lays_them_out() {
    let facts = MachineFacts {
        gpus: vec![
            a100(0, "00000000:18:00.0", "00000000:9A:00.0"),
            a100(1, "00000000:9A:00.0", "00000000:18:00.0"),
        ],
        cuda_available: true,
        ..Default::default()
    };
    let root = two_socket_root();
    let mut warnings = Warnings::new();
    let ours = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("x"),
        &mut warnings,
    );
    let hash = ours.children[0].attr("host_hash").unwrap().to_string();
    // Derived by hand from NCCL's rules:
    // - a GPU's parent is the switch's upstream port (16:00.0), two levels up, the
    //   downstream port (17:00.0) and the root port (15:01.0) are skipped;
    // - GPU 0's link: min(device 32 GT/s, downstream port 16 GT/s) = "16.0 GT/s PCIe";
    // - the NIC (19:00.0) sits under the same switch, after GPU 0 (bus id order);
    // - rank 1's XML brings CPU numaid=1 first and CPU 0 again for the NIC: fusion
    //   merges CPU 0 and appends CPU 1;
    // - IB: 200 Gb/s = 200000 Mbps, port 1, sys_image_guid byte-swapped as verbs hands
    //   it over, maxconn 2^17, gdr 1 (nvidia_peermem loaded);
    // - Sapphire Rapids: family 6, model 143.
    let expected = format!(
        r#"<system version="1">
  <cpu host_hash="{hash}" numaid="0" affinity="00000000,0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:16:00.0" class="0x060400" vendor="0x10b5" device="0xc010" subsystem_vendor="0x10b5" subsystem_device="0xa000" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="0x20b2" subsystem_vendor="0x10de" subsystem_device="0x1463" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="80" rank="0" gdr="1">
          <nvlink target="0000:9a:00.0" count="12" tclass="0x030200"/>
        </gpu>
      </pci>
      <pci busid="0000:19:00.0" class="0x020700" vendor="0x15b3" device="0x101b" subsystem_vendor="0x15b3" subsystem_device="0x0007" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" latency="0" speed="200000" port="1" guid="0xc3b2a10003da341c" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
  <cpu host_hash="{hash}" numaid="1" affinity="00000000,ffff0000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:98:00.0" class="0x060400" vendor="0x10b5" device="0xc010" subsystem_vendor="0x10b5" subsystem_device="0xa000" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:9a:00.0" class="0x030200" vendor="0x10de" device="0x20b2" subsystem_vendor="0x10de" subsystem_device="0x1463" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="80" rank="1" gdr="1">
          <nvlink target="0000:18:00.0" count="12" tclass="0x030200"/>
        </gpu>
      </pci>
    </pci>
  </cpu>
</system>
"#
    );
    if cfg!(target_endian = "little") {
        assert_eq!(xml::write(&ours), expected);
    }
    assert!(warnings.is_empty(), "{:?}", warnings.lines());
}

#[test]
fn no_sysfs_means_cpu_minus_one_and_the_nvml_link() {
    // A container without /sys/bus/pci: NCCL hangs the GPU under CPU numaid=-1.
    let mut facts = MachineFacts {
        gpus: vec![a100(0, "00000000:18:00.0", "00000000:9A:00.0")],
        ..Default::default()
    };
    facts.gpus[0].pcie_gen = Some(4);
    facts.gpus[0].pcie_width = Some(16);
    facts.gpus[0].gdr = None; // CUDA could not be asked (cuda_available = false)
    let root = FakeRoot::new("nosysfs");
    let mut warnings = Warnings::new();
    let x = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("x"),
        &mut warnings,
    );
    let text = xml::write(&x);
    assert!(
        text.contains(
            r#"<pci busid="0000:18:00.0" class="0x03" link_speed="16.0 GT/s PCIe" link_width="16">"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"numaid="-1" arch="x86_64">"#), "{text}");
    // The peer is not in sysfs either, so NCCL takes it as an NVSwitch; NVML says GPU.
    assert!(text.contains(r#"tclass="0x068000""#), "{text}");
    assert!(text.contains(r#"gdr="0""#), "{text}");
    for oddity in [
        Oddity::GpuNotInSysfs,
        Oddity::NumaUnknown,
        Oddity::NvlinkPeerTypeMismatch,
        Oddity::GdrUnknown,
    ] {
        assert!(
            warnings.contains(oddity),
            "{oddity:?}: {:?}",
            warnings.lines()
        );
    }
    assert!(root.path().exists());
}

#[test]
fn gpus_hidden_from_cuda_are_left_out_and_p2p_trouble_is_reported() {
    let mut facts = facts_from_nvml_links(NVML_LINKS_TXT);
    facts.gpus[0].cuda_ordinal = None;
    facts.gpus[1].cuda_ordinal = Some(0);
    for p in &mut facts.p2p {
        p.write_ok = Some(false);
    }
    let root = h200_vm_root();
    let mut warnings = Warnings::new();
    let x = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("x"),
        &mut warnings,
    );
    let gpus: Vec<(&str, &str)> = x
        .descendants()
        .into_iter()
        .filter(|n| n.name == "gpu")
        .map(|n| (n.attr("dev").unwrap(), n.attr("rank").unwrap()))
        .collect();
    // NVML index 1 is CUDA device 0: dev 1, rank 0.
    assert_eq!(gpus, [("1", "0")]);
    assert_eq!(warnings.subjects(Oddity::HiddenFromCuda), ["0000:00:06.0"]);
    assert_eq!(
        warnings.subjects(Oddity::P2pNotOk),
        ["GPU 0 <-> GPU 1 (write)"]
    );
}

#[test]
fn socket_interface_choice_follows_nccl_socket_ifname() {
    let facts = facts_from_nvml_links(NVML_LINKS_TXT);
    let root = h200_vm_root();
    let mut env = env_with_hostid("x");
    env.net.socket_ifname = Some("lo".to_string());
    let x = from_facts(&facts, &root.sys(), "x86_64", &env, &mut Warnings::new());
    let nets: Vec<&str> = x
        .descendants()
        .into_iter()
        .filter(|n| n.name == "net")
        .map(|n| n.attr("name").unwrap())
        .collect();
    assert_eq!(nets, ["lo"]);
}

/// NCCL's path dump in the capture's init log (shared/captures/h200x2-nvswitch-vm/
/// nccl-init-rank0.log), verbatim.
const CAPTURE_PATH_LINES: [&str; 3] = [
    "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
    "GPU/0-70 :GPU/0-60 (2/370.8/NVL) GPU/0-70 (0/5000.0/LOC) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
    "NET/0-0 :GPU/0-60 (3/1.2/PHB) GPU/0-70 (3/1.2/PHB) CPU/0-ffffffffffffff (2/1.2/PHB) NET/0-0 (0/5000.0/LOC) ",
];

fn path_lines(root: &planner::xml::XmlNode) -> Vec<String> {
    use planner::topo::{build, paths::nccl_path_line, NodeKind};
    let t = build::from_xml(root, "probe").unwrap();
    let mut lines: Vec<String> = t
        .nodes(NodeKind::Gpu)
        .iter()
        .map(|&g| nccl_path_line(&t, g))
        .collect();
    lines.extend(
        t.nodes(NodeKind::Net)
            .iter()
            .map(|&n| nccl_path_line(&t, n)),
    );
    lines
}

#[test]
fn recorded_h200_vm_gives_nccls_paths() {
    let facts = facts_from_nvml_links(NVML_LINKS_TXT);
    let root = h200_vm_root();
    let ours = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &ProbeEnv::default(),
        &mut Warnings::new(),
    );
    assert_eq!(path_lines(&ours), CAPTURE_PATH_LINES);
}

#[test]
fn a_malformed_tree_naming_a_device_above_itself_does_not_loop() {
    // /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:00:01.0: the device's
    // grand-parent directory has its own bus id. It must end under a CPU, once.
    let root = FakeRoot::new("loop");
    let ids = ["0x10de", "0x2335", "0x10de", "0x18bf"];
    let g5 = "32.0 GT/s PCIe";
    root.pci(
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:00:01.0",
        "0x030200",
        ids,
        g5,
        "16",
        "0",
    );
    let facts = MachineFacts {
        gpus: vec![a100(0, "00000000:00:01.0", "FFFFFFFF:FF:FF.0")],
        ..Default::default()
    };
    let x = from_facts(
        &facts,
        &root.sys(),
        "x86_64",
        &env_with_hostid("x"),
        &mut Warnings::new(),
    );
    let pcis = x
        .descendants()
        .into_iter()
        .filter(|n| n.name == "pci")
        .count();
    assert_eq!(pcis, 1);
    assert_eq!(x.children[0].name, "cpu");
    assert_eq!(
        x.children[0].children[0].attr("busid"),
        Some("0000:00:01.0")
    );
}
