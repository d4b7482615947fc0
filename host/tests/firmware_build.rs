//! Firmware builds refuse what would fail far from its cause: an arena so
//! large that the stack, growing down from the top of RAM, would run into
//! it. The 128 KiB STM32F405 with a 96 KiB arena leaves about 9.4 KiB of
//! stack after the agent's buffers and the RTT channels (a prepare then
//! corrupted the arena's tail: "AVERAGE_POOL_2D is not supported"); the
//! board's own 88 KiB arena builds.

mod common;

use hilt::config::board::load_all;
use hilt::firmware::{BuildError, FirmwareRequest, MIN_STACK_BYTES, build};
use hilt::model_file::ModelFile;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

use common::repo;

#[test]
fn an_arena_that_leaves_too_little_stack_is_refused_with_the_figures() {
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = boards
        .iter()
        .find(|b| b.name == "qemu-netduinoplus2")
        .unwrap();
    let model = ModelFile::open(&repo().join("scenarios/models/tiny_convnet_int8.tflite")).unwrap();
    let request = |arena_size| FirmwareRequest {
        board,
        model: &model,
        arena_size,
        planner: PlannerKind::Greedy,
        features: &[],
        faults: hilt_proto::armed_faults::ArmedFaults::NONE,
        canary: CanaryMode::Bounds,
        align: 16,
        pools: None,
        kernels: hilt::config::scenario::KernelChoice::All,
        engine: true,
        optimize: hilt::config::scenario::OptimizeFor::Speed,
        constants: hilt::config::scenario::ConstantsPlace::Tail,
        schedule: hilt::config::scenario::Schedule::Tflm,
    };
    match build(&repo(), &request(96 * 1024)) {
        Err(BuildError::Stack {
            board,
            stack,
            needed,
            ..
        }) => {
            assert_eq!(board, "qemu-netduinoplus2");
            assert_eq!(needed, MIN_STACK_BYTES);
            assert!(stack < MIN_STACK_BYTES, "{stack}");
        }
        other => panic!("expected the stack to be refused, got {other:?}"),
    }
    let elf = build(&repo(), &request(board.arena_size)).unwrap();
    assert!(elf.is_file());
}

/// The model is written into a copy of one build: two models get ELFs that
/// differ only inside the model slot (the board's fixed `model_slot`, so
/// every model that fits shares the build), and each slot holds its model
/// whole, with its CRC-32.
#[test]
fn two_models_share_one_build_and_differ_only_in_the_slot() {
    use object::{Object, ObjectSymbol};
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = boards.iter().find(|b| b.name == "qemu-mps2-an386").unwrap();
    let models = [
        repo().join("scenarios/models/tiny_convnet_int8.tflite"),
        repo().join("scenarios/models/reshape_int8.tflite"),
    ]
    .map(|path| ModelFile::open(&path).unwrap());
    let elves: Vec<Vec<u8>> = models
        .iter()
        .map(|model| {
            let request = FirmwareRequest {
                board,
                model,
                arena_size: board.arena_size,
                planner: PlannerKind::Greedy,
                features: &[],
                faults: hilt_proto::armed_faults::ArmedFaults::NONE,
                canary: CanaryMode::Off,
                align: 16,
                pools: None,
                kernels: hilt::config::scenario::KernelChoice::All,
                engine: true,
                optimize: hilt::config::scenario::OptimizeFor::Speed,
                constants: hilt::config::scenario::ConstantsPlace::Tail,
                schedule: hilt::config::scenario::Schedule::Tflm,
            };
            std::fs::read(build(&repo(), &request).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(elves[0].len(), elves[1].len());
    let file = object::File::parse(&*elves[0]).unwrap();
    let symbol = file
        .symbols()
        .find(|s| s.name() == Ok(hilt_proto::model_slot::SYMBOL))
        .expect("the slot symbol");
    let size = symbol.size() as usize;
    assert_eq!(
        Some(size as u64),
        board.model_slot,
        "the board's fixed slot"
    );
    // Where the two differ: inside one window of the slot's size.
    let differ: Vec<usize> = (0..elves[0].len())
        .filter(|&i| elves[0][i] != elves[1][i])
        .collect();
    let (first, last) = (differ[0], *differ.last().unwrap());
    assert!(
        last - first < size,
        "bytes {first}..={last} differ: more than the slot"
    );
    let start = elves[0]
        .windows(8)
        .position(|w| w == hilt_proto::model_slot::MAGIC)
        .expect("a slot header");
    assert!(start <= first && last < start + size);
    for (elf, model) in elves.iter().zip(&models) {
        let slot = hilt_proto::model_slot::read_checked(&elf[start..start + size]).unwrap();
        assert_eq!(slot.bytes, model.bytes());
        assert_eq!(
            slot.name,
            model.path().file_name().unwrap().to_str().unwrap()
        );
    }
}

/// Faults are armed in a copy of one build, as models are written: two
/// sets of faults get ELFs that differ only in the armed-faults word, and
/// each word holds its set. (The request is the `overrun` fixture's on the
/// AN386, so `qemu_faults` reuses this build.)
#[test]
fn two_sets_of_faults_share_one_build_and_differ_only_in_their_word() {
    use hilt_proto::armed_faults::{ArmedFaults, Fault, SYMBOL};
    use object::{Object, ObjectSection, ObjectSymbol};
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = boards.iter().find(|b| b.name == "qemu-mps2-an386").unwrap();
    let model = ModelFile::open(&repo().join("scenarios/models/reshape_int8.tflite")).unwrap();
    let sets = [
        ArmedFaults::NONE.with(Fault::Overrun),
        ArmedFaults::NONE
            .with(Fault::Misplan)
            .with(Fault::UncheckedPlan),
    ];
    let elves: Vec<Vec<u8>> = sets
        .iter()
        .map(|&faults| {
            let request = FirmwareRequest {
                board,
                model: &model,
                arena_size: board.arena_size,
                planner: PlannerKind::Greedy,
                features: &[],
                faults,
                canary: CanaryMode::Buffers,
                align: 16,
                pools: None,
                kernels: hilt::config::scenario::KernelChoice::All,
                engine: true,
                optimize: hilt::config::scenario::OptimizeFor::Speed,
                constants: hilt::config::scenario::ConstantsPlace::Tail,
                schedule: hilt::config::scenario::Schedule::Tflm,
            };
            std::fs::read(build(&repo(), &request).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(elves[0].len(), elves[1].len());
    let file = object::File::parse(&*elves[0]).unwrap();
    let symbol = file
        .symbols()
        .find(|s| s.name() == Ok(SYMBOL))
        .expect("a fault-injection firmware has the armed-faults word");
    assert_eq!(symbol.size(), 4);
    let section = file
        .section_by_index(symbol.section_index().unwrap())
        .unwrap();
    let at = (section.file_range().unwrap().0 + symbol.address() - section.address()) as usize;
    let differ: Vec<usize> = (0..elves[0].len())
        .filter(|&i| elves[0][i] != elves[1][i])
        .collect();
    assert!(
        !differ.is_empty() && differ.iter().all(|i| (at..at + 4).contains(i)),
        "bytes {differ:?} differ, the word is at {at}"
    );
    for (elf, set) in elves.iter().zip(sets) {
        let word = u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
        assert_eq!(ArmedFaults(word), set);
    }
}

/// Every crate the firmware workspace builds by path lies below that
/// workspace's root (`target/`), where Cargo hashes a path dependency's
/// location relative to the root; one outside it would be hashed as an
/// absolute path into every symbol, and a clone at another folder would link
/// other code and move the gate's counts.
#[test]
fn the_firmware_workspace_holds_every_crate_it_builds_by_path() {
    let root = repo().join("target");
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    assert!(!members.is_empty());
    // Walk the path dependencies of the members, transitively.
    let mut todo: Vec<std::path::PathBuf> = members
        .iter()
        .map(|m| root.join(m.as_str().unwrap()))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let root = std::fs::canonicalize(&root).unwrap();
    while let Some(dir) = todo.pop() {
        let dir = std::fs::canonicalize(&dir).unwrap();
        if !seen.insert(dir.clone()) {
            continue;
        }
        assert!(
            dir.starts_with(&root),
            "{} is outside the firmware workspace's root {}",
            dir.display(),
            root.display()
        );
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
        assert!(
            dir == root || !manifest.contains_key("workspace"),
            "{} is a workspace root of its own",
            dir.display()
        );
        let mut tables: Vec<&toml::Table> = Vec::new();
        for key in ["dependencies", "build-dependencies"] {
            if let Some(t) = manifest.get(key).and_then(|t| t.as_table()) {
                tables.push(t);
            }
        }
        if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
            for per_target in targets.values().filter_map(|t| t.as_table()) {
                for key in ["dependencies", "build-dependencies"] {
                    if let Some(t) = per_target.get(key).and_then(|t| t.as_table()) {
                        tables.push(t);
                    }
                }
            }
        }
        for dep in tables.iter().flat_map(|t| t.values()) {
            if let Some(path) = dep.get("path").and_then(|p| p.as_str()) {
                todo.push(dir.join(path));
            }
        }
    }
    // The firmware, the example and what they link: agent, runtime, proto,
    // contract and the build helper at least.
    assert!(seen.len() >= 6, "{seen:?}");
}

/// A firmware already built is found without the build lock: a run that
/// needs no build never waits behind another's (cached one-board runs took
/// 40 s while another build held the lock). The lock is held here for the
/// whole check, so a build that took it first would never return.
#[test]
fn a_cached_firmware_is_used_while_another_build_holds_the_lock() {
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = boards
        .iter()
        .find(|b| b.name == "qemu-mps2-an386")
        .unwrap()
        .clone();
    let model = std::sync::Arc::new(
        ModelFile::open(&repo().join("scenarios/models/reshape_int8.tflite")).unwrap(),
    );
    let request = |board| FirmwareRequest {
        board,
        model: &model,
        arena_size: board.arena_size,
        planner: PlannerKind::Greedy,
        features: &[],
        faults: hilt_proto::armed_faults::ArmedFaults::NONE,
        canary: CanaryMode::Off,
        align: 16,
        pools: None,
        kernels: hilt::config::scenario::KernelChoice::All,
        engine: true,
        optimize: hilt::config::scenario::OptimizeFor::Speed,
        constants: hilt::config::scenario::ConstantsPlace::Tail,
        schedule: hilt::config::scenario::Schedule::Tflm,
    };
    let first = build(&repo(), &request(&board)).unwrap();
    let lock_path = repo().join("build/firmware/cache/hilt-build.lock");
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let model2 = model.clone();
    std::thread::spawn(move || {
        let request = FirmwareRequest {
            board: &board,
            model: &model2,
            arena_size: board.arena_size,
            planner: PlannerKind::Greedy,
            features: &[],
            faults: hilt_proto::armed_faults::ArmedFaults::NONE,
            canary: CanaryMode::Off,
            align: 16,
            pools: None,
            kernels: hilt::config::scenario::KernelChoice::All,
            engine: true,
            optimize: hilt::config::scenario::OptimizeFor::Speed,
            constants: hilt::config::scenario::ConstantsPlace::Tail,
            schedule: hilt::config::scenario::Schedule::Tflm,
        };
        let _ = tx.send(build(&repo(), &request).map_err(|e| e.to_string()));
    });
    let again = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the cached build waited for the lock");
    lock.unlock().unwrap();
    assert_eq!(again.unwrap(), first);
}
