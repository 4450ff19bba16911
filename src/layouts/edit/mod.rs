//! Staged edits of an `arrow-shards` or `lance-rows` cache, committed as
//! a new version.
//!
//! [`Cache::edit`] returns a [`Staging`] over the opened version: rows and
//! single cells set, rows deleted and appended are checked against the
//! features and encoded at once, and held in memory; reads through the
//! staging area see them (a set wins, deleted rows are gone, appended rows
//! come last) without rewriting anything. [`Staging::plan`] says which
//! shards a commit rewrites, reuses and adds; [`Staging::commit`] writes
//! only those, under the cache's lock:
//!
//! 1. left-overs of an earlier commit of the same version that never
//!    reached its commit point are removed;
//! 2. the parent's metadata is kept as `_cache_versions/<parent>.json` (once);
//! 3. each touched shard is written anew as `shard-NNNNN.v<version>.arrow`
//!    (position in the new version, then the version), with its row
//!    checksums when the cache keeps them; appended rows go to new shards
//!    of the same names, rotated by the cache's byte budget; untouched
//!    shards are the very same files;
//! 4. the new metadata goes to `_cache_versions/<version>.json`;
//! 5. `_metadata.json` is replaced atomically with the same bytes: the
//!    commit point.
//!
//! A crash before step 5 leaves the parent version in place (the new files
//! are named by no metadata `_metadata.json` points at, and the next commit
//! or `gc` removes them); after it, the new version. No file of the parent
//! version is changed or removed, so a reader holding it keeps reading it,
//! and the published directory is always a plain cache the reference opens
//! (it reads the shards `shard_filenames` names). [`gc_versions`] removes
//! old versions and the files only they name.
//!
//! A `lance-rows` cache is edited the same way through Lance's own
//! versions: the staging, checks and reads are the same; the commit writes
//! the touched fragments anew (each taking its old fragment's place and
//! id), appended rows as new fragments, and commits one Lance `Update`
//! transaction (a new Lance version; untouched fragments are the same data
//! files) before the same two metadata steps. The cache version records
//! the Lance version it reads (`lance_version`), so an old cache version
//! opens the Lance version it was, and a Lance commit whose cache version
//! never became current is undone (Lance's restore) by the next commit or
//! `gc`.
//!
//! [`Cache::edit`]: crate::layouts::open::Cache::edit

mod arrow_commit;
mod commit;
mod gc;
#[cfg(feature = "lance")]
mod lance_commit;
mod staged;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

#[cfg(feature = "lance")]
use crate::cache::metadata::LanceRowsMetadata;
use crate::cache::metadata::{ArrowShardsMetadata, CacheMetadata};
use crate::cache::versions::ChangeSummary;
use crate::features::decode::RowDecoder;
use crate::features::Features;
use crate::layouts::arrow_shards::read::ArrowShards;
use crate::layouts::backend::Backend;
#[cfg(feature = "lance")]
use crate::layouts::lance_rows::read::LanceRows;
use crate::storage::StorageRef;

pub use gc::{gc_versions, VersionGc};

/// The file name of the shard at `position` of version `version`.
pub fn edited_shard_filename(position: usize, version: u64) -> String {
    format!("shard-{position:05}.v{version}.arrow")
}

/// Where a row of the staged view comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A row of the parent version (possibly replaced).
    Base(u64),
    /// An appended row.
    New(usize),
}

/// The version edits are staged on, by layout.
#[derive(Debug)]
enum Base {
    Arrow {
        meta: Box<ArrowShardsMetadata>,
        shards: ArrowShards,
    },
    #[cfg(feature = "lance")]
    Lance {
        meta: Box<LanceRowsMetadata>,
        rows: LanceRows,
        /// The Lance version the staged view reads.
        lance_version: u64,
    },
}

impl Base {
    fn backend(&self) -> &dyn Backend {
        match self {
            Base::Arrow { shards, .. } => shards,
            #[cfg(feature = "lance")]
            Base::Lance { rows, .. } => rows,
        }
    }
}

/// Edits staged over one version of an `arrow-shards` or `lance-rows` cache.
#[derive(Debug)]
pub struct Staging {
    dir: PathBuf,
    storage: StorageRef,
    base: Base,
    base_version: u64,
    features: Arc<Features>,
    schema: SchemaRef,
    decoder: RowDecoder,
    /// `starts[i]`: first row of shard i in the parent; `starts[n]`: its rows.
    starts: Vec<u64>,
    /// Parent rows deleted, sorted.
    deleted: Vec<u64>,
    /// Parent rows replaced, as one-row batches.
    overrides: BTreeMap<u64, RecordBatch>,
    /// Appended rows, as one-row batches.
    appended: Vec<RecordBatch>,
    rows_set: u64,
    cells_set: u64,
    message: Option<String>,
}

/// What a commit would do, before it does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPlan {
    /// The version the edits are staged on.
    pub base_version: u64,
    /// The version a commit makes.
    pub version: u64,
    /// Rows before and after.
    pub rows_before: u64,
    /// Rows after the commit.
    pub rows_after: u64,
    /// Parent shards (Arrow files, or Lance fragments), by position,
    /// written anew because rows in them changed.
    pub rewritten: Vec<usize>,
    /// Parent shards kept as they are (the same files).
    pub reused: Vec<usize>,
    /// Parent shards dropped: every row in them was deleted.
    pub removed: Vec<usize>,
    /// Rows appended (written to new shards).
    pub appended_rows: u64,
    /// Bytes the commit writes, estimated: the rewritten shards' file sizes
    /// scaled by the rows they keep, plus the appended rows' Arrow bytes
    /// (the commit's report has the exact figure).
    pub bytes_estimate: u64,
}

impl EditPlan {
    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.rewritten.is_empty() && self.removed.is_empty() && self.appended_rows == 0
    }
}

/// What a commit did.
#[derive(Debug, Clone)]
pub struct CommitReport {
    /// The version published.
    pub version: u64,
    /// What was planned (and done).
    pub plan: EditPlan,
    /// What the new version records of its making (exact bytes written).
    pub change: ChangeSummary,
    /// The metadata of the new version.
    pub metadata: CacheMetadata,
    /// Wall time of the commit, in seconds.
    pub seconds: f64,
}
