//! Settings that a build script, a board file or a command line picks by
//! name (the memory planner, the canary mode), and the one error for a name
//! that is none of them.
//!
//! The names live here, next to the types they select, so that the host
//! CLI, the scenario loader and the firmware's build script accept exactly
//! the same words and refuse the same way: a fifth copy of the list cannot
//! drift from the four others when there is only one.
//!
//! ```
//! use hilt_runtime::planner::PlannerKind;
//!
//! assert_eq!("greedy".parse::<PlannerKind>(), Ok(PlannerKind::Greedy));
//! let error = "gready".parse::<PlannerKind>().unwrap_err();
//! assert_eq!(error.given(), "gready");
//! assert_eq!(error.to_string(), "unknown planner \"gready\": use linear, greedy, offline or optimal");
//! ```

use core::fmt;

/// Longest name an [`UnknownName`] quotes back; longer ones are cut (on a
/// character boundary) and shown with `…`. The error stays `Copy` and
/// heap-free, like every target error.
pub const MAX_SHOWN: usize = 32;

/// A name that is not one of a setting's accepted names.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UnknownName {
    setting: &'static str,
    accepted: &'static [&'static str],
    shown: [u8; MAX_SHOWN],
    len: u8,
    truncated: bool,
}

impl UnknownName {
    /// The error for `given`, which is not one of `accepted` names of `setting`.
    pub fn new(setting: &'static str, given: &str, accepted: &'static [&'static str]) -> Self {
        let mut end = given.len().min(MAX_SHOWN);
        while !given.is_char_boundary(end) {
            end -= 1;
        }
        let mut shown = [0u8; MAX_SHOWN];
        shown[..end].copy_from_slice(&given.as_bytes()[..end]);
        UnknownName {
            setting,
            accepted,
            shown,
            len: end as u8,
            truncated: end < given.len(),
        }
    }

    /// What was being chosen ("planner", "canary mode").
    pub fn setting(&self) -> &'static str {
        self.setting
    }

    /// The name given (its first [`MAX_SHOWN`] bytes).
    pub fn given(&self) -> &str {
        // The bytes were cut on a character boundary of a `str`.
        core::str::from_utf8(&self.shown[..usize::from(self.len)]).unwrap_or("")
    }

    /// Every accepted name.
    pub fn accepted(&self) -> &'static [&'static str] {
        self.accepted
    }
}

impl fmt::Debug for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnknownName")
            .field("setting", &self.setting)
            .field("given", &self.given())
            .field("truncated", &self.truncated)
            .field("accepted", &self.accepted)
            .finish()
    }
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ellipsis = if self.truncated { "…" } else { "" };
        write!(
            f,
            "unknown {} \"{}{ellipsis}\": use ",
            self.setting,
            self.given()
        )?;
        for (i, name) in self.accepted.iter().enumerate() {
            let separator = match i {
                0 => "",
                _ if i + 1 == self.accepted.len() => " or ",
                _ => ", ",
            };
            write!(f, "{separator}{name}")?;
        }
        Ok(())
    }
}

impl core::error::Error for UnknownName {}

#[cfg(feature = "defmt")]
impl defmt::Format for UnknownName {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "unknown {=str} {=str} (one of {=[?]})",
            self.setting,
            self.given(),
            self.accepted
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &["a", "b", "c"];

    #[test]
    fn names_the_value_and_every_accepted_one() {
        let e = UnknownName::new("letter", "z", NAMES);
        assert_eq!(e.to_string(), "unknown letter \"z\": use a, b or c");
        assert_eq!(
            (e.setting(), e.given(), e.accepted()),
            ("letter", "z", NAMES)
        );
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        let given = "é".repeat(MAX_SHOWN);
        let e = UnknownName::new("letter", &given, NAMES);
        assert_eq!(e.given(), "é".repeat(MAX_SHOWN / 2));
        assert!(e.to_string().contains("é…\""));
    }
}
