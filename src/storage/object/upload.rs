//! Writing objects: a file larger than the part size uploaded once in
//! parts ([`ObjectStorage::put_once`]), and a file being written, put once
//! with `If-None-Match: *` when it is finished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::aws::AmazonS3;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::storage::{Storage, WriteFile};

use super::{runtime_block_on, store_error, ObjectStorage};

/// Parts in flight at once in one upload.
const PARTS_IN_FLIGHT: usize = 4;

/// Attempts of a write-once put after the client's own retries gave up on
/// a transport failure (connection dropped or answer cut).
const PUT_RETRIES: usize = 4;

/// The folder, beside an object being uploaded in parts, of the marker
/// that holds the upload's id until it completes or aborts: S3 lists no
/// object for an unfinished upload, and object_store cannot list uploads,
/// so a process killed mid-upload would leave parts nobody can name.
pub const UPLOADS_DIR: &str = "_uploads";

/// The marker of an upload to `key`: `<folder>/_uploads/<name>`.
fn upload_marker(key: &Key) -> Key {
    let s = key.as_ref();
    match s.rsplit_once('/') {
        Some((dir, name)) => Key::from(format!("{dir}/{UPLOADS_DIR}/{name}")),
        None => Key::from(format!("{UPLOADS_DIR}/{s}")),
    }
}

/// The object a marker at `marker` (`.../_uploads/<name>`) stands for.
pub fn uploaded_object(marker: &Path) -> Option<PathBuf> {
    let name = marker.file_name()?;
    let dir = marker.parent()?;
    (dir.file_name()? == UPLOADS_DIR).then(|| dir.parent().map(|d| d.join(name)))?
}

impl ObjectStorage {
    /// Writes `bytes` at `path` once: one conditional put
    /// (`If-None-Match: *`) up to the part size, else a multipart upload
    /// (several parts in flight) after a check that nothing is there (S3
    /// has no condition on a multipart upload's start; the names written
    /// this way, a build's, are its own). An object already there is an
    /// [`Error::Io`] of kind `AlreadyExists`. A failed upload is aborted,
    /// so no part stays stored; one whose process died is named by its
    /// marker ([`UPLOADS_DIR`]), which `gc` aborts.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; [`Error::InvalidArgument`] for a bad
    /// `SHARDSET_OBJECT_PART_BYTES`.
    pub fn put_once(&self, path: &Path, bytes: Bytes) -> Result<()> {
        // The client retries what it knows to be safe; a conditional put
        // cut before its answer is not, so it is tried again here, and one
        // that had landed meets its own condition (`AlreadyExists`), which
        // the caller resolves by the object's size.
        let mut wait = Duration::from_millis(200);
        let mut rng = crate::util::SplitMix64::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        );
        for _ in 0..PUT_RETRIES {
            match self.put_once_attempt(path, bytes.clone()) {
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::Other => {
                    // Full jitter: a random wait up to the doubled backoff.
                    let ms = rng.below(wait.as_millis() as u64 + 1);
                    std::thread::sleep(Duration::from_millis(ms));
                    wait *= 2;
                }
                r => return r,
            }
        }
        self.put_once_attempt(path, bytes)
    }

    fn put_once_attempt(&self, path: &Path, bytes: Bytes) -> Result<()> {
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
        let marker = upload_marker(&key);
        let part = part as usize;
        let chunks: Vec<Bytes> = (0..bytes.len())
            .step_by(part)
            .map(|at| bytes.slice(at..(at + part).min(bytes.len())))
            .collect();
        runtime_block_on(async move {
            let id = store.create_multipart(&key).await?;
            // The upload's id, where `gc` finds it if this process dies
            // before the upload completes or aborts.
            store
                .put(&marker, PutPayload::from(id.clone().into_bytes()))
                .await?;
            let mut parts = Vec::with_capacity(chunks.len());
            let mut sent = futures::stream::iter(chunks.into_iter().enumerate())
                .map(|(i, c)| store.put_part(&key, &id, i, PutPayload::from_bytes(c)))
                .buffered(PARTS_IN_FLIGHT);
            let mut failed = None;
            while let Some(p) = sent.next().await {
                match p {
                    Ok(p) => parts.push(p),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                crate::util::fault_point("upload:after-part");
            }
            drop(sent);
            let done = match failed {
                None => store.complete_multipart(&key, &id, parts).await.map(|_| ()),
                Some(e) => {
                    let _ = store.abort_multipart(&key, &id).await;
                    Err(e)
                }
            };
            let _ = store.delete(&marker).await;
            done
        })?
        .map_err(|e| store_error("upload", path, e))
    }

    /// Aborts the multipart upload `id` of the object at `path` (its parts
    /// are deleted); an upload already completed or aborted is no error.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub fn abort_upload(&self, path: &Path, id: &str) -> Result<()> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let id = id.to_string();
        match runtime_block_on(async move { store.abort_multipart(&key, &id).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error("abort the upload of", path, e)),
        }
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
