//! One caller-owned byte arena, split the way TFLM splits it.
//!
//! ```text
//!  start (aligned)                                                end
//!  | head: planned buffers | temp → (set-up only)      … ← tail: persistent |
//! ```
//!
//! - The **tail** grows down from the end and holds what lives as long as the
//!   interpreter: per-tensor records, per-op data, variable tensors.
//! - **Temp** allocations grow up from the start during set-up (the request
//!   list, the planner's workspace) and are all released at once.
//! - The **head** is committed last, over the space temp used, and holds the
//!   planned buffers.
//!
//! The arena may start at any address: alignment is computed from the real
//! address, so a `&mut [u8]` from a `static` or from a heap works alike.
//! [`Arena::used_bytes`] is the true high-water mark of all three sections,
//! including alignment padding.
//!
//! ```
//! use hilt_runtime::arena::Arena;
//! let mut bytes = [0u8; 256];
//! let mut arena = Arena::new(&mut bytes);
//! let state = arena.alloc_persistent(32, 16).unwrap();
//! let temp = arena.alloc_temp(64, 4).unwrap();
//! arena.reset_temp();
//! let head = arena.commit_head(100, 16).unwrap();
//! assert!(head.end() <= state.offset);
//! assert!(arena.used_bytes() >= 32 + 100);
//! # let _ = temp;
//! ```

use core::fmt;

use crate::request::align_up;

/// A byte range of the arena, as offsets from the arena slice's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Region {
    /// First byte, from the start of the arena slice.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Region {
    /// One past the last byte.
    pub const fn end(&self) -> u32 {
        self.offset + self.len
    }
}

/// Which part of the arena an allocation was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Section {
    /// The planned, non-persistent buffers.
    Head,
    /// Set-up time scratch.
    Temp,
    /// Persistent data.
    Tail,
}

/// An arena that cannot hold what was asked of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ArenaError {
    /// Not enough bytes between the head/temp end and the tail.
    OutOfMemory {
        /// The section that did not fit.
        section: Section,
        /// Bytes asked for (before alignment padding).
        requested: u32,
        /// Bytes still free.
        free: u32,
    },
    /// An alignment that is not a power of two.
    InvalidAlignment {
        /// The alignment.
        align: u32,
    },
    /// The head was committed while temp allocations were still held.
    TempInUse,
}

impl fmt::Display for ArenaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArenaError::OutOfMemory {
                section,
                requested,
                free,
            } => write!(
                f,
                "arena out of memory: {section:?} needs {requested} bytes, {free} free"
            ),
            ArenaError::InvalidAlignment { align } => {
                write!(f, "alignment {align} is not a power of two")
            }
            ArenaError::TempInUse => f.write_str("head committed while temp allocations are held"),
        }
    }
}

impl core::error::Error for ArenaError {}

/// A caller-owned arena with a head, temp and tail section.
pub struct Arena<'a> {
    bytes: &'a mut [u8],
    /// Address of `bytes[0]`, for alignment.
    base: usize,
    /// End of the head/temp stack (offset from `bytes[0]`).
    low: usize,
    /// Start of the tail (offset from `bytes[0]`).
    high: usize,
    /// The committed head.
    head: Region,
    /// Highest `low + (len - high)` seen.
    peak: usize,
}

impl fmt::Debug for Arena<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena")
            .field("capacity", &self.bytes.len())
            .field("head", &self.head)
            .field("temp_end", &self.low)
            .field("tail_bytes", &self.tail_bytes())
            .field("used_bytes", &self.peak)
            .finish()
    }
}

fn check_align(align: u32) -> Result<usize, ArenaError> {
    if align.is_power_of_two() {
        Ok(align as usize)
    } else {
        Err(ArenaError::InvalidAlignment { align })
    }
}

impl<'a> Arena<'a> {
    /// Gives the bytes back (to run another interpreter in them).
    pub fn into_bytes(self) -> &'a mut [u8] {
        self.bytes
    }

    /// Takes the caller's bytes (any length, any start alignment).
    pub fn new(bytes: &'a mut [u8]) -> Self {
        let base = bytes.as_ptr() as usize;
        let high = bytes.len();
        Arena {
            bytes,
            base,
            low: 0,
            high,
            head: Region::default(),
            peak: 0,
        }
    }

    /// Releases everything: head, temp and tail (the high-water mark stays).
    pub fn reset(&mut self) {
        self.low = 0;
        self.high = self.bytes.len();
        self.head = Region::default();
    }

    /// Pointer to the arena's first byte, for the interpreter's views.
    pub(crate) fn base_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }

    /// Bytes the caller gave.
    pub fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes free between the head/temp stack and the tail.
    pub fn free_bytes(&self) -> usize {
        self.high - self.low
    }

    /// Bytes the tail holds (including alignment padding).
    pub fn tail_bytes(&self) -> usize {
        self.bytes.len() - self.high
    }

    /// The committed head (empty until [`commit_head`](Self::commit_head)).
    pub fn head(&self) -> Region {
        self.head
    }

    /// High-water mark of head or temp, plus tail, plus padding: the smallest
    /// arena (at this start address) that would have served every allocation.
    pub fn used_bytes(&self) -> usize {
        self.peak
    }

    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.low + (self.bytes.len() - self.high));
    }

    /// Offset (from `bytes[0]`) of the first byte at or after `from` whose
    /// address is a multiple of `align`.
    fn aligned_from(&self, from: usize, align: usize) -> usize {
        align_up((self.base + from) as u64, align as u64) as usize - self.base
    }

    fn out_of_memory(&self, section: Section, requested: usize) -> ArenaError {
        ArenaError::OutOfMemory {
            section,
            requested: requested.min(u32::MAX as usize) as u32,
            free: self.free_bytes().min(u32::MAX as usize) as u32,
        }
    }

    /// Allocates `size` persistent bytes from the tail.
    pub fn alloc_persistent(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        let align = check_align(align)?;
        let err = self.out_of_memory(Section::Tail, size);
        let end_addr = (self.base + self.high).checked_sub(size).ok_or(err)?;
        let start = (end_addr & !(align - 1))
            .checked_sub(self.base)
            .ok_or(err)?;
        if start < self.low {
            return Err(err);
        }
        self.high = start;
        self.note_peak();
        Ok(Region {
            offset: start as u32,
            len: size as u32,
        })
    }

    /// Allocates `size` bytes of temp memory, released by [`reset_temp`](Self::reset_temp).
    pub fn alloc_temp(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        let start = self.aligned_from(self.low, check_align(align)?);
        let end = start.checked_add(size).filter(|&e| e <= self.high);
        let end = end.ok_or(self.out_of_memory(Section::Temp, size))?;
        self.low = end;
        self.note_peak();
        Ok(Region {
            offset: start as u32,
            len: size as u32,
        })
    }

    /// Releases every temp allocation.
    pub fn reset_temp(&mut self) {
        self.low = self.head.end() as usize;
    }

    /// Releases the temp allocations from `region` on (the last ones made),
    /// keeping those below it: set-up's trial of a seed plan, whose memory
    /// the plan it then makes reuses (the high-water mark stays).
    pub fn release_temp_from(&mut self, region: Region) {
        let from = (region.offset as usize).max(self.head.end() as usize);
        if from <= self.low {
            self.low = from;
        }
    }

    /// Where a head committed now with alignment `align` would start.
    pub fn head_start(&self, align: u32) -> Result<u32, ArenaError> {
        Ok(self.aligned_from(0, check_align(align)?) as u32)
    }

    /// Commits the head: `size` bytes at the first `align`-aligned address.
    /// Temp memory must have been released.
    pub fn commit_head(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        if self.low != self.head.end() as usize {
            return Err(ArenaError::TempInUse);
        }
        let start = self.aligned_from(0, check_align(align)?);
        let end = start.checked_add(size).filter(|&e| e <= self.high);
        let end = end.ok_or(self.out_of_memory(Section::Head, size))?;
        self.head = Region {
            offset: start as u32,
            len: size as u32,
        };
        self.low = end;
        self.note_peak();
        Ok(self.head)
    }

    /// Commits the head as `[start, start + size)`; bytes below `start`
    /// (alignment padding, a guard band) count as used. Temp memory must
    /// have been released.
    pub fn commit_head_at(&mut self, start: usize, size: usize) -> Result<Region, ArenaError> {
        if self.low != self.head.end() as usize {
            return Err(ArenaError::TempInUse);
        }
        let end = start.checked_add(size).filter(|&e| e <= self.high);
        let end = end.ok_or(self.out_of_memory(Section::Head, size))?;
        self.head = Region {
            offset: start as u32,
            len: size as u32,
        };
        self.low = end;
        self.note_peak();
        Ok(self.head)
    }

    /// The first `align`-aligned offset at or after `from`.
    pub fn aligned_offset(&self, from: u32, align: u32) -> Result<u32, ArenaError> {
        Ok(self.aligned_from(from as usize, check_align(align)?) as u32)
    }

    /// The bytes of `region`.
    pub fn bytes(&self, region: Region) -> &[u8] {
        &self.bytes[region.offset as usize..region.end() as usize]
    }

    /// The bytes of `region`, mutably.
    pub fn bytes_mut(&mut self, region: Region) -> &mut [u8] {
        &mut self.bytes[region.offset as usize..region.end() as usize]
    }

    /// Several disjoint regions at once, mutably, in the order given.
    /// `None` if two non-empty regions overlap or one lies outside the arena.
    pub fn regions_mut<const N: usize>(&mut self, regions: [Region; N]) -> Option<[&mut [u8]; N]> {
        let mut order: [usize; N] = core::array::from_fn(|i| i);
        order.sort_unstable_by_key(|&i| (regions[i].offset, regions[i].len));
        let mut out: [&mut [u8]; N] = core::array::from_fn(|_| &mut [][..]);
        let mut rest: &mut [u8] = &mut self.bytes[..];
        let mut consumed = 0usize;
        for &i in &order {
            let r = regions[i];
            if r.len == 0 {
                continue;
            }
            let start = (r.offset as usize).checked_sub(consumed)?;
            let tail = core::mem::take(&mut rest).get_mut(start..)?;
            if tail.len() < r.len as usize {
                return None;
            }
            let (piece, after) = tail.split_at_mut(r.len as usize);
            out[i] = piece;
            rest = after;
            consumed = r.end() as usize;
        }
        Some(out)
    }
}
