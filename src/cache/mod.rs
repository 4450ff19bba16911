//! Writing and opening caches: metadata, naming, locking, atomic publish, the
//! encode pipeline, the Arrow shard writer, and `open_cache`.

pub mod arrow_writer;
pub mod lock;
pub mod manifest;
pub mod metadata;
pub mod naming;
pub mod open;
pub mod pipeline;
pub mod publish;
pub mod rowsum;
pub mod stats;
pub mod verify;
