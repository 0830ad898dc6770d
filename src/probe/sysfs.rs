//! sysfs and procfs reads under a root directory: `/` on a live machine, a
//! fake tree in a temp directory in tests. Paths handed in and out are the
//! machine's own (`/sys/devices/pci0000:00/0000:00:06.0`), whatever the root.
//!
//! A fake tree must use relative symlinks so that they resolve inside it.

use std::path::{Path, PathBuf};

/// NCCL's `MAX_STR_LEN`: it reads at most this many bytes of a sysfs file.
const MAX_STR_LEN: usize = 255;

#[derive(Debug, Clone)]
pub struct SysFs {
    root: PathBuf,
}

impl SysFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        SysFs { root: root.into() }
    }

    /// The live machine.
    pub(crate) fn live() -> Self {
        SysFs::new("/")
    }

    fn host(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// `dir/file` the way NCCL's `ncclTopoGetStrFromSys` reads it: at most
    /// 255 bytes, the last byte (the newline) dropped. `None` when the file is
    /// missing or empty.
    pub(crate) fn read_attr(&self, dir: &str, file: &str) -> Option<String> {
        let bytes = std::fs::read(self.host(dir).join(file)).ok()?;
        let mut bytes = bytes;
        bytes.truncate(MAX_STR_LEN);
        if bytes.is_empty() {
            return None;
        }
        bytes.pop();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A whole text file (procfs), `None` when it cannot be read.
    pub fn read_text(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.host(path)).ok()
    }

    pub(crate) fn exists(&self, path: &str) -> bool {
        self.host(path).exists()
    }

    /// `realpath(3)` of a machine path, as a machine path.
    pub(crate) fn realpath(&self, path: &str) -> Option<String> {
        let real = std::fs::canonicalize(self.host(path)).ok()?;
        let root = std::fs::canonicalize(&self.root).ok()?;
        let inside = real.strip_prefix(&root).ok()?;
        Some(machine_path(inside))
    }

    /// Names in a directory, sorted; empty when it cannot be read.
    pub(crate) fn list_dir(&self, path: &str) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.host(path)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    /// The sysfs directory of a PCI device (NCCL's `getPciPath`): the real
    /// path of `/sys/bus/pci/devices/<busid>`, bus id lower-cased and cut to
    /// NCCL's 12 characters.
    pub(crate) fn pci_path(&self, bus_id: &str) -> Option<String> {
        let id: String = bus_id.to_lowercase().chars().take(12).collect();
        if id.is_empty() {
            return None;
        }
        self.realpath(&format!("/sys/bus/pci/devices/{id}"))
    }

    /// The last component of `realpath(dir/subsystem)` (NCCL's `ncclTopoGetSubsystem`).
    pub(crate) fn subsystem(&self, dir: &str) -> Option<String> {
        let real = self.realpath(&format!("{dir}/subsystem"))?;
        real.rsplit('/').next().map(str::to_string)
    }
}

fn machine_path(inside: &Path) -> String {
    let mut out = String::new();
    for part in inside.components() {
        out.push('/');
        out.push_str(&part.as_os_str().to_string_lossy());
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// NCCL's `checkBDFFormat`: exactly `BBBB:BB:DD.F` in hex digits.
pub(crate) fn is_bdf(name: &str) -> bool {
    let b = name.as_bytes();
    if b.len() != 12 || b[4] != b':' || b[7] != b':' || b[10] != b'.' {
        return false;
    }
    [0, 1, 2, 3, 5, 6, 8, 9, 11]
        .iter()
        .all(|&i| b[i].is_ascii_hexdigit())
}

/// C's `strtol(s, NULL, 0)` for the small numbers sysfs holds: leading
/// blanks, optional sign, `0x` hex, leading-`0` octal, else decimal; stops at
/// the first non-digit; 0 when nothing parses.
pub(crate) fn strtol(s: &str) -> i64 {
    crate::units::c_strtol(s).0.unwrap_or(0)
}

/// C's `sscanf(s, "%f GT/s", &x)`: the leading float of a link speed.
pub(crate) fn leading_float(s: &str) -> Option<f32> {
    let t = s.trim_start();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    t[..end].parse::<f32>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_format() {
        assert!(is_bdf("0000:00:06.0"));
        assert!(is_bdf("0000:3b:1f.7"));
        assert!(!is_bdf("pci0000:00"));
        assert!(!is_bdf("0000:00:06.0x"));
        assert!(!is_bdf("virtio2"));
    }

    #[test]
    fn c_number_parsing() {
        assert_eq!(strtol("16"), 16);
        assert_eq!(strtol(""), 0);
        assert_eq!(strtol("-1"), -1);
        assert_eq!(strtol("0x10"), 16);
        assert_eq!(strtol("8 lanes"), 8);
        assert_eq!(leading_float("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(leading_float("2.5 GT/s"), Some(2.5));
        assert_eq!(leading_float("Unknown"), None);
        assert_eq!(leading_float(""), None);
    }

    #[test]
    fn reads_like_nccl_and_resolves_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("planner-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dev = dir.join("sys/devices/pci0000:00/0000:00:06.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("class"), "0x030200\n").unwrap();
        std::fs::write(dev.join("empty"), "").unwrap();
        std::fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:06.0",
            dir.join("sys/bus/pci/devices/0000:00:06.0"),
        )
        .unwrap();
        let sys = SysFs::new(&dir);
        let path = sys.pci_path("0000:00:06.0").unwrap();
        assert_eq!(path, "/sys/devices/pci0000:00/0000:00:06.0");
        assert_eq!(sys.read_attr(&path, "class").as_deref(), Some("0x030200"));
        assert_eq!(sys.read_attr(&path, "empty"), None);
        assert_eq!(sys.read_attr(&path, "../max_link_speed"), None);
        assert_eq!(sys.pci_path("0000:00:07.0"), None);
        assert_eq!(sys.pci_path("fffffff:ff:ff.0"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
