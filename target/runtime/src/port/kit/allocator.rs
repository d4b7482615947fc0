//! The rules of the persistent and temporary allocators, as one script
//! run on the caller's allocator: allocations inside the memory, aligned,
//! disjoint from every other live one and from the head; temp released by
//! `reset_temp`, persistent data and the head untouched by it; invalid
//! alignments and requests that cannot fit answered with the right error,
//! and the allocator still usable afterwards.

use core::fmt;

use crate::arena::{ArenaError, Region, Section};
use crate::port::{NonPersistentAllocator, PersistentAllocator};

/// Bytes the script needs; a smaller allocator is reported, not run.
pub const MIN_MEMORY: usize = 1024;

/// Most allocations the script holds at once.
const MAX_LIVE: usize = 12;

/// One allocation the script made, as it names it in failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KitAllocation {
    /// The script's name for it ("persistent #1", "head", ...).
    pub label: &'static str,
    /// Which allocator gave it.
    pub section: Section,
    /// Where it went.
    pub region: Region,
    /// The alignment asked for.
    pub align: u32,
    /// The size asked for.
    pub size: usize,
}

impl fmt::Display for KitAllocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({:?}, {} bytes aligned {}, at [{},{}))",
            self.label,
            self.section,
            self.size,
            self.align,
            self.region.offset,
            u64::from(self.region.offset) + u64::from(self.region.len)
        )
    }
}

/// A rule an allocator broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocatorFailure {
    /// The allocator manages fewer than [`MIN_MEMORY`] bytes.
    TooSmallToTest {
        /// Bytes it manages.
        given: usize,
    },
    /// A request that fits was refused.
    Refused {
        /// The allocation asked for.
        label: &'static str,
        /// The error returned.
        error: ArenaError,
    },
    /// Two live allocations share bytes.
    Overlap {
        /// The earlier one.
        first: KitAllocation,
        /// The later one.
        second: KitAllocation,
    },
    /// An address that is not a multiple of the alignment asked for.
    Misaligned {
        /// The allocation.
        allocation: KitAllocation,
        /// Its address.
        address: usize,
    },
    /// Fewer bytes than asked for, or bytes past the memory's end.
    OutOfBounds {
        /// The allocation.
        allocation: KitAllocation,
        /// Bytes the allocator manages.
        memory_len: usize,
    },
    /// Bytes written into a live allocation changed.
    Corrupted {
        /// The allocation.
        allocation: KitAllocation,
        /// What the script did before it read them back.
        after: &'static str,
    },
    /// A call that must fail succeeded, or failed with another error.
    WrongAnswer {
        /// The call.
        call: &'static str,
        /// The error it must return.
        expected: ArenaError,
        /// What it returned (`None`: it succeeded).
        got: Option<ArenaError>,
    },
    /// `persistent_used_bytes` is below what the persistent allocations
    /// hold.
    UsedBytesTooLow {
        /// Reported.
        reported: usize,
        /// At least this many.
        at_least: usize,
    },
}

impl fmt::Display for AllocatorFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocatorFailure::TooSmallToTest { given } => write!(
                f,
                "the allocator manages {given} bytes; the kit needs at least {MIN_MEMORY}"
            ),
            AllocatorFailure::Refused { label, error } => {
                write!(f, "{label} was refused although it fits: {error}")
            }
            AllocatorFailure::Overlap { first, second } => {
                write!(f, "{first} and {second} are both live but share bytes")
            }
            AllocatorFailure::Misaligned {
                allocation,
                address,
            } => write!(
                f,
                "{allocation} starts at address {address:#x}, not aligned"
            ),
            AllocatorFailure::OutOfBounds {
                allocation,
                memory_len,
            } => write!(
                f,
                "{allocation} is shorter than asked or ends past the memory's {memory_len} bytes"
            ),
            AllocatorFailure::Corrupted { allocation, after } => {
                write!(f, "{allocation} lost its contents after {after}")
            }
            AllocatorFailure::WrongAnswer {
                call,
                expected,
                got: Some(got),
            } => write!(
                f,
                "{call} must fail with \"{expected}\" but failed with \"{got}\""
            ),
            AllocatorFailure::WrongAnswer {
                call,
                expected,
                got: None,
            } => write!(f, "{call} must fail with \"{expected}\" but succeeded"),
            AllocatorFailure::UsedBytesTooLow { reported, at_least } => write!(
                f,
                "persistent_used_bytes is {reported}, below the {at_least} bytes allocated"
            ),
        }
    }
}

impl core::error::Error for AllocatorFailure {}

/// What a passing allocator used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatorReport {
    /// Allocations the script made and checked.
    pub allocations: usize,
    /// `persistent_used_bytes` at the end.
    pub persistent_used_bytes: usize,
}

/// The allocations the script holds, and the checks made on each.
struct Script<'a, A> {
    alloc: &'a mut A,
    live: [Option<KitAllocation>; MAX_LIVE],
    made: usize,
    persistent_sizes: usize,
}

/// Runs the allocator script on `alloc`, which must be fresh (nothing
/// allocated yet) and manage at least [`MIN_MEMORY`] bytes.
///
/// ```
/// use hilt_runtime::arena::Arena;
/// use hilt_runtime::port::kit::check_allocators;
///
/// let mut bytes = [0u8; 4096];
/// let report = check_allocators(&mut Arena::new(&mut bytes)).unwrap();
/// assert!(report.persistent_used_bytes >= 24 + 7 + 32 + 8);
/// ```
pub fn check_allocators<A: PersistentAllocator + NonPersistentAllocator>(
    alloc: &mut A,
) -> Result<AllocatorReport, AllocatorFailure> {
    let memory_len = alloc.memory_len();
    if memory_len < MIN_MEMORY {
        return Err(AllocatorFailure::TooSmallToTest { given: memory_len });
    }
    let mut s = Script {
        alloc,
        live: [None; MAX_LIVE],
        made: 0,
        persistent_sizes: 0,
    };
    s.set_up_phase()?;
    s.head_phase()?;
    s.out_of_memory_phase(memory_len)?;
    let reported = s.alloc.persistent_used_bytes();
    if reported < s.persistent_sizes {
        return Err(AllocatorFailure::UsedBytesTooLow {
            reported,
            at_least: s.persistent_sizes,
        });
    }
    Ok(AllocatorReport {
        allocations: s.made,
        persistent_used_bytes: reported,
    })
}

/// The byte the script writes at `i` of the allocation in live slot `slot`.
fn pattern(slot: usize, i: usize) -> u8 {
    (0x3C ^ (slot as u8).wrapping_mul(0x45) ^ (i as u8).wrapping_mul(0x1D)) | 1
}

impl<A: PersistentAllocator + NonPersistentAllocator> Script<'_, A> {
    /// Temp and persistent allocations side by side; invalid alignments;
    /// the head refused while temp is held; temp reset.
    fn set_up_phase(&mut self) -> Result<(), AllocatorFailure> {
        self.temp("temp #0", 40, 8)?;
        self.persistent("persistent #0", 24, 16)?;
        self.temp("temp #1", 100, 64)?;
        self.persistent("persistent #1", 7, 4)?;
        self.persistent("persistent #2 (empty)", 0, 1)?;
        let got = self.alloc.commit_head(64, 16).err();
        expect(
            "commit_head while temp memory is held",
            ArenaError::TempInUse,
            got,
        )?;
        let bad = ArenaError::InvalidAlignment { align: 3 };
        expect(
            "allocate_temp with alignment 3",
            bad,
            self.alloc.allocate_temp(8, 3).err(),
        )?;
        let got = self.alloc.allocate_persistent(8, 3).err();
        expect("allocate_persistent with alignment 3", bad, got)?;
        self.reset_temp()?;
        self.temp("temp #2 (after reset)", 40, 8)?;
        self.reset_temp()
    }

    /// The head over released temp memory; temp and persistent allocations
    /// after it; the head survives a temp reset.
    fn head_phase(&mut self) -> Result<(), AllocatorFailure> {
        let region =
            self.alloc
                .commit_head(200, 16)
                .map_err(|error| AllocatorFailure::Refused {
                    label: "head",
                    error,
                })?;
        let head = self.record("head", Section::Head, region, 16, 200)?;
        if self.alloc.head() != region {
            return Err(AllocatorFailure::Corrupted {
                allocation: head,
                after: "head() was asked for it (it returned another region)",
            });
        }
        self.temp("temp #3 (after the head)", 16, 4)?;
        self.persistent("persistent #3 (after the head)", 32, 32)?;
        self.reset_temp()
    }

    /// Requests that cannot fit get `OutOfMemory` naming the section and
    /// the size, and the allocator still serves small requests afterwards.
    fn out_of_memory_phase(&mut self, memory_len: usize) -> Result<(), AllocatorFailure> {
        let cases: [(&'static str, Section, usize); 4] = [
            (
                "allocate_persistent of the whole memory + 1",
                Section::Tail,
                memory_len + 1,
            ),
            (
                "allocate_persistent of usize::MAX bytes",
                Section::Tail,
                usize::MAX,
            ),
            (
                "allocate_temp of the whole memory",
                Section::Temp,
                memory_len,
            ),
            (
                "commit_head of the whole memory + 1",
                Section::Head,
                memory_len + 1,
            ),
        ];
        for (call, section, size) in cases {
            let got = match section {
                Section::Tail => self.alloc.allocate_persistent(size, 1).err(),
                Section::Temp => self.alloc.allocate_temp(size, 1).err(),
                Section::Head => self.alloc.commit_head(size, 16).err(),
            };
            expect_out_of_memory(call, section, size, got)?;
        }
        self.alloc.reset_temp();
        self.persistent("persistent #4 (after out of memory)", 8, 8)?;
        self.check_contents("the out-of-memory calls")
    }

    fn temp(
        &mut self,
        label: &'static str,
        size: usize,
        align: u32,
    ) -> Result<(), AllocatorFailure> {
        let region = self
            .alloc
            .allocate_temp(size, align)
            .map_err(|error| AllocatorFailure::Refused { label, error })?;
        self.record(label, Section::Temp, region, align, size)
            .map(|_| ())
    }

    fn persistent(
        &mut self,
        label: &'static str,
        size: usize,
        align: u32,
    ) -> Result<(), AllocatorFailure> {
        let region = self
            .alloc
            .allocate_persistent(size, align)
            .map_err(|error| AllocatorFailure::Refused { label, error })?;
        self.persistent_sizes += size;
        self.record(label, Section::Tail, region, align, size)
            .map(|_| ())
    }

    /// Checks a new allocation against the memory and every live one, then
    /// fills it with its pattern and keeps it.
    fn record(
        &mut self,
        label: &'static str,
        section: Section,
        region: Region,
        align: u32,
        size: usize,
    ) -> Result<KitAllocation, AllocatorFailure> {
        let new = KitAllocation {
            label,
            section,
            region,
            align,
            size,
        };
        let memory_len = self.alloc.memory_len();
        let end = u64::from(region.offset) + u64::from(region.len);
        if (region.len as usize) < size || end > memory_len as u64 {
            return Err(AllocatorFailure::OutOfBounds {
                allocation: new,
                memory_len,
            });
        }
        let address = self.alloc.memory_address() + region.offset as usize;
        if !address.is_multiple_of(align as usize) {
            return Err(AllocatorFailure::Misaligned {
                allocation: new,
                address,
            });
        }
        let shares = |old: &KitAllocation| {
            old.region.offset < region.end()
                && region.offset < old.region.end()
                && size > 0
                && old.size > 0
        };
        if let Some(old) = self.live.iter().flatten().find(|old| shares(old)) {
            return Err(AllocatorFailure::Overlap {
                first: *old,
                second: new,
            });
        }
        self.check_contents(label)?;
        let slot = self
            .live
            .iter()
            .position(Option::is_none)
            .unwrap_or(MAX_LIVE - 1);
        self.live[slot] = Some(new);
        self.made += 1;
        let bytes = self.alloc.region_bytes(Region {
            offset: region.offset,
            len: size as u32,
        });
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = pattern(slot, i);
        }
        Ok(new)
    }

    /// Releases temp: the script forgets its temp allocations, and checks
    /// that everything else kept its bytes.
    fn reset_temp(&mut self) -> Result<(), AllocatorFailure> {
        self.alloc.reset_temp();
        for slot in &mut self.live {
            if slot.is_some_and(|a| a.section == Section::Temp) {
                *slot = None;
            }
        }
        self.check_contents("reset_temp")
    }

    /// Every live allocation still holds its pattern.
    fn check_contents(&mut self, after: &'static str) -> Result<(), AllocatorFailure> {
        for slot in 0..MAX_LIVE {
            let Some(allocation) = self.live[slot] else {
                continue;
            };
            let region = Region {
                offset: allocation.region.offset,
                len: allocation.size as u32,
            };
            let bytes = self.alloc.region_bytes(region);
            if bytes
                .iter()
                .enumerate()
                .any(|(i, &b)| b != pattern(slot, i))
            {
                return Err(AllocatorFailure::Corrupted { allocation, after });
            }
        }
        Ok(())
    }
}

fn expect(
    call: &'static str,
    expected: ArenaError,
    got: Option<ArenaError>,
) -> Result<(), AllocatorFailure> {
    if got == Some(expected) {
        Ok(())
    } else {
        Err(AllocatorFailure::WrongAnswer {
            call,
            expected,
            got,
        })
    }
}

/// `OutOfMemory` for `section` and `size` (capped to 32 bits), whatever
/// the free bytes it states.
fn expect_out_of_memory(
    call: &'static str,
    section: Section,
    size: usize,
    got: Option<ArenaError>,
) -> Result<(), AllocatorFailure> {
    let requested = size.min(u32::MAX as usize) as u32;
    match got {
        Some(ArenaError::OutOfMemory {
            section: s,
            requested: r,
            ..
        }) if s == section && r == requested => Ok(()),
        _ => Err(AllocatorFailure::WrongAnswer {
            call,
            expected: ArenaError::OutOfMemory {
                section,
                requested,
                free: 0,
            },
            got,
        }),
    }
}
