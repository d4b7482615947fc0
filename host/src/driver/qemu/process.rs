//! Virtual boards: `qemu-system-arm` with `-icount` (deterministic
//! instruction counting), semihosting (a panicking firmware exits QEMU) and
//! a gdbstub on a free local port; on boards that talk over a UART, the
//! first serial port on a pty. The process is killed when the handle is
//! dropped, on every exit path.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::children::Registered;
use crate::config::board::{QemuBoot, QemuSettings};
use crate::link::gdbstub::GdbClient;
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
    /// QEMU did not say which pty its serial port is on.
    #[error("QEMU did not report its serial pty within {0:?}")]
    NoPty(Duration),
}

/// The QEMU binary hilt starts (for messages).
pub fn qemu_binary() -> String {
    let name = "qemu-system-arm";
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(name))
                .find(|p| p.is_file())
        })
        .map_or_else(|| name.to_string(), |p| p.display().to_string())
}

/// Where QEMU connects the board's first serial port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QemuSerial {
    /// Nowhere (RTT boards).
    None,
    /// A pseudo-terminal QEMU creates and names on stderr.
    Pty,
}

/// A running QEMU; killed on drop.
#[derive(Debug)]
pub struct Qemu {
    /// Killed (with its process group) on drop and when hilt is signalled.
    child: Registered,
    /// The gdbstub's address.
    pub gdb: SocketAddr,
    /// What QEMU printed on stderr so far.
    stderr: Arc<Mutex<String>>,
    /// The pty path, once QEMU names it.
    pty: mpsc::Receiver<String>,
}

/// Reads `stream` to its end: a "char device redirected to /dev/pts/N
/// (label serial0)" line sends the path to `pty`; every line goes to `keep`.
fn read_lines(
    stream: impl std::io::Read,
    pty: &mpsc::Sender<String>,
    keep: Option<&Mutex<String>>,
) {
    use std::io::BufRead;
    for line in std::io::BufReader::new(stream)
        .lines()
        .map_while(Result::ok)
    {
        if let Some(rest) = line.split("redirected to ").nth(1) {
            let path = rest.split_whitespace().next().unwrap_or_default();
            let _ = pty.send(path.to_string());
        }
        if let Some(Ok(mut text)) = keep.map(Mutex::lock) {
            text.push_str(&line);
            text.push('\n');
        }
    }
}

/// Where QEMU's gdbstub listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdbEndpoint {
    /// A local TCP port QEMU binds itself.
    Port(u16),
    /// A listening socket the host bound and QEMU inherits (Unix): no other
    /// process can take the port between choosing it and QEMU listening.
    Fd(i32),
}

impl Qemu {
    /// The command line for `elf` on the board described by `settings`.
    pub fn command(
        settings: &QemuSettings,
        elf: &Path,
        gdb: GdbEndpoint,
        serial: QemuSerial,
        extra: &[std::ffi::OsString],
    ) -> Command {
        let serial = match serial {
            QemuSerial::None => "none",
            QemuSerial::Pty => "pty",
        };
        let mut cmd = Command::new("qemu-system-arm");
        cmd.args(["-M", &settings.machine, "-cpu", &settings.cpu])
            .args(["-nographic", "-monitor", "none", "-serial", serial])
            .args(["-semihosting-config", "enable=on,target=native"])
            // sleep=off: an idle core (WFE, WFI) jumps to the next timer
            // deadline in virtual time instead of sleeping through it in
            // host time, so a wait costs the same instructions whatever
            // the host is doing.
            .args([
                "-icount",
                &format!("shift={},sleep=off", settings.icount_shift),
            ])
            .arg("-S");
        match settings.boot {
            QemuBoot::VectorTable => cmd.arg("-kernel").arg(elf),
            QemuBoot::Entry => {
                // QEMU's option syntax doubles a comma inside a value.
                let file = elf.to_string_lossy().replace(',', ",,");
                cmd.args(["-device", &format!("loader,cpu-num=0,file={file}")])
            }
        };
        cmd.args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match gdb {
            GdbEndpoint::Port(port) => cmd.args(["-gdb", &format!("tcp:127.0.0.1:{port}")]),
            GdbEndpoint::Fd(fd) => cmd
                .args([
                    "-chardev",
                    &format!("socket,id=hilt-gdb,fd={fd},server=on,wait=off,nodelay=on"),
                ])
                .args(["-gdb", "chardev:hilt-gdb"]),
        };
        cmd
    }

    /// Starts QEMU halted at reset, with its gdbstub listening.
    pub fn start(settings: &QemuSettings, elf: &Path) -> Result<Self, QemuError> {
        Self::start_with(settings, elf, QemuSerial::None, &[])
    }

    /// [`start`](Self::start) with the first serial port connected as
    /// `serial` says, and `extra` arguments (a plugin to load).
    pub fn start_with(
        settings: &QemuSettings,
        elf: &Path,
        serial: QemuSerial,
        extra: &[std::ffi::OsString],
    ) -> Result<Self, QemuError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(QemuError::Port)?;
        let port = listener.local_addr().map_err(QemuError::Port)?.port();
        let mut child = Self::spawn(settings, elf, listener, serial, extra)?;
        let stdout = child.child().stdout.take();
        let stderr_pipe = child.child().stderr.take();
        // Read QEMU's output as it comes: stdout names the pty, stderr says
        // why QEMU stopped if it does.
        let stderr = Arc::new(Mutex::new(String::new()));
        let (pty_tx, pty) = mpsc::channel();
        if let Some(out) = stdout {
            let tx = pty_tx.clone();
            std::thread::spawn(move || read_lines(out, &tx, None));
        }
        if let Some(err) = stderr_pipe {
            let text = stderr.clone();
            std::thread::spawn(move || read_lines(err, &pty_tx, Some(&text)));
        }
        Ok(Qemu {
            child,
            gdb: SocketAddr::from(([127, 0, 0, 1], port)),
            stderr,
            pty,
        })
    }

    /// Spawns QEMU listening for GDB on `listener`: handed over as an
    /// inherited socket on Unix, so the port cannot be taken by anything
    /// else in between (with many QEMUs and connections at once, a port
    /// chosen and released can be).
    #[cfg(unix)]
    fn spawn(
        settings: &QemuSettings,
        elf: &Path,
        listener: TcpListener,
        serial: QemuSerial,
        extra: &[std::ffi::OsString],
    ) -> Result<Registered, QemuError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let fd = listener.as_raw_fd();
        let mut cmd = Self::command(settings, elf, GdbEndpoint::Fd(fd), serial, extra);
        // SAFETY: runs in the child between fork and exec and only calls
        // fcntl (async-signal-safe) to let exec keep the listening socket.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // QEMU has its own copy of the socket once spawned; ours closes here.
        crate::children::spawn(&mut cmd).map_err(QemuError::Spawn)
    }

    /// Spawns QEMU binding the port `listener` holds (released first).
    #[cfg(not(unix))]
    fn spawn(
        settings: &QemuSettings,
        elf: &Path,
        listener: TcpListener,
        serial: QemuSerial,
        extra: &[std::ffi::OsString],
    ) -> Result<Registered, QemuError> {
        let port = listener.local_addr().map_err(QemuError::Port)?.port();
        drop(listener);
        crate::children::spawn(&mut Self::command(
            settings,
            elf,
            GdbEndpoint::Port(port),
            serial,
            extra,
        ))
        .map_err(QemuError::Spawn)
    }

    /// The pty QEMU put the board's first serial port on (started with
    /// [`QemuSerial::Pty`]).
    pub fn serial_pty(&mut self, timeout: Duration) -> Result<String, QemuError> {
        match self.pty.recv_timeout(timeout) {
            Ok(path) => Ok(path),
            Err(_) => match self.exited() {
                Some(e) => Err(e),
                None => Err(QemuError::NoPty(timeout)),
            },
        }
    }

    /// Why QEMU is gone, if it is.
    fn exited(&mut self) -> Option<QemuError> {
        let status = self.child.child().try_wait().ok().flatten()?;
        // Give the stderr reader a moment to take QEMU's last words.
        std::thread::sleep(Duration::from_millis(50));
        let stderr = self
            .stderr
            .lock()
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        Some(QemuError::Exited {
            status: status.to_string(),
            stderr,
        })
    }

    /// Connects to the gdbstub (QEMU may need a moment to listen).
    pub fn connect(&mut self, timeout: Duration) -> Result<GdbClient, QemuError> {
        match GdbClient::connect(self.gdb, timeout) {
            Ok(client) => Ok(client),
            Err(e) => Err(self.exited().unwrap_or(QemuError::Gdb(e))),
        }
    }

    /// How QEMU ended, if it has (not waiting for it).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.child().try_wait().ok().flatten()
    }

    /// The last line QEMU printed on stderr, if any.
    pub fn last_words(&self) -> Option<String> {
        // Give the stderr reader a moment to take QEMU's last words.
        std::thread::sleep(Duration::from_millis(50));
        let text = self.stderr.lock().ok()?;
        text.lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    }

    /// Kills QEMU now (a test of mid-run failure, or a timeout).
    pub fn kill(&mut self) {
        let _ = self.child.child().kill();
    }

    /// The process id, for tests that kill it from outside.
    pub fn pid(&mut self) -> u32 {
        self.child.child().id()
    }
}
