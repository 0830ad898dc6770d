//! The element types verify moves (`Dtype`): their names, sizes, C types and exact-integer limits. Below the
//! GPU layer, which compiles its kernels for them, and the measurement vocabulary, which records them.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element types verify can move. Sums of the test pattern are exact in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    Bf16,
    F16,
}

impl Dtype {
    pub fn parse(text: &str) -> Result<Dtype> {
        match text.to_ascii_lowercase().as_str() {
            "f32" | "float" | "float32" => Ok(Dtype::F32),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            "f16" | "half" | "float16" => Ok(Dtype::F16),
            _ => Err(Error::bad_input(format!(
                "invalid --dtype '{text}': unknown data type '{text}'; known: f32, bf16, f16"
            ))),
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "f16",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }
    /// Name as nccl-tests prints it.
    pub(crate) fn nccl_tests_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "half",
        }
    }
    /// The C type the kernels are compiled for (`kernels/common.cuh`).
    pub(crate) fn c_type(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::Bf16 => "planner_bf16",
            Dtype::F16 => "planner_f16",
        }
    }
    /// Largest integer magnitude the type holds exactly (2^(mantissa bits + 1)).
    pub(crate) fn exact_integer_limit(self) -> u64 {
        match self {
            Dtype::F32 => 1 << 24,
            Dtype::Bf16 => 1 << 8,
            Dtype::F16 => 1 << 11,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
