//! The build-script half of a firmware that links `hilt-agent`, for hilt's
//! own board binaries and for yours alike. `hilt run` builds a firmware per
//! (board, model) and says what it wants in environment variables; this
//! reads them, with the board file, and writes into `OUT_DIR`:
//!
//! - `memory.x`: the board's memory map plus the `.hilt_arena` section (the
//!   arena, between `__hilt_arena_start` and `__hilt_arena_end`, where the
//!   host reads the guards) and the `.hilt_meta` record (which board the
//!   ELF is for); the linker finds it through `-Tlink.x` (cortex-m-rt);
//! - `model.slot`: the model slot ([`hilt_proto::model_slot`]): the model
//!   with its name and CRC-32, padded to `HILT_MODEL_SLOT` bytes so that the
//!   host can write another model into a copy of the built ELF;
//! - `hilt.rs`: the agent's [`Config`](../hilt_agent/struct.Config.html)
//!   as `config()`, the planner asked for as `PLANNER`, the kernels asked
//!   for as `resolver()`, and the statics (model
//!   in flash, arena, workspace, meta record) handed out once by
//!   `unsafe fn take() -> hilt_agent::Parts<'static>`.
//!
//! ```no_run
//! // in build.rs's main:
//! let build = hilt_firmware_build::FirmwareBuild::from_env().unwrap_or_else(|e| panic!("{e}"));
//! build.write().unwrap_or_else(|e| panic!("{e}"));
//! ```
//! and in the firmware: `mod hilt { include!(concat!(env!("OUT_DIR"), "/hilt.rs")); }`.
//!
//! Environment (all optional but the board): `HILT_BOARD` (else the one
//! `board-NAME` cargo feature), `HILT_BOARDS_DIR` (default: the repo's
//! `boards/`), `HILT_MODEL` (default: the repo's seed model),
//! `HILT_MODEL_SLOT` (the slot's bytes, header included; default: just
//! enough for the model), `HILT_ARENA_SIZE` (default: the board's
//! `arena_size`), `HILT_PLANNER`
//! (`linear`, `greedy`, `offline`; default greedy), `HILT_CANARY` (`off`,
//! `bounds`, `buffers`; default off), `HILT_ALIGN` (default 16),
//! `HILT_POOLS` (the board pools the model's buffers may use, by name,
//! comma-separated; default: the arena as one memory), `HILT_KERNELS`
//! (`all`, the default: every kernel, a firmware for any model; or the
//! model's builtin operators by name, comma-separated, e.g.
//! `FULLY_CONNECTED,SOFTMAX`: a firmware that links only those kernels;
//! a name may carry the types the model gives it, `CONV_2D:INT8`, and a
//! kernel with a variant per type then links only those),
//! `HILT_ENGINE` (`vnpu`, the default: the firmware gives the host its
//! virtual NPU to offload to; `none`: it links no offload engine, for a
//! scenario that offloads nothing; read as [`FirmwareBuild::engine`]).
//!
//! The board file is read and checked by `hilt-contract`, the same typed
//! contract the host uses ([`FirmwareBuild::board`]); the planner and
//! canary choices are the runtime's own types ([`PlannerKind`],
//! [`CanaryMode`]), and the model's CRC-32 is the project's one
//! ([`hilt_contract::crc32`]).

use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hilt_proto::model_slot;
use hilt_runtime::schedule::Schedule;

pub use hilt_contract::board::{self, Board};
pub use hilt_contract::{CanaryMode, PlannerKind};

/// What is wrong with the build's inputs.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// Neither `HILT_BOARD` nor a `board-NAME` feature.
    NoBoard,
    /// More than one `board-NAME` feature.
    SeveralBoards(Vec<String>),
    /// A `HILT_*` variable with a value that cannot work.
    Variable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// The board file or its `memory.x` is unreadable or fails the
    /// contract's checks.
    Board(hilt_contract::ConfigError),
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoBoard => f.write_str(
                "no board: set HILT_BOARD=NAME (boards/NAME.toml) or enable one board-NAME feature",
            ),
            BuildError::SeveralBoards(b) => write!(f, "several board features enabled: {b:?}"),
            BuildError::Variable {
                name,
                value,
                expected,
            } => write!(f, "{name}={value:?}: {expected}"),
            BuildError::Board(e) => write!(f, "{e}"),
            BuildError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for BuildError {}

/// One firmware build's inputs, read and checked.
#[derive(Debug, Clone)]
pub struct FirmwareBuild {
    /// The board, read and checked by `hilt-contract` (its name, memory
    /// map, clock, UART...; `board.memory_x` is its linker script).
    pub board: Board,
    /// `boards/NAME.toml`.
    pub board_file: PathBuf,
    /// Arena bytes (`HILT_ARENA_SIZE`, else the board's).
    pub arena_size: u64,
    /// Planner asked for.
    pub planner: PlannerKind,
    /// Canary mode asked for.
    pub canary: CanaryMode,
    /// The schedule (`HILT_SCHEDULE`: `tflm` or `lean`; default tflm).
    pub schedule: Schedule,
    /// Activation alignment.
    pub align: u32,
    /// The arena's memory pools (`HILT_POOLS` over the board's `pools`).
    pub pools: hilt_runtime::pool::PoolLayout,
    /// The builtin operators whose kernels the firmware links
    /// (`HILT_KERNELS`); `None`: every kernel hilt has.
    pub kernels: Option<Vec<String>>,
    /// Whether the firmware links the virtual NPU the host may offload to
    /// (`HILT_ENGINE`): a firmware without it is smaller (about 16 KB on a
    /// Cortex-M4) and answers an offload request with an error.
    pub engine: bool,
    /// The model file.
    pub model: PathBuf,
    /// Its bytes.
    pub model_bytes: Vec<u8>,
    /// The model slot's bytes, header included (a multiple of 64).
    pub slot_len: usize,
    /// Where the outputs go.
    pub out_dir: PathBuf,
}

fn var(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The repository this crate sits in (`target/firmware-build`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl FirmwareBuild {
    /// Reads the environment cargo and `hilt run` set, and the board file.
    pub fn from_env() -> Result<Self, BuildError> {
        let name = board_name()?;
        let boards_dir =
            var("HILT_BOARDS_DIR").map_or_else(|| repo().join("boards"), PathBuf::from);
        let board_file = boards_dir.join(format!("{name}.toml"));
        let board =
            hilt_contract::board::load_named(&boards_dir, &name).map_err(BuildError::Board)?;
        let arena_size = match var("HILT_ARENA_SIZE") {
            Some(v) => v.parse().map_err(|_| BuildError::Variable {
                name: "HILT_ARENA_SIZE",
                value: v,
                expected: "a number of bytes",
            })?,
            None => board.arena_size,
        };
        let model = var("HILT_MODEL").map_or_else(
            || repo().join("scenarios/models/seed_fc_float.tflite"),
            PathBuf::from,
        );
        let model_bytes = std::fs::read(&model).map_err(io(&model))?;
        let slot_len = slot_len(model_bytes.len())?;
        let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").ok_or(BuildError::Variable {
            name: "OUT_DIR",
            value: String::new(),
            expected: "set by cargo for a build script",
        })?);
        let pools = pools(&board_file, &board, arena_size)?;
        Ok(FirmwareBuild {
            pools,
            board,
            board_file,
            arena_size,
            planner: planner()?,
            canary: canary()?,
            schedule: schedule()?,
            align: align()?,
            kernels: kernels()?,
            engine: engine()?,
            model,
            model_bytes,
            slot_len,
            out_dir,
        })
    }

    /// Writes `memory.x`, `model.slot` and `hilt.rs` to `OUT_DIR`, and
    /// tells cargo where the linker script is and when to build again.
    pub fn write(&self) -> Result<(), BuildError> {
        let memory_x = &self.board.memory_x;
        let mut script = std::fs::read_to_string(memory_x).map_err(io(memory_x))?;
        script.push_str(&sections(&self.board));
        let out = |name: &str| self.out_dir.join(name);
        std::fs::write(out("memory.x"), script).map_err(io(&out("memory.x")))?;
        let mut slot = vec![0u8; self.slot_len];
        model_slot::write(&mut slot, &self.model_bytes, &self.model_name()).map_err(|e| {
            BuildError::Variable {
                name: "HILT_MODEL_SLOT",
                value: format!("{} ({e})", self.slot_len),
                expected: "at least the model's bytes plus the 64-byte header",
            }
        })?;
        std::fs::write(out("model.slot"), slot).map_err(io(&out("model.slot")))?;
        std::fs::write(out("hilt.rs"), self.agent_source()).map_err(io(&out("hilt.rs")))?;
        println!("cargo:rustc-link-search={}", self.out_dir.display());
        for path in [&self.board_file, memory_x, &self.model] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        Ok(())
    }

    /// The firmware's `hilt` module: configuration and statics.
    pub fn agent_source(&self) -> String {
        let mut s = String::from(
            "// Written by hilt-firmware-build from the board file and what `hilt run` asked for.\n",
        );
        let lines = [
            format!(
                "/// The board this firmware is built for.\npub const BOARD: &str = {:?};",
                self.board.name
            ),
            format!(
                "/// Arena bytes.\npub const ARENA_SIZE: usize = {};",
                self.arena_size
            ),
            format!(
                "/// Core clock, Hz.\npub const CLOCK_HZ: u32 = {};",
                self.board.core_clock_hz
            ),
            format!(
                "/// Bytes of the model slot (header, model, zeros).\npub const MODEL_SLOT_LEN: usize = {};",
                self.slot_len
            ),
            planner_source(self.planner),
            format!(
                "/// What the agent says in its Hello (the model's name and CRC-32 come\n\
                 /// from the slot, whichever model the host wrote there), and how it lays\n\
                 /// out the arena.\n\
                 pub fn config() -> hilt_agent::Config {{\n    let model = slot();\n    hilt_agent::Config {{\n    board: BOARD,\n    model_name: model.name,\n    model_hash: model.crc,\n    clock_hz: CLOCK_HZ,\n    alloc: hilt_agent::runtime::allocation::AllocOptions {{\n        align: {},\n        canary: hilt_agent::runtime::canary::CanaryMode::{:?},\n        pools: {},\n        schedule: hilt_agent::runtime::schedule::Schedule::{:?},\n    }},\n}}\n}}",
                self.align,
                self.canary,
                pools_source(&self.pools),
                self.schedule
            ),
            self.resolver_source(),
        ];
        for line in lines {
            let _ = writeln!(s, "{line}");
        }
        s.push_str(STATICS);
        s
    }

    /// `Resolver` and `resolver()`: every kernel, or only those of the operators asked
    /// for, each looked up at compile time so that no other kernel is
    /// linked.
    fn resolver_source(&self) -> String {
        let head = "pub fn resolver() -> Resolver {";
        let Some(ops) = &self.kernels else {
            return format!(
                "/// The kernel table's type.\npub type Resolver = hilt_agent::runtime::kernels::OpResolver<{{ hilt_agent::runtime::kernels::BUILTINS_CAPACITY }}>;\n/// Every kernel hilt has: a firmware for any model.\n{head}\n    hilt_agent::runtime::kernels::all_builtins()\n}}"
            );
        };
        // Room for the model's kernels and the firmware's own custom ones
        // (`CUSTOM_KERNELS`): a table no larger than the model needs.
        let mut s = format!(
            "/// The kernel table's type.\npub type Resolver = hilt_agent::runtime::kernels::OpResolver<{}>;\n/// The kernels of the model's operators only ({}).\n{head}\n    use hilt_agent::runtime::schema::BuiltinOperator as Op;\n    const KERNELS: [(Op, Option<hilt_agent::runtime::kernels::Registration>); {}] = [\n",
            ops.len() + CUSTOM_KERNELS,
            ops.join(", "),
            ops.len()
        );
        for entry in ops {
            let (op, mask) = kernel_entry(entry).unwrap_or((entry.as_str(), None));
            let _ = match mask {
                None => writeln!(
                    s,
                    "        (Op::{op}, hilt_agent::runtime::kernels::builtin(Op::{op})),"
                ),
                Some(mask) => writeln!(
                    s,
                    "        (Op::{op}, hilt_agent::runtime::kernels::builtin_typed::<{mask}>(Op::{op})),"
                ),
            };
        }
        s.push_str("    ];\n    let mut r = hilt_agent::runtime::kernels::OpResolver::new();\n    for (op, kernel) in KERNELS {\n        if let Some(kernel) = kernel {\n            let _ = r.add(op, kernel);\n        }\n    }\n    r\n}");
        s
    }
}

/// Custom kernels a firmware adds to the table after `resolver()` (hilt's
/// firmware: the virtual NPU's `NEGATE`).
const CUSTOM_KERNELS: usize = 1;

impl FirmwareBuild {
    /// The model's file name, as the slot header carries it.
    fn model_name(&self) -> String {
        self.model
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// `HILT_MODEL_SLOT`, else the least slot that holds `model_len` bytes; a
/// multiple of 64 (the slot's alignment).
fn slot_len(model_len: usize) -> Result<usize, BuildError> {
    let least = (model_len + model_slot::HEADER).next_multiple_of(64);
    match var("HILT_MODEL_SLOT") {
        None => Ok(least),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= least && n % 64 == 0 => Ok(n),
            _ => Err(BuildError::Variable {
                name: "HILT_MODEL_SLOT",
                value: v,
                expected: "a multiple of 64 bytes holding the model and its 64-byte header",
            }),
        },
    }
}

fn board_name() -> Result<String, BuildError> {
    if let Some(b) = var("HILT_BOARD").filter(|b| !b.is_empty()) {
        return Ok(b);
    }
    let boards: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_BOARD_")
                .map(|b| b.to_lowercase().replace('_', "-"))
        })
        .collect();
    match boards.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(BuildError::NoBoard),
        _ => Err(BuildError::SeveralBoards(boards)),
    }
}

fn planner() -> Result<PlannerKind, BuildError> {
    match var("HILT_PLANNER") {
        None => Ok(PlannerKind::default()),
        Some(v) => v.parse().map_err(|_| BuildError::Variable {
            name: "HILT_PLANNER",
            value: v,
            expected: "use linear, greedy, offline or optimal",
        }),
    }
}

/// `HILT_KERNELS`: `None` for every kernel (unset, empty or `all`), else
/// the operators named, each one hilt has a kernel for.
fn engine() -> Result<bool, BuildError> {
    match var("HILT_ENGINE").as_deref() {
        None | Some("vnpu") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => Err(BuildError::Variable {
            name: "HILT_ENGINE",
            value: other.to_string(),
            expected: "vnpu or none",
        }),
    }
}

fn kernels() -> Result<Option<Vec<String>>, BuildError> {
    let Some(v) = var("HILT_KERNELS").filter(|v| !v.is_empty() && v != "all") else {
        return Ok(None);
    };
    let mut ops: Vec<String> = Vec::new();
    for entry in v.split(',').map(str::trim) {
        let known = kernel_entry(entry).is_some_and(|(name, _)| {
            hilt_runtime::schema::BuiltinOperator::ENUM_VALUES
                .iter()
                .find(|op| op.variant_name() == Some(name))
                .is_some_and(|&op| hilt_runtime::kernels::builtin(op).is_some())
        });
        if !known {
            return Err(BuildError::Variable {
                name: "HILT_KERNELS",
                value: v.clone(),
                expected: "all, or builtin operators hilt has kernels for, by name, each with the \
                           types it needs if not all (CONV_2D:INT8,SOFTMAX)",
            });
        }
        if !ops.iter().any(|o| o == entry) {
            ops.push(entry.to_string());
        }
    }
    Ok(Some(ops))
}

/// One `HILT_KERNELS` entry: the operator's name and, when types follow it
/// (`CONV_2D:INT8:INT16`), their [`hilt_runtime::kernels::types`] bits;
/// `None` for a type name hilt's kernels have no variant for.
fn kernel_entry(entry: &str) -> Option<(&str, Option<u8>)> {
    use hilt_runtime::kernels::types;
    let mut parts = entry.split(':');
    let name = parts.next()?;
    let mut mask = None;
    for dtype in parts {
        let bit = match dtype {
            "FLOAT32" => types::FLOAT32,
            "INT8" => types::INT8,
            "INT16" => types::INT16,
            _ => return None,
        };
        mask = Some(mask.unwrap_or(0) | bit);
    }
    Some((name, mask))
}

fn schedule() -> Result<Schedule, BuildError> {
    match var("HILT_SCHEDULE").as_deref() {
        None | Some("tflm") => Ok(Schedule::Tflm),
        Some("lean") => Ok(Schedule::Lean),
        Some(other) => Err(BuildError::Variable {
            name: "HILT_SCHEDULE",
            value: other.to_string(),
            expected: "use tflm or lean",
        }),
    }
}

fn canary() -> Result<CanaryMode, BuildError> {
    match var("HILT_CANARY") {
        None => Ok(CanaryMode::default()),
        Some(v) => v.parse().map_err(|_| BuildError::Variable {
            name: "HILT_CANARY",
            value: v,
            expected: "use off, bounds or buffers",
        }),
    }
}

/// `HILT_POOLS` over the board's pools, checked against the arena.
fn pools(
    board_file: &Path,
    board: &Board,
    arena_size: u64,
) -> Result<hilt_runtime::pool::PoolLayout, BuildError> {
    let chosen = var("HILT_POOLS").filter(|v| !v.is_empty()).map(|v| {
        v.split(',')
            .map(|s| s.trim().to_string())
            .collect::<Vec<_>>()
    });
    let layout =
        hilt_contract::pools::layout(board_file, &board.name, &board.pools, chosen.as_deref())
            .map_err(BuildError::Board)?;
    layout
        .check_arena(arena_size.min(u64::from(u32::MAX)) as u32)
        .map_err(|e| BuildError::Variable {
            name: "HILT_ARENA_SIZE",
            value: arena_size.to_string(),
            expected: if e == (hilt_runtime::pool::PoolError::TooLarge) {
                "an arena under 4 GiB"
            } else {
                "the size of the board's pools when HILT_POOLS is set"
            },
        })?;
    Ok(layout)
}

/// The pools as a constant expression (checked here, so the `match` in
/// the firmware never takes its error arm).
fn pools_source(layout: &hilt_runtime::pool::PoolLayout) -> String {
    if !layout.is_split() {
        return "hilt_agent::runtime::pool::PoolLayout::WHOLE".into();
    }
    let mut s = String::from("match hilt_agent::runtime::pool::PoolLayout::new(&[");
    for p in layout.pools() {
        let _ = write!(
            s,
            "hilt_agent::runtime::pool::Pool {{ size: {}, reach: hilt_agent::runtime::pool::Reach::from_bits({}), cacheable: {}, planned: {} }}, ",
            p.size,
            p.reach.bits(),
            p.cacheable,
            p.planned
        );
    }
    s.push_str(
        "]) { Ok(layout) => layout, Err(_) => panic!(\"pools checked by the build script\") }",
    );
    s
}

fn align() -> Result<u32, BuildError> {
    let Some(v) = var("HILT_ALIGN") else {
        return Ok(16);
    };
    match v.parse::<u32>() {
        Ok(a) if a.is_power_of_two() && a <= 1 << 20 => Ok(a),
        _ => Err(BuildError::Variable {
            name: "HILT_ALIGN",
            value: v,
            expected: "a power of two up to 1 MiB",
        }),
    }
}

/// Placed after the board's MEMORY: the arena in its own section after
/// `.bss` (so the map file and the host find it), in `RAM` or, when the
/// board defines one, in its own `ARENA` region (at that region's start:
/// the first pool then begins where that memory does); and the meta record.
fn sections(board: &Board) -> String {
    // In RAM the arena goes after `.bss`, inside cortex-m-rt's zeroing
    // (which ends where the sections inserted after `.bss` end). In a
    // region of its own it goes before `.data`: after `.bss` it would move
    // cortex-m-rt's `__ebss` into that region, below `__sbss`, and `.bss`
    // would never be zeroed. Every section after `.data` names its region,
    // so nothing else moves.
    let (region, place) = if board
        .memory
        .iter()
        .any(|r| r.name == hilt_contract::board::ARENA_REGION)
    {
        (hilt_contract::board::ARENA_REGION, "BEFORE .data")
    } else {
        ("RAM", "AFTER .bss")
    };
    format!(
        "
/* hilt: the tensor arena in its own named section */
SECTIONS
{{
  .hilt_arena (NOLOAD) : ALIGN(16)
  {{
    __hilt_arena_start = .;
    *(.hilt_arena .hilt_arena.*);
    __hilt_arena_end = .;
  }} > {region}
}} INSERT {place};
/* hilt: which board and model this ELF is for (read by the host) */
SECTIONS
{{
  .hilt_meta (INFO) :
  {{
    KEEP(*(.hilt_meta));
  }}
}} INSERT AFTER .hilt_arena;
"
    )
}

/// The statics every firmware needs, handed out once by `take`.
const STATICS: &str = r#"
/// The model slot, in flash: the model with its name and CRC-32. The host
/// finds it by this symbol and writes each scenario's model into a copy of
/// the ELF, so one build serves every model that fits.
#[unsafe(no_mangle)]
#[used]
static HILT_MODEL_SLOT: hilt_agent::Aligned<[u8; MODEL_SLOT_LEN]> =
    hilt_agent::Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/model.slot")));

/// The model the slot holds (none when its header is damaged: the agent
/// then reports that it has no model).
fn slot() -> hilt_agent::proto::model_slot::SlotModel<'static> {
    // The bytes are rewritten after the build: the compiler must not read
    // the ones it was built with, so the slot is reached through a pointer
    // it cannot see into.
    let bytes: &'static [u8; MODEL_SLOT_LEN] = core::hint::black_box(&HILT_MODEL_SLOT.0);
    hilt_agent::proto::model_slot::read(bytes).unwrap_or(
        hilt_agent::proto::model_slot::SlotModel { bytes: &[], crc: 0, name: "", constants: &[] },
    )
}

/// The tensor arena, in its own section so the map file and the host's
/// canary checks find it (`__hilt_arena_start`).
#[unsafe(link_section = ".hilt_arena")]
static mut ARENA: hilt_agent::Aligned<[u8; ARENA_SIZE]> = hilt_agent::Aligned([0; ARENA_SIZE]);

/// The session's buffers, in .bss rather than on the stack.
static mut WORKSPACE: hilt_agent::Workspace = hilt_agent::Workspace::new();

/// What this ELF is for, read by the host before it runs the ELF on a board.
#[unsafe(link_section = ".hilt_meta")]
#[used]
static META: [u8; hilt_agent::META_LEN] = hilt_agent::meta(BOARD);

/// The model, the arena and the workspace, for the agent.
///
/// # Safety
/// Call once: the arena and the workspace are handed out as `&'static mut`.
pub unsafe fn take() -> hilt_agent::Parts<'static> {
    let (arena, workspace) = (&raw mut ARENA, &raw mut WORKSPACE);
    let slot = slot();
    hilt_agent::Parts {
        model: slot.bytes,
        constants: slot.constants,
        // SAFETY: the caller calls this once: these are the only references.
        arena: unsafe { &mut (*arena).0 },
        workspace: unsafe { &mut *workspace },
    }
}
"#;

/// `PLANNER`: the planner the scenario asks for, as the type that links it
/// alone (`hilt_agent::PlannerSource`), so the firmware carries one planner.
fn planner_source(planner: PlannerKind) -> String {
    let (ty, value) = match planner {
        PlannerKind::Linear => (
            "hilt_agent::runtime::planner::Linear",
            "hilt_agent::runtime::planner::Linear",
        ),
        PlannerKind::Greedy => (
            "hilt_agent::runtime::planner::Greedy",
            "hilt_agent::runtime::planner::Greedy",
        ),
        PlannerKind::Optimal => (
            "hilt_agent::runtime::planner::Optimal",
            "hilt_agent::runtime::planner::Optimal::ON_TARGET",
        ),
        PlannerKind::Offline => (
            "hilt_agent::OfflineFromModel",
            "hilt_agent::OfflineFromModel",
        ),
    };
    format!(
        "/// The planner the scenario asks for ({}).\n#[allow(dead_code)]\npub const PLANNER: {ty} = {value};",
        planner.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> FirmwareBuild {
        // A shipped board, checked by the contract, renamed.
        let mut board = hilt_contract::board::load_named(&repo().join("boards"), "qemu-mps2-an386")
            .expect("a shipped board");
        board.name = "qemu-x".into();
        board.core_clock_hz = 25_000_000;
        FirmwareBuild {
            board,
            board_file: "boards/qemu-x.toml".into(),
            arena_size: 4096,
            planner: PlannerKind::Offline,
            canary: CanaryMode::Buffers,
            schedule: Schedule::Lean,
            align: 64,
            pools: hilt_runtime::pool::PoolLayout::WHOLE,
            kernels: None,
            engine: true,
            model: "/models/tiny.tflite".into(),
            model_bytes: b"123456789".to_vec(),
            slot_len: 128,
            out_dir: "/out".into(),
        }
    }

    #[test]
    fn the_agent_source_carries_every_setting() {
        let s = build().agent_source();
        for expected in [
            "pub const BOARD: &str = \"qemu-x\";",
            "pub const ARENA_SIZE: usize = 4096;",
            "pub const CLOCK_HZ: u32 = 25000000;",
            "pub const MODEL_SLOT_LEN: usize = 128;",
            "static HILT_MODEL_SLOT: hilt_agent::Aligned<[u8; MODEL_SLOT_LEN]>",
            "model_name: model.name,",
            "model_hash: model.crc,",
            "pub const PLANNER: hilt_agent::OfflineFromModel = hilt_agent::OfflineFromModel;",
            "align: 64,",
            "CanaryMode::Buffers,",
            "#[unsafe(link_section = \".hilt_arena\")]",
            "#[unsafe(link_section = \".hilt_meta\")]",
            "pub unsafe fn take() -> hilt_agent::Parts<'static>",
        ] {
            assert!(s.contains(expected), "missing {expected:?} in\n{s}");
        }
    }

    #[test]
    fn split_pools_are_written_as_a_checked_constant() {
        use hilt_runtime::pool::{Pool, PoolLayout, Reach};
        assert!(
            build()
                .agent_source()
                .contains("pools: hilt_agent::runtime::pool::PoolLayout::WHOLE,")
        );
        let mut split = build();
        split.pools = PoolLayout::new(&[
            Pool::new(1024, Reach::CPU),
            Pool::new(3072, Reach::CPU.with(Reach::ACCEL)).cacheable(true),
        ])
        .unwrap();
        let s = split.agent_source();
        for expected in [
            "Pool { size: 1024, reach: hilt_agent::runtime::pool::Reach::from_bits(1), cacheable: false, planned: true }",
            "Pool { size: 3072, reach: hilt_agent::runtime::pool::Reach::from_bits(3), cacheable: true, planned: true }",
        ] {
            assert!(s.contains(expected), "missing {expected:?} in\n{s}");
        }
    }

    #[test]
    fn a_model_specific_firmware_names_only_its_kernels() {
        let every = build().agent_source();
        assert!(
            every.contains("    hilt_agent::runtime::kernels::all_builtins()\n"),
            "{every}"
        );
        let mut own = build();
        own.kernels = Some(vec!["FULLY_CONNECTED:INT8:INT16".into(), "SOFTMAX".into()]);
        let s = own.agent_source();
        for expected in [
            "(FULLY_CONNECTED:INT8:INT16, SOFTMAX)",
            "(Op::FULLY_CONNECTED, hilt_agent::runtime::kernels::builtin_typed::<6>(Op::FULLY_CONNECTED)),",
            "(Op::SOFTMAX, hilt_agent::runtime::kernels::builtin(Op::SOFTMAX)),",
        ] {
            assert!(s.contains(expected), "missing {expected:?} in\n{s}");
        }
        assert!(!s.contains("all_builtins"), "{s}");
    }

    #[test]
    fn an_arena_region_of_its_own_keeps_bss_zeroing_intact() {
        // In RAM: after .bss, as every board before pools.
        let ram = sections(&build().board);
        assert!(ram.contains("} > RAM\n} INSERT AFTER .bss;"), "{ram}");
        // The F746 gives the arena its own region (DTCM + SRAM1): linked
        // there, before .data, so cortex-m-rt's __ebss stays in RAM.
        let f746 = hilt_contract::board::load_named(&repo().join("boards"), "stm32f746g-disco")
            .expect("a shipped board");
        let own = sections(&f746);
        assert!(own.contains("} > ARENA\n} INSERT BEFORE .data;"), "{own}");
        assert_eq!(f746.pools.len(), 2);
    }

    #[test]
    fn bad_settings_say_what_they_may_be() {
        let e = BuildError::Variable {
            name: "HILT_CANARY",
            value: "loud".into(),
            expected: "use off, bounds or buffers",
        };
        assert_eq!(
            e.to_string(),
            "HILT_CANARY=\"loud\": use off, bounds or buffers"
        );
        assert!(BuildError::NoBoard.to_string().contains("HILT_BOARD"));
    }
}
