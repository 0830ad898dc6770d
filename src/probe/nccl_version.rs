//! Which NCCL is on this machine: `dlopen` libnccl and ask `ncclGetVersion`,
//! so the model can default to that version's tuning table.

use serde::Serialize;
use std::os::raw::c_int;
use std::path::{Path, PathBuf};

/// An NCCL library found on the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct NcclVersion {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) patch: u32,
    /// `ncclGetVersion`'s integer (22809 for 2.28.9).
    pub(crate) code: i32,
    /// The library name that loaded.
    pub(crate) library: String,
}

impl NcclVersion {
    /// Decode `NCCL_VERSION_CODE`: `X*10000 + Y*100 + Z` from 2.9, `X*1000 + Y*100 + Z` before.
    pub(crate) fn from_code(code: i32, library: &str) -> Option<NcclVersion> {
        if code <= 0 {
            return None;
        }
        let c = code as u32;
        let (major, minor, patch) = if c >= 10000 {
            (c / 10000, (c % 10000) / 100, c % 100)
        } else {
            (c / 1000, (c % 1000) / 100, c % 100)
        };
        Some(NcclVersion {
            major,
            minor,
            patch,
            code,
            library: library.to_string(),
        })
    }

    pub(crate) fn text(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The libnccl the dynamic loader finds (`libnccl.so`, then `libnccl.so.2`),
/// or None when there is none or it does not answer.
///
/// Loading libnccl costs about 2.5 ms (it maps a library of 200-400 MB and runs its initializers, CUDA's runtime
/// included), a third of `explain`'s time, so the version is first read from the file name the library resolves to
/// (`libnccl.so.2.28.3`, as NCCL's build installs it) in the loader's directories. That is taken only when every
/// libnccl found there resolves to one and the same version; otherwise (a pip wheel's bare `libnccl.so.2`, two
/// versions side by side) the library is loaded and asked.
pub(crate) fn detect() -> Option<NcclVersion> {
    if let Some(v) = from_file_names(&loader_dirs()) {
        return Some(v);
    }
    for name in ["libnccl.so", "libnccl.so.2"] {
        if let Some(v) = query(name) {
            return Some(v);
        }
    }
    None
}

/// The directories the dynamic loader searches, in its order: `LD_LIBRARY_PATH`, those `/etc/ld.so.conf` names (its
/// `include` lines followed), then the default ones.
fn loader_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    conf_dirs(Path::new("/etc/ld.so.conf"), &mut dirs, 0);
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    for d in ["/lib", "/usr/lib"] {
        dirs.push(Path::new(d).join(&multiarch));
    }
    dirs.extend(["/lib64", "/usr/lib64", "/lib", "/usr/lib"].map(PathBuf::from));
    dirs
}

/// The directories an ld.so.conf file lists, its `include DIR/*.conf` lines followed (sorted, as ldconfig reads
/// them); `depth` stops include loops.
fn conf_dirs(file: &Path, dirs: &mut Vec<PathBuf>, depth: u32) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            let pattern = Path::new(pattern.trim());
            let (Some(parent), Some(name)) = (pattern.parent(), pattern.file_name()) else {
                continue;
            };
            let name = name.to_string_lossy();
            let (prefix, suffix) = name.split_once('*').unwrap_or((&name, ""));
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .map(|n| n.to_string_lossy())
                        .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
                })
                .collect();
            files.sort();
            if depth < 4 {
                for f in files {
                    conf_dirs(&f, dirs, depth + 1);
                }
            }
        } else if line.starts_with('/') {
            dirs.push(PathBuf::from(line));
        }
    }
}

/// The version every `libnccl.so` and `libnccl.so.2` in `dirs` resolves to by file name (`libnccl.so.2.28.3`),
/// named as the loader would be asked for it; None when there is none, when one does not name its version, or when
/// two disagree.
fn from_file_names(dirs: &[PathBuf]) -> Option<NcclVersion> {
    let mut found: Option<(u32, u32, u32, &str)> = None;
    for name in ["libnccl.so", "libnccl.so.2"] {
        for dir in dirs {
            let path = dir.join(name);
            if !path.exists() {
                continue;
            }
            let target = std::fs::canonicalize(&path).ok()?;
            let version = version_of_file_name(&target.file_name()?.to_string_lossy())?;
            match found {
                None => found = Some((version.0, version.1, version.2, name)),
                Some((a, b, c, _)) if (a, b, c) != version => return None,
                Some(_) => {}
            }
        }
    }
    let (major, minor, patch, name) = found?;
    let code = i32::try_from(major * 10000 + minor * 100 + patch).ok()?;
    NcclVersion::from_code(code, name)
}

/// `libnccl.so.2.28.3` -> (2, 28, 3); None for any other name.
fn version_of_file_name(file: &str) -> Option<(u32, u32, u32)> {
    let mut parts = file.strip_prefix("libnccl.so.")?.split('.');
    let mut next = || parts.next()?.parse::<u32>().ok();
    let version = (next()?, next()?, next()?);
    // NCCL's codes hold a minor and a patch below 100; 2.x is the only major with that code.
    (parts.next().is_none() && version.0 == 2 && version.1 < 100 && version.2 < 100)
        .then_some(version)
}

fn query(name: &str) -> Option<NcclVersion> {
    type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: loading a shared library runs its initializers; libnccl's only
    // set up its own static state and start no threads until a communicator
    // is created.
    let lib = unsafe { libloading::Library::new(name) }.ok()?;
    let mut code: c_int = 0;
    let rc = {
        // SAFETY: `ncclGetVersion` has had the C signature
        // `ncclResult_t ncclGetVersion(int *version)` in every NCCL 2.x release;
        // ncclResult_t is a C enum (int).
        let get: libloading::Symbol<GetVersion> = unsafe { lib.get(b"ncclGetVersion\0") }.ok()?;
        // SAFETY: the pointer is to a live, writable c_int on our stack.
        unsafe { get(&mut code) }
    };
    // Keep the library mapped: unloading NCCL runs its destructors for nothing.
    std::mem::forget(lib);
    if rc != 0 {
        return None;
    }
    NcclVersion::from_code(code, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes() {
        let v = NcclVersion::from_code(22809, "x").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (2, 28, 9));
        let v = NcclVersion::from_code(23007, "x").unwrap();
        assert_eq!(v.text(), "2.30.7");
        let v = NcclVersion::from_code(2804, "x").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (2, 8, 4));
        assert!(NcclVersion::from_code(0, "x").is_none());
    }

    #[test]
    fn file_names_name_the_version() {
        assert_eq!(version_of_file_name("libnccl.so.2.28.3"), Some((2, 28, 3)));
        assert_eq!(
            version_of_file_name("libnccl.so.2.30.10"),
            Some((2, 30, 10))
        );
        for bare in [
            "libnccl.so.2",
            "libnccl.so",
            "libnccl.so.2.28",
            "libnccl.so.2.28.3.1",
            "libnccl.so.2.x.3",
        ] {
            assert_eq!(version_of_file_name(bare), None, "{bare}");
        }
    }

    /// Links made in a temporary directory, as NCCL's install lays them out (`libnccl.so -> libnccl.so.2 ->
    /// libnccl.so.2.28.3`); a pip wheel's bare file and two versions side by side fall back to loading the library.
    #[test]
    fn versions_from_links_in_the_loader_dirs() {
        use std::os::unix::fs::symlink;
        let root =
            std::env::temp_dir().join(format!("planner-nccl-version-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("libnccl.so.2.28.3"), b"").unwrap();
        symlink("libnccl.so.2.28.3", a.join("libnccl.so.2")).unwrap();
        symlink("libnccl.so.2", a.join("libnccl.so")).unwrap();
        let v = from_file_names(std::slice::from_ref(&a)).unwrap();
        assert_eq!(
            (v.text(), v.code, v.library.as_str()),
            ("2.28.3".to_string(), 22803, "libnccl.so")
        );
        assert!(
            from_file_names(std::slice::from_ref(&b)).is_none(),
            "no libnccl"
        );
        // A second version in another directory: the loader's pick is not guessed.
        std::fs::write(b.join("libnccl.so.2.30.4"), b"").unwrap();
        symlink("libnccl.so.2.30.4", b.join("libnccl.so.2")).unwrap();
        assert!(from_file_names(&[a.clone(), b.clone()]).is_none());
        // A bare file (pip's nvidia-nccl-cu12 ships libnccl.so.2 itself) names no version.
        std::fs::remove_file(b.join("libnccl.so.2")).unwrap();
        std::fs::rename(b.join("libnccl.so.2.30.4"), b.join("libnccl.so.2")).unwrap();
        assert!(from_file_names(&[a.clone(), b.clone()]).is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
