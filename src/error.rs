//! One error type for the whole tool. The split matters to users and scripts:
//! bad input (a file, a flag, a value) exits with code 2, a runtime failure
//! (no GPU, a CUDA call that failed, a timeout) exits with code 1.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Something the user gave us is wrong. The message names the input.
    BadInput(String),
    /// The machine or a library failed us. The message names the call and the GPU.
    Runtime(String),
}

impl Error {
    pub(crate) fn bad_input(msg: impl Into<String>) -> Self {
        Error::BadInput(msg.into())
    }
    pub(crate) fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }
    /// Process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BadInput(_) => 2,
            Error::Runtime(_) => 1,
        }
    }
    pub fn message(&self) -> &str {
        match self {
            Error::BadInput(m) | Error::Runtime(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
