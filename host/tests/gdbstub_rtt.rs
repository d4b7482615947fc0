//! The host reaches a virtual board's memory through two layers:
//! [`GdbClient`] speaks GDB's remote serial protocol to QEMU's gdbstub, and
//! [`Rtt`] finds the firmware's SEGGER RTT control block in that memory and
//! moves bytes through its ring buffers (what [`Link`] runs hilt-proto
//! over). Neither needs QEMU to be checked: here the GDB client talks to a
//! scripted stub on a local socket, and RTT to a control block built by hand
//! in [`FakeMemory`].
//!
//! Besides the paths that work, each way these layers fail (a refused
//! address, a lost connection, a silent stub, a damaged packet, a missing or
//! corrupt control block) must come out as its own typed error that a run
//! can report, never as a hang or a wrong byte.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use hilt::link::gdbstub::GdbClient;
use hilt::link::rtt::{Channel, Rtt, RttError};
use hilt::link::{Link, LinkError};
use hilt::memory::{FakeMemory, MemoryError, TargetMemory};
use hilt_proto::{MAX_FRAME, Message, encode_frame};

/// Where the target's RAM starts, in both halves of the file.
const RAM: u32 = 0x2000_0000;

/// How long the GDB client waits for the stub: short, so that the tests
/// that wait for nothing stay fast.
const TIMEOUT: Duration = Duration::from_millis(200);

// ---------------------------------------------------------------------------
// A scripted gdbstub
// ---------------------------------------------------------------------------

/// How the scripted stub departs from a well-behaved gdbstub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quirk {
    /// It behaves.
    None,
    /// Reads everything, answers nothing, not even with an ack.
    Mute,
    /// Answers `?` with something that is not a stop reply.
    OddStopReply,
    /// Closes the connection when asked to read memory.
    HangUpOnRead,
    /// Acknowledges memory reads but never answers them.
    IgnoreReads,
    /// Sends memory read replies with a wrong checksum.
    CorruptReads,
    /// Escapes every byte of memory read replies with `}`.
    EscapeReads,
    /// Rejects (`-`) the first this many memory read packets.
    NakReads(usize),
    /// Replies without acknowledging the request first.
    NoAcks,
    /// Answers an interrupt with "the program exited" (`W00`).
    ExitOnInterrupt,
    /// Drops the first connection unanswered (a stub still being set up),
    /// then serves the next one.
    DropFirstConnection,
}

/// The stub's side of the target: its RAM, whether its core runs, and what
/// the client sent.
#[derive(Debug)]
struct Stub {
    memory: Vec<u8>,
    running: bool,
    quirk: Quirk,
    /// Packets received, in order; `^C` stands for an interrupt and `-` for
    /// a NAK of the stub's last reply.
    seen: Vec<String>,
    naks_sent: usize,
    /// The last reply as sent, for a retransmission after a NAK.
    last_reply: Vec<u8>,
}

/// One accepted connection.
#[derive(Debug)]
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    /// The next byte, `None` once the client has gone.
    fn byte(&mut self) -> io::Result<Option<u8>> {
        let mut b = [0u8; 1];
        Ok(match self.reader.read(&mut b)? {
            0 => None,
            _ => Some(b[0]),
        })
    }

    /// A packet's data after its `$`, its checksum checked.
    fn packet(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        self.reader.read_until(b'#', &mut body)?;
        assert_eq!(body.pop(), Some(b'#'), "the client's packet ended early");
        let mut digits = [0u8; 2];
        self.reader.read_exact(&mut digits)?;
        let sent = u8::from_str_radix(std::str::from_utf8(&digits).unwrap(), 16).unwrap();
        assert_eq!(
            sent,
            checksum(&body),
            "checksum of the client's packet {:?}",
            String::from_utf8_lossy(&body)
        );
        Ok(body)
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }
}

fn checksum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |a, &b| a.wrapping_add(b))
}

/// `$body#cc`, `cc` being `sum` in hex.
fn frame_with_checksum(body: &[u8], sum: u8) -> Vec<u8> {
    let mut frame = vec![b'$'];
    frame.extend_from_slice(body);
    frame.extend_from_slice(format!("#{sum:02x}").as_bytes());
    frame
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `addr,len` in hex, as in `m` and `M` packets.
fn address_and_length(text: &str) -> (u32, usize) {
    let (addr, len) = text.split_once(',').expect("addr,len");
    (
        u32::from_str_radix(addr, 16).expect("hex address"),
        usize::from_str_radix(len, 16).expect("hex length"),
    )
}

impl Stub {
    fn range(&self, addr: u32, len: usize) -> Option<std::ops::Range<usize>> {
        let start = addr.checked_sub(RAM)? as usize;
        (start + len <= self.memory.len()).then_some(start..start + len)
    }

    fn reply(&mut self, conn: &mut Conn, frame: Vec<u8>) -> io::Result<()> {
        conn.send(&frame)?;
        self.last_reply = frame;
        Ok(())
    }

    /// Serves one session until the client goes (or a quirk ends it).
    fn serve(&mut self, conn: &mut Conn) -> io::Result<()> {
        while let Some(byte) = conn.byte()? {
            if self.quirk == Quirk::Mute {
                continue;
            }
            match byte {
                b'+' => {}
                b'-' => {
                    self.seen.push("-".into());
                    let again = self.last_reply.clone();
                    conn.send(&again)?;
                }
                0x03 => {
                    self.seen.push("^C".into());
                    // A stopped core has nothing to report.
                    if self.running {
                        self.running = false;
                        let stop: &[u8] = match self.quirk {
                            Quirk::ExitOnInterrupt => b"W00",
                            _ => b"T02thread:01;",
                        };
                        self.reply(conn, frame_with_checksum(stop, checksum(stop)))?;
                    }
                }
                b'$' => {
                    let packet = conn.packet()?;
                    if !self.answer(conn, &packet)? {
                        return Ok(());
                    }
                }
                other => panic!("the client sent {other:#04x} outside a packet"),
            }
        }
        Ok(())
    }

    /// Acknowledges and answers one packet; `false` to hang up.
    fn answer(&mut self, conn: &mut Conn, packet: &[u8]) -> io::Result<bool> {
        let text = String::from_utf8(packet.to_vec()).expect("the client's packets are ASCII");
        self.seen.push(text.clone());
        let is_read = text.starts_with('m');
        if let Quirk::NakReads(naks) = self.quirk
            && is_read
            && self.naks_sent < naks
        {
            self.naks_sent += 1;
            conn.send(b"-")?;
            return Ok(true);
        }
        if self.quirk != Quirk::NoAcks {
            conn.send(b"+")?;
        }
        let body = match text.as_bytes()[0] {
            b'?' if self.quirk == Quirk::OddStopReply => "OK".to_string(),
            b'?' => "S05".to_string(),
            b'c' => {
                self.running = true;
                return Ok(true); // the answer is the stop reply, much later
            }
            b'm' => {
                assert!(!self.running, "memory read while the core runs: {text}");
                match self.quirk {
                    Quirk::HangUpOnRead => return Ok(false),
                    Quirk::IgnoreReads => return Ok(true),
                    _ => {}
                }
                let (addr, len) = address_and_length(&text[1..]);
                match self.range(addr, len) {
                    Some(r) => hex(&self.memory[r]),
                    None => "E14".to_string(),
                }
            }
            b'M' => {
                assert!(!self.running, "memory write while the core runs: {text}");
                let (place, data) = text[1..].split_once(':').expect("M addr,len:data");
                let (addr, len) = address_and_length(place);
                let data = unhex(data).expect("hex data");
                assert_eq!(data.len(), len, "length of {text}");
                match self.range(addr, len) {
                    Some(r) => {
                        self.memory[r].copy_from_slice(&data);
                        "OK".to_string()
                    }
                    None => "E14".to_string(),
                }
            }
            _ => String::new(), // "not supported"
        };
        let body = body.into_bytes();
        let frame = match self.quirk {
            Quirk::CorruptReads if is_read => {
                frame_with_checksum(&body, checksum(&body).wrapping_add(1))
            }
            Quirk::EscapeReads if is_read => {
                let escaped: Vec<u8> = body.iter().flat_map(|&b| [b'}', b ^ 0x20]).collect();
                frame_with_checksum(&escaped, checksum(&escaped))
            }
            _ => frame_with_checksum(&body, checksum(&body)),
        };
        self.reply(conn, frame)?;
        Ok(true)
    }
}

/// A stub on a local port serving `memory` at [`RAM`] to one client; the
/// handle gives the stub back once the client has gone.
fn spawn_stub(memory: Vec<u8>, quirk: Quirk) -> (SocketAddr, JoinHandle<Stub>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut stub = Stub {
            memory,
            running: false,
            quirk,
            seen: Vec::new(),
            naks_sent: 0,
            last_reply: Vec::new(),
        };
        if matches!(quirk, Quirk::DropFirstConnection) {
            let (first, _) = listener.accept().unwrap();
            drop(first);
        }
        let (stream, _) = listener.accept().unwrap();
        // Do not outlive a test that failed while holding its client.
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut conn = Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        // The session ends with the client leaving (end of file, reset,
        // broken pipe): not the stub's failure.
        let _ = stub.serve(&mut conn);
        stub
    });
    (addr, handle)
}

/// A stub over `len` bytes of RAM holding 0, 1, 2, … (mod 251, so that
/// chunks do not repeat at a power of two), and a client connected to it.
fn connected(len: usize, quirk: Quirk) -> (GdbClient, JoinHandle<Stub>) {
    let memory = (0..len).map(|i| (i % 251) as u8).collect();
    let (addr, stub) = spawn_stub(memory, quirk);
    let client = GdbClient::connect(addr, TIMEOUT).expect("connect to the stub");
    (client, stub)
}

/// Ends the session and gives back what the stub saw.
fn finish(client: GdbClient, stub: JoinHandle<Stub>) -> Stub {
    drop(client);
    stub.join().expect("the stub thread panicked")
}

// ---------------------------------------------------------------------------
// GdbClient
// ---------------------------------------------------------------------------

#[test]
fn connect_asks_why_the_target_stopped() {
    let (client, stub) = connected(16, Quirk::None);
    assert!(
        !client.is_running(),
        "QEMU holds the core while GDB attaches"
    );
    assert_eq!(finish(client, stub).seen, ["?"]);
}

#[test]
fn a_connection_dropped_before_the_handshake_is_made_again() {
    let (client, stub) = connected(16, Quirk::DropFirstConnection);
    assert!(!client.is_running());
    let stub = finish(client, stub);
    assert_eq!(stub.seen.first().map(String::as_str), Some("?"));
}

#[test]
fn connect_rejects_an_answer_that_is_not_a_stop_reply() {
    let (addr, stub) = spawn_stub(vec![0; 16], Quirk::OddStopReply);
    let err = GdbClient::connect(addr, TIMEOUT).unwrap_err();
    let MemoryError::Garbled(why) = &err else {
        panic!("expected Garbled, got {err:?}");
    };
    assert!(why.contains("OK"), "{why}");
    stub.join().unwrap();
}

#[test]
fn connect_without_a_stub_is_disconnected() {
    // A port that was free a moment ago and has no listener now.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = GdbClient::connect(addr, TIMEOUT).unwrap_err();
    let MemoryError::Disconnected(why) = &err else {
        panic!("expected Disconnected, got {err:?}");
    };
    assert!(why.contains(&addr.to_string()), "{why}");
}

#[test]
fn memory_round_trips_in_packets_of_at_most_1024_bytes() {
    let (mut client, stub) = connected(3000, Quirk::None);
    let pattern: Vec<u8> = (0..1500u32).map(|i| (i * 7 + 3) as u8).collect();
    client.write(RAM + 0x10, &pattern).unwrap();
    let mut back = vec![0u8; 2500];
    client.read(RAM, &mut back).unwrap();

    assert_eq!(back[0x10..0x10 + 1500], pattern[..]);
    // Around the write, the stub's initial contents are untouched.
    assert_eq!(back[..0x10], (0..0x10).collect::<Vec<u8>>()[..]);
    assert_eq!(back[0x10 + 1500], ((0x10 + 1500) % 251) as u8);

    let stub = finish(client, stub);
    assert_eq!(stub.memory[0x10..0x10 + 1500], pattern[..]);
    let requests: Vec<&str> = stub
        .seen
        .iter()
        .map(|p| p.split_once(':').map_or(p.as_str(), |(head, _)| head))
        .collect();
    assert_eq!(
        requests,
        [
            "?",
            "M20000010,400",
            "M20000410,1dc",
            "m20000000,400",
            "m20000400,400",
            "m20000800,1c4",
        ]
    );
}

#[test]
fn pause_and_resume_interrupt_and_continue_the_core() {
    let (mut client, stub) = connected(16, Quirk::None);
    // Already stopped: nothing to interrupt.
    client.pause().unwrap();
    client.resume().unwrap();
    assert!(client.is_running());
    client.resume().unwrap(); // running already: no second `c`
    // An access while the core runs stops it for the access only.
    assert_eq!(client.read_u32(RAM).unwrap(), 0x0302_0100);
    assert!(client.is_running());
    client.pause().unwrap();
    assert!(!client.is_running());

    let stub = finish(client, stub);
    assert_eq!(stub.seen, ["?", "c", "^C", "m20000000,4", "c", "^C"]);
    assert!(!stub.running);
}

#[test]
fn a_refused_access_names_its_address() {
    let (mut client, stub) = connected(1200, Quirk::None);
    // The first 1024 bytes exist, the rest of the read runs off the end.
    let mut buf = vec![0u8; 1500];
    let err = client.read(RAM, &mut buf).unwrap_err();
    let MemoryError::Refused { addr, len, reason } = &err else {
        panic!("expected Refused, got {err:?}");
    };
    assert_eq!((*addr, *len), (RAM + 0x400, 1500 - 0x400));
    assert!(reason.contains("E14"), "{reason}");
    assert!(err.to_string().contains("0x20000400"), "{err}");

    let err = client.write(RAM - 4, &[1, 2, 3, 4]).unwrap_err();
    assert!(
        matches!(err, MemoryError::Refused { addr, len: 4, .. } if addr == RAM - 4),
        "{err:?}"
    );
    // A refusal leaves the session usable.
    assert_eq!(client.read_u32(RAM + 4).unwrap(), 0x0706_0504);
    finish(client, stub);
}

#[test]
fn an_access_past_the_address_space_is_refused_before_it_is_sent() {
    let (mut client, stub) = connected(16, Quirk::None);
    let mut buf = vec![0u8; 32];
    let err = client.read(0xFFFF_FFF0, &mut buf).unwrap_err();
    assert!(
        matches!(&err, MemoryError::Refused { addr: 0xFFFF_FFF0, len: 32, reason } if reason.contains("32-bit address space")),
        "{err:?}"
    );
    let err = client.write(0xFFFF_FF00, &[0; 0x200]).unwrap_err();
    assert!(matches!(err, MemoryError::Refused { .. }), "{err:?}");
    let stub = finish(client, stub);
    assert!(
        !stub
            .seen
            .iter()
            .any(|p| p.starts_with('m') || p.starts_with('M')),
        "{:?}",
        stub.seen
    );
}

#[test]
fn a_stub_that_hangs_up_is_disconnected() {
    let (mut client, stub) = connected(16, Quirk::HangUpOnRead);
    let err = client.read_u32(RAM).unwrap_err();
    assert!(matches!(err, MemoryError::Disconnected(_)), "{err:?}");
    finish(client, stub);
}

#[test]
fn a_stub_that_stops_answering_times_out() {
    let (mut client, stub) = connected(16, Quirk::IgnoreReads);
    let started = std::time::Instant::now();
    let err = client.read_u32(RAM).unwrap_err();
    assert!(
        matches!(err, MemoryError::Timeout(t) if t == TIMEOUT),
        "{err:?}"
    );
    assert!(started.elapsed() < 10 * TIMEOUT, "{:?}", started.elapsed());
    finish(client, stub);
}

#[test]
fn connect_to_a_mute_stub_times_out() {
    let (addr, stub) = spawn_stub(vec![0; 16], Quirk::Mute);
    let err = GdbClient::connect(addr, TIMEOUT).unwrap_err();
    assert!(
        matches!(err, MemoryError::Timeout(t) if t == TIMEOUT),
        "{err:?}"
    );
    stub.join().unwrap();
}

/// The client NAKs a reply whose checksum is wrong and reports it as
/// garbled; it does not wait for the retransmission.
#[test]
fn a_reply_with_a_bad_checksum_is_naked_and_garbled() {
    let (mut client, stub) = connected(16, Quirk::CorruptReads);
    let err = client.read_u32(RAM).unwrap_err();
    let MemoryError::Garbled(why) = &err else {
        panic!("expected Garbled, got {err:?}");
    };
    assert!(why.contains("checksum"), "{why}");
    let stub = finish(client, stub);
    assert_eq!(stub.seen, ["?", "m20000000,4", "-"]);
}

/// The checksum covers the bytes as sent, escapes included (GDB's
/// protocol: "the sum of all characters between `$` and `#`").
#[test]
fn escaped_reply_bytes_are_decoded() {
    let (mut client, stub) = connected(16, Quirk::EscapeReads);
    assert_eq!(client.read_u32(RAM + 8).unwrap(), 0x0b0a_0908);
    assert!(!finish(client, stub).seen.contains(&"-".to_string()));
}

#[test]
fn replies_without_an_ack_are_still_read() {
    let (mut client, stub) = connected(16, Quirk::NoAcks);
    assert_eq!(client.read_u32(RAM).unwrap(), 0x0302_0100);
    finish(client, stub);
}

#[test]
fn a_rejected_packet_is_sent_again() {
    let (mut client, stub) = connected(16, Quirk::NakReads(2));
    assert_eq!(client.read_u32(RAM).unwrap(), 0x0302_0100);
    let reads = finish(client, stub)
        .seen
        .iter()
        .filter(|p| *p == "m20000000,4")
        .count();
    assert_eq!(reads, 3);
}

#[test]
fn a_packet_rejected_three_times_is_garbled() {
    let (mut client, stub) = connected(16, Quirk::NakReads(3));
    let err = client.read_u32(RAM).unwrap_err();
    assert!(matches!(err, MemoryError::Garbled(_)), "{err:?}");
    assert_eq!(finish(client, stub).seen.len(), 1 + 3);
}

#[test]
fn halting_a_target_that_exited_is_disconnected() {
    let (mut client, stub) = connected(16, Quirk::ExitOnInterrupt);
    client.resume().unwrap();
    let err = client.pause().unwrap_err();
    let MemoryError::Disconnected(why) = &err else {
        panic!("expected Disconnected, got {err:?}");
    };
    assert!(why.contains("W00"), "{why}");
    finish(client, stub);
}

// ---------------------------------------------------------------------------
// A hand-built RTT control block
// ---------------------------------------------------------------------------

/// Control block address (`_SEGGER_RTT`).
const BLOCK: u32 = RAM + 0x100;
const NAME: u32 = RAM + 0x80;
const UP0: u32 = RAM + 0x200;
const UP1: u32 = RAM + 0x300;
const DOWN0: u32 = RAM + 0x400;
const UP0_SIZE: u32 = 64;
const DOWN0_SIZE: u32 = 16;

/// Descriptor `i` of the block, up channels first.
fn descriptor(i: usize) -> u32 {
    BLOCK + 24 + 24 * i as u32
}

/// RAM holding a control block at [`BLOCK`] that describes `up` then
/// `down` channels, each `(buffer, size)`, all offsets 0.
fn rtt_ram(up: &[(u32, u32)], down: &[(u32, u32)]) -> FakeMemory {
    let mut mem = FakeMemory::new(RAM, 0x800);
    let mut id = [0u8; 16];
    id[..10].copy_from_slice(b"SEGGER RTT");
    mem.write(BLOCK, &id).unwrap();
    mem.write(BLOCK + 16, &(up.len() as i32).to_le_bytes())
        .unwrap();
    mem.write(BLOCK + 20, &(down.len() as i32).to_le_bytes())
        .unwrap();
    mem.write(NAME, b"Terminal\0").unwrap();
    for (i, &(buffer, size)) in up.iter().chain(down).enumerate() {
        let d = descriptor(i);
        for (field, value) in [NAME, buffer, size, 0, 0, 0].into_iter().enumerate() {
            mem.write_u32(d + 4 * field as u32, value).unwrap();
        }
    }
    mem
}

/// The usual firmware: up 0 (messages), up 1 (log text), down 0.
fn firmware_ram() -> FakeMemory {
    rtt_ram(&[(UP0, UP0_SIZE), (UP1, 32)], &[(DOWN0, DOWN0_SIZE)])
}

const UP0_DESCRIPTOR: usize = 0;
const UP1_DESCRIPTOR: usize = 1;
const DOWN0_DESCRIPTOR: usize = 2;

/// `(write, read)` offsets of descriptor `i`.
fn offsets(mem: &mut FakeMemory, i: usize) -> (u32, u32) {
    let d = descriptor(i);
    (mem.read_u32(d + 12).unwrap(), mem.read_u32(d + 16).unwrap())
}

fn set_offsets(mem: &mut FakeMemory, i: usize, write: u32, read: u32) {
    let d = descriptor(i);
    mem.write_u32(d + 12, write).unwrap();
    mem.write_u32(d + 16, read).unwrap();
}

fn bytes_at(mem: &FakeMemory, addr: u32, len: usize) -> &[u8] {
    let start = (addr - mem.base) as usize;
    &mem.bytes[start..start + len]
}

fn attach(mem: &mut FakeMemory) -> Rtt {
    Rtt::attach(mem, BLOCK, Duration::from_millis(50)).expect("attach")
}

/// Firmware whose control block appears only after the core has run a few
/// times: the id is written on the `boots_after`-th resume.
#[derive(Debug)]
struct SlowBoot {
    mem: FakeMemory,
    boots_after: u32,
    looks: u32,
}

impl TargetMemory for SlowBoot {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<(), MemoryError> {
        self.mem.read(addr, buf)
    }
    fn write(&mut self, addr: u32, data: &[u8]) -> Result<(), MemoryError> {
        self.mem.write(addr, data)
    }
    fn pause(&mut self) -> Result<(), MemoryError> {
        self.looks += 1;
        self.mem.pause()
    }
    fn resume(&mut self) -> Result<(), MemoryError> {
        self.mem.resume()?;
        self.boots_after = self.boots_after.saturating_sub(1);
        if self.boots_after == 0 {
            self.mem.write(BLOCK, b"SEGGER RTT")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Rtt
// ---------------------------------------------------------------------------

#[test]
fn attach_finds_the_block_and_its_channels() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    assert_eq!(rtt.address, BLOCK);
    let channel = |i, buffer, size| Channel {
        descriptor: descriptor(i),
        buffer,
        size,
    };
    assert_eq!(
        rtt.up,
        [
            channel(UP0_DESCRIPTOR, UP0, UP0_SIZE),
            channel(UP1_DESCRIPTOR, UP1, 32)
        ]
    );
    assert_eq!(rtt.down, [channel(DOWN0_DESCRIPTOR, DOWN0, DOWN0_SIZE)]);
    assert_eq!(mem.paused, 0, "attach leaves the core running");
}

#[test]
fn attach_waits_for_the_firmware_to_write_the_block() {
    let mut mem = firmware_ram();
    mem.write(BLOCK, &[0; 10]).unwrap();
    let mut target = SlowBoot {
        mem,
        boots_after: 3,
        looks: 0,
    };
    let rtt = Rtt::attach(&mut target, BLOCK, Duration::from_secs(5)).unwrap();
    assert_eq!(rtt.up.len(), 2);
    assert_eq!(target.looks, 4, "three looks before the id, one after");
    assert_eq!(target.mem.paused, 0);
}

#[test]
fn attach_without_an_id_is_not_found() {
    let mut mem = FakeMemory::new(RAM, 0x800);
    let wait = Duration::from_millis(30);
    let err = Rtt::attach(&mut mem, BLOCK, wait).unwrap_err();
    let RttError::NotFound { addr, waited } = err else {
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(addr, BLOCK);
    assert!(waited >= wait, "{waited:?}");
    assert_eq!(mem.paused, 0);
}

#[test]
fn attach_outside_memory_reports_the_memory_error() {
    let mut mem = firmware_ram();
    let err = Rtt::attach(&mut mem, RAM + 0x1000, Duration::from_millis(30)).unwrap_err();
    assert!(
        matches!(err, RttError::Memory(MemoryError::Refused { .. })),
        "{err:?}"
    );
    assert_eq!(mem.paused, 0);
}

#[test]
fn impossible_channel_counts_are_corrupt() {
    for (at, count) in [(16, -1i32), (16, 17), (20, 1000)] {
        let mut mem = firmware_ram();
        mem.write(BLOCK + at, &count.to_le_bytes()).unwrap();
        let err = Rtt::attach(&mut mem, BLOCK, Duration::from_millis(30)).unwrap_err();
        let RttError::Corrupt(why) = &err else {
            panic!("count {count}: expected Corrupt, got {err:?}");
        };
        assert!(why.contains(&count.to_string()), "{why}");
        assert_eq!(mem.paused, 0);
    }
}

#[test]
fn a_buffer_without_a_size_is_corrupt() {
    let mut mem = rtt_ram(&[(UP0, 0)], &[]);
    let err = Rtt::attach(&mut mem, BLOCK, Duration::from_millis(30)).unwrap_err();
    assert!(matches!(err, RttError::Corrupt(_)), "{err:?}");
}

#[test]
fn a_buffer_outside_the_address_space_is_corrupt() {
    // A crashed firmware's garbage: offsets computed from it would overflow.
    for (buffer, size) in [(0xFFFF_FF00, 0x200), (RAM, 0x4000_0000)] {
        let mut mem = rtt_ram(&[(buffer, size)], &[]);
        let err = Rtt::attach(&mut mem, BLOCK, Duration::from_millis(30)).unwrap_err();
        assert!(
            matches!(&err, RttError::Corrupt(m) if m.contains("is not in target memory")),
            "{err:?}"
        );
    }
}

#[test]
fn read_up_takes_what_the_target_wrote() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    mem.write(UP0, b"hello").unwrap();
    set_offsets(&mut mem, UP0_DESCRIPTOR, 5, 0);

    assert_eq!(rtt.read_up(&mut mem, 0).unwrap(), b"hello");
    assert_eq!(offsets(&mut mem, UP0_DESCRIPTOR), (5, 5));
    assert_eq!(rtt.read_up(&mut mem, 0).unwrap(), b"", "taken once");
}

#[test]
fn read_up_follows_a_wrapped_buffer() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    mem.write(UP0 + UP0_SIZE - 4, b"abcd").unwrap();
    mem.write(UP0, b"efg").unwrap();
    set_offsets(&mut mem, UP0_DESCRIPTOR, 3, UP0_SIZE - 4);

    assert_eq!(rtt.read_up(&mut mem, 0).unwrap(), b"abcdefg");
    assert_eq!(offsets(&mut mem, UP0_DESCRIPTOR), (3, 3));

    // Wrapped exactly to the start: nothing before the end to add.
    mem.write(UP0 + UP0_SIZE - 2, b"xy").unwrap();
    set_offsets(&mut mem, UP0_DESCRIPTOR, 0, UP0_SIZE - 2);
    assert_eq!(rtt.read_up(&mut mem, 0).unwrap(), b"xy");
    assert_eq!(offsets(&mut mem, UP0_DESCRIPTOR), (0, 0));
}

#[test]
fn write_down_fills_the_buffer_and_advances_the_write_offset() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    assert_eq!(rtt.write_down(&mut mem, 0, b"12345").unwrap(), 5);
    assert_eq!(bytes_at(&mem, DOWN0, 5), b"12345");
    assert_eq!(offsets(&mut mem, DOWN0_DESCRIPTOR), (5, 0));
}

#[test]
fn write_down_keeps_one_byte_free() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    set_offsets(&mut mem, DOWN0_DESCRIPTOR, 10, 0);
    // Bytes 10..15 are free; 15 must stay free, or full would look empty.
    assert_eq!(rtt.write_down(&mut mem, 0, b"ABCDEFGH").unwrap(), 5);
    assert_eq!(bytes_at(&mem, DOWN0 + 10, 6), b"ABCDE\0");
    assert_eq!(offsets(&mut mem, DOWN0_DESCRIPTOR), (15, 0));

    assert_eq!(rtt.write_down(&mut mem, 0, b"Z").unwrap(), 0, "full");
    assert_eq!(offsets(&mut mem, DOWN0_DESCRIPTOR), (15, 0));
}

#[test]
fn write_down_wraps_at_the_end_of_the_buffer() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    set_offsets(&mut mem, DOWN0_DESCRIPTOR, 14, 10);
    assert_eq!(rtt.write_down(&mut mem, 0, b"ABCDEF").unwrap(), 6);
    assert_eq!(bytes_at(&mem, DOWN0 + 14, 2), b"AB");
    assert_eq!(bytes_at(&mem, DOWN0, 5), b"CDEF\0");
    assert_eq!(offsets(&mut mem, DOWN0_DESCRIPTOR), (4, 10));
}

#[test]
fn offsets_past_the_buffer_are_corrupt() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    set_offsets(&mut mem, UP0_DESCRIPTOR, UP0_SIZE, 0);
    let err = rtt.read_up(&mut mem, 0).unwrap_err();
    assert!(matches!(err, RttError::Corrupt(_)), "{err:?}");

    set_offsets(&mut mem, DOWN0_DESCRIPTOR, 0, DOWN0_SIZE);
    let err = rtt.write_down(&mut mem, 0, b"x").unwrap_err();
    assert!(matches!(err, RttError::Corrupt(_)), "{err:?}");
    assert_eq!(bytes_at(&mem, DOWN0, 1), b"\0", "nothing written");
}

#[test]
fn a_missing_channel_is_named() {
    // Up 1 is described but has no buffer.
    let mut mem = rtt_ram(&[(UP0, UP0_SIZE), (0, 0)], &[(DOWN0, DOWN0_SIZE)]);
    let rtt = attach(&mut mem);
    for (index, err) in [
        (1, rtt.read_up(&mut mem, 1).unwrap_err()),
        (5, rtt.read_up(&mut mem, 5).unwrap_err()),
    ] {
        assert!(
            matches!(err, RttError::NoChannel { direction: "up", index: i } if i == index),
            "{err:?}"
        );
    }
    let err = rtt.write_down(&mut mem, 1, b"x").unwrap_err();
    assert!(
        matches!(
            err,
            RttError::NoChannel {
                direction: "down",
                index: 1
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "the firmware has no RTT down channel 1");
}

// ---------------------------------------------------------------------------
// Link over RTT
// ---------------------------------------------------------------------------

fn frame_of(message: &Message<'_>) -> Vec<u8> {
    let mut frame = vec![0u8; MAX_FRAME];
    let n = encode_frame(message, &mut frame).unwrap();
    frame.truncate(n);
    frame
}

#[test]
fn link_receives_a_frame_from_up_channel_0() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    let frame = frame_of(&Message::InputAck {
        input: 2,
        received: 4096,
    });
    mem.write(UP0, &frame).unwrap();
    set_offsets(&mut mem, UP0_DESCRIPTOR, frame.len() as u32, 0);
    mem.write(UP1, b"booted").unwrap();
    set_offsets(&mut mem, UP1_DESCRIPTOR, 6, 0);

    let mut link = Link::new(&mut mem, rtt);
    let ack = link
        .recv(Duration::from_secs(1), "an input ack", |m| match *m {
            Message::InputAck { input, received } => Some((input, received)),
            _ => None,
        })
        .unwrap();
    assert_eq!(ack, Some((2, 4096)));
    assert_eq!(link.logs, ["booted"]);
    drop(link);

    assert_eq!(mem.paused, 0, "every pause was resumed");
    let consumed = frame.len() as u32;
    assert_eq!(offsets(&mut mem, UP0_DESCRIPTOR), (consumed, consumed));
}

#[test]
fn link_sends_a_frame_to_down_channel_0() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    let mut link = Link::new(&mut mem, rtt);
    link.send(&Message::HelloRequest, Duration::from_secs(1))
        .unwrap();
    drop(link);

    let frame = frame_of(&Message::HelloRequest);
    assert_eq!(
        bytes_at(&mem, DOWN0, frame.len() + 1),
        [&frame[..], &[0]].concat()
    );
    assert_eq!(offsets(&mut mem, DOWN0_DESCRIPTOR), (frame.len() as u32, 0));
    assert_eq!(mem.paused, 0, "every pause was resumed");
}

#[test]
fn link_send_to_a_full_channel_times_out_with_the_core_running() {
    let mut mem = firmware_ram();
    let rtt = attach(&mut mem);
    // The firmware never reads: the buffer is full.
    set_offsets(&mut mem, DOWN0_DESCRIPTOR, DOWN0_SIZE - 1, 0);
    let mut link = Link::new(&mut mem, rtt);
    let err = link
        .send(&Message::HelloRequest, Duration::from_millis(30))
        .unwrap_err();
    assert!(matches!(err, LinkError::Timeout { .. }), "{err:?}");
    drop(link);
    assert_eq!(mem.paused, 0);
}
