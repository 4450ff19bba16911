//! An object read by byte ranges through the disk cache, several ranges
//! in flight at once: how shard reads fetch only the bytes they need.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::storage::disk_cache::DiskCache;
use crate::storage::RangedFile;

use super::{runtime_block_on, store_error, Client, CONCURRENT_RANGES};

/// A byte range source over one object, read through the disk cache.
#[derive(Debug)]
pub(super) struct ObjectRanges {
    pub(super) client: Arc<Client>,
    pub(super) disk: Arc<DiskCache>,
    pub(super) path: PathBuf,
    pub(super) key: Key,
    pub(super) object: String,
    pub(super) version: String,
    pub(super) len: u64,
}

impl ObjectRanges {
    /// An error naming the object for a range outside it.
    fn check(&self, range: &Range<u64>) -> Result<()> {
        if range.end > self.len || range.start > range.end {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "range {}..{} is outside the object's {} bytes",
                    range.start, range.end, self.len
                ),
            ));
        }
        Ok(())
    }
}

impl RangedFile for ObjectRanges {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        self.check(&range)?;
        self.disk
            .get_or_fetch(&self.object, &self.version, range.clone(), || {
                let store = self.client.store(&self.path)?;
                let key = self.key.clone();
                let r = range.clone();
                runtime_block_on(async move { store.get_range(&key, r).await })?
                    .map_err(|e| store_error("read", &self.path, e))
            })
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut out: Vec<Option<Bytes>> = Vec::with_capacity(ranges.len());
        let mut missing = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            self.check(r)?;
            let hit = self.disk.get(&self.object, &self.version, r);
            if hit.is_none() {
                missing.push((i, r.clone()));
            }
            out.push(hit);
        }
        if !missing.is_empty() {
            let store = self.client.store(&self.path)?;
            let key = self.key.clone();
            let want: Vec<Range<u64>> = missing.iter().map(|(_, r)| r.clone()).collect();
            let fetched = runtime_block_on(async move {
                futures::stream::iter(want.into_iter().map(|r| {
                    let (store, key) = (store.clone(), key.clone());
                    async move { store.get_range(&key, r).await }
                }))
                .buffered(CONCURRENT_RANGES)
                .try_collect::<Vec<Bytes>>()
                .await
            })?
            .map_err(|e| store_error("read", &self.path, e))?;
            for ((i, r), b) in missing.into_iter().zip(fetched) {
                self.disk
                    .insert(&self.object, &self.version, r, b.clone())?;
                out[i] = Some(b);
            }
        }
        Ok(out
            .into_iter()
            .map(|b| b.expect("every range read"))
            .collect())
    }

    fn is_cached(&self, range: &Range<u64>) -> bool {
        self.disk.contains(&self.object, &self.version, range)
    }

    fn cached_bytes(&self) -> u64 {
        self.disk.object_bytes(&self.object, &self.version)
    }
}
