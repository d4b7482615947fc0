//! Storing an offline plan in an existing model, changing nothing else.
//!
//! TFLM reads a model's `OfflineMemoryAllocation` metadata (little-endian
//! int32 `[version = 1, subgraph count, offset count, offset per tensor]`,
//! -1 = plan at run time) and puts every tensor with an offset at that
//! offset from the start of its planned section. Writing one into a model
//! that a converter produced must keep the graph, the weights and every
//! other metadata entry exactly as they were, and keep weights on the
//! alignment they had (TFLM reads them in place).
//!
//! Re-serialising the whole flatbuffer would move every buffer and drop any
//! field this crate's schema subset does not know (`signature_defs`, for
//! one). Instead the old file is kept byte for byte and a new header is
//! *prepended*: a root offset, the file identifier, a new `Model` table and
//! the few objects that change (the `buffers` and `metadata` vectors, one
//! `Metadata` table, one `Buffer` table and the plan's bytes). Why prepend
//! rather than append: flatbuffer references (`uoffset`) are unsigned and
//! point forward only, so a new root can reach the old objects only if it
//! comes before them. Offsets inside the old bytes are relative, so they
//! stay valid when the whole block moves; the header is padded to a
//! multiple of 16 bytes so every old buffer keeps its alignment. The old
//! root table and vectors remain in the file, unreferenced.
//!
//! ```
//! use hilt_runtime::model::Model;
//! use hilt_runtime::planner::Offline;
//! use hilt_runtime::schema::{BuiltinOperator, TensorType};
//! use hilt_runtime::writer::{ModelWriter, Options, offline_plan::write_offline_plan};
//!
//! let mut w = ModelWriter::new();
//! let x = w.input("x", TensorType::INT8, &[16]);
//! let y = w.output("y", TensorType::INT8, &[16]);
//! w.op(BuiltinOperator::RELU, &[Some(x)], &[y], Options::None);
//! let rewrite = write_offline_plan(&w.finish(), &[0, 16]).unwrap();
//! let model = Model::from_bytes(&rewrite.bytes).unwrap();
//! assert_eq!(Offline::from_model(&model).unwrap().offset_of(1), Some(16));
//! ```

use alloc::vec::Vec;
use core::fmt;

use crate::model::{Model, ModelError};
use crate::planner::OFFLINE_PLAN_METADATA;

/// The fields of TFLite's `Model` table (schema.fbs, in order): `version`
/// (a uint32), then seven references. The rewrite must know what each field
/// of the old root is, so one it does not know is refused.
const MODEL_FIELDS: u16 = 8;
/// Field ids in `Model`.
const FIELD_VERSION: u16 = 0;
const FIELD_BUFFERS: u16 = 4;
const FIELD_METADATA: u16 = 6;

/// TFLite's flatbuffer file identifier.
const TFLITE_IDENTIFIER: &[u8; 4] = b"TFL3";

/// Alignment the header is padded to, and of the plan's bytes: TFLite's
/// converter aligns buffer data to 16 and TFLM reads weights in place.
const HEADER_ALIGN: usize = 16;

/// Why a plan could not be written into a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RewriteError {
    /// The input is not a valid model.
    Model(ModelError),
    /// More than one subgraph: TFLM looks up the offset of tensor `i` of
    /// *every* subgraph at entry `i` of the plan (it does not skip to the
    /// subgraph's own entries), so a plan for subgraph 0 would also pin
    /// other subgraphs' tensors.
    Subgraphs {
        /// Subgraphs in the model.
        count: u32,
    },
    /// The plan does not have one offset per tensor of subgraph 0.
    PlanLength {
        /// Offsets given.
        plan: u32,
        /// Tensors in subgraph 0.
        tensors: u32,
    },
    /// An offset below -1.
    NegativeOffset {
        /// Tensor index.
        tensor: u32,
        /// The value.
        offset: i32,
    },
    /// A buffer keeps its data outside the flatbuffer (models over 2 GiB):
    /// its absolute file offset would move with the new header.
    ExternalData {
        /// The buffer.
        buffer: u32,
    },
    /// The root table has a field TFLite's schema does not define, whose
    /// kind (scalar or reference) is therefore unknown.
    UnknownModelField {
        /// The field id.
        field: u32,
    },
    /// The rewritten model would pass the 2 GiB flatbuffer limit.
    TooLarge,
    /// The rewritten bytes failed verification: a bug in this module,
    /// reported rather than written.
    Rewritten(ModelError),
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RewriteError::Model(e) => write!(f, "{e}"),
            RewriteError::Subgraphs { count } => write!(
                f,
                "the model has {count} subgraphs: TFLM applies plan entry i to tensor i of \
                 every subgraph, so an offline plan is only written for one-subgraph models"
            ),
            RewriteError::PlanLength { plan, tensors } => {
                write!(f, "plan has {plan} offsets for {tensors} tensors")
            }
            RewriteError::NegativeOffset { tensor, offset } => {
                write!(f, "tensor {tensor}: offset {offset} is below -1")
            }
            RewriteError::ExternalData { buffer } => write!(
                f,
                "buffer {buffer} keeps its data outside the flatbuffer: not supported"
            ),
            RewriteError::UnknownModelField { field } => write!(
                f,
                "the model's root table has field {field}, which TFLite's schema does not define"
            ),
            RewriteError::TooLarge => f.write_str("the rewritten model would exceed 2 GiB"),
            RewriteError::Rewritten(e) => write!(f, "the rewritten model is invalid ({e})"),
        }
    }
}

impl core::error::Error for RewriteError {}

/// A model with a plan written into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRewrite {
    /// The new model.
    pub bytes: Vec<u8>,
    /// Existing `OfflineMemoryAllocation` entries that now name the new plan.
    pub replaced: u32,
    /// Index of the buffer that holds the plan.
    pub plan_buffer: u32,
    /// Bytes put before the old file (a multiple of 16).
    pub header: u32,
}

/// TFLM's metadata bytes for a plan over `offsets` (every tensor of a
/// model with `subgraphs` subgraphs).
pub fn offline_plan_bytes(subgraphs: u32, offsets: &[i32]) -> Vec<u8> {
    let words = [1, subgraphs as i32, offsets.len() as i32];
    words
        .iter()
        .chain(offsets)
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// Writes `offsets` (one per tensor, -1 = plan at run time) into `model` as
/// its `OfflineMemoryAllocation` metadata, replacing any there is.
pub fn write_offline_plan(model: &[u8], offsets: &[i32]) -> Result<PlanRewrite, RewriteError> {
    let parsed = Model::from_bytes(model).map_err(RewriteError::Model)?;
    check_plan(&parsed, offsets)?;
    let old = OldRoot::read(model, &parsed)?;
    let plan = offline_plan_bytes(1, offsets);
    let (bytes, header) = Header::assemble(model, &old, &plan)?;
    let check = Model::from_bytes(&bytes).map_err(RewriteError::Rewritten)?;
    if check.metadata(OFFLINE_PLAN_METADATA) != Some(&plan[..]) {
        return Err(RewriteError::Rewritten(ModelError::MissingField {
            site: crate::model::Site::Model,
            field: "metadata",
        }));
    }
    Ok(PlanRewrite {
        bytes,
        replaced: old.plan_entries.len() as u32,
        plan_buffer: old.plan_buffer,
        header: header as u32,
    })
}

fn check_plan(model: &Model<'_>, offsets: &[i32]) -> Result<(), RewriteError> {
    if model.subgraph_count() != 1 {
        return Err(RewriteError::Subgraphs {
            count: model.subgraph_count(),
        });
    }
    if offsets.len() != model.tensor_count() as usize {
        return Err(RewriteError::PlanLength {
            plan: offsets.len() as u32,
            tensors: model.tensor_count(),
        });
    }
    if let Some((tensor, &offset)) = offsets.iter().enumerate().find(|(_, o)| **o < -1) {
        return Err(RewriteError::NegativeOffset {
            tensor: tensor as u32,
            offset,
        });
    }
    Ok(())
}

/// Reads of the old root that fail, instead of panicking, on a position
/// outside the file: the verifier checks the fields this crate's schema
/// knows, not the slots of ones it does not (`signature_defs`).
fn read_u16(bytes: &[u8], at: usize) -> Result<u16, RewriteError> {
    match bytes.get(at..at.saturating_add(2)) {
        Some(b) if b.len() == 2 => Ok(u16::from_le_bytes([b[0], b[1]])),
        _ => Err(out_of_bounds(at)),
    }
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, RewriteError> {
    match bytes.get(at..at.saturating_add(4)) {
        Some(b) if b.len() == 4 => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => Err(out_of_bounds(at)),
    }
}

/// Where a reference read at `at` points.
fn read_reference(bytes: &[u8], at: usize) -> Result<u32, RewriteError> {
    let target = u64::from(read_u32(bytes, at)?) + at as u64;
    u32::try_from(target)
        .ok()
        .filter(|&t| (t as usize) < bytes.len())
        .ok_or(out_of_bounds(at))
}

fn out_of_bounds(at: usize) -> RewriteError {
    RewriteError::Model(ModelError::Malformed {
        fault: crate::model::FlatbufferFault::OutOfBounds,
        position: at.min(u32::MAX as usize) as u32,
    })
}

/// What the old root holds, as positions in the old file. Every position
/// read here lies inside objects the verifier has already checked.
struct OldRoot {
    /// `(field id, value)`: the version's value, or where a reference
    /// points, for each field present.
    fields: Vec<(u16, u32)>,
    /// Where each entry of `buffers` points.
    buffers: Vec<u32>,
    /// Where each entry of `metadata` points.
    metadata: Vec<u32>,
    /// Positions in `metadata` of the entries named `OfflineMemoryAllocation`.
    plan_entries: Vec<usize>,
    /// The buffer the new plan goes in (an old plan's, or a new one).
    plan_buffer: u32,
}

impl OldRoot {
    fn read(bytes: &[u8], model: &Model<'_>) -> Result<Self, RewriteError> {
        let root = model.root();
        let table = read_u32(bytes, 0)? as usize;
        let vtable = usize::try_from(table as i64 - i64::from(read_u32(bytes, table)? as i32))
            .map_err(|_| out_of_bounds(table))?;
        let field_count = read_u16(bytes, vtable)?.saturating_sub(4) / 2;
        let mut fields = Vec::new();
        for id in 0..field_count {
            let voffset = read_u16(bytes, vtable + 4 + 2 * usize::from(id))?;
            if voffset == 0 {
                continue;
            }
            if id >= MODEL_FIELDS {
                return Err(RewriteError::UnknownModelField { field: id.into() });
            }
            let at = table + usize::from(voffset);
            let value = if id == FIELD_VERSION {
                read_u32(bytes, at)?
            } else {
                read_reference(bytes, at)?
            };
            fields.push((id, value));
        }
        let targets = |id: u16| -> Result<Vec<u32>, RewriteError> {
            let Some(&(_, vector)) = fields.iter().find(|(f, _)| *f == id) else {
                return Ok(Vec::new());
            };
            let vector = vector as usize;
            let len = read_u32(bytes, vector)? as usize;
            (0..len)
                .map(|i| read_reference(bytes, vector + 4 + 4 * i))
                .collect()
        };
        let (buffers, metadata) = (targets(FIELD_BUFFERS)?, targets(FIELD_METADATA)?);
        for (i, buffer) in root.buffers().iter().flatten().enumerate() {
            if buffer.size() != 0 {
                return Err(RewriteError::ExternalData { buffer: i as u32 });
            }
        }
        let entries: Vec<_> = root.metadata().iter().flatten().collect();
        let plan_entries: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].name() == Some(OFFLINE_PLAN_METADATA))
            .collect();
        let plan_buffer = plan_entries
            .first()
            .map(|&i| entries[i].buffer())
            .filter(|&b| !used_elsewhere(model, b, &plan_entries))
            .unwrap_or(buffers.len() as u32);
        Ok(OldRoot {
            fields,
            buffers,
            metadata,
            plan_entries,
            plan_buffer,
        })
    }
}

/// Whether buffer `index` is used by anything but the metadata entries at
/// `plan_entries`: a tensor, another metadata entry, `metadata_buffer`.
/// Buffer 0 always is: by convention it is the empty buffer every tensor
/// without data names, so a plan written there would become their data.
fn used_elsewhere(model: &Model<'_>, index: u32, plan_entries: &[usize]) -> bool {
    let root = model.root();
    let by_tensor = root
        .subgraphs()
        .iter()
        .flatten()
        .any(|s| s.tensors().iter().flatten().any(|t| t.buffer() == index));
    let by_metadata = root
        .metadata()
        .iter()
        .flatten()
        .enumerate()
        .any(|(i, m)| m.buffer() == index && !plan_entries.contains(&i));
    let listed = root
        .metadata_buffer()
        .is_some_and(|l| l.iter().any(|b| b == index as i32));
    index == 0 || by_tensor || by_metadata || listed
}

/// The objects the header adds, referred to before they are placed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Root,
    Buffers,
    Metadata,
    PlanEntry,
    PlanBuffer,
}

/// Where a reference in the header points.
#[derive(Clone, Copy)]
enum Target {
    /// A position in the old file (it moves by the header's length).
    Old(u32),
    /// A new object of the header.
    New(Label),
}

/// The header under construction: bytes, where each new object was put,
/// and the references to fill in once the header's length (and so where
/// the old file starts) is known.
#[derive(Default)]
struct Header {
    bytes: Vec<u8>,
    placed: Vec<(Label, usize)>,
    references: Vec<(usize, Target)>,
}

impl Header {
    fn pad_to(&mut self, align: usize) {
        while !self.bytes.len().is_multiple_of(align) {
            self.bytes.push(0);
        }
    }

    fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    fn reference(&mut self, to: Target) {
        self.references.push((self.bytes.len(), to));
        self.u32(0);
    }

    fn place(&mut self, label: Label) {
        self.placed.push((label, self.bytes.len()));
    }

    /// A vtable for a table whose fields (ids `0..present.len()`, those
    /// `present`) are 4 bytes each in id order; returns where it starts.
    fn vtable(&mut self, present: &[bool]) -> usize {
        self.pad_to(2);
        let at = self.bytes.len();
        let count = present.iter().filter(|p| **p).count() as u16;
        self.u16(4 + 2 * present.len() as u16);
        self.u16(4 + 4 * count);
        let mut next = 4u16;
        for &p in present {
            self.u16(if p { next } else { 0 });
            next += if p { 4 } else { 0 };
        }
        at
    }

    /// Starts the table `label`, described by the vtable at `vtable`
    /// (placed before it: the table's signed offset back to it is positive).
    fn table(&mut self, label: Label, vtable: usize) {
        self.pad_to(4);
        self.place(label);
        let at = self.bytes.len();
        self.u32((at - vtable) as u32);
    }

    /// The vector of references `label`.
    fn vector(&mut self, label: Label, items: &[Target]) {
        self.pad_to(4);
        self.place(label);
        self.u32(items.len() as u32);
        for &item in items {
            self.reference(item);
        }
    }

    /// Lays out the new header for `old` with the plan bytes `plan`, in an
    /// order where every reference points forward, and returns the whole
    /// new file and the header's length.
    fn assemble(file: &[u8], old: &OldRoot, plan: &[u8]) -> Result<(Vec<u8>, usize), RewriteError> {
        let mut h = Header::default();
        h.reference(Target::New(Label::Root));
        // TFLite's file identifier (optional in the format; written always:
        // the model is one, and tools look for it).
        h.bytes.extend_from_slice(TFLITE_IDENTIFIER);
        h.model_table(old);
        let buffer_count = old.buffers.len().max(old.plan_buffer as usize + 1);
        let buffers: Vec<Target> = (0..buffer_count)
            .map(|i| match old.buffers.get(i) {
                Some(&at) if i as u32 != old.plan_buffer => Target::Old(at),
                _ => Target::New(Label::PlanBuffer),
            })
            .collect();
        h.vector(Label::Buffers, &buffers);
        let mut metadata: Vec<Target> = (0..old.metadata.len())
            .map(|i| match old.plan_entries.contains(&i) {
                true => Target::New(Label::PlanEntry),
                false => Target::Old(old.metadata[i]),
            })
            .collect();
        if old.plan_entries.is_empty() {
            metadata.push(Target::New(Label::PlanEntry));
        }
        h.vector(Label::Metadata, &metadata);
        h.metadata_entry(old.plan_buffer);
        h.plan_buffer(plan);
        h.pad_to(HEADER_ALIGN);
        h.finish(file)
    }

    /// The new root table: the old one's fields, references re-aimed, with
    /// `buffers` and `metadata` always present and pointing at new vectors.
    fn model_table(&mut self, old: &OldRoot) {
        let present: Vec<bool> = (0..MODEL_FIELDS)
            .map(|id| {
                id == FIELD_BUFFERS || id == FIELD_METADATA || old.fields.iter().any(|f| f.0 == id)
            })
            .collect();
        let vtable = self.vtable(&present);
        self.table(Label::Root, vtable);
        for id in (0..MODEL_FIELDS).filter(|&id| present[usize::from(id)]) {
            let value = old.fields.iter().find(|f| f.0 == id).map_or(0, |f| f.1);
            match id {
                FIELD_VERSION => self.u32(value),
                FIELD_BUFFERS => self.reference(Target::New(Label::Buffers)),
                FIELD_METADATA => self.reference(Target::New(Label::Metadata)),
                _ => self.reference(Target::Old(value)),
            }
        }
    }

    /// A `Metadata` table named `OfflineMemoryAllocation` for `buffer`,
    /// followed by its name.
    fn metadata_entry(&mut self, buffer: u32) {
        let vtable = self.vtable(&[true, true]);
        self.table(Label::PlanEntry, vtable);
        let name_field = self.bytes.len();
        self.u32(0);
        self.u32(buffer);
        let name = self.bytes.len();
        self.u32(OFFLINE_PLAN_METADATA.len() as u32);
        self.bytes
            .extend_from_slice(OFFLINE_PLAN_METADATA.as_bytes());
        self.bytes.push(0);
        self.patch(name_field, name);
    }

    /// A `Buffer` table holding `plan`, its bytes 16-aligned.
    fn plan_buffer(&mut self, plan: &[u8]) {
        let vtable = self.vtable(&[true]);
        self.table(Label::PlanBuffer, vtable);
        let data_field = self.bytes.len();
        self.u32(0);
        // The length word sits just before the 16-aligned data.
        while !(self.bytes.len() + 4).is_multiple_of(HEADER_ALIGN) {
            self.bytes.push(0);
        }
        let vector = self.bytes.len();
        self.u32(plan.len() as u32);
        self.bytes.extend_from_slice(plan);
        self.patch(data_field, vector);
    }

    /// Writes at `field` the reference to `target`, both in the header.
    fn patch(&mut self, field: usize, target: usize) {
        let relative = (target - field) as u32;
        self.bytes[field..field + 4].copy_from_slice(&relative.to_le_bytes());
    }

    /// Fills in every reference and appends the old file.
    fn finish(mut self, file: &[u8]) -> Result<(Vec<u8>, usize), RewriteError> {
        let header = self.bytes.len();
        if header + file.len() > i32::MAX as usize {
            return Err(RewriteError::TooLarge);
        }
        for (field, to) in core::mem::take(&mut self.references) {
            let target = match to {
                Target::Old(pos) => header + pos as usize,
                Target::New(label) => self
                    .placed
                    .iter()
                    .find(|(l, _)| *l == label)
                    .map(|(_, at)| *at)
                    .expect("every label is placed by assemble"),
            };
            self.patch(field, target);
        }
        self.bytes.extend_from_slice(file);
        Ok((self.bytes, header))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{Offline, OfflinePlanError};
    use crate::schema::{BuiltinOperator, TensorType};
    use crate::writer::{ModelWriter, Options};

    /// x -> relu -> h -> add(h, w) -> y, with a constant `w` and an extra
    /// metadata entry.
    fn model(plan: Option<&[i32]>) -> Vec<u8> {
        let mut w = ModelWriter::new();
        let x = w.input("x", TensorType::INT8, &[40]);
        let h = w.tensor("h", TensorType::INT8, &[40]);
        let c = w.constant("w", TensorType::INT8, &[40], &[7u8; 40]);
        let y = w.output("y", TensorType::INT8, &[40]);
        w.op(BuiltinOperator::RELU, &[Some(x)], &[h], Options::None);
        w.op(
            BuiltinOperator::ADD,
            &[Some(h), Some(c)],
            &[y],
            Options::Add {
                activation: crate::schema::ActivationFunctionType::NONE,
            },
        );
        w.metadata("min_runtime_version", b"1.5.0\0\0\0");
        if let Some(plan) = plan {
            w.offline_plan(plan);
        }
        w.finish()
    }

    /// Every buffer's data, as (bytes, position in the file).
    fn buffers(bytes: &[u8]) -> Vec<(Vec<u8>, usize)> {
        let model = Model::from_bytes(bytes).unwrap();
        let base = bytes.as_ptr() as usize;
        model
            .root()
            .buffers()
            .iter()
            .flatten()
            .map(|b| {
                let data = b.data().map_or(&[][..], |d| d.bytes());
                let at = if data.is_empty() {
                    0
                } else {
                    data.as_ptr() as usize - base
                };
                (data.to_vec(), at)
            })
            .collect()
    }

    fn metadata(bytes: &[u8]) -> Vec<(String, u32)> {
        let model = Model::from_bytes(bytes).unwrap();
        let root = model.root();
        root.metadata()
            .iter()
            .flatten()
            .map(|m| (m.name().unwrap_or("").into(), m.buffer()))
            .collect()
    }

    #[test]
    fn a_new_plan_is_added_and_every_old_buffer_keeps_bytes_and_alignment() {
        let original = model(None);
        let rewrite = write_offline_plan(&original, &[0, 48, -1, 0]).unwrap();
        assert_eq!(rewrite.replaced, 0);
        assert_eq!(rewrite.header % 16, 0);
        // The old file follows the header unchanged.
        assert_eq!(&rewrite.bytes[rewrite.header as usize..], &original[..]);
        let (before, after) = (buffers(&original), buffers(&rewrite.bytes));
        assert_eq!(after.len(), before.len() + 1);
        for (i, ((old, old_at), (new, new_at))) in before.iter().zip(&after).enumerate() {
            assert_eq!(old, new, "buffer {i}");
            if !old.is_empty() {
                assert_eq!(old_at % 16, new_at % 16, "buffer {i} alignment");
            }
        }
        let (plan, plan_at) = &after[rewrite.plan_buffer as usize];
        assert_eq!(plan, &offline_plan_bytes(1, &[0, 48, -1, 0]));
        assert_eq!(plan_at % 16, 0);
        let mut names = metadata(&original);
        names.push((OFFLINE_PLAN_METADATA.into(), rewrite.plan_buffer));
        assert_eq!(metadata(&rewrite.bytes), names);
        let model = Model::from_bytes(&rewrite.bytes).unwrap();
        assert_eq!(model.tensor_count(), 4);
        assert_eq!(
            model.metadata("min_runtime_version"),
            Some(&b"1.5.0\0\0\0"[..])
        );
        let offline = Offline::from_model(&model).unwrap();
        assert_eq!(offline.offset_of(1), Some(48));
        assert_eq!(offline.offset_of(2), Some(-1));
    }

    #[test]
    fn an_old_plan_is_replaced_in_place_in_its_own_buffer() {
        let original = model(Some(&[-1, -1, -1, -1]));
        let rewrite = write_offline_plan(&original, &[0, 48, -1, 0]).unwrap();
        assert_eq!(rewrite.replaced, 1);
        let (before, after) = (buffers(&original), buffers(&rewrite.bytes));
        assert_eq!(after.len(), before.len(), "the old plan's buffer is reused");
        for (i, (old, new)) in before.iter().zip(&after).enumerate() {
            if i != rewrite.plan_buffer as usize {
                assert_eq!(old.0, new.0, "buffer {i}");
            }
        }
        assert_eq!(metadata(&rewrite.bytes), metadata(&original));
        let model = Model::from_bytes(&rewrite.bytes).unwrap();
        assert_eq!(Offline::from_model(&model).unwrap().offset_of(1), Some(48));
        // A second rewrite of the rewrite reads back the same way.
        let again = write_offline_plan(&rewrite.bytes, &[48, 0, -1, 48]).unwrap();
        let model = Model::from_bytes(&again.bytes).unwrap();
        assert_eq!(Offline::from_model(&model).unwrap().offset_of(0), Some(48));
        assert_eq!(buffers(&again.bytes).len(), before.len());
    }

    /// `bytes` with metadata entry `entry` naming buffer `buffer`.
    fn repoint_metadata(mut bytes: Vec<u8>, entry: usize, buffer: u32) -> Vec<u8> {
        let at = {
            let model = Model::from_bytes(&bytes).unwrap();
            let meta = model.root().metadata().unwrap().get(entry);
            let table = meta._tab.loc();
            let soffset = i64::from(read_u32(&bytes, table).unwrap() as i32);
            let vtable = (table as i64 - soffset) as usize;
            table + usize::from(read_u16(&bytes, vtable + 6).unwrap())
        };
        bytes[at..at + 4].copy_from_slice(&buffer.to_le_bytes());
        bytes
    }

    #[test]
    fn a_plan_in_buffer_0_or_in_a_shared_buffer_moves_to_a_new_one() {
        let original = model(Some(&[-1, -1, -1, -1]));
        let count = buffers(&original).len() as u32;
        let plan_entry = metadata(&original)
            .iter()
            .position(|(n, _)| n == OFFLINE_PLAN_METADATA)
            .unwrap();
        // Buffer 0 is the one every tensor without data names.
        let in_zero = repoint_metadata(original.clone(), plan_entry, 0);
        let rewrite = write_offline_plan(&in_zero, &[0, 48, -1, 0]).unwrap();
        assert_eq!((rewrite.replaced, rewrite.plan_buffer), (1, count));
        let back = Model::from_bytes(&rewrite.bytes).unwrap();
        assert!(buffers(&rewrite.bytes)[0].0.is_empty());
        assert!(back.tensor(1).unwrap().constant.is_none());
        assert_eq!(Offline::from_model(&back).unwrap().offset_of(1), Some(48));
        // The old plan's buffer also holds another entry's data.
        let shared_buffer = metadata(&original)[plan_entry].1;
        let shared = repoint_metadata(original.clone(), 0, shared_buffer);
        let rewrite = write_offline_plan(&shared, &[0, 48, -1, 0]).unwrap();
        assert_eq!(rewrite.plan_buffer, count);
        let old_data = &buffers(&original)[shared_buffer as usize].0;
        assert_eq!(&buffers(&rewrite.bytes)[shared_buffer as usize].0, old_data);
    }

    #[test]
    fn corrupted_models_give_errors_or_valid_rewrites_never_a_panic() {
        let original = model(Some(&[-1, -1, -1, -1]));
        for at in 0..original.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bytes = original.clone();
                bytes[at] ^= flip;
                if let Ok(rewrite) = write_offline_plan(&bytes, &[0, 48, -1, 0]) {
                    assert!(Model::from_bytes(&rewrite.bytes).is_ok(), "byte {at}");
                }
            }
        }
    }

    #[test]
    fn bad_plans_and_models_are_named() {
        let original = model(None);
        assert_eq!(
            write_offline_plan(&original, &[0, 48]),
            Err(RewriteError::PlanLength {
                plan: 2,
                tensors: 4
            })
        );
        assert_eq!(
            write_offline_plan(&original, &[0, -2, -1, 0]),
            Err(RewriteError::NegativeOffset {
                tensor: 1,
                offset: -2
            })
        );
        assert!(matches!(
            write_offline_plan(&original[..original.len() / 2], &[0, 0, 0, 0]),
            Err(RewriteError::Model(_))
        ));
        let e = RewriteError::Subgraphs { count: 2 }.to_string();
        assert!(e.contains("2 subgraphs"), "{e}");
    }

    #[test]
    fn the_hilt_planner_refuses_a_written_plan_that_overlaps() {
        // The rewrite stores what it is given; the offline planner checks it.
        let rewrite = write_offline_plan(&model(None), &[0, 0, -1, 0]).unwrap();
        let model = Model::from_bytes(&rewrite.bytes).unwrap();
        let offline = Offline::from_model(&model).unwrap();
        let requests: Vec<_> = crate::liveness::tensor_request_iter(&model).collect();
        let mut workspace = alloc::vec![0u32; 2 * requests.len()];
        let mut offsets = alloc::vec![0u32; requests.len()];
        use crate::planner::{MemoryPlanner, PlanError};
        assert_eq!(
            offline.plan(&requests, &mut workspace, &mut offsets),
            Err(PlanError::Offline(OfflinePlanError::Overlap {
                first: 0,
                second: 1
            }))
        );
    }
}
