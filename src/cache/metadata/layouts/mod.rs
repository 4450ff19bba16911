//! The metadata of each layout: its keys (the reference's first, in its
//! order, then ours), and the checks each layout's metadata must pass.

mod arrow_shards;
mod compression;
mod lance_rows;
mod video_frames;

use std::path::Path;

use crate::error::{Error, Result};

pub use arrow_shards::{ArrowShardsMetadata, DedupInfo};
pub use compression::{Codec, Compression};
pub use lance_rows::LanceRowsMetadata;
pub use video_frames::{
    SegmentQuality, SegmentsInfo, VideoEntry, VideoFramesMetadata, WEBP_MAX_SIDE,
};

/// Checks a Lance cache's recorded fragment row counts against `num_rows`
/// and that its dataset's manifest directory is there.
///
/// # Errors
/// [`Error::Metadata`] naming `path`; [`Error::MissingShard`] for `_versions`.
fn check_lance_dataset(
    dir: &Path,
    path: &Path,
    fragments: Option<&[u64]>,
    num_rows: u64,
) -> Result<()> {
    if let Some(c) = fragments {
        let sum = c.iter().try_fold(0u64, |a, &n| a.checked_add(n));
        if sum != Some(num_rows) {
            let sum = sum.map_or("more than 2^64".into(), |s| s.to_string());
            return Err(Error::metadata(
                path,
                format!("fragment row counts add up to {sum}, but num_rows is {num_rows}"),
            ));
        }
    }
    let versions = dir.join("_versions");
    if !crate::storage::storage_for(&versions).is_dir(&versions) {
        return Err(Error::MissingShard { path: versions });
    }
    Ok(())
}
