//! Offsets planned ahead of time and stored in the model.

use core::fmt;

use super::{MemoryPlanner, PlanError, check_requests, greedy, head_size};
use crate::model::Model;
use crate::request::BufferRequest;

/// Name of the metadata entry that holds an offline plan (TFLM's convention).
pub const OFFLINE_PLAN_METADATA: &str = "OfflineMemoryAllocation";

/// The only plan format version defined.
const PLAN_VERSION: i32 = 1;

/// Words before the offsets: version, subgraph count, offset count.
const HEADER_WORDS: usize = 3;

/// Why an offline plan was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum OfflinePlanError {
    /// The model has no `OfflineMemoryAllocation` metadata.
    NotFound,
    /// The metadata is shorter than its header says, or not whole int32s.
    Truncated {
        /// Bytes present.
        bytes: u32,
        /// Bytes the header calls for.
        needed: u32,
    },
    /// A version other than 1.
    UnsupportedVersion {
        /// The version found.
        version: i32,
    },
    /// The plan covers a different number of tensors than the model has.
    TensorCountMismatch {
        /// Offsets in the plan.
        plan: u32,
        /// Tensors in the model (all subgraphs).
        model: u32,
    },
    /// An offset below -1 (-1 means "plan at run time").
    NegativeOffset {
        /// Tensor index.
        tensor: u32,
        /// The value.
        offset: i32,
    },
    /// A buffer would end past the space the plan may use.
    OutOfBounds {
        /// Tensor index.
        tensor: u32,
        /// Its offset.
        offset: u32,
        /// Its end (offset + padded size).
        end: u64,
        /// The limit.
        limit: u32,
    },
    /// An offset that is not a multiple of the buffer's alignment.
    Misaligned {
        /// Tensor index.
        tensor: u32,
        /// Its offset.
        offset: u32,
        /// The alignment required.
        align: u32,
    },
    /// Two tensors live at the same step share bytes.
    Overlap {
        /// One tensor.
        first: u32,
        /// The other.
        second: u32,
    },
}

impl fmt::Display for OfflinePlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OfflinePlanError::NotFound => {
                write!(f, "the model has no `{OFFLINE_PLAN_METADATA}` metadata")
            }
            OfflinePlanError::Truncated { bytes, needed } => {
                write!(f, "plan is {bytes} bytes, its header calls for {needed}")
            }
            OfflinePlanError::UnsupportedVersion { version } => {
                write!(f, "plan version {version} is not supported (only 1)")
            }
            OfflinePlanError::TensorCountMismatch { plan, model } => {
                write!(
                    f,
                    "plan has {plan} offsets but the model has {model} tensors"
                )
            }
            OfflinePlanError::NegativeOffset { tensor, offset } => {
                write!(f, "tensor {tensor}: offset {offset} is negative")
            }
            OfflinePlanError::OutOfBounds {
                tensor,
                offset,
                end,
                limit,
            } => write!(
                f,
                "tensor {tensor}: offset {offset} ends at {end}, past the {limit}-byte limit"
            ),
            OfflinePlanError::Misaligned {
                tensor,
                offset,
                align,
            } => {
                write!(
                    f,
                    "tensor {tensor}: offset {offset} is not a multiple of {align}"
                )
            }
            OfflinePlanError::Overlap { first, second } => {
                write!(
                    f,
                    "tensors {first} and {second} are live together but share bytes"
                )
            }
        }
    }
}

impl core::error::Error for OfflinePlanError {}

/// Offsets from an offline plan (`[version, subgraphs, n, offset × n]`,
/// little-endian int32). Tensors with offset -1 and all scratch buffers are
/// placed greedily around the fixed ones, as TFLM does.
///
/// Unlike TFLM, which trusts the plan, every fixed offset is checked: not
/// negative, aligned, inside the limit, and not overlapping another fixed
/// buffer that is live at the same step.
#[derive(Debug, Clone, Copy)]
pub struct Offline<'a> {
    /// Offsets of subgraph 0's tensors, as little-endian int32s.
    offsets: &'a [u8],
    limit: u32,
}

impl<'a> Offline<'a> {
    /// Reads the plan from `model`'s metadata.
    pub fn from_model(model: &Model<'a>) -> Result<Self, OfflinePlanError> {
        let data = model
            .metadata(OFFLINE_PLAN_METADATA)
            .ok_or(OfflinePlanError::NotFound)?;
        let total_tensors = model.total_tensor_count();
        Self::from_metadata(data, total_tensors, model.tensor_count())
    }

    /// Reads a plan from metadata bytes for a model with `total_tensors`
    /// tensors over all subgraphs and `subgraph0_tensors` in subgraph 0.
    pub fn from_metadata(
        data: &'a [u8],
        total_tensors: u32,
        subgraph0_tensors: u32,
    ) -> Result<Self, OfflinePlanError> {
        let word = |i: usize| {
            let b = &data[4 * i..4 * i + 4];
            i32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        let bytes = data.len() as u32;
        if data.len() < 4 * HEADER_WORDS {
            return Err(OfflinePlanError::Truncated {
                bytes,
                needed: 4 * HEADER_WORDS as u32,
            });
        }
        if word(0) != PLAN_VERSION {
            return Err(OfflinePlanError::UnsupportedVersion { version: word(0) });
        }
        let count = word(2);
        if count < 0 || count as u32 != total_tensors {
            return Err(OfflinePlanError::TensorCountMismatch {
                plan: count as u32,
                model: total_tensors,
            });
        }
        let needed = 4 * (HEADER_WORDS as u64 + u64::from(total_tensors));
        if data.len() as u64 != needed {
            return Err(OfflinePlanError::Truncated {
                bytes,
                needed: needed.min(u64::from(u32::MAX)) as u32,
            });
        }
        let start = 4 * HEADER_WORDS;
        let offsets = &data[start..start + 4 * subgraph0_tensors as usize];
        Ok(Offline {
            offsets,
            limit: i32::MAX as u32,
        })
    }

    /// Refuses fixed buffers that end past `limit` bytes (the head the
    /// arena can offer). The default limit is `i32::MAX`.
    #[must_use]
    pub fn with_limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// The raw offset stored for tensor `tensor` (-1: plan at run time).
    pub fn offset_of(&self, tensor: u32) -> Option<i32> {
        let i = tensor as usize * 4;
        let b = self.offsets.get(i..i + 4)?;
        Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn fixed(&self, request: &BufferRequest) -> Option<u32> {
        let offset = self.offset_of(request.tensor_index()?)?;
        u32::try_from(offset).ok()
    }

    fn validate(&self, requests: &[BufferRequest]) -> Result<(), OfflinePlanError> {
        for r in requests {
            let Some(tensor) = r.tensor_index() else {
                continue;
            };
            match self.offset_of(tensor) {
                Some(offset) if offset < -1 => {
                    return Err(OfflinePlanError::NegativeOffset { tensor, offset });
                }
                Some(-1) | None => continue,
                Some(offset) => {
                    let offset = offset as u32;
                    if !offset.is_multiple_of(r.align) {
                        return Err(OfflinePlanError::Misaligned {
                            tensor,
                            offset,
                            align: r.align,
                        });
                    }
                    let end = u64::from(offset) + u64::from(r.padded_size().unwrap_or(0));
                    if end > u64::from(self.limit) {
                        return Err(OfflinePlanError::OutOfBounds {
                            tensor,
                            offset,
                            end,
                            limit: self.limit,
                        });
                    }
                }
            }
        }
        for (i, a) in requests.iter().enumerate() {
            let Some(a_off) = self.fixed(a) else { continue };
            for b in &requests[i + 1..] {
                let Some(b_off) = self.fixed(b) else { continue };
                let a_end = u64::from(a_off) + u64::from(a.padded_size().unwrap_or(0));
                let b_end = u64::from(b_off) + u64::from(b.padded_size().unwrap_or(0));
                let share = u64::from(a_off) < b_end && u64::from(b_off) < a_end;
                if share && a.overlaps_in_time(b) {
                    return Err(OfflinePlanError::Overlap {
                        first: a.tensor_index().unwrap_or(0),
                        second: b.tensor_index().unwrap_or(0),
                    });
                }
            }
        }
        Ok(())
    }
}

impl MemoryPlanner for Offline<'_> {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn workspace_words(&self, count: usize) -> usize {
        2 * count
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        check_requests(
            requests,
            workspace,
            self.workspace_words(requests.len()),
            offsets,
        )?;
        self.validate(requests)?;
        greedy::place(requests, |i| self.fixed(&requests[i]), workspace, offsets)?;
        head_size(requests, offsets)
    }
}
