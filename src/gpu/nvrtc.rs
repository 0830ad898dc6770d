//! The one way CUDA source becomes a module: the files in `kernels/`,
//! concatenated after a few `#define`s, compiled by NVRTC to CUBIN for the
//! GPU's own architecture (`sm_90` on H100/H200). CUBIN, not PTX: the driver
//! refuses PTX from an NVRTC newer than itself, and a CUBIN needs no JIT step.
//!
//! The sources are built into the binary; `PLANNER_KERNEL_DIR` points at a
//! directory with edited copies to use instead (no rebuild needed), and
//! `PLANNER_NVRTC_OPTS` adds compiler options.

use crate::error::{Error, Result};
use crate::gpu::libs;
use std::ffi::CString;

/// One CUDA file of `kernels/`, built into the binary. Each file is declared once, here; a program lists the
/// ones it needs, in order (`crate::exec::kernels` for the executor's variants, `crate::gpu::pattern` for the
/// data kernels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceFile {
    pub name: &'static str,
    pub text: &'static str,
}

/// A `SourceFile` for `kernels/<name>`.
macro_rules! kernel_file {
    ($name:literal) => {
        SourceFile {
            name: $name,
            text: include_str!(concat!("../../kernels/", $name)),
        }
    };
}

pub(crate) const TYPES_CUH: SourceFile = kernel_file!("types.cuh");
pub(crate) const COMMON_CUH: SourceFile = kernel_file!("common.cuh");
pub(crate) const PROTO_SIMPLE_CUH: SourceFile = kernel_file!("proto_simple.cuh");
pub(crate) const PROTO_LL_CUH: SourceFile = kernel_file!("proto_ll.cuh");
pub(crate) const PROTO_LL128_CUH: SourceFile = kernel_file!("proto_ll128.cuh");
pub(crate) const COLLECTIVES_CU: SourceFile = kernel_file!("collectives.cu");
pub(crate) const BEYOND_CU: SourceFile = kernel_file!("beyond.cu");
pub(crate) const PATTERN_CU: SourceFile = kernel_file!("pattern.cu");
pub const COPY_CU: SourceFile = kernel_file!("copy.cu");

/// Every CUDA file (what `PLANNER_KERNEL_DIR` may hold edited copies of).
pub const SOURCE_FILES: &[SourceFile] = &[
    TYPES_CUH,
    COMMON_CUH,
    PROTO_SIMPLE_CUH,
    PROTO_LL_CUH,
    PROTO_LL128_CUH,
    COLLECTIVES_CU,
    BEYOND_CU,
    PATTERN_CU,
    COPY_CU,
];

/// The text of `file`: the built-in copy, or the one in `PLANNER_KERNEL_DIR`.
fn read_source(file: &SourceFile) -> Result<String> {
    let dir = std::env::var("PLANNER_KERNEL_DIR").unwrap_or_default();
    read_source_in((!dir.is_empty()).then(|| std::path::Path::new(&dir)), file)
}

/// The text of `file`: the copy in `dir` when given, else the built-in one.
fn read_source_in(dir: Option<&std::path::Path>, file: &SourceFile) -> Result<String> {
    match dir {
        Some(dir) => {
            let path = dir.join(file.name);
            // Through the checked reader: a FIFO (or any non-regular file) there is refused by name, not read
            // forever.
            let shown = path.to_string_lossy();
            crate::fsio::read_input_file(&shown)
                .map_err(|e| Error::bad_input(format!("PLANNER_KERNEL_DIR: {}", e.message())))
        }
        None => Ok(file.text.to_string()),
    }
}

/// One program's full source: a comment naming it, its `#define`s, then
/// each file with a `#line` so NVRTC's messages name the file and line.
pub(crate) fn program_source(
    name: &str,
    defines: &[(&str, String)],
    files: &[SourceFile],
) -> Result<String> {
    let mut text = format!("// {name}\n");
    for (macro_name, value) in defines {
        text.push_str(&format!("#define {macro_name} {value}\n"));
    }
    for file in files {
        let body = read_source(file)?;
        let file = file.name;
        text.push_str(&format!("// ---- {file}\n#line 1 \"{file}\"\n"));
        text.push_str(&body);
        text.push('\n');
    }
    Ok(text)
}

/// A compiled module image and the compiler's messages.
#[derive(Debug, Clone)]
pub struct Cubin {
    pub image: Vec<u8>,
    pub log: String,
    pub arch: String,
}

/// The NVRTC architecture of a GPU of compute capability `cc`: `sm_90`.
pub(crate) fn arch_of(cc: (i32, i32)) -> String {
    format!("sm_{}{}", cc.0, cc.1)
}

/// NVRTC's version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    libs::require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: require_nvrtc checked the library and the symbol; the pointers are valid.
    let rc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    rc.result()
        .map_err(|e| Error::runtime(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// Compile `source` (named `name` in messages) to CUBIN for `arch` (e.g.
/// "sm_90") with the extra NVRTC options `extra` (e.g.
/// "--ptxas-options=--verbose"). On a compile error the message carries
/// NVRTC's log.
pub(crate) fn compile(name: &str, source: &str, arch: &str, extra: &[&str]) -> Result<Cubin> {
    libs::require_nvrtc()?;
    let src = CString::new(source)
        .map_err(|_| Error::runtime(format!("kernel {name}: the source contains a NUL byte")))?;
    let file_name = CString::new(format!("{name}.cu"))
        .map_err(|_| Error::runtime(format!("kernel {name}: the name contains a NUL byte")))?;
    let prog = cudarc::nvrtc::result::create_program(&src, Some(&file_name))
        .map_err(|e| Error::runtime(format!("nvrtcCreateProgram failed: {e:?}")))?;
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    options.extend(extra.iter().map(|s| s.to_string()));
    // Extra options for investigations, e.g. "--ptxas-options=--verbose".
    if let Ok(env_opts) = std::env::var("PLANNER_NVRTC_OPTS") {
        options.extend(env_opts.split_whitespace().map(str::to_string));
    }
    // SAFETY: `prog` was just created and is destroyed exactly once below.
    let compiled = unsafe { cudarc::nvrtc::result::compile_program(prog, &options) };
    // SAFETY: as above.
    let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
        .map(|chars| {
            let bytes: Vec<u8> = chars
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    let result = match compiled {
        Err(e) => Err(Error::runtime(format!(
            "kernel {name} failed to compile for {arch} ({e:?}); NVRTC log:\n{}",
            log.trim_end()
        ))),
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: prog compiled successfully; size is a valid out-pointer.
            let rc = unsafe { cudarc::nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size) };
            rc.result()
                .map_err(|e| Error::runtime(format!("nvrtcGetCUBINSize failed: {e:?}")))
                .and_then(|()| {
                    let mut image = vec![0u8; size];
                    // SAFETY: `image` has exactly the size NVRTC reported.
                    let rc = unsafe {
                        cudarc::nvrtc::sys::nvrtcGetCUBIN(prog, image.as_mut_ptr() as *mut _)
                    };
                    rc.result()
                        .map_err(|e| Error::runtime(format!("nvrtcGetCUBIN failed: {e:?}")))
                        .map(|()| Cubin {
                            image,
                            log: log.clone(),
                            arch: arch.to_string(),
                        })
                })
        }
    };
    // SAFETY: prog is valid and not used after this.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_its_defines_then_its_files_with_line_markers() {
        let text = program_source(
            "pattern_f32",
            &[("PLANNER_T", "float".to_string())],
            &[TYPES_CUH, PATTERN_CU],
        )
        .unwrap();
        let define = text.find("#define PLANNER_T float\n").unwrap();
        let types = text.find("#line 1 \"types.cuh\"").unwrap();
        let pattern = text.find("#line 1 \"pattern.cu\"").unwrap();
        assert!(define < types && types < pattern, "{text}");
        assert!(!text.contains("collectives.cu"));
        // A file missing from PLANNER_KERNEL_DIR is an error naming it.
        let missing = SourceFile {
            name: "nonexistent.cu",
            text: "",
        };
        let empty_dir = std::env::temp_dir();
        let err = read_source_in(Some(&empty_dir), &missing).unwrap_err();
        assert!(err.to_string().contains("nonexistent.cu"), "{err}");
    }

    #[test]
    fn a_fifo_in_the_kernel_dir_is_refused_by_name_not_read() {
        let dir = std::env::temp_dir().join(format!("planner-kdir-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pattern.cu");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo failed");
        let start = std::time::Instant::now();
        let err = read_source_in(Some(&dir), &PATTERN_CU).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(err.exit_code(), 2, "{err}");
        let text = err.to_string();
        assert!(text.contains("PLANNER_KERNEL_DIR"), "{text}");
        assert!(text.contains("pattern.cu"), "{text}");
        assert!(text.contains("not a regular file"), "{text}");
    }

    #[test]
    fn architecture_from_compute_capability() {
        assert_eq!(arch_of((9, 0)), "sm_90");
        assert_eq!(arch_of((10, 0)), "sm_100");
    }
}
