//! The one way a report file is written: whole, to a temporary name beside
//! it, flushed, then renamed over the old one, so that a reader (or a CI
//! step after a crash) sees the previous complete file or the new one.

use std::io::Write as _;
use std::path::Path;

use super::ReportError;

/// Writes `text` to a temporary file beside `path`, flushes it to disk and
/// renames it over `path`: readers see the old file or the new, never a part.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        ReportError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}
