//! Cancellation of a board run, shared by every layer that waits on a board
//! (the link's reads, the flash command, the QEMU process). It is a leaf
//! module, depending on nothing else of the crate, so that lower modules can
//! be cancelled without importing the session or the drivers above them.

/// Lets the orchestrator end a hung board run from another thread: it
/// kills the board's QEMU, which makes every pending gdbstub read fail.
#[derive(Debug, Default, Clone)]
pub struct KillSwitch {
    inner: std::sync::Arc<std::sync::Mutex<(Option<u32>, bool)>>,
}

impl KillSwitch {
    pub(crate) fn arm(&self, pid: u32) {
        if let Ok(mut g) = self.inner.lock() {
            g.0 = Some(pid);
        }
    }

    pub(crate) fn disarm(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.0 = None;
        }
    }

    /// Asks the run to stop without killing anything yet: its next wait
    /// fails with a cancellation, and the run can still look at the board
    /// (where a hung core is) before it ends it itself. [`fire`](Self::fire)
    /// follows if the run does not end soon.
    pub fn stop(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.1 = true;
        }
    }

    /// Kills the process, if one is running.
    pub fn fire(&self) {
        if let Ok(mut g) = self.inner.lock() {
            if let Some(pid) = g.0.take() {
                let _ = std::process::Command::new("kill")
                    .arg("-9")
                    .arg(pid.to_string())
                    .status();
            }
            g.1 = true;
        }
    }

    /// The process id while a board runs (tests kill it from outside).
    pub fn pid(&self) -> Option<u32> {
        self.inner.lock().ok().and_then(|g| g.0)
    }

    /// Whether [`stop`](Self::stop) or [`fire`](Self::fire) was called.
    pub fn fired(&self) -> bool {
        self.inner.lock().map(|g| g.1).unwrap_or(false)
    }
}
