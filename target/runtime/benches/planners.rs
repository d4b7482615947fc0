//! Planning time per planner for 10 / 100 / 1,000 / 5,000 requests.
//! The optimal planner runs on 10 / 100 / 1,000 only: on these random sets
//! the bound is rarely reachable, so it spends its whole node budget, and
//! at 5,000 requests one plan takes too long for a benchmark loop.
//!
//! Requests imitate a deep network: a chain of activations (each live for a
//! step or two), skip connections that stay alive longer, and per-op scratch,
//! with sizes spread over three orders of magnitude.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, Optimal};
use hilt_runtime::request::BufferRequest;

/// Deterministic pseudo-random numbers (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn network_requests(count: usize) -> Vec<BufferRequest> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..count)
        .map(|i| {
            let step = (i as u32) / 2;
            let size = 64 + (rng.next() % 64_000) as u32;
            match rng.next() % 8 {
                0 => BufferRequest::scratch(step, 0, size / 4),
                1 => {
                    BufferRequest::tensor(i as u32, size, step, step + 1 + (rng.next() % 12) as u32)
                }
                _ => BufferRequest::tensor(i as u32, size, step, step + 1),
            }
        })
        .collect()
}

/// An offline plan that fixes every other tensor at a Linear-planned offset
/// and leaves the rest to the run-time planner.
fn offline_words(requests: &[BufferRequest]) -> Vec<u8> {
    let mut ws = vec![0; 0];
    let mut offsets = vec![0; requests.len()];
    Linear.plan(requests, &mut ws, &mut offsets).unwrap();
    let mut words = vec![1i32, 1, requests.len() as i32];
    words.extend(
        offsets
            .iter()
            .enumerate()
            .map(|(i, &o)| if i % 2 == 0 { o as i32 } else { -1 }),
    );
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    for count in [10usize, 100, 1_000, 5_000] {
        let requests = network_requests(count);
        let words = offline_words(&requests);
        let offline = Offline::from_metadata(&words, count as u32, count as u32).unwrap();
        let planners: [&dyn MemoryPlanner; 3] = [&Linear, &Greedy, &offline];
        for planner in planners {
            let mut workspace = vec![0u32; planner.workspace_words(count)];
            let mut offsets = vec![0u32; count];
            group.bench_with_input(
                BenchmarkId::new(planner.name(), count),
                &requests,
                |b, requests| {
                    b.iter(|| {
                        planner
                            .plan(black_box(requests), &mut workspace, &mut offsets)
                            .unwrap()
                    });
                },
            );
        }
    }
    group.finish();
}

/// The optimal planner on the same sets, with its default budget and with
/// smaller ones: what a bounded search costs per node budget. Ten samples
/// each (one plan of 1,000 requests takes seconds at the default budget).
fn bench_optimal(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimal");
    group.sample_size(10);
    for count in [10usize, 100, 1_000] {
        let requests = network_requests(count);
        for budget in [1_000u64, 10_000, Optimal::DEFAULT_NODE_BUDGET] {
            let planner = Optimal::new(budget);
            let mut workspace = vec![0u32; planner.workspace_words(count)];
            let mut offsets = vec![0u32; count];
            group.bench_with_input(
                BenchmarkId::new(format!("nodes_{budget}"), count),
                &requests,
                |b, requests| {
                    b.iter(|| {
                        planner
                            .plan(black_box(requests), &mut workspace, &mut offsets)
                            .unwrap()
                    });
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench, bench_optimal);
criterion_main!(benches);
