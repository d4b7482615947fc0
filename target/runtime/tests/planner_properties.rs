//! Properties every planner's plan must have, on random request sets.

mod common;

use common::assert_valid_plan;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Optimal, lower_bound};
use hilt_runtime::request::BufferRequest;
use proptest::prelude::*;

fn request(index: u32) -> impl Strategy<Value = BufferRequest> {
    (
        0u32..20_000,
        prop_oneof![8 => Just(16u32), 4 => (0u32..8).prop_map(|s| 1 << s), 1 => (8u32..=20).prop_map(|s| 1 << s)],
        0u32..24,
        0u32..8,
        prop::option::weighted(0.2, 0u32..6),
        any::<bool>(),
    )
        .prop_map(move |(size, align, first, len, hold, scratch)| {
            let r = if scratch {
                BufferRequest::scratch(first, index, size)
            } else {
                BufferRequest::tensor(index, size, first, first + len)
            };
            let r = r.with_align(align);
            match hold {
                Some(extra) => r.held_until(r.last_step + extra),
                None => r,
            }
        })
}

fn requests() -> impl Strategy<Value = Vec<BufferRequest>> {
    (0usize..48).prop_flat_map(|n| (0..n as u32).map(request).collect::<Vec<_>>())
}

fn run(planner: &dyn MemoryPlanner, requests: &[BufferRequest]) -> (Vec<u32>, u32) {
    let mut ws = vec![0; planner.workspace_words(requests.len())];
    let mut offsets = vec![0; requests.len()];
    let head = planner.plan(requests, &mut ws, &mut offsets).unwrap();
    (offsets, head)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_plan_is_valid(requests in requests()) {
        for planner in [&Linear as &dyn MemoryPlanner, &Greedy, &Optimal::new(1_000)] {
            let (offsets, head) = run(planner, &requests);
            assert_valid_plan(&requests, &offsets, head);
        }
    }

    #[test]
    fn optimal_is_between_the_bound_and_greedy(requests in requests(), budget in 0u64..2_000) {
        let (_, greedy) = run(&Greedy, &requests);
        // Any budget, even none, gives a valid plan no worse than greedy
        // (random sets often cannot reach the bound: the whole budget goes).
        let (offsets, head) = run(&Optimal::new(budget), &requests);
        assert_valid_plan(&requests, &offsets, head);
        prop_assert!(head <= greedy, "optimal {head} > greedy {greedy}");
        prop_assert!(u64::from(head) >= lower_bound(&requests));
    }

    #[test]
    fn optimal_is_deterministic(requests in requests()) {
        let planner = Optimal::new(1_000);
        prop_assert_eq!(run(&planner, &requests), run(&planner, &requests));
    }

    #[test]
    fn greedy_never_needs_more_than_linear(requests in requests()) {
        let (_, linear) = run(&Linear, &requests);
        let (_, greedy) = run(&Greedy, &requests);
        prop_assert!(greedy <= linear, "greedy {greedy} > linear {linear}");
        prop_assert!(u64::from(greedy) >= lower_bound(&requests));
    }

    #[test]
    fn greedy_is_deterministic(requests in requests()) {
        prop_assert_eq!(run(&Greedy, &requests), run(&Greedy, &requests));
    }

    #[test]
    fn holding_a_buffer_never_lets_it_be_reused_early(requests in requests(), extra in 1u32..5) {
        // Extend every lifetime: the plan must still be valid under the
        // extended lifetimes (what an accelerator needs).
        let held: Vec<_> = requests.iter().map(|r| r.held_until(r.last_step + extra)).collect();
        for planner in [&Greedy as &dyn MemoryPlanner, &Optimal::new(1_000)] {
            let (offsets, head) = run(planner, &held);
            assert_valid_plan(&held, &offsets, head);
        }
    }
}

/// A chain a → b → c where greedy's largest-first order leaves a hole:
/// the search must find the bound.
#[test]
fn optimal_reaches_the_bound_where_greedy_does_not() {
    let requests = [
        BufferRequest::tensor(0, 64, 0, 1),
        BufferRequest::tensor(1, 48, 1, 2),
        BufferRequest::tensor(2, 32, 2, 3),
        BufferRequest::tensor(3, 80, 3, 4),
        BufferRequest::tensor(4, 16, 0, 4),
    ];
    let (_, greedy) = run(&Greedy, &requests);
    let (offsets, head) = run(&Optimal::default(), &requests);
    assert_valid_plan(&requests, &offsets, head);
    assert_eq!(u64::from(head), lower_bound(&requests));
    assert!(greedy > head, "greedy {greedy} already reaches {head}");
}

#[test]
fn optimal_refuses_what_every_planner_refuses() {
    use hilt_runtime::planner::PlanError;
    let mut offsets = [0; 1];
    let bad_align = [BufferRequest::tensor(0, 10, 0, 0).with_align(3)];
    assert_eq!(
        Optimal::ON_TARGET.plan(&bad_align, &mut [0; 20], &mut offsets),
        Err(PlanError::InvalidAlignment {
            request: 0,
            align: 3
        })
    );
    let ok = [BufferRequest::tensor(0, 10, 0, 0)];
    assert_eq!(
        Optimal::ON_TARGET.plan(&ok, &mut [0; 19], &mut offsets),
        Err(PlanError::WorkspaceTooSmall {
            needed: 20,
            given: 19
        })
    );
}

#[test]
fn invalid_requests_are_errors() {
    use hilt_runtime::planner::PlanError;
    let bad_align = [BufferRequest::tensor(0, 10, 0, 0).with_align(3)];
    let mut offsets = [0; 1];
    assert_eq!(
        Greedy.plan(&bad_align, &mut [0; 2], &mut offsets),
        Err(PlanError::InvalidAlignment {
            request: 0,
            align: 3
        })
    );
    let too_big = [BufferRequest::tensor(0, u32::MAX, 0, 0)];
    assert_eq!(
        Linear.plan(&too_big, &mut [], &mut offsets),
        Err(PlanError::SizeOverflow { request: 0 })
    );
    let ok = [BufferRequest::tensor(0, 10, 0, 0)];
    assert_eq!(
        Greedy.plan(&ok, &mut [0; 1], &mut offsets),
        Err(PlanError::WorkspaceTooSmall {
            needed: 2,
            given: 1
        })
    );
    assert_eq!(
        Greedy.plan(&ok, &mut [0; 2], &mut []),
        Err(PlanError::OffsetsTooShort {
            needed: 1,
            given: 0
        })
    );
    let mut inverted = BufferRequest::tensor(0, 10, 3, 3);
    inverted.first_step = 4;
    assert_eq!(
        Linear.plan(&[inverted], &mut [], &mut offsets),
        Err(PlanError::InvertedLifetime { request: 0 })
    );
}

#[test]
fn huge_alignments_are_honoured() {
    let requests = [
        BufferRequest::tensor(0, 100, 0, 1),
        BufferRequest::tensor(1, 100, 0, 1).with_align(1 << 20),
        BufferRequest::scratch(1, 0, 5000).with_align(4096),
    ];
    for planner in [&Linear as &dyn MemoryPlanner, &Greedy, &Optimal::default()] {
        let (offsets, head) = run(planner, &requests);
        assert_valid_plan(&requests, &offsets, head);
        assert_eq!(offsets[1] % (1 << 20), 0);
        assert_eq!(offsets[2] % 4096, 0);
    }
}
