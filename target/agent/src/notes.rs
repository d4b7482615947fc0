//! What the agent tells the host in sentences: each [`Note`] goes out as
//! its kind and its values (a `Message::Note`), and the host reads it back
//! ([`Note::read`]) and writes its words ([`Note`]'s `Display`). The words
//! live here, beside the values, but only the host formats them: a
//! firmware links neither the text nor `core::fmt`.

use core::fmt;

use hilt_proto::NoteKind;
use hilt_runtime::accel::AccelError;
use hilt_runtime::interpreter::InterpreterError;
use hilt_runtime::model::ModelError;
use hilt_runtime::planner::OfflinePlanError;
use hilt_runtime::wire_form::{FormReader, FormWriter, WireForm};

/// A sentence the agent sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Note {
    /// The firmware is up.
    Start {
        /// Its board's name.
        board: &'static str,
        /// The model's name.
        model: &'static str,
        /// The model's bytes.
        model_bytes: u32,
        /// The arena's bytes.
        arena_bytes: u32,
        /// Where its cycle counts come from.
        cycles_from: &'static str,
    },
    /// The interpreter failed.
    Interpreter(InterpreterError),
    /// An offloaded op's job failed, or the engine saw a violation.
    Accelerator {
        /// The op.
        op: u32,
        /// The backend's job id.
        job: u32,
        /// What went wrong.
        error: AccelError,
    },
    /// The model failed verification.
    Model(ModelError),
    /// The planner failed (only the model's own plan can).
    Planner {
        /// Its name.
        name: &'static str,
        /// Why.
        error: OfflinePlanError,
    },
    /// An offload fault was asked for that this firmware cannot inject.
    FaultNotArmed {
        /// The fault's byte.
        fault: u8,
    },
}

impl Note {
    /// The kind the message carries.
    pub fn kind(&self) -> NoteKind {
        match self {
            Note::Start { .. } => NoteKind::START,
            Note::Interpreter(_) => NoteKind::INTERPRETER,
            Note::Accelerator { .. } => NoteKind::ACCELERATOR,
            Note::Model(_) => NoteKind::MODEL,
            Note::Planner { .. } => NoteKind::PLANNER,
            Note::FaultNotArmed { .. } => NoteKind::FAULT_NOT_ARMED,
        }
    }

    /// Writes the note's values (its body).
    pub fn put(&self, w: &mut FormWriter<'_>) {
        match self {
            Note::Start {
                board,
                model,
                model_bytes,
                arena_bytes,
                cycles_from,
            } => {
                board.put(w);
                model.put(w);
                model_bytes.put(w);
                arena_bytes.put(w);
                cycles_from.put(w);
            }
            Note::Interpreter(e) => e.put(w),
            Note::Accelerator { op, job, error } => {
                op.put(w);
                job.put(w);
                error.put(w);
            }
            Note::Model(e) => e.put(w),
            Note::Planner { name, error } => {
                name.put(w);
                error.put(w);
            }
            Note::FaultNotArmed { fault } => fault.put(w),
        }
    }

    /// The note a message carried; `None` for a kind this agent does not
    /// send, or a body that is not exactly that kind's values. `intern`
    /// keeps the note's texts (see [`FormReader`]).
    pub fn read(
        kind: NoteKind,
        body: &[u8],
        intern: &mut dyn FnMut(&str) -> &'static str,
    ) -> Option<Note> {
        let r = &mut FormReader::new(body, intern);
        let note = match kind {
            NoteKind::START => Note::Start {
                board: WireForm::take(r)?,
                model: WireForm::take(r)?,
                model_bytes: WireForm::take(r)?,
                arena_bytes: WireForm::take(r)?,
                cycles_from: WireForm::take(r)?,
            },
            NoteKind::INTERPRETER => Note::Interpreter(WireForm::take(r)?),
            NoteKind::ACCELERATOR => Note::Accelerator {
                op: WireForm::take(r)?,
                job: WireForm::take(r)?,
                error: WireForm::take(r)?,
            },
            NoteKind::MODEL => Note::Model(WireForm::take(r)?),
            NoteKind::PLANNER => Note::Planner {
                name: WireForm::take(r)?,
                error: WireForm::take(r)?,
            },
            NoteKind::FAULT_NOT_ARMED => Note::FaultNotArmed {
                fault: WireForm::take(r)?,
            },
            _ => return None,
        };
        r.is_empty().then_some(note)
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Start {
                board,
                model,
                model_bytes,
                arena_bytes,
                cycles_from,
            } => write!(
                f,
                "hilt firmware: board {board}, model {model} ({model_bytes} bytes), arena {arena_bytes} bytes, cycles from {cycles_from}"
            ),
            Note::Interpreter(e) => write!(f, "{e}"),
            Note::Accelerator { op, job, error } => write!(f, "op {op}, job {job}: {error}"),
            Note::Model(e) => write!(f, "model: {e}"),
            Note::Planner { name, error } => write!(f, "planner {name}: {error}"),
            Note::FaultNotArmed { fault } => write!(
                f,
                "offload fault {fault}: this firmware was not built with `fault-injection` and the `accel` fault armed"
            ),
        }
    }
}
