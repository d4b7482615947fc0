//! What the driver's host tests share: a host platform (a microsecond
//! clock and an event a thread sleeps on), a cache hook that records what
//! it is asked, and a timer thread that steps the virtual device and runs
//! the driver's interrupt handler when the device raises its line.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use hilt_npu_driver::{Driver, VirtualNpu};
use hilt_runtime::accel::{CacheMaintenance, EventWait};
use hilt_runtime::interpreter::Clock;

/// Microseconds since it was made, and an event a waiter sleeps on until
/// notified or a deadline in those microseconds.
pub struct HostPlatform {
    start: Instant,
    notified: Mutex<bool>,
    wake: Condvar,
}

impl HostPlatform {
    pub fn new() -> Self {
        HostPlatform {
            start: Instant::now(),
            notified: Mutex::new(false),
            wake: Condvar::new(),
        }
    }
}

impl Clock for HostPlatform {
    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}

impl EventWait for HostPlatform {
    fn wait_until(&self, deadline: u64) -> bool {
        let mut notified = self.notified.lock().unwrap();
        while !*notified {
            let now = self.now();
            if now >= deadline {
                return false;
            }
            let left = Duration::from_micros((deadline - now).min(1_000_000));
            notified = self.wake.wait_timeout(notified, left).unwrap().0;
        }
        *notified = false;
        true
    }

    fn notify(&self) {
        *self.notified.lock().unwrap() = true;
        self.wake.notify_one();
    }
}

/// A cache operation the driver asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOp {
    Clean(usize, usize),
    Invalidate(usize, usize),
}

/// The driver's cache hook: records each request, then passes it to the
/// device's data cache unless told to drop invalidates (a driver bug).
pub struct RecordingCache<'a> {
    pub inner: &'a (dyn CacheMaintenance + Sync),
    pub ops: Mutex<Vec<CacheOp>>,
    pub drop_invalidates: bool,
}

impl<'a> RecordingCache<'a> {
    pub fn new(inner: &'a (dyn CacheMaintenance + Sync)) -> Self {
        RecordingCache {
            inner,
            ops: Mutex::new(Vec::new()),
            drop_invalidates: false,
        }
    }

    pub fn take(&self) -> Vec<CacheOp> {
        std::mem::take(&mut self.ops.lock().unwrap())
    }
}

impl CacheMaintenance for RecordingCache<'_> {
    fn line_size(&self) -> u32 {
        self.inner.line_size()
    }

    fn clean(&self, address: usize, len: usize) {
        self.ops.lock().unwrap().push(CacheOp::Clean(address, len));
        self.inner.clean(address, len);
    }

    fn invalidate(&self, address: usize, len: usize) {
        self.ops
            .lock()
            .unwrap()
            .push(CacheOp::Invalidate(address, len));
        if !self.drop_invalidates {
            self.inner.invalidate(address, len);
        }
    }
}

/// How the timer thread treats the device's interrupt line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Wired to the driver's handler.
    Wired,
    /// Not wired: the driver must poll.
    Unwired,
}

/// Runs `body` while a thread steps `device` by `budget` engine cycles
/// every 20 µs and, with the line wired, runs the driver's interrupt
/// handler whenever the device raises it (the NPU's interrupt).
pub fn with_timer<T>(
    device: &VirtualNpu<'_>,
    driver: &Driver<'_, &VirtualNpu<'_>>,
    budget: u64,
    line: Line,
    body: impl FnOnce() -> T,
) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                if device.step(budget) && line == Line::Wired {
                    driver.on_interrupt();
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        });
        // Stops the timer however `body` returns: a failed assert unwinds
        // through here, and the scope would otherwise wait for it forever.
        let _stop = StopOnDrop(&stop);
        body()
    })
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A 64-byte aligned buffer for hand-made jobs.
#[repr(C, align(64))]
pub struct Buf(pub [u8; 512]);
