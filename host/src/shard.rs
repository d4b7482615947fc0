//! Splitting one run over several hosts: `hilt run --shard I/N`.
//!
//! ```
//! use hilt::shard::Shard;
//! let shard: Shard = "2/3".parse().unwrap();
//! let pairs = vec![("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")];
//! // Sorted, then every third pair from the second: ("a", "y").
//! assert_eq!(shard.select(pairs, |p| (p.0.to_string(), p.1.to_string())), [("a", "y")]);
//! ```
//!
//! Every host sorts the same (scenario, board) list the same way and keeps
//! the pairs whose position modulo N is I - 1, so N hosts given the same
//! scenarios and boards run every pair exactly once, whatever order the
//! scenario files were named in. Dealing round-robin rather than cutting
//! the list into N blocks spreads one scenario's boards over the hosts, so
//! one slow model does not land on a single host.

use std::fmt;
use std::str::FromStr;

/// One host's part of a run: the `index`-th (1-based) of `count` parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: usize,
    count: usize,
}

/// What is wrong with a `--shard` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not `I/N` with two whole numbers.
    #[error("'{0}' is not I/N (two whole numbers, such as 2/4)")]
    Syntax(String),
    /// N is zero.
    #[error("'{0}': N (the number of shards) must be at least 1")]
    NoShards(String),
    /// I is zero or larger than N.
    #[error("'{text}': I counts from 1 to N, so it must be between 1 and {count}")]
    OutOfRange {
        /// The value as given.
        text: String,
        /// N.
        count: usize,
    },
}

impl Shard {
    /// The `index`-th (1-based) of `count` shards.
    pub fn new(index: usize, count: usize) -> Result<Self, ShardError> {
        let text = format!("{index}/{count}");
        if count == 0 {
            return Err(ShardError::NoShards(text));
        }
        if index == 0 || index > count {
            return Err(ShardError::OutOfRange { text, count });
        }
        Ok(Shard { index, count })
    }

    /// I, counting from 1.
    pub fn index(&self) -> usize {
        self.index
    }

    /// N.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Keeps this shard's items: sorts `items` by `key` (scenario name,
    /// board name), then deals them round-robin over the shards. Equal keys
    /// keep their given order (the sort is stable).
    pub fn select<T>(&self, items: Vec<T>, key: impl Fn(&T) -> (String, String)) -> Vec<T> {
        let mut keyed: Vec<((String, String), T)> =
            items.into_iter().map(|item| (key(&item), item)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed
            .into_iter()
            .enumerate()
            .filter(|(position, _)| position % self.count == self.index - 1)
            .map(|(_, (_, item))| item)
            .collect()
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || ShardError::Syntax(text.to_string());
        let (index, count) = text.trim().split_once('/').ok_or_else(syntax)?;
        let number = |part: &str| {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            part.parse::<usize>().map_err(|_| syntax())
        };
        let (index, count) = (number(index)?, number(count)?);
        Shard::new(index, count).map_err(|e| match e {
            ShardError::NoShards(_) => ShardError::NoShards(text.to_string()),
            ShardError::OutOfRange { count, .. } => ShardError::OutOfRange {
                text: text.to_string(),
                count,
            },
            other => other,
        })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<(String, String)> {
        let mut out = Vec::new();
        for scenario in ["smoke", "kws", "person", "hello", "svdf"] {
            for board in ["qemu-b", "qemu-a", "nrf52840-dk"] {
                out.push((scenario.to_string(), board.to_string()));
            }
        }
        out
    }

    fn key(p: &(String, String)) -> (String, String) {
        p.clone()
    }

    #[test]
    fn parses_i_of_n() {
        assert_eq!("1/1".parse::<Shard>(), Shard::new(1, 1));
        assert_eq!(" 3/4 ".parse::<Shard>(), Shard::new(3, 4));
        let s: Shard = "2/5".parse().unwrap();
        assert_eq!((s.index(), s.count(), s.to_string()), (2, 5, "2/5".into()));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        for (text, message) in [
            ("", "'' is not I/N (two whole numbers, such as 2/4)"),
            ("3", "'3' is not I/N (two whole numbers, such as 2/4)"),
            ("a/b", "'a/b' is not I/N (two whole numbers, such as 2/4)"),
            ("-1/2", "'-1/2' is not I/N (two whole numbers, such as 2/4)"),
            (
                "1/2/3",
                "'1/2/3' is not I/N (two whole numbers, such as 2/4)",
            ),
            (
                "1/99999999999999999999999",
                "'1/99999999999999999999999' is not I/N (two whole numbers, such as 2/4)",
            ),
            ("1/0", "'1/0': N (the number of shards) must be at least 1"),
            (
                "0/2",
                "'0/2': I counts from 1 to N, so it must be between 1 and 2",
            ),
            (
                "3/2",
                "'3/2': I counts from 1 to N, so it must be between 1 and 2",
            ),
        ] {
            let err = text.parse::<Shard>().unwrap_err();
            assert_eq!(err.to_string(), message, "{text:?}");
        }
    }

    #[test]
    fn shards_together_run_every_pair_exactly_once() {
        let all = pairs();
        for count in 1..=all.len() + 2 {
            let mut seen: Vec<(String, String)> = Vec::new();
            for index in 1..=count {
                let part = Shard::new(index, count).unwrap().select(all.clone(), key);
                // Balanced: sizes differ by at most one.
                let fair = all.len() / count;
                assert!(
                    part.len() == fair || part.len() == fair + 1,
                    "{index}/{count}: {}",
                    part.len()
                );
                seen.extend(part);
            }
            let mut expected = all.clone();
            expected.sort();
            seen.sort();
            assert_eq!(seen, expected, "N = {count}");
        }
    }

    #[test]
    fn the_split_does_not_depend_on_the_order_pairs_were_listed_in() {
        let forward = pairs();
        let mut backward = forward.clone();
        backward.reverse();
        for index in 1..=4 {
            let shard = Shard::new(index, 4).unwrap();
            assert_eq!(
                shard.select(forward.clone(), key),
                shard.select(backward.clone(), key)
            );
        }
    }

    #[test]
    fn one_shard_keeps_everything_sorted() {
        let mut expected = pairs();
        expected.sort();
        assert_eq!(Shard::new(1, 1).unwrap().select(pairs(), key), expected);
    }

    #[test]
    fn a_scenarios_boards_are_spread_over_the_hosts() {
        let part = Shard::new(1, 3).unwrap().select(pairs(), key);
        let scenarios: std::collections::BTreeSet<&str> =
            part.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(scenarios.len(), 5, "{part:?}");
    }
}
