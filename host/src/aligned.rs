//! Bytes kept 16-aligned in memory (a model as it sits in flash, an arena
//! as the firmware gives it), allocated fallibly where a user picks the
//! size.

/// Bytes kept 16-aligned in memory, as a model sits in flash: kernels view
/// constant data as `f32`/`i32` slices in place.
#[derive(Debug, Clone)]
pub struct AlignedBytes {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBytes {
    /// Copies `bytes` into aligned storage.
    pub fn new(bytes: &[u8]) -> Self {
        let mut words = vec![0u128; bytes.len().div_ceil(16)];
        bytemuck_bytes_mut(&mut words)[..bytes.len()].copy_from_slice(bytes);
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }

    /// A zeroed buffer of `len` bytes (fixed sizes, such as
    /// [`DEFAULT_ARENA`]; a user's size goes through [`Self::try_zeroed`]).
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes {
            words: vec![0u128; len.div_ceil(16)],
            len,
        }
    }

    /// A zeroed arena of `len` bytes, or an error naming the size when the
    /// system cannot give it (`--arena 999999999999` is refused, not an
    /// abort).
    pub fn try_zeroed(len: usize) -> Result<Self, ArenaAllocError> {
        Ok(AlignedBytes {
            words: try_zeroed_vec(len.div_ceil(16), len)?,
            len,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &bytemuck_bytes(&self.words)[..self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck_bytes_mut(&mut self.words)[..len]
    }
}

/// An arena the system could not allocate: `--arena` (or a board's
/// arena) asks for more memory than this machine gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate an arena of {bytes} bytes on this host (--arena {bytes}): out of memory")]
pub struct ArenaAllocError {
    /// The arena's size asked for.
    pub bytes: usize,
}

/// Element types for which all-zero bytes are a valid value.
pub(crate) trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u128 {}

/// `n` zeroed elements, allocated fallibly and lazily zeroed (the system's
/// zero pages, as `vec![0; n]` does), so a large arena costs nothing until
/// used and one too large is an error naming `bytes`, not an abort.
pub(crate) fn try_zeroed_vec<T: Zeroable>(
    n: usize,
    bytes: usize,
) -> Result<Vec<T>, ArenaAllocError> {
    let error = ArenaAllocError { bytes };
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| error)?;
    // SAFETY: `layout` has a non-zero size (n > 0 and T is not zero-sized).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(error);
    }
    // SAFETY: allocated by the global allocator with `T`'s alignment and
    // `n` elements' size; all-zero bytes are valid `T`s (`Zeroable`).
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

fn bytemuck_bytes(words: &[u128]) -> &[u8] {
    // SAFETY: u128 has no padding and any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 16) }
}

fn bytemuck_bytes_mut(words: &mut [u128]) -> &mut [u8] {
    // SAFETY: as above; the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 16) }
}
