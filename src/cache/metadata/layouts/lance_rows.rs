//! The metadata of a `lance-rows` cache.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::cache::metadata::{CommonMetadata, WriterInfo, LAYOUT_LANCE_ROWS};
use crate::error::Result;

use super::check_lance_dataset;

/// Metadata of a `lance-rows` cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanceRowsMetadata {
    /// Always 1.
    pub cache_format_version: i64,
    /// `lance`.
    pub format: String,
    /// `lance-rows`.
    pub layout: String,
    /// First 16 hex of sha256 of the features' Python repr.
    #[serde(default)]
    pub schema_fingerprint: String,
    /// Total rows.
    pub num_rows: u64,
    /// Provenance (reference key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<J>,
    /// Ours: rows per Lance fragment, in fragment order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragment_row_counts: Option<Vec<u64>>,
    /// Ours: the Lance data storage version written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_storage_version: Option<String>,
    /// Ours: the compression asked of Lance for every column (`zstd`,
    /// `lz4` or `none`; absent: Lance's own choice per block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<super::Compression>,
    /// Ours: the zstd level asked of Lance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_level: Option<i32>,
    /// Ours: self-describing features.
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
    /// Ours: the Lance version (of the dataset's own history) this cache
    /// version reads; absent: the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_version: Option<u64>,
    /// Ours: the version an edit committed (absent for a build, version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<crate::cache::versions::VersionInfo>,
    /// Ours: the self-checksum (always last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_xxh64: Option<String>,
}

impl LanceRowsMetadata {
    /// Parses and checks the metadata of a `lance-rows` cache (and that the
    /// Lance dataset's manifest directory is there).
    ///
    /// # Errors
    /// [`Error::Metadata`](crate::error::Error::Metadata) for wrong keys or
    /// counts; [`Error::MissingShard`](crate::error::Error::MissingShard)
    /// when the Lance dataset is missing.
    pub fn from_common(dir: &Path, common: &CommonMetadata) -> Result<Self> {
        let m: LanceRowsMetadata =
            common.parse_as("lance", LAYOUT_LANCE_ROWS, "a Lance rows cache")?;
        check_lance_dataset(
            dir,
            &common.path,
            m.fragment_row_counts.as_deref(),
            m.num_rows,
        )?;
        Ok(m)
    }
}
