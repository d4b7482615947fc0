//! The lean schedule's fused chains: which two convolutions (and which
//! ADD after them) run as one op a band of rows at a time ([`fused`]),
//! what they keep no buffer for, and the scratch their last op asks for.
//! The kernels' side is `kernels::fused`.

use super::choice::{LEAN_LINKED, Refusal, Schedule};
use crate::liveness;
use crate::model::{Model, OpCode, OperatorInfo};
use crate::request::BufferRequest;
use crate::schema::{BuiltinOperator, TensorType};

/// Input `position` of `op`, when its buffer may take the op's output:
/// planned, read by no later op nor twice by this one, not a model output.
pub(super) fn dying_input(
    model: &Model<'_>,
    op: &OperatorInfo<'_>,
    position: usize,
) -> Result<u32, Refusal> {
    let input = op
        .inputs()
        .nth(position)
        .flatten()
        .ok_or(Refusal::NotPlanned)?;
    if !liveness::is_planned(model, input) {
        return Err(Refusal::NotPlanned);
    }
    if model.outputs().any(|o| o == input) {
        return Err(Refusal::InputIsModelOutput);
    }
    if op.inputs().flatten().filter(|&t| t == input).count() > 1 {
        return Err(Refusal::Shape {
            what: "input read twice",
        });
    }
    if let Some(later) = model
        .operators()
        .skip(op.index as usize + 1)
        .find(|o| o.inputs().flatten().any(|t| t == input))
    {
        return Err(Refusal::InputStillRead { op: later.index });
    }
    Ok(input)
}

/// The four dimensions of an NHWC tensor.
pub(super) fn nhwc(t: &crate::model::TensorInfo<'_>) -> Option<[i32; 4]> {
    let mut d = [0i32; 4];
    if t.shape().len() != 4 {
        return None;
    }
    for (slot, v) in d.iter_mut().zip(t.shape()) {
        *slot = v;
    }
    Some(d)
}

/// Scratch bytes a fused chain's bands may take (the ring and the ADD's
/// operand rows); a band is at least one row, whatever its bytes.
const CHAIN_SCRATCH_BYTES: u32 = 4096;

/// Two convolutions (and an ADD) the lean schedule runs as one op, a few
/// rows at a time ([`fused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fused {
    /// The first convolution (execution step).
    pub head: u32,
    /// The chain's last op: it runs the whole chain at invoke, the ops
    /// before it do nothing.
    pub runner: u32,
    /// The chain's input: the first convolution's input 0.
    pub input: u32,
    /// The first convolution's output: never whole, only a ring of rows.
    pub between: u32,
    /// The second convolution's output: a buffer of its own, or, when an
    /// ADD ends the chain, one row at a time.
    pub second: u32,
    /// The ADD's output, written over the input's buffer row by row
    /// (`None` for a chain of two convolutions).
    pub sum: Option<u32>,
    /// Bytes of the ring: the rows of `between` one band of rows of
    /// `second` reads.
    pub ring_bytes: u32,
    /// Bytes of one band of rows of `second` (the ADD's operand rows), 0
    /// without an ADD.
    pub row_bytes: u32,
}

impl Fused {
    /// The tensor the chain writes.
    pub fn output(&self) -> u32 {
        self.sum.unwrap_or(self.second)
    }

    /// Whether `tensor` is one the chain keeps no buffer for.
    pub fn has_no_buffer(&self, tensor: u32) -> bool {
        tensor == self.between || (self.sum.is_some() && tensor == self.second)
    }
}

/// A convolution a chain may take: its input and output tensors, their
/// dimensions, and its row axis.
struct ChainConv {
    input: u32,
    output: u32,
    output_dims: [i32; 4],
    rows: crate::kernels::window_axis::Axis,
}

/// `op` as a chain's convolution: an int8 CONV_2D of one group over one
/// batch.
fn conv_rows(model: &Model<'_>, op: &OperatorInfo<'_>) -> Result<ChainConv, Refusal> {
    if op.code != OpCode::Builtin(BuiltinOperator::CONV_2D) {
        return Err(Refusal::NoFusedForm);
    }
    let input = op.inputs().next().flatten().ok_or(Refusal::NotPlanned)?;
    let output = op.outputs().next().flatten().ok_or(Refusal::NotPlanned)?;
    let tensor = |t: u32| model.tensor(t).ok_or(Refusal::NotPlanned);
    let (x, y) = (tensor(input)?, tensor(output)?);
    let filter = op
        .inputs()
        .nth(1)
        .flatten()
        .and_then(|f| model.tensor(f))
        .ok_or(Refusal::Shape { what: "no filter" })?;
    if x.dtype != TensorType::INT8 || y.dtype != TensorType::INT8 {
        return Err(Refusal::NotInt8);
    }
    if !liveness::is_planned(model, input) || !liveness::is_planned(model, output) {
        return Err(Refusal::NotPlanned);
    }
    let (Some(xd), Some(fd), Some(yd)) = (nhwc(&x), nhwc(&filter), nhwc(&y)) else {
        return Err(Refusal::Shape { what: "not NHWC" });
    };
    if xd[0] != 1 || yd[0] != 1 {
        return Err(Refusal::Shape {
            what: "more than one batch",
        });
    }
    if fd[3] != xd[3] || fd[0] != yd[3] {
        return Err(Refusal::Shape {
            what: "not a convolution of one group",
        });
    }
    let raw = op.raw();
    let options = raw
        .builtin_options_as_conv_2_doptions()
        .ok_or(Refusal::Shape { what: "no options" })?;
    let rows = crate::kernels::window_axis::Axis::new(
        options.padding(),
        xd[1],
        fd[1],
        options.stride_h(),
        options.dilation_h_factor(),
    )
    .ok()
    .filter(|a| a.out_size == yd[1])
    .ok_or(Refusal::Shape {
        what: "rows not TFLM's for its padding",
    })?;
    Ok(ChainConv {
        input,
        output,
        output_dims: yd,
        rows,
    })
}

/// The first op after `op` that reads `tensor` other than `reader`, or
/// the operator count when it is a model output.
fn other_reader(model: &Model<'_>, tensor: u32, reader: u32) -> Option<u32> {
    if model.outputs().any(|o| o == tensor) {
        return Some(model.operator_count());
    }
    model
        .operators()
        .filter(|o| o.inputs().flatten().any(|t| t == tensor))
        .find(|o| o.index != reader || o.inputs().flatten().filter(|&t| t == tensor).count() > 1)
        .map(|o| o.index)
}

/// The chain the model's shape allows from op `head`, whatever the
/// schedule and the chains around it.
fn chain_at(model: &Model<'_>, head: u32) -> Result<Fused, Refusal> {
    let first = model.operator(head).ok_or(Refusal::NoFusedForm)?;
    let ChainConv {
        input: x,
        output: y,
        output_dims: yd,
        ..
    } = conv_rows(model, &first)?;
    let next = model.operator(head + 1).ok_or(Refusal::NoFusedForm)?;
    let ChainConv {
        input: y_read,
        output: z,
        output_dims: zd,
        rows: rows2,
    } = conv_rows(model, &next).map_err(|e| match e {
        Refusal::NoFusedForm => Refusal::NoFusedForm,
        _ => Refusal::Shape {
            what: "the next convolution takes no fused form",
        },
    })?;
    if y_read != y {
        return Err(Refusal::NoFusedForm);
    }
    if let Some(op) = other_reader(model, y, head + 1) {
        return Err(Refusal::IntermediateReadBy { op });
    }
    if model.inputs().any(|i| i == y) {
        return Err(Refusal::NotPlanned);
    }
    let row = |d: [i32; 4]| d[2].max(0) as u32 * d[3].max(0) as u32;
    let effective = (rows2.filter - 1) * rows2.dilation + 1;
    // Rows of `between` a band of `b` rows of `second` reads.
    let ring_rows = |b: i32| ((b - 1) * rows2.stride + effective).min(yd[1]).max(0) as u32;
    if ring_rows(1) >= yd[1].max(0) as u32 {
        return Err(Refusal::Shape {
            what: "the ring would hold the whole output",
        });
    }
    let mut chain = Fused {
        head,
        runner: head + 1,
        input: x,
        between: y,
        second: z,
        sum: None,
        ring_bytes: 0,
        row_bytes: 0,
    };
    let sum = residual_sum(model, &chain, zd);
    // Bands of several rows, as many as the scratch budget holds: each
    // band is one call of each convolution's kernel, which sets up its
    // weights again.
    let scratch =
        |b: i32| ring_rows(b) * row(yd) + if sum.is_some() { b as u32 * row(zd) } else { 0 };
    let mut band = 1;
    while band < zd[1]
        && ring_rows(band + 1) < yd[1].max(0) as u32
        && scratch(band + 1) <= CHAIN_SCRATCH_BYTES
    {
        band += 1;
    }
    chain.ring_bytes = ring_rows(band) * row(yd);
    if let Some(sum) = sum {
        chain.runner = head + 2;
        chain.sum = Some(sum);
        chain.row_bytes = band as u32 * row(zd);
    }
    Ok(chain)
}

/// The output of the ADD right after `chain` when it adds the chain's
/// input and its second convolution's output, both of its output's
/// shape, the input dies there, and each output row may be written over
/// the input row it reads: no row of the first convolution still to be
/// computed reads it.
fn residual_sum(model: &Model<'_>, chain: &Fused, zd: [i32; 4]) -> Option<u32> {
    let op = model.operator(chain.head + 2)?;
    if op.code != OpCode::Builtin(BuiltinOperator::ADD) || op.inputs().len() != 2 {
        return None;
    }
    let operands: [Option<u32>; 2] = [op.inputs().next()?, op.inputs().nth(1)?];
    let (x, z) = (chain.input, chain.second);
    if operands != [Some(x), Some(z)] && operands != [Some(z), Some(x)] {
        return None;
    }
    let out = op.outputs().next().flatten()?;
    let shape_of = |t: u32| model.tensor(t).and_then(|t| nhwc(&t));
    let (xd, od) = (shape_of(x)?, shape_of(out)?);
    let int8 = |t: u32| model.tensor(t).is_some_and(|t| t.dtype == TensorType::INT8);
    if xd != zd || od != zd || !int8(out) || !liveness::is_planned(model, out) {
        return None;
    }
    if other_reader(model, z, op.index).is_some() || model.inputs().any(|i| i == out) {
        return None;
    }
    dying_input(model, &op, if operands[0] == Some(x) { 0 } else { 1 }).ok()?;
    // Output row r goes over input row r once the rows of `between` that
    // rows ..=r read are computed: the next of them must start below r.
    let rows1 = conv_rows(model, &model.operator(chain.head)?).ok()?.rows;
    let rows2 = conv_rows(model, &model.operator(chain.head + 1)?)
        .ok()?
        .rows;
    let effective2 = (rows2.filter - 1) * rows2.dilation + 1;
    let safe = (0..rows2.out_size).all(|r| {
        let next = (rows2.origin(r) + effective2).clamp(0, rows2.in_size);
        next >= rows2.in_size || rows1.origin(next) > r
    });
    safe.then_some(out)
}

/// The fused chain that starts at op `head` under `schedule`, or why
/// none does.
pub fn fused(model: &Model<'_>, schedule: Schedule, head: u32) -> Result<Fused, Refusal> {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return Err(Refusal::TflmSchedule);
    }
    let chain = chain_at(model, head)?;
    if let Some(owner) = earlier_chain(model, head) {
        return Err(Refusal::Fused {
            runner: owner.runner,
        });
    }
    match schedule {
        Schedule::Ops { fused, .. } if !fused.contains(head) => Err(Refusal::FusionNotNeeded),
        _ => Ok(chain),
    }
}

/// The chain that takes op `op` as one of its later ops, when chains
/// overlap: the earliest first op wins, then the next that does not
/// overlap it, and so on.
fn earlier_chain(model: &Model<'_>, op: u32) -> Option<Fused> {
    let mut start = op;
    while start > 0 && chain_at(model, start - 1).is_ok_and(|c| c.runner >= start) {
        start -= 1;
    }
    let mut at = start;
    while at < op {
        match chain_at(model, at) {
            Ok(c) if c.runner >= op => return Some(c),
            Ok(c) => at = c.runner + 1,
            Err(_) => at += 1,
        }
    }
    None
}

/// The fused chain op `op` belongs to under `schedule`, if any.
pub fn chain_of(model: &Model<'_>, schedule: Schedule, op: u32) -> Option<Fused> {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return None;
    }
    (op.saturating_sub(2)..=op)
        .rev()
        .filter_map(|head| fused(model, schedule, head).ok())
        .find(|c| c.head <= op && op <= c.runner)
}

/// Whether `tensor` has no buffer under `schedule`: a fused chain's
/// intermediate.
pub fn has_no_buffer(model: &Model<'_>, schedule: Schedule, tensor: u32) -> bool {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return false;
    }
    model
        .operators()
        .filter(|op| op.outputs().flatten().any(|t| t == tensor))
        .any(|op| chain_of(model, schedule, op.index).is_some_and(|c| c.has_no_buffer(tensor)))
}

/// The last step `tensor` is read at under `schedule`: a fused chain's
/// input is read when the chain runs, at its last op.
pub(super) fn fused_last_read(model: &Model<'_>, schedule: Schedule, tensor: u32) -> Option<u32> {
    model
        .operators()
        .filter(|op| op.inputs().next().flatten() == Some(tensor))
        .filter_map(|op| fused(model, schedule, op.index).ok())
        .map(|c| c.runner)
        .max()
}

/// The scratch buffers fused chains' last ops ask for: the ring, and the
/// ADD's operand row (what the bound counts for them).
pub(super) fn fused_scratch_iter<'m>(
    model: &'m Model<'_>,
    schedule: Schedule,
) -> impl Iterator<Item = BufferRequest> + 'm {
    (0..model.operator_count())
        .filter_map(move |head| fused(model, schedule, head).ok())
        .flat_map(|c| {
            [(0, c.ring_bytes), (1, c.row_bytes)]
                .into_iter()
                .filter(|&(_, bytes)| bytes > 0)
                .map(move |(k, bytes)| BufferRequest::scratch(c.runner, k, bytes))
        })
}
