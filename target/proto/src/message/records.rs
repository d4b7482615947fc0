//! The multi-field records inside messages, and the lists of them that are
//! read lazily from a frame (plan entries, job times, cycle counts).
//!
//! Separate from the message encoder and decoder: a list is written once
//! into a caller's buffer (`encode_into`) and then carried by a message as
//! the bytes it already is, so the encoder and decoder only move its bytes
//! and check its length, while each record's own layout lives here.

use super::wire::{Reader, Writer};
use crate::ProtoError;

/// One offloaded job's times in an invoke, in the invoke's cycles (from its
/// start): sent in [`Message::Jobs`](super::Message::Jobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobTimes {
    /// The operator.
    pub op: u16,
    /// When it was submitted.
    pub submitted: u32,
    /// When the engine completed it (as the engine reports it).
    pub completed: u32,
    /// When the CPU started waiting for it.
    pub wait_started: u32,
    /// When the wait returned.
    pub retired: u32,
}

impl JobTimes {
    /// Bytes per record on the wire.
    pub const BYTES: usize = 18;

    fn write(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.op.to_le_bytes());
        for (i, v) in [
            self.submitted,
            self.completed,
            self.wait_started,
            self.retired,
        ]
        .iter()
        .enumerate()
        {
            out[2 + 4 * i..6 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
    }

    fn read(b: &[u8]) -> Self {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        JobTimes {
            op: u16::from_le_bytes([b[0], b[1]]),
            submitted: u(2),
            completed: u(6),
            wait_started: u(10),
            retired: u(14),
        }
    }
}

/// Job records, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobList<'a>(pub(super) &'a [u8]);

impl<'a> JobList<'a> {
    /// Records to send (encoded into `out`).
    pub fn encode_into(jobs: &[JobTimes], out: &'a mut [u8]) -> Result<JobList<'a>, ProtoError> {
        let bytes = out
            .get_mut(..JobTimes::BYTES * jobs.len())
            .ok_or(ProtoError::BufferTooSmall)?;
        for (c, j) in bytes.chunks_exact_mut(JobTimes::BYTES).zip(jobs) {
            j.write(c);
        }
        Ok(JobList(bytes))
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.0.len() / JobTimes::BYTES
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The records.
    pub fn iter(&self) -> impl Iterator<Item = JobTimes> + 'a {
        self.0.chunks_exact(JobTimes::BYTES).map(JobTimes::read)
    }
}

/// The target introduces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    /// [`crate::PROTOCOL_VERSION`] of the firmware.
    pub protocol: u16,
    /// Firmware version (major, minor, patch).
    pub firmware: [u8; 3],
    /// The board the firmware was built for.
    pub board: &'a str,
    /// CRC-32 of the embedded model.
    pub model_hash: u32,
    /// Arena bytes.
    pub arena_size: u32,
    /// Model inputs.
    pub inputs: u8,
    /// Model outputs.
    pub outputs: u8,
    /// Core clock, Hz.
    pub clock_hz: u32,
}

/// One planned buffer, as sent by the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlanEntry {
    /// 0 = tensor, 1 = scratch.
    pub kind: u8,
    /// Tensor index (or requesting op for scratch).
    pub index: u16,
    /// First step.
    pub first_step: u16,
    /// Last step.
    pub last_step: u16,
    /// Requested bytes.
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head.
    pub offset: u32,
}

impl PlanEntry {
    /// Bytes per entry on the wire.
    pub(super) const BYTES: usize = 19;

    fn write(&self, w: &mut Writer<'_>) -> Result<(), ProtoError> {
        w.u8(self.kind)?;
        w.u16(self.index)?;
        w.u16(self.first_step)?;
        w.u16(self.last_step)?;
        w.u32(self.size)?;
        w.u32(self.align)?;
        w.u32(self.offset)
    }

    fn read(r: &mut Reader<'_>) -> Option<Self> {
        Some(PlanEntry {
            kind: r.u8()?,
            index: r.u16()?,
            first_step: r.u16()?,
            last_step: r.u16()?,
            size: r.u32()?,
            align: r.u32()?,
            offset: r.u32()?,
        })
    }
}

/// A run of plan entries, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanEntries<'a>(pub(super) &'a [u8]);

impl<'a> PlanEntries<'a> {
    /// Entries to send.
    pub fn encode_into(
        entries: &[PlanEntry],
        out: &'a mut [u8],
    ) -> Result<PlanEntries<'a>, ProtoError> {
        let mut w = Writer { buf: out, at: 0 };
        for e in entries {
            e.write(&mut w)?;
        }
        let len = w.at;
        Ok(PlanEntries(&out[..len]))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len() / PlanEntry::BYTES
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries.
    pub fn iter(&self) -> impl Iterator<Item = PlanEntry> + 'a {
        let bytes = self.0;
        bytes
            .chunks_exact(PlanEntry::BYTES)
            .filter_map(|c| PlanEntry::read(&mut Reader { buf: c, at: 0 }))
    }
}

/// Per-op cycle counts, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycles<'a>(pub(super) &'a [u8]);

impl<'a> Cycles<'a> {
    /// Counts to send (as little-endian bytes in `out`).
    pub fn encode_into(cycles: &[u32], out: &'a mut [u8]) -> Result<Cycles<'a>, ProtoError> {
        let bytes = out
            .get_mut(..4 * cycles.len())
            .ok_or(ProtoError::BufferTooSmall)?;
        for (c, v) in bytes.chunks_exact_mut(4).zip(cycles) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        Ok(Cycles(bytes))
    }

    /// Number of counts.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.0
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}
