//! What an opened cache costs: bytes per shard and per column on disk, the
//! memory a full load takes, and the files under its directory. Reads file
//! headers only (IPC footers and record batch messages, Lance's statistics);
//! never a row, except a small sample to estimate a Lance cache's memory.

use crate::cache::metadata::LAYOUT_ARROW_SHARDS;
#[cfg(feature = "lance")]
use crate::cache::metadata::LAYOUT_LANCE_ROWS;
use crate::error::{Error, Result};
use crate::layouts::arrow_shards::ipc::shard_column_bytes;
use crate::layouts::open::Cache;
/// Bytes of every file under `dir` (0 when absent), on the storage it lives on.
///
/// # Errors
/// [`Error::Io`] naming a directory that cannot be listed.
pub fn dir_size(dir: &std::path::Path) -> Result<u64> {
    crate::storage::storage_for(dir).dir_size(dir)
}

/// Rows read to estimate the memory of a layout whose headers do not say it.
pub const MEMORY_SAMPLE_ROWS: u64 = 1024;

/// One shard (Arrow IPC file, or Lance fragment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStats {
    /// File name (Arrow) or `fragment-<i>` (Lance).
    pub name: String,
    /// Rows.
    pub rows: u64,
    /// Bytes on disk, when known (Lance fragments: not split out).
    pub bytes: Option<u64>,
}

/// One top-level column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnStats {
    /// Column name.
    pub name: String,
    /// Bytes stored on disk (after compression).
    pub on_disk: u64,
    /// Bytes the column takes in memory once fully loaded.
    pub in_memory: u64,
}

/// How a figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Summed exactly from file headers.
    Exact,
    /// Extrapolated from the first [`MEMORY_SAMPLE_ROWS`] rows.
    Sampled,
    /// Not available for this cache (e.g. the legacy Lance file format).
    Unavailable,
}

impl Measure {
    /// A short label for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Exact => "exact",
            Measure::Sampled => "estimated from a sample",
            Measure::Unavailable => "unavailable",
        }
    }
}

/// Sizes of a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStats {
    /// Shards or fragments, in order.
    pub shards: Vec<ShardStats>,
    /// Columns, in feature order.
    pub columns: Vec<ColumnStats>,
    /// How `on_disk` per column was measured.
    pub on_disk_measure: Measure,
    /// How `in_memory` per column was measured.
    pub in_memory_measure: Measure,
    /// Every file under the cache directory (shards, metadata, assets).
    pub total_bytes_on_disk: u64,
}

impl CacheStats {
    /// Sum of the columns' in-memory bytes: what a full load takes.
    pub fn in_memory_bytes(&self) -> u64 {
        self.columns.iter().map(|c| c.in_memory).sum()
    }
}

/// Measures an opened cache.
///
/// # Errors
/// A read error naming the shard or dataset; [`Error::UnsupportedLayout`]
/// for a layout this build cannot measure.
pub fn cache_stats(cache: &Cache) -> Result<CacheStats> {
    let features = cache.features();
    let names: Vec<String> = features.names().iter().map(|n| n.to_string()).collect();
    let storage = cache.storage.clone();
    let total_bytes_on_disk = storage.dir_size(&cache.dir)?;
    match cache.layout.as_str() {
        LAYOUT_ARROW_SHARDS => {
            let schema = features.arrow_schema();
            let files: Vec<String> = cache
                .metadata
                .as_arrow_shards()
                .map(|m| m.shard_filenames.clone())
                .unwrap_or_default();
            let mut columns: Vec<ColumnStats> = names
                .iter()
                .map(|n| ColumnStats {
                    name: n.clone(),
                    on_disk: 0,
                    in_memory: 0,
                })
                .collect();
            let mut shards = Vec::with_capacity(files.len());
            for (f, &rows) in files.iter().zip(cache.backend.shard_row_counts()) {
                let path = cache.dir.join(f);
                let bytes = storage
                    .stat(&path)?
                    .ok_or_else(|| Error::MissingShard { path: path.clone() })?
                    .len;
                let per_column = shard_column_bytes(storage.as_ref(), &path, &schema)?;
                for (c, (disk, mem)) in columns.iter_mut().zip(per_column) {
                    c.on_disk += disk;
                    c.in_memory += mem;
                }
                shards.push(ShardStats {
                    name: f.clone(),
                    rows,
                    bytes: Some(bytes),
                });
            }
            Ok(CacheStats {
                shards,
                columns,
                on_disk_measure: Measure::Exact,
                in_memory_measure: Measure::Exact,
                total_bytes_on_disk,
            })
        }
        #[cfg(feature = "lance")]
        LAYOUT_LANCE_ROWS => {
            let shards = cache
                .backend
                .shard_row_counts()
                .iter()
                .enumerate()
                .map(|(i, &rows)| ShardStats {
                    name: format!("fragment-{i}"),
                    rows,
                    bytes: None,
                })
                .collect();
            let disk = crate::layouts::LanceRows::column_bytes_on_disk(&cache.dir)?;
            let on_disk_measure = if disk.iter().any(|(_, b)| *b > 0) || cache.is_empty() {
                Measure::Exact
            } else {
                Measure::Unavailable
            };
            let n = cache.len().min(MEMORY_SAMPLE_ROWS);
            let sample = if n > 0 {
                crate::layouts::arrow_shards::format::column_nbytes(&cache.backend.slice(0, n)?)
            } else {
                vec![0; names.len()]
            };
            let scale = |b: u64| {
                if n == 0 {
                    0
                } else {
                    (b as u128 * cache.len() as u128 / n as u128) as u64
                }
            };
            let columns = names
                .iter()
                .zip(sample)
                .map(|(name, s)| ColumnStats {
                    name: name.clone(),
                    on_disk: disk.iter().find(|(d, _)| d == name).map_or(0, |(_, b)| *b),
                    in_memory: scale(s),
                })
                .collect();
            Ok(CacheStats {
                shards,
                columns,
                on_disk_measure,
                in_memory_measure: if n == cache.len() {
                    Measure::Exact
                } else {
                    Measure::Sampled
                },
                total_bytes_on_disk,
            })
        }
        // Shards are the videos (frames as rows); in memory, frames count as
        // decoded RGB pixels, what a full load hands a training loop.
        #[cfg(feature = "video")]
        crate::cache::metadata::LAYOUT_LANCE_VIDEO_FRAMES
        | crate::cache::metadata::LAYOUT_LANCE_VIDEO_SEGMENTS => {
            let m = cache.metadata.as_video_frames().ok_or_else(|| {
                Error::metadata(
                    cache.dir.join(crate::cache::metadata::METADATA_FILE),
                    "not a frames cache's metadata",
                )
            })?;
            let shards = m
                .videos
                .iter()
                .map(|v| ShardStats {
                    name: v
                        .path
                        .as_deref()
                        .and_then(|p| std::path::Path::new(p).file_name())
                        .map_or_else(
                            || format!("video-{}", v.id),
                            |n| n.to_string_lossy().into_owned(),
                        ),
                    rows: v.t,
                    bytes: None,
                })
                .collect();
            let disk = crate::layouts::LanceRows::column_bytes_on_disk(&cache.dir)?;
            let pixels: u64 = m.videos.iter().map(|v| v.t * v.h * v.w * 3).sum();
            let segments = m.segments.as_ref().map(|s| s.num_segments);
            let names: Vec<&str> = match &m.segments {
                Some(s) => {
                    let mut n = crate::cache::metadata::SEGMENT_COLUMNS.to_vec();
                    if s.packet_frames {
                        n.push(crate::cache::metadata::SEGMENT_PACKET_FRAMES);
                    }
                    n
                }
                None => vec!["video_id", "frame_idx", "bytes"],
            };
            let rows = segments.unwrap_or(m.num_rows);
            let columns = names
                .iter()
                .map(|c| ColumnStats {
                    name: (*c).to_string(),
                    on_disk: disk.iter().find(|(d, _)| d == c).map_or(0, |(_, b)| *b),
                    in_memory: match *c {
                        "bytes" | "data" => pixels,
                        "first_frame" | "psnr" | "psnr_min" | "ssim" | "ssim_min" => 8 * rows,
                        "packet_offsets" | "packet_frames" => 0,
                        _ => 4 * rows,
                    },
                })
                .collect();
            Ok(CacheStats {
                shards,
                columns,
                on_disk_measure: if disk.iter().any(|(_, b)| *b > 0) {
                    Measure::Exact
                } else {
                    Measure::Unavailable
                },
                in_memory_measure: Measure::Exact,
                total_bytes_on_disk,
            })
        }
        other => Err(Error::UnsupportedLayout {
            path: cache.dir.clone(),
            layout: other.to_string(),
            hint: "; sizes cannot be measured for it".into(),
        }),
    }
}
