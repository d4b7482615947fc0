//! The allocator-port kit on the runtime's own planners and arena (they
//! must pass), and on small deliberately wrong ports (each must fail with
//! the rule it broke named): a kit that cannot fail would prove nothing.

use hilt_runtime::arena::{Arena, ArenaError, Region, Section};
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Optimal, PlanError, check_requests};
use hilt_runtime::port::kit::{
    AllocatorFailure, KitFailure, PlannerKit, RequestSet, check_allocators, sets,
};
use hilt_runtime::port::{
    AllocatorMemory, NonPersistentAllocator, PersistentAllocator, PlanFailure,
};
use hilt_runtime::request::BufferRequest;

#[test]
fn the_runtimes_planners_pass_the_kit() {
    for planner in [&Linear as &dyn MemoryPlanner, &Greedy, &Optimal::new(2_000)] {
        let report = PlannerKit::new().run(planner);
        println!("{report}");
        report.assert_passed();
    }
    // Greedy against the bound, as a figure a caller may also limit.
    let greedy = PlannerKit::new().run(&Greedy);
    let strict = PlannerKit::new()
        .with_quality_limit(greedy.worst_ratio())
        .run(&Greedy);
    strict.assert_passed();
}

#[test]
fn the_arena_passes_the_allocator_script_at_any_start_alignment() {
    let mut backing = vec![0u8; 4096 + 64];
    for skew in 0..33 {
        let mut arena = Arena::new(&mut backing[skew..skew + 4096]);
        let report = check_allocators(&mut arena).unwrap_or_else(|f| panic!("skew {skew}: {f}"));
        assert!(report.allocations >= 9);
    }
    let mut small = [0u8; 512];
    assert_eq!(
        check_allocators(&mut Arena::new(&mut small)),
        Err(AllocatorFailure::TooSmallToTest { given: 512 })
    );
}

/// A planner with one flaw, chosen by `flaw`.
struct Flawed(&'static str);

impl MemoryPlanner for Flawed {
    fn name(&self) -> &'static str {
        self.0
    }

    fn workspace_words(&self, count: usize) -> usize {
        count
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        if self.0 != "accepts anything" {
            check_requests(requests, workspace, requests.len(), offsets)?;
        }
        let head = Linear.plan(requests, &mut [], offsets).unwrap_or(0);
        match self.0 {
            // Reads its workspace before writing it.
            "reads stale workspace" if !requests.is_empty() => {
                offsets[0] += if workspace[0] == 0 { 0 } else { 16 };
                Ok(head + 16)
            }
            "head one short" if head > 0 => Ok(head - 1),
            "misaligns" if requests.len() > 1 => {
                offsets[1] += 1;
                Ok(head + 1)
            }
            // Puts an engine's buffers at 0, as if the engine had memory of
            // its own: right on one memory, wrong once pools share them out.
            "engine buffers at 0" => {
                for (r, o) in requests.iter().zip(offsets.iter_mut()) {
                    if r.reach().covers(hilt_runtime::pool::Reach::ACCEL) {
                        *o = 0;
                    }
                }
                Ok(head)
            }
            _ => Ok(head),
        }
    }
}

#[test]
fn a_planner_that_reads_stale_workspace_is_not_deterministic() {
    let report =
        PlannerKit::new().check_sets(&Flawed("reads stale workspace"), &sets::tflm_vectors());
    let failure = &report.failures[0];
    assert!(
        matches!(
            failure.failure,
            KitFailure::OffsetChanged { second: 16, .. }
        ),
        "{failure}"
    );
    assert_eq!(
        failure.to_string(),
        "set \"tflm basics\": not deterministic: buffer 0 (tensor 0, steps 0..1, [0,10)) \
         moved to offset 16 when planned again"
    );
}

#[test]
fn a_head_that_misses_a_buffer_and_a_misaligned_offset_are_named() {
    let report = PlannerKit::new().check_sets(&Flawed("head one short"), &sets::tflm_vectors());
    let failure = &report.failures[0].failure;
    assert!(
        matches!(failure, KitFailure::Invalid(PlanFailure::OutsideHead { head: 29, buffer }) if buffer.index == 1),
        "{failure}"
    );
    let set = RequestSet::new(
        "two",
        vec![
            BufferRequest::tensor(0, 16, 0, 0),
            BufferRequest::tensor(1, 16, 0, 0),
        ],
    );
    let report = PlannerKit::new().check_sets(&Flawed("misaligns"), &[set]);
    assert_eq!(
        report.failures[0].to_string(),
        "set \"two\": buffer 1 (tensor 1, steps 0..0, [17,33)) is not aligned to 16 bytes"
    );
}

#[test]
fn a_planner_that_plans_invalid_input_fails_and_fixed_offsets_are_checked() {
    let report = PlannerKit::new().run(&Flawed("accepts anything"));
    assert_eq!(
        report.failures[0].to_string(),
        "set \"invalid inputs\": an invalid input (alignment 3) got a plan instead of an error"
    );
    let mut set = RequestSet::new("fixed", sets::from_adds(&[(10, 0, 1), (20, 1, 2)]));
    set.fixed = vec![(1, 64)];
    let report = PlannerKit::new().check_sets(&Greedy, &[set]);
    assert!(
        matches!(report.failures[0].failure, KitFailure::Invalid(PlanFailure::FixedMoved { fixed: 64, buffer }) if buffer.index == 1),
        "{}",
        report.failures[0]
    );
}

/// An arena whose persistent allocations land on the last temp one: the
/// overlap a hand-written allocator makes when it forgets the temp stack.
struct PersistentOverTemp<'a>(Arena<'a>, Option<Region>);

impl AllocatorMemory for PersistentOverTemp<'_> {
    fn memory_len(&self) -> usize {
        self.0.memory_len()
    }
    fn memory_address(&self) -> usize {
        self.0.memory_address()
    }
    fn region_bytes(&mut self, region: Region) -> &mut [u8] {
        self.0.region_bytes(region)
    }
}

impl PersistentAllocator for PersistentOverTemp<'_> {
    fn allocate_persistent(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        let r = self.0.allocate_persistent(size, align)?;
        Ok(match self.1 {
            Some(temp) => Region {
                offset: temp.offset,
                len: r.len,
            },
            None => r,
        })
    }
    fn persistent_used_bytes(&self) -> usize {
        self.0.persistent_used_bytes()
    }
}

impl NonPersistentAllocator for PersistentOverTemp<'_> {
    fn allocate_temp(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        let r = self.0.allocate_temp(size, align)?;
        self.1 = Some(r);
        Ok(r)
    }
    fn reset_temp(&mut self) {
        self.1 = None;
        NonPersistentAllocator::reset_temp(&mut self.0);
    }
    fn commit_head(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        NonPersistentAllocator::commit_head(&mut self.0, size, align)
    }
    fn head(&self) -> Region {
        NonPersistentAllocator::head(&self.0)
    }
}

#[test]
fn an_allocator_that_puts_persistent_data_over_temp_fails_naming_both() {
    let mut backing = vec![0u8; 4096 + 64];
    // Offset 0 on a 64-byte address: every offset the script asks for at
    // the start is aligned, so the overlap is the first rule broken.
    let skew = backing.as_ptr().align_offset(64);
    let mut port = PersistentOverTemp(Arena::new(&mut backing[skew..skew + 4096]), None);
    let failure = check_allocators(&mut port).unwrap_err();
    let AllocatorFailure::Overlap { first, second } = failure else {
        panic!("{failure}");
    };
    assert_eq!((first.label, first.section), ("temp #0", Section::Temp));
    assert_eq!(
        (second.label, second.section),
        ("persistent #0", Section::Tail)
    );
    assert_eq!(
        failure.to_string(),
        "temp #0 (Temp, 40 bytes aligned 8, at [0,40)) and \
         persistent #0 (Tail, 24 bytes aligned 16, at [0,24)) are both live but share bytes"
    );
}

#[test]
fn random_sets_are_reproducible_and_models_give_their_tensor_requests() {
    assert_eq!(sets::random(7, 40), sets::random(7, 40));
    assert_ne!(sets::random(7, 40).requests, sets::random(8, 40).requests);
    let bytes = hilt_runtime::writer::examples::seed_fc_float();
    let set = sets::model("seed fc", &bytes, 16).unwrap();
    assert!(!set.requests.is_empty());
    let report = PlannerKit::new().check_sets(&Greedy, &[set]);
    report.assert_passed();
    assert!(sets::model("garbage", b"not a model", 16).is_err());
}

#[test]
fn a_planner_wrong_only_for_an_engines_buffers_fails_in_pools() {
    // Plain sets carry no engine buffers: the flaw does not show.
    let plain = PlannerKit::new().check_sets(&Flawed("engine buffers at 0"), &sets::tflm_vectors());
    let failure = &plain.failures[0];
    // Planned into pools, two engine buffers live together share offset 0.
    assert!(
        matches!(failure.failure, KitFailure::Invalid(PlanFailure::Overlap { first, second, .. })
            if first.offset == second.offset),
        "{failure}"
    );
    assert!(
        failure.to_string().contains("are live together at step"),
        "{failure}"
    );
}
