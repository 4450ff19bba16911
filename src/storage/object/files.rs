//! [`ObjectStorage`] as a [`Storage`]: files are objects, a directory is a
//! key prefix with objects under it, a lock is this machine's, and what an
//! object store cannot do (rename, append) is an error that says so.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutMode};

use crate::error::{Error, Result};
use crate::storage::{Entry, EntryKind, LockGuard, RangedFile, Storage, WriteFile};

use super::ranged::ObjectRanges;
use super::upload::ObjectFile;
use super::{runtime_block_on, split_uri, store_error, unsupported, ObjectStorage, S3_SCHEME};

impl Storage for ObjectStorage {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn stat(&self, path: &Path) -> Result<Option<Entry>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let k = key.clone();
        let head = runtime_block_on(async move { store.head(&k).await })?;
        match head {
            Ok(m) => {
                return Ok(Some(Entry {
                    path: path.to_path_buf(),
                    kind: EntryKind::File,
                    len: m.size,
                    modified: Some(m.last_modified.into()),
                }))
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(store_error("stat", path, e)),
        }
        // A prefix with objects under it is a directory.
        let store = self.store(path)?;
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let any = runtime_block_on(async move {
            let mut s = store.list(prefix.as_ref());
            s.try_next().await
        })?
        .map_err(|e| store_error("stat", path, e))?;
        Ok(any.map(|_| Entry {
            path: path.to_path_buf(),
            kind: EntryKind::Dir,
            len: 0,
            modified: None,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<Entry>> {
        let store = self.store(dir)?;
        let key = self.key(dir)?;
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let r = runtime_block_on(async move { store.list_with_delimiter(prefix.as_ref()).await })?
            .map_err(|e| store_error("list", dir, e))?;
        if r.objects.is_empty() && r.common_prefixes.is_empty() {
            return Err(Error::io(
                "list",
                dir,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no objects under this prefix"),
            ));
        }
        let mut out: Vec<Entry> = r
            .common_prefixes
            .iter()
            .map(|p| Entry {
                path: self.uri(p.as_ref()),
                kind: EntryKind::Dir,
                len: 0,
                modified: None,
            })
            .chain(r.objects.iter().map(|m| self.entry_of(m)))
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>> {
        Ok(self.map(path)?.to_vec())
    }

    fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let r = range.clone();
        let b = runtime_block_on(async move { store.get_range(&key, r).await })?
            .map_err(|e| store_error("read", path, e))?;
        if b.len() as u64 != range.end - range.start {
            return Err(Error::io(
                "read",
                path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the object is shorter"),
            ));
        }
        Ok(b.to_vec())
    }

    fn map(&self, path: &Path) -> Result<Bytes> {
        match self.get_with_etag(path)? {
            Some((b, _)) => Ok(b),
            None => Err(Error::io(
                "open",
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such object"),
            )),
        }
    }

    fn ranged(&self, path: &Path) -> Result<Option<Arc<dyn RangedFile>>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let k = key.clone();
        let s = store.clone();
        let meta = runtime_block_on(async move { s.head(&k).await })?
            .map_err(|e| store_error("open", path, e))?;
        let object = format!("{}/{}", self.client.bucket, key.as_ref());
        let version = format!("{}:{}", meta.size, meta.e_tag.unwrap_or_default());
        Ok(Some(Arc::new(ObjectRanges {
            client: self.client.clone(),
            disk: self.disk.clone(),
            path: path.to_path_buf(),
            key,
            object,
            version,
            len: meta.size,
        })))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteFile>> {
        Ok(Box::new(ObjectFile {
            store: self.store(path)?,
            key: self.key(path)?,
            path: path.to_path_buf(),
            buf: Vec::new(),
        }))
    }

    fn reopen_append(&self, path: &Path, _keep_bytes: u64) -> Result<Box<dyn WriteFile>> {
        Err(unsupported("append to", path))
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.put(path, Bytes::copy_from_slice(bytes), PutMode::Overwrite)
            .map(|_| ())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.key(dir).map(|_| ())
    }

    fn create_dir(&self, dir: &Path) -> Result<bool> {
        self.key(dir)?;
        Ok(!self.exists(dir))
    }

    fn rename(&self, _from: &Path, to: &Path) -> Result<()> {
        Err(unsupported("rename to", to))
    }

    fn exchange(&self, _a: &Path, _b: &Path) -> Result<bool> {
        Ok(false)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        match runtime_block_on(async move { store.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error("remove", path, e)),
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<()> {
        for e in self.list_recursive(dir)? {
            self.remove_file(&e.path)?;
        }
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn sync_tree(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn lock(&self, path: &Path, wait: bool) -> Result<Option<Box<dyn LockGuard>>> {
        let (bucket, key) = split_uri(path)?;
        let name = format!(
            "{:032x}.lock",
            xxhash_rust::xxh3::xxh3_128(format!("{bucket}/{key}").as_bytes())
        );
        let dir = self.disk.root().join("locks");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        crate::storage::local().lock(&dir.join(name), wait)
    }

    fn lance_uri(&self, dir: &Path) -> Result<String> {
        let (bucket, key) = split_uri(dir)?;
        Ok(format!("{S3_SCHEME}{bucket}/{key}"))
    }
}
