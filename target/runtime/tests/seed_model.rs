//! The seed example, planned by hand and checked buffer by buffer.

mod common;

use common::{assert_valid_plan, load, plan, seed_fc_model};
use hilt_runtime::allocation::{AllocOptions, TensorSlot, allocate};
use hilt_runtime::arena::Arena;
use hilt_runtime::liveness::{Lifetime, tensor_lifetime};
use hilt_runtime::planner::{Greedy, Linear, lower_bound};
use hilt_runtime::request::BufferRequest;

#[test]
fn lifetimes_follow_operator_order() {
    let bytes = seed_fc_model();
    let model = load(&bytes);
    let life = |t| tensor_lifetime(&model, t);
    // Input lives from step 0; constants (1, 2, 5, 6) are never planned.
    assert_eq!(
        life(0),
        Some(Lifetime {
            first_step: 0,
            last_step: 0
        })
    );
    assert_eq!(life(1), None);
    assert_eq!(life(2), None);
    assert_eq!(
        life(3),
        Some(Lifetime {
            first_step: 0,
            last_step: 1
        })
    );
    assert_eq!(
        life(4),
        Some(Lifetime {
            first_step: 1,
            last_step: 2
        })
    );
    assert_eq!(life(5), None);
    assert_eq!(
        life(7),
        Some(Lifetime {
            first_step: 2,
            last_step: 2
        })
    );
}

fn seed_requests() -> Vec<BufferRequest> {
    let bytes = seed_fc_model();
    let model = load(&bytes);
    let mut requests = vec![BufferRequest::tensor(0, 0, 0, 0); 8];
    let n = hilt_runtime::schedule::tensor_requests(&model, Default::default(), 16, &mut requests);
    requests.truncate(n);
    requests
}

#[test]
fn requests_are_tensors_in_index_order() {
    let requests = seed_requests();
    let summary: Vec<_> = requests
        .iter()
        .map(|r| (r.tensor_index().unwrap(), r.size, r.first_step, r.last_step))
        .collect();
    assert_eq!(
        summary,
        [(0, 16, 0, 0), (3, 32, 0, 1), (4, 32, 1, 2), (7, 8, 2, 2)]
    );
}

#[test]
fn greedy_plan_by_hand() {
    // Order: 32-byte buffers first, later request first on ties: t4, t3, then
    // the 16-byte ones t7, t0.
    // t4 [1,2] → 0. t3 [0,1] meets t4 → 32. t7 [2,2] meets t4 only → 32.
    // t0 [0,0] meets t3 only, and t3 starts at 32 ≥ 16 → 0.
    let requests = seed_requests();
    let (offsets, head) = plan(&Greedy, &requests);
    assert_eq!(offsets, [0, 32, 0, 32]);
    assert_eq!(head, 64);
    assert_eq!(lower_bound(&requests), 64); // step 1: t3 + t4
    assert_valid_plan(&requests, &offsets, head);
}

#[test]
fn linear_plan_by_hand() {
    let requests = seed_requests();
    let (offsets, head) = plan(&Linear, &requests);
    assert_eq!(offsets, [0, 16, 48, 80]);
    assert_eq!(head, 96);
}

#[test]
fn allocation_in_an_arena_records_every_tensor() {
    let bytes = seed_fc_model();
    let model = load(&bytes);
    #[repr(align(16))]
    struct Aligned([u8; 1024]);
    let mut memory = Aligned([0; 1024]);
    let mut arena = Arena::new(&mut memory.0);
    let mut seen = None;
    let allocation = allocate(
        &model,
        &Greedy,
        &mut arena,
        &AllocOptions::default(),
        &[],
        |plan| {
            seen = Some((
                plan.head,
                plan.tail,
                plan.temp,
                plan.lower_bound,
                plan.offsets.to_vec(),
            ));
        },
    )
    .unwrap();
    let (head, tail, temp, lower, offsets) = seen.unwrap();
    assert_eq!((head, lower), (64, 64));
    assert_eq!(offsets, [0, 32, 0, 32]);
    // Tail: 8 tensors × 8-byte slots. Temp: 4 requests × 32 B + (8 + 4) words.
    assert_eq!(tail, 64);
    assert_eq!(temp, 4 * 32 + 4 * (8 + 4));
    assert_eq!(allocation.used_bytes, temp + tail);
    assert_eq!(allocation.head.len, 64);
    let slots: &[TensorSlot] = bytemuck::cast_slice(arena.bytes(allocation.slots));
    let head_start = allocation.head.offset;
    assert_eq!(
        slots[0],
        TensorSlot {
            offset: head_start,
            bytes: 16
        }
    );
    assert_eq!(
        slots[3],
        TensorSlot {
            offset: head_start + 32,
            bytes: 32
        }
    );
    assert_eq!(
        slots[4],
        TensorSlot {
            offset: head_start,
            bytes: 32
        }
    );
    assert_eq!(
        slots[7],
        TensorSlot {
            offset: head_start + 32,
            bytes: 8
        }
    );
    // Constants stay in the model bytes: the slot records where.
    let w1 = slots[1].model_offset().expect("constant in the model");
    let model_w1 = model.tensor(1).unwrap().constant.unwrap();
    assert_eq!(&bytes[w1 as usize..w1 as usize + 128], model_w1);
}
