//! `lance-rows`: one Lance dataset whose fragments are the shards.

pub(crate) mod edit;
mod options;
pub mod read;
mod scan;
pub mod write;
