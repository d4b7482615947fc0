//! The firmware builds' locks: a build folder each build holds while it
//! runs (two folders on two cores or more), and a lock per ELF key so that
//! two requests for one firmware build it once.

use std::path::{Path, PathBuf};

use super::BuildError;

/// Build folders firmware builds may use at once. Dependencies are built
/// once per folder and a change of slot, arena, planner, canary or features
/// only re-runs the firmware crate's build script (it declares those
/// inputs); the final fat-LTO link runs on one core, so on a machine with
/// two cores or more two builds in two folders take the time of one.
pub(super) fn build_folders(repo: &Path) -> Vec<PathBuf> {
    (1..=parallel_builds())
        .map(|k| match k {
            1 => repo.join("build/firmware/cache"),
            k => repo.join(format!("build/firmware/cache-{k}")),
        })
        .collect()
}

/// How many firmware builds may run at once: one per build folder, two on
/// a machine with two cores or more (see [`build_folders`]).
pub fn parallel_builds() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    cores.min(2)
}

/// Takes the lock of a free build folder (waiting while all are busy):
/// held from the build until its ELF is copied out, so no other build
/// replaces the folder's output in between. Released when the returned
/// file is dropped.
pub(super) fn lock_a_build_folder(repo: &Path) -> Result<(PathBuf, std::fs::File), BuildError> {
    let folders = build_folders(repo);
    loop {
        for dir in &folders {
            let lock_path = dir.join("hilt-build.lock");
            let lock = open_lock(&lock_path)?;
            match lock.try_lock() {
                Ok(()) => return Ok((dir.clone(), lock)),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(BuildError::Io {
                        path: lock_path,
                        source,
                    });
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Takes the lock file at `path` (made if new, its folder too), waiting
/// for whoever holds it; released when the returned file is dropped.
pub(super) fn lock_file(path: &Path) -> Result<std::fs::File, BuildError> {
    let lock = open_lock(path)?;
    lock.lock().map_err(|source| BuildError::Io {
        path: path.into(),
        source,
    })?;
    Ok(lock)
}

/// Opens (or makes) a lock file and its folder.
fn open_lock(path: &Path) -> Result<std::fs::File, BuildError> {
    let io = |source| BuildError::Io {
        path: path.into(),
        source,
    };
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(io)?;
    std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io)
}
