//! One verifier for every table of the schema, driven by field lists.
//!
//! flatc gives each table a verifier of its own, and the `flatbuffers`
//! crate's `visit_field::<T>` inlines each field's check with its
//! error-trace bookkeeping into it: on a Cortex-M firmware that was about
//! 25 KB of flash to check a model, whichever operators it links.
//! `schema/slim_verifier.py` replaces each generated verifier by a list of
//! what its fields are ([`Field`]: a scalar and its size, a vector of
//! scalars, a string, a table or vector of tables and their lists, a
//! union's variants), and [`verify_table`] walks such a list with the
//! crate's own primitives, in flatc's order. A field is checked exactly as
//! `visit_field` checks it, so a buffer is accepted or rejected, with the
//! same error, as flatc's verifier would; only the error trace (field
//! names, which hilt never reported) is left out.

use flatbuffers::{
    ForwardsUOffset, InvalidFlatbuffer, VOffsetT, Vector, Verifiable, Verifier, VerifierOptions,
};

/// One field of a table, as its verifier checks it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field {
    /// A scalar (or enum) of this many bytes: in the buffer, aligned to
    /// its size.
    Scalar(VOffsetT, u8),
    /// An offset to a vector of scalars of this many bytes each.
    Vector(VOffsetT, u8),
    /// An offset to a string: UTF-8, null-terminated.
    Str(VOffsetT),
    /// An offset to a table with these fields.
    Table(VOffsetT, &'static [Field]),
    /// An offset to a vector of offsets to tables with these fields.
    Tables(VOffsetT, &'static [Field]),
    /// A union: its type field (one byte), its value field (an offset to a
    /// table), and the fields of each variant's table by type. A type not
    /// listed is accepted unchecked, as flatc's verifier accepts it.
    Union {
        /// The type field's slot.
        key: VOffsetT,
        /// The value field's slot.
        value: VOffsetT,
        /// (type, the table's fields) per variant.
        variants: &'static [(u8, &'static [Field])],
    },
}

impl Field {
    /// The field's vtable slot (a union's: its value's).
    fn slot(&self) -> VOffsetT {
        match *self {
            Field::Scalar(slot, _)
            | Field::Vector(slot, _)
            | Field::Str(slot)
            | Field::Table(slot, _)
            | Field::Tables(slot, _) => slot,
            Field::Union { value, .. } => value,
        }
    }
}

type Checked = Result<(), InvalidFlatbuffer>;

/// Verifies the table at `pos` against `fields`.
pub(crate) fn verify_table(v: &mut Verifier<'_, '_>, pos: usize, fields: &[Field]) -> Checked {
    let mut table = v.visit_table(pos)?;
    for field in fields {
        match *field {
            Field::Union {
                key,
                value,
                variants,
            } => {
                // flatc's order: the value's slot, then the key's.
                let value_at = table.deref(value)?;
                let key_at = table.deref(key)?;
                match (key_at, value_at) {
                    (None, None) => {}
                    (Some(k), Some(at)) => {
                        let v = table.verifier();
                        let kind = v.get_u8(k)?;
                        if let Some((_, fields)) = variants.iter().find(|(t, _)| *t == kind) {
                            verify_offset_table(v, at, fields)?;
                        }
                    }
                    _ => return InvalidFlatbuffer::new_inconsistent_union("type", "value"),
                }
            }
            other => {
                if let Some(at) = table.deref(other.slot())? {
                    check_present(table.verifier(), at, &other)?;
                }
            }
        }
    }
    table.finish();
    Ok(())
}

/// Checks a field that is present at `at` (not a union).
fn check_present(v: &mut Verifier<'_, '_>, at: usize, field: &Field) -> Checked {
    match *field {
        Field::Scalar(_, bytes) => match bytes {
            1 => v.in_buffer::<u8>(at),
            2 => v.in_buffer::<u16>(at),
            4 => v.in_buffer::<u32>(at),
            _ => v.in_buffer::<u64>(at),
        },
        Field::Vector(_, bytes) => match bytes {
            1 => ForwardsUOffset::<Vector<'_, u8>>::run_verifier(v, at),
            2 => ForwardsUOffset::<Vector<'_, u16>>::run_verifier(v, at),
            4 => ForwardsUOffset::<Vector<'_, u32>>::run_verifier(v, at),
            _ => ForwardsUOffset::<Vector<'_, u64>>::run_verifier(v, at),
        },
        Field::Str(_) => ForwardsUOffset::<&str>::run_verifier(v, at),
        Field::Table(_, fields) => verify_offset_table(v, at, fields),
        Field::Tables(_, fields) => {
            let vector = at.saturating_add(v.get_uoffset(at)? as usize);
            let len = v.get_uoffset(vector)? as usize;
            let start = vector.saturating_add(flatbuffers::SIZE_UOFFSET);
            v.is_aligned::<u32>(start)?;
            v.range_in_buffer(start, len.saturating_mul(flatbuffers::SIZE_UOFFSET))?;
            for i in 0..len {
                verify_offset_table(v, start + i * flatbuffers::SIZE_UOFFSET, fields)?;
            }
            Ok(())
        }
        Field::Union { .. } => Ok(()),
    }
}

/// Verifies the table that the offset at `pos` points to.
pub(crate) fn verify_offset_table(
    v: &mut Verifier<'_, '_>,
    pos: usize,
    fields: &[Field],
) -> Checked {
    let table = pos.saturating_add(v.get_uoffset(pos)? as usize);
    verify_table(v, table, fields)
}

/// The limits hilt verifies models with (flatbuffers' defaults, named).
pub(crate) const OPTIONS: VerifierOptions = VerifierOptions {
    max_depth: 64,
    max_tables: 1_000_000,
    max_apparent_size: 1 << 31,
    ignore_missing_null_terminator: false,
};

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use flatbuffers::{FlatBufferBuilder, WIPOffset};

    use super::*;

    /// A child table: an `i32` at slot 4, a string at slot 6.
    const CHILD: &[Field] = &[Field::Scalar(4, 4), Field::Str(6)];
    /// A parent with a field of every kind.
    const PARENT: &[Field] = &[
        Field::Scalar(4, 1),
        Field::Scalar(6, 8),
        Field::Vector(8, 4),
        Field::Str(10),
        Field::Table(12, CHILD),
        Field::Tables(14, CHILD),
        Field::Union {
            key: 16,
            value: 18,
            variants: &[(1, CHILD)],
        },
        Field::Vector(20, 1),
    ];

    /// The same two tables as flatc writes their verifiers.
    struct FlatcChild;
    impl Verifiable for FlatcChild {
        fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Checked {
            v.visit_table(pos)?
                .visit_field::<i32>("a", 4, false)?
                .visit_field::<ForwardsUOffset<&str>>("s", 6, false)?
                .finish();
            Ok(())
        }
    }
    struct FlatcParent;
    impl Verifiable for FlatcParent {
        fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Checked {
            v.visit_table(pos)?
                .visit_field::<u8>("a", 4, false)?
                .visit_field::<i64>("b", 6, false)?
                .visit_field::<ForwardsUOffset<Vector<'_, i32>>>("c", 8, false)?
                .visit_field::<ForwardsUOffset<&str>>("d", 10, false)?
                .visit_field::<ForwardsUOffset<FlatcChild>>("e", 12, false)?
                .visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<FlatcChild>>>>(
                    "f", 14, false,
                )?
                .visit_union::<u8, _>("t", 16, "u", 18, false, |key, v, pos| match key {
                    1 => v.verify_union_variant::<ForwardsUOffset<FlatcChild>>("C", pos),
                    _ => Ok(()),
                })?
                .visit_field::<ForwardsUOffset<Vector<'_, u8>>>("g", 20, false)?
                .finish();
            Ok(())
        }
    }

    fn child(fbb: &mut FlatBufferBuilder<'_>, a: i32, s: &str) -> WIPOffset<FlatcChild> {
        let s = fbb.create_string(s);
        let t = fbb.start_table();
        fbb.push_slot_always(6, s);
        fbb.push_slot_always(4, a);
        WIPOffset::new(fbb.end_table(t).value())
    }

    fn parent_bytes(union_kind: u8) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let c = fbb.create_vector(&[1i32, -2, 3]);
        let d = fbb.create_string("parent");
        let e = child(&mut fbb, 7, "e");
        let kids = [child(&mut fbb, 1, "x"), child(&mut fbb, 2, "yz")];
        let f = fbb.create_vector(&kids);
        let u = child(&mut fbb, 9, "u");
        let g = fbb.create_vector(&[5u8, 6, 7]);
        let t = fbb.start_table();
        fbb.push_slot_always(6, -5i64);
        fbb.push_slot_always(8, c);
        fbb.push_slot_always(10, d);
        fbb.push_slot_always(12, e);
        fbb.push_slot_always(14, f);
        fbb.push_slot_always(18, u);
        fbb.push_slot_always(20, g);
        fbb.push_slot_always(4, 3u8);
        fbb.push_slot_always(16, union_kind);
        let root = fbb.end_table(t);
        fbb.finish_minimal(root);
        fbb.finished_data().to_vec()
    }

    /// An error without its trace (which only flatc's verifier keeps).
    fn untraced(e: InvalidFlatbuffer) -> (u8, usize) {
        use InvalidFlatbuffer as E;
        match e {
            E::MissingRequiredField { .. } => (0, 0),
            E::InconsistentUnion { .. } => (1, 0),
            E::Utf8Error { range, .. } => (2, range.start),
            E::MissingNullTerminator { range, .. } => (3, range.start),
            E::Unaligned { position, .. } => (4, position),
            E::RangeOutOfBounds { range, .. } => (5, range.start * 100_000 + range.end),
            E::SignedOffsetOutOfBounds { position, .. } => (6, position),
            E::TooManyTables => (7, 0),
            E::ApparentSizeTooLarge => (8, 0),
            E::DepthLimitReached => (9, 0),
        }
    }

    /// A verdict: accepted, or the error's kind and place.
    type Verdict = Result<(), (u8, usize)>;

    fn both(bytes: &[u8]) -> (Verdict, Verdict) {
        let ours = verify_offset_table(&mut Verifier::new(&OPTIONS, bytes), 0, PARENT);
        let flatc =
            ForwardsUOffset::<FlatcParent>::run_verifier(&mut Verifier::new(&OPTIONS, bytes), 0);
        (ours.map_err(untraced), flatc.map_err(untraced))
    }

    /// Every truncation of a table with a field of each kind, and every
    /// byte of it set to each of a few values: the field-list verifier
    /// accepts what flatc's accepts and rejects the rest with the same
    /// error at the same place.
    #[test]
    fn the_field_list_verifier_answers_as_flatc_s_does() {
        let (mut accepted, mut rejected) = (0, 0);
        for union_kind in [0u8, 1, 2] {
            let good = parent_bytes(union_kind);
            let (ours, flatc) = both(&good);
            assert_eq!(ours, flatc, "union type {union_kind}");
            // Type 0 (none) and 2 (not listed) are accepted unchecked.
            assert!(ours.is_ok(), "union type {union_kind}");
            for len in 0..good.len() {
                let (ours, flatc) = both(&good[..len]);
                assert_eq!(ours, flatc, "union type {union_kind}, truncated to {len}");
            }
            for at in 0..good.len() {
                for value in [0u8, 1, 2, 3, 4, 7, 0x10, 0x7f, 0x80, 0xfe, 0xff] {
                    let mut bad = good.clone();
                    bad[at] = value;
                    let (ours, flatc) = both(&bad);
                    assert_eq!(
                        ours, flatc,
                        "union type {union_kind}, byte {at} = {value:#x}"
                    );
                    if flatc.is_ok() {
                        accepted += 1
                    } else {
                        rejected += 1
                    }
                }
            }
        }
        // The mutations exercise both answers.
        assert!(accepted > 100 && rejected > 100, "{accepted} / {rejected}");
    }
}
