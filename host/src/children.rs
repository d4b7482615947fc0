//! The processes hilt starts (QEMU, firmware builds, flash commands) end
//! with it. A CI cancel sends SIGINT or SIGTERM to `hilt` alone; without
//! this, every QEMU it had started would live on under PID 1, one leaked
//! process per cancelled job on a farm host.
//!
//! Three layers, because no one of them covers every way hilt can end:
//! - every child is registered here while it runs ([`Registered`]), in a
//!   process group of its own, so that its own children (cargo's rustc)
//!   end with it;
//! - the `hilt` binary turns SIGINT, SIGTERM and SIGHUP into a teardown
//!   that kills every registered group before exiting with 128 + the
//!   signal ([`exit_on_signals`]);
//! - on Linux each child also asks the kernel to kill it when hilt dies
//!   (`PR_SET_PDEATHSIG`), which covers a SIGKILL no handler sees.
//!
//! A leaf module, like [`cancel`](crate::cancel): drivers and the firmware
//! builder import it, it imports nothing of the crate.

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::sync::Mutex;

/// The process ids (each its own group's leader) of the children running now.
static RUNNING: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Prepares `command` to be a child that dies with hilt: its own process
/// group (so a teardown reaches its descendants) and, on Linux, a kill
/// when hilt's thread that started it ends.
pub fn dies_with_hilt(command: &mut Command) -> &mut Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: runs in the child between fork and exec and only calls
        // prctl and getppid (async-signal-safe).
        unsafe {
            let parent = libc::getpid();
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    command
}

/// Spawns `command` as a registered child that dies with hilt.
pub fn spawn(command: &mut Command) -> std::io::Result<Registered> {
    let child = dies_with_hilt(command).spawn()?;
    Ok(Registered::new(child))
}

/// A running child, registered for teardown until it is waited for or
/// dropped (dropping kills it).
#[derive(Debug)]
pub struct Registered {
    child: Option<Child>,
    pid: u32,
}

impl Registered {
    /// Registers `child` (spawned through [`dies_with_hilt`]).
    pub fn new(child: Child) -> Self {
        let pid = child.id();
        if let Ok(mut running) = RUNNING.lock() {
            running.insert(pid);
        }
        Registered {
            child: Some(child),
            pid,
        }
    }

    /// The child itself (its pipes, `try_wait`, `kill`).
    pub fn child(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .unwrap_or_else(|| unreachable!("taken only by wait and drop"))
    }

    /// Waits for the child to end, and forgets it.
    pub fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.child().wait();
        forget(self.pid);
        self.child = None;
        status
    }

    /// Waits for the child and collects its output, and forgets it.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        let child = self
            .child
            .take()
            .unwrap_or_else(|| unreachable!("taken only by wait and drop"));
        let output = child.wait_with_output();
        forget(self.pid);
        output
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Killed, then forgotten, then reaped: until it is reaped its pid
            // cannot be reused, so a teardown in between kills nothing else.
            kill_group(self.pid);
            let _ = child.kill();
            forget(self.pid);
            let _ = child.wait();
        }
    }
}

fn forget(pid: u32) {
    if let Ok(mut running) = RUNNING.lock() {
        running.remove(&pid);
    }
}

/// SIGKILL to the process group `pid` leads.
fn kill_group(pid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a negative pid signals that process group;
        // it touches no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Kills every registered child's process group; returns how many there were.
pub fn kill_all() -> usize {
    let pids: Vec<u32> = RUNNING
        .lock()
        .map(|r| r.iter().copied().collect())
        .unwrap_or_default();
    for &pid in &pids {
        kill_group(pid);
    }
    pids.len()
}

/// From now on SIGINT, SIGTERM and SIGHUP end hilt by killing every
/// registered child first, then exiting with 128 + the signal (130, 143,
/// 129), as a shell reports a process a signal ended. Call once, at the
/// start of `main`, before any thread exists: the signals are blocked in
/// every thread and taken by one thread of its own (children start with an
/// empty mask: the standard library resets it in each one).
pub fn exit_on_signals() {
    #[cfg(unix)]
    // SAFETY: plain libc calls on a local sigset_t, before other threads exist.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("hilt-signals".into())
            .spawn(move || {
                let mut signal: libc::c_int = 0;
                // SAFETY: `set` lives in this closure; sigwait writes `signal`.
                if libc::sigwait(&set, &mut signal) == 0 {
                    let stopped = kill_all();
                    let name = match signal {
                        libc::SIGINT => "SIGINT",
                        libc::SIGTERM => "SIGTERM",
                        _ => "SIGHUP",
                    };
                    eprintln!(
                        "hilt: {name}: stopped {stopped} child process{} (QEMU, builds, flash commands); reports written so far are kept",
                        if stopped == 1 { "" } else { "es" }
                    );
                    std::process::exit(128 + signal);
                }
            });
        if spawned.is_err() {
            // No thread to take the signals: let them act as before.
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}
