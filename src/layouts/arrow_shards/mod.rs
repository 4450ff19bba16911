//! `arrow-shards`: Arrow IPC files rotated by a byte budget (the reference's
//! layout), written resumably and read through memory maps.

pub mod dedup;
pub mod format;
pub mod integrity;
pub mod ipc;
pub(crate) mod manifest;
pub mod read;
pub mod shard_writer;
pub mod write;
