//! The `lance-rows` side of a commit: a Lance commit of this cache's that
//! never became current is undone, the parent records the Lance version it
//! reads, touched fragments and appended rows go to one Lance `Update`
//! transaction (`lance_rows/edit.rs`), then the new version's metadata and
//! the commit point.

use crate::cache::metadata::{
    write_json_checksummed, CacheMetadata, LanceRowsMetadata, WriterInfo, METADATA_FILE,
};
use crate::cache::versions::{read_version, version_path, ChangeSummary, VERSIONS_DIR};
use crate::error::{Error, Result};
use crate::layouts::lance_rows::edit as lance_edit;
use crate::util::fault_point;

use super::{EditPlan, Staging};

impl Staging {
    #[cfg(feature = "lance")]
    pub(super) fn commit_lance(
        &self,
        m: &LanceRowsMetadata,
        lance_version: u64,
        plan: &EditPlan,
        mut change: ChangeSummary,
    ) -> Result<(CacheMetadata, ChangeSummary)> {
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let version = plan.version;
        // 1. A Lance commit whose cache version never became current (a
        //    crash before the commit point) is undone: the parent's file
        //    proves it was ours.
        let latest = lance_edit::latest_version(dir)?;
        // The Lance version the commit is made on: the parent's, or its
        // restored copy.
        let mut on_version = lance_version;
        if latest != lance_version {
            let ours = storage.is_file(&version_path(dir, self.base_version))
                && read_version(storage, dir, self.base_version)
                    .ok()
                    .and_then(|v| match v {
                        CacheMetadata::LanceRows(v) => v.lance_version,
                        _ => None,
                    })
                    == Some(lance_version);
            if !ours {
                return Err(Error::EditConflict {
                    path: dir.clone(),
                    expected: self.base_version,
                    found: self.base_version,
                });
            }
            on_version = lance_edit::restore(dir, lance_version)?;
        }
        let v = version_path(dir, version);
        if storage.is_file(&v) {
            storage.remove_file(&v)?;
        }
        // 2. The parent stays openable by its id, and says which Lance
        //    version it reads.
        let mut parent = m.clone();
        parent.lance_version = Some(lance_version);
        parent.metadata_xxh64 = None;
        if !storage.is_file(&version_path(dir, self.base_version)) {
            storage.create_dir_all(&dir.join(VERSIONS_DIR))?;
            write_json_checksummed(storage, &version_path(dir, self.base_version), &parent)?;
        }
        fault_point("edit:after-base-version");
        // 3. Touched fragments anew, appended rows as new fragments, one
        //    Lance commit.
        let mut rewritten = Vec::with_capacity(plan.rewritten.len());
        for &s in &plan.rewritten {
            let mut pieces = Vec::new();
            self.edited_rows(s, |piece| {
                pieces.push(piece);
                Ok(())
            })?;
            rewritten.push((s, pieces));
            fault_point("edit:after-rewritten-shard");
        }
        let per_file = m
            .fragment_row_counts
            .as_ref()
            .and_then(|c| c.iter().copied().max())
            .filter(|&n| n > 0)
            .unwrap_or(1024 * 1024) as usize;
        let done = lance_edit::commit(
            storage,
            dir,
            on_version,
            lance_edit::FragmentEdits {
                rewritten,
                removed: plan.removed.clone(),
                appended: self.appended.clone(),
                max_rows_per_file: per_file,
            },
            || fault_point("edit:after-shards"),
        )?;
        change.bytes_written = done.bytes_written;
        change.shards_new = done.new_fragments;
        fault_point("edit:after-lance-commit");
        if storage.is_file(&dir.join(crate::cache::checksums::CHECKSUMS_FILE)) {
            crate::cache::checksums::update_file_checksums(storage, dir, &[VERSIONS_DIR])?;
        }
        // 4. The new version's metadata, kept by id.
        let mut meta = m.clone();
        meta.num_rows = done.fragment_rows.iter().sum();
        meta.fragment_row_counts = Some(done.fragment_rows);
        meta.lance_version = Some(done.lance_version);
        meta.writer = Some(WriterInfo::current());
        meta.version = Some(self.version_info(&change));
        meta.metadata_xxh64 = None;
        write_json_checksummed(storage, &v, &meta)?;
        fault_point("edit:after-version-file");
        // 5. The commit point.
        write_json_checksummed(storage, &dir.join(METADATA_FILE), &meta)?;
        fault_point("edit:after-commit");
        Ok((CacheMetadata::LanceRows(meta), change))
    }
}
