//! Which Cortex-M core is being modelled.

/// A Cortex-M core whose published instruction timings the model follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    /// Cortex-M0+ (ARMv6-M, 2-stage pipeline).
    M0Plus,
    /// Cortex-M3 (ARMv7-M, 3-stage pipeline).
    M3,
    /// Cortex-M4 (ARMv7E-M, DSP extension, optional single-precision FPU).
    M4,
    /// Cortex-M33 (ARMv8-M Mainline); no full timing table is published, modelled with the M4 rules.
    M33,
    /// Cortex-M7: dual-issue, caches, branch predictor; modelled (roughly) with the M4 rules.
    M7,
    /// Cortex-M55: dual-issue, MVE; modelled (roughly) with the M33 (hence M4) rules.
    M55,
}

impl Core {
    /// Every core the model knows, in a fixed order.
    pub const ALL: [Core; 6] = [
        Core::M0Plus,
        Core::M3,
        Core::M4,
        Core::M33,
        Core::M7,
        Core::M55,
    ];

    /// Parses "cortex-m0plus"/"cortex-m0+"/"m0+"/"m0plus", "cortex-m3"/"m3", "cortex-m4"/"m4",
    /// "cortex-m33"/"m33", "cortex-m7"/"m7", "cortex-m55"/"m55", case-insensitively and ignoring
    /// surrounding whitespace.
    pub fn parse(name: &str) -> Option<Core> {
        let lower = name.trim().to_ascii_lowercase();
        let short = lower.strip_prefix("cortex-").unwrap_or(&lower);
        match short {
            "m0plus" | "m0+" => Some(Core::M0Plus),
            "m3" => Some(Core::M3),
            "m4" => Some(Core::M4),
            "m33" => Some(Core::M33),
            "m7" => Some(Core::M7),
            "m55" => Some(Core::M55),
            _ => None,
        }
    }

    /// The canonical name, e.g. "cortex-m4"; [`Core::parse`] accepts it back.
    pub fn name(self) -> &'static str {
        match self {
            Core::M0Plus => "cortex-m0plus",
            Core::M3 => "cortex-m3",
            Core::M4 => "cortex-m4",
            Core::M33 => "cortex-m33",
            Core::M7 => "cortex-m7",
            Core::M55 => "cortex-m55",
        }
    }

    /// True for the dual-issue, cached cores (M7, M55) whose estimate reuses the single-issue
    /// M4/M33 rules and is therefore only rough.
    pub fn rough(self) -> bool {
        matches!(self, Core::M7 | Core::M55)
    }
}
