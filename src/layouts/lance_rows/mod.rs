//! `lance-rows`: one Lance dataset whose fragments are the shards.

pub mod read;
pub mod write;
