//! The link and the session logic over a scripted serial-like wire: what a
//! serial line does to the protocol (noise before the first frame, a lost
//! first request, answers to a repeated request arriving late, a frame
//! damaged mid-session, a wire that takes a few bytes at a time) and what
//! the host must make of it. No QEMU: a fake firmware answers in-process.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use hilt::cancel::KillSwitch;
use hilt::link::{Link, LinkError, Wire};
use hilt::memory::TargetMemory;
use hilt::outcome::BoardRun;
use hilt::session::run_session;
use hilt_proto::message::Cycles;
use hilt_proto::{
    AccelFault, EngineLedger, ErrorCode, FrameAccumulator, Hello, JobList, JobTimes, MAX_FRAME,
    Message, OffloadMode, PROTOCOL_VERSION, TargetError, encode_frame,
};

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn frame(message: &Message<'_>) -> Vec<u8> {
    let mut out = vec![0u8; MAX_FRAME];
    let n = encode_frame(message, &mut out).unwrap();
    out.truncate(n);
    out
}

/// Bytes in, bytes out: `incoming` is what the "target" has sent, handed
/// over `per_transfer` bytes at a time; `sent` is everything the host wrote,
/// taken `per_transfer` bytes at a time.
#[derive(Default)]
struct ScriptedWire {
    incoming: VecDeque<u8>,
    sent: Vec<u8>,
    per_transfer: usize,
    /// How many times the host looked at the wire.
    looks: usize,
}

impl Wire for ScriptedWire {
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        _log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        self.looks += 1;
        let n = out.len().min(self.per_transfer);
        self.sent.extend_from_slice(&out[..n]);
        for _ in 0..self.per_transfer {
            match self.incoming.pop_front() {
                Some(b) => incoming.push(b),
                None => break,
            }
        }
        Ok(n)
    }

    fn memory(&mut self) -> Option<&mut dyn TargetMemory> {
        None
    }
}

fn wire(incoming: Vec<u8>, per_transfer: usize) -> ScriptedWire {
    ScriptedWire {
        incoming: incoming.into(),
        sent: Vec::new(),
        per_transfer,
        looks: 0,
    }
}

fn ack(received: u32) -> Vec<u8> {
    frame(&Message::InputAck { input: 0, received })
}

fn received(link: &mut Link<'_>) -> Result<u32, LinkError> {
    link.recv(Duration::from_millis(200), "InputAck", |m| match m {
        Message::InputAck { received, .. } => *received,
        other => panic!("unexpected {other:?}"),
    })
}

#[test]
fn noise_before_the_first_frame_is_dropped() {
    // Boot chatter, half a frame from before the port was opened, then a
    // real frame.
    let mut bytes = b"\r\nboot v1.2 ".to_vec();
    bytes.extend_from_slice(&ack(7)[3..]);
    bytes.extend_from_slice(&ack(42));
    let mut link = Link::over(Box::new(wire(bytes, 5)));
    assert_eq!(received(&mut link).unwrap(), 42);
    assert!(link.noise > 0);
}

#[test]
fn a_damaged_frame_after_the_first_good_one_is_an_error() {
    let mut bytes = ack(1);
    let mut bad = ack(2);
    bad[3] ^= 0x10;
    bytes.extend_from_slice(&bad);
    let mut link = Link::over(Box::new(wire(bytes, 64)));
    assert_eq!(received(&mut link).unwrap(), 1);
    let err = received(&mut link).unwrap_err();
    assert!(
        err.to_string().starts_with("garbled frame from the target"),
        "{err}"
    );
}

#[test]
fn a_wire_that_takes_three_bytes_at_a_time_gets_the_whole_frame() {
    let chunk = [7u8; 100];
    let message = Message::LoadInput {
        input: 0,
        offset: 0,
        chunk: &chunk,
    };
    let mut w = wire(Vec::new(), 3);
    {
        let mut link = Link::over(Box::new(&mut w));
        link.send(&message, Duration::from_secs(1)).unwrap();
    }
    assert_eq!(w.sent, frame(&message));
}

#[test]
fn a_fired_kill_switch_ends_a_wait_at_once() {
    let kill = KillSwitch::default();
    let mut link = Link::over(Box::new(wire(Vec::new(), 8)));
    link.cancel_with(kill.clone());
    kill.fire();
    let started = Instant::now();
    let err = link
        .recv(Duration::from_secs(30), "Hello", |_| ())
        .unwrap_err();
    assert!(matches!(err, LinkError::Cancelled(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_idle_wire_is_looked_at_less_and_less_often() {
    // Every look at an RTT wire halts the core, so through a long silence
    // the host backs off from `poll_interval` (1 ms) to MAX_IDLE_POLL
    // (16 ms): 1 + 2 + 4 + 8 ms, then one look per 16 ms. Looking every
    // millisecond would take about 300 looks to time out here.
    let mut w = wire(Vec::new(), 8);
    {
        let mut link = Link::over(Box::new(&mut w));
        let err = link
            .recv(Duration::from_millis(300), "Hello", |_| ())
            .unwrap_err();
        assert!(matches!(err, LinkError::Timeout { .. }), "{err:?}");
    }
    let most = 4 + 300 / hilt::link::MAX_IDLE_POLL.as_millis() as usize + 2;
    assert!((2..=most).contains(&w.looks), "{} looks in 300 ms", w.looks);
}

#[test]
fn bytes_arriving_after_a_silence_are_taken_at_once() {
    // A frame that trickles in 3 bytes per look: once bytes flow again the
    // wait drops back to `poll_interval`, so a 100-byte frame (34 looks)
    // arrives well inside a timeout that 34 looks at 16 ms would miss.
    let chunk = [7u8; 90];
    let bytes = frame(&Message::LoadInput {
        input: 0,
        offset: 0,
        chunk: &chunk,
    });
    let looks_needed = bytes.len().div_ceil(3);
    let mut link = Link::over(Box::new(wire(bytes, 3)));
    let timeout = hilt::link::MAX_IDLE_POLL * (looks_needed as u32) / 2;
    let got = link.recv(timeout, "LoadInput", |m| match m {
        Message::LoadInput { chunk, .. } => chunk.len(),
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(got.unwrap(), 90);
}

#[test]
fn no_memory_over_a_bare_serial_line() {
    let mut link = Link::over(Box::new(wire(Vec::new(), 8)));
    assert!(link.read_memory(0x2000_0000, 16).unwrap().is_none());
}

/// A firmware for the smoke scenario (a RESHAPE: output = input), answering
/// requests as they arrive; it ignores the first `lose` Hello requests (a
/// line not yet up) and answers the next one only after `late` more
/// requests have come (a slow boot: both answers then arrive).
struct FakeFirmware {
    board: String,
    model_hash: u32,
    accumulator: FrameAccumulator,
    out: VecDeque<u8>,
    input: Vec<u8>,
    lose: usize,
    late: bool,
    held: Vec<u8>,
    hellos: usize,
    resets: usize,
    /// Every request's tag, in arrival order (after the Hellos).
    requests: Vec<&'static str>,
    /// The `SetOffload` requests received: mode, fault, latency, ops.
    offloads: Vec<(OffloadMode, u8, u32, u32, Vec<u8>)>,
    /// Each SetOffload's driver model (cycles per submit, per line).
    drivers: Vec<(u32, u32)>,
    /// The answer to `SetOffload` (None: `Done`).
    refuse_offload: Option<TargetError>,
    /// An error instead of the invoke's results.
    fail_invoke: Option<TargetError>,
}

impl FakeFirmware {
    fn say_hello(&mut self) {
        let mut say = |m: Message<'_>| self.out.extend(frame(&m));
        say(Message::Log("fake firmware up"));
        say(Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            firmware: [0, 1, 0],
            board: &self.board,
            model_hash: self.model_hash,
            arena_size: 1024,
            inputs: 1,
            outputs: 1,
            clock_hz: 25_000_000,
        }));
        say(Message::Guards {
            mode: 0,
            len: 16,
            addresses: [0; 4],
        });
    }

    fn answer(&mut self, message: &Message<'_>) {
        let mut say = |m: Message<'_>| self.out.extend(frame(&m));
        match message {
            Message::HelloRequest => {
                self.hellos += 1;
                if self.hellos <= self.lose {
                    return;
                }
                if self.late && self.hellos == 1 {
                    // Answered, but held back until the next request.
                    let before = self.out.len();
                    self.say_hello();
                    self.held = self.out.drain(before..).collect();
                    return;
                }
                self.out.extend(std::mem::take(&mut self.held));
                self.say_hello();
            }
            Message::SetOffload {
                mode,
                fault,
                job_cycles,
                cycles_per_1000_macs,
                driver_submit_cycles,
                driver_cycles_per_line,
                ops,
                ..
            } => {
                self.requests.push("SetOffload");
                self.drivers
                    .push((*driver_submit_cycles, *driver_cycles_per_line));
                self.offloads.push((
                    *mode,
                    *fault,
                    *job_cycles,
                    *cycles_per_1000_macs,
                    ops.to_vec(),
                ));
                match self.refuse_offload {
                    Some(e) => say(Message::Error(e)),
                    None => say(Message::Done { request: 0x06 }),
                }
            }
            Message::ResetState => {
                self.requests.push("ResetState");
                self.resets += 1;
                say(Message::Done { request: 0x05 });
            }
            Message::LoadInput { offset, chunk, .. } => {
                self.requests.push("LoadInput");
                let end = *offset as usize + chunk.len();
                if self.input.len() < end {
                    self.input.resize(end, 0);
                }
                self.input[*offset as usize..end].copy_from_slice(chunk);
                say(Message::InputAck {
                    input: 0,
                    received: end as u32,
                });
            }
            Message::Invoke { .. } => {
                if let Some(e) = self.fail_invoke {
                    say(Message::Error(e));
                    return;
                }
                let input = self.input.clone();
                let offloading = self
                    .offloads
                    .last()
                    .is_some_and(|o| o.0 != OffloadMode::Off);
                let mut say = |m: Message<'_>| self.out.extend(frame(&m));
                say(Message::Timing {
                    invocation: 1,
                    total_cycles: 20,
                    ops: 1,
                });
                if offloading {
                    let mut buf = [0u8; 64];
                    let cycles = Cycles::encode_into(&[12], &mut buf).unwrap();
                    say(Message::OpCycles {
                        first_op: 0,
                        cycles,
                    });
                    say(Message::Offload {
                        jobs: 1,
                        overlapped: 0,
                        busy: 5,
                        waited: 3,
                        ledger: EngineLedger {
                            engine: 4,
                            shadow: 2,
                            oversleep: 1,
                            driver_submit: 3,
                            driver_cache: 5,
                        },
                        placement: &[1],
                    });
                    let job = JobTimes {
                        op: 0,
                        submitted: 1,
                        completed: 6,
                        wait_started: 2,
                        retired: 6,
                    };
                    let mut buf = [0u8; 64];
                    let jobs = JobList::encode_into(&[job], &mut buf).unwrap();
                    say(Message::Jobs {
                        first: 0,
                        total: 1,
                        jobs,
                    });
                }
                say(Message::OutputChunk {
                    output: 0,
                    offset: 0,
                    total: input.len() as u32,
                    chunk: &input,
                });
                say(Message::Done { request: 0x03 });
            }
            Message::PlanRequest => say(Message::Done { request: 0x04 }),
            other => panic!("fake firmware got {other:?}"),
        }
    }
}

impl Wire for FakeFirmware {
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        _log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        let mut scratch = vec![0u8; MAX_FRAME];
        for &b in out {
            if let Some(f) = self.accumulator.push(b) {
                let f = f.unwrap().to_vec();
                let m = hilt_proto::decode_frame(&f, &mut scratch).unwrap();
                self.answer(&m);
            }
        }
        incoming.extend(self.out.drain(..));
        Ok(out.len())
    }

    fn memory(&mut self) -> Option<&mut dyn TargetMemory> {
        None
    }
}

fn smoke() -> (
    hilt::config::board::Board,
    hilt::config::scenario::Scenario,
    u32,
) {
    let board =
        hilt::config::board::load(&repo().join("boards/qemu-mps2-an386-uart.toml")).unwrap();
    let scenario = hilt::config::scenario::load(
        &repo().join("scenarios/smoke_reshape.toml"),
        &hilt::conformance::locate_all(&repo()),
    )
    .unwrap();
    let crc = hilt_proto::crc::crc32(&std::fs::read(&scenario.model).unwrap());
    (board, scenario, crc)
}

fn fake(board: &str, model_hash: u32, lose: usize, late: bool) -> FakeFirmware {
    FakeFirmware {
        board: board.to_string(),
        model_hash,
        accumulator: FrameAccumulator::default(),
        out: VecDeque::new(),
        input: Vec::new(),
        lose,
        late,
        held: Vec::new(),
        hellos: 0,
        resets: 0,
        requests: Vec::new(),
        offloads: Vec::new(),
        drivers: Vec::new(),
        refuse_offload: None,
        fail_invoke: None,
    }
}

/// A whole session against `firmware`: the run (its one step checked
/// passed) or the failure, and the log lines.
fn session(
    firmware: &mut FakeFirmware,
    board: &hilt::config::board::Board,
    scenario: &hilt::config::scenario::Scenario,
    crc: u32,
) -> (Result<BoardRun, hilt::session::RunFailure>, Vec<String>) {
    let mut run = BoardRun::new(&scenario.name, &board.name);
    let mut link = Link::over(Box::new(firmware));
    let result = run_session(&mut link, board, scenario, crc, &mut run);
    let logs = std::mem::take(&mut link.logs);
    let result = result.map(|()| {
        assert_eq!(run.steps.len(), 1);
        assert_eq!(run.steps[0].mismatch, None);
        run
    });
    (result, logs)
}

#[test]
fn a_lost_hello_request_is_asked_again_and_the_session_passes() {
    let (board, scenario, crc) = smoke();
    let mut firmware = fake(&board.name, crc, 1, false);
    let (run, logs) = session(&mut firmware, &board, &scenario, crc);
    run.unwrap();
    assert!(logs.iter().any(|l| l == "fake firmware up"));
    assert_eq!(firmware.hellos, 2, "asked once more after a second");
    assert_eq!(firmware.resets, 1, "the barrier");
}

#[test]
fn answers_to_a_repeated_hello_arriving_late_do_not_shift_the_session() {
    // The first Hello is answered only when the second request comes: two
    // Hellos and two guard descriptions arrive; the barrier absorbs them,
    // and the input acknowledgement is not mistaken for anything else.
    let (board, scenario, crc) = smoke();
    let mut firmware = fake(&board.name, crc, 0, true);
    let (run, _) = session(&mut firmware, &board, &scenario, crc);
    let run = run.unwrap();
    assert_eq!(firmware.hellos, 2);
    assert_eq!(run.steps[0].mismatch, None);
    // 20 SysTick ticks of 40 instructions each on an MPS2 board at 25 MHz.
    assert_eq!(run.steps[0].total_cycles, 800);
}

#[test]
fn a_wrong_model_or_board_is_named_after_the_hello() {
    let (board, scenario, crc) = smoke();
    let mut other_model = fake(&board.name, crc ^ 1, 0, false);
    let err = session(&mut other_model, &board, &scenario, crc)
        .0
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("firmware embeds a different model"),
        "{err}"
    );
    let mut other_board = fake("qemu-mps2-an500", crc, 0, false);
    let err = session(&mut other_board, &board, &scenario, crc)
        .0
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "firmware was built for qemu-mps2-an500, not qemu-mps2-an386-uart"
    );
}

/// The smoke scenario with vnpu offload, as `--accelerator vnpu` sets it.
fn offloading(scenario: &mut hilt::config::scenario::Scenario, coherent: bool) {
    scenario.offload.accelerator = hilt_contract::offload::Accelerator::Vnpu;
    scenario.offload.coherent = coherent;
}

#[test]
fn without_offload_no_set_offload_is_sent_and_no_figures_are_kept() {
    let (board, scenario, crc) = smoke();
    let mut firmware = fake(&board.name, crc, 0, false);
    let run = session(&mut firmware, &board, &scenario, crc).0.unwrap();
    assert!(firmware.offloads.is_empty());
    assert_eq!(run.offload, None);
    assert_eq!(run.steps[0].offload, None);
}

#[test]
fn offload_is_set_after_the_barrier_and_its_figures_are_kept_per_step() {
    let (board, mut scenario, crc) = smoke();
    offloading(&mut scenario, false);
    let mut firmware = fake(&board.name, crc, 0, false);
    let run = session(&mut firmware, &board, &scenario, crc).0.unwrap();
    assert_eq!(
        firmware.requests[..3],
        ["ResetState", "SetOffload", "LoadInput"],
        "SetOffload after the barrier, before any input"
    );
    let (mode, fault, job_cycles, per_macs, ops) = &firmware.offloads[0];
    assert_eq!(*mode, OffloadMode::NonCoherent);
    assert_eq!(*fault, 0);
    assert_eq!((*job_cycles, *per_macs), (10_000, 64), "the board's engine");
    assert_eq!(firmware.drivers[0], (1_000, 4), "the board's driver model");
    assert_eq!(ops, &[3, 4, 9, 0, 1, 17]);
    let setting = run.offload.as_ref().unwrap();
    assert_eq!(setting.mode, "non-coherent");
    // MPS2 at 25 MHz: 40 instructions per reported tick.
    let figures = run.steps[0].offload.as_ref().unwrap();
    assert_eq!((figures.jobs, figures.busy, figures.waited), (1, 200, 120));
    // Each category scaled by itself: 40 cycles a count.
    assert_eq!(
        (
            figures.removed.engine,
            figures.removed.shadow_copies,
            figures.removed.oversleep
        ),
        (160, 80, 40)
    );
    assert_eq!(
        (figures.kept.driver_submit, figures.kept.driver_cache),
        (120, 200)
    );
    assert_eq!(figures.overlap(), 80);
    assert_eq!(figures.on_npu, [true], "cut to the op count");
    assert_eq!(run.steps[0].op_cycles, [480]);
    let job = figures.job_times[0];
    assert_eq!(
        (job.submitted, job.completed, job.wait_started, job.retired),
        (40, 240, 80, 240)
    );
}

#[test]
fn a_refused_fault_says_which_fault_the_firmware_lacks() {
    let (board, mut scenario, crc) = smoke();
    offloading(&mut scenario, true);
    scenario.accel_fault = AccelFault::SkipWait;
    let mut firmware = fake(&board.name, crc, 0, false);
    firmware.refuse_offload = Some(TargetError {
        code: ErrorCode::UNSUPPORTED,
        op: u16::MAX,
        detail: 0,
    });
    let err = session(&mut firmware, &board, &scenario, crc)
        .0
        .unwrap_err()
        .to_string();
    assert_eq!(firmware.offloads[0].1, AccelFault::SkipWait as u8);
    assert!(
        err.starts_with("the firmware refused SetOffload (UNSUPPORTED)")
            && err.contains("\"skip-wait\"")
            && err.contains("add \"accel\" to the scenario's faults"),
        "{err}"
    );
}

#[test]
fn an_accelerator_error_names_the_op_the_job_and_what_went_wrong() {
    use hilt_runtime::accel::{AccelError, RegionRole};
    let (board, mut scenario, crc) = smoke();
    offloading(&mut scenario, true);
    let error = AccelError::Misaligned {
        region: 1,
        role: RegionRole::Output(12),
    };
    let mut firmware = fake(&board.name, crc, 0, false);
    firmware.fail_invoke = Some(TargetError {
        code: ErrorCode::ACCELERATOR,
        op: 0,
        detail: error.code(4),
    });
    let err = session(&mut firmware, &board, &scenario, crc)
        .0
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "firmware error ACCELERATOR: op 0 (RESHAPE), job 4: region 1 (Output(12)) is misaligned for the engine"
    );
}
