//! Guard bands ("canaries"): known byte patterns around the arena's
//! sections and, in a checking mode, after every planned buffer, so an
//! overrun is caught where it happens instead of corrupting a neighbour.
//!
//! - [`CanaryMode::Bounds`]: guards at both ends of the arena and of the
//!   planned head and the persistent tail, checked after every invoke.
//! - [`CanaryMode::Buffers`]: also one guard after every planned buffer
//!   (the planner sees each buffer `GUARD_BYTES` longer). A buffer's guard
//!   is filled just before the step that first writes the buffer and
//!   checked after every step while the buffer is live, so the op that
//!   overran is named.
//! - [`CanaryMode::Off`]: nothing reserved, nothing checked.
//!
//! The pattern depends on the byte's position in its guard, so a `memset`
//! of any single value, or a copy of a neighbouring guard shifted by one,
//! still shows up.

use core::fmt;

use bytemuck::{Pod, Zeroable};

/// Bytes in every guard band.
pub const GUARD_BYTES: u32 = 16;

/// Which canaries an allocation carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CanaryMode {
    /// No guards (zero cost).
    #[default]
    Off,
    /// Guards around the arena and its sections.
    Bounds,
    /// Section guards plus one after every planned buffer.
    Buffers,
}

impl CanaryMode {
    /// Every mode, in the order their names are listed.
    pub const ALL: [CanaryMode; 3] = [CanaryMode::Off, CanaryMode::Bounds, CanaryMode::Buffers];

    /// Every accepted name, in [`ALL`](Self::ALL)'s order.
    pub const NAMES: &'static [&'static str] = &["off", "bounds", "buffers"];

    /// The name a build (`HILT_CANARY`), a scenario (`canary = "…"`) or the
    /// CLI (`--canary`) uses: one list, so they cannot disagree.
    pub const fn name(self) -> &'static str {
        match self {
            CanaryMode::Off => "off",
            CanaryMode::Bounds => "bounds",
            CanaryMode::Buffers => "buffers",
        }
    }
}

impl core::str::FromStr for CanaryMode {
    type Err = crate::choice::UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        CanaryMode::ALL
            .into_iter()
            .find(|mode| mode.name() == name)
            .ok_or_else(|| crate::choice::UnknownName::new("canary mode", name, CanaryMode::NAMES))
    }
}

impl core::fmt::Display for CanaryMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte `i` of a guard.
#[inline]
pub fn pattern(i: usize) -> u8 {
    0xA5 ^ (i as u8).wrapping_mul(0x3B)
}

/// Writes the guard pattern into `bytes`.
pub fn fill(bytes: &mut [u8]) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = pattern(i);
    }
}

/// The first damaged byte of a guard and how many bytes differ, if any.
pub fn damage(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut first = None;
    let mut count = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b != pattern(i) {
            first.get_or_insert(i);
            count += 1;
        }
    }
    first.map(|f| (f, count))
}

/// What a guard protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuardOwner {
    /// Below the head: the arena's first bytes.
    ArenaStart,
    /// Just after the planned head.
    HeadEnd,
    /// Just below the persistent tail.
    TailStart,
    /// The arena's last bytes (a stack growing down into the arena hits it).
    ArenaEnd,
    /// After a tensor's buffer.
    Tensor(u32),
    /// After a kernel's scratch buffer (requesting op).
    Scratch(u32),
}

impl fmt::Display for GuardOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardOwner::ArenaStart => f.write_str("the arena's start guard"),
            GuardOwner::HeadEnd => f.write_str("the guard after the head"),
            GuardOwner::TailStart => f.write_str("the guard before the tail"),
            GuardOwner::ArenaEnd => f.write_str("the arena's end guard"),
            GuardOwner::Tensor(t) => write!(f, "the guard after tensor {t}"),
            GuardOwner::Scratch(op) => write!(f, "the guard after op {op}'s scratch buffer"),
        }
    }
}

/// A damaged guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CanaryFault {
    /// Whose guard.
    pub owner: GuardOwner,
    /// Offset of the first damaged byte from the arena's start.
    pub offset: u32,
    /// How many guard bytes differ.
    pub bytes_hit: u32,
    /// The op that ran last before the damage was seen (`None`: before any op).
    pub op: Option<u32>,
}

impl fmt::Display for CanaryFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was overwritten at arena offset {} ({} bytes hit)",
            self.owner, self.offset, self.bytes_hit
        )?;
        match self.op {
            Some(op) => write!(f, ", seen after op {op}"),
            None => f.write_str(", before any op ran"),
        }
    }
}

/// Where an allocation's section guards are (offsets from the arena's
/// start); all empty when canaries are off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SectionGuards {
    /// The mode the allocation was made with.
    pub mode: CanaryMode,
    /// `[arena start, head end, tail start, arena end]`.
    pub regions: [crate::arena::Region; 4],
    /// The per-buffer guard table (`Buffers` mode), in the tail.
    pub buffer_table: crate::arena::Region,
}

impl SectionGuards {
    /// Owners of `regions`, in order.
    pub const OWNERS: [GuardOwner; 4] = [
        GuardOwner::ArenaStart,
        GuardOwner::HeadEnd,
        GuardOwner::TailStart,
        GuardOwner::ArenaEnd,
    ];
}

/// One per-buffer guard, kept in the tail in `Buffers` mode.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct BufferGuard {
    /// Offset of the guard from the arena's start.
    pub offset: u32,
    /// Tensor index, or [`BufferGuard::SCRATCH`] | requesting op.
    pub owner: u32,
    /// First step the buffer is live.
    pub first_step: u32,
    /// Last step it is live (holds included).
    pub last_step: u32,
}

impl BufferGuard {
    /// Marks a scratch buffer's guard in `owner`.
    pub const SCRATCH: u32 = 1 << 31;

    /// Whose guard this is.
    pub fn owner(&self) -> GuardOwner {
        if self.owner & Self::SCRATCH != 0 {
            GuardOwner::Scratch(self.owner & !Self::SCRATCH)
        } else {
            GuardOwner::Tensor(self.owner)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CanaryMode;

    #[test]
    fn mode_names_round_trip_and_an_unknown_one_is_named() {
        for (mode, name) in CanaryMode::ALL.into_iter().zip(CanaryMode::NAMES) {
            assert_eq!(mode.name(), *name);
            assert_eq!(name.parse::<CanaryMode>(), Ok(mode));
        }
        let e = "all".parse::<CanaryMode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown canary mode \"all\": use off, bounds or buffers"
        );
    }
}
