//! Where kernels keep the constants they work out at prepare: in the
//! arena's tail (TFLM's way), or in a *constant image* that lives beside the
//! model in flash.
//!
//! Everything a kernel stores at prepare (per-channel multipliers and
//! shifts, folded biases, widened or packed weights, lookup tables) depends
//! only on the model and the kernel build, and invoke only reads it. On
//! MobileNet-sized models that is most of the tail: 24 of person_detect's
//! 26 KiB. A board whose RAM is short can keep it in flash instead:
//!
//! - the host runs every prepare once with a [`Constants::Write`] image and
//!   writes the bytes it collected into the firmware's model slot;
//! - the firmware prepares with [`Constants::Read`] over those bytes: each
//!   kernel still works its constants out (prepare stays the one place
//!   they are computed), but they are compared with the image instead of
//!   stored, and the op data handles point into the image. A byte that
//!   differs (an image made for another model, or by another kernel build)
//!   fails the op's prepare, naming the op and the byte.
//!
//! Handles into the image carry [`IN_IMAGE`] in their offset, as tensor
//! slots carry `TensorSlot::IN_MODEL`: an invoke tells the two memories
//! apart with one bit test. An op that an accelerator runs keeps its op
//! data in the arena, where the engine can read it as its descriptor.

use crate::kernels::KernelError;

/// Whether this build reads constant images (not under the
/// `no-constant-image` feature): when false, constants always go to the
/// tail and the image's code is left out of the build.
pub const IMAGE_LINKED: bool = !cfg!(feature = "no-constant-image");

/// Set in an op data or stored array offset that lies in the constant
/// image; the rest of the offset is the byte in the image.
pub const IN_IMAGE: u32 = 1 << 31;

/// Alignment of each entry in the image (as op data in the tail): enough
/// for any `Pod` a kernel stores. The image itself must start this aligned.
pub const IMAGE_ALIGN: u32 = 8;

/// Where prepare puts kernel constants.
#[derive(Debug, Default)]
pub enum Constants<'a> {
    /// In the arena's tail.
    #[default]
    Tail,
    /// Into `image`, from its start; `len` bytes written so far.
    Write {
        /// Where the image is built.
        image: &'a mut [u8],
        /// Bytes used.
        len: u32,
    },
    /// Compared with `image` (read from flash); `len` bytes checked so far.
    Read {
        /// The image the host wrote.
        image: &'a [u8],
        /// Bytes checked.
        len: u32,
    },
}

impl<'a> Constants<'a> {
    /// An image to be built in `image` (the host's side).
    pub fn write(image: &'a mut [u8]) -> Self {
        Constants::Write { image, len: 0 }
    }

    /// An image to read and check (the firmware's side).
    pub fn read(image: &'a [u8]) -> Self {
        Constants::Read { image, len: 0 }
    }

    /// Whether constants go to the tail.
    pub fn in_tail(&self) -> bool {
        matches!(self, Constants::Tail)
    }

    /// Starts over (allocate may run again).
    pub(crate) fn rewind(&mut self) {
        match self {
            Constants::Tail => {}
            Constants::Write { len, .. } | Constants::Read { len, .. } => *len = 0,
        }
    }

    /// The image bytes used so far: what a host writes to flash after
    /// allocate, or what the firmware's prepare checked.
    pub fn used(&self) -> &[u8] {
        match self {
            Constants::Tail => &[],
            Constants::Write { image, len } => &image[..*len as usize],
            Constants::Read { image, len } => &image[..*len as usize],
        }
    }

    /// The whole image a read checks against (its length is the host's).
    fn whole(&self) -> &[u8] {
        match self {
            Constants::Tail => &[],
            Constants::Write { image, .. } => image,
            Constants::Read { image, .. } => image,
        }
    }

    /// Reserves `bytes` at the next aligned place; returns the byte's
    /// image offset (without [`IN_IMAGE`]).
    pub(crate) fn reserve(&mut self, bytes: usize) -> Result<u32, KernelError> {
        let capacity = self.whole().len();
        let len = match self {
            Constants::Tail => return Err(KernelError::Internal),
            Constants::Write { len, .. } | Constants::Read { len, .. } => len,
        };
        let start = crate::request::align_up(u64::from(*len), u64::from(IMAGE_ALIGN)) as u32;
        let end = (start as usize)
            .checked_add(bytes)
            .filter(|&e| e < IN_IMAGE as usize);
        match end {
            Some(end) if end <= capacity => {
                *len = end as u32;
                Ok(start)
            }
            _ => Err(KernelError::ConstantImageShort {
                needed: end.map_or(u32::MAX, |e| e as u32),
                image: capacity as u32,
            }),
        }
    }

    /// Puts `bytes` at image offset `at` (reserved before): written, or
    /// compared with what the image holds there.
    pub(crate) fn put(&mut self, at: u32, bytes: &[u8]) -> Result<(), KernelError> {
        let range = at as usize..at as usize + bytes.len();
        match self {
            Constants::Tail => Err(KernelError::Internal),
            Constants::Write { image, .. } => {
                image
                    .get_mut(range)
                    .ok_or(KernelError::Internal)?
                    .copy_from_slice(bytes);
                Ok(())
            }
            Constants::Read { image, .. } => {
                let held = image.get(range).ok_or(KernelError::Internal)?;
                match held.iter().zip(bytes).position(|(a, b)| a != b) {
                    None => Ok(()),
                    Some(i) => Err(KernelError::ConstantImageDiffers {
                        byte: at + i as u32,
                    }),
                }
            }
        }
    }

    /// `len` bytes at image offset `at`, as prepare stored them.
    pub(crate) fn bytes(&self, at: u32, len: u32) -> Result<&[u8], KernelError> {
        self.whole()
            .get(at as usize..at as usize + len as usize)
            .ok_or(KernelError::Internal)
    }

    /// After allocate on the firmware's side: an image longer than what
    /// prepare checked was made for another model.
    pub(crate) fn check_fully_used(&self) -> Result<(), (u32, u32)> {
        match self {
            Constants::Read { image, len } if image.len() != *len as usize => {
                Err((*len, image.len() as u32))
            }
            _ => Ok(()),
        }
    }

    /// Checks a read image's start alignment.
    pub(crate) fn aligned(&self) -> bool {
        let whole = self.whole();
        whole.is_empty() || (whole.as_ptr() as usize).is_multiple_of(IMAGE_ALIGN as usize)
    }
}
