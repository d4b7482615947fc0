//! The runtime's error values as bytes, so that a firmware can say what
//! went wrong without the words for it.
//!
//! Every error a firmware reports (an [`InterpreterError`], a
//! [`ModelError`], a [`PlanError`], an [`AccelError`] and all they hold) has
//! a wire form here: a tag byte per enum, then its fields, little-endian at
//! their own widths. The firmware writes the form ([`WireForm::put`]); the
//! host reads the same value back ([`WireForm::take`]) and writes the words
//! with the value's `Display`. So the text a user reads is the one the
//! runtime defines, while the firmware links neither that text nor
//! `core::fmt`'s machinery: the idea of defmt, with hilt's own types on
//! both ends.
//!
//! The forms are listed beside each other, one line per variant, by the
//! [`wire_enum!`] and [`wire_struct!`] macros: a variant added to an error
//! and not here fails to compile (the writer's `match` is exhaustive).

use crate::accel::{AccelError, RegionRole};
use crate::allocation::{AllocError, ArenaNeeds};
use crate::arena::{ArenaError, Section};
use crate::canary::{CanaryFault, GuardOwner};
use crate::interpreter::{CustomCode, InterpreterError, OpName};
use crate::kernels::{KernelError, QuantProblem};
use crate::model::{FlatbufferFault, ModelError, Site};
use crate::planner::check::{PlacedBuffer, PlanFailure};
use crate::planner::{OfflinePlanError, PlanError};
use crate::pool::PoolError;
use crate::reach::Reach;
use crate::request::BufferRequest;

/// A value with a wire form.
pub trait WireForm: Sized {
    /// Appends the value's form.
    fn put(&self, w: &mut FormWriter<'_>);
    /// Reads a value back; `None` when the bytes are not a form of this type.
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self>;
}

/// Writes forms into a caller's buffer. Bytes past its end are dropped and
/// remembered ([`FormWriter::overflowed`]), never a panic.
#[derive(Debug)]
pub struct FormWriter<'b> {
    buf: &'b mut [u8],
    at: usize,
    overflowed: bool,
}

impl<'b> FormWriter<'b> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        FormWriter {
            buf,
            at: 0,
            overflowed: false,
        }
    }

    /// The bytes written.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.at]
    }

    /// Whether a form did not fit (the bytes written then end early, and
    /// the reader refuses them).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Appends a text: its length in a byte, then its bytes (a text over
    /// 255 bytes is cut at a character boundary).
    pub fn text(&mut self, text: &str) {
        let mut len = text.len().min(usize::from(u8::MAX));
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        self.bytes(&[len as u8]);
        self.bytes(&text.as_bytes()[..len]);
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.at..self.at + bytes.len()) {
            Some(room) => {
                room.copy_from_slice(bytes);
                self.at += bytes.len();
            }
            None => self.overflowed = true,
        }
    }
}

/// Reads forms from bytes. A form's text is handed to `intern`, which keeps
/// it for as long as the value lives (the host's set of texts it has seen).
pub struct FormReader<'b, 'i> {
    bytes: &'b [u8],
    intern: &'i mut dyn FnMut(&str) -> &'static str,
}

impl core::fmt::Debug for FormReader<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FormReader")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl<'b, 'i> FormReader<'b, 'i> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'b [u8], intern: &'i mut dyn FnMut(&str) -> &'static str) -> Self {
        FormReader { bytes, intern }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'b [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    /// A text [`FormWriter::text`] wrote, kept by `intern`.
    pub fn text(&mut self) -> Option<&'static str> {
        let len = usize::from(*self.bytes(1)?.first()?);
        let text = core::str::from_utf8(self.bytes(len)?).ok()?;
        Some((self.intern)(text))
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Reads one value and requires the bytes to end with it.
    pub fn whole<T: WireForm>(mut self) -> Option<T> {
        let value = T::take(&mut self)?;
        self.is_empty().then_some(value)
    }
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl WireForm for $t {
            fn put(&self, w: &mut FormWriter<'_>) {
                w.bytes(&self.to_le_bytes());
            }
            fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
                let bytes = r.bytes(core::mem::size_of::<$t>())?;
                Some(<$t>::from_le_bytes(bytes.try_into().ok()?))
            }
        }
    )*};
}

wire_int!(u8, i8, u16, u32, i32, u64, i64);

impl WireForm for bool {
    fn put(&self, w: &mut FormWriter<'_>) {
        u8::from(*self).put(w);
    }
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
        match u8::take(r)? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl<T: WireForm> WireForm for Option<T> {
    fn put(&self, w: &mut FormWriter<'_>) {
        match self {
            None => w.bytes(&[0]),
            Some(v) => {
                w.bytes(&[1]);
                v.put(w);
            }
        }
    }
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
        match u8::take(r)? {
            0 => Some(None),
            1 => Some(Some(T::take(r)?)),
            _ => None,
        }
    }
}

/// A text ([`FormWriter::text`]). The runtime's texts in errors are short
/// names (a field, a parameter).
impl WireForm for &'static str {
    fn put(&self, w: &mut FormWriter<'_>) {
        w.text(self);
    }
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
        r.text()
    }
}

/// An enum's form: the variant's tag, then its fields in order.
macro_rules! wire_enum {
    ($ty:ident {
        $($tag:literal => $var:ident $({ $($field:ident),* })? $(( $($item:ident),* ))?),* $(,)?
    }) => {
        impl WireForm for $ty {
            fn put(&self, w: &mut FormWriter<'_>) {
                match self {
                    $($ty::$var $({ $($field),* })? $(( $($item),* ))? => {
                        w.bytes(&[$tag]);
                        $($($field.put(w);)*)?
                        $($($item.put(w);)*)?
                    })*
                }
            }
            fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
                Some(match u8::take(r)? {
                    $($tag => $ty::$var
                        $({ $($field: WireForm::take(r)?),* })?
                        $(( $({ let _ = stringify!($item); WireForm::take(r)? }),* ))?,)*
                    _ => return None,
                })
            }
        }
    };
}

/// A struct's form: its fields in order.
macro_rules! wire_struct {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        impl WireForm for $ty {
            fn put(&self, w: &mut FormWriter<'_>) {
                $(self.$field.put(w);)*
            }
            fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
                Some($ty { $($field: WireForm::take(r)?),* })
            }
        }
    };
}

wire_enum!(InterpreterError {
    0 => NotAllocated,
    1 => OffloadNotLinked,
    2 => UnsupportedOperator { op, code },
    3 => Kernel { op, code, error },
    4 => Aliasing { op, tensor },
    5 => ReadBeforeWrite { op, tensor },
    6 => Alloc(e),
    7 => Canary(fault),
    8 => Accelerator { op, job, error },
    9 => NoSuchTensor { position },
    10 => ConstantImageMisaligned,
    11 => ConstantImageLonger { used, image },
    12 => LeanWithOffload,
    13 => LeanNotLinked,
    14 => ConstantImageNotLinked,
});

wire_enum!(OpName {
    0 => Builtin(code),
    1 => Custom(code),
});

/// A custom code: its kept text and whether it was cut.
impl WireForm for CustomCode {
    fn put(&self, w: &mut FormWriter<'_>) {
        w.text(self.as_str());
        self.cut.put(w);
    }
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
        let mut code = CustomCode::new(r.text()?);
        code.cut |= bool::take(r)?;
        Some(code)
    }
}

wire_enum!(KernelError {
    0 => MissingInput { position },
    1 => MissingOutput { position },
    2 => MissingOptions,
    3 => UnsupportedType { tensor, dtype },
    4 => ShapeMismatch { tensor },
    5 => UnsupportedRank { tensor, rank },
    6 => MissingQuantization { tensor },
    7 => BadQuantization { tensor, problem },
    8 => UnsupportedParameter { what },
    9 => Misaligned { tensor },
    10 => OutOfMemory { bytes },
    11 => NotVariable { position },
    12 => IndexOutOfRange { tensor, index, size },
    13 => TakenTwice,
    14 => Internal,
    15 => ConstantImageShort { needed, image },
    16 => ConstantImageDiffers { byte },
});

wire_enum!(QuantProblem {
    0 => Scale { channel, bits },
    1 => ZeroPointForKernel { zero_point, min, max },
    2 => ZeroPoint { channel, zero_point, dtype },
});

wire_enum!(AllocError {
    0 => ArenaTooSmall(needs),
    1 => Plan(e),
    2 => Arena(e),
    3 => PlanRejected(failure),
    4 => InvalidAlignment { align },
    5 => Pool(e),
});

wire_struct!(ArenaNeeds {
    available,
    head,
    head_exact,
    head_start,
    temp,
    tail,
    peak_step,
});

wire_enum!(ArenaError {
    0 => OutOfMemory { section, requested, free },
    1 => InvalidAlignment { align },
    2 => TempInUse,
});

wire_enum!(Section {
    0 => Head,
    1 => Temp,
    2 => Tail,
});

wire_enum!(PlanError {
    0 => InvalidAlignment { request, align },
    1 => SizeOverflow { request },
    2 => WorkspaceTooSmall { needed, given },
    3 => OffsetsTooShort { needed, given },
    4 => InvertedLifetime { request },
    5 => Offline(e),
});

wire_enum!(OfflinePlanError {
    0 => NotFound,
    1 => Truncated { bytes, needed },
    2 => UnsupportedVersion { version },
    3 => TensorCountMismatch { plan, model },
    4 => NegativeOffset { tensor, offset },
    5 => OutOfBounds { tensor, offset, end, limit },
    6 => Misaligned { tensor, offset, align },
    7 => Overlap { first, second },
});

wire_enum!(PlanFailure {
    0 => MissingOffsets { given, needed },
    1 => InvalidRequest { index, align },
    2 => Misaligned { buffer },
    3 => OutsideHead { buffer, head },
    4 => Overlap { first, second },
    5 => FixedMoved { buffer, fixed },
});

wire_struct!(PlacedBuffer {
    index,
    request,
    offset,
});

wire_struct!(BufferRequest {
    size,
    align,
    first_step,
    last_step,
    hold_until,
    tensor,
    op,
    scratch_index,
    reach,
});

wire_enum!(PoolError {
    7 => NotLinked,
    0 => TooMany { count },
    1 => TooLarge,
    2 => NonePlanned,
    3 => SizeMismatch { pools, arena },
    4 => Unreachable { request, needs },
    5 => Short { pool, needs, capacity },
    6 => Plan(e),
});

impl WireForm for Reach {
    fn put(&self, w: &mut FormWriter<'_>) {
        self.bits().put(w);
    }
    fn take(r: &mut FormReader<'_, '_>) -> Option<Self> {
        Some(Reach::from_bits(u16::take(r)?))
    }
}

wire_struct!(CanaryFault {
    owner,
    offset,
    bytes_hit,
    op,
});

wire_enum!(GuardOwner {
    0 => ArenaStart,
    1 => HeadEnd,
    2 => TailStart,
    3 => ArenaEnd,
    4 => Tensor(tensor),
    5 => Scratch(op),
});

wire_enum!(AccelError {
    0 => Misaligned { region, role },
    1 => OutsideWindow { region, role },
    2 => WriteToReadOnly { region, role },
    3 => TooManyRegions { count },
    4 => Busy,
    5 => Unsupported,
    6 => Timeout,
    7 => Aborted,
    8 => UnknownJob,
    9 => Kernel(e),
    10 => LeaseViolation { region, role },
    11 => NotWholeLines { role },
    12 => NotHeld { role },
    13 => Engine { code },
    14 => NotWaited { by_op },
    15 => NotCleaned { region, role },
    16 => NotInvalidated { region, role },
});

wire_enum!(RegionRole {
    0 => Input(index),
    1 => Output(index),
    2 => Scratch(index),
    3 => Descriptor,
});

wire_enum!(ModelError {
    0 => Malformed { fault, position },
    1 => NoSubgraph,
    2 => MissingField { site, field },
    3 => IndexOutOfRange { site, field, entry, value, len },
    4 => NegativeDimension { site, axis, value },
    5 => ShapeOverflow { site },
    6 => UnsupportedType { site, code },
    7 => BufferSizeMismatch { site, buffer, expected, actual },
    8 => BufferOutsideFile { buffer, offset, size, file_len },
    9 => TooManyEntries { site, field },
});

wire_enum!(FlatbufferFault {
    0 => NotAModel,
    1 => MissingRequiredField,
    2 => InconsistentUnion,
    3 => BadString,
    4 => Unaligned,
    5 => OutOfBounds,
    6 => TooComplex,
});

wire_enum!(Site {
    0 => Model,
    1 => Subgraph(index),
    2 => Tensor { subgraph, tensor },
    3 => Operator { subgraph, op },
    4 => OperatorCode(index),
    5 => Buffer(index),
    6 => Metadata(index),
});
