//! nccl-tests output (`calibrate FILE`): the text of `all_reduce_perf` and siblings (with or without an
//! `NCCL_DEBUG=INFO` log in the same file) and its `-J` JSON. `calibrate::read_text` never panics and refuses with
//! bad input (exit 2); every row it keeps has a size and a finite, non-negative time. The first byte picks the
//! `--pair` and `--coll` the user may give.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../common/mod.rs"]
mod common;
#[path = "../measurements.rs"]
mod measurements;

fuzz_target!(|data: &[u8]| measurements::check(data));
