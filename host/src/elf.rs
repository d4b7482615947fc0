//! What the host needs from a firmware ELF: where the RTT control block and
//! the arena are, and which board the ELF was built for.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol};

/// Facts read from a firmware ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareImage {
    /// The file.
    pub path: PathBuf,
    /// `_SEGGER_RTT` (none in firmware built for a uart transport).
    pub rtt_address: Option<u32>,
    /// `__hilt_arena_start` .. `__hilt_arena_end`.
    pub arena: (u32, u32),
    /// The board recorded in `.hilt_meta`.
    pub board: String,
}

/// Why an ELF cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// Unreadable.
    #[error("{path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not an ELF, or not one of ours.
    #[error("{path}: {problem}")]
    NotFirmware {
        /// File.
        path: PathBuf,
        /// What is missing.
        problem: String,
    },
    /// Built for a uart transport, asked for RTT.
    #[error(
        "{path} has no RTT control block (`_SEGGER_RTT`): it was built for a board that talks over a uart"
    )]
    NoRtt {
        /// File.
        path: PathBuf,
    },
}

impl FirmwareImage {
    /// The RTT control block's address, for a run over RTT.
    pub fn rtt_control_block(&self) -> Result<u32, ElfError> {
        self.rtt_address.ok_or_else(|| ElfError::NoRtt {
            path: self.path.clone(),
        })
    }
}

/// The function of the ELF at `path` that holds `address` (Thumb bit
/// ignored), demangled, with the offset into it: `name+0x1c`. `None` when
/// the file cannot be read or no function symbol covers the address.
pub fn function_at(path: &Path, address: u32) -> Option<String> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let address = u64::from(address & !1);
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .find(|s| {
            let start = s.address() & !1;
            start <= address && address < start + s.size().max(1)
        })
        .and_then(|s| {
            let name = s.name().ok()?;
            let offset = address - (s.address() & !1);
            Some(format!("{:#}+{offset:#x}", rustc_demangle::demangle(name)))
        })
}

/// Reads the facts from `path`.
pub fn inspect(path: &Path) -> Result<FirmwareImage, ElfError> {
    let data = std::fs::read(path).map_err(|source| ElfError::Read {
        path: path.into(),
        source,
    })?;
    let not = |problem: String| ElfError::NotFirmware {
        path: path.into(),
        problem,
    };
    let file = object::File::parse(&*data).map_err(|e| not(format!("not an ELF file: {e}")))?;
    let symbol = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address() as u32)
            .ok_or_else(|| not(format!("no `{name}` symbol (not a hilt firmware?)")))
    };
    let rtt_address = symbol("_SEGGER_RTT").ok();
    let arena = (symbol("__hilt_arena_start")?, symbol("__hilt_arena_end")?);
    let meta = file
        .section_by_name(".hilt_meta")
        .and_then(|s| s.data().ok())
        .ok_or_else(|| not("no .hilt_meta section".into()))?;
    let text = String::from_utf8_lossy(meta);
    let board = text
        .trim_end_matches('\0')
        .strip_prefix("hilt-meta:1;")
        .and_then(|rest| rest.split(';').find_map(|kv| kv.strip_prefix("board=")))
        .ok_or_else(|| not(format!("unreadable .hilt_meta {text:?}")))?
        .to_string();
    Ok(FirmwareImage {
        path: path.into(),
        rtt_address,
        arena,
        board,
    })
}
