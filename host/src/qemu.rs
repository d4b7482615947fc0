//! Virtual boards: `qemu-system-arm` with `-icount` (deterministic
//! instruction counting), semihosting (a panicking firmware exits QEMU) and
//! a gdbstub on a free local port. The process is killed when the handle is
//! dropped, on every exit path.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::board::QemuSettings;
use crate::gdbstub::GdbClient;
use crate::memory::MemoryError;

/// Why QEMU could not be started.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    /// `qemu-system-arm` is not installed or failed to start.
    #[error("cannot start qemu-system-arm ({0}); run ci/setup.sh to install it")]
    Spawn(std::io::Error),
    /// No free local port for the gdbstub.
    #[error("no free local port for QEMU's gdbstub: {0}")]
    Port(std::io::Error),
    /// QEMU exited before its gdbstub answered.
    #[error("qemu-system-arm exited at start-up ({status}): {stderr}")]
    Exited {
        /// Exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
    /// The gdbstub did not work.
    #[error("QEMU gdbstub: {0}")]
    Gdb(#[from] MemoryError),
}

/// A running QEMU; killed on drop.
#[derive(Debug)]
pub struct Qemu {
    child: Child,
    /// The gdbstub's address.
    pub gdb: SocketAddr,
}

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Qemu {
    /// The command line for `elf` on the board described by `settings`.
    pub fn command(settings: &QemuSettings, elf: &Path, port: u16) -> Command {
        let mut cmd = Command::new("qemu-system-arm");
        cmd.args(["-M", &settings.machine, "-cpu", &settings.cpu])
            .args(["-nographic", "-monitor", "none", "-serial", "none"])
            .args(["-semihosting-config", "enable=on,target=native"])
            .args(["-icount", &format!("shift={}", settings.icount_shift)])
            .args(["-gdb", &format!("tcp:127.0.0.1:{port}"), "-S"])
            .arg("-kernel")
            .arg(elf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts QEMU halted at reset, with its gdbstub listening.
    pub fn start(settings: &QemuSettings, elf: &Path) -> Result<Self, QemuError> {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").map_err(QemuError::Port)?;
            listener.local_addr().map_err(QemuError::Port)?.port()
        };
        let child = Self::command(settings, elf, port)
            .spawn()
            .map_err(QemuError::Spawn)?;
        Ok(Qemu {
            child,
            gdb: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }

    /// Connects to the gdbstub (QEMU may need a moment to listen).
    pub fn connect(&mut self, timeout: Duration) -> Result<GdbClient, QemuError> {
        match GdbClient::connect(self.gdb, timeout) {
            Ok(client) => Ok(client),
            Err(e) => match self.child.try_wait() {
                Ok(Some(status)) => {
                    let mut stderr = String::new();
                    if let Some(mut err) = self.child.stderr.take() {
                        use std::io::Read;
                        let _ = err.read_to_string(&mut stderr);
                    }
                    Err(QemuError::Exited {
                        status: status.to_string(),
                        stderr: stderr.trim().to_string(),
                    })
                }
                _ => Err(QemuError::Gdb(e)),
            },
        }
    }

    /// Kills QEMU now (a test of mid-run failure, or a timeout).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// The process id, for tests that kill it from outside.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}
