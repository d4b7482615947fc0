//! Round trips, and every way a frame can arrive damaged.

use hilt_proto::message::{Cycles, JobList, PlanEntries};
use hilt_proto::{
    EngineLedger, ErrorCode, FrameAccumulator, Hello, JobTimes, MAX_CHUNK, MAX_FRAME, Message,
    NoteKind, OffloadMode, PROTOCOL_VERSION, PlanEntry, ProtoError, TargetError, decode_frame,
    decode_request_frame, encode_frame,
};
use proptest::prelude::*;

fn frame(m: &Message<'_>) -> Vec<u8> {
    let mut out = vec![0u8; MAX_FRAME];
    let n = encode_frame(m, &mut out).unwrap();
    out.truncate(n);
    out
}

fn round_trip(m: Message<'_>) {
    let f = frame(&m);
    assert_eq!(f.last(), Some(&0));
    assert!(!f[..f.len() - 1].contains(&0), "delimiter inside the frame");
    let mut scratch = vec![0u8; MAX_FRAME];
    assert_eq!(decode_frame(&f, &mut scratch).unwrap(), m);
}

#[test]
fn every_message_round_trips() {
    let entries = [
        PlanEntry {
            kind: 0,
            index: 3,
            first_step: 0,
            last_step: 4,
            size: 100,
            align: 16,
            offset: 64,
        },
        PlanEntry {
            kind: 1,
            index: 7,
            first_step: 7,
            last_step: 7,
            size: 5,
            align: 1024,
            offset: 0,
        },
    ];
    let mut entry_bytes = [0u8; 64];
    let mut cycle_bytes = [0u8; 64];
    let cycles = Cycles::encode_into(&[1, 2, u32::MAX], &mut cycle_bytes).unwrap();
    assert_eq!(cycles.iter().collect::<Vec<_>>(), [1, 2, u32::MAX]);
    let plan = PlanEntries::encode_into(&entries, &mut entry_bytes).unwrap();
    assert_eq!(plan.iter().collect::<Vec<_>>(), entries);
    let times = [
        JobTimes {
            op: 2,
            submitted: 10,
            completed: 900,
            wait_started: 700,
            retired: 905,
        },
        JobTimes {
            op: 513,
            submitted: u32::MAX,
            ..JobTimes::default()
        },
    ];
    let mut job_bytes = [0u8; 64];
    let jobs = JobList::encode_into(&times, &mut job_bytes).unwrap();
    assert_eq!(jobs.iter().collect::<Vec<_>>(), times);
    for m in [
        Message::SetOffload {
            mode: OffloadMode::NonCoherent,
            fault: 3,
            job_cycles: 2000,
            cycles_per_1000_macs: 4,
            driver_submit_cycles: 1_000,
            driver_cycles_per_line: 7,
            cycles_per_count_milli: 40_000,
            ops: &[3, 4, 0, 9],
        },
        Message::Offload {
            jobs: 14,
            overlapped: 3,
            busy: 1 << 40,
            waited: 77,
            ledger: EngineLedger {
                engine: 12345,
                shadow: 1 << 33,
                oversleep: 40,
                driver_submit: 25,
                driver_cache: 3,
            },
            placement: &[0b1011, 0x80],
        },
        Message::Jobs {
            first: 45,
            total: 47,
            jobs,
        },
        Message::HelloRequest,
        Message::PlanRequest,
        Message::ResetState,
        Message::LoadInput {
            input: 1,
            offset: 960,
            chunk: &[0, 1, 0, 255],
        },
        Message::Invoke {
            count: 3,
            per_op: true,
        },
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            firmware: [0, 1, 0],
            board: "qemu-mps2-an386",
            model_hash: 0xDEAD_BEEF,
            arena_size: 100_000,
            inputs: 1,
            outputs: 2,
            clock_hz: 25_000_000,
        }),
        Message::InputAck {
            input: 0,
            received: 49152,
        },
        Message::OutputChunk {
            output: 0,
            offset: 0,
            total: 4,
            chunk: &[0, 0, 0, 1],
        },
        Message::Timing {
            invocation: 9,
            total_cycles: u64::MAX,
            ops: 31,
        },
        Message::OpCycles {
            first_op: 16,
            cycles,
        },
        Message::ArenaUsage {
            capacity: 1,
            head: 2,
            tail: 3,
            used: 4,
        },
        Message::PlanEntries {
            first: 0,
            total: 2,
            entries: plan,
        },
        Message::Done { request: 0x03 },
        Message::Guards {
            mode: 2,
            len: 16,
            addresses: [0x2000_0000, 0x2000_1000, 0x2010_0000, 0x201F_FFF0],
        },
        Message::CanaryFault {
            owner: 4,
            index: 7,
            address: 0x2000_0123,
            bytes_hit: 3,
            op: 2,
        },
        Message::Error(TargetError {
            code: ErrorCode::KERNEL,
            op: 4,
            detail: 17,
        }),
        Message::Log("arena committed ✓"),
        Message::Note {
            kind: NoteKind::INTERPRETER,
            body: &[3, 1, 0, 0, 0],
        },
        Message::Note {
            kind: NoteKind(77),
            body: &[],
        },
    ] {
        round_trip(m);
    }
}

/// What a target reads: every request as `decode_frame` reads it, every
/// reply refused by its tag, an unknown tag as unknown.
#[test]
fn a_target_reads_requests_only() {
    let mut scratch = vec![0u8; MAX_FRAME];
    for request in [
        Message::HelloRequest,
        Message::PlanRequest,
        Message::ResetState,
        Message::LoadInput {
            input: 1,
            offset: 8,
            chunk: &[1, 2, 3],
        },
        Message::Invoke {
            count: 3,
            per_op: true,
        },
        Message::SetOffload {
            mode: OffloadMode::Coherent,
            fault: 0,
            job_cycles: 1,
            cycles_per_1000_macs: 2,
            driver_submit_cycles: 3,
            driver_cycles_per_line: 4,
            cycles_per_count_milli: 5,
            ops: &[3, 4],
        },
    ] {
        let f = frame(&request);
        assert_eq!(decode_request_frame(&f, &mut scratch), Ok(request));
    }
    for reply in [
        Message::Done { request: 3 },
        Message::Log("a line"),
        Message::Note {
            kind: NoteKind::START,
            body: &[0],
        },
    ] {
        let f = frame(&reply);
        let tag = f[1];
        assert_eq!(
            decode_request_frame(&f, &mut scratch),
            Err(ProtoError::NotARequest(reply.tag())),
            "tag {tag:#04x}"
        );
    }
    assert_eq!(
        Message::read_request(&[0x7E]),
        Err(ProtoError::UnknownTag(0x7E))
    );
    assert_eq!(
        Message::read_request(&[0x03, 1, 2]),
        Err(ProtoError::BadLength { tag: 0x03 })
    );
}

proptest! {
    #[test]
    fn chunks_round_trip(input in any::<u8>(), offset in any::<u32>(), chunk in prop::collection::vec(any::<u8>(), 0..=MAX_CHUNK)) {
        round_trip(Message::LoadInput { input, offset, chunk: &chunk });
        round_trip(Message::OutputChunk { output: input, offset, total: offset, chunk: &chunk });
    }

    #[test]
    fn any_corruption_is_detected(chunk in prop::collection::vec(any::<u8>(), 1..200), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let m = Message::LoadInput { input: 0, offset: 0, chunk: &chunk };
        let mut f = frame(&m);
        let i = at.index(f.len() - 1);
        f[i] ^= flip;
        let mut scratch = vec![0u8; MAX_FRAME];
        // A flipped byte may become a delimiter: then the frame is cut short.
        let cut = f.iter().position(|&b| b == 0).unwrap();
        let result = decode_frame(&f[..cut], &mut scratch);
        prop_assert!(result.is_err(), "corrupted frame decoded as {:?}", result);
    }

    #[test]
    fn any_truncation_is_detected(chunk in prop::collection::vec(any::<u8>(), 0..200), keep in any::<prop::sample::Index>()) {
        let m = Message::OutputChunk { output: 1, offset: 2, total: 3, chunk: &chunk };
        let f = frame(&m);
        let n = keep.index(f.len() - 1); // strictly shorter than the frame body
        let mut scratch = vec![0u8; MAX_FRAME];
        prop_assert!(decode_frame(&f[..n], &mut scratch).is_err());
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut scratch = vec![0u8; MAX_FRAME];
        let _ = decode_frame(&bytes, &mut scratch);
        let _ = Message::read(&bytes);
        let _ = decode_request_frame(&bytes, &mut scratch);
        let _ = Message::read_request(&bytes);
    }
}

#[test]
fn specific_errors() {
    let mut scratch = vec![0u8; MAX_FRAME];
    let mut f = frame(&Message::Invoke {
        count: 1,
        per_op: false,
    });
    let last = f.len() - 2;
    f[last] ^= 0x01;
    assert!(matches!(
        decode_frame(&f, &mut scratch),
        Err(ProtoError::Crc { .. })
    ));
    assert_eq!(
        decode_frame(&[2, 1, 0], &mut scratch),
        Err(ProtoError::Truncated)
    );
    assert_eq!(
        decode_frame(&[0x05, 1, 2, 0], &mut scratch),
        Err(ProtoError::Cobs)
    );
    assert_eq!(Message::read(&[0x7E]), Err(ProtoError::UnknownTag(0x7E)));
    assert_eq!(
        Message::read(&[0x03, 1, 2]),
        Err(ProtoError::BadLength { tag: 0x03 })
    );
    assert_eq!(
        Message::read(&[0x03, 1, 0, 0, 0, 1, 9]),
        Err(ProtoError::BadLength { tag: 0x03 })
    );
    // Invoke's per-op flag is a boolean byte.
    assert_eq!(
        Message::read(&[0x03, 1, 0, 0, 0, 2]),
        Err(ProtoError::BadLength { tag: 0x03 })
    );
    assert_eq!(
        Message::read(&[0x03, 1, 0, 0, 0, 0]),
        Ok(Message::Invoke {
            count: 1,
            per_op: false
        })
    );
    assert_eq!(
        Message::read(&[0x90, 2, 0, 0xFF, 0xFE]),
        Err(ProtoError::BadText)
    );
    let too_big = vec![1u8; 2000];
    let mut out = vec![0u8; 4096];
    assert_eq!(
        encode_frame(
            &Message::LoadInput {
                input: 0,
                offset: 0,
                chunk: &too_big
            },
            &mut out
        ),
        Err(ProtoError::BufferTooSmall)
    );
}

#[test]
fn accumulator_splits_frames_and_drops_oversized_ones() {
    let mut stream = frame(&Message::Invoke {
        count: 7,
        per_op: true,
    });
    stream.push(0); // stray delimiter
    stream.extend(std::iter::repeat_n(0x55, MAX_FRAME + 10));
    stream.push(0);
    stream.extend(frame(&Message::Done { request: 3 }));
    let mut acc = FrameAccumulator::default();
    let mut seen = Vec::new();
    for b in stream {
        if let Some(result) = acc.push(b) {
            let mut scratch = vec![0u8; MAX_FRAME];
            seen.push(result.and_then(|f| decode_frame(f, &mut scratch).map(|m| format!("{m:?}"))));
        }
    }
    assert_eq!(
        seen,
        vec![
            Ok("Invoke { count: 7, per_op: true }".to_string()),
            Err(ProtoError::Oversized),
            Ok("Done { request: 3 }".to_string())
        ]
    );
}
