//! The small codes messages carry: what went wrong on the target, how the
//! firmware's virtual NPU sees memory, and which offload fault to inject.
//!
//! Apart from the records and the messages because both ends match on
//! these values (the host's CLI flags, the firmware's error paths) without
//! caring how a message lays them out.

/// What went wrong on the target, as a code the host can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ErrorCode(pub u16);

impl ErrorCode {
    /// A frame from the host could not be decoded.
    pub const BAD_FRAME: ErrorCode = ErrorCode(1);
    /// A request the firmware does not serve.
    pub const UNSUPPORTED: ErrorCode = ErrorCode(2);
    /// An input index or offset out of range.
    pub const BAD_INPUT: ErrorCode = ErrorCode(3);
    /// The model failed verification.
    pub const MODEL: ErrorCode = ErrorCode(4);
    /// Allocation failed (arena too small, plan invalid).
    pub const ALLOCATE: ErrorCode = ErrorCode(5);
    /// A kernel failed (`op` names the operator).
    pub const KERNEL: ErrorCode = ErrorCode(6);
    /// An arena guard band was damaged.
    pub const CANARY: ErrorCode = ErrorCode(7);
    /// An offloaded op's job failed (`op` names the operator; `detail` is
    /// the runtime's `AccelError` code, see `hilt_runtime::accel`).
    pub const ACCELERATOR: ErrorCode = ErrorCode(8);
}

/// What a [`Message::Note`](super::Message::Note) says: the kind picks the
/// sentence, the body holds its values in `hilt_runtime::wire_form`'s form,
/// and the host writes the words. A firmware so links no text for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NoteKind(pub u8);

impl NoteKind {
    /// The firmware is up: board and model name, model bytes, arena bytes,
    /// where its cycles come from (three texts and two `u32`s).
    pub const START: NoteKind = NoteKind(1);
    /// The interpreter failed: an `InterpreterError`.
    pub const INTERPRETER: NoteKind = NoteKind(2);
    /// An offloaded op's job failed: the op and job (`u32`s), then an
    /// `AccelError`.
    pub const ACCELERATOR: NoteKind = NoteKind(3);
    /// The model failed verification: a `ModelError`.
    pub const MODEL: NoteKind = NoteKind(4);
    /// The planner failed: its name (a text), then a `PlanError`.
    pub const PLANNER: NoteKind = NoteKind(5);
    /// An offload fault was asked for that the firmware cannot inject: the
    /// fault's byte.
    pub const FAULT_NOT_ARMED: NoteKind = NoteKind(6);
}

/// How the firmware's virtual NPU sees memory ([`Message::SetOffload`](super::Message::SetOffload)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OffloadMode {
    /// No offload: every op on the CPU (the default after reset).
    Off = 0,
    /// Offload to vnpu, memory coherent between CPU and engine.
    Coherent = 1,
    /// Offload to vnpu behind a modelled data cache: the engine sees only
    /// what the CPU cleaned, the CPU its writes only once invalidated.
    NonCoherent = 2,
}

impl OffloadMode {
    /// From its wire byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(OffloadMode::Off),
            1 => Some(OffloadMode::Coherent),
            2 => Some(OffloadMode::NonCoherent),
            _ => None,
        }
    }
}

/// Faults a firmware with the `accel` fault armed injects into its offload path, by the
/// byte [`Message::SetOffload`](super::Message::SetOffload) carries: each is a bug a real NPU
/// integration has, and each must be caught and named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AccelFault {
    /// No fault.
    None = 0,
    /// The schedule never waits a job before a CPU op reads its output.
    SkipWait = 1,
    /// The planner drops the holds (buffers freed before the job's wait).
    DropHolds = 2,
    /// A job's output region is given at an address off its alignment.
    Misaligned = 3,
    /// The engine's window excludes the arena's head.
    OutsideWindow = 4,
    /// A job marks its output read-only.
    WriteReadOnly = 5,
    /// The CPU does not clean a job's inputs before submit.
    MissingClean = 6,
    /// The CPU does not invalidate a job's outputs after its wait.
    MissingInvalidate = 7,
    /// The engine never completes a job.
    NeverCompletes = 8,
    /// The engine fails every job with an error of its own.
    EngineError = 9,
    /// The engine reads one byte past a job's first input (only an access
    /// check sees it: the QEMU plugin's on a virtual board).
    OverRead = 10,
}

impl AccelFault {
    /// Every fault, in wire order.
    pub const ALL: [AccelFault; 11] = [
        AccelFault::None,
        AccelFault::SkipWait,
        AccelFault::DropHolds,
        AccelFault::Misaligned,
        AccelFault::OutsideWindow,
        AccelFault::WriteReadOnly,
        AccelFault::MissingClean,
        AccelFault::MissingInvalidate,
        AccelFault::NeverCompletes,
        AccelFault::EngineError,
        AccelFault::OverRead,
    ];

    /// From its wire byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// Its name, as the host's `--accel-fault` flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            AccelFault::None => "none",
            AccelFault::SkipWait => "skip-wait",
            AccelFault::DropHolds => "drop-holds",
            AccelFault::Misaligned => "misaligned",
            AccelFault::OutsideWindow => "outside-window",
            AccelFault::WriteReadOnly => "write-read-only",
            AccelFault::MissingClean => "missing-clean",
            AccelFault::MissingInvalidate => "missing-invalidate",
            AccelFault::NeverCompletes => "never-completes",
            AccelFault::EngineError => "engine-error",
            AccelFault::OverRead => "over-read",
        }
    }
}

/// A typed error from the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TargetError {
    /// What kind.
    pub code: ErrorCode,
    /// The operator involved, or `u16::MAX`.
    pub op: u16,
    /// Code-specific detail (a sub-code, an address, a byte count).
    pub detail: u32,
}
