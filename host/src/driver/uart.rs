//! The UART driver: a board reached over a serial line (`runner = "uart"`),
//! flashed by its own `flash_command` (any tool) and then driven over its
//! `serial_port`. It needs no debug probe, so it suits boards whose farm
//! host has only a USB-serial adapter.

use super::{BoardDriver, OnFlashed, check_image_board, conclude};
use crate::cancel::KillSwitch;
use crate::config::board::Board;
use crate::config::scenario::Scenario;
use crate::elf::FirmwareImage;
use crate::link::Link;
use crate::link::defmt::DefmtSource;
use crate::link::serial::SerialWire;
use crate::outcome::BoardRun;
use crate::session::{RunFailure, run_session};

/// Drives boards over a serial line (`runner = "uart"`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UartDriver;

impl BoardDriver for UartDriver {
    fn run(
        &self,
        board: &Board,
        scenario: &Scenario,
        image: &FirmwareImage,
        model_crc: u32,
        kill: &KillSwitch,
        on_flashed: OnFlashed,
    ) -> BoardRun {
        run_on_uart(board, scenario, image, model_crc, kill, on_flashed)
    }

    fn flash_phase(&self) -> Option<&'static str> {
        Some("the flash command")
    }
}

/// Runs `scenario` on a board reached over a serial line (runner `uart`):
/// flashes it with the board's `flash_command` (if it has one), opens
/// `serial_port` and drives the session over it. `flashed` is called once
/// the firmware is on the board: the scenario's time limit starts there.
pub fn run_on_uart(
    board: &Board,
    scenario: &Scenario,
    image: &FirmwareImage,
    model_crc: u32,
    kill: &KillSwitch,
    flashed: impl FnOnce(),
) -> BoardRun {
    let mut run = BoardRun::new(&scenario.name, &board.name);
    let result = (|| -> Result<(), RunFailure> {
        check_image_board(image, board)?;
        let port = board
            .serial_port
            .as_deref()
            .ok_or_else(|| RunFailure::Start(format!("{} has no serial_port", board.name)))?;
        if let Some(command) = &board.flash_command {
            super::flash_command::run_flash_command(command, board, image, kill, &mut run.logs)
                .map_err(|e| RunFailure::Start(e.to_string()))?;
        }
        flashed();
        let baud = board.uart.as_ref().map_or(115_200, |u| u.baud);
        let wire = SerialWire::open(port, baud, None)?;
        let defmt = DefmtSource::of(image);
        let mut link = Link::over(Box::new(wire));
        link.cancel_with(kill.clone());
        link.read_defmt(defmt.reader());
        let session = run_session(&mut link, board, scenario, model_crc, &mut run);
        run.defmt = link.take_defmt();
        run.logs.append(&mut link.logs);
        session
    })();
    conclude(run, result, kill, scenario)
}
