//! Parquet files read as a dataset, read-only and without conversion: one
//! file or a directory of them (`*.parquet`, in name order), each row group
//! a shard. Features come from the caller, from Hugging Face's metadata in
//! the file, or from the Arrow types ([`crate::features::foreign`]), and
//! every column is adapted to its feature's Arrow type as it is read, so
//! decoding, views, samplers and loaders work as on a cache.
//!
//! Random access reads chunks of [`CHUNK_ROWS`] rows with the Arrow
//! project's Parquet reader (`parquet` crate): a row selection over the
//! file's page index reads only the pages that hold the chunk, and chunks
//! are kept decoded in a byte-bounded LRU shared by clones, as the Lance
//! backend keeps its chunks. Iteration reads whole row groups.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::{RecordBatch, RecordBatchReader};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};

use parquet::file::metadata::PageIndexPolicy;

use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::foreign::{adapt_batch, of_foreign_schema};
use crate::features::Features;
use crate::layouts::arrow_shards::read::lru::BatchLru;
use crate::layouts::backend::{
    normalize_index, shard_order, slice_from_pieces, take_by_chunks, Backend, BatchIter,
    IterOptions, RowsCore,
};
use crate::value::Row;

/// The layout name a Parquet dataset reports.
pub const LAYOUT_PARQUET: &str = "parquet";

/// Rows read together on a random access.
pub const CHUNK_ROWS: u64 = 1024;

/// Bytes of decoded chunks kept for random access.
const CACHE_BYTES: usize = 256 << 20;

#[derive(Debug)]
struct ParquetFile {
    path: PathBuf,
    meta: ArrowReaderMetadata,
}

#[derive(Debug)]
struct Inner {
    core: RowsCore,
    files: Vec<ParquetFile>,
    /// Shard `i` is row group `groups[i].1` of file `groups[i].0`.
    groups: Vec<(usize, usize)>,
    cache: Mutex<BatchLru>,
}

/// Parquet files as a read-only dataset backend.
#[derive(Debug, Clone)]
pub struct ParquetRows {
    inner: Arc<Inner>,
}

fn bad(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::CorruptShard {
        path: path.to_path_buf(),
        reason: format!("parquet: {e}"),
    }
}

/// The Parquet files at `path`: the file itself, or a directory's
/// `*.parquet` files in name order.
fn parquet_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io("list", path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "parquet") && p.is_file())
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} holds no .parquet file: give a Parquet file or a directory of them",
            path.display()
        )));
    }
    Ok(out)
}

impl ParquetRows {
    /// Opens the Parquet file or directory at `path`, with `features`, or
    /// those the files describe or their Arrow types give, decoding cells
    /// with `decode`.
    ///
    /// # Errors
    /// [`Error::Io`] naming a file that cannot be opened;
    /// [`Error::CorruptShard`] for a file that is not Parquet or whose
    /// columns differ from the first file's; [`Error::InvalidFeature`] for
    /// a column no feature holds or a feature with no column.
    pub fn open(
        path: &Path,
        features: Option<Features>,
        decode: DecodeOptions,
    ) -> Result<ParquetRows> {
        let mut files = Vec::new();
        for p in parquet_files(path)? {
            let f = File::open(&p).map_err(|e| Error::io("open", &p, e))?;
            let meta = ArrowReaderMetadata::load(
                &f,
                ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional),
            )
            .map_err(|e| bad(&p, e))?;
            files.push(ParquetFile { path: p, meta });
        }
        let schema = files[0].meta.schema().clone();
        for f in &files[1..] {
            let s = f.meta.schema();
            let same = s.fields().len() == schema.fields().len()
                && s.fields()
                    .iter()
                    .zip(schema.fields())
                    .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
            if !same {
                return Err(bad(
                    &f.path,
                    format!(
                        "its columns differ from those of {}: a directory is read as one dataset of one schema",
                        files[0].path.display()
                    ),
                ));
            }
        }
        let features = match features {
            Some(f) => f,
            None => of_foreign_schema(&schema)?,
        };
        for (name, _) in features.iter() {
            if schema.field_with_name(name).is_err() {
                return Err(Error::InvalidFeature(format!(
                    "feature '{name}' has no column in {} (its columns: {:?})",
                    path.display(),
                    schema.fields().iter().map(|f| f.name()).collect::<Vec<_>>()
                )));
            }
        }
        let mut groups = Vec::new();
        let mut row_counts = Vec::new();
        for (i, f) in files.iter().enumerate() {
            for (g, rg) in f.meta.metadata().row_groups().iter().enumerate() {
                groups.push((i, g));
                row_counts.push(rg.num_rows().max(0) as u64);
            }
        }
        let features = Arc::new(features);
        let decoder = RowDecoder::new(features.clone(), decode);
        Ok(ParquetRows {
            inner: Arc::new(Inner {
                core: RowsCore::new(
                    path,
                    features.clone(),
                    features.arrow_schema(),
                    decoder,
                    row_counts,
                ),
                files,
                groups,
                cache: Mutex::new(BatchLru::new(CACHE_BYTES)),
            }),
        })
    }

    /// The Parquet files read, in order.
    pub fn files(&self) -> Vec<PathBuf> {
        self.inner.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Rows `offsets` (sorted, distinct) of shard `g`, or all of them,
    /// adapted to the features' Arrow types.
    fn read_group(&self, g: usize, rows: Option<std::ops::Range<u64>>) -> Result<RecordBatch> {
        let (fi, rg) = self.inner.groups[g];
        let f = &self.inner.files[fi];
        let file = File::open(&f.path).map_err(|e| Error::io("open", &f.path, e))?;
        let total = self.inner.core.row_counts[g];
        let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(file, f.meta.clone())
            .with_row_groups(vec![rg])
            .with_batch_size(total.clamp(1, 1 << 16) as usize);
        if let Some(r) = rows {
            let r = r.start as usize..r.end as usize;
            b = b.with_row_selection(RowSelection::from_consecutive_ranges(
                std::iter::once(r),
                total as usize,
            ));
        }
        let reader = b.build().map_err(|e| bad(&f.path, e))?;
        let schema = reader.schema();
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(&f.path, e))?;
        let batch =
            arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| bad(&f.path, e))?;
        adapt_batch(
            &self.inner.core.features,
            &self.inner.core.schema,
            &f.path,
            &batch,
        )
    }

    /// The chunk holding `row`, and the row's place in it.
    fn row_chunk(&self, row: u64) -> Result<(RecordBatch, usize)> {
        let (g, local) = self.inner.core.locate(row);
        let c = local / CHUNK_ROWS;
        Ok((self.chunk(g, c)?, (local % CHUNK_ROWS) as usize))
    }

    fn chunk(&self, g: usize, c: u64) -> Result<RecordBatch> {
        let key = (g, c as usize);
        if let Some(b) = self.lock().get(key) {
            return Ok(b);
        }
        let total = self.inner.core.row_counts[g];
        let start = c * CHUNK_ROWS;
        let b = self.read_group(g, Some(start..(start + CHUNK_ROWS).min(total)))?;
        self.lock().insert(key, &b);
        Ok(b)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BatchLru> {
        self.inner.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Backend for ParquetRows {
    fn layout(&self) -> &'static str {
        LAYOUT_PARQUET
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let row = normalize_index(index, self.len())?;
        let (b, r) = self.row_chunk(row)?;
        Ok(b.slice(r, 1))
    }

    fn get(&self, index: i64) -> Result<Row> {
        let row = normalize_index(index, self.len())?;
        let (b, r) = self.row_chunk(row)?;
        self.inner.core.decoder.decode_row(&b, r)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        take_by_chunks(&self.inner.core, indices, CHUNK_ROWS, |keys| {
            keys.iter().map(|&(g, c)| self.chunk(g, c)).collect()
        })
    }

    fn gather_fixed(
        &self,
        indices: &[i64],
        slots: Option<&[usize]>,
        outs: &mut [crate::layouts::gather::FixedOut<'_>],
    ) -> Result<bool> {
        crate::layouts::backend::gather_by_chunks(
            &self.inner.core,
            indices,
            CHUNK_ROWS,
            |keys| keys.iter().map(|&(g, c)| self.chunk(g, c)).collect(),
            slots,
            outs,
        )
    }

    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch> {
        slice_from_pieces(
            self.len(),
            start,
            len,
            &self.schema(),
            &self.inner.core.dir,
            |row| self.row_chunk(row),
        )
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let this = self.clone();
        Ok(Box::new(
            order.into_iter().map(move |g| this.read_group(g, None)),
        ))
    }

    fn reopened(&self) -> Box<dyn Backend> {
        Box::new(ParquetRows {
            inner: Arc::new(Inner {
                core: self.inner.core.clone(),
                files: self
                    .inner
                    .files
                    .iter()
                    .map(|f| ParquetFile {
                        path: f.path.clone(),
                        meta: f.meta.clone(),
                    })
                    .collect(),
                groups: self.inner.groups.clone(),
                cache: Mutex::new(BatchLru::new(CACHE_BYTES)),
            }),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
