//! Checksums of an Arrow cache's shards: recomputed and compared with the
//! metadata's `shard_xxh64`, and, where per-record checksums were kept, the
//! changed rows of a damaged shard named.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::checksums::xxh64_file_in;
use crate::cache::metadata::{ArrowShardsMetadata, CacheMetadata, METADATA_FILE};
use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::describe::features_from_json;
use crate::features::Features;
use crate::layouts::arrow_shards::read::ArrowShards;
use crate::storage::{storage_for, Storage};

/// A shard whose bytes do not match the recorded checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksumMismatch {
    /// The shard file.
    pub path: PathBuf,
    /// Recorded xxh64.
    pub expected: String,
    /// Computed xxh64.
    pub found: String,
}

/// Recomputes every shard's xxh64 and size; returns the mismatches.
///
/// # Errors
/// [`Error::Io`] when a shard cannot be read; [`Error::Metadata`] when the
/// cache records no checksums (written by the reference).
pub fn verify_checksums(dir: &Path) -> Result<Vec<ChecksumMismatch>> {
    let storage = storage_for(dir);
    let meta = arrow_metadata(dir)?;
    let sums = meta.shard_xxh64.as_ref().ok_or_else(|| {
        Error::metadata(
            dir.join(METADATA_FILE),
            "the cache records no shard checksums (written by another tool)",
        )
    })?;
    let mut bad = Vec::new();
    for (name, want) in meta.shard_filenames.iter().zip(sums) {
        let path = dir.join(name);
        let got = xxh64_file_in(storage.as_ref(), &path)?;
        if &got != want {
            bad.push(ChecksumMismatch {
                path,
                expected: want.clone(),
                found: got,
            });
        }
    }
    Ok(bad)
}

pub(crate) fn verify_shards(
    storage: &dyn Storage,
    dir: &Path,
    meta: &ArrowShardsMetadata,
) -> Result<()> {
    let Some(sums) = &meta.shard_xxh64 else {
        return Ok(());
    };
    for (name, want) in meta.shard_filenames.iter().zip(sums) {
        let path = dir.join(name);
        let got = xxh64_file_in(storage, &path)?;
        if &got != want {
            return Err(Error::corrupt(
                &path,
                format!("xxh64 is {got}, metadata records {want}"),
            ));
        }
    }
    Ok(())
}

/// The metadata of the Arrow cache at `dir`.
fn arrow_metadata(dir: &Path) -> Result<ArrowShardsMetadata> {
    match CacheMetadata::read(dir)? {
        CacheMetadata::ArrowShards(m) => Ok(m),
        other => Err(Error::metadata(
            dir.join(METADATA_FILE),
            format!(
                "not an Arrow sharded cache (format={}, layout={})",
                other.format(),
                other.layout()
            ),
        )),
    }
}

/// Rows of a damaged shard, located with per-record checksums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRows {
    /// The shard file.
    pub shard: PathBuf,
    /// Global indices of rows whose content no longer matches.
    pub rows: Vec<u64>,
    /// Global row ranges `[start, end)` that cannot be read at all.
    pub unreadable: Vec<(u64, u64)>,
}

/// For every shard whose file checksum fails, the rows that changed (needs a
/// cache written with per-record checksums; otherwise the whole shard is
/// reported unreadable-or-changed as one range).
///
/// # Errors
/// As [`verify_checksums`].
pub fn locate_corrupt_rows(dir: &Path) -> Result<Vec<CorruptRows>> {
    let bad = verify_checksums(dir)?;
    if bad.is_empty() {
        return Ok(Vec::new());
    }
    let meta = arrow_metadata(dir)?;
    let features = match &meta.features {
        Some(j) => features_from_json(j)?,
        None => Features::new(),
    };
    let features = Arc::new(features);
    let mut start = 0u64;
    let mut starts = Vec::new();
    for c in &meta.shard_row_counts {
        starts.push(start);
        start += c;
    }
    let mut out = Vec::new();
    for m in bad {
        let name = m
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let i = meta
            .shard_filenames
            .iter()
            .position(|f| *f == name)
            .unwrap_or(0);
        let (first, rows) = (starts[i], meta.shard_row_counts[i]);
        let whole = CorruptRows {
            shard: m.path.clone(),
            rows: Vec::new(),
            unreadable: vec![(first, first + rows)],
        };
        if meta.row_checksums != Some(true) {
            out.push(whole);
            continue;
        }
        let Ok(sums) = crate::cache::rowsum::read_sidecar(storage_for(dir).as_ref(), dir, &name)
        else {
            out.push(whole);
            continue;
        };
        let decoder = RowDecoder::new(features.clone(), DecodeOptions::default());
        let shard = ArrowShards::new(dir, &[name], &[rows], features.clone(), decoder, None);
        let mut report = CorruptRows {
            shard: m.path.clone(),
            rows: Vec::new(),
            unreadable: Vec::new(),
        };
        match shard.batch_row_ranges(0) {
            Err(_) => report.unreadable.push((first, first + rows)),
            Ok(ranges) => {
                for (j, (a, b)) in ranges.into_iter().enumerate() {
                    match shard.read_batch(0, j) {
                        Ok(batch) => {
                            for (k, h) in crate::cache::rowsum::row_hashes(&batch)
                                .into_iter()
                                .enumerate()
                            {
                                let local = a + k as u64;
                                if sums.get(local as usize) != Some(&h) {
                                    report.rows.push(first + local);
                                }
                            }
                        }
                        Err(_) => report.unreadable.push((first + a, first + b)),
                    }
                }
            }
        }
        out.push(report);
    }
    Ok(out)
}
