//! Accelerators on the host: vnpu on its own thread, for `hilt infer` and
//! `hilt bench --accelerator vnpu`.
//!
//! The engine core is the runtime's [`VnpuCore`], unchanged; this module
//! only gives it a clock (wall time, one engine cycle per nanosecond), a
//! thread that steps it in slices while the CPU runs other ops, and a
//! condition variable the interpreter's waits sleep on ([`HostEvent`], the
//! host side of the runtime's [`EventWait`]).

use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hilt_runtime::accel::vnpu::{NEGATE_NAME, Violation, VnpuConfig, VnpuCore, VnpuStats};
use hilt_runtime::accel::{
    AccelError, Accelerator, CacheMaintenance, Capabilities, Coherent, DEFAULT_OFFLOAD, Deadline,
    EventWait, Job, JobId, Offload, OpKind, OpSet,
};
use hilt_runtime::schema::BuiltinOperator;

/// How often the engine thread advances a running job.
const SLICE: Duration = Duration::from_micros(20);

/// How long one wait may take before it is a missed deadline, ns.
pub const WAIT_TIMEOUT_NS: u64 = 10_000_000_000;

/// Failures choosing an accelerator or its offload list.
#[derive(Debug, thiserror::Error)]
pub enum AccelChoiceError {
    /// Not an accelerator hilt has.
    #[error("unknown accelerator {0:?} (known: none, vnpu)")]
    UnknownAccelerator(String),
    /// Not an operator name.
    #[error(
        "unknown operator {0:?} in the offload list (builtin names like CONV_2D, or {NEGATE_NAME})"
    )]
    UnknownOp(String),
}

/// Which accelerator a host run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcceleratorKind {
    /// Everything on the CPU.
    #[default]
    None,
    /// The virtual NPU on its own thread.
    Vnpu,
}

impl FromStr for AcceleratorKind {
    type Err = AccelChoiceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" | "cpu" => Ok(AcceleratorKind::None),
            "vnpu" => Ok(AcceleratorKind::Vnpu),
            other => Err(AccelChoiceError::UnknownAccelerator(other.into())),
        }
    }
}

/// Parses `CONV_2D,ADD,...` (builtin names, or vnpu's custom op name).
pub fn parse_offload(list: &str) -> Result<Vec<OpKind<'static>>, AccelChoiceError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            if name == NEGATE_NAME {
                return Ok(OpKind::Custom(NEGATE_NAME));
            }
            BuiltinOperator::ENUM_VALUES
                .iter()
                .find(|op| op.variant_name() == Some(name))
                .map(|&op| OpKind::Builtin(op))
                .ok_or_else(|| AccelChoiceError::UnknownOp(name.into()))
        })
        .collect()
}

/// The default offload list, as names (for help texts).
pub fn default_offload_names() -> String {
    DEFAULT_OFFLOAD
        .iter()
        .filter_map(|k| match k {
            OpKind::Builtin(op) => op.variant_name(),
            OpKind::Custom(name) => Some(*name),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A host run's accelerator choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccelChoice {
    /// The accelerator.
    pub kind: AcceleratorKind,
    /// The ops it may claim.
    pub offload: Vec<OpKind<'static>>,
    /// Whether the engine sees memory coherently (else through a modelled
    /// cache: cleans and invalidates, as on a Cortex-M7).
    pub coherent: bool,
}

impl Default for AccelChoice {
    fn default() -> Self {
        AccelChoice {
            kind: AcceleratorKind::None,
            offload: Vec::new(),
            coherent: true,
        }
    }
}

impl AccelChoice {
    /// The engine for `arena` (the memory the interpreter will run in), or
    /// `None` without an accelerator.
    ///
    /// # Safety
    /// In non-coherent mode the engine mirrors `arena`'s bytes: `arena`
    /// must outlive the engine (declare it first).
    pub unsafe fn engine(
        &self,
        arena: &mut [u8],
    ) -> Result<Option<ThreadedVnpu>, crate::host_run::ArenaAllocError> {
        if self.kind != AcceleratorKind::Vnpu {
            return Ok(None);
        }
        Ok(Some(if self.coherent {
            ThreadedVnpu::start(VnpuConfig::default())
        } else {
            // SAFETY: the caller keeps `arena` alive for the engine's life.
            unsafe { ThreadedVnpu::start_non_coherent(VnpuConfig::default(), arena)? }
        }))
    }
}

impl AccelChoice {
    /// vnpu with the default offload list.
    pub fn vnpu() -> Self {
        AccelChoice {
            kind: AcceleratorKind::Vnpu,
            offload: DEFAULT_OFFLOAD.to_vec(),
            coherent: true,
        }
    }
}

/// The host side of [`EventWait`]: a flag under a mutex and a condition
/// variable; deadlines are nanoseconds since `epoch`.
#[derive(Debug)]
pub struct HostEvent {
    epoch: Instant,
    set: Mutex<bool>,
    changed: Condvar,
}

impl HostEvent {
    /// A cleared event whose clock starts at `epoch`.
    pub fn new(epoch: Instant) -> Self {
        HostEvent {
            epoch,
            set: Mutex::new(false),
            changed: Condvar::new(),
        }
    }
}

impl EventWait for HostEvent {
    fn wait_until(&self, deadline: u64) -> bool {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *set {
                *set = false;
                return true;
            }
            let now = self.epoch.elapsed().as_nanos() as u64;
            if now >= deadline {
                return false;
            }
            let left = Duration::from_nanos(deadline - now).min(Duration::from_millis(100));
            set = self
                .changed
                .wait_timeout(set, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn notify(&self) {
        *self.set.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.changed.notify_all();
    }
}

struct Shared {
    epoch: Instant,
    state: Mutex<State>,
    /// Wakes the engine thread: a job was submitted, or it must stop.
    work: Condvar,
    /// Wakes waiters: a job completed.
    done: HostEvent,
}

struct State {
    core: VnpuCore<'static>,
    stop: bool,
}

/// The engine's view of memory in non-coherent mode: owned by the engine,
/// borrowed by its core for as long as the engine lives.
struct Shadow(*mut [u8]);

// SAFETY: the bytes are reached only through the core, behind its mutex.
unsafe impl Send for Shadow {}
unsafe impl Sync for Shadow {}

impl Drop for Shadow {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `start_non_coherent`; the core
        // that borrowed it is gone (the engine thread has stopped and the
        // state dropped with the last `Arc`, see `ThreadedVnpu::drop`).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// vnpu on its own thread: jobs advance in slices of wall time while the
/// interpreter runs CPU ops, and complete by notifying a condition variable.
pub struct ThreadedVnpu {
    config: VnpuConfig<'static>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Non-coherent mode: the engine's copy of the arena (after `shared`,
    /// so the core that borrows it is dropped first).
    shadow: Option<Shadow>,
}

impl std::fmt::Debug for ThreadedVnpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedVnpu").finish_non_exhaustive()
    }
}

impl ThreadedVnpu {
    /// Starts the engine thread (coherent memory).
    pub fn start(config: VnpuConfig<'static>) -> Self {
        Self::with_core(config, VnpuCore::new(config), None)
    }

    /// Starts the engine thread behind a modelled data cache over `arena`:
    /// it sees only what the CPU cleaned, the CPU its writes only once
    /// invalidated (see `VnpuCore::non_coherent`).
    ///
    /// # Safety
    /// `arena` must stay valid for reads and writes for the engine's life.
    /// Fails when the shadow copy of `arena` cannot be allocated.
    pub unsafe fn start_non_coherent(
        config: VnpuConfig<'static>,
        arena: &mut [u8],
    ) -> Result<Self, crate::host_run::ArenaAllocError> {
        let shadow = crate::aligned::try_zeroed_vec::<u8>(arena.len(), arena.len())?;
        let raw = Box::into_raw(shadow.into_boxed_slice());
        // SAFETY: the shadow lives in `Shadow` until the engine is dropped,
        // after its core; `arena` outlives the engine by the contract.
        let core = unsafe { VnpuCore::non_coherent(config, &mut *raw, arena.as_ptr() as usize) };
        Ok(Self::with_core(config, core, Some(Shadow(raw))))
    }

    fn with_core(
        config: VnpuConfig<'static>,
        core: VnpuCore<'static>,
        shadow: Option<Shadow>,
    ) -> Self {
        let epoch = Instant::now();
        let shared = Arc::new(Shared {
            epoch,
            state: Mutex::new(State { core, stop: false }),
            work: Condvar::new(),
            done: HostEvent::new(epoch),
        });
        let engine = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("vnpu".into())
            .spawn(move || run_engine(&engine))
            .ok();
        ThreadedVnpu {
            config,
            shared,
            thread,
            shadow,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine's figures.
    pub fn stats(&self) -> VnpuStats {
        self.state().core.stats()
    }

    /// The first lease violation, if any.
    pub fn violation(&self) -> Option<Violation> {
        self.state().core.violation()
    }

    /// An [`Offload`] of `ops` to this engine (with cache maintenance in
    /// non-coherent mode).
    pub fn offload<'o>(&'o self, ops: &'o [OpKind<'o>]) -> Offload<'o> {
        Offload {
            accelerator: self,
            cache: if self.shadow.is_some() {
                self
            } else {
                &Coherent
            },
            ops: OpSet::from_kinds(ops),
            timeout: WAIT_TIMEOUT_NS,
        }
    }
}

/// The engine thread: sleeps until there is a job, then steps it one slice
/// of wall time at a time (one cycle per nanosecond) until it completes.
fn run_engine(shared: &Shared) {
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let mut last = Instant::now();
    loop {
        if state.stop {
            return;
        }
        if !state.core.is_busy() {
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            last = Instant::now();
            continue;
        }
        let now = Instant::now();
        let budget = now.duration_since(last).as_nanos() as u64;
        last = now;
        if state.core.step(budget) {
            shared.done.notify();
            // Completed and not yet retired: nothing to run until the next job.
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            last = Instant::now();
            continue;
        }
        drop(state);
        std::thread::sleep(SLICE);
        state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    }
}

impl Accelerator for ThreadedVnpu {
    fn capabilities(&self) -> Capabilities<'_> {
        self.config.capabilities()
    }

    fn now(&self) -> u64 {
        self.shared.epoch.elapsed().as_nanos() as u64
    }

    fn submit(&self, job: &Job) -> Result<JobId, AccelError> {
        let id = self.state().core.submit(job)?;
        self.shared.work.notify_all();
        Ok(id)
    }

    fn poll(&self, job: JobId) -> Result<bool, AccelError> {
        self.state().core.poll(job)
    }

    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError> {
        loop {
            {
                let mut state = self.state();
                if state.core.poll(job)? {
                    let result = state.core.retire(job);
                    drop(state);
                    // The engine thread may sleep on `work` after completing.
                    self.shared.work.notify_all();
                    return result;
                }
            }
            if !self.shared.done.wait_until(deadline) && self.now() >= deadline {
                return Err(AccelError::Timeout);
            }
        }
    }

    fn abort(&self, job: JobId) {
        self.state().core.abort(job);
        self.shared.work.notify_all();
    }
}

impl CacheMaintenance for ThreadedVnpu {
    fn line_size(&self) -> u32 {
        self.config.line_size
    }

    fn clean(&self, address: usize, len: usize) {
        self.state().core.clean(address, len);
    }

    fn invalidate(&self, address: usize, len: usize) {
        self.state().core.invalidate(address, len);
    }
}

impl Drop for ThreadedVnpu {
    fn drop(&mut self) {
        self.state().stop = true;
        self.shared.work.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hilt_runtime::accel::{Access, JobRegion, RegionRole, Ticket};

    #[test]
    fn a_notify_from_another_thread_wakes_the_waiter_and_deadlines_pass() {
        let event = Arc::new(HostEvent::new(Instant::now()));
        let now = |e: &HostEvent| e.epoch.elapsed().as_nanos() as u64;
        assert!(!event.wait_until(now(&event) + 1_000_000));
        let notifier = Arc::clone(&event);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            notifier.notify();
        });
        assert!(event.wait_until(now(&event) + 5_000_000_000));
        thread.join().unwrap();
    }

    #[test]
    fn the_thread_completes_jobs_and_the_checks_name_regions() {
        #[repr(C, align(64))]
        struct Buf([u8; 128]);
        let mut buf = Buf([0; 128]);
        let base = buf.0.as_mut_ptr() as usize;
        let engine = ThreadedVnpu::start(VnpuConfig::default());
        let job = |at: usize| {
            let mut job = Job::new(3);
            // SAFETY: inside `buf`, which outlives every job of this test
            // (each is waited or refused before `buf` is dropped).
            assert!(unsafe {
                job.push(JobRegion {
                    address: base + at,
                    len: 32,
                    access: Access::ReadWrite,
                    role: RegionRole::Output(9),
                })
            });
            job
        };
        assert_eq!(
            Ticket::submit(&engine, &job(4)).err(),
            Some(AccelError::Misaligned {
                region: 0,
                role: RegionRole::Output(9)
            })
        );
        // No kernel attached: it runs its fixed job cost, then reports so.
        let ticket = Ticket::submit(&engine, &job(0)).unwrap();
        let deadline = engine.now() + WAIT_TIMEOUT_NS;
        assert_eq!(ticket.wait(deadline), Err(AccelError::Unsupported));
        assert_eq!(
            engine.stats().busy_cycles,
            hilt_runtime::accel::vnpu::LatencyModel::MICRO_NPU.job_cycles
        );
        assert_eq!(engine.violation(), None);
    }

    #[test]
    fn offload_lists_parse_builtin_and_custom_names() {
        assert_eq!(
            parse_offload("ADD, HILT_VNPU_NEGATE").unwrap(),
            [
                OpKind::Builtin(BuiltinOperator::ADD),
                OpKind::Custom(NEGATE_NAME)
            ]
        );
        assert!(parse_offload("NOPE").is_err());
        assert_eq!(
            default_offload_names(),
            "CONV_2D,DEPTHWISE_CONV_2D,FULLY_CONNECTED,ADD,AVERAGE_POOL_2D,MAX_POOL_2D"
        );
        assert_eq!(
            "vnpu".parse::<AcceleratorKind>().unwrap(),
            AcceleratorKind::Vnpu
        );
    }
}
