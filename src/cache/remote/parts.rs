//! A distributed build: each work unit's part uploaded under the build's
//! prefix with unit-named files ([`publish_part`]), then one commit of
//! every part's rows in unit order ([`commit_parts`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::cache::metadata::{json_checksummed, CacheMetadata, BUILDS_DIR, METADATA_FILE};
use crate::error::{Error, Result};
use crate::storage::local;

use super::target::Target;
use super::{publishable, put_file, PublishReport};

/// The name a part's file takes under the build prefix: `u<unit>-<name>`
/// beside its shard (`_row_xxh64/u00003-shard-00000.arrow.xxh`).
fn part_name(rel: &Path, unit: usize) -> PathBuf {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let renamed = format!("u{unit:05}-{name}");
    match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.join(renamed),
        None => PathBuf::from(renamed),
    }
}

/// Uploads the local `arrow-shards` cache at `local_dir`, written for work
/// unit `unit` of the distributed build `build` (with `build` as its build
/// id), under the build prefix of the cache at `uri` (an `s3://` location,
/// or a directory of a shared file system), its files named by
/// the unit (`_builds/<build>/u<unit>-shard-00000.arrow`): a retried unit
/// puts the same names, so no row is ever stored twice. Returns the part's
/// record for [`commit_parts`]: its metadata, shard names as the committed
/// cache will name them. Nothing is visible to readers until the commit.
///
/// # Errors
/// [`Error::InvalidArgument`] for another layout, another build id, or a
/// cache with deduped cells (their refs point at rows of the part, not of
/// the whole cache); [`Error::Io`] naming the object a put failed on.
pub fn publish_part(
    local_dir: &Path,
    uri: &Path,
    build: &str,
    unit: usize,
) -> Result<serde_json::Value> {
    let fs = local();
    let meta = CacheMetadata::read_in(fs.as_ref(), local_dir)?;
    let Some(arrow) = meta.as_arrow_shards() else {
        return Err(Error::InvalidArgument(format!(
            "{}: a part of a distributed build must be an arrow-shards cache, not {}",
            local_dir.display(),
            meta.layout()
        )));
    };
    if arrow.build_id.as_deref() != Some(build) {
        return Err(Error::InvalidArgument(format!(
            "{}: the part was written with build id {:?}, the build is {build:?} (every part stamps the build's id into its shards)",
            local_dir.display(),
            arrow.build_id
        )));
    }
    if arrow.dedup.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{}: deduped cells cannot be merged across parts (their refs name rows of the part); write parts without dedup",
            local_dir.display()
        )));
    }
    let target = Target::of(uri);
    let prefix = uri.join(BUILDS_DIR).join(build);
    let files: Vec<PathBuf> = fs
        .walk_files(local_dir)?
        .into_iter()
        .filter(|rel| publishable(rel))
        .collect();
    crate::util::in_pool(|| {
        files
            .par_iter()
            .map(|rel| {
                put_file(
                    &target,
                    &local_dir.join(rel),
                    &prefix.join(part_name(rel, unit)),
                )
            })
            .collect::<Result<Vec<_>>>()
    })??;
    let mut record = serde_json::to_value(arrow)
        .map_err(|e| Error::metadata(local_dir.join(METADATA_FILE), e.to_string()))?;
    record["shard_filenames"] = serde_json::Value::Array(
        arrow
            .shard_filenames
            .iter()
            .map(|n| {
                serde_json::Value::String(format!(
                    "{BUILDS_DIR}/{build}/{}",
                    part_name(Path::new(n), unit).display()
                ))
            })
            .collect(),
    );
    Ok(record)
}

/// Commits the distributed build `build` of the cache at `uri` from the
/// records [`publish_part`] returned, in work-unit order: one
/// `_metadata.json` whose rows are the parts' rows in that order (shard
/// names, row counts, sizes and checksums concatenated; the rest is the
/// parts' own, which must agree), put with the same conditional commit as
/// [`publish_to_object_store`](super::publish_to_object_store).
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts, or parts that disagree
/// (features, schema, compression, build id, row checksums);
/// [`Error::Io`] for a failed or lost commit (as [`publish_to_object_store`](super::publish_to_object_store)).
pub fn commit_parts(uri: &Path, build: &str, parts: &[serde_json::Value]) -> Result<PublishReport> {
    use crate::cache::metadata::ArrowShardsMetadata;
    let root_meta = uri.join(METADATA_FILE);
    let parsed: Vec<ArrowShardsMetadata> = parts
        .iter()
        .map(|p| {
            serde_json::from_value(p.clone())
                .map_err(|e| Error::InvalidArgument(format!("a part record of {build}: {e}")))
        })
        .collect::<Result<_>>()?;
    let Some(first) = parsed.first() else {
        return Err(Error::InvalidArgument(format!(
            "{}: a distributed build of no parts commits nothing",
            uri.display()
        )));
    };
    let mut merged = first.clone();
    merged.shard_filenames.clear();
    merged.shard_row_counts.clear();
    let mut sizes = Some(Vec::new());
    let mut sums = Some(Vec::new());
    for (k, p) in parsed.iter().enumerate() {
        let same = p.schema_fingerprint == first.schema_fingerprint
            && p.features == first.features
            && p.compression == first.compression
            && p.compression_level == first.compression_level
            && p.row_checksums == first.row_checksums
            && p.build_id.as_deref() == Some(build)
            && p.dedup.is_none()
            && p.version.is_none();
        if !same {
            return Err(Error::InvalidArgument(format!(
                "{}: part {k} of build {build} disagrees with part 0 (features, compression, checksums or build id), or holds deduped cells or edits",
                uri.display()
            )));
        }
        merged
            .shard_filenames
            .extend(p.shard_filenames.iter().cloned());
        merged.shard_row_counts.extend(&p.shard_row_counts);
        sizes = sizes.zip(p.shard_num_bytes.as_ref()).map(|(mut a, b)| {
            a.extend(b);
            a
        });
        sums = sums.zip(p.shard_xxh64.as_ref()).map(|(mut a, b)| {
            a.extend(b.iter().cloned());
            a
        });
    }
    merged.num_rows = merged.shard_row_counts.iter().sum();
    merged.num_shards = merged.shard_filenames.len() as u64;
    merged.shard_num_bytes = sizes;
    merged.shard_xxh64 = sums;
    merged.metadata_xxh64 = None;
    let commit = json_checksummed(&root_meta, &merged)?;
    let target = Target::of(uri);
    let replaced = target.commit(uri, commit)?.unwrap_or(false);
    // Read back through the checks every reader applies (every shard
    // present at its recorded size).
    CacheMetadata::read_in(target.storage(), uri)?;
    Ok(PublishReport {
        uri: uri.to_path_buf(),
        build: build.to_string(),
        files: merged.shard_filenames.len(),
        bytes: merged.shard_num_bytes.iter().flatten().sum(),
        replaced,
        lance_version: None,
    })
}
