//! Memory pools in board and scenario files.
//!
//! A board splits its arena into pools, in address order (the first at
//! the arena's start), and says who reaches each one:
//!
//! ```toml
//! arena_size = 0x200000
//! pools = [
//!   { name = "fast", size = 0x10000, reach = ["cpu"] },
//!   { name = "sram", size = 0x1f0000, reach = ["cpu", "accel"], cacheable = true },
//! ]
//! ```
//!
//! A scenario names the pools its model's buffers may use
//! (`pools = ["fast", "sram"]`); without the key the arena is planned as
//! one memory, as before pools existed. The runtime's
//! [`PoolLayout`](hilt_runtime::pool::PoolLayout) is made here, once, for
//! the firmware build and the host's layout alike.

use std::path::Path;

use hilt_runtime::pool::{MAX_POOLS, Pool, PoolLayout, Reach};
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// One pool of a board's arena, as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Name scenarios use (`dtcm`, `sram1`, ...).
    pub name: String,
    /// Bytes of the arena in this pool.
    pub size: u64,
    /// Who reaches it: `cpu` and/or `accel` (a DMA engine or NPU).
    #[serde(default = "cpu_only")]
    pub reach: Vec<String>,
    /// Whether the CPU sees it through a data cache.
    #[serde(default)]
    pub cacheable: bool,
}

fn cpu_only() -> Vec<String> {
    vec!["cpu".into()]
}

/// `reach` as the runtime's flags.
fn reach_of(path: &Path, spec: &PoolSpec) -> Result<Reach, ConfigError> {
    let mut reach = Reach::default();
    for who in &spec.reach {
        reach = reach.with(match who.as_str() {
            "cpu" => Reach::CPU,
            "accel" => Reach::ACCEL,
            other => {
                return Err(ConfigError::invalid(
                    path,
                    "pools",
                    format!(
                        "pool {:?}: unknown reach {other:?} (use \"cpu\" and/or \"accel\")",
                        spec.name
                    ),
                ));
            }
        });
    }
    if !reach.covers(Reach::CPU) {
        return Err(ConfigError::invalid(
            path,
            "pools",
            format!(
                "pool {:?}: the CPU must reach every pool (its kernels run there)",
                spec.name
            ),
        ));
    }
    Ok(reach)
}

/// Checks a board's pools against its arena: at most [`MAX_POOLS`],
/// distinct names, sizes that add up to `arena_size`, known reach.
pub(crate) fn check_board_pools(
    path: &Path,
    pools: &[PoolSpec],
    arena_size: u64,
) -> Result<(), ConfigError> {
    if pools.is_empty() {
        return Ok(());
    }
    let invalid = |problem: String| ConfigError::invalid(path, "pools", problem);
    if pools.len() > MAX_POOLS {
        return Err(invalid(format!(
            "{} pools, at most {MAX_POOLS}",
            pools.len()
        )));
    }
    for (i, p) in pools.iter().enumerate() {
        if p.name.is_empty() || pools[..i].iter().any(|q| q.name == p.name) {
            return Err(invalid(format!(
                "pool {i}: name {:?} is empty or used twice",
                p.name
            )));
        }
        if p.size == 0 || !p.size.is_multiple_of(64) {
            return Err(invalid(format!(
                "pool {:?}: size {} must be a non-zero multiple of 64",
                p.name, p.size
            )));
        }
        reach_of(path, p)?;
    }
    let total: u64 = pools.iter().map(|p| p.size).sum();
    if total != arena_size {
        return Err(invalid(format!(
            "the pools hold {total} bytes but arena_size is {arena_size}: they must split the arena exactly"
        )));
    }
    Ok(())
}

/// The runtime's layout for a board's `pools` and a scenario's choice of
/// them (`None`: one memory, the whole arena). `scenario` names the file
/// an error is reported against.
pub fn layout(
    scenario: &Path,
    board_name: &str,
    pools: &[PoolSpec],
    chosen: Option<&[String]>,
) -> Result<PoolLayout, ConfigError> {
    let Some(chosen) = chosen else {
        return Ok(PoolLayout::WHOLE);
    };
    let known = pools
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if pools.is_empty() {
        return Err(ConfigError::invalid(
            scenario,
            "pools",
            format!("board {board_name} declares no pools"),
        ));
    }
    if let Some(unknown) = chosen.iter().find(|c| !pools.iter().any(|p| &p.name == *c)) {
        return Err(ConfigError::invalid(
            scenario,
            "pools",
            format!("board {board_name} has no pool {unknown:?} (its pools: {known})"),
        ));
    }
    let mut out = Vec::with_capacity(pools.len());
    for p in pools {
        out.push(
            Pool::new(p.size as u32, reach_of(scenario, p)?)
                .cacheable(p.cacheable)
                .planned(chosen.contains(&p.name)),
        );
    }
    PoolLayout::new(&out).map_err(|e| ConfigError::invalid(scenario, "pools", e.to_string()))
}

/// The name of pool `index` of a board, for messages and reports.
pub fn pool_name(pools: &[PoolSpec], index: usize) -> String {
    pools
        .get(index)
        .map_or_else(|| format!("pool {index}"), |p| p.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, size: u64, reach: &[&str]) -> PoolSpec {
        PoolSpec {
            name: name.into(),
            size,
            reach: reach.iter().map(|r| r.to_string()).collect(),
            cacheable: false,
        }
    }

    #[test]
    fn board_pools_must_split_the_arena_exactly() {
        let p = Path::new("b.toml");
        let pools = [
            spec("fast", 64, &["cpu"]),
            spec("big", 128, &["cpu", "accel"]),
        ];
        check_board_pools(p, &pools, 192).unwrap();
        let e = check_board_pools(p, &pools, 256).unwrap_err().to_string();
        assert!(e.contains("hold 192 bytes but arena_size is 256"), "{e}");
        let e = check_board_pools(p, &[spec("x", 64, &["npu"])], 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown reach \"npu\""), "{e}");
        let e = check_board_pools(p, &[spec("x", 64, &["accel"])], 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the CPU must reach every pool"), "{e}");
        let e = check_board_pools(p, &[spec("x", 64, &["cpu"]), spec("x", 64, &["cpu"])], 128)
            .unwrap_err()
            .to_string();
        assert!(e.contains("used twice"), "{e}");
    }

    #[test]
    fn a_scenario_picks_pools_by_name() {
        let s = Path::new("s.toml");
        let pools = [
            spec("fast", 64, &["cpu"]),
            spec("big", 128, &["cpu", "accel"]),
        ];
        assert_eq!(layout(s, "b", &pools, None).unwrap(), PoolLayout::WHOLE);
        let l = layout(s, "b", &pools, Some(&["big".into()])).unwrap();
        assert_eq!(l.pools().len(), 2);
        assert!(!l.pools()[0].planned && l.pools()[1].planned);
        let e = layout(s, "b", &pools, Some(&["dtcm".into()]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("board b has no pool \"dtcm\" (its pools: fast, big)"),
            "{e}"
        );
        let e = layout(s, "b", &[], Some(&["fast".into()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("declares no pools"), "{e}");
    }
}
