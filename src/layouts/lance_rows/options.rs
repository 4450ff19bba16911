//! Options of the `lance-rows` writer: the Lance file format version, rows
//! per data file and per batch, compression asked of Lance, and the encode
//! settings shared with the Arrow writer, each validated when set.

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::cache::pipeline::{checked_batch_size, DEFAULT_BATCH_SIZE};
use crate::error::{Error, Result};
use crate::features::image::PngCompression;
use crate::features::Features;
use crate::layouts::arrow_shards::format::Codec;

crate::util::named_enum! {
    /// The Lance file format version of the data files (`data_storage_version`).
    pub enum LanceStorageVersion("Lance data storage version") {
        /// The legacy (0.1) format.
        Legacy = "legacy" | "0.1",
        /// 2.0.
        V2_0 = "2.0",
        /// 2.1.
        V2_1 = "2.1",
        /// 2.2.
        V2_2 = "2.2",
        /// The library's current stable version.
        Stable = "stable",
    }
}

impl LanceStorageVersion {
    pub(super) fn to_lance(self) -> lance_file::version::LanceFileVersion {
        use lance_file::version::LanceFileVersion as V;
        match self {
            LanceStorageVersion::Legacy => V::Legacy,
            LanceStorageVersion::V2_0 => V::V2_0,
            LanceStorageVersion::V2_1 => V::V2_1,
            LanceStorageVersion::V2_2 => V::V2_2,
            LanceStorageVersion::Stable => V::Stable,
        }
    }
}

/// Options of [`write_lance_cache`](super::write::write_lance_cache):
/// private fields, validated when set.
///
/// Rows go to Lance one data file's worth (`max_rows_per_file`) at a time,
/// each committed as a Lance version; a build through
/// [`crate::load`] records each commit in its resume log, so a killed build
/// continues after its last committed file (see
/// [`prepare_resumable`](super::write::prepare_resumable)).
#[derive(Debug, Clone)]
pub struct LanceWriteOptions {
    pub(super) batch_size: NonZeroUsize,
    pub(super) max_rows_per_file: NonZeroUsize,
    pub(super) data_storage_version: Option<LanceStorageVersion>,
    pub(super) encode_threads: usize,
    pub(super) lineage: Option<serde_json::Value>,
    pub(super) progress: Option<Arc<AtomicU64>>,
    pub(super) png: PngCompression,
    pub(super) compression: Option<Codec>,
    pub(super) scalar_index: Vec<String>,
}

impl Default for LanceWriteOptions {
    fn default() -> Self {
        LanceWriteOptions {
            batch_size: DEFAULT_BATCH_SIZE,
            max_rows_per_file: NonZeroUsize::new(1024 * 1024).expect("positive"),
            data_storage_version: None,
            encode_threads: 0,
            lineage: None,
            progress: None,
            png: PngCompression::Fast,
            compression: None,
            scalar_index: Vec::new(),
        }
    }
}

impl LanceWriteOptions {
    /// Examples per record batch (default 1000).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_batch_size(mut self, n: usize) -> Result<Self> {
        self.batch_size = checked_batch_size(n)?;
        Ok(self)
    }

    /// Rows per Lance data file: more fragments for more parallel reads
    /// (default 1,048,576, pylance's).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_max_rows_per_file(mut self, n: usize) -> Result<Self> {
        self.max_rows_per_file = NonZeroUsize::new(n)
            .ok_or_else(|| Error::InvalidArgument("max_rows_per_file must be at least 1".into()))?;
        Ok(self)
    }

    /// The Lance data storage version (default: the library's).
    pub fn with_data_storage_version(mut self, v: LanceStorageVersion) -> Self {
        self.data_storage_version = Some(v);
        self
    }

    /// Asks Lance to compress every column's data with `codec` (zstd at
    /// its level, 1 to 22; Lance's default, 3, when `None`), through the
    /// field metadata Lance reads (`lance-encoding:compression`,
    /// `lance-encoding:compression-level`). Lance applies it to the blocks
    /// its encodings compress (with the 2.1 file format and later), and
    /// chooses per block when this is not set. Recorded in the metadata.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zstd level outside 1..=22.
    pub fn try_with_codec(mut self, codec: Codec) -> Result<Self> {
        if let Codec::Zstd { level: Some(l) } = codec {
            if !(1..=22).contains(&l) {
                return Err(Error::InvalidArgument(format!(
                    "zstd level must be 1 to 22, got {l}"
                )));
            }
        }
        self.compression = Some(codec);
        Ok(self)
    }

    /// Columns given a BTree scalar index once the rows are written, so a
    /// filter on them is answered by the index and Lance's scan reads only
    /// the rows it keeps (pylance's `create_scalar_index`). Each must be a
    /// `Value` (not binary) or `ClassLabel` column: checked against the
    /// features when the write starts.
    pub fn with_scalar_index(mut self, columns: Vec<String>) -> Self {
        self.scalar_index = columns;
        self
    }

    /// The columns given a scalar index.
    pub fn scalar_index(&self) -> &[String] {
        &self.scalar_index
    }

    /// The compression asked of Lance, if any.
    pub fn codec(&self) -> Option<Codec> {
        self.compression
    }

    /// The schema handed to Lance: the features' schema with the
    /// compression asked for in every top-level field's metadata.
    pub(super) fn lance_schema(&self, features: &Features) -> arrow_schema::SchemaRef {
        let schema = features.arrow_schema();
        let Some(codec) = self.compression else {
            return schema;
        };
        let level = codec.level();
        let fields: Vec<arrow_schema::Field> = schema
            .fields()
            .iter()
            .map(|f| {
                let mut m = f.metadata().clone();
                m.insert(
                    "lance-encoding:compression".into(),
                    codec.compression().name().to_string(),
                );
                if let Some(l) = level {
                    m.insert("lance-encoding:compression-level".into(), l.to_string());
                }
                f.as_ref().clone().with_metadata(m)
            })
            .collect();
        Arc::new(arrow_schema::Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        ))
    }

    /// Encode threads (0, the default: one per core).
    pub fn with_encode_threads(mut self, n: usize) -> Self {
        self.encode_threads = n;
        self
    }

    /// How PNG images given as pixels are deflated (see
    /// [`ArrowWriteOptions::with_png_compression`](crate::ArrowWriteOptions::with_png_compression)).
    pub fn with_png_compression(mut self, png: PngCompression) -> Self {
        self.png = png;
        self
    }

    /// Provenance recorded under `lineage`.
    pub fn with_lineage(mut self, lineage: serde_json::Value) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// A counter the writer adds each batch's rows to once the batch is
    /// handed to Lance (see [`ArrowWriteOptions::with_progress`](crate::ArrowWriteOptions::with_progress)).
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.progress = Some(counter);
        self
    }

    /// Examples per record batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.get()
    }

    /// Rows per Lance data file.
    pub fn max_rows_per_file(&self) -> usize {
        self.max_rows_per_file.get()
    }

    /// The data storage version set, if any.
    pub fn data_storage_version(&self) -> Option<LanceStorageVersion> {
        self.data_storage_version
    }

    /// Encode threads (0: one per core).
    pub fn encode_threads(&self) -> usize {
        self.encode_threads
    }

    /// How PNG images given as pixels are deflated.
    pub fn png_compression(&self) -> PngCompression {
        self.png
    }
}
