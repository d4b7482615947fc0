//! Memory pools through the interpreter: every buffer lands in a pool that
//! reaches it, outputs do not change, and a pool that is short is named.

use hilt_runtime::accel::vnpu::{Immediate, SteppedVnpu, VnpuConfig};
use hilt_runtime::accel::{DEFAULT_OFFLOAD, Offload, OpSet};
use hilt_runtime::allocation::{AllocError, AllocOptions};
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, verify_plan};
use hilt_runtime::pool::{POOLS_LINKED, Pool, PoolError, PoolLayout, Reach};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::writer::examples;

const ARENA: usize = 64 * 1024;
const BOTH: Reach = Reach::CPU.with(Reach::ACCEL);

#[repr(align(64))]
struct Memory([u8; ARENA]);

/// One planned buffer: its request, its offset from the arena's start.
struct Placed {
    request: BufferRequest,
    at: u32,
}

struct Run {
    output: Vec<u8>,
    placed: Vec<Placed>,
    head: u32,
}

fn run(
    bytes: &[u8],
    pools: PoolLayout,
    offload: Option<Offload<'_>>,
) -> Result<Run, InterpreterError> {
    let model = Model::from_bytes(bytes).unwrap();
    let resolver = all_builtins();
    let mut memory = Box::new(Memory([0; ARENA]));
    let mut interpreter = Interpreter::new(model, &resolver, &mut memory.0);
    interpreter.set_offload(offload);
    let options = AllocOptions {
        pools,
        ..AllocOptions::DEFAULT
    };
    let mut placed = Vec::new();
    let mut head = 0;
    interpreter.allocate_with_report(&Greedy, &options, |plan| {
        verify_plan(plan.requests, plan.offsets, plan.head).unwrap();
        head = plan.head;
        for (request, &offset) in plan.requests.iter().zip(plan.offsets) {
            placed.push(Placed {
                request: *request,
                at: plan.head_start + offset,
            });
        }
    })?;
    let input = interpreter.input_mut(0)?;
    for (i, b) in input.iter_mut().enumerate() {
        *b = (i * 37 + 11) as u8;
    }
    interpreter.invoke()?;
    Ok(Run {
        output: interpreter.output(0)?.to_vec(),
        placed,
        head,
    })
}

/// The pool holding each buffer, checked to hold all of it.
fn pools_of(layout: &PoolLayout, placed: &[Placed]) -> Vec<usize> {
    placed
        .iter()
        .map(|p| {
            let first = layout.pool_at(p.at).unwrap();
            let last = layout
                .pool_at(p.at + p.request.padded_size().unwrap() - 1)
                .unwrap();
            assert_eq!(first, last, "a buffer straddles two pools");
            assert!(layout.pools()[first].reach.covers(p.request.reach()));
            first
        })
        .collect()
}

#[test]
fn a_split_arena_changes_where_buffers_go_not_what_they_compute() {
    let model = examples::tiny_convnet_int8();
    let whole = run(&model, PoolLayout::WHOLE, None).unwrap();
    // A fast pool that holds one 2 KiB activation, then the rest.
    let layout = PoolLayout::new(&[
        Pool::new(2 * 1024 + 256, Reach::CPU),
        Pool::new((ARENA - 2 * 1024 - 256) as u32, BOTH),
    ])
    .unwrap();
    let split = run(&model, layout, None).unwrap();
    assert_eq!(split.output, whole.output);
    let pools = pools_of(&layout, &split.placed);
    assert!(pools.contains(&0) && pools.contains(&1), "{pools:?}");
    // The second pool's head starts at its own start.
    assert!(split.head > whole.head);
}

/// An arena split into pools, handed to a build with the `no-pools`
/// feature, is refused at allocate by name; the default build plans it,
/// and the whole arena runs in both. CI runs this test in both builds.
#[test]
fn a_no_pools_build_refuses_a_split_arena_by_name() {
    let model = examples::tiny_convnet_int8();
    let layout = PoolLayout::new(&[
        Pool::new(4 * 1024, Reach::CPU),
        Pool::new((ARENA - 4 * 1024) as u32, BOTH),
    ])
    .unwrap();
    let whole = run(&model, PoolLayout::WHOLE, None).unwrap();
    let split = run(&model, layout, None);
    if POOLS_LINKED {
        assert_eq!(split.unwrap().output, whole.output);
    } else {
        assert_eq!(
            split.err(),
            Some(InterpreterError::Alloc(AllocError::Pool(
                PoolError::NotLinked
            )))
        );
    }
}

#[test]
fn an_engines_buffers_go_only_where_it_reaches() {
    let model = examples::branches_int8();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let offload = || Offload {
        accelerator: &engine,
        cache: &engine,
        ops: OpSet::from_kinds(DEFAULT_OFFLOAD),
        timeout: 1_000,
    };
    let cpu = run(&model, PoolLayout::WHOLE, None).unwrap();
    // A CPU-only first pool big enough for everything: only the engine's
    // buffers are kept out of it.
    let layout =
        PoolLayout::new(&[Pool::new(32 * 1024, Reach::CPU), Pool::new(32 * 1024, BOTH)]).unwrap();
    let npu = run(&model, layout, Some(offload())).unwrap();
    assert_eq!(npu.output, cpu.output);
    let pools = pools_of(&layout, &npu.placed);
    let mut engines = 0;
    for (p, pool) in npu.placed.iter().zip(&pools) {
        if p.request.reach().covers(Reach::ACCEL) {
            engines += 1;
            assert_eq!(*pool, 1);
        } else {
            assert_eq!(*pool, 0);
        }
    }
    assert!(engines > 0, "vnpu claimed nothing");
}

#[test]
fn a_pool_too_small_is_named_with_its_shortfall() {
    let model = examples::tiny_convnet_int8();
    // Nothing can leave the only planned pool, which holds 1 KiB.
    let layout = PoolLayout::new(&[
        Pool::new(1024, Reach::CPU),
        Pool::new((ARENA - 1024) as u32, BOTH).planned(false),
    ])
    .unwrap();
    let e = run(&model, layout, None).err().unwrap();
    let InterpreterError::Alloc(AllocError::Pool(PoolError::Short {
        pool,
        needs,
        capacity,
    })) = e
    else {
        panic!("{e:?}");
    };
    assert_eq!(pool, 0);
    assert!(needs > capacity && capacity <= 1024, "{needs} {capacity}");
    // And an arena that is not the pools' size is refused before planning.
    let wrong = PoolLayout::new(&[Pool::new(1024, Reach::CPU)]).unwrap();
    let e = run(&model, wrong, None).err().unwrap();
    assert!(
        matches!(
            e,
            InterpreterError::Alloc(AllocError::Pool(PoolError::SizeMismatch { pools: 1024, arena })) if arena as usize == ARENA
        ),
        "{e:?}"
    );
}
