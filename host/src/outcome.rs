//! What a board run produced: its outcome, per-step figures, the arena
//! plan the firmware committed and its logs. The gate, the reports and the
//! orchestrator read these; the session and the drivers fill them in.

use serde::Serialize;

/// The result of one step (one invocation's outputs).
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// Case name.
    pub case: String,
    /// Step index.
    pub step: usize,
    /// Cycles of the last invocation of this step.
    pub total_cycles: u64,
    /// Per-op cycles of the last invocation.
    pub op_cycles: Vec<u32>,
    /// `None` when every output matched, else what differed.
    pub mismatch: Option<String>,
}

/// How a board run ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "status", content = "message", rename_all = "snake_case")]
pub enum Outcome {
    /// Every output of every step matched.
    Passed,
    /// Ran, but some output differed.
    Mismatch(String),
    /// Could not run to the end (build, boot, timeout, crash, garbled link).
    Error(String),
}

/// Everything one (scenario, board) run produced.
#[derive(Debug, Clone, Serialize)]
pub struct BoardRun {
    /// Scenario name.
    pub scenario: String,
    /// Board name.
    pub board: String,
    /// Result.
    pub outcome: Outcome,
    /// Per-step results (kept even when a later step failed).
    pub steps: Vec<StepResult>,
    /// Arena figures reported by the firmware: capacity, head, tail, used.
    pub arena: Option<[u32; 4]>,
    /// Firmware log lines.
    pub logs: Vec<String>,
    /// The arena plan the firmware committed (offsets from the head).
    pub plan: Vec<PlannedBuffer>,
}

impl BoardRun {
    /// A run that has not produced anything yet (outcome: passed until
    /// something fails).
    pub fn new(scenario: &str, board: &str) -> Self {
        BoardRun {
            scenario: scenario.to_string(),
            board: board.to_string(),
            outcome: Outcome::Passed,
            steps: Vec::new(),
            arena: None,
            logs: Vec::new(),
            plan: Vec::new(),
        }
    }
}

/// One buffer of the firmware's plan, as the gate snapshots it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedBuffer {
    /// "tensor" or "scratch".
    pub kind: &'static str,
    /// Tensor index, or the requesting op for scratch.
    pub index: u16,
    /// First step.
    pub first_step: u16,
    /// Last step.
    pub last_step: u16,
    /// Requested bytes.
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head's start.
    pub offset: u32,
}
