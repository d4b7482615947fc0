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
        drop(gdb);
        drop(qemu);
        kill.disarm();
        session
    })();
    conclude(run, result, kill, scenario)
}
