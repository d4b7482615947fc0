//! The load-and-plan checks, shared by the fuzz target
//! (`fuzz_targets/load_and_plan.rs`) and the replay of the committed seeds
//! (`tests/fuzz_seeds.rs`), so that a seed is held to exactly what the
//! fuzzer holds an input to: untrusted model bytes through the whole
//! set-up path — verify, read every accessor, then plan with every planner
//! into a bounded arena and check the plan invariants in the allocator's
//! report callback.

use hilt_runtime::allocation::{
    AllocError, AllocOptions, ArenaPlan, TensorSlot, allocate, tail_need,
};
use hilt_runtime::arena::Arena;
use hilt_runtime::liveness;
use hilt_runtime::model::{Model, element_size};
use hilt_runtime::planner::{
    Greedy, Linear, MemoryPlanner, OFFLINE_PLAN_METADATA, Offline, find_conflict,
};
use hilt_runtime::request::{BufferRequest, MAX_ALIGN};
use hilt_runtime::schema::TensorType;
use std::cell::RefCell;

/// Arena size: big enough for the small models the fuzzer makes, small
/// enough that `ArenaTooSmall` is common too.
const ARENA_BYTES: usize = 1 << 20;
/// Above these counts the input is only loaded and read, not planned.
const MAX_TENSORS: u32 = 4096;
const MAX_OPERATORS: u32 = 4096;
/// Liveness costs O(tensors × operator inputs/outputs) per pass and the
/// allocator's `ArenaTooSmall` lower bound one pass per step, so bound both.
const MAX_LIVENESS_WORK: u64 = 1 << 24;
const MAX_LOWER_BOUND_WORK: u64 = 1 << 27;

/// Every check on one input: panics on any broken invariant.
pub(crate) fn check(data: &[u8]) {
    let model = match Model::from_bytes(data) {
        Ok(model) => model,
        Err(e) => {
            // Display must not panic on any error.
            let _ = format!("{e}");
            return;
        }
    };
    assert_eq!(model.bytes().len(), data.len());
    read_accessors(&model);
    if !worth_planning(&model) {
        return;
    }

    MEMORY.with_borrow_mut(|memory| {
        // The arena starts ARENA_SKEW bytes past a 1 MiB boundary, so where
        // the head starts (and any padding) is the same on every run.
        let skip = memory.as_ptr().align_offset(MAX_ALIGN as usize) + ARENA_SKEW;
        plan_all(data.len(), &model, &mut memory[skip..skip + ARENA_BYTES]);
    });
}

/// Where the arena starts past a 1 MiB boundary: 16-aligned, not 32-aligned.
const ARENA_SKEW: usize = 48;

thread_local! {
    /// The arena bytes, allocated once (planning writes before it reads).
    static MEMORY: RefCell<Vec<u8>> =
        RefCell::new(vec![0u8; ARENA_BYTES + MAX_ALIGN as usize + ARENA_SKEW]);
}

/// Every planner, at the default alignment and at a second one with a scratch buffer.
fn plan_all(len: usize, model: &Model<'_>, memory: &mut [u8]) {
    // A second tensor alignment (1..=128) and one scratch buffer (alignment
    // 1..=1 MiB), chosen by the input length so the fuzzer can reach them.
    let alt_align = 1u32 << (len % 8);
    let scratch_align = 1u32 << (len % 21);
    let scratch = [BufferRequest::scratch(0, 0, 1 + (len % 251) as u32).with_align(scratch_align)];
    for (align, scratch) in [(16, &[][..]), (alt_align, &scratch[..])] {
        let options = AllocOptions {
            align,
            ..AllocOptions::DEFAULT
        };
        let l = run(model, &Linear, memory, &options, scratch);
        let g = run(model, &Greedy, memory, &options, scratch);
        if let (Some(l), Some(g)) = (l, g) {
            assert!(g <= l, "greedy head {g} > linear head {l} (align {align})");
        }
        match Offline::from_model(model) {
            Ok(offline) => {
                run(model, &offline, memory, &options, scratch);
                let limited = offline.with_limit(ARENA_BYTES as u32);
                run(model, &limited, memory, &options, scratch);
            }
            Err(e) => {
                let _ = format!("{e}");
            }
        }
    }
}

/// Reads every accessor and checks what `from_bytes` promises about it.
fn read_accessors(model: &Model<'_>) {
    let _ = format!("{model:?}");
    let n_tensors = model.tensor_count();
    let n_ops = model.operator_count();
    assert!(model.subgraph_count() >= 1);
    assert!(u64::from(model.total_tensor_count()) >= u64::from(n_tensors));
    let _ = model.version();

    let mut seen = 0u32;
    for t in model.tensors() {
        assert_eq!(t.index, seen, "tensors() skipped a tensor");
        seen += 1;
        let _ = t.name.len();
        let shape: Vec<i32> = t.shape().collect();
        assert_eq!(shape.len(), t.shape().len());
        let elements = shape.iter().try_fold(1u64, |acc, &d| {
            assert!(d >= 0, "tensor {}: negative dimension {d}", t.index);
            acc.checked_mul(d as u64)
        });
        let elem = element_size(t.dtype).expect("verified tensor of an unsized type");
        let expected = elements.and_then(|e| e.checked_mul(u64::from(elem)));
        assert_eq!(
            expected,
            Some(u64::from(t.bytes)),
            "tensor {}: byte size",
            t.index
        );
        if let Some(c) = t.constant {
            let len = c.len() as u64;
            let packed = t.dtype == TensorType::INT4 && len == u64::from(t.bytes).div_ceil(2);
            assert!(
                len == u64::from(t.bytes) || packed,
                "tensor {}: constant size",
                t.index
            );
        }
        let _ = format!("{:?}", t.raw().quantization().map(|q| q.scale()));
        let _ = liveness::is_planned(model, t.index);
    }
    assert_eq!(seen, n_tensors, "tensors() count");
    assert!(model.tensor(n_tensors).is_none());

    let mut seen = 0u32;
    for op in model.operators() {
        assert_eq!(op.index, seen, "operators() skipped an operator");
        seen += 1;
        let name = format!("{}", op.code);
        assert!(!name.is_empty());
        let _ = op.version;
        for i in op.inputs().flatten() {
            assert!(
                i < n_tensors,
                "operator {}: input {i} out of range",
                op.index
            );
        }
        for o in op.outputs() {
            let o = o.expect("outputs are never omitted");
            assert!(
                o < n_tensors,
                "operator {}: output {o} out of range",
                op.index
            );
        }
        let _ = op.raw().builtin_options_type();
    }
    assert_eq!(seen, n_ops, "operators() count");
    assert!(model.operator(n_ops).is_none());

    for i in model.inputs().chain(model.outputs()) {
        assert!(i < n_tensors, "subgraph input/output {i} out of range");
    }
    if let Some(plan) = model.metadata(OFFLINE_PLAN_METADATA) {
        let _ = plan.len();
    }
    let _ = model.metadata("min_runtime_version");
}

/// Skips inputs whose planning cost is out of proportion to their size.
fn worth_planning(model: &Model<'_>) -> bool {
    let (tensors, ops) = (model.tensor_count(), model.operator_count());
    if tensors > MAX_TENSORS || ops > MAX_OPERATORS {
        return false;
    }
    let io: u64 = model
        .operators()
        .map(|op| (op.inputs().len() + op.outputs().len()) as u64)
        .sum::<u64>()
        + model.inputs().len() as u64
        + model.outputs().len() as u64;
    let pass = u64::from(tensors) * (io + 1);
    pass <= MAX_LIVENESS_WORK && pass * u64::from(ops.max(1)) <= MAX_LOWER_BOUND_WORK
}

/// What the report callback saw.
struct Seen {
    requests: Vec<BufferRequest>,
    offsets: Vec<u32>,
    head: u32,
    head_start: u32,
}

/// Allocates with `planner`, checks the plan and the committed result;
/// returns the head size when planning succeeded.
fn run(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    memory: &mut [u8],
    options: &AllocOptions,
    scratch: &[BufferRequest],
) -> Option<u32> {
    let capacity = memory.len();
    let end_addr = memory.as_ptr() as usize + capacity;
    let mut arena = Arena::new(memory);
    let mut seen = None;
    let result = allocate(model, planner, &mut arena, options, scratch, |plan| {
        check_plan(plan);
        seen = Some(Seen {
            requests: plan.requests.to_vec(),
            offsets: plan.offsets.to_vec(),
            head: plan.head,
            head_start: plan.head_start,
        });
    });
    match result {
        Ok(allocation) => {
            let seen = seen.expect("allocate succeeded without reporting a plan");
            assert_eq!(allocation.head.len, seen.head);
            assert_eq!(allocation.head.offset, seen.head_start);
            assert_eq!(allocation.used_bytes as usize, arena.used_bytes());
            assert!(arena.used_bytes() <= capacity);
            assert!(
                u64::from(allocation.head.end()) + u64::from(allocation.tail_bytes)
                    <= allocation.used_bytes as u64
            );
            assert_eq!(allocation.tail_bytes as usize, arena.tail_bytes());
            if end_addr.is_multiple_of(options.align as usize) {
                // Plus the scratch buffers' 8-byte location records, 4-aligned.
                let need =
                    tail_need(model, options.align).next_multiple_of(4) + 8 * scratch.len() as u32;
                assert!(
                    allocation.tail_bytes <= need,
                    "tail {} > tail_need {need}",
                    allocation.tail_bytes
                );
            }
            check_slots(model, &arena, &allocation, &seen, capacity);
            Some(seen.head)
        }
        Err(AllocError::ArenaTooSmall(needs)) => {
            let _ = format!("{}", AllocError::ArenaTooSmall(needs));
            assert_eq!(needs.available as usize, capacity);
            if needs.head_exact {
                match &seen {
                    // The plan fitted the head; the tail or set-up did not.
                    Some(s) => assert_eq!(needs.head, s.head, "exact head but another plan"),
                    // The plan is reported only once it fits: its head,
                    // from where it must start (guard and alignment), is
                    // then too large for the arena with the tail — a
                    // wrapped figure would be small enough to fit.
                    None => assert!(
                        needs.head_start as usize + needs.head as usize + needs.tail as usize
                            > capacity,
                        "exact head {} from byte {} + tail {} fits the {capacity}-byte arena, but no plan",
                        needs.head,
                        needs.head_start,
                        needs.tail
                    ),
                }
            }
            seen.map(|s| s.head)
        }
        Err(AllocError::PlanRejected(failure)) => {
            panic!(
                "{}: allocate rejected the planner's own plan: {failure}",
                planner.name()
            )
        }
        Err(e) => {
            // Planner refusals (size overflow, bad offline plan): no plan reported.
            let _ = format!("{e}");
            assert!(
                seen.is_none(),
                "plan reported but allocation failed with {e:?}"
            );
            None
        }
    }
}

/// The invariants every plan must meet.
fn check_plan(plan: &ArenaPlan<'_>) {
    let name = plan.planner;
    assert_eq!(plan.requests.len(), plan.offsets.len(), "{name}");
    assert_eq!(
        find_conflict(plan.requests, plan.offsets),
        None,
        "{name}: two live buffers share bytes"
    );
    for (i, (r, &offset)) in plan.requests.iter().zip(plan.offsets).enumerate() {
        assert!(
            r.align.is_power_of_two(),
            "{name}: request {i} align {}",
            r.align
        );
        assert!(
            offset.is_multiple_of(r.align),
            "{name}: request {i} offset {offset} not a multiple of {}",
            r.align
        );
        let padded = r
            .padded_size()
            .expect("planned request without a padded size");
        assert!(padded >= r.size);
        assert!(
            u64::from(offset) + u64::from(padded) <= u64::from(plan.head),
            "{name}: request {i} ends past the head {}",
            plan.head
        );
        assert!(r.first_step <= r.last_step, "{name}: request {i} inverted");
    }
    assert!(
        plan.head >= plan.lower_bound,
        "{name}: head {} below the lower bound {}",
        plan.head,
        plan.lower_bound
    );
}

/// The tensor slots the allocator committed agree with the plan.
fn check_slots(
    model: &Model<'_>,
    arena: &Arena<'_>,
    allocation: &hilt_runtime::allocation::Allocation,
    seen: &Seen,
    capacity: usize,
) {
    let bytes = arena.bytes(allocation.slots);
    assert_eq!(
        bytes.len(),
        model.tensor_count() as usize * size_of::<TensorSlot>()
    );
    let slot = |t: u32| -> TensorSlot {
        let at = t as usize * size_of::<TensorSlot>();
        read_slot(&bytes[at..at + size_of::<TensorSlot>()])
    };
    let mut planned = vec![false; model.tensor_count() as usize];
    for (r, &offset) in seen.requests.iter().zip(&seen.offsets) {
        let Some(t) = r.tensor_index() else { continue };
        assert!(
            liveness::is_planned(model, t),
            "tensor {t} requested but not plannable"
        );
        assert!(!planned[t as usize], "tensor {t} requested twice");
        planned[t as usize] = true;
        let s = slot(t);
        assert_eq!(
            u64::from(s.offset),
            u64::from(seen.head_start) + u64::from(offset),
            "tensor {t}: slot offset"
        );
        assert!(u64::from(s.offset) + u64::from(s.bytes) <= u64::from(allocation.head.end()));
    }
    let n_scratch = seen
        .requests
        .iter()
        .filter(|r| r.tensor_index().is_none())
        .count();
    let scratch_bytes = arena.bytes(allocation.scratch);
    assert_eq!(scratch_bytes.len(), n_scratch * size_of::<TensorSlot>());
    let scratch_plan = seen
        .requests
        .iter()
        .zip(&seen.offsets)
        .filter(|(r, _)| r.tensor_index().is_none());
    for (k, (r, &offset)) in scratch_plan.enumerate() {
        let at = k * size_of::<TensorSlot>();
        let s = read_slot(&scratch_bytes[at..at + size_of::<TensorSlot>()]);
        assert_eq!(s.bytes, r.size, "scratch {k}: slot bytes");
        assert_eq!(
            u64::from(s.offset),
            u64::from(seen.head_start) + u64::from(offset),
            "scratch {k}: slot offset"
        );
        assert!(u64::from(s.offset) + u64::from(s.bytes) <= u64::from(allocation.head.end()));
    }
    let tail_start = capacity - allocation.tail_bytes as usize;
    for t in model.tensors() {
        let s = slot(t.index);
        assert_eq!(s.bytes, t.bytes, "tensor {}: slot bytes", t.index);
        if t.is_variable && t.constant.is_none() {
            let start = s.offset as usize;
            assert!(start >= tail_start && start + t.bytes as usize <= capacity);
        } else if let Some(data) = t.constant {
            // Constants: not in the arena, or (newer runtimes) bit 31 set and
            // the data's offset in the model bytes in the other bits.
            if s.offset != TensorSlot::NOT_IN_ARENA {
                let at = data.as_ptr() as usize - model.bytes().as_ptr() as usize;
                assert_eq!(
                    s.offset,
                    IN_MODEL_BIT | at as u32,
                    "tensor {}: constant's slot",
                    t.index
                );
            }
        } else if !planned[t.index as usize] {
            assert_eq!(
                s.offset,
                TensorSlot::NOT_IN_ARENA,
                "tensor {}: not in arena",
                t.index
            );
        }
    }
}

/// `TensorSlot::offset` bit that marks a constant's offset in the model bytes.
const IN_MODEL_BIT: u32 = 1 << 31;

fn read_slot(b: &[u8]) -> TensorSlot {
    TensorSlot {
        offset: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        bytes: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
    }
}
