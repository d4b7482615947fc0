//! What the interpreter reports: operator names as plain `Copy` data (a
//! custom op keeps its custom code) and [`InterpreterError`], the one error
//! type of allocate, invoke and tensor access, each variant naming the op
//! or tensor at fault.

use core::fmt;

use crate::accel::AccelError;
use crate::accel::in_flight::JobFault;
use crate::allocation::AllocError;
use crate::canary::CanaryFault;
use crate::kernels::KernelError;
use crate::model::{Model, OpCode};

/// An operator code as plain data, for `Copy` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpName {
    /// A builtin operator code.
    Builtin(i32),
    /// A custom operator, with its custom code (the name a model gives a
    /// vendor op).
    Custom(CustomCode),
}

impl OpName {
    /// An operator whose table cannot be read (verification rules this out
    /// for a model that loaded): a custom code that no model can carry.
    pub const UNREADABLE: OpName = OpName::Custom(CustomCode {
        bytes: [0; CustomCode::CAPACITY],
        len: 0,
        cut: false,
    });
}

/// A custom operator's code, held inline so that errors stay `Copy`: the
/// first [`CustomCode::CAPACITY`] bytes, cut at a character boundary (a
/// longer name shows with a trailing `…`).
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CustomCode {
    bytes: [u8; CustomCode::CAPACITY],
    len: u8,
    pub(crate) cut: bool,
}

impl CustomCode {
    /// Bytes kept of a custom code.
    pub const CAPACITY: usize = 32;

    /// `name`, cut to [`Self::CAPACITY`] bytes if longer.
    pub fn new(name: &str) -> Self {
        let mut len = name.len().min(Self::CAPACITY);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0; Self::CAPACITY];
        bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
        CustomCode {
            bytes,
            len: len as u8,
            cut: len < name.len(),
        }
    }

    /// The code as kept (without the `…` of a cut one).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Debug for CustomCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for CustomCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.cut {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl From<OpCode<'_>> for OpName {
    fn from(code: OpCode<'_>) -> Self {
        match code {
            OpCode::Builtin(op) => OpName::Builtin(op.0),
            OpCode::Custom(name) => OpName::Custom(CustomCode::new(name)),
        }
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OpName::Builtin(code) => {
                fmt::Display::fmt(&OpCode::Builtin(crate::schema::BuiltinOperator(code)), f)
            }
            OpName::Custom(code) => write!(f, "CUSTOM({code})"),
        }
    }
}

/// Why the interpreter could not set up or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum InterpreterError {
    /// `invoke` or tensor access before a successful `allocate`.
    NotAllocated,
    /// A backend was set, but this build has the runtime's `no-offload`
    /// feature: nothing can be offloaded.
    OffloadNotLinked,
    /// No kernel for this operator.
    UnsupportedOperator {
        /// Operator index (execution step).
        op: u32,
        /// Its code.
        code: OpName,
    },
    /// A kernel refused the operator in prepare, or failed in invoke.
    Kernel {
        /// Operator index.
        op: u32,
        /// Its code.
        code: OpName,
        /// What the kernel said.
        error: KernelError,
    },
    /// An operator writes a tensor it also reads, or writes one tensor twice.
    Aliasing {
        /// Operator index.
        op: u32,
        /// The tensor.
        tensor: u32,
    },
    /// An operator reads a tensor that no earlier operator writes and that
    /// is not a model input (nor a constant or variable): its bytes would be
    /// stale arena memory.
    ReadBeforeWrite {
        /// Operator index.
        op: u32,
        /// The tensor.
        tensor: u32,
    },
    /// Arena or planning failure.
    Alloc(AllocError),
    /// A guard band was overwritten: an overrun (see [`crate::canary`]).
    Canary(CanaryFault),
    /// An offloaded op's job failed: refused at submit, failed in the
    /// engine, broke a lease, or missed its deadline (the job was aborted).
    /// At allocate, `job` is 0 and the error names a region the plan could
    /// not make fit the backend.
    Accelerator {
        /// Operator index.
        op: u32,
        /// The backend's job id (0 when none was given yet).
        job: u32,
        /// What went wrong.
        error: AccelError,
    },
    /// A model input/output position that does not exist.
    NoSuchTensor {
        /// The position asked for.
        position: u32,
    },
    /// The lean schedule was asked for with an accelerator: an engine's
    /// job reading and writing one buffer is not supported.
    LeanWithOffload,
    /// The lean schedule was asked for, but this build has the runtime's
    /// `no-lean` feature.
    LeanNotLinked,
    /// A constant image was given, but this build has the runtime's
    /// `no-constant-image` feature.
    ConstantImageNotLinked,
    /// The constant image does not start 8-byte aligned.
    ConstantImageMisaligned,
    /// The constant image is longer than the constants this model's
    /// prepare works out: it was made for another model.
    ConstantImageLonger {
        /// Bytes the model's constants take.
        used: u32,
        /// Bytes the image holds.
        image: u32,
    },
}

impl fmt::Display for InterpreterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InterpreterError::NotAllocated => f.write_str("allocate() has not succeeded"),
            InterpreterError::OffloadNotLinked => {
                f.write_str("an accelerator was set, but this build has the `no-offload` feature")
            }
            InterpreterError::UnsupportedOperator { op, code } => {
                write!(f, "operator {op} ({code}) is not supported")
            }
            InterpreterError::Kernel { op, code, error } => {
                write!(f, "operator {op} ({code}): {error}")
            }
            InterpreterError::ReadBeforeWrite { op, tensor } => write!(
                f,
                "operator {op} reads tensor {tensor}, which no earlier operator writes and which is not a model input"
            ),
            InterpreterError::Aliasing { op, tensor } => {
                write!(
                    f,
                    "operator {op} writes tensor {tensor}, which it also reads or writes elsewhere"
                )
            }
            InterpreterError::Alloc(e) => write!(f, "{e}"),
            InterpreterError::Canary(fault) => write!(f, "canary: {fault}"),
            InterpreterError::Accelerator { op, job, error } => {
                write!(f, "operator {op}, accelerator job {job}: {error}")
            }
            InterpreterError::NoSuchTensor { position } => {
                write!(f, "the model has no tensor at position {position}")
            }
            InterpreterError::LeanWithOffload => {
                f.write_str("the lean schedule does not run with an accelerator")
            }
            InterpreterError::LeanNotLinked => {
                f.write_str("no lean schedule in this build (no-lean)")
            }
            InterpreterError::ConstantImageNotLinked => {
                f.write_str("no constant image in this build (no-constant-image)")
            }
            InterpreterError::ConstantImageMisaligned => {
                f.write_str("the constant image does not start 8-byte aligned")
            }
            InterpreterError::ConstantImageLonger { used, image } => write!(
                f,
                "constant image of {image} bytes for {used} bytes of constants: made for another model"
            ),
        }
    }
}

impl core::error::Error for InterpreterError {}

impl From<AllocError> for InterpreterError {
    fn from(e: AllocError) -> Self {
        InterpreterError::Alloc(e)
    }
}

/// Op `index`'s code, for an error message.
pub(super) fn op_name(model: &Model<'_>, index: u32) -> OpName {
    model
        .operator(index)
        .map_or(OpName::UNREADABLE, |op| OpName::from(op.code))
}

impl From<JobFault> for InterpreterError {
    fn from(f: JobFault) -> Self {
        InterpreterError::Accelerator {
            op: f.op,
            job: f.job,
            error: f.error,
        }
    }
}
