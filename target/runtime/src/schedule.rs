//! Schedules: which ops write their output over their input.
//!
//! TFLM's schedule keeps every op's whole input and whole output live at
//! once, so no plan of its graph can go below the liveness bound. The
//! *lean* schedule ([`Schedule::Lean`]) lets an op whose input dies there
//! write its output into the input's own buffer, through a small temporary
//! (a kernel scratch buffer the op asks for at prepare):
//!
//! - a pointwise CONV_2D (1×1, stride 1) works a band of pixels into the
//!   temporary, then copies it over the pixels it read: from the first band
//!   when an output pixel is no wider than an input pixel, from the last
//!   when it is wider (the buffer is the larger of the two);
//! - a DEPTHWISE_CONV_2D works a band of output rows into the temporary and
//!   copies each row over the input once no later row reads what lies
//!   there (its output rows must be no wider than its input rows);
//! - a strided pointwise CONV_2D works forward when no output pixel's
//!   bytes reach input a later pixel still reads;
//! - an element-wise ADD (int8, operands of its output's shape) writes
//!   each sum over the operand that dies there.
//!
//! It also *fuses* a CONV_2D into the CONV_2D that reads its output
//! ([`fused`]): the first one's output never exists whole, only a ring of
//! the rows the second one's next output row reads, and the last op of the
//! chain computes the whole chain a row at a time (the ops before it do
//! nothing at invoke). When an ADD of the chain's input and the second
//! convolution's output ends the chain and the input dies there, each
//! output row of the ADD is written over the input row it read, so a
//! residual block needs its input's buffer and a few rows.
//!
//! Each computes exactly what it computes out of place: outputs are equal
//! bit for bit. In the plan, the input and the output become one buffer
//! (the larger size, the union of their lifetimes); a chain of in-place ops
//! is one buffer. An op that cannot run in place runs as TFLM's, and
//! [`in_place`] says why ([`Refusal`]).
//!
//! The decision depends on the model only, so the host and every board
//! plan alike.

use core::fmt;

use crate::liveness;
use crate::model::{Model, OpCode, OperatorInfo};
use crate::request::BufferRequest;
use crate::schema::{BuiltinOperator, TensorType};

/// Whether this build has the lean schedule (not under the `no-lean`
/// feature): when false, [`in_place`] refuses every op and the compiler
/// drops the schedule's analysis and the kernels' in-place paths.
pub const LEAN_LINKED: bool = !cfg!(feature = "no-lean");

/// Which schedule an allocation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Schedule {
    /// TFLM's: every op's inputs and outputs in buffers of their own.
    #[default]
    Tflm,
    /// Ops whose input dies there write their output into its buffer;
    /// allocate narrows this to [`Schedule::Narrowing`] (or to TFLM's)
    /// when that has the lower liveness bound ([`resolve`]).
    Lean,
    /// [`Schedule::Lean`] for the ops whose output is no larger than their
    /// input only. A widening op in place makes its whole chain one buffer
    /// of the wider size, which can raise the peak where the chain is
    /// still narrow (VWW's first layers, next to its input).
    Narrowing,
    /// What [`Schedule::Lean`] resolves to: only these ops in place, the
    /// ones without which the peak would be higher (each op in place costs
    /// a copy of its output), and only these fused chains (by first op).
    Ops {
        /// The ops that may run in place.
        in_place: OpSet,
        /// The first ops of the chains that run fused.
        fused: OpSet,
    },
}

/// A set of ops by execution step (below [`OpSet::CAPACITY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet([u32; 8]);

impl OpSet {
    /// Ops a set holds: an op at a later step never runs in place.
    pub const CAPACITY: u32 = 256;

    /// Whether `op` is in the set.
    pub fn contains(&self, op: u32) -> bool {
        op < Self::CAPACITY && self.0[(op / 32) as usize] & (1 << (op % 32)) != 0
    }

    fn insert(&mut self, op: u32) {
        if op < Self::CAPACITY {
            self.0[(op / 32) as usize] |= 1 << (op % 32);
        }
    }

    fn remove(&mut self, op: u32) {
        if op < Self::CAPACITY {
            self.0[(op / 32) as usize] &= !(1 << (op % 32));
        }
    }

    /// How many ops are in the set.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Schedule {
    /// The name a scenario and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Tflm => "tflm",
            Schedule::Lean => "lean",
            Schedule::Narrowing => "narrowing",
            Schedule::Ops { .. } => "lean",
        }
    }
}

/// The schedule an allocation of `model` under `schedule` runs: for
/// [`Schedule::Lean`], whichever of it, [`Schedule::Narrowing`] and TFLM's
/// has the lowest liveness bound over buffers aligned to `align` (the
/// fewer ops in place on a tie: each costs a copy); others as they are.
pub fn resolve(model: &Model<'_>, schedule: Schedule, align: u32) -> Schedule {
    if !LEAN_LINKED {
        return Schedule::Tflm;
    }
    if schedule != Schedule::Lean {
        return schedule;
    }
    let bound = |s: Schedule| tensor_bound(model, s, align);
    let chosen = [Schedule::Tflm, Schedule::Narrowing, Schedule::Lean]
        .into_iter()
        .map(|s| (bound(s), s))
        .fold(None, |best: Option<(u32, Schedule)>, (b, s)| match best {
            Some((least, _)) if least <= b => best,
            _ => Some((b, s)),
        })
        .map_or(Schedule::Tflm, |(_, s)| s);
    if chosen == Schedule::Tflm {
        return chosen;
    }
    let mut every = OpSet::default();
    let mut heads = OpSet::default();
    for op in 0..model.operator_count().min(OpSet::CAPACITY) {
        if in_place(model, chosen, op).is_ok() {
            every.insert(op);
        }
        if fused(model, chosen, op).is_ok() {
            heads.insert(op);
        }
    }
    // A chain fused costs a row-by-row run: kept only if the bound is
    // higher without it.
    let with = |fused: OpSet| Schedule::Ops {
        in_place: every,
        fused,
    };
    for head in 0..model.operator_count().min(OpSet::CAPACITY) {
        if !heads.contains(head) {
            continue;
        }
        let mut without = heads;
        without.remove(head);
        if bound(with(without)) <= bound(with(heads)) {
            heads = without;
        }
    }
    Schedule::Ops {
        in_place: needed(model, with(heads), align),
        fused: heads,
    }
}

/// The ops of `base` (a lean schedule) without which its liveness bound
/// would be higher. Running op `k` as TFLM's splits its chain in two at
/// `k`: at step `k` both parts are live, at any other step only one, so
/// each op can be judged alone against the bound.
fn needed(model: &Model<'_>, base: Schedule, align: u32) -> OpSet {
    let bound = u64::from(tensor_bound(model, base, align));
    let padded = |bytes: u32| crate::request::align_up(u64::from(bytes), u64::from(align.max(1)));
    let mut set = OpSet::default();
    for_each_live_sum(model, base, align, &[], |step, live| {
        let Ok(p) = in_place(model, base, step) else {
            return;
        };
        let (before, after) = (
            chain_max(model, base, p.input, written_over),
            chain_max(model, base, p.output, written_into),
        );
        let split = padded(before) + padded(after);
        if live - padded(before.max(after)) + split > bound {
            set.insert(step);
        }
    });
    set
}

/// The largest tensor from `tensor` along its chain, one way (`next`).
fn chain_max(
    model: &Model<'_>,
    schedule: Schedule,
    tensor: u32,
    next: fn(&Model<'_>, Schedule, u32) -> Option<u32>,
) -> u32 {
    let size = |t: u32| model.tensor(t).map_or(0, |t| t.bytes);
    let (mut at, mut most) = (tensor, size(tensor));
    for _ in 0..model.operator_count() {
        match next(model, schedule, at) {
            Some(t) => {
                most = most.max(size(t));
                at = t;
            }
            None => break,
        }
    }
    most
}

/// An op the lean schedule runs in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// The op (execution step).
    pub op: u32,
    /// Its input tensor dying at this op (position 0, or an ADD's other
    /// operand when only that one dies there).
    pub input: u32,
    /// Its output tensor (position 0), written into the input's buffer.
    pub output: u32,
}

/// Why the lean schedule runs an op as TFLM's, or does not fuse a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refusal {
    /// No in-place form for this operator.
    NoInPlaceForm,
    /// Not int8 in and out.
    NotInt8,
    /// A shape the in-place form does not take (`what` says which).
    Shape {
        /// What is wrong.
        what: &'static str,
    },
    /// The input is still read after this op.
    InputStillRead {
        /// The later op that reads it.
        op: u32,
    },
    /// The input is a model output (the caller reads it afterwards).
    InputIsModelOutput,
    /// The input or output has no planned buffer (a constant, a variable,
    /// a model input written by this op).
    NotPlanned,
    /// The output is larger than the input, and the schedule is
    /// [`Schedule::Narrowing`].
    Widens,
    /// The schedule is TFLM's.
    TflmSchedule,
    /// The peak is no higher with this op as TFLM's (which saves the copy).
    NotNeeded,
    /// The op is part of a fused chain: the chain's last op runs it.
    Fused {
        /// The chain's last op.
        runner: u32,
    },
    /// Not a CONV_2D followed by the CONV_2D that reads its output.
    NoFusedForm,
    /// The peak is no higher with this chain unfused (which saves running
    /// it a row at a time).
    FusionNotNeeded,
    /// The first convolution's output is read by another op too (or is a
    /// model output): it needs a whole buffer.
    IntermediateReadBy {
        /// That op (the operator count for a model output).
        op: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::NoInPlaceForm => f.write_str("no in-place form for this operator"),
            Refusal::NotInt8 => f.write_str("not int8 in and out"),
            Refusal::Shape { what } => write!(f, "{what}"),
            Refusal::InputStillRead { op } => write!(f, "input still read by op {op}"),
            Refusal::InputIsModelOutput => f.write_str("input is a model output"),
            Refusal::NotPlanned => f.write_str("input or output is not a planned buffer"),
            Refusal::Widens => {
                f.write_str("output larger than input (a lower peak without widening ops in place)")
            }
            Refusal::TflmSchedule => f.write_str("TFLM's schedule has the lower peak"),
            Refusal::NotNeeded => f.write_str("the peak is no higher without it (saves the copy)"),
            Refusal::Fused { runner } => write!(f, "fused: op {runner} runs it"),
            Refusal::NoFusedForm => f.write_str("no CONV_2D reads its output next"),
            Refusal::FusionNotNeeded => {
                f.write_str("the peak is no higher unfused (saves running it row by row)")
            }
            Refusal::IntermediateReadBy { op } => {
                write!(
                    f,
                    "its output is read by op {op} too (needs a whole buffer)"
                )
            }
        }
    }
}

/// Whether op `index` runs in place under `schedule` (as
/// [`resolve`]d), or why not.
pub fn in_place(model: &Model<'_>, schedule: Schedule, index: u32) -> Result<InPlace, Refusal> {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return Err(Refusal::TflmSchedule);
    }
    let op = model.operator(index).ok_or(Refusal::NoInPlaceForm)?;
    let form = match op.code {
        OpCode::Builtin(BuiltinOperator::CONV_2D) => Form::Pointwise,
        OpCode::Builtin(BuiltinOperator::DEPTHWISE_CONV_2D) => Form::Rows,
        OpCode::Builtin(BuiltinOperator::ADD) => Form::Elementwise,
        _ => return Err(Refusal::NoInPlaceForm),
    };
    if let Some(chain) = chain_of(model, schedule, index) {
        // A fused chain's ADD writes over the chain's input, whatever the
        // set of ops in place: the chain's buffer is the input's.
        return match chain.sum {
            Some(sum) if index == chain.runner => Ok(InPlace {
                op: index,
                input: chain.input,
                output: sum,
            }),
            _ => Err(Refusal::Fused {
                runner: chain.runner,
            }),
        };
    }
    let output = op.outputs().next().flatten().ok_or(Refusal::NotPlanned)?;
    let input = match form {
        Form::Elementwise => {
            dying_input(model, &op, 0).or_else(|e| dying_input(model, &op, 1).map_err(|_| e))?
        }
        _ => dying_input(model, &op, 0)?,
    };
    let (x, y) = (
        model.tensor(input).ok_or(Refusal::NotPlanned)?,
        model.tensor(output).ok_or(Refusal::NotPlanned)?,
    );
    if x.dtype != TensorType::INT8 || y.dtype != TensorType::INT8 {
        return Err(Refusal::NotInt8);
    }
    if !liveness::is_planned(model, output) || model.inputs().any(|i| i == output) {
        return Err(Refusal::NotPlanned);
    }
    let second = match form {
        Form::Elementwise => op.inputs().flatten().find(|&t| t != input),
        _ => op.inputs().nth(1).flatten(),
    };
    let second = second
        .and_then(|t| model.tensor(t))
        .ok_or(Refusal::Shape { what: "no filter" })?;
    form.check(&op, [&x, &second, &y])?;
    match schedule {
        Schedule::Tflm => return Err(Refusal::TflmSchedule),
        Schedule::Narrowing if y.bytes > x.bytes => return Err(Refusal::Widens),
        Schedule::Ops { in_place, .. } if !in_place.contains(index) => {
            return Err(Refusal::NotNeeded);
        }
        _ => {}
    }
    Ok(InPlace {
        op: index,
        input,
        output,
    })
}

/// Input `position` of `op`, when its buffer may take the op's output:
/// planned, read by no later op nor twice by this one, not a model output.
fn dying_input(model: &Model<'_>, op: &OperatorInfo<'_>, position: usize) -> Result<u32, Refusal> {
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
fn nhwc(t: &crate::model::TensorInfo<'_>) -> Option<[i32; 4]> {
    let mut d = [0i32; 4];
    if t.shape().len() != 4 {
        return None;
    }
    for (slot, v) in d.iter_mut().zip(t.shape()) {
        *slot = v;
    }
    Some(d)
}

/// The in-place forms.
#[derive(Clone, Copy)]
enum Form {
    Pointwise,
    Rows,
    Elementwise,
}

impl Form {
    /// Checks the op's shapes: `second` is the filter of a convolution,
    /// the other operand of an ADD.
    fn check(
        self,
        op: &OperatorInfo<'_>,
        [x, second, y]: [&crate::model::TensorInfo<'_>; 3],
    ) -> Result<(), Refusal> {
        if let Form::Elementwise = self {
            if second.dtype != TensorType::INT8 {
                return Err(Refusal::NotInt8);
            }
            let same = |a: &crate::model::TensorInfo<'_>| a.shape().eq(y.shape());
            if !same(x) || !same(second) {
                return Err(Refusal::Shape {
                    what: "operands not of the output's shape (broadcast)",
                });
            }
            return Ok(());
        }
        let (Some(xd), Some(fd), Some(yd)) = (nhwc(x), nhwc(second), nhwc(y)) else {
            return Err(Refusal::Shape { what: "not NHWC" });
        };
        if xd[0] != 1 {
            return Err(Refusal::Shape {
                what: "more than one batch",
            });
        }
        match self {
            Form::Pointwise => {
                let raw = op.raw();
                let options = raw
                    .builtin_options_as_conv_2_doptions()
                    .ok_or(Refusal::Shape { what: "no options" })?;
                if fd[1] != 1 || fd[2] != 1 || fd[3] != xd[3] {
                    return Err(Refusal::Shape {
                        what: "not a 1×1 convolution of one group",
                    });
                }
                let stride = (options.stride_h(), options.stride_w());
                if stride == (1, 1) {
                    if xd[1] != yd[1] || xd[2] != yd[2] {
                        return Err(Refusal::Shape {
                            what: "output not the input's height and width",
                        });
                    }
                } else if !strided_forward(xd, yd, stride) {
                    return Err(Refusal::Shape {
                        what: "strided output pixels would reach input still to be read",
                    });
                }
                Ok(())
            }
            Form::Rows => {
                if op
                    .raw()
                    .builtin_options_as_depthwise_conv_2_doptions()
                    .is_none()
                {
                    return Err(Refusal::Shape { what: "no options" });
                }
                let in_row = i64::from(xd[2]) * i64::from(xd[3]);
                let out_row = i64::from(yd[2]) * i64::from(yd[3]);
                if out_row > in_row || yd[1] > xd[1] {
                    return Err(Refusal::Shape {
                        what: "output rows wider than input rows",
                    });
                }
                Ok(())
            }
            Form::Elementwise => Ok(()),
        }
    }
}

/// Whether a strided pointwise convolution from `xd` to `yd` may write its
/// output pixels forward over its input: each output pixel's bytes end no
/// later than the input pixel the next output reads begins. Along a row
/// the gap changes by the same amount each pixel, so its ends and the
/// row's last pixel are enough.
fn strided_forward(xd: [i32; 4], yd: [i32; 4], (sy, sx): (i32, i32)) -> bool {
    let [_, _, w, cin] = xd.map(i64::from);
    let [_, ho, wo, cout] = yd.map(i64::from);
    let (sy, sx) = (i64::from(sy), i64::from(sx));
    if sy < 1 || sx < 1 || ho < 1 || wo < 1 || (ho - 1) * sy >= i64::from(xd[1]) {
        return false;
    }
    let input_at = |oy: i64, ox: i64| (sy * oy * w + sx * ox) * cin;
    let output_end = |oy: i64, ox: i64| (oy * wo + ox + 1) * cout;
    (0..ho).all(|oy| {
        let along = [0, wo - 2]
            .into_iter()
            .filter(|&ox| ox >= 0)
            .all(|ox| input_at(oy, ox + 1) >= output_end(oy, ox));
        let next_row = oy + 1 == ho || input_at(oy + 1, 0) >= output_end(oy, wo - 1);
        along && next_row
    })
}

/// Scratch bytes a fused chain's bands may take (the ring and the ADD's
/// operand rows), beyond one row of the second convolution's output.
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
fn fused_last_read(model: &Model<'_>, schedule: Schedule, tensor: u32) -> Option<u32> {
    model
        .operators()
        .filter(|op| op.inputs().next().flatten() == Some(tensor))
        .filter_map(|op| fused(model, schedule, op.index).ok())
        .map(|c| c.runner)
        .max()
}

/// The tensor whose buffer `tensor` is written into under `schedule`: the
/// input of the in-place op that writes it (`None` under TFLM's schedule,
/// or when it has a buffer of its own).
pub fn written_over(model: &Model<'_>, schedule: Schedule, tensor: u32) -> Option<u32> {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return None;
    }
    let writer = model
        .operators()
        .find(|op| op.outputs().next().flatten() == Some(tensor))?;
    in_place(model, schedule, writer.index)
        .ok()
        .map(|p| p.input)
}

/// The tensor `tensor` writes its output over, when the op at its last
/// step runs in place on it.
pub fn written_into(model: &Model<'_>, schedule: Schedule, tensor: u32) -> Option<u32> {
    if !LEAN_LINKED || schedule == Schedule::Tflm {
        return None;
    }
    let life = liveness::tensor_lifetime(model, tensor)?;
    in_place(model, schedule, life.last_step)
        .ok()
        .filter(|p| p.input == tensor)
        .map(|p| p.output)
}

/// The first tensor of `tensor`'s chain: the one whose buffer it lives in.
pub fn buffer_of(model: &Model<'_>, schedule: Schedule, tensor: u32) -> u32 {
    let mut at = tensor;
    // A chain is at most as long as the model has ops.
    for _ in 0..=model.operator_count() {
        match written_over(model, schedule, at) {
            Some(input) => at = input,
            None => break,
        }
    }
    at
}

/// The buffer request of the chain starting at `first` (a tensor with a
/// buffer of its own): the largest size, and the chain's whole lifetime.
pub(crate) fn chain_extent(
    model: &Model<'_>,
    schedule: Schedule,
    first: u32,
) -> Option<(u32, liveness::Lifetime)> {
    let mut life = liveness::tensor_lifetime(model, first)?;
    let mut size = model.tensor(first)?.bytes;
    let mut at = first;
    for _ in 0..model.operator_count() {
        if let Some(step) = fused_last_read(model, schedule, at) {
            life.last_step = life.last_step.max(step);
        }
        let Some(next) = written_into(model, schedule, at) else {
            break;
        };
        let next_life = liveness::tensor_lifetime(model, next)?;
        life.last_step = life.last_step.max(next_life.last_step);
        size = size.max(model.tensor(next)?.bytes);
        at = next;
    }
    Some((size, life))
}

/// The tensor requests of `model` under `schedule`, in tensor index order
/// (TFLM's order): under TFLM's, [`liveness::tensor_request_iter`]; under
/// a lean one, a tensor an in-place op writes over its input has no
/// request of its own, and a chain's first tensor asks for the chain's
/// largest size over the chain's whole lifetime (through the last op of
/// a fused chain that reads it); a fused chain's intermediates have none.
pub fn scheduled_request_iter<'m>(
    model: &'m Model<'_>,
    schedule: Schedule,
) -> impl Iterator<Item = BufferRequest> + 'm {
    model.tensors().filter_map(move |tensor| {
        if !LEAN_LINKED || schedule == Schedule::Tflm {
            let l = liveness::tensor_lifetime(model, tensor.index)?;
            return Some(BufferRequest::tensor(
                tensor.index,
                tensor.bytes,
                l.first_step,
                l.last_step,
            ));
        }
        if written_over(model, schedule, tensor.index).is_some()
            || has_no_buffer(model, schedule, tensor.index)
        {
            return None;
        }
        let (size, l) = chain_extent(model, schedule, tensor.index)?;
        Some(BufferRequest::tensor(
            tensor.index,
            size,
            l.first_step,
            l.last_step,
        ))
    })
}

/// Number of requests [`tensor_requests`] writes for `model`.
pub fn tensor_request_count(model: &Model<'_>, schedule: Schedule) -> usize {
    scheduled_request_iter(model, schedule).count()
}

/// Writes the tensor requests of `model` under `schedule`, each with
/// alignment `align`, into `out` and returns how many there are (entries
/// past `out`'s end are counted but dropped).
pub fn tensor_requests(
    model: &Model<'_>,
    schedule: Schedule,
    align: u32,
    out: &mut [BufferRequest],
) -> usize {
    let mut count = 0;
    for request in scheduled_request_iter(model, schedule) {
        if let Some(slot) = out.get_mut(count) {
            *slot = request.with_align(align);
        }
        count += 1;
    }
    count
}

/// The liveness lower bound of `model`'s tensors alone under `schedule`,
/// each buffer aligned to `align`: what [`resolve`] compares.
pub fn tensor_bound(model: &Model<'_>, schedule: Schedule, align: u32) -> u32 {
    let mut most = 0;
    for_each_live_sum(model, schedule, align, &[], |_, live| most = most.max(live));
    most.min(u64::from(u32::MAX)) as u32
}

/// The scratch buffers fused chains' last ops ask for: the ring, and the
/// ADD's operand row (what the bound counts for them).
fn fused_scratch_iter<'m>(
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

/// Steps whose live sums one pass over the requests adds up.
const SUM_WINDOW: usize = 64;

/// Calls `f(step, bytes)` with the padded bytes of `model`'s tensors
/// (under `schedule`, aligned to `align`) and of `extra` live at each
/// step, in step order. One pass over the tensor requests per
/// [`SUM_WINDOW`] steps (working a request out can walk the model), and no
/// memory but a window of sums on the stack.
pub(crate) fn for_each_live_sum(
    model: &Model<'_>,
    schedule: Schedule,
    align: u32,
    extra: &[BufferRequest],
    mut f: impl FnMut(u32, u64),
) {
    let padded = |r: &BufferRequest| u64::from(r.padded_size().unwrap_or(0));
    let steps = model.operator_count().max(1);
    let mut start = 0;
    while start < steps {
        let end = (start + SUM_WINDOW as u32).min(steps);
        let mut sums = [0u64; SUM_WINDOW];
        let mut add = |r: &BufferRequest| {
            let (lo, hi) = (r.first_step.max(start), r.live_until().min(end - 1));
            for step in lo..=hi.max(lo) {
                if step <= hi {
                    sums[(step - start) as usize] += padded(r);
                }
            }
        };
        scheduled_request_iter(model, schedule)
            .map(|r| r.with_align(align))
            .for_each(|r| add(&r));
        fused_scratch_iter(model, schedule)
            .map(|r| r.with_align(align))
            .for_each(|r| add(&r));
        extra.iter().for_each(&mut add);
        for (step, &sum) in (start..end).zip(sums.iter()) {
            f(step, sum);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::strided_forward;

    #[test]
    fn strided_pointwise_output_must_not_reach_input_still_read() {
        // IC's shortcut: 32×32×16 → 16×16×32, stride 2.
        assert!(strided_forward([1, 32, 32, 16], [1, 16, 16, 32], (2, 2)));
        // Four times wider pixels with twice the stride: the first output
        // pixel runs over the second one's input.
        assert!(!strided_forward([1, 8, 8, 4], [1, 4, 4, 16], (2, 2)));
        // Stride 2 down the rows only: a row of output is as long as a
        // row of input, and input row 2 lies past output row 0.
        assert!(strided_forward([1, 8, 8, 4], [1, 4, 8, 4], (2, 1)));
        // Three times wider pixels with stride 3 each way: each output
        // pixel ends where the next one's input begins.
        assert!(strided_forward([1, 9, 9, 4], [1, 3, 3, 12], (3, 3)));
        // A shape the stride does not give.
        assert!(!strided_forward([1, 4, 4, 4], [1, 5, 2, 4], (2, 2)));
    }
}
