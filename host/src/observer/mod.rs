//! hilt's QEMU plugin behind every virtual board run (`host/qemu-plugin`,
//! GPL-2.0-or-later, loaded into QEMU; this side is Apache-2.0 and only
//! writes its input files and reads its results): exact instruction counts
//! per op, estimated cycles on the board's core, and every load and store
//! checked against the arena plan the board committed.
//!
//! One [`Observer`] per QEMU run: it writes the control file before QEMU
//! starts, the plan file once the board has committed its plan, and reads
//! each invoke's counts and any violation from the results file.

pub mod build;
pub mod control;
pub mod error;
pub mod hotspots;
pub mod results;
pub mod violation;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::config::board::{Board, Timing};
use crate::elf::FirmwareImage;
use crate::model_file::ModelFile;
use crate::outcome::PlannedBuffer;

pub use error::ObserverError;
pub use results::{InvokeCount, OpCount, RawViolation, Results};
pub use violation::AccessViolation;

/// How virtual board runs are observed (set once by the command line).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The plugin library; `None`: runs are not observed.
    pub library: Option<PathBuf>,
    /// Whether accesses are checked (counts and cycles always are).
    pub checks: bool,
    /// A timing profile applied instead of each board's own (`--timing`),
    /// with its name.
    pub profile: Option<(String, Timing)>,
    /// Whether the plugin counts each function's instructions
    /// (`--hotspots`).
    pub hotspots: bool,
}

static SETTINGS: OnceLock<Mutex<Settings>> = OnceLock::new();

fn settings_cell() -> &'static Mutex<Settings> {
    SETTINGS.get_or_init(|| {
        Mutex::new(Settings {
            library: None,
            checks: true,
            profile: None,
            hotspots: false,
        })
    })
}

/// The settings virtual board runs use from now on.
pub fn configure(settings: Settings) {
    *settings_cell()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = settings;
}

/// The settings in force.
pub fn settings() -> Settings {
    settings_cell()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Builds the plugin (or finds it cached) and turns observation on, unless
/// the settings already name a library.
pub fn prepare(repo: &Path) -> Result<(), ObserverError> {
    let mut s = settings();
    if s.library.is_none() {
        s.library = Some(build::plugin_library(repo)?);
        configure(s);
    }
    Ok(())
}

/// The timing profile `name` from `boards/timing/NAME.toml`.
pub fn load_profile(boards: &Path, name: &str) -> Result<Timing, String> {
    let path = boards.join("timing").join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let mut known: Vec<String> = std::fs::read_dir(boards.join("timing"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .strip_suffix(".toml")
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        known.sort();
        format!(
            "timing profile `{name}`: {}: {e} (known: {})",
            path.display(),
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        )
    })?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The timing a board is estimated with: the profile in force, else its
/// `[timing]`, else its QEMU CPU's core without flash wait states; and the
/// name reports give it.
pub fn timing_for(board: &Board, settings: &Settings) -> (String, Timing) {
    if let Some((name, t)) = &settings.profile {
        return (name.clone(), t.clone());
    }
    let t = board.timing.clone().unwrap_or_else(|| {
        Timing::of_cpu(board.qemu.as_ref().map_or("cortex-m4", |q| q.cpu.as_str()))
    });
    (t.core.clone(), t)
}

/// One observed QEMU run.
#[derive(Debug)]
pub struct Observer {
    dir: PathBuf,
    library: PathBuf,
    image: FirmwareImage,
    guard: u32,
    buffer_guard: u32,
    checks: bool,
    /// Timing name for reports.
    pub timing: String,
    plan: Vec<PlannedBuffer>,
    stack: Option<control::StackSpan>,
    marked: bool,
    /// Invokes taken so far.
    taken: usize,
    /// Whether the plugin counts instructions by function.
    hotspots: bool,
}

impl Observer {
    /// Writes the control file for `image` on `board`; `canary` is the
    /// scenario's canary mode (guards are in the arena, not in buffers).
    pub fn start(
        board: &Board,
        image: &FirmwareImage,
        canary: hilt_runtime::canary::CanaryMode,
        settings: &Settings,
    ) -> Result<Option<Observer>, ObserverError> {
        let Some(library) = settings.library.clone() else {
            return Ok(None);
        };
        use hilt_runtime::canary::{CanaryMode, GUARD_BYTES};
        let guard = if canary == CanaryMode::Off {
            0
        } else {
            GUARD_BYTES
        };
        // With a guard after every buffer, a planned size counts its guard.
        let buffer_guard = if canary == CanaryMode::Buffers {
            GUARD_BYTES
        } else {
            0
        };
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hilt-observe-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| ObserverError::io(&dir, e))?;
        let (name, timing) = timing_for(board, settings);
        let control = control::control_text(
            image,
            board,
            &timing,
            &dir.join("results"),
            &dir.join("plan"),
            settings.checks,
            settings.hotspots.then(|| dir.join("hotspots")).as_deref(),
        )?;
        let path = dir.join("control");
        std::fs::write(&path, &control.text).map_err(|e| ObserverError::io(&path, e))?;
        Ok(Some(Observer {
            dir,
            library,
            image: image.clone(),
            guard,
            buffer_guard,
            checks: settings.checks,
            timing: name,
            plan: Vec::new(),
            stack: control.stack,
            marked: control.marked,
            taken: 0,
            hotspots: settings.hotspots,
        }))
    }

    /// Whether accesses are checked.
    pub fn checks(&self) -> bool {
        self.checks
    }

    /// Whether the firmware marks its invokes: without, the plugin has no
    /// invoke to count or check (a firmware that never runs its
    /// interpreter).
    pub fn marked(&self) -> bool {
        self.marked
    }

    /// QEMU's arguments that load the plugin.
    pub fn qemu_args(&self) -> Vec<OsString> {
        let mut plugin = self.library.clone().into_os_string();
        plugin.push(",control=");
        plugin.push(self.dir.join("control"));
        vec!["-plugin".into(), plugin]
    }

    /// Hands the plugin the committed plan (before the first invoke).
    pub fn plan_committed(
        &mut self,
        plan: &[PlannedBuffer],
        model: &ModelFile,
        (schedule, align): (hilt_runtime::schedule::Schedule, u32),
    ) -> Result<(), ObserverError> {
        // The bytes each buffer's owner may touch: its guard is not one.
        self.plan = plan
            .iter()
            .map(|b| PlannedBuffer {
                size: b.size.saturating_sub(self.buffer_guard),
                ..b.clone()
            })
            .collect();
        // Under a lean schedule a tensor may live in another's buffer.
        let schedule = hilt_runtime::schedule::resolve(&model.model(), schedule, align);
        let text = control::plan_text(&self.image, &self.plan, self.guard, (model, schedule));
        let path = self.dir.join("plan");
        let partial = self.dir.join("plan.partial");
        std::fs::write(&partial, text).map_err(|e| ObserverError::io(&partial, e))?;
        std::fs::rename(&partial, &path).map_err(|e| ObserverError::io(&path, e))
    }

    /// Everything in the results file now.
    pub fn results(&self) -> Results {
        std::fs::read_to_string(self.dir.join("results"))
            .map(|t| Results::parse(&t))
            .unwrap_or_default()
    }

    /// The next invoke's counts (the board has answered it, so the plugin
    /// has written them: it writes before the guest goes on).
    pub fn next_invoke(&mut self) -> Result<InvokeCount, ObserverError> {
        let wait = Duration::from_secs(2);
        let deadline = Instant::now() + wait;
        loop {
            let r = self.results();
            if let Some(inv) = r.invokes.get(self.taken) {
                self.taken += 1;
                return Ok(inv.clone());
            }
            if Instant::now() >= deadline {
                return Err(ObserverError::NoCounts(
                    self.taken as u64 + 1,
                    wait,
                    r.errors.join("; "),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The run's instructions by function so far (`--hotspots`; `None`
    /// when not asked for).
    pub fn hotspots(&self) -> Option<hotspots::Hotspots> {
        if !self.hotspots {
            return None;
        }
        let text = std::fs::read_to_string(self.dir.join("hotspots")).unwrap_or_default();
        Some(hotspots::read(&text, &self.image.path))
    }

    /// The violations in `results` (read from this run's file), described.
    pub fn violations(&self, results: &Results, model: &ModelFile) -> Vec<AccessViolation> {
        let ctx = violation::Context {
            elf: &self.image.path,
            model,
            plan: &self.plan,
            arena: self.image.arena,
            head_start: crate::outcome::head_start(&self.plan, self.guard),
            head_end: control::head_end(&self.plan, self.guard),
            stack: self.stack,
        };
        results.violations.iter().map(|v| ctx.describe(v)).collect()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        // HILT_KEEP_PLUGIN_FILES=1 keeps the control, plan and results
        // files (their folder is named in the log) for a look by hand.
        if std::env::var_os("HILT_KEEP_PLUGIN_FILES").is_some_and(|v| v == "1") {
            eprintln!("hilt: QEMU plugin files kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
