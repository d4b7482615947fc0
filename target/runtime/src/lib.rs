#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(test, feature = "writer", feature = "port-kit"))]
extern crate alloc;

pub mod accel;
pub mod allocation;
pub mod arena;
pub mod canary;
pub mod choice;
pub mod constants;
pub mod float_text;
pub mod interpreter;
pub mod kernels;
pub mod liveness;
pub mod marks;
pub mod model;
pub mod planner;
pub mod pool;
pub mod port;
pub mod profile;
pub mod reach;
pub mod request;
pub mod schedule;
pub mod schema;
pub mod wire_form;
#[cfg(any(test, feature = "writer"))]
pub mod writer;
