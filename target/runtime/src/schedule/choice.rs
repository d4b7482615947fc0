//! What a schedule decides, shared by the schedule's analysis
//! ([`super`]) and its fused chains ([`super::fusion`]): which schedule
//! runs ([`Schedule`], [`OpSet`]), an op run in place ([`InPlace`]), and
//! why an op or a chain is left as TFLM's ([`Refusal`]).

use core::fmt;

/// Whether this build has the lean schedule (not under the `no-lean`
/// feature): when false, [`in_place`] refuses every op and the compiler
/// drops the schedule's analysis and the kernels' in-place paths.
pub const LEAN_LINKED: bool = !cfg!(feature = "no-lean");

/// Which schedule an allocation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Schedule {
    /// TFLM's: every op's inputs and outputs in buffers of their own.
    #[default]
    Tflm,
    /// Ops whose input dies there write their output into its buffer;
    /// allocate narrows this to [`Schedule::Narrowing`] (or to TFLM's)
    /// when that has the lower liveness bound ([`resolve`]).
    Lean,
    /// [`Schedule::Lean`] for the ops whose output is no larger than their
    /// input only. A widening op in place makes its whole chain one buffer
    /// of the wider size, which can raise the peak where the chain is
    /// still narrow (VWW's first layers, next to its input).
    Narrowing,
    /// What [`Schedule::Lean`] resolves to: only these ops in place, the
    /// ones without which the peak would be higher (each op in place costs
    /// a copy of its output), and only these fused chains (by first op).
    Ops {
        /// The ops that may run in place.
        in_place: OpSet,
        /// The first ops of the chains that run fused.
        fused: OpSet,
    },
}

/// A set of ops by execution step (below [`OpSet::CAPACITY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet([u32; 8]);

impl OpSet {
    /// Ops a set holds: an op at a later step never runs in place.
    pub const CAPACITY: u32 = 256;

    /// Whether `op` is in the set.
    pub fn contains(&self, op: u32) -> bool {
        op < Self::CAPACITY && self.0[(op / 32) as usize] & (1 << (op % 32)) != 0
    }

    pub(super) fn insert(&mut self, op: u32) {
        if op < Self::CAPACITY {
            self.0[(op / 32) as usize] |= 1 << (op % 32);
        }
    }

    pub(super) fn remove(&mut self, op: u32) {
        if op < Self::CAPACITY {
            self.0[(op / 32) as usize] &= !(1 << (op % 32));
        }
    }

    /// How many ops are in the set.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Schedule {
    /// The name a scenario and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Tflm => "tflm",
            Schedule::Lean => "lean",
            Schedule::Narrowing => "narrowing",
            Schedule::Ops { .. } => "lean",
        }
    }
}

/// An op the lean schedule runs in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// The op (execution step).
    pub op: u32,
    /// Its input tensor dying at this op (position 0, or an ADD's other
    /// operand when only that one dies there).
    pub input: u32,
    /// Its output tensor (position 0), written into the input's buffer.
    pub output: u32,
}

/// Why the lean schedule runs an op as TFLM's, or does not fuse a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refusal {
    /// No in-place form for this operator.
    NoInPlaceForm,
    /// Not int8 in and out.
    NotInt8,
    /// A shape the in-place form does not take (`what` says which).
    Shape {
        /// What is wrong.
        what: &'static str,
    },
    /// The input is still read after this op.
    InputStillRead {
        /// The later op that reads it.
        op: u32,
    },
    /// The input is a model output (the caller reads it afterwards).
    InputIsModelOutput,
    /// The input or output has no planned buffer (a constant, a variable,
    /// a model input written by this op).
    NotPlanned,
    /// The output is larger than the input, and the schedule is
    /// [`Schedule::Narrowing`].
    Widens,
    /// The schedule is TFLM's.
    TflmSchedule,
    /// The peak is no higher with this op as TFLM's (which saves the copy).
    NotNeeded,
    /// The op is part of a fused chain: the chain's last op runs it.
    Fused {
        /// The chain's last op.
        runner: u32,
    },
    /// Not a CONV_2D followed by the CONV_2D that reads its output.
    NoFusedForm,
    /// The peak is no higher with this chain unfused (which saves running
    /// it a row at a time).
    FusionNotNeeded,
    /// The first convolution's output is read by another op too (or is a
    /// model output): it needs a whole buffer.
    IntermediateReadBy {
        /// That op (the operator count for a model output).
        op: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::NoInPlaceForm => f.write_str("no in-place form for this operator"),
            Refusal::NotInt8 => f.write_str("not int8 in and out"),
            Refusal::Shape { what } => write!(f, "{what}"),
            Refusal::InputStillRead { op } => write!(f, "input still read by op {op}"),
            Refusal::InputIsModelOutput => f.write_str("input is a model output"),
            Refusal::NotPlanned => f.write_str("input or output is not a planned buffer"),
            Refusal::Widens => {
                f.write_str("output larger than input (a lower peak without widening ops in place)")
            }
            Refusal::TflmSchedule => f.write_str("TFLM's schedule has the lower peak"),
            Refusal::NotNeeded => f.write_str("the peak is no higher without it (saves the copy)"),
            Refusal::Fused { runner } => write!(f, "fused: op {runner} runs it"),
            Refusal::NoFusedForm => f.write_str("no CONV_2D reads its output next"),
            Refusal::FusionNotNeeded => {
                f.write_str("the peak is no higher unfused (saves running it row by row)")
            }
            Refusal::IntermediateReadBy { op } => {
                write!(
                    f,
                    "its output is read by op {op} too (needs a whole buffer)"
                )
            }
        }
    }
}
