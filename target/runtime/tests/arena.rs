//! The arena: any start alignment, too-small errors that state the needs,
//! and a true high-water mark.

mod common;

use common::{load, seed_fc_model};
use hilt_runtime::allocation::{AllocError, AllocOptions, ArenaNeeds, allocate, tail_need};
use hilt_runtime::arena::{Arena, ArenaError, Section};
use hilt_runtime::planner::{Greedy, Linear};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

#[test]
fn any_start_alignment_gives_aligned_buffers() {
    let bytes = seed_fc_model();
    let model = load(&bytes);
    let mut backing = vec![0u8; 2048 + 64];
    for skew in 0..32 {
        let mut arena = Arena::new(&mut backing[skew..skew + 2048]);
        let base = arena
            .bytes(hilt_runtime::arena::Region { offset: 0, len: 0 })
            .as_ptr() as usize;
        let allocation = allocate(
            &model,
            &Greedy,
            &mut arena,
            &AllocOptions::default(),
            &[],
            |_| {},
        )
        .unwrap();
        assert_eq!(
            (base + allocation.head.offset as usize) % 16,
            0,
            "skew {skew}"
        );
        let slots: &[hilt_runtime::allocation::TensorSlot] =
            bytemuck::cast_slice(arena.bytes(allocation.slots));
        for slot in slots
            .iter()
            .filter(|s| s.offset != u32::MAX && s.model_offset().is_none())
        {
            assert_eq!((base + slot.offset as usize) % 16, 0);
        }
        assert!(allocation.used_bytes as usize <= 2048);
    }
}

#[test]
fn one_byte_too_small_states_every_section() {
    let bytes = seed_fc_model();
    let model = load(&bytes);
    #[repr(align(16))]
    struct Aligned([u8; 4096]);
    let mut memory = Aligned([0; 4096]);
    let used = {
        let mut arena = Arena::new(&mut memory.0);
        allocate(
            &model,
            &Greedy,
            &mut arena,
            &AllocOptions::default(),
            &[],
            |_| {},
        )
        .unwrap()
        .used_bytes as usize
    };
    // Exactly `used` bytes suffice ...
    let mut arena = Arena::new(&mut memory.0[..used]);
    assert!(
        allocate(
            &model,
            &Greedy,
            &mut arena,
            &AllocOptions::default(),
            &[],
            |_| {}
        )
        .is_ok()
    );
    // ... and one byte fewer is refused with the needs spelled out.
    let mut arena = Arena::new(&mut memory.0[..used - 1]);
    let err = allocate(
        &model,
        &Greedy,
        &mut arena,
        &AllocOptions::default(),
        &[],
        |_| {},
    )
    .unwrap_err();
    let AllocError::ArenaTooSmall(needs) = err else {
        panic!("{err:?}")
    };
    assert_eq!(needs.available as usize, used - 1);
    assert!(needs.tail >= tail_need(&model, 16));
    // What the error states is enough (up to alignment padding at the ends).
    let enough = (needs.head.max(needs.temp) + needs.tail) as usize + 8;
    let mut arena = Arena::new(&mut memory.0[..enough]);
    assert!(
        allocate(
            &model,
            &Greedy,
            &mut arena,
            &AllocOptions::default(),
            &[],
            |_| {}
        )
        .is_ok()
    );
    assert!(err.to_string().starts_with("arena too small"));
}

#[test]
fn head_that_does_not_fit_is_reported_exactly() {
    // A model whose head is much larger than its temp memory.
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[1024]);
    let y = w.output("y", TensorType::FLOAT32, &[1024]);
    w.op(BuiltinOperator::RELU, &[Some(x)], &[y], Options::None);
    let bytes = w.finish();
    let model = load(&bytes);
    let mut memory = vec![0u8; 4096];
    let mut arena = Arena::new(&mut memory);
    let err = allocate(
        &model,
        &Greedy,
        &mut arena,
        &AllocOptions::default(),
        &[],
        |_| {},
    )
    .unwrap_err();
    assert_eq!(
        err,
        AllocError::ArenaTooSmall(ArenaNeeds {
            available: 4096,
            head: 8192,
            head_exact: true,
            head_start: 0,
            temp: 88,
            tail: 16,
            peak_step: 0,
        })
    );
    assert_eq!(
        err.to_string(),
        "arena too small: 4096 bytes given, 4112 short; needs head 8192 + tail 16 (and 88 of set-up memory before the head is committed); the most bytes are live at op 0"
    );
    // Too small even for planning: the head is stated as its lower bound.
    let mut tiny = vec![0u8; 40];
    let mut arena = Arena::new(&mut tiny);
    let err = allocate(
        &model,
        &Linear,
        &mut arena,
        &AllocOptions::default(),
        &[],
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(
        err,
        AllocError::ArenaTooSmall(ArenaNeeds {
            head: 8192,
            head_exact: false,
            ..
        })
    ));
}

#[test]
fn scratch_and_variables_are_accounted() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[100]);
    let state = w.variable("state", TensorType::INT16, &[50]);
    let y = w.output("y", TensorType::INT8, &[100]);
    w.op(
        BuiltinOperator::SVDF,
        &[Some(x), Some(state)],
        &[y],
        Options::None,
    );
    let bytes = w.finish();
    let model = load(&bytes);
    let mut memory = vec![0u8; 8192];
    let mut arena = Arena::new(&mut memory);
    let scratch = [BufferRequest::scratch(0, 0, 300).with_align(64)];
    let mut head = 0;
    let mut scratch_offset = 0;
    let allocation = allocate(
        &model,
        &Greedy,
        &mut arena,
        &AllocOptions::default(),
        &scratch,
        |plan| {
            head = plan.head;
            scratch_offset = plan.offsets[plan.requests.len() - 1];
        },
    )
    .unwrap();
    // x, y, scratch all live at step 0: 320 (scratch, 64-aligned class first) + 112 + 112.
    assert_eq!(head, 320 + 112 + 112);
    assert_eq!(scratch_offset, 0);
    // The variable's 100 bytes sit in the tail, not the head.
    assert!(allocation.tail_bytes >= 100 + 3 * 8);
    assert_eq!(allocation.used_bytes as usize, arena.used_bytes());
}

#[test]
fn raw_arena_sections_and_errors() {
    let mut memory = [0u8; 128];
    let mut arena = Arena::new(&mut memory);
    assert_eq!(
        arena.alloc_persistent(8, 3),
        Err(ArenaError::InvalidAlignment { align: 3 })
    );
    let _tail = arena.alloc_persistent(64, 1).unwrap();
    let _temp = arena.alloc_temp(32, 1).unwrap();
    assert_eq!(arena.commit_head(10, 1), Err(ArenaError::TempInUse));
    assert!(matches!(
        arena.alloc_temp(64, 1),
        Err(ArenaError::OutOfMemory {
            section: Section::Temp,
            requested: 64,
            free: 32
        })
    ));
    arena.reset_temp();
    assert!(matches!(
        arena.commit_head(65, 1),
        Err(ArenaError::OutOfMemory {
            section: Section::Head,
            ..
        })
    ));
    arena.commit_head(64, 1).unwrap();
    assert_eq!(arena.used_bytes(), 128);
}
