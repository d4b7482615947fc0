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
    /// The last invocation's offload figures (offload runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<StepOffload>,
}

/// What the accelerator did in one invocation (`Offload` and `Jobs`),
/// scaled to the board's cycles like every other figure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepOffload {
    /// Jobs submitted.
    pub jobs: u16,
    /// CPU ops that ran while a job was in flight.
    pub overlapped: u16,
    /// Cycles the engine was busy (its latency model).
    pub busy: u64,
    /// Cycles the CPU spent blocked in waits.
    pub waited: u64,
    /// Cycles the firmware spent emulating the engine, already taken out
    /// of every figure (reported so a reader knows the figures are net).
    pub emulation: u64,
    /// Per op: whether the engine ran it.
    pub on_npu: Vec<bool>,
    /// Every job's times, from the invocation's start.
    pub job_times: Vec<JobSpan>,
}

impl StepOffload {
    /// Engine cycles the CPU did not wait for: the work the offload
    /// overlapped with the CPU's own (busy − waited, floored at 0).
    pub fn overlap(&self) -> u64 {
        self.busy.saturating_sub(self.waited)
    }
}

/// One job's times in an invocation, cycles from its start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobSpan {
    /// The operator it computed.
    pub op: u16,
    /// Submitted.
    pub submitted: u64,
    /// Completed by the engine.
    pub completed: u64,
    /// The CPU started waiting for it.
    pub wait_started: u64,
    /// The wait returned.
    pub retired: u64,
}

/// How a run offloaded: what the host asked the firmware for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffloadSetting {
    /// `coherent` or `non-coherent`.
    pub mode: &'static str,
    /// Ops the engine could claim.
    pub ops: Vec<String>,
    /// Latency model: cycles per job.
    pub job_cycles: u32,
    /// Latency model: cycles per thousand MACs.
    pub cycles_per_1000_macs: u32,
    /// The injected fault, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<&'static str>,
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
    /// The offload the run asked for (None: every op on the CPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadSetting>,
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
            offload: None,
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
