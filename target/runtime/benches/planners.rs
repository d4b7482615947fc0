//! Planning time per planner (linear, greedy, offline, optimal):
//!
//! - group `plan`: linear, greedy and offline on 10 / 100 / 1,000 / 5,000
//!   synthetic requests;
//! - group `optimal`: the optimal planner on the same sets at node budgets
//!   of 1,000, 10,000 and 200,000 (the target's default); at 5,000 requests with a
//!   budget of 1,000 nodes only. These random sets rarely let it stop at
//!   the bound, so it spends its whole budget, and at 5,000 requests one
//!   plan at the default budget takes far too long for a benchmark loop;
//! - group `hard`: hard buffer lists (see `bench_hard`), optimal in four
//!   lanes and in one, and greedy;
//! - group `models`: all four on the real request lists of every model of
//!   the conformance sets (`HILT_CONFORMANCE_DIR`, `:`-separated, else
//!   `../shared/conformance` beside the repository, and its sibling
//!   `conformance-ops`), each model's tensors as the runtime requests them
//!   (16-byte alignment). The offline planner gets the optimal plan as its
//!   fixed offsets, as `hilt layout --write-offline` writes it. Skipped, with
//!   a message, when no set is found.
//!
//! Synthetic requests imitate a deep network: a chain of activations (each
//! live for a step or two), skip connections that stay alive longer, and
//! per-op scratch, with sizes spread over three orders of magnitude.

use std::hint::black_box;

use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hilt_runtime::liveness::tensor_request_iter;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, Optimal};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::writer::offline_plan::offline_plan_bytes;

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

/// The optimal planner on the same sets at budgets of 1,000 to 200,000
/// nodes (the target's default): what a bounded search costs per node
/// budget. Ten samples each (one plan of 1,000 requests takes seconds at
/// 200,000 nodes); 5,000 requests at 1,000 nodes only.
fn bench_optimal(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimal");
    group.sample_size(10);
    for count in [10usize, 100, 1_000, 5_000] {
        let requests = network_requests(count);
        let budgets: &[u64] = if count >= 5_000 {
            &[1_000]
        } else {
            &[1_000, 10_000, 200_000]
        };
        for &budget in budgets {
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

/// The conformance folders: those `HILT_CONFORMANCE_DIR` names
/// (`:`-separated), else both shared sets; the ones present.
fn conformance_dirs() -> Vec<PathBuf> {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    let named: Vec<PathBuf> = std::env::var_os("HILT_CONFORMANCE_DIR")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let dirs = if named.is_empty() {
        vec![shared.join("conformance"), shared.join("conformance-ops")]
    } else {
        named
    };
    dirs.into_iter()
        .filter(|d| d.join("models").is_dir())
        .collect()
}

/// Every conformance model's name and bytes, sorted by name.
fn conformance_models() -> Vec<(String, Vec<u8>)> {
    let mut models = Vec::new();
    for dir in conformance_dirs() {
        let Ok(entries) = std::fs::read_dir(dir.join("models")) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_some_and(|e| e == "tflite")
                && let Ok(bytes) = std::fs::read(&path)
            {
                let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                models.push((name, bytes));
            }
        }
    }
    models.sort();
    models
}

/// The optimal plan of `requests` as the offline metadata of a model with
/// `tensors` tensors (-1 for tensors without a request).
fn optimal_offline_words(requests: &[BufferRequest], tensors: u32) -> Vec<u8> {
    let planner = Optimal::default();
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![0u32; requests.len()];
    planner
        .plan(requests, &mut workspace, &mut offsets)
        .unwrap();
    let mut plan = vec![-1i32; tensors as usize];
    for (r, &o) in requests.iter().zip(&offsets) {
        plan[r.tensor_index().unwrap() as usize] = o as i32;
    }
    offline_plan_bytes(1, &plan)
}

/// All four planners on every conformance model's own request list.
fn bench_models(c: &mut Criterion) {
    let models = conformance_models();
    if models.is_empty() {
        eprintln!("no conformance set found (HILT_CONFORMANCE_DIR): group `models` skipped");
        return;
    }
    let mut group = c.benchmark_group("models");
    for (name, bytes) in &models {
        let Ok(model) = Model::from_bytes(bytes) else {
            eprintln!("{name}: not a valid model, skipped");
            continue;
        };
        let requests: Vec<BufferRequest> = tensor_request_iter(&model)
            .map(|r| r.with_align(16))
            .collect();
        let words = optimal_offline_words(&requests, model.tensor_count());
        let offline = Offline::from_metadata(&words, model.tensor_count(), model.tensor_count())
            .expect("the plan written above");
        let optimal = Optimal::default();
        let planners: [&dyn MemoryPlanner; 4] = [&Linear, &Greedy, &offline, &optimal];
        for planner in planners {
            let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
            let mut offsets = vec![0u32; requests.len()];
            group.bench_with_input(
                BenchmarkId::new(planner.name(), name),
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

/// A buffer list in MiniMalloc's CSV (`id,lower,upper,size`, or its
/// benchmarks' `buffer,start,end,size`), each buffer live on
/// `[lower, upper)` with 1-byte alignment, as `hilt plan` reads it.
fn read_buffer_list(path: &std::path::Path) -> Option<Vec<BufferRequest>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(k, line)| {
            let f: Vec<u32> = line
                .split(',')
                .skip(1)
                .map(|x| x.trim().parse().ok())
                .collect::<Option<_>>()?;
            Some(BufferRequest::tensor(k as u32, f[2], f[0], f[1] - 1).with_align(1))
        })
        .collect()
}

/// Hard sets: the buffer lists under `host/tests/data/plan` (1 MiB,
/// a few hundred buffers, a known packing at the bound), and every CSV in
/// `HILT_MINIMALLOC_DIR` when set (e.g. MiniMalloc's
/// `benchmarks/asplos2024`, which the repository does not ship): optimal
/// with four lanes and with one, asked to fit 1 MiB, and greedy beside.
/// Each line prints the peak each reaches.
fn bench_hard(c: &mut Criterion) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![repo.join("host/tests/data/plan")];
    dirs.extend(std::env::var_os("HILT_MINIMALLOC_DIR").map(PathBuf::from));
    let mut group = c.benchmark_group("hard");
    group.sample_size(10);
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("{}: not found, skipped", dir.display());
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "csv"))
            .collect();
        paths.sort();
        for path in paths {
            let Some(requests) = read_buffer_list(&path) else {
                eprintln!("{}: not a buffer list, skipped", path.display());
                continue;
            };
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            // Every hard set's capacity is 1 MiB: the question is whether
            // it fits (as `hilt plan --capacity 1MiB` asks it).
            let fit = Optimal::default().with_goal(1 << 20);
            let planners: [(&str, &dyn MemoryPlanner); 3] = [
                ("optimal_4_lanes", &fit.with_lanes(4)),
                ("optimal_1_lane", &fit.with_lanes(1)),
                ("greedy", &Greedy),
            ];
            for (label, planner) in planners {
                let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
                let mut offsets = vec![0u32; requests.len()];
                let peak = planner
                    .plan(&requests, &mut workspace, &mut offsets)
                    .unwrap();
                eprintln!(
                    "{name}: {label} peak {peak} (bound {})",
                    hilt_runtime::planner::lower_bound(&requests)
                );
                group.bench_with_input(BenchmarkId::new(label, &name), &requests, |b, requests| {
                    b.iter(|| {
                        planner
                            .plan(black_box(requests), &mut workspace, &mut offsets)
                            .unwrap()
                    });
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench, bench_optimal, bench_models, bench_hard);
criterion_main!(benches);
