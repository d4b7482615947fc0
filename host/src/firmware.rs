//! Builds the firmware for a (board, model) pair, cached under `build/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::board::Board;
use hilt_contract::PlannerKind;

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
    pub model: &'a Path,
    /// Arena bytes.
    pub arena_size: u64,
    /// Planner.
    pub planner: PlannerKind,
    /// Extra firmware features (fault injection in tests).
    pub features: &'a [String],
    /// Canary mode (`off`, `bounds`, `buffers`).
    pub canary: &'a str,
    /// Activation buffer alignment.
    pub align: u32,
}

impl<'a> FirmwareRequest<'a> {
    /// The firmware a scenario needs on a board: its model, its arena size
    /// (else the board's), planner, canaries, alignment and test features.
    pub fn for_scenario(board: &'a Board, scenario: &'a crate::config::scenario::Scenario) -> Self {
        FirmwareRequest {
            board,
            model: &scenario.model,
            arena_size: scenario.arena_size.unwrap_or(board.arena_size),
            planner: scenario.planner,
            features: &scenario.firmware_features,
            canary: &scenario.canary,
            align: scenario.align,
        }
    }
}

fn fnv(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Builds (or reuses) the firmware ELF; returns its path, named after the
/// board and a key over everything that went into it.
pub fn build(repo: &Path, request: &FirmwareRequest<'_>) -> Result<PathBuf, BuildError> {
    let model = std::fs::read(request.model).map_err(|source| BuildError::Io {
        path: request.model.into(),
        source,
    })?;
    // cargo runs the build script in the firmware's folder: paths must be absolute.
    let model_path = std::fs::canonicalize(request.model).map_err(|source| BuildError::Io {
        path: request.model.into(),
        source,
    })?;
    let repo = &std::fs::canonicalize(repo).map_err(|source| BuildError::Io {
        path: repo.into(),
        source,
    })?;
    let planner = request.planner.name();
    let extra = request.features.join(",");
    let key = format!(
        "{:016x}",
        fnv(
            format!(
                "{}:{planner}:{extra}:{}:{}",
                request.arena_size, request.canary, request.align
            )
            .as_bytes(),
            fnv(&model, 0)
        )
    );
    let mut features = format!("board-{}", request.board.name);
    for f in request.features {
        features.push(',');
        features.push_str(f);
    }
    // One build folder for every firmware: dependencies are built once; a
    // change of model, arena, planner, canary or features only re-runs the
    // firmware crate's build script (it declares those inputs), and each
    // result is copied out under its key before the next build.
    let target_dir = repo.join("build/firmware/cache");
    // Builds share one output folder: hold a lock from the build until the
    // ELF is copied out, so a concurrent build (another thread or process)
    // cannot replace it in between.
    let _lock = lock_build_folder(&target_dir)?;
    // The board's own folder (`NAME.toml` beside `NAME/memory.x`): boards
    // may be defined outside the repo (`--boards-dir`).
    let boards_dir = request
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
        .unwrap_or_else(|| repo.join("boards"));
    let manifest = repo.join("target/firmware/Cargo.toml");
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(repo.join("target/firmware"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .args(["--target", &request.board.target, "--features", &features])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("HILT_MODEL", &model_path)
        .env("HILT_ARENA_SIZE", request.arena_size.to_string())
        .env("HILT_PLANNER", planner)
        .env("HILT_CANARY", request.canary)
        .env("HILT_ALIGN", request.align.to_string())
        .env("HILT_BOARDS_DIR", &boards_dir)
        .output()
        .map_err(BuildError::Spawn)?;
    if !output.status.success() {
        return Err(build_failure(
            &request.board.name,
            &String::from_utf8_lossy(&output.stderr),
        ));
    }
    let built = target_dir
        .join(&request.board.target)
        .join("release/hilt-firmware");
    let elf = repo
        .join("build/firmware/elves")
        .join(format!("{}-{key}.elf", request.board.name));
    std::fs::create_dir_all(elf.parent().unwrap_or(repo)).map_err(|source| BuildError::Io {
        path: elf.clone(),
        source,
    })?;
    std::fs::copy(&built, &elf).map_err(|source| BuildError::Io {
        path: built.clone(),
        source,
    })?;
    Ok(elf)
}

/// Takes the lock of the shared build folder `target_dir` (made if new);
/// released when the returned file is dropped.
fn lock_build_folder(target_dir: &Path) -> Result<std::fs::File, BuildError> {
    std::fs::create_dir_all(target_dir).map_err(|source| BuildError::Io {
        path: target_dir.to_path_buf(),
        source,
    })?;
    let lock_path = target_dir.join("hilt-build.lock");
    let lock = std::fs::File::create(&lock_path).map_err(|source| BuildError::Io {
        path: lock_path.clone(),
        source,
    })?;
    lock.lock().map_err(|source| BuildError::Io {
        path: lock_path,
        source,
    })?;
    Ok(lock)
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
