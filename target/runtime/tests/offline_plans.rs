//! Offline plans: a valid plan is honoured; every kind of bad plan is refused
//! with its own error, never trusted.

mod common;

use common::{load, plan};
use hilt_runtime::allocation::{AllocError, AllocOptions, allocate};
use hilt_runtime::arena::Arena;
use hilt_runtime::planner::{
    MemoryPlanner, OFFLINE_PLAN_METADATA, Offline, OfflinePlanError, PlanError,
};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

/// in → a → b → out, each 64 bytes (16 floats); lifetimes in [0,0], a [0,1],
/// b [1,2], out [2,2].
fn chain(plan_words: Option<&[i32]>, raw_metadata: Option<&[u8]>) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let t: Vec<_> = ["in", "a", "b"]
        .iter()
        .map(|n| w.tensor(n, TensorType::FLOAT32, &[16]))
        .collect();
    let out = w.output("out", TensorType::FLOAT32, &[16]);
    w.mark_input(t[0]);
    w.op(BuiltinOperator::RELU, &[Some(t[0])], &[t[1]], Options::None);
    w.op(BuiltinOperator::RELU, &[Some(t[1])], &[t[2]], Options::None);
    w.op(BuiltinOperator::RELU, &[Some(t[2])], &[out], Options::None);
    if let Some(words) = plan_words {
        w.offline_plan(words);
    }
    if let Some(raw) = raw_metadata {
        w.metadata(OFFLINE_PLAN_METADATA, raw);
    }
    w.finish()
}

fn offline_result(bytes: &[u8]) -> Result<Vec<u32>, PlanError> {
    let model = load(bytes);
    let planner = Offline::from_model(&model).map_err(PlanError::Offline)?;
    let mut memory = vec![0u8; 4096];
    let mut arena = Arena::new(&mut memory);
    let mut offsets = Vec::new();
    match allocate(
        &model,
        &planner,
        &mut arena,
        &AllocOptions::default(),
        &[],
        |p| offsets = p.offsets.to_vec(),
    ) {
        Ok(_) => Ok(offsets),
        Err(AllocError::Plan(e)) => Err(e),
        Err(other) => panic!("unexpected {other:?}"),
    }
}

#[test]
fn valid_plan_is_honoured_exactly() {
    // A deliberately unusual but legal plan: everything at distinct places.
    let bytes = chain(Some(&[192, 0, 64, 128]), None);
    assert_eq!(offline_result(&bytes).unwrap(), [192, 0, 64, 128]);
}

#[test]
fn open_entries_are_planned_around_fixed_ones() {
    // `a` fixed at 0; `b` (live with a at step 1) must go elsewhere.
    let bytes = chain(Some(&[-1, 0, -1, -1]), None);
    let offsets = offline_result(&bytes).unwrap();
    assert_eq!(offsets[1], 0);
    assert_ne!(offsets[2], 0);
}

#[test]
fn missing_plan_is_not_found() {
    let bytes = chain(None, None);
    assert_eq!(
        Offline::from_model(&load(&bytes)).unwrap_err(),
        OfflinePlanError::NotFound
    );
}

#[test]
fn truncated_plan_is_refused() {
    let words: Vec<u8> = [1i32, 1, 4, 0, 64]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let bytes = chain(None, Some(&words));
    assert_eq!(
        Offline::from_model(&load(&bytes)).unwrap_err(),
        OfflinePlanError::Truncated {
            bytes: 20,
            needed: 28
        }
    );
    let bytes = chain(None, Some(&[1, 0, 0]));
    assert!(matches!(
        Offline::from_model(&load(&bytes)).unwrap_err(),
        OfflinePlanError::Truncated { .. }
    ));
}

#[test]
fn wrong_version_and_count_are_refused() {
    let words: Vec<u8> = [2i32, 1, 4, 0, 0, 0, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let bytes = chain(None, Some(&words));
    assert_eq!(
        Offline::from_model(&load(&bytes)).unwrap_err(),
        OfflinePlanError::UnsupportedVersion { version: 2 }
    );
    let bytes = chain(Some(&[0, 0, 0]), None);
    assert_eq!(
        Offline::from_model(&load(&bytes)).unwrap_err(),
        OfflinePlanError::TensorCountMismatch { plan: 3, model: 4 }
    );
}

#[test]
fn out_of_bounds_plan_is_refused() {
    let bytes = chain(Some(&[0, 64, 128, i32::MAX - 63]), None);
    assert!(matches!(
        offline_result(&bytes).unwrap_err(),
        PlanError::Offline(OfflinePlanError::OutOfBounds { tensor: 3, .. })
    ));
    // And against an explicit limit: the head the arena can offer.
    let model_bytes = chain(Some(&[0, 64, 128, 192]), None);
    let model = load(&model_bytes);
    let planner = Offline::from_model(&model).unwrap().with_limit(200);
    let requests: Vec<BufferRequest> = (0..4)
        .map(|t| BufferRequest::tensor(t, 64, t, t + 1))
        .collect();
    let mut ws = vec![0; planner.workspace_words(4)];
    let mut offsets = [0; 4];
    assert_eq!(
        planner.plan(&requests, &mut ws, &mut offsets).unwrap_err(),
        PlanError::Offline(OfflinePlanError::OutOfBounds {
            tensor: 3,
            offset: 192,
            end: 256,
            limit: 200
        })
    );
}

#[test]
fn misaligned_plan_is_refused() {
    let bytes = chain(Some(&[0, 72, 0, 72]), None);
    assert_eq!(
        offline_result(&bytes).unwrap_err(),
        PlanError::Offline(OfflinePlanError::Misaligned {
            tensor: 1,
            offset: 72,
            align: 16
        })
    );
}

#[test]
fn negative_offset_is_refused() {
    let bytes = chain(Some(&[0, -16, 0, 64]), None);
    assert_eq!(
        offline_result(&bytes).unwrap_err(),
        PlanError::Offline(OfflinePlanError::NegativeOffset {
            tensor: 1,
            offset: -16
        })
    );
}

#[test]
fn overlapping_live_buffers_are_refused() {
    // `a` [0,1] and `b` [1,2] are both live at step 1 and would share 32..64.
    let bytes = chain(Some(&[128, 0, 32, 192]), None);
    assert_eq!(
        offline_result(&bytes).unwrap_err(),
        PlanError::Offline(OfflinePlanError::Overlap {
            first: 1,
            second: 2
        })
    );
    // Sharing bytes is fine when lifetimes do not meet: in [0,0] and b [1,2].
    let bytes = chain(Some(&[64, 0, 64, 0]), None);
    assert_eq!(offline_result(&bytes).unwrap(), [64, 0, 64, 0]);
}

#[test]
fn offline_never_beats_its_own_fixed_offsets() {
    // The planner entry point, without a model, gives the same as allocate.
    let bytes = chain(Some(&[192, 0, 64, 128]), None);
    let model = load(&bytes);
    let planner = Offline::from_model(&model).unwrap();
    let requests: Vec<BufferRequest> = (0..4).map(|t| BufferRequest::tensor(t, 64, t, t)).collect();
    let (offsets, head) = plan(&planner, &requests);
    assert_eq!(
        (offsets.as_slice(), head),
        ([192, 0, 64, 128].as_slice(), 256)
    );
}
