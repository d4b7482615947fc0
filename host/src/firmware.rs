//! Builds the firmware for a (board, model) pair, cached under `build/`:
//! hilt's own (`target/firmware`, one `board-NAME` feature per board) or the
//! crate a board file names with `firmware = "…"` (a user's firmware linking
//! `hilt-agent`). Both get the same `HILT_*` variables, which
//! `hilt-firmware-build` reads in their build scripts.
//!
//! The model is not compiled in: a firmware is built once per board,
//! configuration and model size class (its model slot,
//! [`hilt_proto::model_slot`]), and each model is written into a copy of
//! that ELF. A fat-LTO link costs ~10 s; writing a slot, milliseconds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;

use crate::config::board::Board;
use crate::model_file::ModelFile;
use hilt_contract::scenario::{ConstantsPlace, KernelChoice, OptimizeFor, Schedule};
use hilt_runtime::model::OpCode;

/// Whether firmware builds show cargo's own output (`hilt -v`).
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Shows cargo's own output for every firmware build from now on (`-v`);
/// otherwise each build is one line when it starts and one when it ends.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, std::sync::atomic::Ordering::Relaxed);
}
use hilt_proto::armed_faults::ArmedFaults;
use hilt_proto::model_slot;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

mod digest;
mod locks;
mod slot;

pub use locks::parallel_builds;
use locks::{lock_a_build_folder, lock_file};
use slot::{constant_image, least_slot, slot_for, write_model};

/// A firmware build that failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// cargo could not be started.
    #[error("cannot run cargo: {0}")]
    Spawn(std::io::Error),
    /// The build failed.
    #[error("firmware build for {board} failed:\n{output}")]
    Failed {
        /// Board.
        board: String,
        /// The tail of cargo's output.
        output: String,
    },
    /// The firmware crate's manifest does not name its package, or a board
    /// file does not parse.
    #[error("{path}: {problem}")]
    Manifest {
        /// The `Cargo.toml`.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The firmware's data and arena leave too little RAM for its stack.
    #[error(
        "firmware for {board} leaves {stack} bytes of RAM for its stack after its data and \
         a {arena}-byte arena (at least {needed} needed): lower arena_size in the board file \
         or the scenario"
    )]
    Stack {
        /// Board.
        board: String,
        /// Bytes between the end of the last RAM section and the stack's top.
        stack: u64,
        /// The least the firmware is given.
        needed: u64,
        /// The arena asked for.
        arena: u64,
    },
    /// The built ELF could not be read.
    #[error("{path}: not a readable ELF: {problem}")]
    Elf {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        problem: String,
    },
    /// The ELF has no model slot to write, or the model does not fit it.
    #[error("{path}: cannot write the model into the firmware's model slot: {problem}")]
    Slot {
        /// The ELF.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The model's constant image (`constants = "flash"`) could not be
    /// worked out: a kernel's prepare refused the model on the host.
    #[error("{model}: cannot work out the constant image for flash: {problem}")]
    Constants {
        /// The model file.
        model: PathBuf,
        /// What the host's prepare said.
        problem: String,
    },
    /// Faults were armed for a firmware that cannot take them.
    #[error("{path}: cannot arm the scenario's faults: {problem}")]
    Faults {
        /// The ELF.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A file could not be read or copied.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What to build.
#[derive(Debug, Clone)]
pub struct FirmwareRequest<'a> {
    /// The board.
    pub board: &'a Board,
    /// The model to embed.
    pub model: &'a ModelFile,
    /// Arena bytes.
    pub arena_size: u64,
    /// Planner.
    pub planner: PlannerKind,
    /// Extra cargo features of the firmware.
    pub features: &'a [String],
    /// The faults armed in it (none: a firmware without fault injection).
    /// Every set of faults shares one build, with `fault-injection`; the
    /// set is written into each copy of the ELF, as the model is.
    pub faults: ArmedFaults,
    /// Canary mode.
    pub canary: CanaryMode,
    /// Activation buffer alignment.
    pub align: u32,
    /// The board pools the model's buffers may use (None: one memory).
    pub pools: Option<&'a [String]>,
    /// Every kernel, or only the model's.
    pub kernels: KernelChoice,
    /// Whether the firmware links the virtual NPU (`HILT_ENGINE`): always
    /// with every kernel; with the model's only if its scenario offloads.
    pub engine: bool,
    /// Code generated for speed or for size (the profile's `opt-level`).
    pub optimize: OptimizeFor,
    /// Where kernels' constants live: with `Flash`, the host works out the
    /// model's constant image and writes it into the slot after the model.
    pub constants: ConstantsPlace,
    /// TFLM's schedule or the lean one (`HILT_SCHEDULE`).
    pub schedule: Schedule,
}

impl<'a> FirmwareRequest<'a> {
    /// The firmware a scenario needs on a board: its model, its arena size
    /// (else the board's), planner, canaries, alignment and test features.
    pub fn for_scenario(board: &'a Board, scenario: &'a crate::config::scenario::Scenario) -> Self {
        FirmwareRequest {
            board,
            model: &scenario.model_file,
            arena_size: scenario.arena_size.unwrap_or(board.arena_size),
            planner: scenario.planner,
            features: &scenario.firmware_features,
            faults: scenario.faults,
            canary: scenario.canary,
            align: scenario.align,
            pools: scenario.pools.as_deref(),
            kernels: scenario.kernels,
            engine: scenario.kernels == KernelChoice::All
                || scenario.offload.accelerator != hilt_contract::offload::Accelerator::None,
            optimize: scenario.optimize,
            constants: scenario.constants,
            schedule: scenario.schedule,
        }
    }

    /// The builtin operators whose kernels the firmware links, by name
    /// (sorted, each once), when only the model's are asked for: those of
    /// its operators hilt has a kernel for (an operator it has none for is
    /// named when the model is loaded, as with every kernel linked).
    pub fn kernel_names(&self) -> Option<Vec<&'static str>> {
        self.kernel_types()
            .map(|kernels| kernels.into_iter().map(|(name, _)| name).collect())
    }

    /// [`kernel_names`](Self::kernel_names) with the types (first input's,
    /// [`hilt_runtime::kernels::types`] bits) the model gives each.
    pub fn kernel_types(&self) -> Option<Vec<(&'static str, u8)>> {
        use hilt_runtime::kernels::types;
        if self.kernels == KernelChoice::All {
            return None;
        }
        let model = self.model.model();
        let mut kernels: Vec<(&'static str, u8)> = Vec::new();
        for op in model.operators() {
            let OpCode::Builtin(code) = op.code else {
                continue;
            };
            let Some(name) = hilt_runtime::kernels::builtin(code).and_then(|_| code.variant_name())
            else {
                continue;
            };
            let bit = op
                .inputs()
                .next()
                .flatten()
                .and_then(|t| model.tensor(t))
                .and_then(|t| types::bit(t.dtype))
                .unwrap_or(types::ALL);
            match kernels.iter_mut().find(|(n, _)| *n == name) {
                Some((_, set)) => *set |= bit,
                None => kernels.push((name, bit)),
            }
        }
        kernels.sort_unstable();
        Some(kernels)
    }

    /// The cargo features asked for: the scenario's, and `fault-injection`
    /// when faults are armed (one build for every set of them).
    fn cargo_features(&self) -> Vec<String> {
        let mut features = self.features.to_vec();
        if !self.faults.is_empty() && !features.iter().any(|f| f == "fault-injection") {
            features.push("fault-injection".to_string());
        }
        features
    }

    /// `HILT_KERNELS` for this build: `all`, or the model's by name, each
    /// with the types it needs unless it needs all (`CONV_2D:INT8`).
    fn kernels_variable(&self) -> String {
        use hilt_runtime::kernels::types;
        let Some(kernels) = self.kernel_types() else {
            return "all".to_string();
        };
        let names = [
            (types::FLOAT32, "FLOAT32"),
            (types::INT8, "INT8"),
            (types::INT16, "INT16"),
        ];
        kernels
            .iter()
            .map(|&(name, set)| {
                let kept = names
                    .iter()
                    .filter(|(bit, _)| set != types::ALL && set & bit != 0);
                kept.fold(name.to_string(), |entry, (_, dtype)| entry + ":" + dtype)
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

pub(crate) fn fnv(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The key a model-less ELF is cached under: everything that went into it.
fn elf_key(
    request: &FirmwareRequest<'_>,
    slot: usize,
    (pools, kernels): (&str, &str),
    sources: u64,
    cargo_config: &str,
) -> String {
    // A size build adds its `opt-level`; a speed build's key is unchanged.
    let text = format!(
        "{}:{}:{}:{}:{}:{pools}:{slot}:{sources:016x}:{cargo_config}:{kernels}:{}{}",
        request.arena_size,
        request.planner.name(),
        request.cargo_features().join(","),
        request.canary,
        request.align,
        ["none", "vnpu"][usize::from(request.engine)],
        match request.optimize {
            OptimizeFor::Speed => String::new(),
            size => format!(":opt-level={}", size.opt_level()),
        }
    );
    // A lean firmware adds its schedule; a TFLM one's key is unchanged.
    let text = match request.schedule {
        Schedule::Tflm => text,
        lean => format!("{text}:schedule={}", lean.name()),
    };
    format!("{:016x}", fnv(text.as_bytes(), 0))
}

/// Builds (or reuses) the firmware ELF for the request's model; returns its
/// path, named after the board and a key over everything in it.
///
/// The model goes into the board's fixed slot (`model_slot`) when it has one
/// the model fits, else into the slot of the model's size class; on a board
/// whose flash cannot hold that slot beside the code, into a slot of just
/// the model's size.
pub fn build(repo: &Path, request: &FirmwareRequest<'_>) -> Result<PathBuf, BuildError> {
    let model = request.model.bytes();
    let constants = match request.constants {
        ConstantsPlace::Tail => Vec::new(),
        ConstantsPlace::Flash => constant_image(request)?,
    };
    // What the slot holds after its header: the model, and the image.
    let payload = model_slot::payload_len(model.len(), constants.len()) - model_slot::HEADER;
    let least = least_slot(payload);
    // A firmware for one model's kernels holds that model only: its slot
    // is just the model's size, not the board's slot for every model.
    let class = match request.kernels {
        KernelChoice::All => slot_for(request.board.model_slot, payload),
        KernelChoice::Model => least,
    };
    let base = match build_base(repo, request, class) {
        Err(BuildError::Failed { output, .. })
            if output.contains("will not fit in region") && least < class =>
        {
            build_base(repo, request, least)?
        }
        other => other?,
    };
    let name = request
        .model
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    write_model(
        &base,
        &request.board.name,
        (model, &name, &constants),
        request.faults,
    )
}

/// `ELF.partial.PID.N`: a temporary name no other writer of `elf`, in this
/// process or another, uses at the same time.
fn unique_partial(elf: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = elf.as_os_str().to_owned();
    name.push(format!(".partial.{}.{n}", std::process::id()));
    PathBuf::from(name)
}

/// Where an ELF's model slot lies in the file: (offset, bytes).
pub(crate) fn slot_range(file: &object::File<'_>) -> Result<(usize, usize), String> {
    symbol_range(file, model_slot::SYMBOL)
}

/// Where the bytes of the symbol `name` lie in the file: (offset, bytes).
fn symbol_range(file: &object::File<'_>, name: &str) -> Result<(usize, usize), String> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let symbol = file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .ok_or_else(|| format!("no `{name}` symbol"))?;
    let section = symbol
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or_else(|| format!("`{name}` is in no section"))?;
    let (offset, size) = section
        .file_range()
        .ok_or_else(|| format!("`{name}`'s section has no bytes in the file"))?;
    let within = symbol.address() - section.address();
    if within + symbol.size() > size {
        return Err(format!("`{name}` runs past its section"));
    }
    Ok(((offset + within) as usize, symbol.size() as usize))
}

/// A Cargo `--config` value that makes the firmware independent of where
/// the repository and Cargo's home are: panic messages embed source paths,
/// so without it a clone at another path links other string lengths, moves
/// constant data and can change which copy loops run, and the gate's
/// instruction counts then differ by a few SysTick ticks from the accepted
/// snapshots (a clean CI clone did exactly that). The paths are renamed to
/// `/hilt` and `/cargo`; the table joins the firmware crate's own
/// `rustflags`.
fn path_remapping(repo: &Path) -> String {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let mut flags = vec![remap_flag(repo, "/hilt")];
    if let Some(home) = cargo_home {
        let home = std::fs::canonicalize(&home).unwrap_or(home);
        flags.push(remap_flag(&home, "/cargo"));
    }
    format!(
        "target.'cfg(target_os = \"none\")'.rustflags = [{}]",
        flags.join(", ")
    )
}

/// `"--remap-path-prefix=FROM=TO"` as a TOML basic string.
fn remap_flag(from: &Path, to: &str) -> String {
    let flag = format!("--remap-path-prefix={}={to}", from.display());
    let escaped = flag.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// Builds (or reuses) the firmware ELF with a model slot of `slot` bytes
/// (holding the firmware's seed model: [`write_model`] replaces it).
fn build_base(
    repo: &Path,
    request: &FirmwareRequest<'_>,
    slot: usize,
) -> Result<PathBuf, BuildError> {
    let repo = &std::fs::canonicalize(repo).map_err(|source| BuildError::Io {
        path: repo.into(),
        source,
    })?;
    let (crate_dir, board_feature) = firmware_crate(repo, request.board)?;
    // hilt's own firmware without the virtual NPU never offloads: it links
    // none of the offload code either.
    let no_offload = (board_feature.is_some() && !request.engine).then(|| "no-offload".to_string());
    // Nor, with its arena one memory, the pools' planning.
    let no_pools =
        (board_feature.is_some() && request.pools.is_none()).then(|| "no-pools".to_string());
    // Nor, on TFLM's schedule, the lean schedule's analysis and in-place
    // paths; nor, with constants in the tail, the constant image's checks.
    let no_lean = (board_feature.is_some() && request.schedule == Schedule::Tflm)
        .then(|| "no-lean".to_string());
    let no_image = (board_feature.is_some() && request.constants == ConstantsPlace::Tail)
        .then(|| "no-constant-image".to_string());
    let features = board_feature
        .into_iter()
        .chain(no_offload)
        .chain(no_pools)
        .chain(no_lean)
        .chain(no_image)
        .chain(request.cargo_features())
        .collect::<Vec<_>>()
        .join(",");
    let boards_dir = boards_dir(repo, request)?;
    let pools = request.pools.map(|p| p.join(",")).unwrap_or_default();
    let kernels = request.kernels_variable();
    let board_toml = boards_dir.join(format!("{}.toml", request.board.name));
    let sources = digest::source_digest(repo, &crate_dir, &[&board_toml, &request.board.memory_x])?;
    let remapping = path_remapping(repo);
    // The profile's debug info may be overridden for a debugging session
    // (`CARGO_PROFILE_RELEASE_DEBUG=full`): another ELF, the same code.
    let debug = std::env::var("CARGO_PROFILE_RELEASE_DEBUG").unwrap_or_default();
    let key = elf_key(
        request,
        slot,
        (&pools, &kernels),
        sources,
        &format!("{remapping};debug={debug}"),
    );
    let elf = repo
        .join("build/firmware/elves/base")
        .join(format!("{}-{key}.elf", request.board.name));
    // A cached ELF needs no lock: ELFs appear under their key whole (a
    // rename), so a run that finds one never waits behind another's build.
    if elf.is_file() {
        return Ok(elf);
    }
    // One build per firmware at a time: a second request for the same key
    // (another thread or process) waits for the first, then finds its ELF.
    let _key_lock = lock_file(&elf.with_extension("lock"))?;
    if elf.is_file() {
        // Built by whoever held the lock while this run waited for it.
        return Ok(elf);
    }
    let (target_dir, _folder_lock) = lock_a_build_folder(repo)?;
    let manifest = crate_dir.join("Cargo.toml");
    let binary = package_name(&manifest)?;
    let build = FirmwareBuild {
        request,
        crate_dir: &crate_dir,
        manifest: &manifest,
        features: &features,
        target_dir: &target_dir,
        boards_dir: &boards_dir,
        pools: &pools,
        kernels: &kernels,
        remapping: &remapping,
        slot,
    };
    build.run()?;
    let built = target_dir
        .join(&request.board.target)
        .join("release")
        .join(&binary);
    check_stack_room(&built, request)?;
    install(&built, &elf)?;
    Ok(elf)
}

/// The board's own folder (`NAME.toml` beside `NAME/memory.x`): boards may
/// be defined outside the repo (`--boards-dir`).
fn boards_dir(repo: &Path, request: &FirmwareRequest<'_>) -> Result<PathBuf, BuildError> {
    Ok(request
        .board
        .memory_x
        .parent()
        .and_then(Path::parent)
        .map(std::fs::canonicalize)
        .transpose()
        .map_err(|source| BuildError::Io {
            path: request.board.memory_x.clone(),
            source,
        })?
        .unwrap_or_else(|| repo.join("boards")))
}

/// One cargo build of a firmware crate, with everything its build script
/// reads.
struct FirmwareBuild<'a> {
    request: &'a FirmwareRequest<'a>,
    crate_dir: &'a Path,
    manifest: &'a Path,
    features: &'a str,
    target_dir: &'a Path,
    boards_dir: &'a Path,
    pools: &'a str,
    /// `HILT_KERNELS`: `all`, or the model's operators.
    kernels: &'a str,
    remapping: &'a str,
    slot: usize,
}

impl FirmwareBuild<'_> {
    /// The cargo command, its environment the firmware's settings.
    fn command(&self, verbose: bool) -> Command {
        let request = self.request;
        let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cargo
            .current_dir(self.crate_dir)
            .args(["build", "--release", "--manifest-path"])
            .arg(self.manifest)
            .arg(if verbose { "--verbose" } else { "--quiet" })
            .args(["--target", &request.board.target]);
        if !self.features.is_empty() {
            cargo.args(["--features", self.features]);
        }
        cargo.arg("--config").arg(self.remapping);
        cargo
            .env("CARGO_TARGET_DIR", self.target_dir)
            .env("HILT_BOARD", &request.board.name)
            .env("HILT_MODEL_SLOT", self.slot.to_string())
            .env("HILT_ARENA_SIZE", request.arena_size.to_string())
            .env("HILT_PLANNER", request.planner.name())
            .env("HILT_CANARY", request.canary.name())
            .env("HILT_SCHEDULE", request.schedule.name())
            .env("HILT_ALIGN", request.align.to_string())
            .env("HILT_POOLS", self.pools)
            .env("HILT_KERNELS", self.kernels)
            .env("HILT_ENGINE", ["none", "vnpu"][usize::from(request.engine)])
            .env(
                "CARGO_PROFILE_RELEASE_OPT_LEVEL",
                request.optimize.opt_level(),
            )
            .env("HILT_BOARDS_DIR", self.boards_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // With -v cargo's own output goes straight to the terminal as it
        // builds; without, it is kept for the error and a line per build
        // says what is being built and how long it took.
        // The slot's placeholder model: the build's own seed model, except
        // in a slot of just the model's size, which the seed may not fit;
        // there the model itself (the host writes it into a copy anyway).
        match (request.kernels, std::path::absolute(request.model.path())) {
            (KernelChoice::Model, Ok(model)) => cargo.env("HILT_MODEL", model),
            _ => cargo.env_remove("HILT_MODEL"),
        };
        cargo.stderr(if verbose {
            Stdio::inherit()
        } else {
            Stdio::piped()
        });
        cargo
    }

    /// Runs the build, saying what it builds and how long it took.
    fn run(&self) -> Result<(), BuildError> {
        let request = self.request;
        let verbose = VERBOSE.load(std::sync::atomic::Ordering::Relaxed);
        let mut cargo = self.command(verbose);
        let features = self.features;
        let kernels = match self.kernels {
            "all" => String::new(),
            some => format!(", the model's {} kernels", some.split(',').count()),
        };
        let what = format!(
            "firmware for {} ({}{}{}{kernels})",
            request.board.name,
            request.board.target,
            if features.is_empty() {
                ""
            } else {
                ", features "
            },
            features
        );
        eprintln!("hilt: building {what} ...");
        let started = std::time::Instant::now();
        let output = crate::children::spawn(&mut cargo)
            .and_then(crate::children::Registered::wait_with_output)
            .map_err(BuildError::Spawn)?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(build_failure(
                &request.board.name,
                if verbose {
                    "(cargo's output is above)"
                } else {
                    &stderr
                },
            ));
        }
        eprintln!(
            "hilt: built {what} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// Copies the built ELF to its key: under a temporary name, then renamed,
/// so that an ELF under its key is always whole (a later build reuses it
/// without looking inside).
fn install(built: &Path, elf: &Path) -> Result<(), BuildError> {
    std::fs::create_dir_all(elf.parent().unwrap_or(Path::new("."))).map_err(|source| {
        BuildError::Io {
            path: elf.into(),
            source,
        }
    })?;
    let partial = unique_partial(elf);
    std::fs::copy(built, &partial).map_err(|source| BuildError::Io {
        path: built.into(),
        source,
    })?;
    std::fs::rename(&partial, elf).map_err(|source| BuildError::Io {
        path: elf.into(),
        source,
    })
}

/// The stack a firmware is given when its board declares none (the
/// board's `stack_size`; its memory budget, checked before a build, counts
/// the same).
pub const MIN_STACK_BYTES: u64 = hilt_contract::board::MIN_STACK_BYTES;

/// The stack grows down from the top of RAM towards the arena, which sits
/// after the firmware's data: a stack that reaches the arena corrupts the
/// arena's tail (op data, tensor records) before any guard is checked, and
/// the run fails far from its cause. Refused at build time instead, with
/// the figures.
fn check_stack_room(elf: &Path, request: &FirmwareRequest<'_>) -> Result<(), BuildError> {
    use object::{Object, ObjectSection, ObjectSymbol, SectionFlags};
    let Some(ram) = request.board.memory.iter().find(|r| r.name == "RAM") else {
        return Ok(());
    };
    let bytes = std::fs::read(elf).map_err(|source| BuildError::Io {
        path: elf.into(),
        source,
    })?;
    let file = object::File::parse(&*bytes).map_err(|e| BuildError::Elf {
        path: elf.into(),
        problem: e.to_string(),
    })?;
    let ram_end = ram.origin + ram.length;
    // cortex-m-rt's initial stack pointer; the top of RAM by default.
    let top = file
        .symbols()
        .find(|s| s.name() == Ok("_stack_start"))
        .map_or(ram_end, |s| s.address());
    let allocated = |flags: SectionFlags| match flags {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_ALLOC) != 0,
        _ => true,
    };
    let data_end = file
        .sections()
        .filter(|s| allocated(s.flags()) && s.size() > 0)
        .filter(|s| (ram.origin..ram_end).contains(&s.address()))
        .map(|s| s.address() + s.size())
        .max()
        .unwrap_or(ram.origin);
    let stack = top.saturating_sub(data_end);
    let needed = request.board.stack_budget();
    if stack < needed {
        return Err(BuildError::Stack {
            board: request.board.name.clone(),
            stack,
            needed,
            arena: request.arena_size,
        });
    }
    Ok(())
}

/// The crate to build and the features the board gives it: hilt's firmware
/// picks the board by its `board-NAME` feature and also takes the board's
/// `features` (such as `core-kernels-only`); a board's own firmware crate
/// (`firmware = "…"`) has no board features and reads `HILT_BOARD`.
fn firmware_crate(repo: &Path, board: &Board) -> Result<(PathBuf, Option<String>), BuildError> {
    match &board.firmware {
        Some(dir) => {
            let dir = std::fs::canonicalize(dir).map_err(|source| BuildError::Io {
                path: dir.clone(),
                source,
            })?;
            Ok((dir, None))
        }
        None => {
            let mut features = vec![format!("board-{}", board.name)];
            for f in &board.features {
                if !features.contains(f) {
                    features.push(f.clone());
                }
            }
            Ok((repo.join("target/firmware"), Some(features.join(","))))
        }
    }
}

/// The firmware's binary name: its package's name (a firmware crate has one
/// binary, named after the package, as cargo names it by default).
fn package_name(manifest: &Path) -> Result<String, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|source| BuildError::Io {
        path: manifest.into(),
        source,
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| BuildError::Manifest {
        path: manifest.into(),
        problem: e.to_string(),
    })?;
    table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| BuildError::Manifest {
            path: manifest.into(),
            problem: "no [package] name: a firmware crate is a package with one binary".into(),
        })
}

/// A failed build, with the compiler's or build script's own last words
/// (without backtraces).
fn build_failure(board: &str, stderr: &str) -> BuildError {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.is_empty()
                || t.starts_with("at ")
                || t.chars().next().is_some_and(|c| c.is_ascii_digit())
                || t.starts_with("note:")
                || t.starts_with("stack backtrace"))
        })
        .collect();
    let tail = &lines[lines.len().saturating_sub(12)..];
    BuildError::Failed {
        board: board.to_string(),
        output: tail.join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_build_folder_sends_the_next_build_to_another() {
        let repo = std::env::temp_dir().join(format!("hilt-build-folders-{}", std::process::id()));
        let (first, _held) = lock_a_build_folder(&repo).unwrap();
        assert_eq!(first, repo.join("build/firmware/cache"));
        if locks::build_folders(&repo).len() > 1 {
            // The first folder's lock is held: the next build takes the
            // second at once instead of waiting.
            let (second, _also_held) = lock_a_build_folder(&repo).unwrap();
            assert_eq!(second, repo.join("build/firmware/cache-2"));
        }
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn a_fixed_slot_serves_every_model_that_fits_it_and_classes_the_rest() {
        let mib = 1024 * 1024;
        // Without a fixed slot: the size classes.
        assert_eq!(slot_for(None, 10_000), 128 * 1024);
        assert_eq!(slot_for(None, 300_000), 512 * 1024);
        // With one: the same slot for small and large models alike.
        assert_eq!(slot_for(Some(mib as u64), 10_000), mib);
        assert_eq!(slot_for(Some(mib as u64), 900_000), mib);
        // A model with its header just fits; one byte more takes its class.
        let fixed = 64 * 1024;
        let fits = fixed - model_slot::HEADER;
        assert_eq!(slot_for(Some(fixed as u64), fits), fixed);
        assert_eq!(
            slot_for(Some(fixed as u64), fits + 1),
            model_slot::capacity_for(fits + 1)
        );
    }

    #[test]
    fn the_path_remapping_names_the_repository_and_escapes_quotes() {
        let config = path_remapping(Path::new("/tmp/a \"b\" c"));
        assert!(
            config.starts_with("target.'cfg(target_os = \"none\")'.rustflags = [\"--remap-path-prefix=/tmp/a \\\"b\\\" c=/hilt\""),
            "{config}"
        );
    }
}
