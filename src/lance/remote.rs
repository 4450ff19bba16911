//! Lance datasets on object storage: the store parameters an `s3://`
//! dataset is written with, a local build published as a version of one
//! (its data files uploaded by the caller first), and the garbage of one
//! collected (versions no metadata names undone, old versions removed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lance::dataset::Dataset;

use super::{block_on, dir_uri, lance_err, open_dataset};
use crate::error::Result;

/// The object store parameters Lance writes an `s3://` dataset with: the
/// same region, endpoint, plain-HTTP permission and retries as every other
/// request to a cache on object storage (Lance reads the credentials from
/// the AWS environment itself).
pub(crate) fn store_params() -> lance_io::object_store::ObjectStoreParams {
    use lance_io::object_store::{ObjectStoreParams, StorageOptionsAccessor};
    ObjectStoreParams {
        storage_options_accessor: Some(Arc::new(StorageOptionsAccessor::with_static_options(
            crate::storage::object::lance_storage_options(),
        ))),
        ..Default::default()
    }
}

/// The latest version of a local Lance dataset (a build in its staging
/// directory), opened once, to be published as a version of a dataset on
/// object storage.
pub(crate) struct LocalBuild {
    dir: PathBuf,
    ds: Dataset,
}

impl LocalBuild {
    /// Opens the dataset in `dir`.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset when Lance cannot open it.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let uri = dir_uri(dir)?;
        let ds =
            block_on(async move { open_dataset(&uri).await })?.map_err(|e| lance_err(dir, e))?;
        Ok(LocalBuild {
            dir: dir.to_path_buf(),
            ds,
        })
    }

    /// Its data files (paths under `data/`): what [`LocalBuild::commit_to`]
    /// needs uploaded first.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset when a fragment has deleted
    /// rows or a data file in another base (which a copy would not carry).
    pub(crate) fn data_files(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for f in self.ds.fragments().iter() {
            if f.deletion_file.is_some() {
                return Err(lance_err(
                    &self.dir,
                    format!("fragment {} has deleted rows (a deletion file)", f.id),
                ));
            }
            for d in &f.files {
                if d.base_id.is_some() {
                    return Err(lance_err(
                        &self.dir,
                        format!(
                            "data file {} of fragment {} is in another base",
                            d.path, f.id
                        ),
                    ));
                }
                out.push(d.path.clone());
            }
        }
        Ok(out)
    }

    /// Commits it as the newest version of the dataset at `remote` (an
    /// `s3://` location; created when absent): one Lance `Overwrite` of the
    /// same fragments and schema, whose data files the caller has put under
    /// `remote/data/` already. Lance's commit is its own atomic manifest put.
    /// Returns the version; when the newest version there already holds
    /// exactly these data files (a publish run again), that one, with no
    /// new commit.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset for a Lance error.
    pub(crate) fn commit_to(&self, remote: &Path) -> Result<u64> {
        use lance::dataset::transaction::{Operation, Transaction};
        use lance::dataset::CommitBuilder;
        let ruri = dir_uri(remote)?;
        let src = &self.ds;
        let fragments = src.fragments().as_ref().clone();
        let at = ruri.clone();
        let existing = block_on(async move {
            match open_dataset(&at).await {
                Ok(d) => Ok(Some(d)),
                Err(lance::Error::DatasetNotFound { .. } | lance::Error::NotFound { .. }) => {
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })?
        .map_err(|e| lance_err(remote, e))?;
        let files_of = |f: &lance::table::format::Fragment| -> Vec<String> {
            f.files.iter().map(|d| d.path.clone()).collect()
        };
        if let Some(d) = &existing {
            let there = d.fragments();
            if there.len() == fragments.len()
                && there
                    .iter()
                    .zip(&fragments)
                    .all(|(a, b)| files_of(a) == files_of(b) && a.physical_rows == b.physical_rows)
            {
                return Ok(d.version().version);
            }
        }
        let config = src.manifest().config.clone();
        let op = Operation::Overwrite {
            schema: src.schema().clone(),
            fragments,
            config_upsert_values: (!config.is_empty()).then_some(config),
            initial_bases: None,
        };
        let format = src
            .manifest()
            .data_storage_format
            .lance_file_format()
            .to_selector();
        let done = block_on(async move {
            match existing {
                Some(d) => {
                    let read = d.version().version;
                    // The build's file format, also where the dataset's
                    // previous versions had another.
                    CommitBuilder::new(Arc::new(d))
                        .with_storage_format(format)
                        .execute(Transaction::new(read, op, None))
                        .await
                }
                None => {
                    CommitBuilder::new(ruri.as_str())
                        .with_store_params(store_params())
                        .with_storage_format(format)
                        .execute(Transaction::new(0, op, None))
                        .await
                }
            }
        })?
        .map_err(|e| lance_err(remote, e))?;
        Ok(done.version().version)
    }
}

/// What [`collect_remote_versions`] did to a Lance dataset on object storage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RemoteLanceGc {
    /// The new newest version restoring the committed one, when a newer
    /// version no metadata names was the newest.
    pub restored: Option<u64>,
    /// Versions removed (or, in a dry run, that would be).
    pub versions: u64,
    /// Objects Lance's cleanup removed: manifests, transaction files, data files.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Garbage of the Lance dataset at `uri` (an `s3://` cache's root) whose
/// committed version is `committed`:
/// - a newer version that no metadata names (a build that died between its
///   Lance commit and its metadata commit, or lost the race to commit) is
///   undone when it is at least `min_age` old: the committed version is
///   restored as the newest, so a reader of the newest version (the
///   reference, on a downloaded copy) sees the committed rows again;
/// - versions older than the committed one (and, once it is the newest
///   again, the undone ones after it) and at least `min_age` old are
///   removed, with the files only they use (Lance's cleanup).
///
/// Returns that, and the data files (names under `data/`) the versions
/// that stay use: the caller removes the others (uploads of builds that
/// never committed to Lance) once they are old enough.
///
/// # Errors
/// [`Error::CorruptShard`] naming the dataset for a Lance error.
pub(crate) fn collect_remote_versions(
    uri: &Path,
    committed: u64,
    min_age: std::time::Duration,
    dry_run: bool,
) -> Result<(RemoteLanceGc, std::collections::HashSet<String>)> {
    use lance::dataset::cleanup::{cleanup_old_versions, CleanupPolicy};
    let luri = dir_uri(uri)?;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let old_enough = |ts: i64| now_s.saturating_sub(ts) >= min_age.as_secs() as i64;
    block_on(async move {
        let mut ds = open_dataset(&luri).await?;
        let versions = ds.versions().await?;
        let latest = ds.version().version;
        let mut restored = None;
        if latest != committed {
            let newest_ts = versions
                .iter()
                .find(|v| v.version == latest)
                .map_or(now_s, |v| v.timestamp.timestamp());
            if old_enough(newest_ts) && !dry_run {
                let mut old = ds.checkout_version(committed).await?;
                old.restore().await?;
                restored = Some(old.version().version);
                ds = old;
            }
        }
        // Older than the committed version; once the committed one is the
        // newest again, the undone versions after it too.
        let drop: std::collections::HashSet<u64> = versions
            .iter()
            .filter(|v| {
                (v.version < committed || (restored.is_some() && v.version > committed))
                    && old_enough(v.timestamp.timestamp())
            })
            .map(|v| v.version)
            .collect();
        let mut stats = None;
        if !drop.is_empty() && !dry_run {
            let policy = CleanupPolicy {
                versions: Some(drop.clone()),
                error_if_tagged_old_versions: false,
                ..CleanupPolicy::default()
            };
            stats = Some(cleanup_old_versions(&ds, policy).await?);
        }
        // The data files the versions that stay use.
        let mut referenced = std::collections::HashSet::new();
        for v in ds.versions().await? {
            if dry_run && drop.contains(&v.version) {
                continue;
            }
            let at = ds.checkout_version(v.version).await?;
            for f in at.fragments().iter() {
                for d in &f.files {
                    referenced.insert(d.path.clone());
                }
            }
        }
        let gc = RemoteLanceGc {
            restored,
            versions: drop.len() as u64,
            objects: stats.as_ref().map_or(0, |st| {
                (st.old_versions + st.data_files_removed + st.transaction_files_removed) as usize
            }),
            bytes: stats.as_ref().map_or(0, |st| st.bytes_removed),
        };
        Ok::<_, lance::Error>((gc, referenced))
    })?
    .map_err(|e| lance_err(uri, e))
}
