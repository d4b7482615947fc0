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
//! the rows the second one's next band of output rows reads, and the last
//! op of the chain computes the whole chain a band of rows at a time (the
//! ops before it do nothing at invoke). When an ADD of the chain's input and the second
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

mod choice;
mod fusion;

pub use choice::{InPlace, LEAN_LINKED, OpSet, Refusal, Schedule};
pub use fusion::{Fused, chain_of, fused, has_no_buffer};

use fusion::{dying_input, fused_last_read, fused_scratch_iter, nhwc};

use crate::liveness;
use crate::model::{Model, OpCode, OperatorInfo};
use crate::request::BufferRequest;
use crate::schema::{BuiltinOperator, TensorType};

/// The schedule an allocation of `model` under `schedule` runs: for
/// [`Schedule::Lean`], whichever of it, [`Schedule::Narrowing`] and TFLM's
/// has the lowest liveness bound over buffers aligned to `align` (the
/// fewer ops in place on a tie: each costs a copy), then only the fused
/// chains and the ops in place without which its bound would be higher;
/// others as they are.
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
    // A chain fused costs a kernel call of each convolution per band: kept
    // only if the bound is higher without it.
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
    // An ADD writes over whichever operand dies there; a convolution over
    // its input 0 (checked after its types, as ever).
    let input = match form {
        Form::Elementwise => {
            dying_input(model, &op, 0).or_else(|e| dying_input(model, &op, 1).map_err(|_| e))?
        }
        _ => op.inputs().next().flatten().ok_or(Refusal::NotPlanned)?,
    };
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
    dying_input(
        model,
        &op,
        op.inputs().position(|t| t == Some(input)).unwrap_or(0),
    )?;
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
