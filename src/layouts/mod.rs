//! The physical layouts of a cache, one folder each, and what reads across
//! them.
//!
//! Each layout folder has `format.rs` (what its writer and reader share:
//! file names, schema, constants), `write.rs` and `read.rs`; a reader imports
//! its `format.rs`, never a writer. [`open`] picks a layout's reader from the
//! `layout` in `_metadata.json`; [`verify`] and [`stats`] work on any opened
//! cache through the [`Backend`] trait ([`backend`]).

pub mod arrow_shards;
pub mod backend;
pub mod edit;
pub mod gather;
pub mod hf_arrow;
pub mod inspect;
#[cfg(feature = "lance")]
pub mod lance_rows;
pub mod open;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod spec;
pub mod stats;
pub mod verify;
#[cfg(feature = "video")]
pub mod video_frames;

pub use arrow_shards::read::ArrowShards;
pub use backend::{Backend, BatchIter, IterOptions};
#[cfg(feature = "lance")]
pub use lance_rows::read::{LanceReadOptions, LanceRows};
#[cfg(feature = "video")]
pub use video_frames::read::{LanceVideoFrames, Window, WindowBatch};
