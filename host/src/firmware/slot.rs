//! The model slot of a built ELF: which slot a model (and its constant
//! image) is built into, and writing them into a copy of the ELF.

use std::path::{Path, PathBuf};

use hilt_contract::scenario::ConstantsPlace;
use hilt_proto::armed_faults::{self, ArmedFaults};
use hilt_proto::model_slot;

use super::{BuildError, FirmwareRequest, fnv, symbol_range, unique_partial};

/// The model's constant image: every kernel's prepare run on the host,
/// its constants collected (what the firmware's prepare then checks and
/// reads in place). It depends on the model and the kernels only, not on
/// the planner or the arena.
pub(super) fn constant_image(request: &FirmwareRequest<'_>) -> Result<Vec<u8>, BuildError> {
    let options = crate::layout::LayoutOptions {
        covers: crate::layout::Coverage::Interpreter,
        constants: ConstantsPlace::Flash,
        ..crate::layout::LayoutOptions::default()
    };
    crate::layout::layout_bytes(request.model.bytes(), &options)
        .map(|report| report.constant_image)
        .map_err(|e| BuildError::Constants {
            model: request.model.path().to_path_buf(),
            problem: e.with_path(request.model.path()).to_string(),
        })
}

/// The slot a model of `model_len` bytes is built into: the board's fixed
/// slot when the model fits it (one build for every model), else the
/// model's size class.
pub(super) fn slot_for(board_slot: Option<u64>, model_len: usize) -> usize {
    match board_slot.and_then(|fixed| usize::try_from(fixed).ok()) {
        Some(fixed) if least_slot(model_len) <= fixed => fixed,
        _ => model_slot::capacity_for(model_len),
    }
}

/// The smallest slot a model of `model_len` bytes fits: its header and
/// bytes, in the slot's 64-byte granule.
pub(super) fn least_slot(model_len: usize) -> usize {
    (model_len + model_slot::HEADER).next_multiple_of(64)
}

/// A copy of the model-less ELF `base` with `model` in its slot and
/// `faults` armed, beside it under a key over all three (reused when
/// already written).
pub(super) fn write_model(
    base: &Path,
    board: &str,
    (model, name, constants): (&[u8], &str, &[u8]),
    faults: ArmedFaults,
) -> Result<PathBuf, BuildError> {
    let stem = base.file_stem().unwrap_or_default().to_string_lossy();
    let key = fnv(model, fnv(name.as_bytes(), fnv(stem.as_bytes(), 0)));
    let key = if constants.is_empty() {
        key
    } else {
        fnv(constants, key)
    };
    let key = if faults.is_empty() {
        key
    } else {
        fnv(&faults.to_le_bytes(), key)
    };
    let elves = base.parent().and_then(Path::parent).unwrap_or(base);
    let elf = elves.join(format!("{board}-{key:016x}.elf"));
    if elf.is_file() {
        return Ok(elf);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Io { path, source }
    };
    let slot_error = |problem: String| BuildError::Slot {
        path: base.into(),
        problem,
    };
    let mut bytes = std::fs::read(base).map_err(io(base))?;
    let (start, len, faults_at) = {
        let file = object::File::parse(&*bytes).map_err(|e| slot_error(e.to_string()))?;
        let (start, len) = symbol_range(&file, model_slot::SYMBOL).map_err(slot_error)?;
        let faults_at = if faults.is_empty() {
            None
        } else {
            let (at, len) = symbol_range(&file, armed_faults::SYMBOL).map_err(|problem| {
                BuildError::Faults {
                    path: base.into(),
                    problem: format!("{problem} (the firmware has no `fault-injection` feature)"),
                }
            })?;
            if len != 4 {
                return Err(BuildError::Faults {
                    path: base.into(),
                    problem: format!("`{}` is {len} bytes, not 4", armed_faults::SYMBOL),
                });
            }
            Some(at)
        };
        (start, len, faults_at)
    };
    model_slot::write_with_constants(&mut bytes[start..start + len], model, name, constants)
        .map_err(|e| slot_error(e.to_string()))?;
    if let Some(at) = faults_at {
        bytes[at..at + 4].copy_from_slice(&faults.to_le_bytes());
    }
    // Written under a temporary name of its own, then renamed: an ELF under
    // its key is always whole (a later run reuses it without looking
    // inside), and two runs writing the same one at once (two tests, two
    // hilt processes) each rename their own copy, the same bytes.
    let partial = unique_partial(&elf);
    std::fs::write(&partial, &bytes).map_err(io(&partial))?;
    std::fs::rename(&partial, &elf).map_err(io(&elf))?;
    Ok(elf)
}
