//! The protocol session: set up with [`Agent`], then read frames from the
//! host and hand each request to its handler (`requests.rs`). Every request
//! is answered in order, and the host waits for each answer before it sends
//! the next request.

use embedded_hal::digital::OutputPin;
use embedded_io::{Error as _, Read, ReadReady, Write};
use hilt_proto::{ErrorCode, FrameAccumulator, MAX_FRAME, ProtoError, decode_request_frame};
use hilt_runtime::kernels::Resolver;
use hilt_runtime::planner::MemoryPlanner;

use crate::config::Config;
use crate::counter::CycleCounter;
use crate::link::{Link, WireError};
use crate::offload::OffloadEngine;
use crate::pin::NoPin;
use crate::planner::{Custom, PlannerKind, PlannerSource};
use crate::requests::{NO_OP, Seams, Service};
use crate::workspace::Parts;

/// Bytes taken from the wire per read.
const READ_CHUNK: usize = 256;

/// A session being set up: the seams first, then [`start`](Self::start)
/// with the memory to run in.
pub struct Agent<W, C, T = NoPin, P = PlannerKind> {
    config: Config,
    wire: W,
    counter: C,
    pin: T,
    planner: P,
    engine: Option<&'static dyn OffloadEngine>,
}

impl<W, C, T, P> core::fmt::Debug for Agent<W, C, T, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Agent")
            .field("board", &self.config.board)
            .field("engine", &self.engine.map(|e| e.name()))
            .finish_non_exhaustive()
    }
}

impl<W: Read + Write, C: CycleCounter> Agent<W, C> {
    /// An agent on `wire`, timing with `counter`; greedy planning, no
    /// timestamp pin, no offload engine until said otherwise.
    pub fn new(config: Config, wire: W, counter: C) -> Self {
        Agent {
            config,
            wire,
            counter,
            pin: NoPin,
            planner: PlannerKind::Greedy,
            engine: None,
        }
    }
}

impl<W: Read + Write, C: CycleCounter, T: OutputPin, P: PlannerSource> Agent<W, C, T, P> {
    /// Holds `pin` high for the duration of each invoke (set just outside
    /// the timed region, so the cycle figures do not include it).
    pub fn timestamp_pin<T2: OutputPin>(self, pin: T2) -> Agent<W, C, T2, P> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin,
            planner: self.planner,
            engine: self.engine,
        }
    }

    /// Plans the arena with one of the runtime's planners: a
    /// [`PlannerKind`] chosen at run time (links every planner), or one
    /// named as a type (`Greedy`, `OfflineFromModel`, ...: links only it).
    pub fn planner<P2: PlannerSource>(self, planner: P2) -> Agent<W, C, T, P2> {
        self.with_planner(planner)
    }

    /// Plans the arena with a planner of your own (an allocator port, a
    /// test planner): it gets the same requests and its plan the same
    /// checks as the runtime's.
    pub fn custom_planner<P2: MemoryPlanner>(self, planner: P2) -> Agent<W, C, T, Custom<P2>> {
        self.with_planner(Custom(planner))
    }

    fn with_planner<P2>(self, planner: P2) -> Agent<W, C, T, P2> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin: self.pin,
            planner,
            engine: self.engine,
        }
    }

    /// Lets the host offload operators to `engine` (`SetOffload`): hilt's
    /// `TickVnpu`, or a driver of your own for a real NPU. The counter
    /// must be able to raise the engine's tick
    /// ([`CycleCounter::tick_every`]).
    pub fn offload_engine(self, engine: &'static dyn OffloadEngine) -> Self {
        Agent {
            engine: Some(engine),
            ..self
        }
    }

    /// Says hello in the log, reads the model, prepares the kernels and
    /// commits the arena plan. A model or plan that fails is not an error
    /// here: the session still answers, and tells the host what failed
    /// (a `Log` now, an `Error` after each Hello), so the host reports it.
    /// Only the wire failing stops it.
    pub fn start<'s>(
        self,
        parts: Parts<'s>,
        resolver: &'s dyn Resolver,
    ) -> Result<Session<'s, W, C, T, P>, WireError> {
        let Parts {
            model,
            constants,
            arena,
            workspace,
        } = parts;
        let mut service = Service::new(
            self.config,
            Link::new(self.wire, arena.as_ptr() as u32, &mut workspace.frame),
            arena.len() as u32,
            Seams {
                counter: self.counter,
                pin: self.pin,
                planner: self.planner,
                engine: self.engine,
            },
            &mut workspace.plan,
            &mut workspace.per_op,
            &mut workspace.jobs,
        );
        service.log_start(model.len())?;
        service.host(model, constants, arena, resolver)?;
        Ok(Session {
            service,
            accumulator: FrameAccumulator::default(),
            input: [0; READ_CHUNK],
            scratch: &mut workspace.scratch,
        })
    }
}

/// A running session: [`poll`](Self::poll) it, or [`run`](Self::run) it
/// for good.
pub struct Session<'s, W, C, T = NoPin, P = PlannerKind> {
    service: Service<'s, W, C, T, P>,
    accumulator: FrameAccumulator,
    input: [u8; READ_CHUNK],
    scratch: &'s mut [u8; MAX_FRAME],
}

impl<W, C, T, P> core::fmt::Debug for Session<'_, W, C, T, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("status", &self.service.status())
            .field("invocations", &self.service.invocations())
            .finish_non_exhaustive()
    }
}

impl<'s, W: Read + Write, C: CycleCounter, T: OutputPin, P: PlannerSource> Session<'s, W, C, T, P> {
    /// Waits for bytes from the host (a blocking `read`), then handles every
    /// request they complete. A damaged frame is answered with a
    /// `BAD_FRAME` error and the session goes on.
    pub fn poll(&mut self) -> Result<(), WireError> {
        let n = self
            .service
            .link
            .wire
            .read(&mut self.input)
            .map_err(|e| WireError::Read(e.kind()))?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        for &byte in &self.input[..n] {
            let Some(frame) = self.accumulator.push(byte) else {
                continue;
            };
            match frame.and_then(|f| decode_request_frame(f, self.scratch)) {
                Ok(message) => self.service.dispatch(message)?,
                // A whole message, but one only a target sends: refused by
                // its tag, as any request this firmware does not serve.
                Err(ProtoError::NotARequest(tag)) => {
                    self.service
                        .link
                        .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag))?
                }
                Err(_) => self.service.link.error(ErrorCode::BAD_FRAME, NO_OP, 0)?,
            }
        }
        Ok(())
    }

    /// Serves the host until the wire fails; returns why.
    pub fn run(&mut self) -> WireError {
        loop {
            if let Err(e) = self.poll() {
                return e;
            }
        }
    }

    /// The engine the host may offload to.
    pub fn offload_engine(&self) -> Option<&'s dyn OffloadEngine> {
        self.service.engine()
    }

    /// The wire, e.g. for a test to look at what was sent.
    pub fn wire(&mut self) -> &mut W {
        &mut self.service.link.wire
    }
}

impl<'s, W: Read + ReadReady + Write, C: CycleCounter, T: OutputPin, P: PlannerSource>
    Session<'s, W, C, T, P>
{
    /// [`poll`](Self::poll) without the wait: handles what has arrived and
    /// returns at once when nothing has (`Ok(false)`), for a main loop that
    /// has other work between requests. A request in progress still runs
    /// to its end (an invoke is not split).
    pub fn poll_ready(&mut self) -> Result<bool, WireError> {
        let ready = self
            .service
            .link
            .wire
            .read_ready()
            .map_err(|e| WireError::Read(e.kind()))?;
        if ready {
            self.poll()?;
        }
        Ok(ready)
    }
}
