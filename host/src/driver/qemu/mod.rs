//! The QEMU driver: a virtual board is a `qemu-system-arm` process
//! ([`process`]) whose memory the host reaches through its gdbstub; the
//! session runs over RTT in guest RAM, or over the board's UART on a pty.

pub mod process;

use std::time::Duration;

use self::process::{Qemu, QemuError, QemuSerial};
use super::{BoardDriver, OnFlashed, check_image_board, conclude, read_backtrace, wants_backtrace};
use crate::cancel::KillSwitch;
use crate::config::board::{Board, Transport};
use crate::config::scenario::Scenario;
use crate::elf::FirmwareImage;
use crate::link::defmt::DefmtSource;
use crate::link::gdbstub::GdbClient;
use crate::link::rtt::Rtt;
use crate::link::serial::SerialWire;
use crate::link::{Link, LinkError, RttWire};
use crate::memory::TargetMemory;
use crate::observer::Observer;
use crate::outcome::BoardRun;
use crate::outcome::ObservedStep;
use crate::session::{RunFailure, SessionObserver, run_session, run_session_observed};

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
        let mut observer =
            Observer::start(board, image, scenario.canary, &crate::observer::settings())
                .map_err(|e| RunFailure::Observer(e.to_string()))?;
        // A firmware whose interpreter never runs (a calibration loop, a
        // hang on purpose) has no invoke marks: nothing to count or check,
        // said in the run's log rather than left unsaid.
        if observer.as_ref().is_some_and(|o| !o.marked()) {
            run.logs.push(
                "hilt: the firmware has no hilt_mark_* symbols (its interpreter never runs): the QEMU plugin is not loaded, nothing is counted or checked"
                    .to_string(),
            );
            observer = None;
        }
        if let Some(o) = &observer {
            run.timing = Some(o.timing.clone());
        }
        let extra = observer
            .as_ref()
            .map(Observer::qemu_args)
            .unwrap_or_default();
        let mut qemu = Qemu::start_with(settings, &image.path, serial, &extra)
            .map_err(|e| plugin_failure(e, observer.is_some()))?;
        kill.arm(qemu.pid());
        let pty = match serial {
            QemuSerial::Pty => Some(qemu.serial_pty(Duration::from_secs(10)).map_err(start)?),
            QemuSerial::None => None,
        };
        let defmt = DefmtSource::of(image);
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
            None => attach_rtt(&mut gdb, &mut qemu, image, kill)?,
        };
        link.cancel_with(kill.clone());
        link.read_defmt(defmt.reader());
        let session = match observer.as_mut() {
            Some(o) => {
                let mut watching = Watching {
                    observer: o,
                    violations: 0,
                };
                run_session_observed(
                    &mut link,
                    board,
                    scenario,
                    model_crc,
                    &mut run,
                    Some(&mut watching),
                )
            }
            None => run_session(&mut link, board, scenario, model_crc, &mut run),
        };
        run.defmt = link.take_defmt();
        run.logs.append(&mut link.logs);
        drop(link);
        let session = session.map_err(|e| explain_failure(e, &mut qemu, &mut gdb, image, kill));
        if session.as_ref().is_err_and(wants_backtrace) {
            read_backtrace(&mut gdb, image, scenario, &mut run);
        }
        // The first bad access is the cause of whatever failed after it
        // (a wrong output, a crash, a damaged guard).
        let session = match &observer {
            Some(o) => conclude_observed(o, scenario, &mut run, session),
            None => session,
        };
        drop(gdb);
        drop(qemu);
        kill.disarm();
        session
    })();
    conclude(run, result, kill, scenario)
}

/// The RTT link to the firmware. A firmware that ended QEMU before its RTT
/// block was found is said as QEMU's exit, not as a board that went away.
fn attach_rtt<'g>(
    gdb: &'g mut GdbClient,
    qemu: &mut Qemu,
    image: &FirmwareImage,
    kill: &KillSwitch,
) -> Result<Link<'g>, RunFailure> {
    let block = image.rtt_control_block()?;
    match Rtt::attach(
        &mut *gdb as &mut dyn TargetMemory,
        block,
        Duration::from_secs(20),
    ) {
        Ok(rtt) => Ok(Link::over(Box::new(RttWire::new(gdb, rtt)))),
        Err(e) => Err(explain_failure(
            RunFailure::Link(LinkError::Rtt(e)),
            qemu,
            gdb,
            image,
            kill,
        )),
    }
}

/// QEMU did not start: when it was asked to load the plugin, say which
/// QEMU and what it needs (plugin support, QEMU 7.2 or later).
fn plugin_failure(e: QemuError, with_plugin: bool) -> RunFailure {
    let text = e.to_string();
    if with_plugin && (text.contains("plugin") || text.contains("-plugin")) {
        return RunFailure::Start(format!(
            "{} could not load hilt's QEMU plugin ({}): install a QEMU built with TCG plugin support (Debian's qemu-system-arm 7.2 or later has it), or run with --plugin off",
            process::qemu_binary(),
            text.lines().last().unwrap_or(&text).trim()
        ));
    }
    RunFailure::Start(text)
}

/// The session with the QEMU plugin watching.
struct Watching<'o> {
    observer: &'o mut Observer,
    violations: u64,
}

impl SessionObserver for Watching<'_> {
    fn plan_committed(
        &mut self,
        plan: &[crate::outcome::PlannedBuffer],
        scenario: &Scenario,
    ) -> Result<(), RunFailure> {
        self.observer
            .plan_committed(
                plan,
                &scenario.model_file,
                (scenario.schedule, scenario.align),
            )
            .map_err(|e| RunFailure::Observer(e.to_string()))
    }

    fn invoke_done(&mut self, scenario: &Scenario) -> Result<ObservedStep, RunFailure> {
        let inv = self
            .observer
            .next_invoke()
            .map_err(|e| RunFailure::Observer(e.to_string()))?;
        if inv.violations_so_far > self.violations {
            self.violations = inv.violations_so_far;
            let results = self.observer.results();
            let all = self.observer.violations(&results, &scenario.model_file);
            if let Some(first) = all.first() {
                return Err(RunFailure::Access {
                    first: first.to_string(),
                    count: inv.violations_so_far,
                });
            }
        }
        Ok(ObservedStep {
            instructions: inv.total.instructions,
            estimated_cycles: inv.total.estimated_cycles,
            stack_high_water: inv.total.stack_high_water,
            ops: inv.ops,
            engine_instructions: inv.engine_instructions,
        })
    }
}

/// The run's observed figures, and its failure replaced by the first
/// access violation when there was one.
fn conclude_observed(
    observer: &Observer,
    scenario: &Scenario,
    run: &mut crate::outcome::BoardRun,
    session: Result<(), RunFailure>,
) -> Result<(), RunFailure> {
    let results = observer.results();
    let seen = results.invokes.last().map_or(0, |i| i.violations_so_far);
    let violations = observer.violations(&results, &scenario.model_file);
    let count = seen.max(violations.len() as u64);
    if observer.checks() {
        run.access_violations = Some(count);
    }
    if let Some(first) = run.steps.first().and_then(|s| s.observed.as_ref()) {
        run.instructions = Some(first.instructions);
        run.estimated_cycles = Some(first.estimated_cycles);
    }
    run.stack_high_water = results
        .invokes
        .iter()
        .map(|i| i.total.stack_high_water)
        .max();
    run.hotspots = observer.hotspots();
    let first = violations.first().map(ToString::to_string);
    run.violations = violations;
    match (session, first) {
        (Err(RunFailure::Access { first, count }), _) => Err(RunFailure::Access { first, count }),
        (Err(_) | Ok(()), Some(first)) => Err(RunFailure::Access { first, count }),
        (result, None) => result,
    }
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
    // to turn it into an exit status the driver can read (up to 2 s: the
    // plugin writes its results as QEMU ends, and a busy host is slow to
    // reap it). Without one the run would read as a board that stopped
    // answering (board offline) rather than one whose firmware ended it.
    let mut exited = qemu.exit_status();
    for _ in 0..80 {
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
