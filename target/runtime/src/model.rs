//! A `.tflite` flatbuffer, verified once and then read in place.
//!
//! ```
//! # use hilt_runtime::model::Model;
//! // Untrusted bytes: anything that is not a well-formed model is an error.
//! assert!(Model::from_bytes(&[0u8; 7]).is_err());
//! ```
//!
//! [`Model::from_bytes`] runs the flatbuffers verifier and then hilt's own
//! semantic checks over *every* subgraph: each tensor, buffer and opcode index
//! is in range, shapes are non-negative and their byte size fits in `u32`,
//! every constant buffer holds exactly shape × element-size bytes, and data
//! stored outside the flatbuffer (models over 2 GiB) lies inside the file.
//! After that, the accessors here cannot index out of bounds, so later stages
//! (liveness, planning, kernels) never re-check the file.

use core::fmt;

use crate::schema;

/// Where in the model a fault was found: a table kind and its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Site {
    /// The root `Model` table.
    Model,
    /// `subgraphs[index]`.
    Subgraph(u32),
    /// `subgraphs[subgraph].tensors[tensor]`.
    Tensor {
        /// Subgraph index.
        subgraph: u32,
        /// Tensor index in that subgraph.
        tensor: u32,
    },
    /// `subgraphs[subgraph].operators[op]`.
    Operator {
        /// Subgraph index.
        subgraph: u32,
        /// Operator index (its execution step) in that subgraph.
        op: u32,
    },
    /// `operator_codes[index]`.
    OperatorCode(u32),
    /// `buffers[index]`.
    Buffer(u32),
    /// `metadata[index]`.
    Metadata(u32),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Site::Model => f.write_str("model"),
            Site::Subgraph(s) => write!(f, "subgraph {s}"),
            Site::Tensor { subgraph, tensor } => write!(f, "subgraph {subgraph} tensor {tensor}"),
            Site::Operator { subgraph, op } => write!(f, "subgraph {subgraph} operator {op}"),
            Site::OperatorCode(i) => write!(f, "operator code {i}"),
            Site::Buffer(i) => write!(f, "buffer {i}"),
            Site::Metadata(i) => write!(f, "metadata {i}"),
        }
    }
}

/// What the flatbuffers verifier rejected, without its heap-allocated trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FlatbufferFault {
    /// The buffer is too short for a flatbuffer root, or has the wrong identifier.
    NotAModel,
    /// A required field is missing.
    MissingRequiredField,
    /// A union's type and value disagree.
    InconsistentUnion,
    /// A string is not UTF-8 or not terminated.
    BadString,
    /// A scalar or table is not aligned.
    Unaligned,
    /// An offset or vector points outside the buffer.
    OutOfBounds,
    /// Too deep, too many tables, or too large an apparent size (denial-of-service guard).
    TooComplex,
}

/// A model that failed verification; each variant names the table at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ModelError {
    /// The flatbuffers verifier rejected the bytes.
    Malformed {
        /// What was wrong.
        fault: FlatbufferFault,
        /// Byte position in the file, where the verifier gave one.
        position: u32,
    },
    /// The model has no subgraph 0.
    NoSubgraph,
    /// A field every model must have is absent.
    MissingField {
        /// Where.
        site: Site,
        /// Field name in the schema.
        field: &'static str,
    },
    /// An index field points past the end of the vector it indexes.
    IndexOutOfRange {
        /// The table holding the index.
        site: Site,
        /// The field name (and for lists, which entry: see `entry`).
        field: &'static str,
        /// Position in the list field, 0 for scalar fields.
        entry: u32,
        /// The index found.
        value: i64,
        /// How many entries the indexed vector has.
        len: u32,
    },
    /// A tensor dimension is negative.
    NegativeDimension {
        /// Where.
        site: Site,
        /// Which axis.
        axis: u32,
        /// Its value.
        value: i32,
    },
    /// A tensor's byte size does not fit in `u32`.
    ShapeOverflow {
        /// Where.
        site: Site,
    },
    /// A tensor type hilt cannot size (string, resource, variant, or unknown).
    UnsupportedType {
        /// Where.
        site: Site,
        /// The `TensorType` code.
        code: i8,
    },
    /// A constant buffer's length differs from shape × element size.
    BufferSizeMismatch {
        /// The tensor that uses the buffer.
        site: Site,
        /// The buffer index.
        buffer: u32,
        /// Bytes the shape calls for.
        expected: u32,
        /// Bytes the buffer holds.
        actual: u64,
    },
    /// A buffer's external data (offset/size) lies outside the file.
    BufferOutsideFile {
        /// Which buffer.
        buffer: u32,
        /// Its offset field.
        offset: u64,
        /// Its size field.
        size: u64,
        /// The file's length.
        file_len: u64,
    },
    /// More entries than hilt's 32-bit indices can address.
    TooManyEntries {
        /// Where.
        site: Site,
        /// The field.
        field: &'static str,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ModelError::Malformed { fault, position } => {
                write!(
                    f,
                    "not a valid .tflite flatbuffer ({fault:?} at byte {position})"
                )
            }
            ModelError::NoSubgraph => f.write_str("model has no subgraph 0"),
            ModelError::MissingField { site, field } => write!(f, "{site}: missing `{field}`"),
            ModelError::IndexOutOfRange {
                site,
                field,
                entry,
                value,
                len,
            } => write!(
                f,
                "{site}: `{field}`[{entry}] = {value} is out of range (there are {len})"
            ),
            ModelError::NegativeDimension { site, axis, value } => {
                write!(f, "{site}: dimension {axis} is negative ({value})")
            }
            ModelError::ShapeOverflow { site } => {
                write!(f, "{site}: byte size does not fit in 32 bits")
            }
            ModelError::UnsupportedType { site, code } => {
                write!(f, "{site}: tensor type {code} is not supported")
            }
            ModelError::BufferSizeMismatch {
                site,
                buffer,
                expected,
                actual,
            } => write!(
                f,
                "{site}: buffer {buffer} holds {actual} bytes but the shape needs {expected}"
            ),
            ModelError::BufferOutsideFile {
                buffer,
                offset,
                size,
                file_len,
            } => write!(
                f,
                "buffer {buffer}: data at offset {offset} size {size} lies outside the {file_len}-byte file"
            ),
            ModelError::TooManyEntries { site, field } => {
                write!(f, "{site}: `{field}` has more than 2^31 entries")
            }
        }
    }
}

impl core::error::Error for ModelError {}

/// Bytes per element of a tensor type in memory. `None` for types whose size
/// is not a function of the shape. INT4 takes a whole byte per element in the
/// arena, as in TFLM (kernels unpack it); constant INT4 data in the model may
/// also be packed two to a byte.
pub fn element_size(ty: schema::TensorType) -> Option<u32> {
    use schema::TensorType as T;
    Some(match ty {
        T::UINT8 | T::INT8 | T::BOOL | T::INT4 => 1,
        T::FLOAT16 | T::INT16 | T::UINT16 | T::BFLOAT16 => 2,
        T::FLOAT32 | T::INT32 | T::UINT32 => 4,
        T::INT64 | T::UINT64 | T::FLOAT64 | T::COMPLEX64 => 8,
        T::COMPLEX128 => 16,
        _ => return None,
    })
}

/// Bytes a tensor of `ty` with these dimensions occupies in memory.
fn tensor_bytes(
    ty: schema::TensorType,
    shape: Option<flatbuffers::Vector<'_, i32>>,
    site: Site,
) -> Result<u32, ModelError> {
    let size = element_size(ty).ok_or(ModelError::UnsupportedType { site, code: ty.0 })?;
    let mut elements: u64 = 1;
    for (axis, dim) in shape.iter().flat_map(|v| v.iter()).enumerate() {
        if dim < 0 {
            return Err(ModelError::NegativeDimension {
                site,
                axis: axis as u32,
                value: dim,
            });
        }
        elements = elements
            .checked_mul(dim as u64)
            .filter(|&e| e <= u64::from(u32::MAX))
            .ok_or(ModelError::ShapeOverflow { site })?;
    }
    u32::try_from(elements * u64::from(size)).map_err(|_| ModelError::ShapeOverflow { site })
}

/// A verified model. Cheap to copy; it borrows the model bytes (flash on a target).
#[derive(Clone, Copy)]
pub struct Model<'a> {
    bytes: &'a [u8],
    root: schema::Model<'a>,
    subgraph: schema::SubGraph<'a>,
    /// Subgraph 0's operators and the opcode table, looked up once here
    /// rather than through the flatbuffer's vtables for every op of every
    /// invoke.
    operators: Option<Operators<'a>>,
    codes: Option<OperatorCodes<'a>>,
}

/// The flatbuffer vector of subgraph 0's operators.
type Operators<'a> = flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::Operator<'a>>>;
/// The flatbuffer vector of operator codes.
type OperatorCodes<'a> =
    flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::OperatorCode<'a>>>;

impl fmt::Debug for Model<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("bytes", &self.bytes.len())
            .field("tensors", &self.tensor_count())
            .field("operators", &self.operator_count())
            .finish()
    }
}

/// A builtin or custom operator code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode<'a> {
    /// A builtin operator (the value may be one hilt has no name for).
    Builtin(schema::BuiltinOperator),
    /// A custom operator, by name.
    Custom(&'a str),
}

impl fmt::Display for OpCode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpCode::Builtin(op) => match op.variant_name() {
                Some(name) => f.write_str(name),
                None => write!(f, "BUILTIN_{}", op.0),
            },
            OpCode::Custom(name) => write!(f, "CUSTOM({name})"),
        }
    }
}

/// One tensor of subgraph 0, as the planner and kernels see it.
#[derive(Debug, Clone, Copy)]
pub struct TensorInfo<'a> {
    /// Index in subgraph 0.
    pub index: u32,
    /// Name from the model (may be empty).
    pub name: &'a str,
    /// Element type.
    pub dtype: schema::TensorType,
    /// Bytes the tensor's data occupies.
    pub bytes: u32,
    /// State kept between invocations (SVDF/LSTM); lives in the persistent tail.
    pub is_variable: bool,
    /// Constant data in the model bytes, if any (then it never takes arena space).
    pub constant: Option<&'a [u8]>,
    raw: schema::Tensor<'a>,
}

impl<'a> TensorInfo<'a> {
    /// Dimensions (empty for a scalar).
    pub fn shape(&self) -> impl ExactSizeIterator<Item = i32> + 'a {
        let shape = self.raw.shape();
        (0..shape.map_or(0, |s| s.len())).map(move |i| shape.map_or(0, |s| s.get(i)))
    }

    /// The schema's tensor table (quantisation parameters and the rest).
    pub fn raw(&self) -> schema::Tensor<'a> {
        self.raw
    }
}

/// One operator of subgraph 0.
#[derive(Debug, Clone, Copy)]
pub struct OperatorInfo<'a> {
    /// Execution step (index in subgraph 0).
    pub index: u32,
    /// What the operator is.
    pub code: OpCode<'a>,
    /// Operator version from the opcode table.
    pub version: i32,
    raw: schema::Operator<'a>,
}

impl<'a> OperatorInfo<'a> {
    /// Input tensor indices; `None` is an omitted optional input (-1 in the file).
    pub fn inputs(&self) -> impl ExactSizeIterator<Item = Option<u32>> + 'a {
        index_list(self.raw.inputs())
    }

    /// Output tensor indices.
    pub fn outputs(&self) -> impl ExactSizeIterator<Item = Option<u32>> + 'a {
        index_list(self.raw.outputs())
    }

    /// The schema's operator table (builtin options and the rest).
    pub fn raw(&self) -> schema::Operator<'a> {
        self.raw
    }
}

fn index_list<'a>(
    list: Option<flatbuffers::Vector<'a, i32>>,
) -> impl ExactSizeIterator<Item = Option<u32>> + 'a {
    (0..list.map_or(0, |l| l.len())).map(move |i| {
        let v = list.map_or(-1, |l| l.get(i));
        u32::try_from(v).ok()
    })
}

/// Length of an optional vector as `u32`, or an error naming the field.
fn len_u32<T>(
    v: Option<flatbuffers::Vector<'_, T>>,
    site: Site,
    field: &'static str,
) -> Result<u32, ModelError> {
    let len = v.map_or(0, |v| v.len());
    u32::try_from(len)
        .ok()
        .filter(|&l| l <= i32::MAX as u32)
        .ok_or(ModelError::TooManyEntries { site, field })
}

fn check_indices(
    list: Option<flatbuffers::Vector<'_, i32>>,
    allow_absent: bool,
    site: Site,
    field: &'static str,
    len: u32,
) -> Result<(), ModelError> {
    for (entry, value) in list.iter().flat_map(|l| l.iter()).enumerate() {
        let ok = (value >= 0 && (value as u32) < len) || (allow_absent && value == -1);
        if !ok {
            return Err(ModelError::IndexOutOfRange {
                site,
                field,
                entry: entry as u32,
                value: i64::from(value),
                len,
            });
        }
    }
    Ok(())
}

fn map_verifier_error(e: &flatbuffers::InvalidFlatbuffer) -> ModelError {
    use flatbuffers::InvalidFlatbuffer as E;
    let (fault, position) = match e {
        E::MissingRequiredField { .. } => (FlatbufferFault::MissingRequiredField, 0),
        E::InconsistentUnion { .. } => (FlatbufferFault::InconsistentUnion, 0),
        E::Utf8Error { range, .. } | E::MissingNullTerminator { range, .. } => {
            (FlatbufferFault::BadString, range.start)
        }
        E::Unaligned { position, .. } => (FlatbufferFault::Unaligned, *position),
        E::RangeOutOfBounds { range, .. } => (FlatbufferFault::OutOfBounds, range.start),
        E::SignedOffsetOutOfBounds { position, .. } => (FlatbufferFault::OutOfBounds, *position),
        E::TooManyTables | E::ApparentSizeTooLarge | E::DepthLimitReached => {
            (FlatbufferFault::TooComplex, 0)
        }
    };
    ModelError::Malformed {
        fault,
        position: position.min(u32::MAX as usize) as u32,
    }
}

/// Every metadata entry names a buffer that exists, and so does every
/// index in the model's `metadata_buffer` list.
fn check_metadata(root: schema::Model<'_>, n_buffers: u32) -> Result<(), ModelError> {
    for (i, meta) in root.metadata().iter().flat_map(|m| m.iter()).enumerate() {
        let site = Site::Metadata(i as u32);
        if meta.buffer() >= n_buffers {
            return Err(ModelError::IndexOutOfRange {
                site,
                field: "buffer",
                entry: 0,
                value: i64::from(meta.buffer()),
                len: n_buffers,
            });
        }
    }
    if let Some(list) = root.metadata_buffer() {
        check_indices(Some(list), false, Site::Model, "metadata_buffer", n_buffers)?;
    }
    Ok(())
}

/// Subgraph `s`'s operators: each names an operator code that exists, and
/// its inputs, outputs and intermediates name tensors that exist (-1, an
/// omitted optional tensor, allowed where TFLite allows it).
fn check_operators(
    subgraph: schema::SubGraph<'_>,
    s: u32,
    n_codes: u32,
    n_tensors: u32,
) -> Result<(), ModelError> {
    for (o, op) in subgraph
        .operators()
        .iter()
        .flat_map(|o| o.iter())
        .enumerate()
    {
        let site = Site::Operator {
            subgraph: s,
            op: o as u32,
        };
        if op.opcode_index() >= n_codes {
            return Err(ModelError::IndexOutOfRange {
                site,
                field: "opcode_index",
                entry: 0,
                value: i64::from(op.opcode_index()),
                len: n_codes,
            });
        }
        check_indices(op.inputs(), true, site, "inputs", n_tensors)?;
        check_indices(op.outputs(), false, site, "outputs", n_tensors)?;
        check_indices(op.intermediates(), true, site, "intermediates", n_tensors)?;
    }
    Ok(())
}

impl<'a> Model<'a> {
    /// Verifies `bytes` and returns the model, or the first fault found.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Self, ModelError> {
        // The identifier is optional in the format; we accept files without it
        // but reject anything too short to hold a root offset.
        if bytes.len() < 8 {
            return Err(ModelError::Malformed {
                fault: FlatbufferFault::NotAModel,
                position: 0,
            });
        }
        let root = schema::root_as_model_with_opts(&schema::verify::OPTIONS, bytes)
            .map_err(|e| map_verifier_error(&e))?;
        let subgraphs = root.subgraphs().ok_or(ModelError::NoSubgraph)?;
        if subgraphs.is_empty() {
            return Err(ModelError::NoSubgraph);
        }
        let subgraph = subgraphs.get(0);
        let model = Model {
            bytes,
            root,
            subgraph,
            operators: subgraph.operators(),
            codes: root.operator_codes(),
        };
        model.check_semantics()?;
        Ok(model)
    }

    /// The checks the flatbuffer verifier cannot make: every index in range,
    /// every buffer inside the file, every tensor's data its shape's size.
    fn check_semantics(&self) -> Result<(), ModelError> {
        let root = self.root;
        let n_buffers = len_u32(root.buffers(), Site::Model, "buffers")?;
        let n_codes = len_u32(root.operator_codes(), Site::Model, "operator_codes")?;
        self.check_buffers_in_file()?;
        check_metadata(root, n_buffers)?;

        let subgraphs = root.subgraphs().ok_or(ModelError::NoSubgraph)?;
        len_u32(Some(subgraphs), Site::Model, "subgraphs")?;
        for (s, subgraph) in subgraphs.iter().enumerate() {
            let s = s as u32;
            let n_tensors = len_u32(subgraph.tensors(), Site::Subgraph(s), "tensors")?;
            check_indices(
                subgraph.inputs(),
                false,
                Site::Subgraph(s),
                "inputs",
                n_tensors,
            )?;
            check_indices(
                subgraph.outputs(),
                false,
                Site::Subgraph(s),
                "outputs",
                n_tensors,
            )?;
            self.check_tensors(subgraph, s, n_buffers)?;
            len_u32(subgraph.operators(), Site::Subgraph(s), "operators")?;
            check_operators(subgraph, s, n_codes, n_tensors)?;
        }
        Ok(())
    }

    /// Every buffer stored after the flatbuffer lies inside the file.
    fn check_buffers_in_file(&self) -> Result<(), ModelError> {
        let file_len = self.bytes.len() as u64;
        for (i, buffer) in self
            .root
            .buffers()
            .iter()
            .flat_map(|b| b.iter())
            .enumerate()
        {
            let (offset, size) = (buffer.offset(), buffer.size());
            // offset 1 is the converter's "data follows later" placeholder with size 0.
            if size != 0 && offset.checked_add(size).is_none_or(|end| end > file_len) {
                return Err(ModelError::BufferOutsideFile {
                    buffer: i as u32,
                    offset,
                    size,
                    file_len,
                });
            }
        }
        Ok(())
    }

    /// Subgraph `s`'s tensors: each shape's byte size fits, each buffer
    /// index is in range, and the data a buffer holds is that size (or
    /// half of it, for packed int4).
    fn check_tensors(
        &self,
        subgraph: schema::SubGraph<'a>,
        s: u32,
        n_buffers: u32,
    ) -> Result<(), ModelError> {
        for (t, tensor) in subgraph.tensors().iter().flat_map(|t| t.iter()).enumerate() {
            let site = Site::Tensor {
                subgraph: s,
                tensor: t as u32,
            };
            let bytes = tensor_bytes(tensor.type_(), tensor.shape(), site)?;
            let buffer = tensor.buffer();
            if buffer != 0 || n_buffers > 0 {
                if buffer >= n_buffers {
                    return Err(ModelError::IndexOutOfRange {
                        site,
                        field: "buffer",
                        entry: 0,
                        value: i64::from(buffer),
                        len: n_buffers,
                    });
                }
                if let Some(data) = self.buffer_data(buffer) {
                    let packed_int4 = tensor.type_() == schema::TensorType::INT4
                        && data.len() as u64 == u64::from(bytes).div_ceil(2);
                    if data.len() as u64 != u64::from(bytes) && !packed_int4 {
                        return Err(ModelError::BufferSizeMismatch {
                            site,
                            buffer,
                            expected: bytes,
                            actual: data.len() as u64,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Non-empty data of buffer `index` (inline or stored after the flatbuffer).
    /// Indices must have been checked by `from_bytes`.
    fn buffer_data(&self, index: u32) -> Option<&'a [u8]> {
        let buffer = self.root.buffers()?.get(index as usize);
        let data = match buffer.data() {
            Some(d) if !d.is_empty() => d.bytes(),
            _ if buffer.size() != 0 => {
                let start = buffer.offset() as usize;
                &self.bytes[start..start + buffer.size() as usize]
            }
            _ => return None,
        };
        Some(data)
    }

    /// The verified root table, for crate code that reads fields the
    /// accessors here do not cover (the writer's plan rewrite).
    #[cfg(any(test, feature = "writer"))]
    pub(crate) fn root(&self) -> schema::Model<'a> {
        self.root
    }

    /// The raw model bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Schema version field.
    pub fn version(&self) -> u32 {
        self.root.version()
    }

    /// Number of tensors in subgraph 0.
    pub fn tensor_count(&self) -> u32 {
        self.subgraph.tensors().map_or(0, |t| t.len() as u32)
    }

    /// Number of operators (execution steps) in subgraph 0.
    pub fn operator_count(&self) -> u32 {
        self.operators.map_or(0, |o| o.len() as u32)
    }

    /// Number of tensors over all subgraphs.
    pub fn total_tensor_count(&self) -> u32 {
        let subgraphs = self.root.subgraphs().into_iter().flatten();
        subgraphs
            .map(|s| s.tensors().map_or(0, |t| t.len() as u32))
            .sum()
    }

    /// Number of subgraphs.
    pub fn subgraph_count(&self) -> u32 {
        self.root.subgraphs().map_or(0, |s| s.len() as u32)
    }

    /// Tensor `index` of subgraph 0, or `None` past the end.
    pub fn tensor(&self, index: u32) -> Option<TensorInfo<'a>> {
        let tensors = self.subgraph.tensors()?;
        if index as usize >= tensors.len() {
            return None;
        }
        let raw = tensors.get(index as usize);
        let site = Site::Tensor {
            subgraph: 0,
            tensor: index,
        };
        // Verified in from_bytes: cannot fail here.
        let bytes = tensor_bytes(raw.type_(), raw.shape(), site).ok()?;
        let constant = if raw.buffer() == 0 {
            None
        } else {
            self.buffer_data(raw.buffer())
        };
        Some(TensorInfo {
            index,
            name: raw.name().unwrap_or(""),
            dtype: raw.type_(),
            bytes,
            is_variable: raw.is_variable(),
            constant,
            raw,
        })
    }

    /// Whether tensor `index` of subgraph 0 is a variable tensor (cheap:
    /// one field of the flatbuffer, no shape checks).
    pub fn is_variable(&self, index: u32) -> bool {
        self.subgraph
            .tensors()
            .is_some_and(|t| (index as usize) < t.len() && t.get(index as usize).is_variable())
    }

    /// All tensors of subgraph 0 in index order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorInfo<'a>> + '_ {
        (0..self.tensor_count()).filter_map(|i| self.tensor(i))
    }

    /// Operator `index` of subgraph 0, or `None` past the end.
    pub fn operator(&self, index: u32) -> Option<OperatorInfo<'a>> {
        let ops = self.operators?;
        if index as usize >= ops.len() {
            return None;
        }
        let raw = ops.get(index as usize);
        let code = self.codes?.get(raw.opcode_index() as usize);
        Some(OperatorInfo {
            index,
            code: opcode_of(code),
            version: code.version(),
            raw,
        })
    }

    /// All operators of subgraph 0 in execution order.
    pub fn operators(&self) -> impl Iterator<Item = OperatorInfo<'a>> + '_ {
        (0..self.operator_count()).filter_map(|i| self.operator(i))
    }

    /// Subgraph 0's input tensor indices.
    pub fn inputs(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        index_list(self.subgraph.inputs()).map(|i| i.unwrap_or(0))
    }

    /// Subgraph 0's output tensor indices.
    pub fn outputs(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        index_list(self.subgraph.outputs()).map(|i| i.unwrap_or(0))
    }

    /// The data of the first metadata entry called `name`.
    pub fn metadata(&self, name: &str) -> Option<&'a [u8]> {
        let entry = self
            .root
            .metadata()?
            .iter()
            .find(|m| m.name() == Some(name))?;
        Some(self.buffer_data(entry.buffer()).unwrap_or(&[]))
    }
}

/// Resolves the two builtin-code fields: `deprecated_builtin_code` holds codes
/// below 127; 127 means the real code is in `builtin_code`. Newer converters
/// write both, older ones only the first.
fn opcode_of(code: schema::OperatorCode<'_>) -> OpCode<'_> {
    const PLACEHOLDER_FOR_GREATER_OP_CODES: i8 = 127;
    if let Some(name) = code.custom_code() {
        return OpCode::Custom(name);
    }
    let deprecated = code.deprecated_builtin_code();
    let value = if deprecated == PLACEHOLDER_FOR_GREATER_OP_CODES {
        code.builtin_code().0
    } else {
        code.builtin_code().0.max(i32::from(deprecated))
    };
    OpCode::Builtin(schema::BuiltinOperator(value))
}
