//! Accelerator offload keys, shared by board and scenario files: which
//! engine a scenario runs its claimed ops on, which ops it lets it claim,
//! how the engine sees memory, and the engine's model: its latency and
//! its driver's CPU cost (a board describes its own engine; a scenario may
//! override it, key by key).
//!
//! ```toml
//! accelerator = "vnpu"                    # none | vnpu (default none)
//! offload = ["CONV_2D", "ADD"]            # default: the runtime's DEFAULT_OFFLOAD
//! coherent = false                        # default true
//! [vnpu]                                  # also allowed in a board file
//! job_cycles = 10000
//! cycles_per_1000_macs = 64
//! driver_submit_cycles = 1000             # the CPU's cost per submit, kept in the figures
//! driver_cycles_per_line = 4              # per cache line cleaned or invalidated (non-coherent)
//! ```
//!
//! Op names are the schema's builtin names; the virtual NPU's own custom
//! op ([`NEGATE_NAME`]) is written by its name and travels as `CUSTOM`.

use std::path::Path;

use hilt_runtime::accel::vnpu::{DriverModel, NEGATE_NAME, VnpuConfig};
use hilt_runtime::accel::{DEFAULT_OFFLOAD, OpKind};
use hilt_runtime::schema::BuiltinOperator;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Which engine runs the claimed ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accelerator {
    /// Every op on the CPU.
    #[default]
    None,
    /// The firmware's virtual NPU.
    Vnpu,
}

impl Accelerator {
    /// The name files and flags use.
    pub fn name(self) -> &'static str {
        match self {
            Accelerator::None => "none",
            Accelerator::Vnpu => "vnpu",
        }
    }

    /// From its name (`none`, `vnpu`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Accelerator::None),
            "vnpu" => Some(Accelerator::Vnpu),
            _ => None,
        }
    }
}

/// The virtual NPU's model: what a job costs in engine cycles (its
/// latency), and what its driver costs the CPU (kept in every figure, where
/// the emulation's own time is taken out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VnpuModel {
    /// Fixed cycles per job (set-up, descriptor fetch).
    pub job_cycles: u32,
    /// Cycles per thousand multiply-accumulates.
    pub cycles_per_1000_macs: u32,
    /// CPU cycles per submit (the driver's job set-up).
    pub driver_submit_cycles: u32,
    /// CPU cycles per cache line cleaned or invalidated (non-coherent
    /// memory only).
    pub driver_cycles_per_line: u32,
}

impl Default for VnpuModel {
    /// The runtime's own engine defaults, so a file without `[vnpu]` runs
    /// the engine `hilt infer --accelerator vnpu` runs.
    fn default() -> Self {
        let latency = VnpuConfig::default().latency;
        let driver = DriverModel::MICRO_NPU;
        // The wire carries 32 bits; the runtime's defaults fit.
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        VnpuModel {
            job_cycles: narrow(latency.job_cycles),
            cycles_per_1000_macs: narrow(latency.cycles_per_1000_macs),
            driver_submit_cycles: narrow(driver.submit_cycles),
            driver_cycles_per_line: narrow(driver.cycles_per_line),
        }
    }
}

/// The `[vnpu]` table as written: each key optional, so a scenario can
/// override one figure of its board's model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVnpu {
    #[serde(default)]
    pub(crate) job_cycles: Option<u32>,
    #[serde(default)]
    pub(crate) cycles_per_1000_macs: Option<u32>,
    #[serde(default)]
    pub(crate) driver_submit_cycles: Option<u32>,
    #[serde(default)]
    pub(crate) driver_cycles_per_line: Option<u32>,
}

impl RawVnpu {
    /// `self` over `base`: each key written replaces that figure.
    pub(crate) fn over(self, base: VnpuModel) -> VnpuModel {
        VnpuModel {
            job_cycles: self.job_cycles.unwrap_or(base.job_cycles),
            cycles_per_1000_macs: self
                .cycles_per_1000_macs
                .unwrap_or(base.cycles_per_1000_macs),
            driver_submit_cycles: self
                .driver_submit_cycles
                .unwrap_or(base.driver_submit_cycles),
            driver_cycles_per_line: self
                .driver_cycles_per_line
                .unwrap_or(base.driver_cycles_per_line),
        }
    }
}

/// A scenario's offload choice, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffloadChoice {
    /// The engine (none: offload off).
    pub accelerator: Accelerator,
    /// The ops it may claim, as the names written.
    pub ops: Vec<String>,
    /// Whether CPU and engine see memory coherently.
    pub coherent: bool,
    /// The scenario's `[vnpu]` keys (a key not written keeps the board's
    /// figure).
    #[serde(skip)]
    pub(crate) vnpu: Option<RawVnpu>,
}

impl Default for OffloadChoice {
    fn default() -> Self {
        OffloadChoice {
            accelerator: Accelerator::None,
            ops: default_offload_names(),
            coherent: true,
            vnpu: None,
        }
    }
}

impl OffloadChoice {
    /// The engine model a run uses on a board whose engine is `board`:
    /// the scenario's keys over the board's.
    pub fn vnpu_on(&self, board: VnpuModel) -> VnpuModel {
        self.vnpu.map_or(board, |v| v.over(board))
    }

    /// The op list as the wire's `SetOffload.ops` carries it: builtin
    /// codes, `CUSTOM` for the virtual NPU's custom op. Names were checked
    /// when the choice was made, so none is dropped here.
    pub fn op_codes(&self) -> Vec<u8> {
        self.ops.iter().filter_map(|n| op_code(n).ok()).collect()
    }
}

/// The runtime's default offload list, as names.
pub fn default_offload_names() -> Vec<String> {
    DEFAULT_OFFLOAD
        .iter()
        .filter_map(|k| match k {
            OpKind::Builtin(op) => op.variant_name(),
            OpKind::Custom(name) => Some(*name),
        })
        .map(str::to_string)
        .collect()
}

/// The schema's `CUSTOM` operator code: in `SetOffload.ops` it lets the
/// engine claim the custom ops it registers.
pub const CUSTOM_CODE: u8 = 32;

/// Why an op name cannot be offloaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpNameError {
    /// Not a builtin name, nor the virtual NPU's custom op.
    #[error("unknown operator {0:?} (builtin names like CONV_2D, or {NEGATE_NAME})")]
    Unknown(String),
    /// A builtin whose code does not fit the wire's byte.
    #[error("operator {0:?} has code {1}, beyond what SetOffload carries (0..=255)")]
    TooLarge(String, i32),
}

/// The wire code of an offloadable op name.
pub fn op_code(name: &str) -> Result<u8, OpNameError> {
    if name == NEGATE_NAME {
        return Ok(CUSTOM_CODE);
    }
    let op = BuiltinOperator::ENUM_VALUES
        .iter()
        .find(|op| op.variant_name() == Some(name))
        .ok_or_else(|| OpNameError::Unknown(name.to_string()))?;
    u8::try_from(op.0).map_err(|_| OpNameError::TooLarge(name.to_string(), op.0))
}

/// Checks a scenario's offload keys.
pub(crate) fn choice(
    path: &Path,
    accelerator: Option<&str>,
    offload: Option<Vec<String>>,
    coherent: Option<bool>,
    vnpu: Option<RawVnpu>,
) -> Result<OffloadChoice, ConfigError> {
    let accelerator = match accelerator {
        None => Accelerator::None,
        Some(name) => Accelerator::from_name(name).ok_or_else(|| {
            ConfigError::invalid(
                path,
                "accelerator",
                format!("unknown accelerator {name:?} (known: none, vnpu)"),
            )
        })?,
    };
    let ops = offload.unwrap_or_else(default_offload_names);
    if let Some(e) = ops.iter().find_map(|n| op_code(n).err()) {
        return Err(ConfigError::invalid(path, "offload", e.to_string()));
    }
    Ok(OffloadChoice {
        accelerator,
        ops,
        coherent: coherent.unwrap_or(true),
        vnpu,
    })
}
