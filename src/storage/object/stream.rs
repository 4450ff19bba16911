//! An object streamed into a local file from a byte offset: how a builder's
//! `s3://` asset is downloaded and resumed (the download module keeps the
//! partial file, its lock and its checksum, as for HTTP). The body goes to
//! the file as it arrives, so an asset of any size takes no more memory
//! than one chunk.

use std::io::Write;
use std::path::Path;

use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::{runtime_block_on, store_error, ObjectStorage};
use crate::error::{Error, Result};

impl ObjectStorage {
    /// The size of the object at `path`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; its source's kind is `NotFound` when
    /// there is no such object.
    pub fn object_len(&self, path: &Path) -> Result<u64> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        runtime_block_on(async move { store.head(&key).await })?
            .map(|m| m.size)
            .map_err(|e| store_error("stat", path, e))
    }

    /// Appends the bytes of the object at `path` from `from` to its end to
    /// `file`, telling `progress` each chunk's length; returns the bytes
    /// written. A broken body leaves what arrived in `file` (flushed), so
    /// the next attempt resumes after it.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path (the object, or a transfer cut after
    /// the bytes written so far) or, for a failed write, the file.
    pub fn copy_to(
        &self,
        path: &Path,
        from: u64,
        file: &mut std::fs::File,
        local: &Path,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let opts = GetOptions {
            range: (from > 0).then_some(GetRange::Offset(from)),
            ..Default::default()
        };
        runtime_block_on(async move {
            let got = store
                .get_opts(&key, opts)
                .await
                .map_err(|e| store_error("read", path, e))?;
            let mut body = got.into_stream();
            let mut written = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| {
                    let _ = file.flush();
                    Error::io(
                        "read",
                        path,
                        std::io::Error::other(format!(
                            "the transfer broke after {} bytes: {e}",
                            from + written
                        )),
                    )
                })?;
                file.write_all(&chunk)
                    .map_err(|e| Error::io("write", local, e))?;
                written += chunk.len() as u64;
                progress(chunk.len() as u64);
            }
            file.flush().map_err(|e| Error::io("write", local, e))?;
            Ok(written)
        })?
    }
}
