//! Every kernel compiles with NVRTC to CUBIN for sm_90 (no GPU needed): the
//! executor's variants and the NCCL backend's data kernels, through the one
//! compile path (`planner::gpu::nvrtc`). In CI (CI=true) NVRTC must be
//! present (.ci/run installs the 13.0 wheel); on a developer machine without
//! it the test says so and passes.

use planner::dtype::Dtype;
use planner::exec::kernels::{self, Variant};
use planner::gpu::nvrtc::{self, Cubin};
use planner::gpu::pattern;

fn nvrtc_or_skip() -> bool {
    if planner::gpu::nvrtc_available() {
        return true;
    }
    let in_ci = std::env::var("CI").map(|v| v == "true").unwrap_or(false);
    assert!(
        !in_ci,
        "CI=true but NVRTC is not loadable: .ci/run must put the nvidia-cuda-nvrtc 13.0 wheel's lib dir on LD_LIBRARY_PATH"
    );
    eprintln!("skipping: NVRTC not found (set LD_LIBRARY_PATH to a libnvrtc.so.13 directory to run this test)");
    false
}

#[test]
fn every_kernel_compiles_to_sm90_cubin() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, _minor) = nvrtc::nvrtc_version().expect("nvrtcVersion");
    assert!(major >= 12, "NVRTC {major}.x is too old for sm_90 CUBIN");
    let variants = Variant::all();
    // 3 types x (6 all-reduce pairs + OneShot/LL + TwoShot/Simple + 3 Ring/Simple collectives)
    assert_eq!(variants.len(), 33);
    for pair in planner::model::beyond::pairs() {
        assert_eq!(
            variants
                .iter()
                .filter(|v| v.algorithm == pair.algo && v.protocol == pair.proto)
                .count(),
            3,
            "{pair} in every type"
        );
    }
    for v in variants {
        let cubin =
            kernels::compile(&v, "sm_90").unwrap_or_else(|e| panic!("{} failed: {e}", v.name()));
        assert_clean_cubin(&v.name(), &cubin);
        for kernel in ["planner_collective", "planner_fill", "planner_check"] {
            assert!(holds_symbol(&cubin, kernel), "{} lacks {kernel}", v.name());
        }
    }
}

/// The NCCL backend's fill and check kernels, one module per type.
#[test]
fn every_data_kernel_compiles_to_sm90_cubin() {
    if !nvrtc_or_skip() {
        return;
    }
    for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
        let name = format!("data kernels ({dtype})");
        let cubin =
            pattern::compile(dtype, "sm_90").unwrap_or_else(|e| panic!("{name} failed: {e}"));
        assert_clean_cubin(&name, &cubin);
        assert_eq!(cubin.arch, "sm_90");
        for kernel in ["planner_fill", "planner_check"] {
            assert!(holds_symbol(&cubin, kernel), "{name} lacks {kernel}");
        }
        assert!(!holds_symbol(&cubin, "planner_collective"), "{name}");
    }
}

/// The doctor's SM copy kernel (the `*_sm` link tests).
#[test]
fn the_doctor_copy_kernel_compiles_to_sm90_cubin() {
    if !nvrtc_or_skip() {
        return;
    }
    let cubin = planner::gpu::bandwidth::compile_copy_kernel("sm_90").unwrap();
    assert_clean_cubin("planner_copy", &cubin);
    assert!(holds_symbol(&cubin, "planner_copy"));
}

/// A CUBIN is an ELF file, and NVRTC had nothing to warn about.
fn assert_clean_cubin(name: &str, cubin: &Cubin) {
    assert_eq!(&cubin.image[..4], b"\x7fELF", "{name} is not an ELF image");
    assert!(
        !cubin.log.contains("warning"),
        "{name} compiled with warnings:\n{}",
        cubin.log
    );
}

/// Whether the image's symbol names include `kernel` (extern "C": unmangled).
fn holds_symbol(cubin: &Cubin, kernel: &str) -> bool {
    let needle = format!("{kernel}\0");
    cubin
        .image
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_compile_error_reports_nvrtc_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("planner-bad-kernels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in nvrtc::SOURCE_FILES {
        let body = if file.name == "collectives.cu" {
            format!("{}\nthis_is_not_cuda;\n", file.text)
        } else {
            file.text.to_string()
        };
        std::fs::write(dir.join(file.name), body).unwrap();
    }
    // SAFETY-free: the variable is only read by planner::gpu::nvrtc::program_source in this process;
    // this test file runs its tests in one process, so set it via a child instead.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "exec_nvrtc::compile_error_child",
            "--nocapture",
            "--ignored",
        ])
        .env("PLANNER_KERNEL_DIR", &dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("NVRTC log"), "no NVRTC log in:\n{text}");
    assert!(
        text.contains("this_is_not_cuda"),
        "the log does not name the bad line:\n{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "run by a_compile_error_reports_nvrtc_log with PLANNER_KERNEL_DIR set"]
fn compile_error_child() {
    let v = Variant::all()[0];
    let err = kernels::compile(&v, "sm_90").expect_err("the broken source must not compile");
    println!("{err}");
}

/// ptxas's resource report (registers, stack, spills) of every variant:
/// `cargo test --release --test exec_nvrtc -- --ignored --nocapture kernel_resources`
#[test]
#[ignore = "a report for people, not a check"]
fn kernel_resources() {
    if !nvrtc_or_skip() {
        return;
    }
    for v in Variant::all() {
        let cubin = kernels::compile_with(&v, "sm_90", &["--ptxas-options=--verbose"])
            .unwrap_or_else(|e| panic!("{} failed: {e}", v.name()));
        for line in cubin
            .log
            .lines()
            .filter(|l| l.contains("Used") || l.contains("spill"))
        {
            println!("{:40} {}", v.name(), line.trim());
        }
    }
}
