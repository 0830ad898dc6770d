//! Which NCCL is on this machine: `dlopen` libnccl and ask `ncclGetVersion`,
//! so the model can default to that version's tuning table.

use serde::Serialize;
use std::os::raw::c_int;

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
pub(crate) fn detect() -> Option<NcclVersion> {
    for name in ["libnccl.so", "libnccl.so.2"] {
        if let Some(v) = query(name) {
            return Some(v);
        }
    }
    None
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
}
