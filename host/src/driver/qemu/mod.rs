//! The QEMU driver: a virtual board is a `qemu-system-arm` process
//! ([`process`]) whose memory the host reaches through its gdbstub; the
//! session runs over RTT in guest RAM, or over the board's UART on a pty.

pub mod process;

use std::time::Duration;

use self::process::{Qemu, QemuError, QemuSerial};
use super::{BoardDriver, OnFlashed, check_image_board, conclude};
use crate::cancel::KillSwitch;
use crate::config::board::{Board, Transport};
use crate::config::scenario::Scenario;
use crate::elf::FirmwareImage;
use crate::link::gdbstub::GdbClient;
use crate::link::rtt::Rtt;
use crate::link::serial::SerialWire;
use crate::link::{Link, LinkError, RttWire};
use crate::memory::TargetMemory;
use crate::outcome::BoardRun;
use crate::session::{RunFailure, run_session};

/// Drives virtual boards (`runner = "qemu"`).
#[derive(Debug, Clone, Copy, Default)]
pub struct QemuDriver;

impl BoardDriver for QemuDriver {
    fn run(
        &self,
        board: &Board,
        scenario: &Scenario,
        image: &FirmwareImage,
        model_crc: u32,
        kill: &KillSwitch,
        on_flashed: OnFlashed,
    ) -> BoardRun {
        // QEMU loads the ELF itself: there is no flashing to wait for.
        on_flashed();
        run_on_qemu(board, scenario, image, model_crc, kill)
    }

    fn flash_phase(&self) -> Option<&'static str> {
        None
    }
}

/// Runs `scenario` on a QEMU board with the firmware `image`: over RTT
/// through the gdbstub, or over the board's UART on a pty (the gdbstub
/// then only serves the host's memory checks).
pub fn run_on_qemu(
    board: &Board,
    scenario: &Scenario,
    image: &FirmwareImage,
    model_crc: u32,
    kill: &KillSwitch,
) -> BoardRun {
    let mut run = BoardRun::new(&scenario.name, &board.name);
    let result = (|| -> Result<(), RunFailure> {
        let settings = board
            .qemu
            .as_ref()
            .ok_or_else(|| RunFailure::Start("board has no [qemu] settings".into()))?;
        check_image_board(image, board)?;
        let start = |e: QemuError| RunFailure::Start(e.to_string());
        let serial = match board.transport {
            Transport::Rtt => QemuSerial::None,
            Transport::Uart => QemuSerial::Pty,
        };
        let mut qemu = Qemu::start_with(settings, &image.path, serial).map_err(start)?;
        kill.arm(qemu.pid());
        let pty = match serial {
            QemuSerial::Pty => Some(qemu.serial_pty(Duration::from_secs(10)).map_err(start)?),
            QemuSerial::None => None,
        };
        let mut gdb = qemu.connect(Duration::from_secs(10)).map_err(start)?;
        let mut link = match &pty {
            Some(pty) => {
                // The port is open before the core starts: nothing it says is lost.
                let baud = board.uart.as_ref().map_or(115_200, |u| u.baud);
                let wire = SerialWire::open(pty, baud, Some(&mut gdb))?;
                let mut link = Link::over(Box::new(wire));
                link.resume_target()?;
                link
            }
            None => {
                let rtt = Rtt::attach(
                    &mut gdb as &mut dyn TargetMemory,
                    image.rtt_control_block()?,
                    Duration::from_secs(20),
                )
                .map_err(|e| RunFailure::Link(LinkError::Rtt(e)))?;
                Link::over(Box::new(RttWire::new(&mut gdb, rtt)))
            }
        };
        link.cancel_with(kill.clone());
        let session = run_session(&mut link, board, scenario, model_crc, &mut run);
        run.logs.append(&mut link.logs);
        drop(link);
        let session = session.map_err(|e| explain_failure(e, &mut qemu, &mut gdb, image, kill));
        drop(gdb);
        drop(qemu);
        kill.disarm();
        session
    })();
    conclude(run, result, kill, scenario)
}

/// A failed session with what only the driver knows added: that QEMU
/// itself exited (and how) when the connection dropped, or, when the run
/// was stopped at its time limit, where the core was.
fn explain_failure(
    failure: RunFailure,
    qemu: &mut Qemu,
    gdb: &mut GdbClient,
    image: &FirmwareImage,
    kill: &KillSwitch,
) -> RunFailure {
    // A killed QEMU's sockets close as it dies: give the kernel a moment
    // to turn it into an exit status the driver can read.
    let mut exited = qemu.exit_status();
    for _ in 0..20 {
        if exited.is_some() || !matches!(failure, RunFailure::Link(_)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
        exited = qemu.exit_status();
    }
    if let Some(status) = exited {
        // Killed from outside (a user, the OOM killer) or crashed: the
        // link's own error ("broken pipe") only echoes that.
        return RunFailure::BoardExited(format!(
            "qemu-system-arm exited during the run ({}){}",
            describe_exit(status),
            qemu.last_words()
                .map_or_else(String::new, |w| format!(": {w}"))
        ));
    }
    if !kill.fired() {
        return failure;
    }
    match gdb.read_register(15) {
        Ok(pc) => {
            let place = crate::elf::function_at(&image.path, pc)
                .map_or_else(String::new, |f| format!(" in {f}"));
            RunFailure::Stopped(format!("{failure}; the core was at pc {pc:#010x}{place}"))
        }
        Err(e) => RunFailure::Stopped(format!(
            "{failure}; where the core was could not be read: {e}"
        )),
    }
}

/// How a process ended, in words: its exit code, or the signal that
/// killed it by name.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                libc::SIGKILL => "SIGKILL",
                libc::SIGTERM => "SIGTERM",
                libc::SIGINT => "SIGINT",
                libc::SIGHUP => "SIGHUP",
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGABRT => "SIGABRT",
                libc::SIGBUS => "SIGBUS",
                _ => "",
            };
            return if name.is_empty() {
                format!("killed by signal {signal}")
            } else {
                format!("killed by signal {signal}, {name}")
            };
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}
