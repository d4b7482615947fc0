//! The decoder on bytes: ELFs holding a defmt table written here (the
//! symbols defmt's macros emit, by hand), frames encoded here as the
//! firmware's logger encodes them, and an RTT control block in fake memory.

use std::path::Path;

use object::write::{Object, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};

use super::*;
use crate::memory::FakeMemory;

/// One log statement of the table: its index (the symbol's address in
/// `.defmt`), defmt's tag for it and its format string.
type Statement = (u64, &'static str, &'static str);

/// The statements the tests log with.
const STATEMENTS: &[Statement] = &[
    (1, "defmt_timestamp", "{=u64:us}"),
    (2, "defmt_info", "model loaded: {=u32} bytes"),
    (3, "defmt_error", "invoke failed: code {=u8}"),
    (4, "defmt_println", "plain"),
];

/// An ELF (a relocatable object: the decoder reads symbols, not segments)
/// with a `.defmt` section holding `statements`, and the version and
/// encoding symbols when given.
fn elf(version: Option<&str>, encoding: Option<&str>, statements: &[Statement]) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Little);
    let section = obj.add_section(Vec::new(), b".defmt".to_vec(), SectionKind::ReadOnlyData);
    obj.append_section_data(section, &[0; 16], 1);
    let mut add = |name: String, section: SymbolSection, value: u64| {
        obj.add_symbol(Symbol {
            name: name.into_bytes(),
            value,
            size: 1,
            kind: SymbolKind::Data,
            scope: SymbolScope::Compilation,
            weak: false,
            section,
            flags: SymbolFlags::None,
        });
    };
    for &(index, tag, data) in statements {
        let name = serde_json::json!({
            "package": "demo",
            "tag": tag,
            "data": data,
            "disambiguator": index.to_string(),
            "crate_name": "demo",
        });
        add(name.to_string(), SymbolSection::Section(section), index);
    }
    if let Some(v) = version {
        add(format!("_defmt_version_ = {v}"), SymbolSection::Absolute, 0);
    }
    if let Some(e) = encoding {
        add(
            format!("_defmt_encoding_ = {e}"),
            SymbolSection::Absolute,
            0,
        );
    }
    obj.write().unwrap()
}

fn table(encoding: &str) -> DefmtTable {
    DefmtTable::parse(
        Path::new("demo.elf"),
        &elf(Some("4"), Some(encoding), STATEMENTS),
    )
    .unwrap()
    .unwrap()
}

/// A frame's bytes before encoding: the statement's index, the timestamp
/// (microseconds), then the arguments.
fn frame(index: u16, micros: u64, args: &[u8]) -> Vec<u8> {
    let mut bytes = index.to_le_bytes().to_vec();
    bytes.extend_from_slice(&micros.to_le_bytes());
    bytes.extend_from_slice(args);
    bytes
}

/// rzCOBS, as the firmware's logger writes a frame: groups of seven bytes
/// with a byte whose bits say which of them are zeros (only the others are
/// sent), or runs of seven or more non-zero bytes sent whole, ended by a
/// byte giving the run's length (the zero after it implied); then 0x00.
fn rzcobs(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let run = data[at..].iter().take_while(|&&b| b != 0).count();
        if run >= 7 {
            let n = run.min(134);
            out.extend_from_slice(&data[at..at + n]);
            if n == 134 {
                out.push(0xff);
                at += n;
            } else {
                out.push(0x80 | (n - 7) as u8);
                at += n + 1;
            }
            continue;
        }
        let mut zeros = 0u8;
        for i in 0..7 {
            match data.get(at + i) {
                Some(&b) if b != 0 => out.push(b),
                _ => zeros |= 1 << i,
            }
        }
        out.push(zeros);
        at += 7;
    }
    out.push(0);
    out
}

fn info(micros: u64, bytes: u32) -> Vec<u8> {
    rzcobs(&frame(2, micros, &bytes.to_le_bytes()))
}

fn decode(table: &DefmtTable, chunks: &[&[u8]]) -> DefmtLog {
    let mut decoder = DefmtDecoder::new(table);
    for chunk in chunks {
        decoder.push(chunk);
    }
    decoder.finish()
}

#[test]
fn frames_become_lines_with_their_timestamp_and_level_however_the_bytes_arrive() {
    let table = table("rzcobs");
    assert!(table.has_timestamp());
    let mut stream = vec![0];
    stream.extend(info(1_234, 2_468));
    stream.extend(rzcobs(&frame(3, 2_000_001, &[7])));
    stream.extend(rzcobs(&frame(4, 3_500_000, &[])));
    let whole = decode(&table, &[&stream]);
    let expected = [
        (Some("0.001234"), Some("info"), "model loaded: 2468 bytes"),
        (Some("2.000001"), Some("error"), "invoke failed: code 7"),
        (Some("3.500000"), None, "plain"),
    ];
    let got: Vec<_> = whole
        .lines
        .iter()
        .map(|l| (l.timestamp.as_deref(), l.level, l.message.as_str()))
        .collect();
    assert_eq!(got, expected);
    assert!(whole.problems.is_empty(), "{:?}", whole.problems);
    // A byte at a time (a ring read mid-frame) gives the same lines.
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(decode(&table, &bytes), whole);
    assert_eq!(
        whole.lines[0].to_string(),
        "0.001234 INFO  model loaded: 2468 bytes"
    );
    assert_eq!(whole.lines[2].to_string(), "3.500000       plain");
}

#[test]
fn long_runs_of_non_zero_bytes_decode() {
    // A timestamp and argument without zero bytes: runs of seven and more.
    let table = table("rzcobs");
    let micros = 0x0102_0304_0506_0708;
    let log = decode(&table, &[&info(micros, 0x0a0b_0c0d)]);
    assert_eq!(log.lines.len(), 1, "{:?}", log.problems);
    assert_eq!(log.lines[0].message, "model loaded: 168496141 bytes");
    let seconds = micros / 1_000_000;
    assert_eq!(
        log.lines[0].timestamp.as_deref(),
        Some(format!("{seconds}.{:06}", micros % 1_000_000).as_str())
    );
}

#[test]
fn a_damaged_frame_is_named_and_the_next_one_still_decodes() {
    let table = table("rzcobs");
    let mut stream = info(10, 1);
    // An index the table does not have.
    stream.extend(rzcobs(&frame(99, 20, &[])));
    stream.extend(info(30, 3));
    let log = decode(&table, &[&stream]);
    let messages: Vec<_> = log.lines.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        messages,
        ["model loaded: 1 bytes", "model loaded: 3 bytes"],
        "{log:?}"
    );
    assert_eq!(log.problems.len(), 1, "{:?}", log.problems);
    let problem = &log.problems[0];
    assert!(
        problem.starts_with("defmt frame 2 (")
            && problem.contains("could not be decoded with demo.elf's table (malformed data)")
            && problem.ends_with("skipped; decoding goes on with the next frame"),
        "{problem}"
    );
}

#[test]
fn a_log_that_ends_inside_a_frame_says_so() {
    let table = table("rzcobs");
    let whole = info(10, 1);
    let cut = &whole[..whole.len() - 3];
    let log = decode(&table, &[&info(5, 9), cut]);
    assert_eq!(log.lines.len(), 1);
    assert_eq!(
        log.problems,
        [format!(
            "the defmt log ends inside a frame ({} bytes after the last whole one, not decoded)",
            cut.len()
        )]
    );
}

#[test]
fn past_sixteen_damaged_frames_one_line_counts_the_rest() {
    let table = table("rzcobs");
    let bad: Vec<u8> = (0..20).flat_map(|_| rzcobs(&frame(77, 1, &[]))).collect();
    let log = decode(&table, &[&bad, &info(1, 1)]);
    assert_eq!(log.lines.len(), 1);
    assert_eq!(log.problems.len(), 17);
    assert_eq!(log.problems[16], "4 more defmt frames could not be decoded");
}

#[test]
fn raw_frames_decode_until_one_cannot_then_the_rest_is_counted() {
    let table = table("raw");
    let mut stream = frame(2, 1_000, &5u32.to_le_bytes());
    stream.extend(frame(50, 2_000, &[]));
    stream.extend(frame(2, 3_000, &6u32.to_le_bytes()));
    let log = decode(&table, &[&stream[..5], &stream[5..], &[1, 2, 3]]);
    assert_eq!(log.lines.len(), 1);
    assert_eq!(log.lines[0].message, "model loaded: 5 bytes");
    assert_eq!(log.problems.len(), 2, "{:?}", log.problems);
    assert!(
        log.problems[0].contains("the firmware's defmt encoding is raw"),
        "{}",
        log.problems[0]
    );
    assert_eq!(
        log.problems[1],
        "3 more bytes of defmt log arrived after it, not decoded"
    );
}

#[test]
fn an_elf_without_defmt_has_no_table() {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Little);
    obj.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
    let plain = obj.write().unwrap();
    assert!(
        DefmtTable::parse(Path::new("plain.elf"), &plain)
            .unwrap()
            .is_none()
    );
    // A `.defmt` section without defmt's version symbol is not "no defmt".
    let bytes = elf(None, None, &[]);
    let e = DefmtTable::parse(Path::new("half.elf"), &bytes).unwrap_err();
    assert_eq!(
        e.to_string(),
        "half.elf: its defmt table cannot be used (found `.defmt` metadata sections, but no defmt version symbol); its defmt log is not decoded"
    );
}

#[test]
fn a_table_of_another_defmt_version_is_one_clear_line() {
    let bytes = elf(Some("2"), Some("rzcobs"), STATEMENTS);
    let e = DefmtTable::parse(Path::new("old.elf"), &bytes).unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.starts_with(
            "old.elf: its defmt table cannot be used (defmt wire format version mismatch: firmware is using 2"
        ) && text.ends_with("its defmt log is not decoded"),
        "{text}"
    );
    assert!(
        DefmtTable::load(Path::new("/nonexistent/fw.elf"))
            .unwrap_err()
            .to_string()
            .starts_with("/nonexistent/fw.elf: cannot read it for its defmt table:")
    );
}

// ---------------------------------------------------------------------------
// The reader, on an RTT control block in fake memory
// ---------------------------------------------------------------------------

const RAM: u32 = 0x2000_0000;
const BLOCK: u32 = RAM;
const RING: u32 = 64;

/// A control block at `BLOCK` with the up channels `names` (rings of
/// `RING` bytes) and no down channel.
fn memory_with_channels(names: &[&str]) -> FakeMemory {
    let mut mem = FakeMemory::new(RAM, 0x1000);
    mem.write(BLOCK, b"SEGGER RTT\0\0\0\0\0\0").unwrap();
    mem.write_u32(BLOCK + 16, names.len() as u32).unwrap();
    mem.write_u32(BLOCK + 20, 0).unwrap();
    for (i, name) in names.iter().enumerate() {
        let i = i as u32;
        let descriptor = BLOCK + 24 + 24 * i;
        let name_at = RAM + 0x400 + 32 * i;
        let ring = RAM + 0x800 + RING * i;
        mem.write(name_at, format!("{name}\0").as_bytes()).unwrap();
        for (k, word) in [name_at, ring, RING, 0, 0, 0].into_iter().enumerate() {
            mem.write_u32(descriptor + 4 * k as u32, word).unwrap();
        }
    }
    mem
}

/// The firmware writes `bytes` to up channel `index` (they fit).
fn firmware_writes(mem: &mut FakeMemory, index: u32, bytes: &[u8]) {
    let descriptor = BLOCK + 24 + 24 * index;
    let ring = mem.read_u32(descriptor + 4).unwrap();
    let mut write = mem.read_u32(descriptor + 12).unwrap();
    for &b in bytes {
        mem.write(ring + write, &[b]).unwrap();
        write = (write + 1) % RING;
    }
    mem.write_u32(descriptor + 12, write).unwrap();
}

#[test]
fn the_reader_finds_the_channel_by_name_and_decodes_what_it_reads() {
    let table = table("rzcobs");
    let mut mem = FakeMemory::new(RAM, 0x1000);
    let mut reader = DefmtReader::new(&table, BLOCK);
    assert!(reader.wants_look(false));
    // Not set up yet: nothing read, nothing said.
    reader.look(&mut mem);
    let mut mem = memory_with_channels(&["hilt", "log", "defmt"]);
    firmware_writes(&mut mem, 2, &[0]);
    firmware_writes(&mut mem, 2, &info(100, 42));
    // Another channel's bytes are not the log's.
    firmware_writes(&mut mem, 0, &info(1, 1));
    reader.look(&mut mem);
    // The firmware now waits while the ring is full rather than trim.
    assert_eq!(mem.read_u32(BLOCK + 24 + 24 * 2 + 20).unwrap() & 0b11, 2);
    assert_eq!(mem.read_u32(BLOCK + 24 + 20).unwrap() & 0b11, 0);
    assert!(!reader.wants_look(false));
    assert!(reader.wants_look(true));
    // Past the ring's end: the read wraps.
    for micros in [200, 300, 400] {
        firmware_writes(&mut mem, 2, &info(micros, 43));
        reader.look(&mut mem);
    }
    let log = reader.finish();
    assert!(log.problems.is_empty(), "{:?}", log.problems);
    let got: Vec<_> = log
        .lines
        .iter()
        .map(|l| (l.timestamp.clone().unwrap(), l.message.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("0.000100".to_string(), "model loaded: 42 bytes".to_string()),
            ("0.000200".into(), "model loaded: 43 bytes".into()),
            ("0.000300".into(), "model loaded: 43 bytes".into()),
            ("0.000400".into(), "model loaded: 43 bytes".into()),
        ]
    );
}

#[test]
fn a_control_block_without_the_channel_or_never_set_up_is_said() {
    let table = table("rzcobs");
    let mut mem = memory_with_channels(&["hilt", "log"]);
    let mut reader = DefmtReader::new(&table, BLOCK);
    reader.look(&mut mem);
    assert!(!reader.wants_look(true));
    assert_eq!(
        reader.finish().problems,
        [
            "the firmware's RTT control block at 0x20000000 has no up channel named \"defmt\" (its up channels: hilt, log): no defmt log was read"
        ]
    );
    let mut blank = FakeMemory::new(RAM, 0x1000);
    let mut reader = DefmtReader::new(&table, BLOCK);
    reader.look(&mut blank);
    assert_eq!(
        reader.finish().problems,
        ["the firmware's RTT control block at 0x20000000 was never set up: no defmt log was read"]
    );
    // A block outside memory: the access fails, the reader stops.
    let mut reader = DefmtReader::new(&table, 0x4000_0000);
    reader.look(&mut blank);
    let problems = reader.finish().problems;
    assert!(
        problems.len() == 1
            && problems[0].starts_with(
                "the RTT control block at 0x40000000 cannot be read for the defmt log:"
            ),
        "{problems:?}"
    );
}
