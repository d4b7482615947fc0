//! The protocol session: set up with [`Agent`], then read frames from the
//! host and hand each request to its handler (`service.rs`). Every request
//! is answered in order, and the host waits for each answer before it sends
//! the next request.

use embedded_hal::digital::OutputPin;
use embedded_io::{Error as _, Read, ReadReady, Write};
use hilt_proto::{ErrorCode, FrameAccumulator, MAX_FRAME, decode_frame};
use hilt_runtime::kernels::Resolver;
use hilt_runtime::planner::MemoryPlanner;

use crate::config::Config;
use crate::counter::CycleCounter;
use crate::link::{Link, WireError};
use crate::pin::NoPin;
use crate::planner::{Accelerator, NoAccelerator, NoCustomPlanner, PlannerChoice, PlannerKind};
use crate::service::{NO_OP, Seams, Service};
use crate::workspace::Parts;

/// Bytes taken from the wire per read.
const READ_CHUNK: usize = 256;

/// A session being set up: the seams first, then [`start`](Self::start)
/// with the memory to run in.
#[derive(Debug)]
pub struct Agent<W, C, T = NoPin, P = NoCustomPlanner, A = NoAccelerator> {
    config: Config,
    wire: W,
    counter: C,
    pin: T,
    planner: PlannerChoice<P>,
    accelerator: A,
}

impl<W: Read + Write, C: CycleCounter> Agent<W, C> {
    /// An agent on `wire`, timing with `counter`; greedy planning, no
    /// timestamp pin, no accelerator until said otherwise.
    pub fn new(config: Config, wire: W, counter: C) -> Self {
        Agent {
            config,
            wire,
            counter,
            pin: NoPin,
            planner: PlannerChoice::Builtin(PlannerKind::Greedy),
            accelerator: NoAccelerator,
        }
    }
}

impl<W: Read + Write, C: CycleCounter, T: OutputPin, P: MemoryPlanner, A: Accelerator>
    Agent<W, C, T, P, A>
{
    /// Holds `pin` high for the duration of each invoke (set just outside
    /// the timed region, so the cycle figures do not include it).
    pub fn timestamp_pin<T2: OutputPin>(self, pin: T2) -> Agent<W, C, T2, P, A> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin,
            planner: self.planner,
            accelerator: self.accelerator,
        }
    }

    /// Plans the arena with one of the runtime's planners.
    pub fn planner(self, planner: PlannerKind) -> Agent<W, C, T, NoCustomPlanner, A> {
        self.with_planner(PlannerChoice::Builtin(planner))
    }

    /// Plans the arena with a planner of your own (an allocator port, a
    /// test planner): it gets the same requests and its plan the same
    /// checks as the runtime's.
    pub fn custom_planner<P2: MemoryPlanner>(self, planner: P2) -> Agent<W, C, T, P2, A> {
        self.with_planner(PlannerChoice::Custom(planner))
    }

    fn with_planner<P2>(self, planner: PlannerChoice<P2>) -> Agent<W, C, T, P2, A> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin: self.pin,
            planner,
            accelerator: self.accelerator,
        }
    }

    /// Hands operators to `accelerator` (a place kept: see [`Accelerator`]).
    pub fn accelerator<A2: Accelerator>(self, accelerator: A2) -> Agent<W, C, T, P, A2> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin: self.pin,
            planner: self.planner,
            accelerator,
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
    ) -> Result<Session<'s, W, C, T, A>, WireError> {
        let Parts {
            model,
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
                accelerator: self.accelerator,
            },
            &mut workspace.plan,
            &mut workspace.per_op,
        );
        service.log_start(model.len())?;
        service.host(model, arena, resolver, &self.planner)?;
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
pub struct Session<'s, W, C, T = NoPin, A = NoAccelerator> {
    service: Service<'s, W, C, T, A>,
    accumulator: FrameAccumulator,
    input: [u8; READ_CHUNK],
    scratch: &'s mut [u8; MAX_FRAME],
}

impl<W, C, T, A> core::fmt::Debug for Session<'_, W, C, T, A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("status", &self.service.status())
            .field("invocations", &self.service.invocations())
            .finish_non_exhaustive()
    }
}

impl<'s, W: Read + Write, C: CycleCounter, T: OutputPin, A: Accelerator> Session<'s, W, C, T, A> {
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
            match frame.and_then(|f| decode_frame(f, self.scratch)) {
                Ok(message) => self.service.dispatch(message)?,
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

    /// The accelerator the session holds.
    pub fn accelerator(&self) -> &A {
        self.service.accelerator()
    }

    /// The wire, e.g. for a test to look at what was sent.
    pub fn wire(&mut self) -> &mut W {
        &mut self.service.link.wire
    }
}

impl<'s, W: Read + ReadReady + Write, C: CycleCounter, T: OutputPin, A: Accelerator>
    Session<'s, W, C, T, A>
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
