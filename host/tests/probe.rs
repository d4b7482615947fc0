//! The probe-rs runner without hardware: probe selection and its errors,
//! every real board's chip against probe-rs's target database, flash
//! progress lines, `TargetMemory` over a probe-rs session on probe-rs's
//! `FakeProbe`, and the orchestrator's per-board lock.
//!
//! What needs a board (flashing, reset, a whole RTT session) is not here:
//! `FakeProbe` cannot flash (its byte writes are unimplemented) and its
//! memory is the ELF's loadable bytes, read-only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hilt::cancel::KillSwitch;
use hilt::config::board::{Board, ProbeSelector, RunnerKind, load_all};
use hilt::driver::probe_rs::{
    AttachedProbe, FlashReport, ProbeError, ProbeMemory, attach, check_chip, choose_probe,
    firmware_core, list_probes, open_probe, run_on_probe_with, selector_matches, start,
};
use hilt::link::rtt::{Rtt, RttError};
use hilt::memory::{MemoryError, TargetMemory};
use hilt::orchestrate::{Job, board_lock, run_built};
use hilt::outcome::Outcome;
use probe_rs::flashing::{ProgressEvent, ProgressOperation};
use probe_rs::integration::{FakeProbe, ProbeLister};
use probe_rs::probe::list::{Lister, ProbeListItem};
use probe_rs::probe::{
    DebugProbe, DebugProbeError, DebugProbeInfo, DebugProbeSelector, ProbeCreationError,
    ProbeFactory,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn boards() -> Vec<Board> {
    load_all(&repo().join("boards")).unwrap()
}

fn board(name: &str) -> Board {
    boards().into_iter().find(|b| b.name == name).unwrap()
}

fn probe(vid: u16, pid: u16, serial: Option<&str>, id: &str) -> AttachedProbe {
    AttachedProbe {
        identifier: id.into(),
        vid,
        pid,
        serial: serial.map(str::to_string),
    }
}

fn selector(s: &str) -> ProbeSelector {
    s.parse().unwrap()
}

// ---------------------------------------------------------------- selection

#[test]
fn selectors_match_on_ids_and_optional_serial() {
    let jlink = probe(0x1366, 0x1015, Some("000683000000"), "J-Link");
    assert!(selector_matches(&selector("1366:1015"), &jlink));
    assert!(selector_matches(
        &selector("1366:1015:000683000000"),
        &jlink
    ));
    assert!(!selector_matches(&selector("1366:1015:999"), &jlink));
    assert!(!selector_matches(&selector("1366:1051"), &jlink));
    assert!(!selector_matches(&selector("0483:1015"), &jlink));
    // A serial in the selector never matches a probe that reports none.
    let anonymous = probe(0x1366, 0x1015, None, "J-Link");
    assert!(!selector_matches(&selector("1366:1015:1"), &anonymous));
    // Old ST-LINKs report binary serials; the hex form names them too.
    let stlink = probe(0x0483, 0x374b, Some("\u{1}\u{2}A"), "STLink V2-1");
    assert!(selector_matches(&selector("0483:374b:010241"), &stlink));
}

#[test]
fn the_board_probe_is_chosen_from_the_attached_ones() {
    let nucleo = board("nucleo-h743zi"); // 0483:374b, no serial
    let attached = [
        probe(0x1366, 0x1015, Some("683"), "J-Link"),
        probe(0x0483, 0x374b, Some("066DFF"), "STLink V2-1"),
    ];
    let chosen = choose_probe(&nucleo, &attached).unwrap();
    assert_eq!(chosen.serial.as_deref(), Some("066DFF"));
}

#[test]
fn no_matching_probe_names_the_board_and_lists_what_is_attached() {
    let nrf = board("nrf52840-dk"); // 1366:1015
    let err = choose_probe(&nrf, &[]).unwrap_err();
    assert!(matches!(err, ProbeError::NotAttached { .. }));
    assert_eq!(
        err.to_string(),
        "nrf52840-dk: no probe matches 1366:1015; attached probes: none"
    );
    let attached = [
        probe(0x0483, 0x374b, Some("066DFF"), "STLink V2-1"),
        probe(0x1366, 0x1051, None, "J-Link"),
    ];
    let err = choose_probe(&nrf, &attached).unwrap_err().to_string();
    assert_eq!(
        err,
        "nrf52840-dk: no probe matches 1366:1015; attached probes: \
         0483:374b:066DFF (STLink V2-1), 1366:1051 (J-Link)"
    );
}

#[test]
fn two_identical_probes_need_a_serial_in_the_board() {
    let mut disco = board("stm32f746g-disco");
    let attached = [
        probe(0x0483, 0x374b, Some("AAA"), "STLink V2-1"),
        probe(0x0483, 0x374b, Some("BBB"), "STLink V2-1"),
    ];
    let err = choose_probe(&disco, &attached).unwrap_err().to_string();
    assert!(
        err.starts_with("stm32f746g-disco: 2 probes match 0483:374b"),
        "{err}"
    );
    assert!(err.contains("VID:PID:SERIAL"), "{err}");
    disco.probe = Some(selector("0483:374b:BBB"));
    assert_eq!(
        choose_probe(&disco, &attached).unwrap().serial.as_deref(),
        Some("BBB")
    );
}

#[test]
fn a_virtual_board_has_no_probe() {
    let err = choose_probe(&board("qemu-mps2-an386"), &[]).unwrap_err();
    assert!(matches!(err, ProbeError::NoSelector { .. }), "{err}");
}

// ------------------------------------------------------ boards vs probe-rs

#[test]
fn every_real_board_names_a_chip_probe_rs_knows_with_matching_memory() {
    let real: Vec<Board> = boards()
        .into_iter()
        .filter(|b| b.runner == RunnerKind::ProbeRs)
        .collect();
    assert_eq!(real.len(), 4);
    for b in &real {
        let target = check_chip(b).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Some(&target.name), b.chip.as_ref());
        // The firmware runs on the core that sees the board's RAM.
        let core = &target.cores[firmware_core(b, &target)];
        let expected = if b.name == "nrf5340-dk" {
            "application"
        } else {
            "main"
        };
        assert_eq!(core.name, expected, "{}", b.name);
    }
}

#[test]
fn wrong_chip_names_and_memory_are_reported() {
    let mut b = board("nrf52840-dk");
    b.chip = Some("nRF52999_xxAA".into());
    let err = check_chip(&b).unwrap_err().to_string();
    assert!(
        err.starts_with("nrf52840-dk: probe-rs does not know chip \"nRF52999_xxAA\""),
        "{err}"
    );
    // probe-rs would accept a unique prefix; a board must name the chip.
    b.chip = Some("nRF52840".into());
    let err = check_chip(&b).unwrap_err().to_string();
    assert!(err.contains("nRF52840_xxAA"), "{err}");
    b.chip = Some("nRF52840_xxAA".into());
    b.memory[1].length = 0x80000; // 512 KiB of RAM: the chip has 256
    let err = check_chip(&b).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "nrf52840-dk: region RAM 0x20000000..0x20080000 is not RAM of nRF52840_xxAA"
        ),
        "{err}"
    );
    b.chip = None;
    assert!(matches!(check_chip(&b), Err(ProbeError::NoChip { .. })));
}

// ------------------------------------------------------------ flash report

#[test]
fn flashing_progress_is_a_few_lines_per_phase() {
    let mut report = FlashReport::new("nrf52840-dk");
    let events = [
        ProgressEvent::AddProgressBar {
            operation: ProgressOperation::Erase,
            total: Some(8192),
        },
        ProgressEvent::Started(ProgressOperation::Erase),
        ProgressEvent::Progress {
            operation: ProgressOperation::Erase,
            size: 4096,
            time: Duration::from_millis(5),
        },
        ProgressEvent::Progress {
            operation: ProgressOperation::Erase,
            size: 4096,
            time: Duration::from_millis(5),
        },
        ProgressEvent::Finished(ProgressOperation::Erase),
        ProgressEvent::Started(ProgressOperation::Program),
        ProgressEvent::Progress {
            operation: ProgressOperation::Program,
            size: 100,
            time: Duration::from_millis(5),
        },
        ProgressEvent::Failed(ProgressOperation::Program),
    ];
    let lines: Vec<String> = events
        .iter()
        .filter_map(|e| report.line(e))
        .map(|l| l.split(" (").next().unwrap().to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "[nrf52840-dk] erasing 8 KiB",
            "[nrf52840-dk] erasing 50%",
            "[nrf52840-dk] erasing 75%",
            "[nrf52840-dk] erasing done",
            "[nrf52840-dk] programming",
            "[nrf52840-dk] programming FAILED",
        ]
    );
}

// ------------------------------------------------- a hand-made firmware ELF

/// A minimal ARM ELF32: one loadable `.text` of `text` at `base`, a `.hilt_meta`
/// for `board`, and the symbols `elf::inspect` needs. Enough for hilt's ELF
/// reader and for probe-rs's `FakeProbe`, which serves loadable bytes as
/// target memory.
fn tiny_elf(board: &str, base: u32, text: &[u8]) -> Vec<u8> {
    let meta = format!("hilt-meta:1;board={board}\0").into_bytes();
    let strtab = b"\0_SEGGER_RTT\0__hilt_arena_start\0__hilt_arena_end\0".to_vec();
    let shstrtab = b"\0.text\0.hilt_meta\0.symtab\0.strtab\0.shstrtab\0".to_vec();
    let symbol = |name: u32, value: u32| {
        let mut s = Vec::new();
        s.extend(name.to_le_bytes());
        s.extend(value.to_le_bytes());
        s.extend(0u32.to_le_bytes());
        s.extend([0x11, 0]); // global object
        s.extend(0xfff1u16.to_le_bytes()); // absolute
        s
    };
    let mut symtab = vec![0u8; 16];
    symtab.extend(symbol(1, 0x2000_0000));
    symtab.extend(symbol(13, 0x2000_1000));
    symtab.extend(symbol(32, 0x2000_2000));

    let mut file = vec![0u8; 52 + 32];
    let place = |file: &mut Vec<u8>, data: &[u8]| {
        while !file.len().is_multiple_of(4) {
            file.push(0);
        }
        let at = file.len() as u32;
        file.extend_from_slice(data);
        at
    };
    let text_at = place(&mut file, text);
    let meta_at = place(&mut file, &meta);
    let symtab_at = place(&mut file, &symtab);
    let strtab_at = place(&mut file, &strtab);
    let shstrtab_at = place(&mut file, &shstrtab);
    let shoff = place(&mut file, &[]);
    // name, type, flags, addr, offset, size, link, info, align, entsize
    let sections: [[u32; 10]; 6] = [
        [0; 10],
        [1, 1, 6, base, text_at, text.len() as u32, 0, 0, 4, 0],
        [7, 1, 0, 0, meta_at, meta.len() as u32, 0, 0, 1, 0],
        [18, 2, 0, 0, symtab_at, symtab.len() as u32, 4, 1, 4, 16],
        [26, 3, 0, 0, strtab_at, strtab.len() as u32, 0, 0, 1, 0],
        [34, 3, 0, 0, shstrtab_at, shstrtab.len() as u32, 0, 0, 1, 0],
    ];
    for s in sections {
        for w in s {
            file.extend(w.to_le_bytes());
        }
    }
    let mut header = Vec::new();
    header.extend(b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0");
    header.extend(2u16.to_le_bytes()); // executable
    header.extend(40u16.to_le_bytes()); // ARM
    header.extend(1u32.to_le_bytes());
    header.extend(base.to_le_bytes()); // entry
    header.extend(52u32.to_le_bytes()); // program headers
    header.extend(shoff.to_le_bytes());
    header.extend(0x0500_0400u32.to_le_bytes()); // EABI5, hard float
    for half in [52u16, 32, 1, 40, 6, 5] {
        header.extend(half.to_le_bytes());
    }
    let len = text.len() as u32;
    for w in [1, text_at, base, base, len, len, 5, 4] {
        header.extend(w.to_le_bytes());
    }
    file[..header.len()].copy_from_slice(&header);
    file
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn the_hand_made_elf_reads_as_hilt_firmware() {
    let path = temp_file("inspect.elf", &tiny_elf("nrf52840-dk", 0, &[1, 2, 3, 4]));
    let image = hilt::elf::inspect(&path).unwrap();
    assert_eq!(image.board, "nrf52840-dk");
    assert_eq!(image.rtt_address, Some(0x2000_0000));
    assert_eq!(image.arena, (0x2000_1000, 0x2000_2000));
}

// ------------------------------------------------- FakeProbe-backed session

/// Makes `DebugProbeInfo`s for the fake lister; opening goes through the
/// lister, not here.
#[derive(Debug)]
struct FakeFactory;

impl std::fmt::Display for FakeFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fake")
    }
}

impl ProbeFactory for FakeFactory {
    fn open(&self, _: &DebugProbeSelector) -> Result<Box<dyn DebugProbe>, DebugProbeError> {
        Err(DebugProbeError::ProbeCouldNotBeCreated(
            ProbeCreationError::NotFound,
        ))
    }

    fn list_probes(&self) -> Vec<ProbeListItem> {
        Vec::new()
    }
}

static FACTORY: FakeFactory = FakeFactory;

/// A lister that "sees" the given probes and opens each as a `FakeProbe`
/// with a mocked core whose memory is `elf`'s loadable bytes.
#[derive(Debug)]
struct FakeLister {
    probes: Vec<AttachedProbe>,
    elf: PathBuf,
}

impl FakeLister {
    fn info(p: &AttachedProbe) -> DebugProbeInfo {
        DebugProbeInfo::new(
            p.identifier.clone(),
            p.vid,
            p.pid,
            p.serial.clone(),
            &FACTORY,
            None,
            false,
        )
    }
}

impl ProbeLister for FakeLister {
    fn open(
        &self,
        selector: &DebugProbeSelector,
    ) -> Result<probe_rs::probe::Probe, DebugProbeError> {
        if self
            .probes
            .iter()
            .any(|p| selector.matches_probe(&Self::info(p)))
        {
            Ok(FakeProbe::with_mocked_core_and_binary(&self.elf).into_probe())
        } else {
            Err(DebugProbeError::ProbeCouldNotBeCreated(
                ProbeCreationError::NotFound,
            ))
        }
    }

    fn list_with_access(&self, selector: Option<&DebugProbeSelector>) -> Vec<ProbeListItem> {
        self.probes
            .iter()
            .map(Self::info)
            .filter(|i| selector.is_none_or(|s| s.matches_probe(i)))
            .map(ProbeListItem::accessible)
            .collect()
    }
}

fn fake_lister(probes: Vec<AttachedProbe>, text: &[u8]) -> Lister {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let elf = temp_file(&format!("fake-{n}.elf"), &tiny_elf("fake", FLASH, text));
    Lister::with_lister(Box::new(FakeLister { probes, elf }))
}

/// Where the STM32F7's flash starts: the fake session's ELF goes there.
const FLASH: u32 = 0x0800_0000;

#[test]
fn probe_memory_reads_a_fake_probe_session() {
    // STM32F746G-DISCO attaches on FakeProbe's mocked core (the nRF boards'
    // vendor sequences talk to access ports the fake does not have).
    let text: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(7)).collect();
    let lister = fake_lister(
        vec![
            probe(0x1366, 0x1015, Some("683"), "J-Link"),
            probe(0x0483, 0x374b, Some("066DFF"), "STLink V2-1"),
        ],
        &text,
    );
    assert_eq!(list_probes(&lister).len(), 2);
    let board = board("stm32f746g-disco");
    let probe = open_probe(&board, &lister).unwrap();
    let mut session = attach(&board, probe).unwrap();
    let index = firmware_core(&board, session.target());
    let core = session.core(index).unwrap();
    let kill = KillSwitch::default();
    let mut memory = ProbeMemory::new(core, kill.clone());

    let mut buf = [0u8; 16];
    memory.read(FLASH + 8, &mut buf).unwrap();
    assert_eq!(buf, text[8..24]);
    memory.read(FLASH + 3, &mut buf[..5]).unwrap(); // unaligned
    assert_eq!(buf[..5], text[3..8]);
    assert_eq!(
        memory.read_u32(FLASH + 4).unwrap(),
        u32::from_le_bytes(text[4..8].try_into().unwrap())
    );
    // Word writes reach the core (the fake accepts and drops them).
    memory.write_u32(0x2000_0010, 0xdead_beef).unwrap();
    memory
        .write(0x2000_0020, &[1, 2, 3, 4, 5, 6, 7, 8])
        .unwrap();
    // pause/resume are no-ops on a Cortex-M: memory is read while it runs.
    memory.pause().unwrap();
    memory.resume().unwrap();

    // RAM the firmware never initialised holds no RTT block: a clear error
    // after the wait, not a hang.
    let err = Rtt::attach(&mut memory, 0x2000_0000, Duration::from_millis(50)).unwrap_err();
    assert!(
        matches!(
            err,
            RttError::NotFound {
                addr: 0x2000_0000,
                ..
            }
        ),
        "{err}"
    );

    // A timed-out run ends at its next access.
    kill.fire();
    let err = memory.read(FLASH, &mut buf).unwrap_err();
    assert!(matches!(err, MemoryError::Disconnected(_)), "{err}");
    assert!(err.to_string().contains("cancelled"), "{err}");
}

#[test]
fn a_core_that_does_not_come_out_of_reset_is_a_clear_error() {
    // The mocked core never reports a reset, as a board held in reset by a
    // jumper would not.
    let board = board("nucleo-h743zi");
    let lister = fake_lister(vec![probe(0x0483, 0x374b, None, "STLink V2-1")], &[0; 8]);
    let mut session = attach(&board, open_probe(&board, &lister).unwrap()).unwrap();
    let mut core = session.core(0).unwrap();
    let err = start(&board, &mut core, 0x2400_0000)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("nucleo-h743zi: cannot reset and halt the core: "),
        "{err}"
    );
    assert!(err.contains("timeout"), "{err}");
}

#[test]
fn opening_picks_the_selected_probe_and_reports_others() {
    let lister = fake_lister(vec![probe(0x0483, 0x374b, None, "STLink")], &[0; 8]);
    let err = open_probe(&board("nrf52840-dk"), &lister)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "nrf52840-dk: no probe matches 1366:1015; attached probes: 0483:374b (STLink)"
    );
}

// ------------------------------------------------------------- whole runs

fn scenario(timeout: Duration) -> Arc<hilt::config::scenario::Scenario> {
    let mut s = hilt::config::scenario::load(
        &repo().join("scenarios/smoke_reshape.toml"),
        &hilt::conformance::locate_all(&repo()),
    )
    .unwrap();
    s.timeout = timeout;
    Arc::new(s)
}

/// A board whose probe is never attached anywhere.
fn absent_board() -> Board {
    let mut b = board("nrf52840-dk");
    b.probe = Some(selector("dead:beef"));
    b
}

#[test]
fn a_run_without_its_probe_ends_in_a_clear_error() {
    let board = absent_board();
    let elf = temp_file("absent.elf", &tiny_elf(&board.name, 0, &[0; 8]));
    let image = hilt::elf::inspect(&elf).unwrap();
    let lister = fake_lister(vec![probe(0x0483, 0x374b, Some("066DFF"), "STLink")], &[]);
    let mut flashed = false;
    let run = run_on_probe_with(
        &lister,
        &board,
        &scenario(Duration::from_secs(5)),
        &image,
        0,
        &KillSwitch::default(),
        || flashed = true,
    );
    assert!(!flashed);
    assert_eq!(
        run.outcome,
        Outcome::Error(
            "nrf52840-dk: no probe matches dead:beef; attached probes: 0483:374b:066DFF (STLink)"
                .into()
        )
    );

    // Firmware for another board is refused before any probe is touched.
    let other = hilt::elf::inspect(&temp_file(
        "other.elf",
        &tiny_elf("nucleo-h743zi", 0, &[0; 8]),
    ))
    .unwrap();
    let run = run_on_probe_with(
        &lister,
        &board,
        &scenario(Duration::from_secs(5)),
        &other,
        0,
        &KillSwitch::default(),
        || {},
    );
    match run.outcome {
        Outcome::Error(m) => assert!(
            m.ends_with("was built for nucleo-h743zi, not nrf52840-dk"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn runs_on_one_real_board_wait_for_its_lock_and_others_do_not() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // Another board's lock is another lock.
        let nrf = absent_board();
        let mut disco = board("stm32f746g-disco");
        disco.probe = Some(selector("dead:beef"));
        let elf = |b: &Board| temp_file(&format!("{}.elf", b.name), &tiny_elf(&b.name, 0, &[0; 8]));
        let jobs = vec![
            (
                Job {
                    scenario: scenario(Duration::from_secs(5)),
                    board: nrf.clone(),
                },
                Ok(elf(&nrf)),
            ),
            (
                Job {
                    scenario: scenario(Duration::from_secs(5)),
                    board: disco.clone(),
                },
                Ok(elf(&disco)),
            ),
        ];
        let held = board_lock(&nrf.name).lock_owned().await;
        assert!(Arc::ptr_eq(&board_lock(&nrf.name), &board_lock(&nrf.name)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(run_built(jobs, 4, move |r| {
            let _ = tx.send(r.board.clone());
        }));
        // The other board finishes while nrf52840-dk's lock is held...
        let first = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap();
        assert_eq!(first.as_deref(), Some("stm32f746g-disco"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(rx.try_recv().is_err(), "ran while its board was locked");
        // ...and the locked one runs once the lock is free.
        drop(held);
        let results = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(results.len(), 2);
        for r in &results {
            match &r.outcome {
                // No probe: the board is unreachable, not the model wrong.
                Outcome::Error(m) => assert!(
                    r.offline
                        && m.starts_with(&format!(
                            "board offline: {}: no probe matches dead:beef",
                            r.board
                        )),
                    "{m}"
                ),
                other => panic!("{other:?}"),
            }
        }
    });
}

#[test]
fn hilt_boards_lists_attached_probes_quickly() {
    let start = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(repo())
        .arg("boards")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nucleo-h743zi"), "{text}");
    // CI machines have no probe; a developer's may.
    assert!(
        text.contains("\nno probes attached\n") || text.contains("\nattached probes:\n"),
        "{text}"
    );
    // USB listing only, no probe opened: well under a second in practice.
    assert!(start.elapsed() < Duration::from_secs(10));
}
