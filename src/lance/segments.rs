//! Resumable Lance writes: encoded batches stream through a channel into
//! one `Dataset::write` per segment, each commit a Lance version a resume
//! log can record, and a dataset is rewound to a recorded version when a
//! build resumes.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use crossbeam_channel::{bounded, Receiver, Sender};
use lance::dataset::{Dataset, WriteMode, WriteParams};

use super::{block_on, dir_uri, lance_err};
use crate::error::{Error, Result};

/// A `RecordBatchReader` fed by the encode pipeline.
pub(crate) struct ChannelReader {
    schema: SchemaRef,
    rx: Receiver<RecordBatch>,
}

impl ChannelReader {
    pub(crate) fn new(schema: SchemaRef, rx: Receiver<RecordBatch>) -> Self {
        ChannelReader { schema, rx }
    }
}

impl Iterator for ChannelReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok().map(Ok)
    }
}

impl RecordBatchReader for ChannelReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Brings the Lance dataset in `dir` back to `version` (0: no dataset):
/// later commits are undone and data files no fragment of that version uses
/// are deleted. Top-level entries named in `keep` (a resume log) stay.
///
/// # Errors
/// I/O errors naming the path; [`Error::CorruptShard`] when Lance cannot
/// check out the version.
pub(crate) fn rewind_dataset(
    storage: &crate::storage::StorageRef,
    dir: &Path,
    version: u64,
    keep: &[&str],
) -> Result<()> {
    if version == 0 {
        for e in storage.list(dir)? {
            if !keep.contains(&e.name().as_str()) {
                if e.is_dir() {
                    storage.remove_dir_all(&e.path)?;
                } else {
                    storage.remove_file(&e.path)?;
                }
            }
        }
        return Ok(());
    }
    let uri = storage.lance_uri(dir)?;
    let used: Vec<String> = block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
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
    if storage.is_dir(&data) {
        for e in storage.list(&data)? {
            if !used.iter().any(|u| u == &e.name()) {
                let _ = storage.remove_file(&e.path);
            }
        }
    }
    Ok(())
}

type WriterThread = JoinHandle<Result<lance::Result<Dataset>>>;

/// The Lance side of a resumable build: batches stream into one
/// `Dataset::write` per segment (create, then append); each commit is a
/// Lance version a resume log can record.
pub(crate) struct LanceSegments {
    uri: String,
    dir: PathBuf,
    schema: SchemaRef,
    max_rows_per_file: usize,
    max_rows_per_group: Option<usize>,
    storage_version: Option<lance_file::version::LanceFileVersion>,
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
            max_rows_per_group: None,
            storage_version: None,
            exists,
            current: None,
        })
    }

    /// Rows per row group of the data files (default: Lance's).
    pub(crate) fn with_rows_per_group(mut self, n: usize) -> Self {
        self.max_rows_per_group = Some(n);
        self
    }

    /// The data storage version of a dataset this creates (default: Lance's).
    pub(crate) fn with_storage_version(
        mut self,
        v: Option<lance_file::version::LanceFileVersion>,
    ) -> Self {
        self.storage_version = v;
        self
    }

    /// Creates the dataset with no row (what a write of nothing makes).
    pub(crate) fn create_empty(mut self) -> Result<Dataset> {
        self.start()?;
        self.commit()?
            .ok_or_else(|| lance_err(&self.dir, "no dataset was created"))
    }

    /// Sends a batch to the current segment (starting one if needed).
    pub(crate) fn send(&mut self, batch: RecordBatch) -> Result<()> {
        self.start()?;
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

    /// Starts a segment unless one is open.
    fn start(&mut self) -> Result<()> {
        if self.current.is_none() {
            let (tx, rx) = bounded::<RecordBatch>(4);
            let reader = ChannelReader::new(self.schema.clone(), rx);
            let uri = self.uri.clone();
            let d = WriteParams::default();
            let params = WriteParams {
                max_rows_per_file: self.max_rows_per_file,
                max_rows_per_group: self.max_rows_per_group.unwrap_or(d.max_rows_per_group),
                data_storage_version: self.storage_version,
                mode: if self.exists {
                    WriteMode::Append
                } else {
                    WriteMode::Create
                },
                ..d
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
        block_on(async move { crate::lance::open_dataset(&uri).await })?
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
