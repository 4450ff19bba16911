//! The local filesystem as a [`Storage`]: `std::fs`, `fsync`, read-only
//! memory maps, `flock` locks and Linux `renameat2(RENAME_EXCHANGE)`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{Entry, EntryKind, LockGuard, Storage, WriteFile};
use crate::error::{Error, Result};

/// The local filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFs;

fn entry(path: PathBuf, ty: std::fs::FileType, meta: Option<std::fs::Metadata>) -> Entry {
    let kind = if ty.is_file() {
        EntryKind::File
    } else if ty.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::Other
    };
    let len = match (&meta, kind) {
        (Some(m), EntryKind::File) => m.len(),
        _ => 0,
    };
    let modified = meta.and_then(|m| m.modified().ok());
    Entry {
        path,
        kind,
        len,
        modified,
    }
}

/// A file being written on the local filesystem.
#[derive(Debug)]
struct LocalFile {
    file: File,
    path: PathBuf,
    len: u64,
}

impl Write for LocalFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl WriteFile for LocalFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn sync_data(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fsync", &self.path, e))
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let LocalFile { mut file, path, .. } = *self;
        file.flush().map_err(|e| Error::io("write", &path, e))?;
        file.sync_all().map_err(|e| Error::io("fsync", &path, e))
    }
}

/// An `flock` held on an open lock file.
#[derive(Debug)]
struct LocalLock {
    _file: File,
    path: PathBuf,
}

impl LockGuard for LocalLock {
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Storage for LocalFs {
    fn name(&self) -> &'static str {
        "local"
    }

    fn stat(&self, path: &Path) -> Result<Option<Entry>> {
        match std::fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(entry(path.to_path_buf(), m.file_type(), Some(m)))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
            let e = e.map_err(|e| Error::io("read directory", dir, e))?;
            let p = e.path();
            let ty = e.file_type().map_err(|err| Error::io("stat", &p, err))?;
            out.push(entry(p, ty, e.metadata().ok()));
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io("read", path, e))
    }

    fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
        let mut f = File::open(path).map_err(|e| Error::io("open", path, e))?;
        f.seek(SeekFrom::Start(range.start))
            .map_err(|e| Error::io("seek", path, e))?;
        let mut buf = vec![0u8; range.end.saturating_sub(range.start) as usize];
        f.read_exact(&mut buf)
            .map_err(|e| Error::io("read", path, e))?;
        Ok(buf)
    }

    fn map(&self, path: &Path) -> Result<Bytes> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        if len == 0 {
            // A zero-length map is an error on Linux; nothing to map.
            return Ok(Bytes::new());
        }
        // SAFETY: the map is read-only and published cache files are never
        // modified in place (a rebuild writes a new directory and swaps it
        // in). A file truncated underneath the map by a third party could
        // fault: the standard caveat of every memory-mapped reader (pyarrow
        // included).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("mmap", path, e))?;
        Ok(Bytes::from_owner(map))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(LocalFile {
            file,
            path: path.to_path_buf(),
            len: 0,
        }))
    }

    fn reopen_append(&self, path: &Path, keep_bytes: u64) -> Result<Box<dyn WriteFile>> {
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        file.set_len(keep_bytes)
            .map_err(|e| Error::io("truncate torn tail of", path, e))?;
        file.seek(SeekFrom::End(0))
            .map_err(|e| Error::io("seek", path, e))?;
        file.sync_data().map_err(|e| Error::io("fsync", path, e))?;
        Ok(Box::new(LocalFile {
            file,
            path: path.to_path_buf(),
            len: keep_bytes,
        }))
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.tmp-{}", crate::util::random_suffix()));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("write", path, e));
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        self.sync_dir(parent)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))
    }

    fn create_dir(&self, dir: &Path) -> Result<bool> {
        match std::fs::create_dir(dir) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("create directory", dir, e)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", to, e))
    }

    fn exchange(&self, a: &Path, b: &Path) -> Result<bool> {
        match exchange(a, b) {
            Ok(()) => Ok(true),
            // Not supported by the kernel or the filesystem: fall back.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM)
                ) || e.kind() == std::io::ErrorKind::Unsupported =>
            {
                Ok(false)
            }
            Err(e) => Err(Error::io("exchange", b, e)),
        }
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", path, e)),
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<()> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove directory", dir, e)),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let f = File::open(dir).map_err(|e| Error::io("open directory", dir, e))?;
        f.sync_all()
            .map_err(|e| Error::io("fsync directory", dir, e))
    }

    fn sync_tree(&self, dir: &Path) -> Result<()> {
        for e in self.list(dir)? {
            match e.kind {
                EntryKind::Dir => self.sync_tree(&e.path)?,
                EntryKind::File => {
                    let f = File::open(&e.path).map_err(|err| Error::io("open", &e.path, err))?;
                    f.sync_all()
                        .map_err(|err| Error::io("fsync", &e.path, err))?;
                }
                EntryKind::Other => {}
            }
        }
        self.sync_dir(dir)
    }

    fn lock(&self, path: &Path, wait: bool) -> Result<Option<Box<dyn LockGuard>>> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        // Never truncated, never deleted: deleting it would let a second
        // writer lock a fresh inode.
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open lock file", path, e))?;
        if wait {
            file.lock().map_err(|e| Error::io("lock", path, e))?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", path, e)),
            }
        }
        Ok(Some(Box::new(LocalLock {
            _file: file,
            path: path.to_path_buf(),
        })))
    }

    fn lance_uri(&self, dir: &Path) -> Result<String> {
        dir.to_str()
            .map(str::to_string)
            .ok_or_else(|| Error::InvalidArgument(format!("{} is not UTF-8", dir.display())))
    }
}

/// Swaps two directory entries in one step (Linux `renameat2` with
/// `RENAME_EXCHANGE`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes())?;
    let cb = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_once_and_read_back_whole_in_ranges_and_mapped() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalFs;
        let p = d.path().join("f");
        let mut w = s.create(&p).unwrap();
        w.write_all(b"hello world").unwrap();
        assert_eq!(w.len(), 11);
        w.finish().unwrap();
        assert!(s.create(&p).is_err(), "a file is written once");
        assert_eq!(s.read(&p).unwrap(), b"hello world");
        assert_eq!(s.read_range(&p, 6..11).unwrap(), b"world");
        assert!(s.read_range(&p, 6..12).is_err());
        assert_eq!(&s.map(&p).unwrap()[..5], b"hello");
        let e = s.stat(&p).unwrap().unwrap();
        assert_eq!((e.kind, e.len), (EntryKind::File, 11));
        assert_eq!(s.stat(&d.path().join("none")).unwrap(), None);
    }

    #[test]
    fn a_log_reopens_without_its_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalFs;
        let p = d.path().join("log");
        let mut w = s.create(&p).unwrap();
        w.write_all(b"one\ntw").unwrap();
        w.finish().unwrap();
        let mut w = s.reopen_append(&p, 4).unwrap();
        w.write_all(b"two\n").unwrap();
        w.sync_data().unwrap();
        drop(w);
        assert_eq!(s.read(&p).unwrap(), b"one\ntwo\n");
    }

    #[test]
    fn atomic_writes_replace_whole_and_leave_nothing_beside() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalFs;
        let p = d.path().join("m.json");
        s.write_atomic(&p, b"1").unwrap();
        s.write_atomic(&p, b"22").unwrap();
        assert_eq!(s.read(&p).unwrap(), b"22");
        let names: Vec<_> = s.list(d.path()).unwrap().iter().map(Entry::name).collect();
        assert_eq!(names, vec!["m.json"]);
    }

    #[test]
    fn exchange_swaps_directories() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalFs;
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        s.create_dir_all(&a.join("x")).unwrap();
        s.create_dir_all(&b.join("y")).unwrap();
        if s.exchange(&a, &b).unwrap() {
            assert!(s.is_dir(&a.join("y")) && s.is_dir(&b.join("x")));
        }
        assert_eq!(s.dir_size(d.path()).unwrap(), 0);
        let held = s.lock(&d.path().join("l.lock"), true).unwrap().unwrap();
        assert!(s.lock(&d.path().join("l.lock"), false).unwrap().is_none());
        drop(held);
        assert!(s.lock(&d.path().join("l.lock"), false).unwrap().is_some());
    }
}
