//! Checkpoints that make a `lance-video-frames` build resumable.
//!
//! The frames go to Lance in segments: every `checkpoint_frames` frames, at
//! a video boundary, the current segment is committed (a Lance version),
//! its files fsynced, and a line appended (and fsynced) to
//! `_frames_progress.jsonl` in the build's temp dir, recording the version,
//! how many examples are done and the videos written or skipped since the
//! previous line. The file's first line describes the build; a later build
//! of the same cache with an equal header (same options, same stamp of the
//! input files) takes the temp dir over: the Lance dataset goes back to the
//! last recorded version (a commit the file does not record is undone, its
//! files deleted), the recorded examples are checked and skipped, and
//! encoding continues with the next video.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use crossbeam_channel::{bounded, Sender};
use lance::dataset::{Dataset, WriteMode, WriteParams};
use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::cache::metadata::{write_bytes_durable, VideoEntry};
use crate::cache::publish::{remove_leftovers, remove_leftovers_old, temp_dirs, StagingDir};
use crate::error::{Error, Result};
use crate::lance::{block_on, dir_uri, lance_err, ChannelReader};

/// The progress file inside a frames build's temp dir.
pub(crate) const PROGRESS_FILE: &str = "_frames_progress.jsonl";

/// What a frames build is; a resumed build must match it exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProgressHeader {
    pub cache_name: String,
    pub schema_fingerprint: String,
    pub column: String,
    pub quality: f64,
    pub method: u8,
    /// `rgb` or `yuv` (absent in progress files of older builds: yuv).
    #[serde(default = "yuv")]
    pub webp_input: crate::video::WebpInput,
    pub resize: Option<u32>,
    pub resize_mode: crate::video::ResizeMode,
    pub max_rows_per_file: usize,
    pub skip_corrupt: bool,
    /// The stamp of the input files (`VideoFramesOptions::sources`).
    pub sources: J,
    /// The writing crate's version.
    pub writer: String,
}

/// One committed segment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// The Lance version of the commit.
    pub version: u64,
    /// Examples done (written or skipped) so far.
    pub tasks: u64,
    /// Videos written since the previous checkpoint.
    pub videos: Vec<VideoEntry>,
    /// Videos skipped since the previous checkpoint.
    pub skipped: Vec<J>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(ProgressHeader),
    Checkpoint(Checkpoint),
}

/// The work recovered from an interrupted build (all checkpoints folded
/// into one; version 0 when nothing was committed).
pub(crate) type Resumed = Checkpoint;

/// Appends checkpoints to the progress file.
pub(crate) struct ProgressFile {
    file: File,
    path: PathBuf,
}

impl ProgressFile {
    /// Writes a new progress file holding `header` and, when something was
    /// committed, `done` as one checkpoint (temp file, fsync, rename).
    fn create(dir: &Path, header: &ProgressHeader, done: &Resumed) -> Result<Self> {
        let path = dir.join(PROGRESS_FILE);
        let tmp = dir.join(format!("{PROGRESS_FILE}.tmp"));
        let mut text = line(&path, &Line::Header(header.clone()))?;
        if done.version > 0 {
            text.extend(line(&path, &Line::Checkpoint(done.clone()))?);
        }
        write_bytes_durable(&tmp, &text)?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &tmp, e))?;
        crate::util::fsync_dir(dir)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        Ok(ProgressFile { file, path })
    }

    /// Records a committed segment.
    pub(crate) fn append(&mut self, c: Checkpoint) -> Result<()> {
        let text = line(&self.path, &Line::Checkpoint(c))?;
        self.file
            .write_all(&text)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fsync", &self.path, e))
    }
}

fn line(path: &Path, l: &Line) -> Result<Vec<u8>> {
    let mut v = serde_json::to_vec(l)
        .map_err(|e| Error::metadata(path, format!("cannot serialise a progress line: {e}")))?;
    v.push(b'\n');
    Ok(v)
}

/// The checkpoints of `dir` folded into one, if its header equals `header`
/// (a torn or unreadable line ends the file).
fn recover(dir: &Path, header: &ProgressHeader) -> Option<Resumed> {
    let text = std::fs::read(dir.join(PROGRESS_FILE)).ok()?;
    let mut lines = text.split(|&b| b == b'\n');
    match serde_json::from_slice::<Line>(lines.next()?) {
        Ok(Line::Header(h)) if &h == header => {}
        _ => return None,
    }
    let mut done = Resumed::default();
    for l in lines {
        match serde_json::from_slice::<Line>(l) {
            Ok(Line::Checkpoint(c)) if c.version > done.version && c.tasks >= done.tasks => {
                done.version = c.version;
                done.tasks = c.tasks;
                done.videos.extend(c.videos);
                done.skipped.extend(c.skipped);
            }
            _ => break,
        }
    }
    Some(done)
}

/// Sets up the temp dir of a frames build: a left-over one with an equal
/// header is taken over (when `resumable`) and brought back to its last
/// checkpoint; every other left-over is removed.
pub(crate) fn prepare(
    cache_dir: &Path,
    header: &ProgressHeader,
    resumable: bool,
) -> Result<(StagingDir, ProgressFile, Resumed)> {
    if resumable {
        let mut found = None;
        for d in temp_dirs(cache_dir) {
            if found.is_none() {
                if let Some(done) = recover(&d, header) {
                    // A dataset that cannot be rewound is started over.
                    if rewind(&d, done.version).is_ok() {
                        found = Some((d, done));
                        continue;
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&d);
        }
        remove_leftovers_old(cache_dir);
        if let Some((d, done)) = found {
            let staging = StagingDir::adopt(&d, cache_dir);
            let file = ProgressFile::create(&d, header, &done)?;
            return Ok((staging, file, done));
        }
    } else {
        remove_leftovers(cache_dir);
    }
    let staging = StagingDir::create(cache_dir)?;
    let file = ProgressFile::create(staging.path(), header, &Resumed::default())?;
    Ok((staging, file, Resumed::default()))
}

/// Brings the Lance dataset in `dir` back to `version` (0: no dataset):
/// later commits are undone and files no fragment of that version uses are
/// deleted.
fn rewind(dir: &Path, version: u64) -> Result<()> {
    let keep = |name: &str| name == PROGRESS_FILE;
    if version == 0 {
        for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
            let e = e.map_err(|e| Error::io("read directory", dir, e))?;
            if !keep(&e.file_name().to_string_lossy()) {
                let p = e.path();
                let r = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                r.map_err(|e| Error::io("remove", &p, e))?;
            }
        }
        return Ok(());
    }
    let uri = dir_uri(dir)?;
    let used: Vec<String> = block_on(async move {
        let ds = Dataset::open(&uri).await?;
        let ds = if ds.version().version == version {
            ds
        } else {
            let mut old = ds.checkout_version(version).await?;
            old.restore().await?;
            old
        };
        Ok::<_, lance::Error>(
            ds.fragments()
                .iter()
                .flat_map(|f| f.files.iter().map(|d| d.path.clone()))
                .collect(),
        )
    })?
    .map_err(|e| lance_err(dir, e))?;
    let data = dir.join("data");
    if let Ok(entries) = std::fs::read_dir(&data) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !used.iter().any(|u| u == &name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir.join(crate::layouts::video_frames::format::INPUTS_DIR));
    Ok(())
}

type WriterThread = JoinHandle<Result<lance::Result<Dataset>>>;

/// The Lance side of a frames build: batches stream into one
/// `Dataset::write` per segment (create, then append).
pub(crate) struct LanceSegments {
    uri: String,
    dir: PathBuf,
    schema: SchemaRef,
    max_rows_per_file: usize,
    exists: bool,
    current: Option<(Sender<RecordBatch>, WriterThread)>,
}

impl LanceSegments {
    pub(crate) fn new(
        dir: &Path,
        schema: SchemaRef,
        max_rows_per_file: usize,
        exists: bool,
    ) -> Result<Self> {
        Ok(LanceSegments {
            uri: dir_uri(dir)?,
            dir: dir.to_path_buf(),
            schema,
            max_rows_per_file,
            exists,
            current: None,
        })
    }

    /// Sends a batch to the current segment (starting one if needed).
    pub(crate) fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if self.current.is_none() {
            let (tx, rx) = bounded::<RecordBatch>(4);
            let reader = ChannelReader::new(self.schema.clone(), rx);
            let uri = self.uri.clone();
            let params = WriteParams {
                max_rows_per_file: self.max_rows_per_file,
                mode: if self.exists {
                    WriteMode::Append
                } else {
                    WriteMode::Create
                },
                ..Default::default()
            };
            let h = std::thread::Builder::new()
                .name("shardset-lance".into())
                .spawn(move || {
                    block_on(
                        async move { Dataset::write(reader, uri.as_str(), Some(params)).await },
                    )
                })
                .map_err(|e| Error::io("start the Lance writer for", &self.dir, e))?;
            self.current = Some((tx, h));
        }
        let (tx, _) = self.current.as_ref().expect("a segment");
        if tx.send(batch).is_err() {
            // The writer stopped early: its own error says why.
            return Err(match self.commit() {
                Err(e) => e,
                Ok(_) => lance_err(&self.dir, "the Lance writer stopped early"),
            });
        }
        Ok(())
    }

    /// Ends the current segment and returns its commit (None when nothing
    /// was sent since the last one).
    pub(crate) fn commit(&mut self) -> Result<Option<Dataset>> {
        let Some((tx, h)) = self.current.take() else {
            return Ok(None);
        };
        drop(tx);
        let ds = h
            .join()
            .map_err(|p| Error::from_panic("lance writer", p))??
            .map_err(|e| lance_err(&self.dir, e))?;
        self.exists = true;
        Ok(Some(ds))
    }
}

impl LanceSegments {
    /// Ends the build's last segment and returns the dataset (None when
    /// nothing was ever committed).
    pub(crate) fn finish(&mut self) -> Result<Option<Dataset>> {
        if let Some(ds) = self.commit()? {
            return Ok(Some(ds));
        }
        if !self.exists {
            return Ok(None);
        }
        let uri = self.uri.clone();
        block_on(async move { Dataset::open(&uri).await })?
            .map(Some)
            .map_err(|e| lance_err(&self.dir, e))
    }
}

impl Drop for LanceSegments {
    fn drop(&mut self) {
        // An abandoned segment still commits; a resumed build undoes it.
        // Waiting here keeps the writer from racing the temp dir's removal.
        if let Some((tx, h)) = self.current.take() {
            drop(tx);
            let _ = h.join();
        }
    }
}

fn yuv() -> crate::video::WebpInput {
    crate::video::WebpInput::Yuv
}
