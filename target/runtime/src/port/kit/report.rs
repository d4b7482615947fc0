//! What the kit found: per set, a failure that names the buffers at fault,
//! or the head measured against the lower bound.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::RequestSet;
use crate::planner::PlanError;
use crate::port::{PlacedBuffer, PlanFailure};

/// Why a port failed one request set.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum KitFailure {
    /// The plan breaks a rule (overlap, alignment, bounds, fixed offsets).
    Invalid(PlanFailure),
    /// The port refused a valid request set.
    Refused(PlanError),
    /// Planned again (dirty or larger workspace), a buffer moved.
    OffsetChanged {
        /// The buffer, at its first offset.
        buffer: PlacedBuffer,
        /// Its offset the second time.
        second: u32,
    },
    /// Planned again, the head changed.
    HeadChanged {
        /// The first head.
        first: u32,
        /// The second.
        second: u32,
    },
    /// The port returned a plan for an input it must refuse.
    AcceptedInvalid {
        /// Which input.
        case: &'static str,
    },
    /// Planned into memory pools, a buffer is not inside one pool that
    /// reaches it.
    OutsidePool {
        /// The buffer, with its offset from the first pool's start.
        buffer: PlacedBuffer,
        /// The pool its first byte is in (`None`: past every pool).
        pool: Option<u32>,
    },
    /// Planned into memory pools that can hold the set, the port's share
    /// of a pool was refused.
    PoolRefused(crate::pool::PoolError),
    /// Planned into pools too small for it, the set got a plan instead of
    /// an out-of-memory error.
    PoolOverfilled,
    /// The head is above the caller's limit.
    AboveLimit {
        /// The head.
        head: u32,
        /// The liveness lower bound.
        lower_bound: u64,
        /// The limit, as a multiple of the bound.
        limit: f64,
    },
}

impl fmt::Display for KitFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KitFailure::Invalid(failure) => write!(f, "{failure}"),
            KitFailure::Refused(e) => write!(f, "a valid set was refused: {e}"),
            KitFailure::OffsetChanged { buffer, second } => write!(
                f,
                "not deterministic: buffer {buffer} moved to offset {second} when planned again"
            ),
            KitFailure::HeadChanged { first, second } => write!(
                f,
                "not deterministic: the head was {first} bytes, then {second} planned again"
            ),
            KitFailure::AcceptedInvalid { case } => {
                write!(
                    f,
                    "an invalid input ({case}) got a plan instead of an error"
                )
            }
            KitFailure::OutsidePool { buffer, pool } => match pool {
                Some(pool) => write!(
                    f,
                    "in memory pools: buffer {buffer} is not inside pool {pool}, or that pool does not reach it"
                ),
                None => write!(f, "in memory pools: buffer {buffer} lies past every pool"),
            },
            KitFailure::PoolRefused(e) => write!(f, "in memory pools that hold the set: {e}"),
            KitFailure::PoolOverfilled => f.write_str(
                "in memory pools too small for the set: a plan came back instead of an out-of-memory error",
            ),
            KitFailure::AboveLimit {
                head,
                lower_bound,
                limit,
            } => write!(
                f,
                "head {head} bytes is above {limit} x the lower bound of {lower_bound} bytes"
            ),
        }
    }
}

/// A failure and the set it happened on.
#[derive(Debug, Clone, PartialEq)]
pub struct SetFailure {
    /// The set's name.
    pub set: String,
    /// What went wrong.
    pub failure: KitFailure,
}

impl SetFailure {
    pub(super) fn new(set: &RequestSet, failure: KitFailure) -> Self {
        SetFailure {
            set: set.name.clone(),
            failure,
        }
    }

    pub(super) fn invalid_input(case: &'static str) -> Self {
        SetFailure {
            set: String::from("invalid inputs"),
            failure: KitFailure::AcceptedInvalid { case },
        }
    }

    /// The two buffers of an overlap, if that is the failure.
    pub fn overlapping_pair(&self) -> Option<(PlacedBuffer, PlacedBuffer)> {
        match self.failure {
            KitFailure::Invalid(PlanFailure::Overlap { first, second, .. }) => {
                Some((first, second))
            }
            _ => None,
        }
    }
}

impl fmt::Display for SetFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "set \"{}\": {}", self.set, self.failure)
    }
}

/// The head a port reached on one set.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanQuality {
    /// The set's name.
    pub set: String,
    /// Requests in the set.
    pub requests: usize,
    /// The head, or `None` where the port refused a set that may overflow
    /// 32 bits (a refusal is then the right answer).
    pub head: Option<u32>,
    /// The liveness lower bound.
    pub lower_bound: u64,
}

impl PlanQuality {
    pub(super) fn planned(set: &RequestSet, head: u32, lower_bound: u64) -> Self {
        PlanQuality {
            set: set.name.clone(),
            requests: set.requests.len(),
            head: Some(head),
            lower_bound,
        }
    }

    pub(super) fn refused(set: &RequestSet, lower_bound: u64) -> Self {
        PlanQuality {
            head: None,
            ..PlanQuality::planned(set, 0, lower_bound)
        }
    }

    /// Head over lower bound (1.0 is optimal; 1.0 for an empty bound or a
    /// refused set).
    pub fn ratio(&self) -> f64 {
        match self.head {
            Some(head) if self.lower_bound > 0 => f64::from(head) / self.lower_bound as f64,
            _ => 1.0,
        }
    }
}

/// Everything one kit run found.
#[derive(Debug, Clone, PartialEq)]
pub struct KitReport {
    /// The port's name ([`MemoryPlanner::name`](crate::planner::MemoryPlanner::name)).
    pub planner: &'static str,
    /// Sets that passed, with their figures.
    pub passed: Vec<PlanQuality>,
    /// Sets that failed.
    pub failures: Vec<SetFailure>,
}

impl KitReport {
    pub(super) fn new(planner: &'static str) -> Self {
        KitReport {
            planner,
            passed: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The worst head / lower bound ratio over the passed sets.
    pub fn worst_ratio(&self) -> f64 {
        self.passed
            .iter()
            .map(PlanQuality::ratio)
            .fold(1.0, f64::max)
    }

    /// The mean head / lower bound ratio over the sets that were planned
    /// (per set, so that the sets near 4 GiB do not drown the small ones).
    pub fn mean_ratio(&self) -> f64 {
        let planned: Vec<f64> = self
            .passed
            .iter()
            .filter(|q| q.head.is_some())
            .map(PlanQuality::ratio)
            .collect();
        if planned.is_empty() {
            1.0
        } else {
            planned.iter().sum::<f64>() / planned.len() as f64
        }
    }

    /// Panics with every failure listed, if there is one.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.failures.is_empty(), "{self}");
    }
}

impl fmt::Display for KitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "planner \"{}\": {} sets passed, {} failed; head / lower bound: worst {:.3}, mean {:.3}",
            self.planner,
            self.passed.len(),
            self.failures.len(),
            self.worst_ratio(),
            self.mean_ratio()
        )?;
        for failure in &self.failures {
            writeln!(f, "  FAIL {failure}")?;
        }
        Ok(())
    }
}
