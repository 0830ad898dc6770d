//! Network devices as NCCL's built-in net plugins list them: the IB plugin
//! (every active InfiniBand/RoCE port under /sys/class/infiniband) when it
//! finds any, else the socket plugin (running IP interfaces, `ib*` first, then
//! anything but docker/lo/virbr). The values are the ones the plugins report
//! (`getProperties`), read from sysfs instead of verbs and getifaddrs.

use super::sysfs::{strtol, SysFs};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetDevice {
    pub(crate) name: String,
    /// The sysfs device path the plugin reports (`pciPath`); `None` for a
    /// purely virtual interface.
    pub(crate) pci_path: Option<String>,
    /// Mbps.
    pub(crate) speed: i64,
    pub(crate) port: i64,
    pub(crate) guid: u64,
    pub(crate) maxconn: i64,
    pub(crate) gdr: bool,
    pub(crate) latency: i64,
}

/// The NCCL environment variables that change NIC discovery.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetEnv {
    /// NCCL_SOCKET_IFNAME
    pub socket_ifname: Option<String>,
    /// NCCL_IB_HCA
    pub(crate) ib_hca: Option<String>,
    /// NCCL_IB_MERGE_VFS (default 1)
    pub(crate) ib_merge_vfs: Option<bool>,
}

/// The NICs NCCL would use, in its device order.
pub(crate) fn discover(sys: &SysFs, env: &NetEnv) -> Vec<NetDevice> {
    let ib = discover_ib(sys, env);
    if !ib.is_empty() {
        return ib;
    }
    discover_socket(sys, env)
}

/// NCCL's interface lists: "^a,b" excludes, "=a" matches exactly, "mlx5_0:1" names a port (also `NCCL_IB_HCA`
/// applied to a topology file, `topo::paths::PathOptions::ib_hca`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IfList {
    entries: Vec<(String, Option<i64>)>,
    exclude: bool,
    exact: bool,
}

impl IfList {
    pub(crate) fn parse(spec: &str) -> IfList {
        let mut s = spec;
        let exclude = s.starts_with('^');
        if exclude {
            s = &s[1..];
        }
        let exact = s.starts_with('=');
        if exact {
            s = &s[1..];
        }
        let entries = s
            .split(',')
            .filter(|e| !e.is_empty())
            .map(|e| match e.split_once(':') {
                Some((name, port)) => (name.to_string(), Some(strtol(port))),
                None => (e.to_string(), None),
            })
            .filter(|(name, _)| !name.is_empty())
            .collect();
        IfList {
            entries,
            exclude,
            exact,
        }
    }

    /// NCCL's `matchIfList(..) ^ searchNot`.
    pub(crate) fn accepts(&self, name: &str, port: Option<i64>) -> bool {
        let listed = self.entries.is_empty()
            || self.entries.iter().any(|(prefix, p)| {
                let name_ok = if self.exact {
                    name == prefix
                } else {
                    name.starts_with(prefix.as_str())
                };
                let port_ok = match (port, p) {
                    (Some(a), Some(b)) => a == *b,
                    _ => true,
                };
                name_ok && port_ok
            });
        listed ^ self.exclude
    }
}

/// Sort key that puts mlx5_2 before mlx5_10.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = name.split_at(name.len() - digits);
    (stem.to_string(), num.parse().unwrap_or(0))
}

fn discover_ib(sys: &SysFs, env: &NetEnv) -> Vec<NetDevice> {
    let filter = IfList::parse(env.ib_hca.as_deref().unwrap_or(""));
    let merge_vfs = env.ib_merge_vfs.unwrap_or(true);
    let gdr = ib_gdr_support(sys);
    let mut names = sys.list_dir("/sys/class/infiniband");
    names.sort_by_key(|n| natural_key(n));
    let mut out: Vec<NetDevice> = Vec::new();
    let mut merged_paths: Vec<String> = Vec::new();
    for name in names {
        let base = format!("/sys/class/infiniband/{name}");
        let mut ports: Vec<i64> = sys
            .list_dir(&format!("{base}/ports"))
            .iter()
            .map(|p| strtol(p))
            .filter(|&p| p > 0)
            .collect();
        ports.sort();
        for port in ports {
            let pdir = format!("{base}/ports/{port}");
            let state = sys.read_attr(&pdir, "state").unwrap_or_default();
            if !state.contains("ACTIVE") {
                continue;
            }
            let layer = sys.read_attr(&pdir, "link_layer").unwrap_or_default();
            if layer != "InfiniBand" && layer != "Ethernet" {
                continue;
            }
            if !filter.accepts(&name, Some(port)) {
                continue;
            }
            // NCCL: ncclIbSpeed(active_speed) * ncclIbWidth(active_width) in Mbps;
            // sysfs `rate` is the same product in Gb/s, e.g. "400 Gb/sec (4X NDR)".
            let rate = sys.read_attr(&pdir, "rate").unwrap_or_default();
            let speed = rate
                .split_whitespace()
                .next()
                .and_then(|g| g.parse::<f64>().ok())
                .map(|g| (g * 1000.0).round() as i64)
                .unwrap_or(0);
            let guid = sys
                .read_attr(&base, "sys_image_guid")
                .map(|g| guid_as_nccl_prints_it(&g))
                .unwrap_or(0);
            let pci_path = sys
                .realpath(&format!("{base}/device"))
                .map(|p| merged_ib_path(&p, merge_vfs));
            // The port NCCL reports adds the earlier functions of the same card.
            let real_port = match &pci_path {
                Some(p) => merged_paths
                    .iter()
                    .filter(|q| same_card(p, q, merge_vfs))
                    .count() as i64,
                None => 0,
            };
            if let Some(p) = &pci_path {
                merged_paths.push(p.clone());
            }
            out.push(NetDevice {
                name: name.clone(),
                pci_path,
                speed,
                port: port + real_port,
                guid,
                // devAttr.max_qp is not in sysfs; ConnectX-4 to -8 all report 2^17.
                maxconn: 131072,
                gdr,
                latency: 0,
            });
        }
    }
    out
}

/// NCCL merges the ports (functions) of a multi-port card, and with
/// NCCL_IB_MERGE_VFS its virtual functions, into one PCI device by zeroing the
/// function digit (and the device digits) of the path.
fn merged_ib_path(path: &str, merge_vfs: bool) -> String {
    let mut bytes = path.as_bytes().to_vec();
    let n = bytes.len();
    if n >= 1 {
        bytes[n - 1] = b'0';
    }
    if merge_vfs && n >= 4 {
        bytes[n - 3] = b'0';
        bytes[n - 4] = b'0';
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn same_card(a: &str, b: &str, merge_vfs: bool) -> bool {
    let cut = if merge_vfs { 4 } else { 1 };
    let n = a.len().saturating_sub(cut);
    a.len() == b.len() && a.as_bytes()[..n] == b.as_bytes()[..n]
}

/// verbs hands NCCL the GUID in network byte order and NCCL prints the 64-bit
/// word as is, so on a little-endian host the bytes come out reversed:
/// sysfs "1c34:da03:00a1:b2c3" is printed 0xc3b2a10003da341c.
fn guid_as_nccl_prints_it(sysfs_guid: &str) -> u64 {
    let hex: String = sysfs_guid
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect();
    match u64::from_str_radix(&hex, 16) {
        Ok(v) if hex.len() == 16 => {
            let wire = v.to_be_bytes();
            if cfg!(target_endian = "little") {
                u64::from_le_bytes(wire)
            } else {
                u64::from_be_bytes(wire)
            }
        }
        _ => 0,
    }
}

/// nv_peer_mem / nvidia_peermem loaded, or a kernel with DMA-BUF (5.12+),
/// which NCCL's IB plugin then finds working.
fn ib_gdr_support(sys: &SysFs) -> bool {
    let peermem = [
        "/sys/kernel/mm/memory_peers/nv_mem/version",
        "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        "/sys/module/nvidia_peermem/version",
    ]
    .iter()
    .any(|p| sys.exists(p));
    peermem || kernel_has_dmabuf(sys)
}

fn kernel_has_dmabuf(sys: &SysFs) -> bool {
    let release = sys
        .read_text("/proc/sys/kernel/osrelease")
        .unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next().map(strtol).unwrap_or(0);
    let minor = parts.next().map(strtol).unwrap_or(0);
    (major, minor) >= (5, 12)
}

/// `IFF_UP` and `IFF_RUNNING` (linux/if.h).
const IFF_UP: i64 = 0x1;
const IFF_RUNNING: i64 = 0x40;
/// NCCL's `MAX_IFS`.
const MAX_IFS: usize = 16;

struct Interface {
    name: String,
    index: i64,
    has_ipv4: bool,
}

fn running_interfaces(sys: &SysFs) -> Vec<Interface> {
    let routes_file = sys.read_text("/proc/net/route");
    let inet6_file = sys.read_text("/proc/net/if_inet6");
    // Without either file there is no way to see addresses: take running as enough.
    let blind = routes_file.is_none() && inet6_file.is_none();
    let routes = routes_file.unwrap_or_default();
    let v4: Vec<&str> = routes
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let inet6 = inet6_file.unwrap_or_default();
    // Columns: address, ifindex, prefix length, scope, flags, name; NCCL skips ::1.
    let v6: Vec<&str> = inet6
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            match cols.as_slice() {
                [addr, _, _, _, _, name] if *addr != "00000000000000000000000000000001" => {
                    Some(*name)
                }
                _ => None,
            }
        })
        .collect();
    let mut out = Vec::new();
    for name in sys.list_dir("/sys/class/net") {
        let dir = format!("/sys/class/net/{name}");
        if !is_running(sys, &dir) {
            continue;
        }
        // lo's 127.0.0.1 lives in the local routing table, which /proc/net/route does not show.
        let has_ipv4 = v4.contains(&name.as_str()) || name == "lo";
        let has_ipv6 = v6.contains(&name.as_str());
        if !has_ipv4 && !has_ipv6 && !blind {
            continue;
        }
        let index = sys
            .read_attr(&dir, "ifindex")
            .map(|i| strtol(&i))
            .unwrap_or(0);
        out.push(Interface {
            name,
            index,
            has_ipv4,
        });
    }
    // getifaddrs lists IPv4 addresses first, by interface index, then IPv6.
    out.sort_by_key(|i| (!i.has_ipv4, i.index));
    out
}

/// getifaddrs' `IFF_RUNNING`: the kernel adds it to the flags only when it
/// reports them (`dev_get_flags`): up, and operationally up or unknown. The
/// sysfs `flags` file holds the stored flags without it (the 2x H200 VM's
/// eth0 reads 0x1003 while NCCL uses it).
fn is_running(sys: &SysFs, dir: &str) -> bool {
    let flags = sys.read_attr(dir, "flags").map(|f| strtol(&f)).unwrap_or(0);
    if flags & IFF_UP == 0 {
        return false;
    }
    match sys.read_attr(dir, "operstate").as_deref() {
        Some("up") | Some("unknown") => true,
        Some(_) => false,
        None => flags & IFF_RUNNING != 0 || sys.read_attr(dir, "carrier").as_deref() == Some("1"),
    }
}

fn discover_socket(sys: &SysFs, env: &NetEnv) -> Vec<NetDevice> {
    let interfaces = running_interfaces(sys);
    let pick = |spec: &str| -> Vec<&Interface> {
        let list = IfList::parse(spec);
        interfaces
            .iter()
            .filter(|i| list.accepts(&i.name, None))
            .take(MAX_IFS)
            .collect()
    };
    let chosen: Vec<&Interface> = match env.socket_ifname.as_deref() {
        Some(spec) if spec.len() > 1 => pick(spec),
        _ => {
            let mut found = pick("ib");
            for spec in ["^docker,lo,virbr", "docker", "lo", "virbr"] {
                if found.is_empty() {
                    found = pick(spec);
                }
            }
            found
        }
    };
    chosen
        .iter()
        .enumerate()
        .map(|(dev, i)| {
            let dir = format!("/sys/class/net/{}", i.name);
            let speed = sys
                .read_attr(&dir, "speed")
                .map(|s| strtol(&s))
                .unwrap_or(0);
            NetDevice {
                name: i.name.clone(),
                pci_path: sys.realpath(&format!("{dir}/device")),
                // The socket plugin falls back to 10 Gb/s when the speed is unknown.
                speed: if speed > 0 { speed } else { 10000 },
                port: 0,
                guid: dev as u64,
                maxconn: 65536,
                gdr: false,
                latency: 0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_lists() {
        assert!(IfList::parse("").accepts("eth0", None));
        assert!(IfList::parse("eth").accepts("eth0", None));
        assert!(!IfList::parse("=eth").accepts("eth0", None));
        assert!(!IfList::parse("^docker,lo,virbr").accepts("lo", None));
        assert!(IfList::parse("^docker,lo,virbr").accepts("eth0", None));
        assert!(IfList::parse("mlx5_0:1").accepts("mlx5_0", Some(1)));
        assert!(!IfList::parse("mlx5_0:1").accepts("mlx5_0", Some(2)));
    }

    #[test]
    fn guid_and_paths_as_nccl_has_them() {
        assert_eq!(
            guid_as_nccl_prints_it("1c34:da03:00a1:b2c3"),
            if cfg!(target_endian = "little") {
                0xc3b2_a100_03da_341c
            } else {
                0x1c34_da03_00a1_b2c3
            }
        );
        assert_eq!(
            merged_ib_path("/sys/devices/pci0000:00/0000:3b:02.3", true),
            "/sys/devices/pci0000:00/0000:3b:00.0"
        );
        assert_eq!(
            merged_ib_path("/sys/devices/pci0000:00/0000:3b:00.1", false),
            "/sys/devices/pci0000:00/0000:3b:00.0"
        );
        assert!(natural_key("mlx5_2") < natural_key("mlx5_10"));
    }
}
