//! Builds hilt's QEMU plugin (`host/qemu-plugin`, a `cdylib` of its own
//! workspace and licence) once per source change, like firmware: cached
//! under `build/qemu-plugin/lib/` by a digest of its sources, the lock file
//! and the pinned toolchain, so a warm run never starts cargo for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::ObserverError;
use crate::firmware::fnv;

/// The plugin crate's folder in the repository.
pub const CRATE_DIR: &str = "host/qemu-plugin";

/// The digest of everything the build reads.
fn digest(repo: &Path) -> Result<u64, ObserverError> {
    let dir = repo.join(CRATE_DIR);
    let mut files = vec![
        dir.join("Cargo.toml"),
        dir.join("Cargo.lock"),
        repo.join("rust-toolchain.toml"),
    ];
    let mut stack = vec![dir.join("src")];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| ObserverError::io(&d, e))?;
        for entry in entries {
            let path = entry.map_err(|e| ObserverError::io(&d, e))?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut h = 0;
    for f in files.iter().filter(|f| f.exists()) {
        let bytes = std::fs::read(f).map_err(|e| ObserverError::io(f, e))?;
        let name = f.strip_prefix(repo).unwrap_or(f);
        h = fnv(&bytes, fnv(name.to_string_lossy().as_bytes(), h));
    }
    Ok(h)
}

/// The plugin library for the repository at `repo`: built when its
/// sources changed since the last build, else the cached one.
pub fn plugin_library(repo: &Path) -> Result<PathBuf, ObserverError> {
    let key = digest(repo)?;
    let out_dir = repo.join("build/qemu-plugin");
    let lib = out_dir.join(format!("lib/libhilt_qemu_plugin-{key:016x}.so"));
    if lib.exists() {
        return Ok(lib);
    }
    std::fs::create_dir_all(out_dir.join("lib")).map_err(|e| ObserverError::io(&out_dir, e))?;
    let lock_path = out_dir.join("hilt-build.lock");
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| ObserverError::io(&lock_path, e))?;
    lock.lock().map_err(|e| ObserverError::io(&lock_path, e))?;
    // Another hilt may have built it while this one waited.
    if lib.exists() {
        return Ok(lib);
    }
    eprintln!("hilt: building the QEMU plugin ({CRATE_DIR}) ...");
    let started = std::time::Instant::now();
    let manifest = repo.join(CRATE_DIR).join("Cargo.toml");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args([
            "build",
            "--release",
            "--quiet",
            "--lib",
            "--features",
            "qemu",
            "--manifest-path",
        ])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", out_dir.join("cargo"))
        // Built for the host, whatever the caller's cargo was building.
        .env_remove("CARGO_BUILD_TARGET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = crate::children::spawn(&mut cargo)
        .and_then(crate::children::Registered::wait_with_output)
        .map_err(|e| ObserverError::Build(format!("cannot run cargo: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        return Err(ObserverError::Build(
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        ));
    }
    let built = out_dir.join("cargo/release/libhilt_qemu_plugin.so");
    let partial = lib.with_extension("partial");
    std::fs::copy(&built, &partial).map_err(|e| ObserverError::io(&built, e))?;
    std::fs::rename(&partial, &lib).map_err(|e| ObserverError::io(&lib, e))?;
    eprintln!(
        "hilt: built the QEMU plugin in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(lib)
}
