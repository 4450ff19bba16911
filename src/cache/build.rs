//! The build session every layout's writer runs in, and the resume log that
//! makes a killed build continue where it stopped.
//!
//! A [`Build`] is the sequence written once for all layouts: under the
//! cache's lock, left-overs of killed builds are removed (or one is taken
//! over, see [`Build::resume`]), a staging directory is created beside the
//! target, the writer fills it, [`Build::publish`] writes `_metadata.json`
//! and swaps the directory in ([`crate::cache::publish`]).
//!
//! A [`ResumeLog`] is an append-only JSON-lines file in the staging
//! directory: a header line describing the build (every option that shapes
//! the output; a later build resumes only with an equal header), then one
//! record per committed piece of work (an Arrow shard, a Lance version),
//! each appended and fsynced only after what it records is durable. A
//! killed build leaves a log whose records all describe durable work, but
//! possibly a torn last line, which is dropped on resume. Lines are tagged
//! `{"kind": ..., ...}` with each type's [`LogLine::KIND`] and carry their
//! own xxh64 (`line_xxh64`): a line damaged after it was written ends the
//! log as a torn one does.

use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cache::lock::CacheLock;
use crate::cache::metadata::{write_json_checksummed, METADATA_FILE};
use crate::cache::publish::{remove_leftovers, remove_leftovers_old, temp_dirs, StagingDir};
use crate::error::{Error, Result};
use crate::storage::{StorageRef, WriteFile};

/// Extra metadata a builder records (declared sources, config parameters).
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// Source stamps (`sources` key).
    pub sources: Option<serde_json::Value>,
    /// Config name and parameters (`config` key).
    pub config: Option<serde_json::Value>,
}

/// Cumulative row counts at which work units ended, shared between the
/// generator side (which learns them) and a writer (which records them with
/// each commit, so a resume can skip whole units).
pub type UnitEnds = std::sync::Arc<std::sync::Mutex<Vec<u64>>>;

/// Where a build continues: the rows a killed build committed (0 for a
/// fresh one), the work units known to end by then, and the sink where the
/// generator side records unit ends as it learns them: what `load` hands
/// the parallel merge of work units.
#[derive(Debug, Clone, Default)]
pub struct ResumePoint {
    skip: u64,
    ends: Vec<u64>,
    sink: UnitEnds,
}

impl ResumePoint {
    /// After `skip` committed rows, with the unit ends known then.
    pub(crate) fn new(skip: u64, ends: Vec<u64>) -> Self {
        ResumePoint {
            skip,
            ends,
            sink: UnitEnds::default(),
        }
    }

    /// Rows already committed: the examples to write start after these.
    pub fn skip(&self) -> u64 {
        self.skip
    }

    /// Cumulative ends of work units known from the killed build.
    pub fn unit_ends(&self) -> &[u64] {
        &self.ends
    }

    /// Where the generator side records unit ends as it learns them.
    pub fn unit_ends_sink(&self) -> UnitEnds {
        self.sink.clone()
    }
}

/// The unit ends known so far that fall at or before `committed` rows.
pub(crate) fn ends_up_to(ends: &UnitEnds, committed: u64) -> Vec<u64> {
    ends.lock()
        .map(|v| v.iter().copied().filter(|&e| e <= committed).collect())
        .unwrap_or_default()
}

/// A type written as one tagged line of a [`ResumeLog`].
pub(crate) trait LogLine: Serialize + DeserializeOwned {
    /// The line's `kind` tag.
    const KIND: &'static str;
}

/// The key of each line's own checksum: the xxh64 of the line with its
/// 16 hex digits written as zeros. A line whose bytes changed after it
/// was written (a disk's damage, an edit) is refused like a torn one:
/// every field of a record is trusted on resume (rows to skip, unit
/// ends), and not all can be checked against the files.
const LINE_SUM: &[u8] = b"\"line_xxh64\":\"";

/// One line, tagged and checksummed: `{"kind":"<KIND>","line_xxh64":"<16
/// hex>", <fields>}` (the shape serde's internally tagged enums write, a
/// field before the rest).
fn tagged<T: LogLine>(path: &Path, v: &T) -> Result<Vec<u8>> {
    let body = serde_json::to_vec(v)
        .map_err(|e| Error::metadata(path, format!("cannot serialise a log line: {e}")))?;
    let mut out = format!("{{\"kind\":\"{}\",", T::KIND).into_bytes();
    out.extend_from_slice(LINE_SUM);
    let sum_at = out.len();
    out.extend_from_slice(b"0000000000000000\"");
    match body.as_slice() {
        b"{}" => out.push(b'}'),
        [b'{', rest @ ..] => {
            out.push(b',');
            out.extend_from_slice(rest);
        }
        _ => return Err(Error::metadata(path, "a log line must be a JSON object")),
    }
    let sum = format!("{:016x}", xxhash_rust::xxh64::xxh64(&out, 0));
    out[sum_at..sum_at + 16].copy_from_slice(sum.as_bytes());
    out.push(b'\n');
    Ok(out)
}

/// Whether a line (without its newline) holds the checksum of its bytes.
fn sum_ok(line: &[u8]) -> bool {
    let Some(at) = line
        .windows(LINE_SUM.len())
        .position(|w| w == LINE_SUM)
        .map(|p| p + LINE_SUM.len())
    else {
        return false;
    };
    let Some(hex) = line.get(at..at + 16) else {
        return false;
    };
    let mut zeroed = line.to_vec();
    zeroed[at..at + 16].fill(b'0');
    format!("{:016x}", xxhash_rust::xxh64::xxh64(&zeroed, 0)).as_bytes() == hex
}

/// Parses one line of kind `T` (`None` for another kind, bad JSON or a
/// line whose checksum does not match).
fn untag<T: LogLine>(line: &[u8]) -> Option<T> {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    if !sum_ok(line) {
        return None;
    }
    let k: Kind = serde_json::from_slice(line).ok()?;
    if k.kind != T::KIND {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// An open resume log, appending records of type `R`.
#[derive(Debug)]
pub(crate) struct ResumeLog<R> {
    file: Box<dyn WriteFile>,
    _r: PhantomData<fn(R)>,
}

/// A resume log read back: its header, the records accepted, and the length
/// of the valid prefix (header and accepted records).
#[derive(Debug)]
pub(crate) struct Recovered<H, R> {
    pub(crate) header: H,
    pub(crate) records: Vec<R>,
    pub(crate) valid_bytes: u64,
}

impl<R: LogLine> ResumeLog<R> {
    /// Writes a new log holding `header` (atomically, durably) and opens it
    /// for appending.
    pub(crate) fn create<H: LogLine>(
        storage: &StorageRef,
        path: &Path,
        header: &H,
    ) -> Result<Self> {
        let text = tagged(path, header)?;
        storage.write_atomic(path, &text)?;
        Self::reopen(storage, path, text.len() as u64)
    }

    /// Opens a recovered log for appending after its valid prefix.
    pub(crate) fn reopen(storage: &StorageRef, path: &Path, valid_bytes: u64) -> Result<Self> {
        Ok(ResumeLog {
            file: storage.reopen_append(path, valid_bytes)?,
            _r: PhantomData,
        })
    }

    /// Appends a record and makes it durable.
    pub(crate) fn append(&mut self, r: &R) -> Result<()> {
        let text = tagged(self.file.path(), r)?;
        let path = self.file.path().to_path_buf();
        self.file
            .write_all(&text)
            .map_err(|e| Error::io("write", &path, e))?;
        self.file.sync_data()
    }

    /// Reads the log at `path`: `None` when absent or its first line is not
    /// a header of type `H`. Records are taken while `accept(record,
    /// accepted_so_far)` says yes; a torn, unreadable or refused line ends
    /// the log.
    pub(crate) fn read<H: LogLine>(
        storage: &StorageRef,
        path: &Path,
        mut accept: impl FnMut(&R, &[R]) -> bool,
    ) -> Option<Recovered<H, R>> {
        let bytes = storage.read(path).ok()?;
        let mut lines = bytes.split_inclusive(|&b| b == b'\n');
        let first = lines.next()?;
        let header = untag::<H>(first.strip_suffix(b"\n")?)?;
        let mut valid = first.len() as u64;
        let mut records = Vec::new();
        for l in lines {
            let Some(body) = l.strip_suffix(b"\n") else {
                break; // torn tail
            };
            match untag::<R>(body) {
                Some(r) if accept(&r, &records) => records.push(r),
                _ => break,
            }
            valid += l.len() as u64;
        }
        Some(Recovered {
            header,
            records,
            valid_bytes: valid,
        })
    }
}

/// A build of one cache under its lock: the storage, the staging directory
/// the writer fills, and publication.
#[derive(Debug)]
pub struct Build {
    staging: StagingDir,
}

impl Build {
    /// A fresh build: every left-over of the cache is removed (nobody else
    /// builds it while `lock` is held) and a new staging directory created.
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory.
    pub fn fresh(storage: &StorageRef, target: &Path, _lock: &CacheLock) -> Result<Build> {
        remove_leftovers(storage, target);
        Ok(Build {
            staging: StagingDir::create(storage, target)?,
        })
    }

    /// A resumable build. A left-over staging directory whose log `log_name`
    /// has a header equal to `header` is taken over when `rewind` can bring
    /// it back to the log's last record (`rewind` removes what the log does
    /// not record; an error starts over); every other left-over is removed.
    /// A new build starts a log with `header`.
    ///
    /// Returns the build, its log open for appending, and the records
    /// recovered (empty for a new build). A build that fails after this keeps
    /// its staging directory for the next attempt.
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory or log.
    pub(crate) fn resume<H, R>(
        storage: &StorageRef,
        target: &Path,
        _lock: &CacheLock,
        log_name: &str,
        header: &H,
        mut accept: impl FnMut(&Path, &R, &[R]) -> bool,
        mut rewind: impl FnMut(&Path, &[R]) -> Result<()>,
    ) -> Result<(Build, ResumeLog<R>, Vec<R>)>
    where
        H: LogLine + PartialEq,
        R: LogLine,
    {
        let mut found = None;
        for dir in temp_dirs(storage, target) {
            if found.is_none() {
                let log = dir.join(log_name);
                let rec = ResumeLog::<R>::read::<H>(storage, &log, |r, prev| accept(&dir, r, prev));
                if let Some(rec) = rec.filter(|r| &r.header == header) {
                    if rewind(&dir, &rec.records).is_ok() {
                        found = Some((dir, rec));
                        continue;
                    }
                }
            }
            let _ = storage.remove_dir_all(&dir);
        }
        remove_leftovers_old(storage, target);
        let (staging, log, records) = match found {
            Some((dir, rec)) => {
                let log = ResumeLog::reopen(storage, &dir.join(log_name), rec.valid_bytes)?;
                (StagingDir::adopt(storage, &dir, target), log, rec.records)
            }
            None => {
                let staging = StagingDir::create(storage, target)?;
                let log = ResumeLog::create(storage, &staging.path().join(log_name), header)?;
                (staging, log, Vec::new())
            }
        };
        let mut build = Build { staging };
        build.staging.keep_on_drop();
        Ok((build, log, records))
    }

    /// The staging directory the writer fills.
    pub fn dir(&self) -> &Path {
        self.staging.path()
    }

    /// The cache directory it becomes.
    pub fn target(&self) -> &Path {
        self.staging.target()
    }

    /// The storage written to.
    pub fn storage(&self) -> &StorageRef {
        self.staging.storage()
    }

    /// Writes `_metadata.json` (self-checksummed), removes the build's own
    /// working files `scratch` (a resume log, ...) from the staging
    /// directory, and publishes it as the cache, atomically.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file or rename; nothing is published then.
    pub fn publish(self, metadata: &impl Serialize, scratch: &[&str]) -> Result<PathBuf> {
        let storage = self.storage().clone();
        for name in scratch {
            let p = self.dir().join(name);
            if storage.is_dir(&p) {
                storage.remove_dir_all(&p)?;
            } else {
                storage.remove_file(&p)?;
            }
        }
        write_json_checksummed(storage.as_ref(), &self.dir().join(METADATA_FILE), metadata)?;
        let target = self.target().to_path_buf();
        self.staging.publish()?;
        Ok(target)
    }
}
