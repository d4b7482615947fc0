//! What a firmware build's cache key covers of the repository and the
//! board: every source file the build reads, and of a board's files what
//! the firmware reads of them.

use std::path::{Path, PathBuf};

use super::{BuildError, fnv};

/// A digest of every file a firmware build reads from the repository: the
/// crates under `target/` (their sources, manifests, lock files, linker
/// scripts, build scripts and `.cargo` flags; not their tests, benches or
/// fuzzers), the
/// pinned toolchain, the firmware crate built (a board's own may live
/// elsewhere) and the board's own files. A build whose key (this and
/// the request) names an ELF already built is not run again: cargo would
/// rebuild anyway whenever another (board, model) was built in between, as
/// every firmware shares one output folder, and a fat-LTO link costs seconds.
pub(super) fn source_digest(
    repo: &Path,
    crate_dir: &Path,
    board_files: &[&Path],
) -> Result<u64, BuildError> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), BuildError> {
        let entries = std::fs::read_dir(dir).map_err(|source| BuildError::Io {
            path: dir.into(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| BuildError::Io {
                path: dir.into(),
                source,
            })?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                // `.cargo` holds the crates' build flags (rustflags).
                let skipped = (name.starts_with('.') && name != ".cargo")
                    || matches!(name.as_ref(), "tests" | "benches" | "fuzz" | "build");
                if !skipped {
                    walk(&path, files)?;
                }
            } else if [".rs", ".toml", ".lock", ".x", ".ld", ".fbs"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                files.push(path);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    let target = repo.join("target");
    walk(&target, &mut files)?;
    // A board's own firmware crate may live outside `target/`.
    if !crate_dir.starts_with(&target) {
        walk(crate_dir, &mut files)?;
    }
    files.sort();
    files.push(repo.join("rust-toolchain.toml"));
    let read = |file: &Path| {
        std::fs::read(file).map_err(|source| BuildError::Io {
            path: file.into(),
            source,
        })
    };
    let mut digest = 0;
    for file in &files {
        let name = file.strip_prefix(repo).unwrap_or(file);
        digest = fnv(&read(file)?, fnv(name.to_string_lossy().as_bytes(), digest));
    }
    // A board's files count by name and by what the firmware reads of them,
    // wherever their folder is (`--boards-dir`, a test's temporary copy).
    for file in board_files {
        let name = file.file_name().unwrap_or_default();
        let bytes = read(file)?;
        let bytes = if file.extension().is_some_and(|e| e == "toml") {
            firmware_part_of_board(file, &bytes)?
        } else {
            bytes
        };
        digest = fnv(&bytes, fnv(name.as_encoded_bytes(), digest));
    }
    Ok(digest)
}

/// Board keys only the host reads (how it reaches and starts the board,
/// and the description): a change to them builds the same firmware.
const HOST_ONLY_BOARD_KEYS: [&str; 5] = [
    "description",
    "runner",
    "serial_port",
    "flash_command",
    "qemu",
];

/// A board file's content without [`HOST_ONLY_BOARD_KEYS`] (parsed, so
/// comments and layout count for nothing either): the
/// same board reached through another runner or port (a serial-only copy
/// of a virtual board, say) builds the same firmware once.
fn firmware_part_of_board(file: &Path, bytes: &[u8]) -> Result<Vec<u8>, BuildError> {
    let manifest = |problem: String| BuildError::Manifest {
        path: file.into(),
        problem,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| manifest(e.to_string()))?;
    let mut table: toml::Table = toml::from_str(text).map_err(|e| manifest(e.to_string()))?;
    for key in HOST_ONLY_BOARD_KEYS {
        table.remove(key);
    }
    Ok(format!("{table:?}").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_reached_another_way_builds_the_same_firmware() {
        let file = Path::new("boards/b.toml");
        let part = |text: &str| firmware_part_of_board(file, text.as_bytes()).unwrap();
        let shipped =
            "target = \"t\"\narena_size = 4096\nrunner = \"qemu\"\n[qemu]\nmachine = \"m\"\n";
        // A serial-only copy of it, with a comment: the same firmware.
        let serial = "# copy\ntarget = \"t\"\narena_size = 4096\nrunner = \"uart\"\nserial_port = \"/dev/x\"\n";
        assert_eq!(part(shipped), part(serial));
        // A key the firmware reads: another firmware.
        assert_ne!(part(shipped), part(&shipped.replace("4096", "8192")));
        assert!(matches!(
            firmware_part_of_board(file, b"arena_size = "),
            Err(BuildError::Manifest { .. })
        ));
    }
}
