//! Interpreter failures as the host reads them: a `CanaryFault` with the
//! guard's address when a guard was hit, the error as a `Note` (its value;
//! the host writes the words), then the `Error` with its code and operator.

use embedded_io::Write;
use hilt_proto::{ErrorCode, Message};
use hilt_runtime::accel::AccelError;
use hilt_runtime::canary::{CanaryFault, GuardOwner};
use hilt_runtime::interpreter::InterpreterError;

use crate::link::{Link, WireError};
use crate::notes::Note;

/// No operator (an error of the whole model or of the arena).
const NO_OP: u16 = u16::MAX;

pub(crate) fn interpreter_error<W: Write>(
    link: &mut Link<'_, W>,
    e: InterpreterError,
) -> Result<(), WireError> {
    let (code, op) = match e {
        InterpreterError::Kernel { op, .. } | InterpreterError::UnsupportedOperator { op, .. } => {
            (ErrorCode::KERNEL, op as u16)
        }
        InterpreterError::Alloc(_) => (ErrorCode::ALLOCATE, NO_OP),
        InterpreterError::Accelerator { op, job, error } => {
            return accelerator_error(link, op, job, error);
        }
        InterpreterError::Canary(fault) => {
            canary_fault(link, &fault)?;
            (ErrorCode::CANARY, fault.op.map_or(NO_OP, |o| o as u16))
        }
        _ => (ErrorCode::UNSUPPORTED, NO_OP),
    };
    link.note(&Note::Interpreter(e))?;
    link.error(code, op, 0)
}

/// An offloaded op's job failed, or the engine saw a violation: a `Note`
/// of op, job and error, then an `ACCELERATOR` error with the op and the error's code
/// (which names the job and the region).
pub(crate) fn accelerator_error<W: Write>(
    link: &mut Link<'_, W>,
    op: u32,
    job: u32,
    error: AccelError,
) -> Result<(), WireError> {
    link.note(&Note::Accelerator { op, job, error })?;
    link.error(ErrorCode::ACCELERATOR, op as u16, error.code(job))
}

/// The guard that was hit, by owner (the protocol's numbering) and address.
fn canary_fault<W: Write>(link: &mut Link<'_, W>, fault: &CanaryFault) -> Result<(), WireError> {
    let (owner, index) = match fault.owner {
        GuardOwner::ArenaStart => (0, 0),
        GuardOwner::HeadEnd => (1, 0),
        GuardOwner::TailStart => (2, 0),
        GuardOwner::ArenaEnd => (3, 0),
        GuardOwner::Tensor(t) => (4, t),
        GuardOwner::Scratch(op) => (5, op),
    };
    link.send(&Message::CanaryFault {
        owner,
        index,
        address: link.arena_base + fault.offset,
        bytes_hit: fault.bytes_hit,
        op: fault.op.map_or(NO_OP, |o| o as u16),
    })
}
