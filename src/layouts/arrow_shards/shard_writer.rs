//! `ShardWriter`: record batches into `shard-NNNNN.arrow` IPC files, rotated
//! by the reference's rule (see [`super::write`]), each hashed as it is
//! written, fsynced and committed to the build manifest when it closes.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::writer::{FileWriter, IpcWriteOptions};
use arrow_ipc::CompressionType;
use arrow_schema::SchemaRef;
use xxhash_rust::xxh64::Xxh64;

use crate::cache::build::ResumeLog;
use crate::error::{Error, Result};
use crate::layouts::arrow_shards::dedup::{eligible_columns, encode_refs, refs_path, Deduper};
use crate::layouts::arrow_shards::format::{
    pyarrow_nbytes, shard_filename, Compression, ShardRecord, BUILD_ID_FOOTER_KEY,
};
use crate::layouts::arrow_shards::manifest::ManifestShard;
use crate::storage::{StorageRef, WriteFile};

/// A writer that hashes (xxh64) and counts what goes to the file.
struct HashingFile {
    file: Box<dyn WriteFile>,
    hasher: Xxh64,
    bytes: u64,
}

impl Write for HashingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

struct OpenShard {
    writer: FileWriter<BufWriter<HashingFile>>,
    path: PathBuf,
    filename: String,
    rows: u64,
    nbytes: u64,
}

pub use crate::cache::build::UnitEnds;

/// Writes record batches into rotated shards in a directory.
pub struct ShardWriter {
    storage: StorageRef,
    dir: PathBuf,
    schema: SchemaRef,
    options: IpcWriteOptions,
    batch_size: usize,
    budget: Option<u64>,
    build_id: String,
    current: Option<OpenShard>,
    done: Vec<ShardRecord>,
    manifest: Option<ResumeLog<ManifestShard>>,
    unit_ends: Option<UnitEnds>,
    /// Row checksums of the open shard, and its column checksums per
    /// record batch, when per-record checksums are on.
    row_sums: Option<(Vec<u64>, Vec<u64>)>,
    /// The file name of the shard at a position (`shard-NNNNN.arrow`
    /// unless an edit names its new shards).
    naming: Box<dyn Fn(usize) -> String + Send>,
    /// Large repeated cells stored once, when on.
    dedup: Option<Deduper>,
    /// Rows of the shards done.
    rows_done: u64,
}

impl ShardWriter {
    /// A writer into `dir` (which must exist) on `storage`.
    ///
    /// # Errors
    /// [`Error::Arrow`] if the compression codec is unavailable.
    pub fn new(
        storage: StorageRef,
        dir: &Path,
        schema: SchemaRef,
        batch_size: usize,
        budget: Option<u64>,
        compression: Compression,
        build_id: String,
    ) -> Result<Self> {
        let codec = match compression {
            Compression::None => None,
            Compression::Lz4 => Some(CompressionType::LZ4_FRAME),
            Compression::Zstd => Some(CompressionType::ZSTD),
        };
        let options = IpcWriteOptions::default()
            .try_with_compression(codec)
            .map_err(|e| Error::arrow(None, e))?;
        Ok(ShardWriter {
            storage,
            dir: dir.to_path_buf(),
            schema,
            options,
            batch_size,
            budget,
            build_id,
            current: None,
            done: Vec::new(),
            manifest: None,
            unit_ends: None,
            row_sums: None,
            naming: Box::new(shard_filename),
            dedup: None,
            rows_done: 0,
        })
    }

    /// Stores each binary cell of at least `threshold` bytes whose bytes
    /// were written before as a ref to its first occurrence (see
    /// [`super::dedup`]). A resumed build dedups against the rows it writes
    /// itself, not those of the killed build it continues.
    pub fn with_dedup(mut self, threshold: u64) -> Self {
        self.dedup = Some(Deduper::new(threshold, eligible_columns(&self.schema)));
        self
    }

    /// Cells deduped and the bytes they did not take, so far (`None` when
    /// dedup is off).
    pub fn dedup_totals(&self) -> Option<(u64, u64)> {
        self.dedup.as_ref().map(|d| (d.cells, d.bytes_saved))
    }

    /// Names the shard at each position (counted from the shards already
    /// done) with `naming` instead of `shard-NNNNN.arrow`.
    pub fn with_naming(mut self, naming: impl Fn(usize) -> String + Send + 'static) -> Self {
        self.naming = Box::new(naming);
        self
    }

    /// Keeps one checksum per row in `_row_xxh64/` beside the shards.
    pub fn with_record_checksums(mut self, yes: bool) -> Self {
        self.row_sums = yes.then(|| (Vec::new(), Vec::new()));
        self
    }

    /// Continues after shards already written (a resumed build), committing
    /// each new shard to `manifest`.
    pub(crate) fn with_manifest(
        mut self,
        done: Vec<ShardRecord>,
        manifest: ResumeLog<ManifestShard>,
        unit_ends: Option<UnitEnds>,
    ) -> Self {
        self.rows_done = done.iter().map(|r| r.num_rows).sum();
        self.done = done;
        self.manifest = Some(manifest);
        self.unit_ends = unit_ends;
        self
    }

    fn open_next(&mut self) -> Result<OpenShard> {
        let filename = (self.naming)(self.done.len());
        let path = self.dir.join(&filename);
        let file = self.storage.create(&path)?;
        let hf = HashingFile {
            file,
            hasher: Xxh64::new(0),
            bytes: 0,
        };
        let mut writer = FileWriter::try_new_with_options(
            BufWriter::with_capacity(1 << 20, hf),
            &self.schema,
            self.options.clone(),
        )
        .map_err(|e| Error::arrow(Some(&path), e))?;
        writer.write_metadata(BUILD_ID_FOOTER_KEY, self.build_id.clone());
        Ok(OpenShard {
            writer,
            path,
            filename,
            rows: 0,
            nbytes: 0,
        })
    }

    /// Appends a batch, rotating by the reference's rule.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::Arrow`] naming the shard.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let mut shard = match self.current.take() {
            Some(s) => s,
            None => self.open_next()?,
        };
        let deduped;
        let batch = match &mut self.dedup {
            Some(d) => {
                deduped = d.apply(batch, self.rows_done + shard.rows, shard.rows)?;
                &deduped
            }
            None => batch,
        };
        shard
            .writer
            .write(batch)
            .map_err(|e| Error::arrow(Some(&shard.path), e))?;
        shard.rows += batch.num_rows() as u64;
        shard.nbytes += pyarrow_nbytes(batch);
        if let Some((rows, cols)) = &mut self.row_sums {
            rows.extend(crate::cache::rowsum::row_hashes(batch));
            cols.extend(crate::cache::rowsum::column_hashes(batch));
        }
        let full = batch.num_rows() == self.batch_size;
        if full && self.budget.is_some_and(|b| shard.nbytes >= b) {
            self.close(shard)?;
        } else {
            self.current = Some(shard);
        }
        Ok(())
    }

    fn close(&mut self, mut shard: OpenShard) -> Result<()> {
        shard
            .writer
            .finish()
            .map_err(|e| Error::arrow(Some(&shard.path), e))?;
        let buf = shard
            .writer
            .into_inner()
            .map_err(|e| Error::arrow(Some(&shard.path), e))?;
        let hf = buf
            .into_inner()
            .map_err(|e| Error::io("write shard", &shard.path, e.into_error()))?;
        // The shard's bytes are durable before its manifest line exists.
        hf.file.finish()?;
        let mut sidecars_xxh64 = None;
        if let Some((rows, cols)) = &mut self.row_sums {
            sidecars_xxh64 = Some(crate::cache::rowsum::sidecars_digest(rows, cols));
            let storage = self.storage.as_ref();
            crate::cache::rowsum::write_sidecar(storage, &self.dir, &shard.filename, rows)?;
            let path = crate::cache::rowsum::column_sidecar(&self.dir, &shard.filename);
            crate::cache::rowsum::write_sums(storage, &path, cols)?;
            rows.clear();
            cols.clear();
        }
        let mut refs = 0;
        if let Some(d) = &mut self.dedup {
            if !d.shard_refs.is_empty() {
                let path = refs_path(&self.dir, &shard.filename);
                self.storage
                    .create_dir_all(path.parent().expect("in _dedup"))?;
                self.storage
                    .write_atomic(&path, &encode_refs(&d.shard_refs))?;
                refs = d.shard_refs.len() as u64;
                d.shard_refs.clear();
            }
        }
        let record = ShardRecord {
            filename: shard.filename,
            num_rows: shard.rows,
            num_bytes: hf.bytes,
            xxh64: format!("{:016x}", hf.hasher.digest()),
            refs,
        };
        self.rows_done += record.num_rows;
        if let Some(m) = &mut self.manifest {
            let committed: u64 =
                self.done.iter().map(|r| r.num_rows).sum::<u64>() + record.num_rows;
            let ends = self
                .unit_ends
                .as_ref()
                .map(|u| crate::cache::build::ends_up_to(u, committed))
                .unwrap_or_default();
            m.append(&ManifestShard {
                filename: record.filename.clone(),
                num_rows: record.num_rows,
                num_bytes: record.num_bytes,
                xxh64: record.xxh64.clone(),
                refs: record.refs,
                unit_ends: ends,
                sidecars_xxh64,
            })?;
        }
        self.done.push(record);
        Ok(())
    }

    /// Closes the open shard and returns every shard written.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::Arrow`] naming the shard.
    pub fn finish(mut self) -> Result<Vec<ShardRecord>> {
        if let Some(s) = self.current.take() {
            self.close(s)?;
        }
        Ok(self.done)
    }
}
