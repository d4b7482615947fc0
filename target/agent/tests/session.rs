//! A session driven over an in-memory wire, as the host drives a board:
//! frames in, frames out, with a model written by the runtime's writer, a
//! fake counter and a fake timestamp pin.

use std::cell::Cell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::rc::Rc;

use hilt_agent::proto::{
    ErrorCode, FrameAccumulator, MAX_FRAME, Message, decode_frame, encode_frame,
};
use hilt_agent::runtime::allocation::AllocOptions;
use hilt_agent::runtime::canary::CanaryMode;
use hilt_agent::runtime::interpreter::Clock;
use hilt_agent::runtime::kernels::all_builtins;
use hilt_agent::runtime::planner::{Greedy, Linear, MemoryPlanner, PlanError};
use hilt_agent::runtime::request::BufferRequest;
use hilt_agent::runtime::writer::examples;
use hilt_agent::{
    Agent, Config, CycleCounter, Note, OfflineFromModel, Parts, PlannerKind, WireError, Workspace,
};

/// Both directions of a serial line, in memory: the test queues the
/// host's bytes in `rx` and reads the agent's from `tx`. An empty `rx` is
/// the end of the wire, so `poll` stops with `Closed`.
#[derive(Default)]
struct Pipe {
    rx: VecDeque<u8>,
    tx: Vec<u8>,
}

impl embedded_io::ErrorType for Pipe {
    type Error = Infallible;
}

impl embedded_io::Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        let n = buf.len().min(self.rx.len()).min(7); // odd sizes: frames split across reads
        for b in &mut buf[..n] {
            *b = self.rx.pop_front().unwrap();
        }
        Ok(n)
    }
}

impl embedded_io::ReadReady for Pipe {
    fn read_ready(&mut self) -> Result<bool, Infallible> {
        Ok(!self.rx.is_empty())
    }
}

impl embedded_io::Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        self.tx.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

/// Advances 100 per read; records whether the pin was high at each read.
#[derive(Clone, Default)]
struct FakeCounter {
    now: Rc<Cell<u64>>,
    restarts: Rc<Cell<u32>>,
    pin: Rc<Cell<bool>>,
    reads_with_pin_low: Rc<Cell<u32>>,
}

impl Clock for FakeCounter {
    fn now(&self) -> u64 {
        if !self.pin.get() {
            self.reads_with_pin_low
                .set(self.reads_with_pin_low.get() + 1);
        }
        self.now.set(self.now.get() + 100);
        self.now.get()
    }
}

impl CycleCounter for FakeCounter {
    fn source(&self) -> &'static str {
        "fake"
    }

    fn restart(&self) {
        self.restarts.set(self.restarts.get() + 1);
    }
}

struct FakePin(Rc<Cell<bool>>);

impl embedded_hal::digital::ErrorType for FakePin {
    type Error = Infallible;
}

impl embedded_hal::digital::OutputPin for FakePin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        self.0.set(false);
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Infallible> {
        self.0.set(true);
        Ok(())
    }
}

const CONFIG: Config = Config {
    board: "test-board",
    model_name: "model.tflite",
    model_hash: 0x1234_5678,
    clock_hz: 1_000_000,
    alloc: AllocOptions {
        align: 16,
        canary: CanaryMode::Bounds,
        ..AllocOptions::DEFAULT
    },
};

/// Model bytes 16-byte aligned, as in flash (kernels read constants in place).
fn aligned(bytes: &[u8]) -> Vec<u128> {
    let mut words = vec![0u128; bytes.len().div_ceil(16)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

fn frames(messages: &[Message<'_>]) -> VecDeque<u8> {
    let mut out = VecDeque::new();
    let mut buf = [0u8; MAX_FRAME];
    for m in messages {
        let n = encode_frame(m, &mut buf).unwrap();
        out.extend(&buf[..n]);
    }
    out
}

/// What the agent sent, one line per message (`Debug`, which names every
/// field; a note's words), so a test can match on the parts it cares about.
fn replies(tx: &[u8]) -> Vec<String> {
    let mut acc = FrameAccumulator::default();
    let mut scratch = [0u8; MAX_FRAME];
    let mut out = Vec::new();
    for &b in tx {
        if let Some(frame) = acc.push(b) {
            let m = decode_frame(frame.unwrap(), &mut scratch).unwrap();
            out.push(match m {
                // A note as the host reads it: its words.
                Message::Note { kind, body } => {
                    let mut intern = |t: &str| -> &'static str { Box::leak(t.into()) };
                    let note = Note::read(kind, body, &mut intern).expect("a readable note");
                    format!("Note({:?})", note.to_string())
                }
                m => format!("{m:?}"),
            });
        }
    }
    out
}

/// The planner a test session uses.
enum Choice<P> {
    Builtin(PlannerKind),
    Custom(P),
    /// Greedy named as a type (links it alone).
    GreedyType,
    /// The model's own plan, named as a type.
    OfflineType,
}

/// Runs `requests` through a fresh session on `model` and returns the
/// replies (start-up log included).
fn serve<P: MemoryPlanner>(
    model: &[u8],
    arena_bytes: usize,
    planner: Choice<P>,
    requests: &[Message<'_>],
    counter: FakeCounter,
) -> Vec<String> {
    let model = aligned(model);
    let model_len = model.len() * 16;
    let mut arena = vec![0u128; arena_bytes / 16];
    let mut workspace = Box::new(Workspace::new());
    let resolver = all_builtins();
    let pin = FakePin(counter.pin.clone());
    let parts = Parts {
        model: &bytemuck::cast_slice(&model)[..model_len],
        constants: &[],
        arena: bytemuck::cast_slice_mut(&mut arena),
        workspace: &mut workspace,
    };
    let wire = Pipe {
        rx: frames(requests),
        tx: Vec::new(),
    };
    let agent = Agent::new(CONFIG, wire, counter).timestamp_pin(pin);
    let tx = match planner {
        Choice::Builtin(p) => {
            let mut session = agent.planner(p).start(parts, &resolver).unwrap();
            assert_eq!(session.run(), WireError::Closed);
            std::mem::take(&mut session.wire().tx)
        }
        Choice::Custom(p) => {
            let mut session = agent.custom_planner(p).start(parts, &resolver).unwrap();
            assert_eq!(session.run(), WireError::Closed);
            std::mem::take(&mut session.wire().tx)
        }
        Choice::GreedyType => {
            let mut session = agent.planner(Greedy).start(parts, &resolver).unwrap();
            assert_eq!(session.run(), WireError::Closed);
            std::mem::take(&mut session.wire().tx)
        }
        Choice::OfflineType => {
            let mut session = agent
                .planner(OfflineFromModel)
                .start(parts, &resolver)
                .unwrap();
            assert_eq!(session.run(), WireError::Closed);
            std::mem::take(&mut session.wire().tx)
        }
    };
    replies(&tx)
}

fn greedy() -> Choice<Shifted> {
    Choice::Builtin(PlannerKind::Greedy)
}

fn count(replies: &[String], prefix: &str) -> usize {
    replies.iter().filter(|r| r.starts_with(prefix)).count()
}

#[test]
fn hello_names_the_board_model_and_guards() {
    let r = serve(
        &examples::reshape_int8(),
        4096,
        greedy(),
        &[Message::HelloRequest],
        FakeCounter::default(),
    );
    assert!(
        r[0].starts_with("Note(\"hilt firmware: board test-board, model model.tflite"),
        "{r:?}"
    );
    assert!(r[0].contains("arena 4096 bytes, cycles from fake"), "{r:?}");
    assert!(r[1].starts_with("Hello(Hello { protocol: 3, firmware: [0, 1, 0], board: \"test-board\", model_hash: 305419896, arena_size: 4096, inputs: 1, outputs: 1, clock_hz: 1000000 })"), "{r:?}");
    assert!(r[2].starts_with("Guards { mode: 1, len: 16"), "{r:?}");
    assert_eq!(r.len(), 3, "{r:?}");
}

#[test]
fn load_invoke_and_results_with_the_pin_high_while_timing() {
    let input: Vec<u8> = (0..64).collect();
    let counter = FakeCounter::default();
    let r = serve(
        &examples::reshape_int8(),
        4096,
        greedy(),
        &[
            Message::HelloRequest,
            Message::LoadInput {
                input: 0,
                offset: 0,
                chunk: &input[..40],
            },
            Message::LoadInput {
                input: 0,
                offset: 40,
                chunk: &input[40..],
            },
            Message::Invoke {
                count: 2,
                per_op: true,
            },
            Message::PlanRequest,
            Message::ResetState,
        ],
        counter.clone(),
    );
    let after_hello = &r[3..];
    assert_eq!(after_hello[0], "InputAck { input: 0, received: 40 }");
    assert_eq!(after_hello[1], "InputAck { input: 0, received: 64 }");
    // One op: the invoke reads the counter at start, before and after the
    // op, and at the end: 300 counts between the first and last read.
    assert_eq!(
        after_hello[2],
        "Timing { invocation: 1, total_cycles: 300, ops: 1 }"
    );
    assert_eq!(
        after_hello[3],
        "Timing { invocation: 2, total_cycles: 300, ops: 1 }"
    );
    assert!(
        after_hello[4].starts_with("OpCycles { first_op: 0"),
        "{r:?}"
    );
    let output = format!("chunk: {input:?}");
    assert!(
        after_hello[5].starts_with("OutputChunk { output: 0, offset: 0, total: 64")
            && after_hello[5].contains(&output),
        "{r:?}"
    );
    assert!(
        after_hello[6].starts_with("ArenaUsage { capacity: 4096"),
        "{r:?}"
    );
    assert_eq!(after_hello[7], "Done { request: 3 }");
    assert!(
        after_hello[8].starts_with("PlanEntries { first: 0, total: 2"),
        "{r:?}"
    );
    assert_eq!(after_hello[9], "Done { request: 4 }");
    assert_eq!(after_hello[10], "Done { request: 5 }");
    assert_eq!(after_hello.len(), 11, "{r:?}");
    // Restarted before each timed invoke, every read with the pin high,
    // and the pin low again after the last.
    assert_eq!(counter.restarts.get(), 2);
    assert_eq!(counter.reads_with_pin_low.get(), 0);
    assert!(!counter.pin.get());
}

#[test]
fn a_many_op_model_reports_every_op_and_runs_with_the_linear_planner() {
    let image: Vec<u8> = (0..16 * 16 * 3).map(|i| (i % 251) as u8).collect();
    let r = serve(
        &examples::tiny_convnet_int8(),
        64 * 1024,
        Choice::<Shifted>::Builtin(PlannerKind::Linear),
        &[
            Message::LoadInput {
                input: 0,
                offset: 0,
                chunk: &image,
            },
            Message::Invoke {
                count: 1,
                per_op: true,
            },
        ],
        FakeCounter::default(),
    );
    assert_eq!(r[1], "InputAck { input: 0, received: 768 }");
    // 8 ops, the counter read before and after each, then the invoke's end.
    assert_eq!(r[2], "Timing { invocation: 1, total_cycles: 1700, ops: 8 }");
    assert!(r[3].starts_with("OpCycles { first_op: 0"), "{r:?}");
    assert!(count(&r, "OutputChunk") == 1, "{r:?}");
    assert_eq!(r.last().unwrap(), "Done { request: 3 }");
}

#[test]
fn bad_requests_are_answered_with_typed_errors_and_the_session_goes_on() {
    let mut damaged: Vec<u8> = frames(&[Message::HelloRequest]).into();
    damaged[1] ^= 0x40;
    let mut requests = frames(&[
        Message::LoadInput {
            input: 0,
            offset: 60,
            chunk: &[0; 8],
        },
        Message::LoadInput {
            input: 3,
            offset: 0,
            chunk: &[0; 1],
        },
    ]);
    requests.extend(damaged);
    requests.extend(frames(&[
        Message::Done { request: 1 },
        Message::HelloRequest,
    ]));
    let model = aligned(&examples::reshape_int8());
    let mut arena = vec![0u128; 256];
    let mut workspace = Box::new(Workspace::new());
    let resolver = all_builtins();
    let parts = Parts {
        model: bytemuck::cast_slice(&model),
        constants: &[],
        arena: bytemuck::cast_slice_mut(&mut arena),
        workspace: &mut workspace,
    };
    let wire = Pipe {
        rx: requests,
        tx: Vec::new(),
    };
    let mut session = Agent::new(CONFIG, wire, FakeCounter::default())
        .start(parts, &resolver)
        .unwrap();
    assert_eq!(session.run(), WireError::Closed);
    let r = replies(&session.wire().tx);
    let bad_input = format!("code: ErrorCode({})", ErrorCode::BAD_INPUT.0);
    assert!(
        r[1].contains(&bad_input) && r[1].contains("detail: 0"),
        "{r:?}"
    );
    assert!(
        r[2].contains(&bad_input) && r[2].contains("detail: 3"),
        "{r:?}"
    );
    let bad_frame = format!("code: ErrorCode({})", ErrorCode::BAD_FRAME.0);
    assert!(r[3].contains(&bad_frame), "{r:?}");
    // A message the target never receives (Done goes host-ward): unsupported.
    let unsupported = format!("code: ErrorCode({})", ErrorCode::UNSUPPORTED.0);
    assert!(r[4].contains(&unsupported), "{r:?}");
    assert!(r[5].starts_with("Hello("), "{r:?}");
}

#[test]
fn a_corrupt_model_is_reported_in_the_log_and_after_every_hello() {
    let mut bytes = examples::reshape_int8();
    bytes.truncate(bytes.len() / 2);
    let r = serve(
        &bytes,
        4096,
        greedy(),
        &[
            Message::HelloRequest,
            Message::Invoke {
                count: 1,
                per_op: true,
            },
        ],
        FakeCounter::default(),
    );
    assert!(r[1].starts_with("Note(\"model: "), "{r:?}");
    assert!(r[2].contains("inputs: 0, outputs: 0"), "{r:?}");
    let model = format!("code: ErrorCode({})", ErrorCode::MODEL.0);
    assert!(r[3].contains(&model), "{r:?}");
    // Nothing runs: the invoke is refused, naming its tag.
    let unsupported = format!("code: ErrorCode({})", ErrorCode::UNSUPPORTED.0);
    assert!(
        r[4].contains(&unsupported) && r[4].contains("detail: 3"),
        "{r:?}"
    );
}

#[test]
fn an_arena_too_small_and_a_missing_offline_plan_are_allocation_errors() {
    let allocate = format!("code: ErrorCode({})", ErrorCode::ALLOCATE.0);
    let small = serve(
        &examples::reshape_int8(),
        64,
        greedy(),
        &[Message::HelloRequest],
        FakeCounter::default(),
    );
    assert!(
        small[1].starts_with("Note(\"") && small[2].contains(&allocate),
        "{small:?}"
    );
    assert!(small.last().unwrap().contains(&allocate), "{small:?}");
    let offline = serve(
        &examples::reshape_int8(),
        4096,
        Choice::<Shifted>::Builtin(PlannerKind::Offline),
        &[Message::HelloRequest],
        FakeCounter::default(),
    );
    assert_eq!(
        offline[1],
        "Note(\"planner offline: the model has no `OfflineMemoryAllocation` metadata\")"
    );
    assert!(offline.last().unwrap().contains(&allocate), "{offline:?}");
    // The same planner named as a type (what a firmware built for one
    // planner holds) fails the same way.
    let typed = serve(
        &examples::reshape_int8(),
        4096,
        Choice::<Shifted>::OfflineType,
        &[Message::HelloRequest],
        FakeCounter::default(),
    );
    assert_eq!(typed, offline);
}

#[test]
fn a_planner_named_as_a_type_plans_as_its_kind_does() {
    let requests = [Message::HelloRequest, Message::PlanRequest];
    let by_kind = serve(
        &examples::tiny_convnet_int8(),
        8192,
        greedy(),
        &requests,
        FakeCounter::default(),
    );
    let by_type = serve(
        &examples::tiny_convnet_int8(),
        8192,
        Choice::<Shifted>::GreedyType,
        &requests,
        FakeCounter::default(),
    );
    assert!(count(&by_kind, "PlanEntries") > 0, "{by_kind:?}");
    // The guards' addresses are the host's (each run's own arena).
    let placed = |r: Vec<String>| -> Vec<String> {
        r.into_iter().filter(|l| !l.starts_with("Guards")).collect()
    };
    assert_eq!(placed(by_type), placed(by_kind));
}

/// A user's own planner: linear, with every buffer one alignment step
/// further on (to see its offsets come back in the plan).
struct Shifted;

impl MemoryPlanner for Shifted {
    fn name(&self) -> &'static str {
        "shifted"
    }

    fn workspace_words(&self, count: usize) -> usize {
        Linear.workspace_words(count)
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        let head = Linear.plan(requests, workspace, offsets)?;
        for (o, r) in offsets.iter_mut().zip(requests) {
            *o += r.align;
        }
        Ok(head + requests.iter().map(|r| r.align).max().unwrap_or(0))
    }
}

#[test]
fn a_custom_planner_places_the_buffers() {
    let r = serve(
        &examples::reshape_int8(),
        4096,
        Choice::Custom(Shifted),
        &[Message::PlanRequest],
        FakeCounter::default(),
    );
    assert!(
        r[1].starts_with("PlanEntries { first: 0, total: 2"),
        "{r:?}"
    );
    assert_eq!(r[2], "Done { request: 4 }");
}

#[test]
fn poll_ready_returns_at_once_when_nothing_has_arrived() {
    let model = aligned(&examples::reshape_int8());
    let mut arena = vec![0u128; 256];
    let mut workspace = Box::new(Workspace::new());
    let resolver = all_builtins();
    let parts = Parts {
        model: bytemuck::cast_slice(&model),
        constants: &[],
        arena: bytemuck::cast_slice_mut(&mut arena),
        workspace: &mut workspace,
    };
    let mut session = Agent::new(CONFIG, Pipe::default(), FakeCounter::default())
        .start(parts, &resolver)
        .unwrap();
    assert_eq!(session.poll_ready(), Ok(false));
    session.wire().rx = frames(&[Message::HelloRequest]);
    // The pipe hands over 7 bytes a read: a few polls complete the frame.
    while session.poll_ready() == Ok(true) {}
    let r = replies(&session.wire().tx);
    assert!(r.last().unwrap().starts_with("Guards {"), "{r:?}");
    assert!(r.iter().any(|m| m.starts_with("Hello(")), "{r:?}");
}
