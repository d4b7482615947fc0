//! Buffer lists (`hilt plan`): any list of buffers, planned by the runtime's own
//! planners.
//!
//! Why: a planner is only comparable with others on shared inputs. The
//! list is MiniMalloc's CSV (a header line, then `id,lower,upper,size` and
//! an optional `alignment`; a buffer is live on `[lower, upper)`; the
//! header of its benchmark files, `buffer,start,end,size`, is read too), so the
//! same files run through MiniMalloc, hilt and anything else that reads it.
//! A buffer becomes a [`BufferRequest`] live from step `lower` to step
//! `upper - 1`; without an alignment column it is aligned to 1 byte (the
//! size is taken exactly, as MiniMalloc takes it). The output is the input's
//! columns plus `offset`, and reads back as input (an `offset` column in
//! the input is ignored and written anew).
//!
//! ```no_run
//! use hilt::buffer_list::{plan_buffers, read_buffers, write_csv};
//! use hilt_runtime::planner::PlannerKind;
//!
//! let set = read_buffers("buffers.csv".as_ref()).unwrap();
//! let plan = plan_buffers(&set, PlannerKind::Optimal).unwrap();
//! assert!(u64::from(plan.peak) >= plan.lower_bound);
//! std::fs::write("planned.csv", write_csv(&set, &plan.offsets)).unwrap();
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hilt_runtime::planner::{
    Greedy, Linear, MemoryPlanner, Optimal, PlanError, PlannerKind, lower_bound,
};
use hilt_runtime::request::BufferRequest;

/// The columns every file starts with, in order.
const COLUMNS: [&str; 4] = ["id", "lower", "upper", "size"];

/// The same columns as MiniMalloc's published benchmark files name them
/// (`benchmarks/*/*.csv`: `buffer,start,end,size`).
const BENCHMARK_COLUMNS: [&str; 4] = ["buffer", "start", "end", "size"];

/// Everything that can go wrong reading, planning or writing a buffer list.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The header line is missing or names other columns.
    #[error(
        "{path}:{line}: header {found:?}: expected id,lower,upper,size or buffer,start,end,size (then alignment and offset, both optional)"
    )]
    Header {
        /// The file.
        path: PathBuf,
        /// Its line number (the first line that is not blank).
        line: usize,
        /// The header found ("" for an empty file).
        found: String,
    },
    /// A line with more or fewer fields than the header.
    #[error("{path}:{line}: {found} fields, the header has {expected}")]
    FieldCount {
        /// The file.
        path: PathBuf,
        /// Line number (1-based).
        line: usize,
        /// Fields on the line.
        found: usize,
        /// Fields in the header.
        expected: usize,
    },
    /// A field that is not a number of the column's range.
    #[error("{path}:{line}: column {column}: {text:?} is not {what}")]
    Number {
        /// The file.
        path: PathBuf,
        /// Line number (1-based).
        line: usize,
        /// Column name.
        column: &'static str,
        /// The field.
        text: String,
        /// What the column takes.
        what: &'static str,
    },
    /// `upper` not above `lower`: a buffer that is never live.
    #[error("{path}:{line}: column upper: {upper} must be above lower ({lower})")]
    EmptyLifetime {
        /// The file.
        path: PathBuf,
        /// Line number (1-based).
        line: usize,
        /// Its `lower`.
        lower: u32,
        /// Its `upper`.
        upper: u32,
    },
    /// The planner refused the list (its error names the buffer).
    #[error("{path}: buffer {id} (line {line}): {source}")]
    Planner {
        /// The file.
        path: PathBuf,
        /// The buffer's id.
        id: String,
        /// Its line number.
        line: usize,
        /// What the planner said.
        source: PlanError,
    },
    /// The offline planner reads a model's metadata, which a CSV has not.
    #[error("planner offline plans from a model's metadata: use linear, greedy or optimal")]
    OfflineWithoutModel,
}

/// One buffer of the list, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvBuffer {
    /// Its id, as written.
    pub id: String,
    /// First step it is live.
    pub lower: u32,
    /// First step it is no longer live.
    pub upper: u32,
    /// Bytes.
    pub size: u32,
    /// Alignment of its offset (1 when the file has no such column).
    pub alignment: u32,
    /// Its line number in the file.
    pub line: usize,
}

/// A buffer list and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferSet {
    /// The file (for messages).
    pub path: PathBuf,
    /// Whether the file has an alignment column (written back if so).
    pub has_alignment: bool,
    /// The buffers, in file order.
    pub buffers: Vec<CsvBuffer>,
}

impl BufferSet {
    /// The planner's view: one request per buffer, in file order.
    pub fn requests(&self) -> Vec<BufferRequest> {
        self.buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                BufferRequest::tensor(i as u32, b.size, b.lower, b.upper - 1)
                    .with_align(b.alignment)
            })
            .collect()
    }
}

/// Reads and checks a buffer list.
pub fn read_buffers(path: &Path) -> Result<BufferSet, PlanFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_buffers(path, &text)
}

/// Parses a buffer list; `path` only names the file in errors.
pub fn parse_buffers(path: &Path, text: &str) -> Result<BufferSet, PlanFileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (header_line, header) = lines.next().unwrap_or((1, ""));
    let names: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let header_error = || PlanFileError::Header {
        path: path.to_path_buf(),
        line: header_line,
        found: header.to_string(),
    };
    if names.len() < COLUMNS.len() || (names[..4] != COLUMNS && names[..4] != BENCHMARK_COLUMNS) {
        return Err(header_error());
    }
    let extra: Vec<&str> = names[4..].iter().map(String::as_str).collect();
    let (has_alignment, has_offset) = match extra.as_slice() {
        [] => (false, false),
        ["alignment"] => (true, false),
        ["offset"] => (false, true),
        ["alignment", "offset"] => (true, true),
        _ => return Err(header_error()),
    };
    let expected = 4 + usize::from(has_alignment) + usize::from(has_offset);
    let buffers = lines
        .map(|(line, text)| parse_line(path, line, text, expected, has_alignment))
        .collect::<Result<_, _>>()?;
    Ok(BufferSet {
        path: path.to_path_buf(),
        has_alignment,
        buffers,
    })
}

/// One data line: `expected` fields, the numbers in range, a lifetime.
fn parse_line(
    path: &Path,
    line: usize,
    text: &str,
    expected: usize,
    has_alignment: bool,
) -> Result<CsvBuffer, PlanFileError> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() != expected {
        return Err(PlanFileError::FieldCount {
            path: path.to_path_buf(),
            line,
            found: fields.len(),
            expected,
        });
    }
    let number = |index: usize, column: &'static str| -> Result<u32, PlanFileError> {
        fields[index]
            .parse::<u32>()
            .map_err(|_| PlanFileError::Number {
                path: path.to_path_buf(),
                line,
                column,
                text: fields[index].to_string(),
                what: "a whole number from 0 to 4294967295",
            })
    };
    let (lower, upper, size) = (number(1, "lower")?, number(2, "upper")?, number(3, "size")?);
    if upper <= lower {
        return Err(PlanFileError::EmptyLifetime {
            path: path.to_path_buf(),
            line,
            lower,
            upper,
        });
    }
    let alignment = if has_alignment {
        let align = number(4, "alignment")?;
        if !align.is_power_of_two() || align > hilt_runtime::request::MAX_ALIGN {
            return Err(PlanFileError::Number {
                path: path.to_path_buf(),
                line,
                column: "alignment",
                text: fields[4].to_string(),
                what: "a power of two from 1 to 1048576",
            });
        }
        align
    } else {
        1
    };
    Ok(CsvBuffer {
        id: fields[0].to_string(),
        lower,
        upper,
        size,
        alignment,
        line,
    })
}

/// A planned buffer list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferPlan {
    /// The planner's name.
    pub planner: &'static str,
    /// The highest end of any buffer.
    pub peak: u32,
    /// The liveness lower bound: no plan's peak is below it.
    pub lower_bound: u64,
    /// Planning time (the planner's call alone).
    pub elapsed: Duration,
    /// One offset per buffer, in file order.
    pub offsets: Vec<u32>,
}

/// Plans `set` with the planner `kind` names.
pub fn plan_buffers(set: &BufferSet, kind: PlannerKind) -> Result<BufferPlan, PlanFileError> {
    plan_buffers_to_fit(set, kind, None)
}

/// [`plan_buffers`], content with a peak of `capacity` bytes: the optimal
/// planner decides at the capacity first and stops at the first plan that
/// fits (MiniMalloc's question), instead of searching on for the smallest.
pub fn plan_buffers_to_fit(
    set: &BufferSet,
    kind: PlannerKind,
    capacity: Option<u64>,
) -> Result<BufferPlan, PlanFileError> {
    let optimal = match capacity {
        Some(c) => Optimal::default().with_goal(c.min(u64::from(u32::MAX)) as u32),
        None => Optimal::default(),
    };
    let planner: &dyn MemoryPlanner = match kind {
        PlannerKind::Linear => &Linear,
        PlannerKind::Greedy => &Greedy,
        PlannerKind::Optimal => &optimal,
        PlannerKind::Offline => return Err(PlanFileError::OfflineWithoutModel),
    };
    let requests = set.requests();
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![0u32; requests.len()];
    let start = Instant::now();
    let peak = planner
        .plan(&requests, &mut workspace, &mut offsets)
        .map_err(|source| planner_error(set, source))?;
    let elapsed = start.elapsed();
    Ok(BufferPlan {
        planner: planner.name(),
        peak,
        lower_bound: lower_bound(&requests),
        elapsed,
        offsets,
    })
}

/// A planner error, with the buffer it names (by position) found in the file.
fn planner_error(set: &BufferSet, source: PlanError) -> PlanFileError {
    let request = match source {
        PlanError::InvalidAlignment { request, .. }
        | PlanError::SizeOverflow { request }
        | PlanError::InvertedLifetime { request } => Some(request as usize),
        _ => None,
    };
    let buffer = request.and_then(|i| set.buffers.get(i));
    PlanFileError::Planner {
        path: set.path.clone(),
        id: buffer.map_or_else(|| "?".into(), |b| b.id.clone()),
        line: buffer.map_or(0, |b| b.line),
        source,
    }
}

/// The input's columns plus `offset`, one line per buffer.
pub fn write_csv(set: &BufferSet, offsets: &[u32]) -> String {
    let mut out = String::from("id,lower,upper,size");
    if set.has_alignment {
        out.push_str(",alignment");
    }
    out.push_str(",offset\n");
    for (b, offset) in set.buffers.iter().zip(offsets) {
        let _ = write!(out, "{},{},{},{}", b.id, b.lower, b.upper, b.size);
        if set.has_alignment {
            let _ = write!(out, ",{}", b.alignment);
        }
        let _ = writeln!(out, ",{offset}");
    }
    out
}

/// The summary `hilt plan` prints.
pub fn render_summary(set: &BufferSet, plan: &BufferPlan, capacity: Option<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "buffers      {}", set.buffers.len());
    let _ = writeln!(out, "planner      {}", plan.planner);
    let _ = writeln!(out, "peak         {} bytes", plan.peak);
    let _ = writeln!(out, "lower bound  {} bytes", plan.lower_bound);
    let _ = writeln!(
        out,
        "time         {:.3} ms",
        plan.elapsed.as_secs_f64() * 1e3
    );
    if let Some(capacity) = capacity {
        let verdict = if u64::from(plan.peak) <= capacity {
            "fits".to_string()
        } else {
            format!(
                "does not fit ({} bytes short)",
                u64::from(plan.peak) - capacity
            )
        };
        let _ = writeln!(out, "capacity     {capacity} bytes: {verdict}");
    }
    out
}
