//! What every layout shares: cache naming, `_metadata.json`, the cache lock,
//! atomic publication of a staging directory, the parallel encode pipeline
//! and checksums. Nothing here knows a layout's files.

pub mod build;
pub mod checksums;
pub mod gc;
pub mod location;
pub mod lock;
pub mod metadata;
pub mod naming;
pub(crate) mod pipeline;
pub(crate) mod publish;
#[cfg(feature = "s3")]
pub mod remote;
pub mod rowsum;
pub mod versions;
