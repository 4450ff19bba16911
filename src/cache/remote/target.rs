//! Where a cache is published: an object store (conditional puts, the
//! commit an `If-Match` put of `_metadata.json`) or a directory of a
//! (shared) file system (files created once, the commit an atomic
//! replacement under the cache's lock).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::cache::lock::CacheLock;
use crate::cache::metadata::METADATA_FILE;
use crate::error::{Error, Result};
use crate::storage::object::{is_object_uri, object_storage, update_mode, ObjectStorage};
use crate::storage::{storage_for, Entry, EntryKind, Storage, StorageRef};

/// Where a cache is published from parts: an object store (conditional
/// puts) or a directory of a (shared) file system (the cache's lock and
/// atomic replacement).
pub(super) enum Target {
    Object(Arc<ObjectStorage>),
    Files(StorageRef),
}

impl Target {
    pub(super) fn of(uri: &Path) -> Self {
        if is_object_uri(uri) {
            Target::Object(object_storage(uri))
        } else {
            Target::Files(storage_for(uri))
        }
    }

    pub(super) fn storage(&self) -> &dyn Storage {
        match self {
            Target::Object(o) => o.as_ref(),
            Target::Files(s) => s.as_ref(),
        }
    }

    /// Writes `b` at `to` once: an object or file of the same size there
    /// already (a retried unit, a publish run again) is kept.
    pub(super) fn put_once(&self, to: &Path, b: Bytes) -> Result<()> {
        let n = b.len() as u64;
        let r = match self {
            Target::Object(o) => o.put_once(to, b),
            Target::Files(s) => {
                if let Some(dir) = to.parent() {
                    s.create_dir_all(dir)?;
                }
                s.create(to).and_then(|mut f| {
                    std::io::Write::write_all(&mut f, &b).map_err(|e| Error::io("write", to, e))?;
                    f.finish()
                })
            }
        };
        match r {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists
                    && self.storage().stat(to)?.is_some_and(|e| e.len == n) =>
            {
                Ok(())
            }
            r => r,
        }
    }

    /// Makes `bytes` the `_metadata.json` of the cache at `uri`: `None`
    /// when it is that already, else whether a cache was replaced.
    pub(super) fn commit(&self, uri: &Path, bytes: Vec<u8>) -> Result<Option<bool>> {
        // Every file of the build is in place; the commit has not happened.
        crate::util::fault_point("remote:before-commit");
        let meta = uri.join(METADATA_FILE);
        match self {
            Target::Object(o) => {
                let current = o.get_with_etag(&meta)?;
                if current.as_ref().is_some_and(|(b, _)| b[..] == bytes[..]) {
                    return Ok(None);
                }
                let replaced = current.is_some();
                let bytes = Bytes::from(bytes);
                if let Err(e) = o.put(
                    &meta,
                    bytes.clone(),
                    update_mode(current.and_then(|(_, e)| e)),
                ) {
                    // A put whose answer was lost may still have landed (and
                    // a retry of it then fails its own condition): the
                    // object says whether this commit happened.
                    return match o.get_with_etag(&meta) {
                        Ok(Some((now, _))) if now == bytes => Ok(Some(replaced)),
                        _ => Err(lost_commit(e)),
                    };
                }
                Ok(Some(replaced))
            }
            Target::Files(s) => {
                s.create_dir_all(uri)?;
                let _lock = CacheLock::acquire_in(s, uri)?;
                let current = if s.is_file(&meta) {
                    Some(s.read(&meta)?)
                } else {
                    None
                };
                if current.as_deref() == Some(&bytes[..]) {
                    return Ok(None);
                }
                s.write_atomic(&meta, &bytes)?;
                s.sync_dir(uri)?;
                Ok(Some(current.is_some()))
            }
        }
    }

    /// Every file under `dir` (none when it is absent), with its size and
    /// modification time.
    pub(super) fn walk(&self, dir: &Path) -> Result<Vec<Entry>> {
        match self {
            Target::Object(o) => o.list_recursive(dir),
            Target::Files(s) => {
                fn go(s: &dyn Storage, d: &Path, out: &mut Vec<Entry>) -> Result<()> {
                    for e in s.list(d)? {
                        match e.kind {
                            EntryKind::Dir => go(s, &e.path, out)?,
                            EntryKind::File => out.push(e),
                            EntryKind::Other => {}
                        }
                    }
                    Ok(())
                }
                let mut out = Vec::new();
                if s.is_dir(dir) {
                    go(s.as_ref(), dir, &mut out)?;
                }
                Ok(out)
            }
        }
    }
}

/// A failed conditional commit as the error that says so.
fn lost_commit(e: Error) -> Error {
    match e {
        Error::Io { source, path, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            Error::Io {
                op: "commit",
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "another build committed this cache first (its _metadata.json changed during this publish); nothing of this build is visible",
                ),
            }
        }
        e => e,
    }
}
