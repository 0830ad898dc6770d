//! NCCL Inspector JSONL (the profiler plugin's per-rank, per-collective records; `calibrate FILE`):
//! `calibrate::read_text` never panics and refuses with bad input (exit 2); every row it keeps has a size and a
//! finite, non-negative time. Same reader as `nccl_tests`, seeded with Inspector records.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../common/mod.rs"]
mod common;
#[path = "../measurements.rs"]
mod measurements;

fuzz_target!(|data: &[u8]| measurements::check(data));
