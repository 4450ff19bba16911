//! The metadata of an `arrow-shards` cache, and its checks: counts that
//! add up, safe shard names, every shard present at its recorded size.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::cache::metadata::{CommonMetadata, WriterInfo, LAYOUT_ARROW_SHARDS};
use crate::error::{Error, Result};
use crate::storage::Storage;

use super::compression::{compression_key, Compression};

/// Metadata of an `arrow-shards` cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrowShardsMetadata {
    /// Always 1.
    pub cache_format_version: i64,
    /// `arrow`.
    pub format: String,
    /// `arrow-shards`.
    pub layout: String,
    /// First 16 hex of sha256 of the features' Python repr.
    #[serde(default)]
    pub schema_fingerprint: String,
    /// Total rows.
    pub num_rows: u64,
    /// Number of shard files.
    pub num_shards: u64,
    /// Rows per shard.
    pub shard_row_counts: Vec<u64>,
    /// `shard-NNNNN.arrow` names.
    pub shard_filenames: Vec<String>,
    /// The byte budget (null when unbounded).
    #[serde(default)]
    pub shard_size_target_bytes: Option<u64>,
    /// `zstd` or `lz4`, absent when uncompressed.
    #[serde(
        default,
        skip_serializing_if = "Compression::is_none",
        with = "compression_key"
    )]
    pub compression: Compression,
    /// Ours: the zstd level the shards were compressed at (absent for lz4,
    /// which has none, and when uncompressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_level: Option<i32>,
    /// Provenance of derived caches (reference key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<J>,
    /// Ours: size in bytes of each shard file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_num_bytes: Option<Vec<u64>>,
    /// Ours: xxh64 (16 hex chars) of each shard file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_xxh64: Option<Vec<String>>,
    /// Ours: rows per IPC record batch when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u64>,
    /// Ours: self-describing features (see `features::describe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<J>,
    /// Ours: stamps of the sources a builder declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<J>,
    /// Ours: the builder config (name and parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<J>,
    /// Ours: the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterInfo>,
    /// Ours: an id stamped into every shard's footer, so a reader can tell
    /// shards of a replaced cache from its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// Ours: `true` when `_row_xxh64/` holds one checksum per row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_checksums: Option<bool>,
    /// Ours: what a reader must know to read this cache (with
    /// `cache_format_version` 2): `dedup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
    /// Ours: large repeated cells stored once (see
    /// `layouts::arrow_shards::dedup`); absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DedupInfo>,
    /// Ours: the version an edit committed (absent for a build, version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<crate::cache::versions::VersionInfo>,
    /// Ours, always last: xxh64 of this file's bytes with these 16 hex digits
    /// zeroed, so that any changed byte of the metadata is detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_xxh64: Option<String>,
}

/// The `dedup` key of an `arrow-shards` cache whose repeated cells are stored once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupInfo {
    /// Cells of at least this many bytes were deduped.
    pub threshold_bytes: u64,
    /// The content key: `xxh3-128` (with the length and the column).
    pub hash: String,
    /// The columns dedup applied to.
    pub columns: Vec<String>,
    /// Refs (deduped cells) per shard, in shard order.
    pub shard_refs: Vec<u64>,
    /// Deduped cells in all.
    pub cells: u64,
    /// Bytes those cells did not take.
    pub bytes_saved: u64,
}

fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

/// A shard name inside the cache: a plain file name, or one under the
/// build prefix of a cache published to object storage
/// (`_builds/<build>/shard-00000.arrow`, see [`crate::cache::remote`]);
/// never `..`, an absolute path or an empty component.
fn safe_shard_name(name: &str) -> bool {
    match name.split('/').collect::<Vec<_>>()[..] {
        [plain] => safe_name(plain),
        [prefix, build, plain] => {
            prefix == crate::cache::metadata::BUILDS_DIR && safe_name(build) && safe_name(plain)
        }
        _ => false,
    }
}

impl ArrowShardsMetadata {
    /// Parses and validates the metadata of an `arrow-shards` cache, and
    /// checks that every shard file is present (and of the recorded size,
    /// when sizes are recorded).
    ///
    /// # Errors
    /// [`Error::Metadata`] for wrong keys or counts that do not add up,
    /// [`Error::MissingShard`] for an absent file, [`Error::CorruptShard`]
    /// for a file of the wrong size.
    pub fn from_common(storage: &dyn Storage, dir: &Path, common: &CommonMetadata) -> Result<Self> {
        let path = &common.path;
        let m: ArrowShardsMetadata =
            common.parse_as("arrow", LAYOUT_ARROW_SHARDS, "an Arrow sharded cache")?;
        m.validate(storage, dir, path)?;
        Ok(m)
    }

    fn validate(&self, storage: &dyn Storage, dir: &Path, path: &Path) -> Result<()> {
        let n = self.num_shards as usize;
        if self.shard_filenames.len() != n || self.shard_row_counts.len() != n {
            return Err(Error::metadata(
                path,
                format!(
                    "num_shards is {n} but there are {} filenames and {} row counts",
                    self.shard_filenames.len(),
                    self.shard_row_counts.len()
                ),
            ));
        }
        let sum = self
            .shard_row_counts
            .iter()
            .try_fold(0u64, |a, &r| a.checked_add(r));
        if sum != Some(self.num_rows) {
            let sum = sum.map_or("more than 2^64".into(), |s| s.to_string());
            return Err(Error::metadata(
                path,
                format!(
                    "shard row counts add up to {sum}, but num_rows is {}",
                    self.num_rows
                ),
            ));
        }
        if let Some(sizes) = &self.shard_num_bytes {
            if sizes.len() != n {
                return Err(Error::metadata(
                    path,
                    "shard_num_bytes has the wrong length",
                ));
            }
        }
        if let Some(h) = &self.shard_xxh64 {
            if h.len() != n {
                return Err(Error::metadata(path, "shard_xxh64 has the wrong length"));
            }
        }
        if let Some(d) = &self.dedup {
            if d.shard_refs.len() != n {
                return Err(Error::metadata(
                    path,
                    "dedup.shard_refs has the wrong length",
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        // On an object store, one listing per directory of shards rather
        // than a request per shard (a cache of a thousand shards opens with
        // one LIST, not a thousand HEADs).
        let listed: std::collections::HashMap<std::path::PathBuf, u64> =
            if storage.name() == "local" {
                Default::default()
            } else {
                let parents: std::collections::BTreeSet<std::path::PathBuf> = self
                    .shard_filenames
                    .iter()
                    .filter_map(|n| dir.join(n).parent().map(Path::to_path_buf))
                    .collect();
                let mut m = std::collections::HashMap::new();
                for d in parents {
                    if let Ok(entries) = storage.list(&d) {
                        m.extend(
                            entries
                                .into_iter()
                                .filter(|e| e.is_file())
                                .map(|e| (e.path, e.len)),
                        );
                    }
                }
                m
            };
        for (i, name) in self.shard_filenames.iter().enumerate() {
            if !safe_shard_name(name) {
                return Err(Error::metadata(
                    path,
                    format!("shard file name {name:?} is not a plain file name"),
                ));
            }
            if !seen.insert(name) {
                return Err(Error::metadata(
                    path,
                    format!("shard {name} is listed twice"),
                ));
            }
            let p = dir.join(name);
            let len = match listed.get(&p) {
                Some(&len) => len,
                None => match storage.stat(&p)? {
                    Some(m) => m.len,
                    None => return Err(Error::MissingShard { path: p }),
                },
            };
            if let Some(sizes) = &self.shard_num_bytes {
                if len != sizes[i] {
                    return Err(Error::corrupt(
                        &p,
                        format!(
                            "file has {} bytes, metadata records {} (truncated or replaced)",
                            len, sizes[i]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
