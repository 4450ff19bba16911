//! What a commit does, whatever the layout: the plan (which shards are
//! rewritten, reused, removed), the kept rows of a touched shard with its
//! edits applied, the check that the cache is still at the staged version,
//! and the parent's metadata and version record both layouts write.

use std::collections::BTreeSet;
use std::time::Instant;

use arrow_array::RecordBatch;

use crate::cache::lock::CacheLock;
use crate::cache::metadata::CacheMetadata;
use crate::cache::versions::{version_id, version_path, ChangeSummary, VersionInfo, VERSIONS_DIR};
use crate::error::{Error, Result};

use super::{Base, CommitReport, EditPlan, Staging};

impl Staging {
    /// The parent shard of parent row `r`.
    fn shard_of(&self, r: u64) -> usize {
        self.starts.partition_point(|&s| s <= r) - 1
    }

    fn touched(&self) -> BTreeSet<usize> {
        self.deleted
            .iter()
            .chain(self.overrides.keys())
            .map(|&r| self.shard_of(r))
            .collect()
    }

    fn deleted_in(&self, shard: usize) -> u64 {
        let (a, b) = (self.starts[shard], self.starts[shard + 1]);
        (self.deleted.partition_point(|&d| d < b) - self.deleted.partition_point(|&d| d < a)) as u64
    }

    /// What [`Staging::commit`] would write.
    ///
    /// # Errors
    /// [`Error::Io`] reading a shard file's size.
    pub fn plan(&self) -> Result<EditPlan> {
        let touched = self.touched();
        let (mut rewritten, mut reused, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = 0u64;
        let units = self.starts.len() - 1;
        // Lance: bytes per row of the data files, for the estimate.
        #[cfg(feature = "lance")]
        let lance_row_bytes = match &self.base {
            Base::Lance { .. } if !touched.is_empty() => {
                let data = self.dir.join("data");
                let size = if self.storage.is_dir(&data) {
                    self.storage.dir_size(&data)?
                } else {
                    0
                };
                size as f64 / self.base_len().max(1) as f64
            }
            _ => 0.0,
        };
        for s in 0..units {
            let rows = self.starts[s + 1] - self.starts[s];
            if !touched.contains(&s) {
                reused.push(s);
                continue;
            }
            let kept = rows - self.deleted_in(s);
            if kept == 0 {
                removed.push(s);
                continue;
            }
            rewritten.push(s);
            bytes += match &self.base {
                Base::Arrow { meta, .. } => {
                    let size = match &meta.shard_num_bytes {
                        Some(sizes) => sizes[s],
                        None => self
                            .storage
                            .stat(&self.dir.join(&meta.shard_filenames[s]))?
                            .map_or(0, |m| m.len),
                    };
                    (size as u128 * kept as u128 / rows.max(1) as u128) as u64
                }
                #[cfg(feature = "lance")]
                Base::Lance { .. } => (lance_row_bytes * kept as f64) as u64,
            };
        }
        bytes += self
            .appended
            .iter()
            .map(crate::layouts::arrow_shards::format::pyarrow_nbytes)
            .sum::<u64>();
        Ok(EditPlan {
            base_version: self.base_version,
            version: self.base_version + 1,
            rows_before: self.base_len(),
            rows_after: self.len(),
            rewritten,
            reused,
            removed,
            appended_rows: self.appended.len() as u64,
            bytes_estimate: bytes,
        })
    }

    /// The kept rows of parent shard `s` with its edits applied, in order,
    /// handed to `out` as pieces (slices of the parent's batches and the
    /// replaced rows).
    pub(super) fn edited_rows(
        &self,
        s: usize,
        mut out: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let start = self.starts[s];
        // The parent's rows of shard s, a batch at a time: (first, end) local rows.
        let ranges: Vec<(u64, u64)> = match &self.base {
            Base::Arrow { shards, .. } => shards.batch_row_ranges(s)?,
            #[cfg(feature = "lance")]
            Base::Lance { .. } => {
                let rows = self.starts[s + 1] - start;
                (0..rows.div_ceil(EDIT_READ_ROWS))
                    .map(|k| (k * EDIT_READ_ROWS, ((k + 1) * EDIT_READ_ROWS).min(rows)))
                    .collect()
            }
        };
        for (j, (a, b)) in ranges.into_iter().enumerate() {
            let batch = match &self.base {
                Base::Arrow { shards, .. } => shards.read_batch(s, j)?,
                #[cfg(feature = "lance")]
                Base::Lance { .. } => self.base.backend().slice(start + a, b - a)?,
            };
            let mut run: Option<u64> = None;
            for local in a..=b {
                let g = start + local;
                let plain = local < b
                    && self.deleted.binary_search(&g).is_err()
                    && !self.overrides.contains_key(&g);
                if plain {
                    run.get_or_insert(local);
                    continue;
                }
                if let Some(r0) = run.take() {
                    out(batch.slice((r0 - a) as usize, (local - r0) as usize))?;
                }
                if local < b {
                    if let Some(o) = self.overrides.get(&g) {
                        out(o.clone())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Publishes the staged edits as a new version (see the module
    /// documentation for the steps), and returns what it did. Nothing is
    /// written when nothing is staged.
    ///
    /// # Errors
    /// [`Error::EditConflict`] when the cache is no longer at the version
    /// the edits were staged on (another commit or a rebuild came first:
    /// nothing is written); an I/O or Arrow error naming the file, after
    /// which the parent version is still the published one.
    pub fn commit(self) -> Result<CommitReport> {
        let t0 = Instant::now();
        let plan = self.plan()?;
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let _lock = CacheLock::acquire_in(&self.storage, dir)?;
        let now = CacheMetadata::read_in(storage, dir)?;
        let found = version_id(&now);
        let same = match (&self.base, &now) {
            (Base::Arrow { meta, .. }, CacheMetadata::ArrowShards(m)) => {
                m.build_id == meta.build_id
            }
            #[cfg(feature = "lance")]
            (Base::Lance { meta, .. }, CacheMetadata::LanceRows(m)) => {
                m.lance_version == meta.lance_version
            }
            _ => false,
        };
        if found != self.base_version || !same {
            return Err(Error::EditConflict {
                path: dir.clone(),
                expected: self.base_version,
                found,
            });
        }
        let change = ChangeSummary {
            rows_set: self.rows_set,
            cells_set: self.cells_set,
            rows_deleted: self.deleted.len() as u64,
            rows_appended: self.appended.len() as u64,
            shards_rewritten: plan.rewritten.len() as u64,
            shards_reused: plan.reused.len() as u64,
            shards_new: 0,
            shards_removed: plan.removed.len() as u64,
            bytes_written: 0,
            message: self.message.clone(),
        };
        if plan.is_empty() {
            return Ok(CommitReport {
                version: self.base_version,
                plan,
                change,
                metadata: now,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        let (metadata, change) = match &self.base {
            Base::Arrow { meta, .. } => self.commit_arrow(meta, &plan, change)?,
            #[cfg(feature = "lance")]
            Base::Lance {
                meta,
                lance_version,
                ..
            } => self.commit_lance(meta, *lance_version, &plan, change)?,
        };
        Ok(CommitReport {
            version: plan.version,
            plan,
            change,
            metadata,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// Keeps the parent's metadata as its version file (once), so the
    /// parent stays openable by its id; `bytes` is that metadata.
    pub(super) fn keep_parent(&self, bytes: &[u8]) -> Result<()> {
        let storage = self.storage.as_ref();
        storage.create_dir_all(&self.dir.join(VERSIONS_DIR))?;
        let base_file = version_path(&self.dir, self.base_version);
        if !storage.is_file(&base_file) {
            storage.write_atomic(&base_file, bytes)?;
        }
        Ok(())
    }

    /// The version record of the commit.
    pub(super) fn version_info(&self, change: &ChangeSummary) -> VersionInfo {
        VersionInfo {
            id: self.base_version + 1,
            parent: self.base_version,
            created_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            change: change.clone(),
        }
    }
}

/// Rows read from a Lance fragment at a time while rewriting it.
#[cfg(feature = "lance")]
const EDIT_READ_ROWS: u64 = 4096;
