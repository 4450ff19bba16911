//! `lance-rows`: one Lance dataset whose fragments are the shards.

pub(crate) mod edit;
pub mod read;
pub mod write;
