//! The model slot: where a firmware keeps its `.tflite` in flash, with the
//! model's identity beside it, in a layout the host can rewrite in a built
//! ELF.
//!
//! Why: a firmware that embedded its model at compile time had to be
//! rebuilt (a full LTO link, ~10 s) for every (board, model) pair, and a
//! nightly run or a gate is mostly such builds. With a slot, one build per
//! board and configuration serves every model that fits the slot; the host
//! writes the model into a copy of the ELF (milliseconds), as a product's
//! flashing tool writes a model partition.
//!
//! Layout, little-endian: a 64-byte header, then the model bytes at offset
//! 64 (so they keep the slot's 64-byte alignment), then zeros to the end.
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 8 | [`MAGIC`] |
//! | 8 | 4 | model length |
//! | 12 | 4 | CRC-32 of the model ([`crate::crc::crc32`]) |
//! | 16 | 1 | name length (≤ [`MAX_NAME`]) |
//! | 17 | 47 | the model's file name, UTF-8 |
//!
//! A slot may also hold the model's *constant image* (the kernel constants
//! prepare works out, kept in flash instead of the arena's tail: see
//! `hilt_runtime::constants`). It starts at the first 64-byte boundary
//! after the model, with a 16-byte header of its own: [`CONSTANTS_MAGIC`],
//! its length, then zeros; the image follows, 16-byte aligned.

use crate::crc::crc32;

/// The slot's first eight bytes.
pub const MAGIC: [u8; 8] = *b"HILTMDL1";

/// Header bytes before the model.
pub const HEADER: usize = 64;

/// The longest model name a header holds (longer names are cut at a
/// character boundary).
pub const MAX_NAME: usize = HEADER - 17;

/// The first eight bytes of a constant image's header.
pub const CONSTANTS_MAGIC: [u8; 8] = *b"HILTCON1";

/// Bytes of a constant image's header.
pub const CONSTANTS_HEADER: usize = 16;

/// Where a constant image's header starts in a slot whose model is
/// `model_len` bytes.
pub const fn constants_at(model_len: usize) -> usize {
    (HEADER + model_len).next_multiple_of(64)
}

/// Slot bytes a model of `model_len` bytes needs, with a constant image of
/// `constants_len` bytes (none when 0).
pub const fn payload_len(model_len: usize, constants_len: usize) -> usize {
    if constants_len == 0 {
        HEADER + model_len
    } else {
        constants_at(model_len) + CONSTANTS_HEADER + constants_len
    }
}

/// The symbol a firmware gives its slot, so the host finds it in the ELF.
pub const SYMBOL: &str = "HILT_MODEL_SLOT";

/// Why a slot cannot be written or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SlotError {
    /// The model does not fit: the slot holds `capacity` model bytes.
    TooSmall {
        /// The model's bytes.
        model: usize,
        /// What the slot holds after its header.
        capacity: usize,
    },
    /// The slot does not start with [`MAGIC`] (not a slot, or not written).
    Magic,
    /// The header's length runs past the slot.
    Length,
    /// The model bytes do not have the header's CRC-32.
    Crc {
        /// CRC-32 the header states.
        stated: u32,
        /// CRC-32 of the bytes.
        actual: u32,
    },
}

impl core::fmt::Display for SlotError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SlotError::TooSmall { model, capacity } => write!(
                f,
                "the model ({model} bytes) does not fit the firmware's model slot ({capacity} bytes)"
            ),
            SlotError::Magic => write!(f, "no model slot header (magic {MAGIC:?} missing)"),
            SlotError::Length => write!(f, "the model slot's length runs past the slot"),
            SlotError::Crc { stated, actual } => write!(
                f,
                "the model slot's bytes have CRC-32 {actual:#010x}, its header says {stated:#010x}"
            ),
        }
    }
}

/// A model read from a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotModel<'a> {
    /// The `.tflite` bytes (64-byte aligned when the slot is).
    pub bytes: &'a [u8],
    /// CRC-32 of `bytes`, from the header.
    pub crc: u32,
    /// The model's file name, from the header.
    pub name: &'a str,
    /// The constant image after the model (empty when the slot has none).
    pub constants: &'a [u8],
}

/// Writes `model` (named `name`) into `slot`: header, bytes, zeros after.
pub fn write(slot: &mut [u8], model: &[u8], name: &str) -> Result<(), SlotError> {
    write_with_constants(slot, model, name, &[])
}

/// [`write`], with the model's constant image after it (none when
/// `constants` is empty). [`SlotError::TooSmall`] counts the image in.
pub fn write_with_constants(
    slot: &mut [u8],
    model: &[u8],
    name: &str,
    constants: &[u8],
) -> Result<(), SlotError> {
    let capacity = slot.len().saturating_sub(HEADER);
    let needs = payload_len(model.len(), constants.len());
    if needs > slot.len() || u32::try_from(needs).is_err() {
        return Err(SlotError::TooSmall {
            model: needs - HEADER,
            capacity,
        });
    }
    let mut cut = name.len().min(MAX_NAME);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let (header, rest) = slot.split_at_mut(HEADER);
    header.fill(0);
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&(model.len() as u32).to_le_bytes());
    header[12..16].copy_from_slice(&crc32(model).to_le_bytes());
    header[16] = cut as u8;
    header[17..17 + cut].copy_from_slice(&name.as_bytes()[..cut]);
    let (bytes, zeros) = rest.split_at_mut(model.len());
    bytes.copy_from_slice(model);
    zeros.fill(0);
    if !constants.is_empty() {
        let at = constants_at(model.len());
        let image = &mut slot[at..at + CONSTANTS_HEADER + constants.len()];
        image[..8].copy_from_slice(&CONSTANTS_MAGIC);
        image[8..12].copy_from_slice(&(constants.len() as u32).to_le_bytes());
        image[CONSTANTS_HEADER..].copy_from_slice(constants);
    }
    Ok(())
}

/// The constant image after a model of `model_len` bytes (empty when the
/// slot holds none; [`SlotError::Length`] when its length runs past).
fn constants_in(slot: &[u8], model_len: usize) -> Result<&[u8], SlotError> {
    let at = constants_at(model_len);
    let Some(header) = slot.get(at..at + CONSTANTS_HEADER) else {
        return Ok(&[]);
    };
    if header[..8] != CONSTANTS_MAGIC {
        return Ok(&[]);
    }
    let len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
    slot.get(at + CONSTANTS_HEADER..)
        .and_then(|rest| rest.get(..len))
        .ok_or(SlotError::Length)
}

/// Reads the model a slot holds, trusting its header's CRC (the firmware
/// at start-up: hashing the model costs more than the whole boot).
pub fn read(slot: &[u8]) -> Result<SlotModel<'_>, SlotError> {
    let header = slot.get(..HEADER).ok_or(SlotError::Magic)?;
    if header[..8] != MAGIC {
        return Err(SlotError::Magic);
    }
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let len = word(8) as usize;
    let bytes = slot
        .get(HEADER..)
        .and_then(|rest| rest.get(..len))
        .ok_or(SlotError::Length)?;
    let name_len = usize::from(header[16]).min(MAX_NAME);
    let name = core::str::from_utf8(&header[17..17 + name_len]).unwrap_or("");
    Ok(SlotModel {
        bytes,
        crc: word(12),
        name,
        constants: constants_in(slot, len)?,
    })
}

/// [`read`], also checking the bytes against the header's CRC (the host,
/// on an ELF it did not write).
pub fn read_checked(slot: &[u8]) -> Result<SlotModel<'_>, SlotError> {
    let model = read(slot)?;
    let actual = crc32(model.bytes);
    if actual != model.crc {
        return Err(SlotError::Crc {
            stated: model.crc,
            actual,
        });
    }
    Ok(model)
}

/// The slot a host builds for a model of `model_len` bytes: a power of two
/// of at least 128 KiB, so that one firmware build serves every model of a
/// size class (the MLPerf Tiny and TFLM example models fall into two: up
/// to ResNet-8's 98 KB, and the 277–333 KB ones).
pub fn capacity_for(model_len: usize) -> usize {
    (model_len + HEADER).next_power_of_two().max(128 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_model_reads_back_with_its_name_and_crc() {
        let mut slot = [0xAAu8; 256];
        write(&mut slot, b"TFL3model", "hello_world_int8.tflite").unwrap();
        let m = read_checked(&slot).unwrap();
        assert_eq!(m.bytes, b"TFL3model");
        assert_eq!(m.name, "hello_world_int8.tflite");
        assert_eq!(m.crc, crc32(b"TFL3model"));
        assert!(
            slot[HEADER + 9..].iter().all(|&b| b == 0),
            "the old tail is cleared"
        );
    }

    #[test]
    fn a_constant_image_follows_the_model_aligned() {
        let mut slot = [0xAAu8; 512];
        let image = [7u8; 40];
        write_with_constants(&mut slot, b"TFL3model", "m.tflite", &image).unwrap();
        let m = read_checked(&slot).unwrap();
        assert_eq!(m.bytes, b"TFL3model");
        assert_eq!(m.constants, &image);
        assert_eq!(
            m.constants.as_ptr() as usize - slot.as_ptr() as usize,
            128 + 16
        );
        assert_eq!(payload_len(9, 40), 128 + 16 + 40);
        assert_eq!(
            write_with_constants(&mut slot[..180], b"TFL3model", "m", &image),
            Err(SlotError::TooSmall {
                model: 184 - HEADER,
                capacity: 180 - HEADER
            })
        );
        write(&mut slot, b"TFL3model", "m").unwrap();
        assert!(
            read(&slot).unwrap().constants.is_empty(),
            "rewritten without"
        );
    }

    #[test]
    fn a_model_too_large_a_damaged_header_and_damaged_bytes_are_named() {
        let mut slot = [0u8; HEADER + 4];
        assert_eq!(
            write(&mut slot, b"12345", "m"),
            Err(SlotError::TooSmall {
                model: 5,
                capacity: 4
            })
        );
        assert_eq!(read(&slot), Err(SlotError::Magic));
        write(&mut slot, b"1234", "m").unwrap();
        slot[8] = 5;
        assert_eq!(read(&slot), Err(SlotError::Length));
        slot[8] = 4;
        slot[HEADER] ^= 1;
        assert!(matches!(read_checked(&slot), Err(SlotError::Crc { .. })));
        assert!(read(&slot).is_ok(), "read trusts the header");
    }

    #[test]
    fn a_long_name_is_cut_at_a_character_boundary() {
        let mut slot = [0u8; 128];
        let name = "é".repeat(40);
        write(&mut slot, b"x", &name).unwrap();
        let m = read(&slot).unwrap();
        assert_eq!(m.name, "é".repeat(MAX_NAME / 2));
    }

    #[test]
    fn capacities_are_size_classes() {
        assert_eq!(capacity_for(2_704), 128 * 1024);
        assert_eq!(capacity_for(98_496), 128 * 1024);
        assert_eq!(capacity_for(128 * 1024 - HEADER), 128 * 1024);
        assert_eq!(capacity_for(128 * 1024), 256 * 1024);
        assert_eq!(capacity_for(333_288), 512 * 1024);
    }
}
