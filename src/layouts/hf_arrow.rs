//! Hugging Face `datasets` directories written by `save_to_disk`, read as a
//! dataset, read-only and without conversion: a `Dataset` directory
//! (`state.json`, `dataset_info.json`, `data-*.arrow`) or a `DatasetDict`
//! one (`dataset_dict.json` naming a directory per split).
//!
//! The data files are Arrow IPC *streams*, mapped and read in place as
//! `datasets` reads them. Opening walks each stream's message headers only
//! (flatbuffers verified, lengths checked against the file), so a large
//! directory opens in the time of its headers; a record batch is decoded
//! when first read, zero-copy over the map, and kept adapted to the
//! features' Arrow types in a byte-bounded LRU. Each record batch is a
//! shard, as a Parquet row group is ([`super::parquet`]): `datasets`
//! writes 1,000 rows a batch by default, a fine grain for shard shuffling.
//!
//! A directory is data from elsewhere, so it is read as untrusted: the file
//! names in `state.json` and the split names in `dataset_dict.json` must be
//! plain names whose files resolve inside the directory; every schema field
//! and every batch's buffer and field lengths are checked at open, as the
//! cache format's shards are ([`crate::layouts::arrow_shards::ipc`]), before
//! arrow-ipc (which panics on bad ranges) sees them; and image cells that
//! name a file instead of holding its bytes are refused rather than
//! followed.

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::MessageHeader;
use arrow_schema::{Schema, SchemaRef};
use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::foreign::{adapt_batch, from_hugging_face, of_foreign_schema};
use crate::features::Features;
use crate::layouts::arrow_shards::ipc::{block_rows_meta, check_fb_field};
use crate::layouts::arrow_shards::read::lru::BatchLru;
use crate::layouts::backend::{
    normalize_index, shard_order, slice_from_pieces, take_by_chunks, Backend, BatchIter,
    IterOptions, RowsCore,
};
use crate::value::Row;

/// The layout name a `save_to_disk` directory reports.
pub const LAYOUT_HF: &str = "hf-datasets";
/// A `DatasetDict` directory's list of splits.
pub const DICT_FILE: &str = "dataset_dict.json";
/// A `Dataset` directory's list of data files.
pub const STATE_FILE: &str = "state.json";
/// A `Dataset` directory's features.
pub const INFO_FILE: &str = "dataset_info.json";

/// An Arrow IPC stream's end: a continuation marker and a zero length.
const END_OF_STREAM: [u8; 8] = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];

/// Bytes of adapted batches kept for random access.
const CACHE_BYTES: usize = 256 << 20;

#[derive(Debug)]
struct StreamFile {
    path: PathBuf,
    bytes: Buffer,
    /// The schema message's bytes.
    schema: Range<usize>,
}

#[derive(Debug)]
struct Inner {
    core: RowsCore,
    files: Vec<StreamFile>,
    /// Shard `i` is the record batch message at `shards[i].1` of file `shards[i].0`.
    shards: Vec<(usize, Range<usize>)>,
    /// The data files' own schema (before adaptation).
    file_schema: SchemaRef,
    cache: Mutex<BatchLru>,
}

/// A `save_to_disk` directory (one split) as a read-only dataset backend.
#[derive(Debug, Clone)]
pub struct HfArrow {
    inner: Arc<Inner>,
}

fn not_hf(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "{} is not a directory written by Hugging Face datasets' save_to_disk: {why}",
        path.display()
    ))
}

fn read_json(path: &Path) -> Result<J> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::corrupt(path, format!("not JSON: {e}")))
}

/// A name from the directory's JSON as a plain file or folder name in
/// `dir`, resolved inside it.
fn inside(dir: &Path, name: &str, what: &str, listed_in: &Path) -> Result<PathBuf> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !Path::new(name).is_absolute();
    if !plain {
        return Err(Error::corrupt(
            listed_in,
            format!("{what} '{name}' is not a plain name inside the directory; it is not read"),
        ));
    }
    let p = dir.join(name);
    let root = std::fs::canonicalize(dir).map_err(|e| Error::io("resolve", dir, e))?;
    let real = std::fs::canonicalize(&p).map_err(|e| Error::io("open", &p, e))?;
    if !real.starts_with(&root) {
        return Err(Error::corrupt(
            &p,
            format!(
                "{what} '{name}' resolves to {}, outside {}; it is not read",
                real.display(),
                root.display()
            ),
        ));
    }
    Ok(p)
}

/// The splits of a `DatasetDict` directory, or None for a `Dataset` one.
///
/// # Errors
/// [`Error::InvalidArgument`] when `path` is neither; [`Error::CorruptShard`]
/// for a garbled `dataset_dict.json`.
pub fn hf_splits(path: &Path) -> Result<Option<Vec<String>>> {
    let dict = path.join(DICT_FILE);
    if !dict.is_file() {
        if path.join(STATE_FILE).is_file() {
            return Ok(None);
        }
        return Err(not_hf(
            path,
            format!("it has neither {DICT_FILE} nor {STATE_FILE}"),
        ));
    }
    let j = read_json(&dict)?;
    let splits = j
        .get("splits")
        .and_then(J::as_array)
        .ok_or_else(|| Error::corrupt(&dict, "no 'splits' list"))?;
    splits
        .iter()
        .map(|s| {
            s.as_str()
                .map(String::from)
                .ok_or_else(|| Error::corrupt(&dict, "a split name is not a string"))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The `Dataset` directory of `split` in the directory at `path`: the
/// directory itself for a `Dataset` one (no split given); for a
/// `DatasetDict`, the split given, else its only split or `train`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the splits there are.
pub fn split_dir(path: &Path, split: Option<&str>) -> Result<PathBuf> {
    let Some(splits) = hf_splits(path)? else {
        return match split {
            None => Ok(path.to_path_buf()),
            Some(s) => Err(Error::InvalidArgument(format!(
                "{} is one dataset, not a DatasetDict of splits: open it without split='{s}'",
                path.display()
            ))),
        };
    };
    let pick = match split {
        Some(s) => splits.iter().find(|x| *x == s),
        None if splits.len() == 1 => splits.first(),
        None => splits.iter().find(|x| *x == "train"),
    };
    match pick {
        Some(s) => inside(path, s, "split", &path.join(DICT_FILE)),
        None => Err(Error::InvalidArgument(format!(
            "{} has splits {splits:?}: {}",
            path.display(),
            match split {
                Some(s) => format!("'{s}' is not one of them"),
                None => "name the one to open".into(),
            }
        ))),
    }
}

/// The messages of an Arrow IPC stream: the schema's, and each record
/// batch's with its row count.
struct Messages {
    schema: Range<usize>,
    batches: Vec<(Range<usize>, u64)>,
}

/// The messages of the stream `b`; only headers are read.
fn scan_stream(path: &Path, b: &[u8]) -> Result<Messages> {
    let bad = |why: String| Error::corrupt(path, format!("Arrow IPC stream: {why}"));
    let word = |at: usize| -> Option<u32> {
        b.get(at..at + 4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    let mut schema = None;
    let mut parsed: Option<Schema> = None;
    let mut batches = Vec::new();
    let mut at = 0usize;
    while at < b.len() {
        let start = at;
        let mut len = word(at).ok_or_else(|| bad(format!("truncated at byte {at}")))?;
        at += 4;
        if len == u32::MAX {
            len = word(at).ok_or_else(|| bad(format!("truncated at byte {at}")))?;
            at += 4;
        }
        if len == 0 {
            break;
        }
        let meta_end = at
            .checked_add(len as usize)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| bad(format!("a message at byte {start} runs past the end")))?;
        let msg = arrow_ipc::root_as_message(&b[at..meta_end])
            .map_err(|e| bad(format!("the message at byte {start}: {e}")))?;
        let body = usize::try_from(msg.bodyLength())
            .map_err(|_| bad(format!("the message at byte {start} has a negative body")))?;
        let end = meta_end
            .checked_add(body)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| {
                bad(format!(
                    "the body of the message at byte {start} runs past the end"
                ))
            })?;
        match (msg.header_type(), &parsed) {
            (MessageHeader::Schema, None) => {
                let fields = msg
                    .header_as_schema()
                    .and_then(|s| s.fields())
                    .ok_or_else(|| bad("a schema without fields".into()))?;
                for f in fields.iter() {
                    check_fb_field(f, 0).map_err(|e| bad(format!("schema: {e}")))?;
                }
                schema = Some(start..meta_end);
                let ipc = msg.header_as_schema().expect("checked above");
                parsed = Some(
                    catch_unwind(AssertUnwindSafe(|| arrow_ipc::convert::fb_to_schema(ipc)))
                        .map_err(|_| bad("an unreadable schema".into()))?,
                );
            }
            (MessageHeader::RecordBatch, Some(s)) => {
                // Every buffer and field length checked against the body
                // and the schema before arrow-ipc slices them.
                let (rows, _) = block_rows_meta(path, &b[start..meta_end], body, s)?;
                batches.push((start..end, rows));
            }
            (MessageHeader::DictionaryBatch, _) => {
                return Err(bad(
                    "dictionary-encoded columns are not read (save the dataset after casting them to plain types)".into(),
                ))
            }
            (t, _) => return Err(bad(format!("unexpected {t:?} message at byte {start}"))),
        }
        at = end;
    }
    let schema = schema.ok_or_else(|| bad("no schema message".into()))?;
    Ok(Messages { schema, batches })
}

/// Decodes `messages` (a schema's, then at most one batch's) of `file`,
/// a decoder panic on a crafted stream becoming an error.
fn decode(
    file: &StreamFile,
    messages: &[&Range<usize>],
) -> Result<(SchemaRef, Option<RecordBatch>)> {
    let run = || -> std::result::Result<_, arrow_schema::ArrowError> {
        let mut d = StreamDecoder::new();
        let mut out = None;
        for r in messages {
            let mut buf = file.bytes.slice_with_length(r.start, r.len());
            if let Some(b) = d.decode(&mut buf)? {
                out = Some(b);
            }
        }
        // The decoder takes a message with no body (the schema's) only
        // when more bytes follow: an end-of-stream marker.
        d.decode(&mut Buffer::from(END_OF_STREAM.to_vec()))?;
        let schema = d
            .schema()
            .ok_or_else(|| arrow_schema::ArrowError::IpcError("no schema".into()))?;
        Ok((schema, out))
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(x)) => Ok(x),
        Ok(Err(e)) => Err(Error::corrupt(&file.path, format!("Arrow IPC stream: {e}"))),
        Err(_) => Err(Error::corrupt(
            &file.path,
            "Arrow IPC stream: a message the decoder cannot read",
        )),
    }
}

fn same_columns(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

impl HfArrow {
    /// Opens `split` of the `save_to_disk` directory at `path` (see
    /// [`split_dir`] for the default), with `features`, or those
    /// `dataset_info.json` or the files' schema give, decoding cells with
    /// `decode`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a directory `datasets` did not write
    /// or an unknown split; [`Error::CorruptShard`] naming a file that is
    /// garbled, lies outside the directory, or whose columns differ from
    /// the first file's; [`Error::InvalidFeature`] for a feature shardset
    /// does not read, or a feature with no column.
    pub fn open(
        path: &Path,
        split: Option<&str>,
        features: Option<Features>,
        decode_opts: DecodeOptions,
    ) -> Result<HfArrow> {
        let dir = split_dir(path, split)?;
        let state_path = dir.join(STATE_FILE);
        let state = read_json(&state_path)?;
        let names = state
            .get("_data_files")
            .and_then(J::as_array)
            .ok_or_else(|| Error::corrupt(&state_path, "no '_data_files' list"))?;
        let mut files = Vec::new();
        let mut shards = Vec::new();
        let mut row_counts = Vec::new();
        for n in names {
            let name = n
                .get("filename")
                .and_then(J::as_str)
                .ok_or_else(|| Error::corrupt(&state_path, "a data file without 'filename'"))?;
            let p = inside(&dir, name, "data file", &state_path)?;
            let storage = crate::storage::storage_for(&p);
            let bytes = Buffer::from(storage.map(&p)?);
            let Messages { schema, batches } = scan_stream(&p, &bytes)?;
            let fi = files.len();
            for (r, rows) in batches {
                shards.push((fi, r));
                row_counts.push(rows);
            }
            files.push(StreamFile {
                path: p,
                bytes,
                schema,
            });
        }
        let Some(first) = files.first() else {
            return Err(Error::corrupt(&state_path, "'_data_files' is empty"));
        };
        let file_schema = decode(first, &[&first.schema])?.0;
        for f in &files[1..] {
            if !same_columns(&decode(f, &[&f.schema])?.0, &file_schema) {
                return Err(Error::corrupt(
                    &f.path,
                    format!(
                        "its columns differ from those of {}: a split is one schema",
                        first.path.display()
                    ),
                ));
            }
        }
        let features = match features {
            Some(f) => f,
            None => {
                let info = dir.join(INFO_FILE);
                match info
                    .is_file()
                    .then(|| read_json(&info))
                    .transpose()?
                    .and_then(|j| j.get("features").cloned())
                {
                    Some(f) => from_hugging_face(&f)?,
                    None => of_foreign_schema(&file_schema)?,
                }
            }
        };
        for (name, _) in features.iter() {
            if file_schema.field_with_name(name).is_err() {
                return Err(Error::InvalidFeature(format!(
                    "feature '{name}' has no column in {} (its columns: {:?})",
                    dir.display(),
                    file_schema
                        .fields()
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                )));
            }
        }
        let features = Arc::new(features);
        let decoder = RowDecoder::new(features.clone(), decode_opts);
        Ok(HfArrow {
            inner: Arc::new(Inner {
                core: RowsCore::new(
                    &dir,
                    features.clone(),
                    features.arrow_schema(),
                    decoder,
                    row_counts,
                ),
                files,
                shards,
                file_schema,
                cache: Mutex::new(BatchLru::new(CACHE_BYTES)),
            }),
        })
    }

    /// The data files read, in order.
    pub fn files(&self) -> Vec<PathBuf> {
        self.inner.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Shard `s` (one record batch), adapted to the features' Arrow types.
    fn shard(&self, s: usize) -> Result<RecordBatch> {
        if let Some(b) = self.lock().get((s, 0)) {
            return Ok(b);
        }
        let (fi, r) = &self.inner.shards[s];
        let f = &self.inner.files[*fi];
        let (schema, batch) = decode(f, &[&f.schema, r])?;
        let batch =
            batch.ok_or_else(|| Error::corrupt(&f.path, "a batch message held no batch"))?;
        if !same_columns(&schema, &self.inner.file_schema)
            || batch.num_rows() as u64 != self.inner.core.row_counts[s]
        {
            return Err(Error::corrupt(
                &f.path,
                "a record batch differs from what its header and the first file's schema say",
            ));
        }
        let b = adapt_batch(
            &self.inner.core.features,
            &self.inner.core.schema,
            &f.path,
            &batch,
        )?;
        self.lock().insert((s, 0), &b);
        Ok(b)
    }

    fn row_piece(&self, row: u64) -> Result<(RecordBatch, usize)> {
        let (s, local) = self.inner.core.locate(row);
        Ok((self.shard(s)?, local as usize))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BatchLru> {
        self.inner.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Backend for HfArrow {
    fn layout(&self) -> &'static str {
        LAYOUT_HF
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let (b, r) = self.row_piece(normalize_index(index, self.len())?)?;
        Ok(b.slice(r, 1))
    }

    fn get(&self, index: i64) -> Result<Row> {
        let (b, r) = self.row_piece(normalize_index(index, self.len())?)?;
        self.inner.core.decoder.decode_row(&b, r)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        take_by_chunks(&self.inner.core, indices, u64::MAX, |keys| {
            keys.iter().map(|&(s, _)| self.shard(s)).collect()
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
            u64::MAX,
            |keys| keys.iter().map(|&(s, _)| self.shard(s)).collect(),
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
            |row| self.row_piece(row),
        )
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let this = self.clone();
        Ok(Box::new(order.into_iter().map(move |s| this.shard(s))))
    }

    fn reopened(&self) -> Box<dyn Backend> {
        let inner = &self.inner;
        Box::new(HfArrow {
            inner: Arc::new(Inner {
                core: inner.core.clone(),
                files: inner
                    .files
                    .iter()
                    .map(|f| StreamFile {
                        path: f.path.clone(),
                        bytes: f.bytes.clone(),
                        schema: f.schema.clone(),
                    })
                    .collect(),
                shards: inner.shards.clone(),
                file_schema: inner.file_schema.clone(),
                cache: Mutex::new(BatchLru::new(CACHE_BYTES)),
            }),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
