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
//!   there (its output rows must be no wider than its input rows).
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
    /// a copy of its output).
    Ops(OpSet),
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
            Schedule::Ops(_) => "lean",
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
    Schedule::Ops(needed(model, chosen, align))
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
    /// Its input tensor (position 0), dying at this op.
    pub input: u32,
    /// Its output tensor (position 0), written into the input's buffer.
    pub output: u32,
}

/// Why the lean schedule runs an op as TFLM's.
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
        _ => return Err(Refusal::NoInPlaceForm),
    };
    let input = op.inputs().next().flatten().ok_or(Refusal::NotPlanned)?;
    let output = op.outputs().next().flatten().ok_or(Refusal::NotPlanned)?;
    let (x, y) = (
        model.tensor(input).ok_or(Refusal::NotPlanned)?,
        model.tensor(output).ok_or(Refusal::NotPlanned)?,
    );
    if x.dtype != TensorType::INT8 || y.dtype != TensorType::INT8 {
        return Err(Refusal::NotInt8);
    }
    let planned = |t: u32| liveness::is_planned(model, t);
    if !planned(input) || !planned(output) || model.inputs().any(|i| i == output) {
        return Err(Refusal::NotPlanned);
    }
    if model.outputs().any(|o| o == input) {
        return Err(Refusal::InputIsModelOutput);
    }
    if op.inputs().skip(1).flatten().any(|t| t == input) {
        return Err(Refusal::Shape {
            what: "input read twice",
        });
    }
    if let Some(later) = model
        .operators()
        .skip(index as usize + 1)
        .find(|o| o.inputs().flatten().any(|t| t == input))
    {
        return Err(Refusal::InputStillRead { op: later.index });
    }
    let filter = op
        .inputs()
        .nth(1)
        .flatten()
        .and_then(|f| model.tensor(f))
        .ok_or(Refusal::Shape { what: "no filter" })?;
    form.check(&op, [&x, &filter, &y])?;
    match schedule {
        Schedule::Tflm => return Err(Refusal::TflmSchedule),
        Schedule::Narrowing if y.bytes > x.bytes => return Err(Refusal::Widens),
        Schedule::Ops(set) if !set.contains(index) => return Err(Refusal::NotNeeded),
        _ => {}
    }
    Ok(InPlace {
        op: index,
        input,
        output,
    })
}

/// The in-place forms.
#[derive(Clone, Copy)]
enum Form {
    Pointwise,
    Rows,
}

impl Form {
    fn check(
        self,
        op: &OperatorInfo<'_>,
        [x, filter, y]: [&crate::model::TensorInfo<'_>; 3],
    ) -> Result<(), Refusal> {
        let dims = |t: &crate::model::TensorInfo<'_>| {
            let mut d = [0i32; 4];
            if t.shape().len() != 4 {
                return None;
            }
            for (slot, v) in d.iter_mut().zip(t.shape()) {
                *slot = v;
            }
            Some(d)
        };
        let (Some(xd), Some(fd), Some(yd)) = (dims(x), dims(filter), dims(y)) else {
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
                if options.stride_h() != 1 || options.stride_w() != 1 {
                    return Err(Refusal::Shape {
                        what: "not stride 1",
                    });
                }
                if xd[1] != yd[1] || xd[2] != yd[2] {
                    return Err(Refusal::Shape {
                        what: "output not the input's height and width",
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
        }
    }
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
/// largest size over the chain's whole lifetime.
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
        if written_over(model, schedule, tensor.index).is_some() {
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
        extra.iter().for_each(&mut add);
        for (step, &sum) in (start..end).zip(sums.iter()) {
            f(step, sum);
        }
        start = end;
    }
}
