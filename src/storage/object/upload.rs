//! Writing objects: a file larger than the part size uploaded once in
//! parts ([`ObjectStorage::put_once`]), and a file being written, put once
//! with `If-None-Match: *` when it is finished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::AmazonS3;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::storage::{Storage, WriteFile};

use super::{runtime_block_on, store_error, ObjectStorage};

/// Parts in flight at once in one upload.
const PARTS_IN_FLIGHT: usize = 4;

impl ObjectStorage {
    /// Writes `bytes` at `path` once: one conditional put
    /// (`If-None-Match: *`) up to the part size, else a multipart upload
    /// (several parts in flight) after a check that nothing is there (S3
    /// has no condition on a multipart upload's start; the names written
    /// this way, a build's, are its own). An object already there is an
    /// [`Error::Io`] of kind `AlreadyExists`. A failed upload is aborted,
    /// so no part stays stored.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; [`Error::InvalidArgument`] for a bad
    /// `SHARDSET_OBJECT_PART_BYTES`.
    pub fn put_once(&self, path: &Path, bytes: Bytes) -> Result<()> {
        let part = self
            .part_bytes
            .clone()
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
        if bytes.len() as u64 <= part {
            return self.put(path, bytes, PutMode::Create).map(|_| ());
        }
        if self.stat(path)?.is_some() {
            return Err(Error::io(
                "put",
                path,
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the object exists"),
            ));
        }
        let store = self.store(path)?;
        let key = self.key(path)?;
        let part = part as usize;
        runtime_block_on(async move {
            let upload = store.put_multipart(&key).await?;
            let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, part);
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + part).min(bytes.len());
                if let Err(e) = w.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = w.abort().await;
                    return Err(e);
                }
                w.put(bytes.slice(at..end));
                at = end;
            }
            w.finish().await.map(|_| ())
        })?
        .map_err(|e| store_error("upload", path, e))
    }
}

/// A file being written to an object store: kept in memory, put with
/// `If-None-Match: *` on [`WriteFile::finish`].
#[derive(Debug)]
pub(super) struct ObjectFile {
    pub(super) store: Arc<AmazonS3>,
    pub(super) key: Key,
    pub(super) path: PathBuf,
    pub(super) buf: Vec<u8>,
}

impl Write for ObjectFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl WriteFile for ObjectFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.buf.len() as u64
    }

    fn sync_data(&mut self) -> Result<()> {
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let bytes = Bytes::from(self.buf);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        runtime_block_on(async move {
            store
                .put_opts(&key, PutPayload::from_bytes(bytes), opts)
                .await
        })?
        .map(|_| ())
        .map_err(|e| store_error("put", &self.path, e))
    }
}
