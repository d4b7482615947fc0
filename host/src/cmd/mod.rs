//! The subcommands of the `hilt` binary, one module each (flags and
//! handler together, as probe-rs lays out its CLI), and the pieces more
//! than one of them uses: flag groups ([`args`]), the workspace and board
//! selection of the board-running commands ([`workspace`]), their reports
//! ([`reporting`]) and printed runs ([`print`]). The library (`hilt::*`)
//! does the work; these modules turn flags into its calls and its results
//! into text, so they stay private to the binary.

pub(crate) mod args;
pub(crate) mod bench;
pub(crate) mod bench_target;
pub(crate) mod boards;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod infer;
pub(crate) mod layout;
pub(crate) mod plan;
pub(crate) mod print;
pub(crate) mod reporting;
pub(crate) mod run;
pub(crate) mod workspace;
