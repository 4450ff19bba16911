//! The Lance side of committing staged edits to a `lance-rows` cache: one
//! Lance `Update` transaction on top of the version the edits were staged
//! on. A fragment with changed or deleted rows is written anew (all its
//! kept rows, in order) and takes the old fragment's place and id; a
//! fragment whose rows were all deleted is removed; appended rows are new
//! fragments at the end; every other fragment is the same data file.
//! Lance's own history keeps the parent version readable
//! (`checkout_version`) until its cleanup removes it.

use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{CommitBuilder, InsertBuilder, WriteMode, WriteParams};
use lance::table::format::Fragment;

use crate::error::{Error, Result};
use crate::lance::{block_on, dir_uri, lance_err};
use crate::storage::Storage;

/// What a Lance commit made.
#[derive(Debug, Clone)]
pub(crate) struct LanceCommit {
    /// The Lance version committed.
    pub lance_version: u64,
    /// Rows of each fragment of that version, in order.
    pub fragment_rows: Vec<u64>,
    /// Bytes of the data files written.
    pub bytes_written: u64,
    /// Fragments holding appended rows.
    pub new_fragments: u64,
}

/// The latest version of the Lance dataset in `dir`.
pub(crate) fn latest_version(dir: &Path) -> Result<u64> {
    let uri = dir_uri(dir)?;
    block_on(async move {
        crate::lance::open_dataset(&uri)
            .await
            .map(|d| d.version().version)
    })?
    .map_err(|e| lance_err(dir, e))
}

/// Makes `version` the latest again (Lance's restore: a new version with
/// its fragments), undoing a commit whose cache version never became
/// current; returns the new latest version.
pub(crate) fn restore(dir: &Path, version: u64) -> Result<u64> {
    let uri = dir_uri(dir)?;
    block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
        let mut old = ds.checkout_version(version).await?;
        old.restore().await?;
        Ok::<_, lance::Error>(old.version().version)
    })?
    .map_err(|e| lance_err(dir, e))
}

/// The fragments a commit changes.
#[derive(Debug)]
pub(crate) struct FragmentEdits {
    /// (fragment position, its rows now): replace those fragments in place.
    pub rewritten: Vec<(usize, Vec<RecordBatch>)>,
    /// Positions of fragments that go (every row deleted).
    pub removed: Vec<usize>,
    /// Rows for new fragments at the end.
    pub appended: Vec<RecordBatch>,
    /// Rows per new fragment at most.
    pub max_rows_per_file: usize,
}

/// Commits `edits` on top of Lance version `base` of the dataset in `dir`.
/// `before_commit` runs after the data files are written and before the
/// Lance commit.
pub(crate) fn commit(
    storage: &dyn Storage,
    dir: &Path,
    base: u64,
    edits: FragmentEdits,
    before_commit: impl FnOnce(),
) -> Result<LanceCommit> {
    let FragmentEdits {
        rewritten,
        removed,
        appended,
        max_rows_per_file,
    } = edits;
    let uri = dir_uri(dir)?;
    let ds = block_on(async {
        let ds = crate::lance::open_dataset(&uri).await?;
        if ds.version().version == base {
            Ok(ds)
        } else {
            ds.checkout_version(base).await
        }
    })?
    .map_err(|e| lance_err(dir, e))?;
    let ds = Arc::new(ds);
    let frags: Vec<Fragment> = ds.fragments().as_ref().clone();
    // The dataset's own schema (its field metadata carries the compression).
    let schema = Arc::new(arrow_schema::Schema::from(ds.schema()));
    let conform = |batches: Vec<RecordBatch>| -> Result<Vec<RecordBatch>> {
        batches
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| {
                RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                    .map_err(|e| Error::arrow(Some(dir), e))
            })
            .collect()
    };
    let write = |batches: Vec<RecordBatch>, per_file: usize| -> Result<Vec<Fragment>> {
        let params = WriteParams {
            mode: WriteMode::Append,
            max_rows_per_file: per_file,
            ..WriteParams::default()
        };
        let txn = block_on(async {
            InsertBuilder::new(ds.clone())
                .with_params(&params)
                .execute_uncommitted(batches)
                .await
        })?
        .map_err(|e| lance_err(dir, e))?;
        match txn.operation {
            Operation::Append { fragments } => Ok(fragments),
            other => Err(lance_err(
                dir,
                format!("Lance wrote {other:?}, not new fragments"),
            )),
        }
    };
    let mut bytes_written = 0u64;
    let mut size_of = |f: &Fragment| -> Result<()> {
        for file in &f.files {
            if let Some(st) = storage.stat(&dir.join("data").join(&file.path))? {
                bytes_written += st.len;
            }
        }
        Ok(())
    };
    let mut updated = Vec::with_capacity(rewritten.len());
    for (pos, batches) in rewritten {
        let old = frags.get(pos).ok_or_else(|| {
            lance_err(
                dir,
                format!("no fragment at position {pos} in Lance version {base}"),
            )
        })?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        // One fragment in place of one: all its rows in one data file.
        let mut made = write(conform(batches)?, rows.max(1))?;
        if made.len() != 1 {
            return Err(lance_err(
                dir,
                format!(
                    "rewriting fragment {} made {} fragments",
                    old.id,
                    made.len()
                ),
            ));
        }
        let mut f = made.remove(0);
        size_of(&f)?;
        f.id = old.id;
        updated.push(f);
    }
    let appended = conform(appended)?;
    let new_fragments = if appended.is_empty() {
        Vec::new()
    } else {
        write(appended, max_rows_per_file.max(1))?
    };
    for f in &new_fragments {
        size_of(f)?;
    }
    let removed_ids: Vec<u64> = removed
        .iter()
        .filter_map(|&p| frags.get(p).map(|f| f.id))
        .collect();
    storage.sync_tree(&dir.join("data"))?;
    before_commit();
    let n_new = new_fragments.len() as u64;
    let op = Operation::Update {
        removed_fragment_ids: removed_ids,
        updated_fragments: updated,
        new_fragments,
        fields_modified: Vec::new(),
        compacted_sstables: Vec::new(),
        fields_for_preserving_frag_bitmap: Vec::new(),
        update_mode: None,
        inserted_rows_filter: None,
        updated_fragment_offsets: None,
    };
    let done = block_on(async {
        CommitBuilder::new(ds.clone())
            .execute(Transaction::new(base, op, None))
            .await
    })?
    .map_err(|e| lance_err(dir, e))?;
    let fragment_rows = crate::lance::fragment_rows(&done, dir)?;
    Ok(LanceCommit {
        lance_version: done.version().version,
        fragment_rows,
        bytes_written,
        new_fragments: n_new,
    })
}

/// Removes the Lance versions older than `oldest_kept` and the data files
/// only they use (the caller holds the cache's lock, so no write is in
/// progress: files no version names are removed too). Returns the bytes
/// removed.
pub(crate) fn cleanup_before(dir: &Path, oldest_kept: u64) -> Result<u64> {
    use lance::dataset::cleanup::{cleanup_old_versions, CleanupPolicy};
    let uri = dir_uri(dir)?;
    block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
        let policy = CleanupPolicy {
            before_version: Some(oldest_kept),
            delete_unverified: true,
            error_if_tagged_old_versions: false,
            ..CleanupPolicy::default()
        };
        let stats = cleanup_old_versions(&ds, policy).await?;
        Ok::<_, lance::Error>(stats.bytes_removed)
    })?
    .map_err(|e| lance_err(dir, e))
}

/// The data files (names under `data/`) the fragments of the Lance
/// versions `versions` use.
pub(crate) fn data_files_of(
    dir: &Path,
    versions: &[u64],
) -> Result<std::collections::BTreeSet<String>> {
    let uri = dir_uri(dir)?;
    let versions = versions.to_vec();
    block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
        let mut out = std::collections::BTreeSet::new();
        for v in versions {
            let d = ds.checkout_version(v).await?;
            for f in d.fragments().iter() {
                out.extend(f.files.iter().map(|x| x.path.clone()));
            }
        }
        Ok::<_, lance::Error>(out)
    })?
    .map_err(|e| lance_err(dir, e))
}
