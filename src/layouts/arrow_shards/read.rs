//! The `arrow-shards` backend: memory-mapped Arrow IPC files.
//!
//! A shard is mapped on first use and its footer parsed; each record batch is
//! decoded on first use. Uncompressed batches are zero-copy views into the
//! map and are kept; for compressed shards only the batch holding the
//! requested rows is decompressed (the reference decompresses the whole
//! shard before the first row), and decompressed batches are kept in a
//! least-recently-used cache bounded in bytes
//! ([`DEFAULT_DECOMPRESSED_CACHE_BYTES`], [`ArrowShards::with_cache_bytes`]),
//! so reading a compressed cache of any size holds at most that much. Every length and offset read from a file is checked before
//! use, so a truncated or corrupt shard is an error naming the file, never a
//! panic.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::{read_footer_length, FileDecoder};
use arrow_ipc::{Block, MetadataVersion};
use arrow_schema::{Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::Features;
use crate::layouts::arrow_shards::format::BUILD_ID_FOOTER_KEY;
use crate::layouts::backend::{
    normalize_index, shard_order, Backend, BatchIter, IterOptions, RowsCore,
};
use crate::value::Row;

const MAGIC: &[u8; 6] = b"ARROW1";

/// Bytes of decompressed record batches an [`ArrowShards`] keeps by default
/// (compressed shards only; uncompressed batches are views into the map).
pub const DEFAULT_DECOMPRESSED_CACHE_BYTES: usize = 256 << 20;

/// Decompressed record batches by (shard, batch), least recently used
/// evicted first, their Arrow memory sizes summing to at most `budget`.
#[derive(Debug)]
struct BatchLru {
    budget: usize,
    used: usize,
    tick: u64,
    map: HashMap<(usize, usize), (RecordBatch, usize, u64)>,
}

impl BatchLru {
    fn new(budget: usize) -> Self {
        BatchLru {
            budget,
            used: 0,
            tick: 0,
            map: HashMap::new(),
        }
    }

    fn get(&mut self, key: (usize, usize)) -> Option<RecordBatch> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&key).map(|(b, _, t)| {
            *t = tick;
            b.clone()
        })
    }

    /// A new budget; batches are evicted until what is kept fits it.
    fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.evict_to(budget);
    }

    /// Evicts the least recently used batches until at most `limit` bytes remain.
    fn evict_to(&mut self, limit: usize) {
        while self.used > limit {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, _, t))| *t)
                .map(|(k, _)| *k)
                .expect("used > 0 means an entry");
            let (_, freed, _) = self.map.remove(&oldest).expect("present");
            self.used -= freed;
        }
    }

    /// Keeps `batch` unless it alone exceeds the budget, evicting the least
    /// recently used batches to make room.
    fn insert(&mut self, key: (usize, usize), batch: &RecordBatch) {
        let size = batch.get_array_memory_size();
        if size > self.budget || self.map.contains_key(&key) {
            return;
        }
        self.evict_to(self.budget - size);
        self.tick += 1;
        self.used += size;
        self.map.insert(key, (batch.clone(), size, self.tick));
    }
}

/// A memory-mapped `arrow-shards` cache.
#[derive(Debug, Clone)]
pub struct ArrowShards {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    core: RowsCore,
    build_id: Option<String>,
    shards: Vec<ShardSlot>,
    /// Decompressed batches of compressed shards, bounded in bytes.
    lru: Mutex<BatchLru>,
}

#[derive(Debug)]
struct ShardSlot {
    path: PathBuf,
    rows: u64,
    data: OnceLock<Arc<ShardData>>,
}

struct ShardData {
    path: PathBuf,
    buf: Buffer,
    decoder: FileDecoder,
    blocks: Vec<Block>,
    /// `batch_starts[j]` = first shard-local row of batch j; last = shard rows.
    batch_starts: Vec<u64>,
    /// Decoded batches of an uncompressed shard (views into `buf`); unused
    /// for compressed shards, whose batches go through the backend's LRU.
    batches: Vec<OnceLock<RecordBatch>>,
    /// True when the shard's batches are compressed (decoding allocates).
    compressed: bool,
    /// This shard's position in the cache (the LRU's key).
    index: usize,
    schema: Schema,
}

impl std::fmt::Debug for ShardData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardData")
            .field("path", &self.path)
            .field("bytes", &self.buf.len())
            .field("batches", &self.blocks.len())
            .finish()
    }
}

/// The parts of a shard's footer needed before any batch is read.
pub(crate) struct Footer {
    pub(crate) schema: Schema,
    pub(crate) version: MetadataVersion,
    pub(crate) blocks: Vec<Block>,
    pub(crate) custom: Vec<(String, String)>,
}

fn map_file(path: &Path) -> Result<Buffer> {
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::MissingShard {
            path: path.to_path_buf(),
        },
        _ => Error::io("open shard", path, e),
    })?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat shard", path, e))?
        .len();
    if len < 18 {
        return Err(Error::corrupt(
            path,
            format!("{len} bytes is too short for an Arrow IPC file"),
        ));
    }
    // SAFETY: the map is read-only and shards are immutable once published
    // (a rebuild writes new files in a new directory and renames). A file
    // truncated underneath the map by a third party could fault; that is the
    // standard caveat of every memory-mapped reader (pyarrow included).
    let mmap =
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("mmap shard", path, e))?;
    let ptr = NonNull::new(mmap.as_ptr() as *mut u8)
        .ok_or_else(|| Error::corrupt(path, "empty mapping"))?;
    let len = mmap.len();
    // SAFETY: ptr/len describe the mapping, which the Arc'd owner keeps alive.
    Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(mmap)) })
}

/// Checks a footer field before arrow-ipc converts it (which panics on
/// unknown types, odd widths and missing parts): only the types the cache
/// format uses are accepted.
fn check_fb_field(f: arrow_ipc::Field<'_>, depth: usize) -> std::result::Result<(), String> {
    use arrow_ipc::Type as T;
    if depth > 32 {
        return Err("fields nested too deeply".into());
    }
    if f.name().is_none() {
        return Err("a field has no name".into());
    }
    if f.dictionary().is_some() {
        return Err("dictionary-encoded fields are not part of the cache format".into());
    }
    let nchild = f.children().map_or(0, |c| c.len());
    match f.type_type() {
        T::Bool | T::Binary | T::LargeBinary | T::Utf8 | T::LargeUtf8 => {}
        T::Int => {
            let i = f.type_as_int().ok_or("an Int field has no parameters")?;
            if ![8, 16, 32, 64].contains(&i.bitWidth()) {
                return Err(format!("an Int field has bit width {}", i.bitWidth()));
            }
        }
        T::FloatingPoint => {
            let p = f
                .type_as_floating_point()
                .ok_or("a float field has no parameters")?;
            if !matches!(
                p.precision(),
                arrow_ipc::Precision::HALF
                    | arrow_ipc::Precision::SINGLE
                    | arrow_ipc::Precision::DOUBLE
            ) {
                return Err("a float field has an unknown precision".into());
            }
        }
        T::List if nchild == 1 => {}
        T::Struct_ => {}
        t => {
            return Err(format!(
                "type {t:?} (with {nchild} children) is not part of the cache format"
            ))
        }
    }
    if let Some(children) = f.children() {
        for c in children.iter() {
            check_fb_field(c, depth + 1)?;
        }
    }
    Ok(())
}

pub(crate) fn read_footer(path: &Path, buf: &[u8]) -> Result<Footer> {
    let n = buf.len();
    if &buf[..6] != MAGIC {
        return Err(Error::corrupt(
            path,
            "does not start with the Arrow IPC magic",
        ));
    }
    let tail: [u8; 10] = buf[n - 10..].try_into().expect("10 bytes");
    let footer_len = read_footer_length(tail).map_err(|e| {
        Error::corrupt(
            path,
            format!("bad footer ({e}); the file is truncated or not an Arrow IPC file"),
        )
    })?;
    if footer_len + 10 + 8 > n {
        return Err(Error::corrupt(
            path,
            format!("footer length {footer_len} exceeds the file"),
        ));
    }
    let fb = &buf[n - 10 - footer_len..n - 10];
    let footer = arrow_ipc::root_as_footer(fb)
        .map_err(|e| Error::corrupt(path, format!("unreadable footer: {e}")))?;
    let ipc_schema = footer
        .schema()
        .ok_or_else(|| Error::corrupt(path, "footer has no schema"))?;
    let fields = ipc_schema
        .fields()
        .ok_or_else(|| Error::corrupt(path, "footer schema has no fields"))?;
    for f in fields.iter() {
        check_fb_field(f, 0).map_err(|e| Error::corrupt(path, format!("footer schema: {e}")))?;
    }
    let schema = catch_unwind(AssertUnwindSafe(|| {
        arrow_ipc::convert::fb_to_schema(ipc_schema)
    }))
    .map_err(|_| Error::corrupt(path, "unreadable schema in footer"))?;
    let blocks: Vec<Block> = footer
        .recordBatches()
        .map(|b| b.iter().copied().collect())
        .unwrap_or_default();
    if footer.dictionaries().is_some_and(|d| !d.is_empty()) {
        return Err(Error::corrupt(
            path,
            "dictionary-encoded shards are not part of the cache format",
        ));
    }
    let custom = footer
        .custom_metadata()
        .map(|kvs| {
            kvs.iter()
                .filter_map(|kv| Some((kv.key()?.to_string(), kv.value()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Footer {
        schema,
        version: footer.version(),
        blocks,
        custom,
    })
}

/// Walks one field of an uncompressed record batch in IPC order (node, then
/// its buffers, then its children) and checks that every buffer is as long as
/// the node's length needs. arrow-ipc builds arrays from these sizes before
/// validating them and panics on a short one; this turns that into an error.
fn check_field(
    t: &arrow_schema::DataType,
    nodes: &mut impl Iterator<Item = (i64, i64)>,
    bufs: &mut impl Iterator<Item = i64>,
) -> std::result::Result<(), String> {
    use arrow_schema::DataType as D;
    let (len, nulls) = nodes
        .next()
        .ok_or("fewer field nodes than the schema has fields")?;
    let len = usize::try_from(len).map_err(|_| "negative field length")?;
    // `unit`: the buffer must hold whole values of this width (arrow asserts it).
    let mut need = |what: &str, min: usize, unit: usize| -> std::result::Result<(), String> {
        let have = bufs
            .next()
            .ok_or_else(|| format!("missing {what} buffer"))?;
        if (have as u64) < min as u64 {
            return Err(format!(
                "{what} buffer has {have} bytes, {len} values need {min}"
            ));
        }
        if unit > 1 && !(have as u64).is_multiple_of(unit as u64) {
            return Err(format!(
                "{what} buffer of {have} bytes is not whole {unit}-byte values"
            ));
        }
        Ok(())
    };
    let validity = if nulls > 0 { len.div_ceil(8) } else { 0 };
    let offsets = |w: usize| {
        if len == 0 {
            0
        } else {
            len.saturating_add(1).saturating_mul(w)
        }
    };
    match t {
        D::Boolean => {
            need("validity", validity, 1)?;
            need("values", len.div_ceil(8), 1)?;
        }
        D::Utf8 | D::Binary => {
            need("validity", validity, 1)?;
            need("offsets", offsets(4), 4)?;
            need("values", 0, 1)?;
        }
        D::LargeUtf8 | D::LargeBinary => {
            need("validity", validity, 1)?;
            need("offsets", offsets(8), 8)?;
            need("values", 0, 1)?;
        }
        D::List(item) => {
            need("validity", validity, 1)?;
            need("offsets", offsets(4), 4)?;
            check_field(item.data_type(), nodes, bufs)?;
        }
        D::Struct(children) => {
            need("validity", validity, 1)?;
            for c in children {
                check_field(c.data_type(), nodes, bufs)?;
            }
        }
        t => match t.primitive_width() {
            Some(w) => {
                need("validity", validity, 1)?;
                need("values", len.saturating_mul(w), w)?;
            }
            None => return Err(format!("type {t} is not part of the cache format")),
        },
    }
    Ok(())
}

/// Rows of the record batch in `block`, read from its message header only.
fn block_rows(
    path: &Path,
    buf: &[u8],
    block: &Block,
    file_len: usize,
    schema: &Schema,
) -> Result<(u64, bool)> {
    let start = usize::try_from(block.offset())
        .map_err(|_| Error::corrupt(path, "negative block offset"))?;
    let meta_len = usize::try_from(block.metaDataLength())
        .map_err(|_| Error::corrupt(path, "negative block metadata length"))?;
    let body_len = usize::try_from(block.bodyLength())
        .map_err(|_| Error::corrupt(path, "negative block body length"))?;
    let end = start
        .checked_add(meta_len)
        .and_then(|e| e.checked_add(body_len))
        .filter(|&e| e <= file_len)
        .ok_or_else(|| {
            Error::corrupt(
                path,
                "record batch extends past the end of the file (truncated?)",
            )
        })?;
    let _ = end;
    if start % 8 != 0 || meta_len % 8 != 0 {
        return Err(Error::corrupt(
            path,
            "record batch block is not 8-byte aligned (not an Arrow IPC file written to the spec)",
        ));
    }
    let meta = &buf[start..start + meta_len];
    // Messages start with an optional 0xFFFFFFFF continuation, then an i32 length.
    let (len_at, skip) = if meta.len() >= 8 && meta[..4] == [0xff; 4] {
        (4, 8)
    } else {
        (0, 4)
    };
    if meta.len() < skip {
        return Err(Error::corrupt(path, "record batch message too short"));
    }
    let msg_len = i32::from_le_bytes(meta[len_at..len_at + 4].try_into().expect("4 bytes"));
    let msg_len =
        usize::try_from(msg_len).map_err(|_| Error::corrupt(path, "negative message length"))?;
    if skip + msg_len > meta.len() {
        return Err(Error::corrupt(
            path,
            "record batch message exceeds its block",
        ));
    }
    let msg = arrow_ipc::root_as_message(&meta[skip..skip + msg_len])
        .map_err(|e| Error::corrupt(path, format!("unreadable record batch message: {e}")))?;
    let rb = msg
        .header_as_record_batch()
        .ok_or_else(|| Error::corrupt(path, "block is not a record batch"))?;
    // arrow-ipc slices buffers without checking them against the body (and
    // panics on a bad range): check every range here first.
    if let Some(buffers) = rb.buffers() {
        for b in buffers.iter() {
            // The IPC format aligns buffers to 8 bytes; arrow asserts it for offsets.
            let ok = b.offset() >= 0
                && b.offset() % 8 == 0
                && b.length() >= 0
                && (b.offset() as u64)
                    .checked_add(b.length() as u64)
                    .is_some_and(|e| e <= body_len as u64);
            if !ok {
                return Err(Error::corrupt(
                    path,
                    format!(
                        "record batch buffer at {} (+{}) lies outside its {body_len}-byte body",
                        b.offset(),
                        b.length()
                    ),
                ));
            }
        }
    }
    if rb
        .nodes()
        .is_some_and(|n| n.iter().any(|n| n.length() < 0 || n.null_count() < 0))
    {
        return Err(Error::corrupt(
            path,
            "negative length in a record batch field",
        ));
    }
    // Compressed buffers are checked by the decompressor; uncompressed ones here.
    if rb.compression().is_none() {
        let mut nodes = rb
            .nodes()
            .map(|n| {
                n.iter()
                    .map(|n| (n.length(), n.null_count()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter();
        let mut bufs = rb
            .buffers()
            .map(|b| b.iter().map(|b| b.length()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter();
        for f in schema.fields() {
            check_field(f.data_type(), &mut nodes, &mut bufs)
                .map_err(|e| Error::corrupt(path, format!("column '{}': {e}", f.name())))?;
        }
    }
    let rows =
        u64::try_from(rb.length()).map_err(|_| Error::corrupt(path, "negative row count"))?;
    Ok((rows, rb.compression().is_some()))
}

/// Number of IPC buffers a field of this type (with its children) has.
fn buffer_count(t: &arrow_schema::DataType) -> usize {
    use arrow_schema::DataType as D;
    match t {
        D::Null => 0,
        D::Utf8 | D::Binary | D::LargeUtf8 | D::LargeBinary => 3,
        D::List(item) | D::LargeList(item) => 2 + buffer_count(item.data_type()),
        D::Struct(children) => {
            1 + children
                .iter()
                .map(|c| buffer_count(c.data_type()))
                .sum::<usize>()
        }
        _ => 2,
    }
}

/// Bytes of each top-level column of an IPC shard file, summed over its
/// record batches: `(stored, in_memory)`. `stored` is the sum of the column's
/// buffer lengths in the file (compressed when the shard is); `in_memory` is
/// what the buffers take once read (for compressed buffers, the uncompressed
/// length from each buffer's 8-byte prefix). Only headers are read.
///
/// # Errors
/// [`Error::MissingShard`], [`Error::CorruptShard`] naming the file.
pub fn shard_column_bytes(path: &Path, expected: &Schema) -> Result<Vec<(u64, u64)>> {
    let buf = map_file(path)?;
    let footer = read_footer(path, &buf)?;
    check_schema(path, &footer.schema, expected)?;
    let counts: Vec<usize> = expected
        .fields()
        .iter()
        .map(|f| buffer_count(f.data_type()))
        .collect();
    let mut out = vec![(0u64, 0u64); counts.len()];
    for block in &footer.blocks {
        // Checks every offset and length the loop below relies on.
        let _ = block_rows(path, &buf, block, buf.len(), expected)?;
        let start = block.offset() as usize;
        let meta_len = block.metaDataLength() as usize;
        let meta = &buf[start..start + meta_len];
        let (len_at, skip) = if meta[..4] == [0xff; 4] {
            (4, 8)
        } else {
            (0, 4)
        };
        let msg_len = i32::from_le_bytes(meta[len_at..len_at + 4].try_into().expect("4 bytes"));
        let msg = arrow_ipc::root_as_message(&meta[skip..skip + msg_len as usize])
            .map_err(|e| Error::corrupt(path, format!("unreadable record batch message: {e}")))?;
        let rb = msg
            .header_as_record_batch()
            .ok_or_else(|| Error::corrupt(path, "block is not a record batch"))?;
        let compressed = rb.compression().is_some();
        let body = start + meta_len;
        let mut bufs = rb.buffers().into_iter().flat_map(|b| b.iter());
        for (c, &k) in counts.iter().enumerate() {
            for _ in 0..k {
                let b = bufs
                    .next()
                    .ok_or_else(|| Error::corrupt(path, "fewer buffers than the schema needs"))?;
                let len = b.length() as u64;
                let mem = if compressed && len >= 8 {
                    let at = body + b.offset() as usize;
                    let raw = i64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
                    // -1: this buffer was left uncompressed after its prefix.
                    u64::try_from(raw).unwrap_or(len - 8)
                } else {
                    len
                };
                out[c].0 += len;
                out[c].1 += mem;
            }
        }
    }
    Ok(out)
}

fn check_schema(path: &Path, found: &Schema, expected: &Schema) -> Result<()> {
    if found.fields().len() != expected.fields().len() {
        return Err(Error::corrupt(
            path,
            format!(
                "shard has {} columns, the features have {}",
                found.fields().len(),
                expected.fields().len()
            ),
        ));
    }
    for (f, e) in found.fields().iter().zip(expected.fields()) {
        if f.name() != e.name() || !f.data_type().equals_datatype(e.data_type()) {
            return Err(Error::corrupt(
                path,
                format!(
                    "shard column '{}' is {}, the features expect '{}' as {}",
                    f.name(),
                    f.data_type(),
                    e.name(),
                    e.data_type()
                ),
            ));
        }
    }
    Ok(())
}

impl ShardData {
    fn open(
        path: &Path,
        index: usize,
        expected: &SchemaRef,
        rows: u64,
        build_id: Option<&str>,
    ) -> Result<Self> {
        let buf = map_file(path)?;
        let footer = read_footer(path, &buf)?;
        check_schema(path, &footer.schema, expected)?;
        if let Some(id) = build_id {
            let found = footer
                .custom
                .iter()
                .find(|(k, _)| k == BUILD_ID_FOOTER_KEY)
                .map(|(_, v)| v.as_str());
            if found != Some(id) {
                return Err(Error::corrupt(
                    path,
                    "shard belongs to another build of this cache (it was replaced while open, or files were mixed); reopen the cache",
                ));
            }
        }
        let mut batch_starts = Vec::with_capacity(footer.blocks.len() + 1);
        let mut acc = 0u64;
        let mut compressed = false;
        batch_starts.push(0);
        for b in &footer.blocks {
            let (n, c) = block_rows(path, &buf, b, buf.len(), expected)?;
            acc += n;
            compressed |= c;
            batch_starts.push(acc);
        }
        if acc != rows {
            return Err(Error::corrupt(
                path,
                format!("shard holds {acc} rows, metadata records {rows}"),
            ));
        }
        // Decode with the features' schema so every batch of every shard
        // shares one SchemaRef (the file's was checked equal above).
        let decoder = FileDecoder::new(expected.clone(), footer.version);
        let batches = (0..footer.blocks.len()).map(|_| OnceLock::new()).collect();
        Ok(ShardData {
            path: path.to_path_buf(),
            buf,
            decoder,
            blocks: footer.blocks,
            batch_starts,
            batches,
            compressed,
            index,
            schema: footer.schema,
        })
    }

    /// Record batch `j`: kept (a view) for an uncompressed shard, through
    /// the backend's bounded LRU for a compressed one.
    fn batch(&self, j: usize, lru: &Mutex<BatchLru>) -> Result<RecordBatch> {
        if !self.compressed {
            if let Some(b) = self.batches[j].get() {
                return Ok(b.clone());
            }
            let b = self.decode(j)?;
            let _ = self.batches[j].set(b);
            return Ok(self.batches[j].get().expect("just set").clone());
        }
        let key = (self.index, j);
        if let Some(b) = lru.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(b);
        }
        let b = self.decode(j)?;
        lru.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, &b);
        Ok(b)
    }

    fn decode(&self, j: usize) -> Result<RecordBatch> {
        let block = &self.blocks[j];
        let len = block.metaDataLength() as usize + block.bodyLength() as usize;
        let data = self.buf.slice_with_length(block.offset() as usize, len);
        let batch = catch_unwind(AssertUnwindSafe(|| {
            self.decoder.read_record_batch(block, &data)
        }))
        .map_err(|_| Error::corrupt(&self.path, format!("record batch {j} is malformed")))?
        .map_err(|e| Error::corrupt(&self.path, format!("record batch {j}: {e}")))?
        .ok_or_else(|| Error::corrupt(&self.path, format!("record batch {j} is empty")))?;
        let want = (self.batch_starts[j + 1] - self.batch_starts[j]) as usize;
        if batch.num_rows() != want {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "record batch {j} has {} rows, its header says {want}",
                    batch.num_rows()
                ),
            ));
        }
        Ok(batch)
    }

    /// (batch index, row within batch) of a shard-local row.
    fn locate(&self, local: u64) -> (usize, usize) {
        let j = self.batch_starts.partition_point(|&s| s <= local) - 1;
        (j, (local - self.batch_starts[j]) as usize)
    }
}

impl ArrowShards {
    /// A backend over shard files in `dir` with their row counts.
    ///
    /// `build_id`, when given, must match the footer of every shard.
    pub fn new(
        dir: &Path,
        filenames: &[String],
        row_counts: &[u64],
        features: Arc<Features>,
        decoder: RowDecoder,
        build_id: Option<String>,
    ) -> Self {
        let shards = filenames
            .iter()
            .zip(row_counts)
            .map(|(f, &rows)| ShardSlot {
                path: dir.join(f),
                rows,
                data: OnceLock::new(),
            })
            .collect();
        ArrowShards {
            inner: Arc::new(Inner {
                core: RowsCore::new(
                    dir,
                    features.clone(),
                    features.arrow_schema(),
                    decoder,
                    row_counts.to_vec(),
                ),
                build_id,
                shards,
                lru: Mutex::new(BatchLru::new(DEFAULT_DECOMPRESSED_CACHE_BYTES)),
            }),
        }
    }

    /// The same backend keeping at most `bytes` of decompressed record
    /// batches (compressed shards; default [`DEFAULT_DECOMPRESSED_CACHE_BYTES`]).
    /// 0 keeps none: every read decompresses its batch again. Clones share
    /// one cache, so they share its budget too.
    pub fn with_cache_bytes(self, bytes: usize) -> Self {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_budget(bytes);
        self
    }

    /// The byte budget of decompressed batches.
    pub fn cache_bytes(&self) -> usize {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .budget
    }

    /// Bytes of decompressed batches held now (at most [`Self::cache_bytes`]).
    pub fn cached_bytes(&self) -> usize {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .used
    }

    /// Paths of the shard files.
    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.inner.shards.iter().map(|s| s.path.clone()).collect()
    }

    fn shard(&self, i: usize) -> Result<&Arc<ShardData>> {
        let slot = &self.inner.shards[i];
        if let Some(d) = slot.data.get() {
            return Ok(d);
        }
        let d = ShardData::open(
            &slot.path,
            i,
            &self.inner.core.schema,
            slot.rows,
            self.inner.build_id.as_deref(),
        )?;
        let _ = slot.data.set(Arc::new(d));
        Ok(slot.data.get().expect("just set"))
    }

    /// (shard, local row) of a global row (`row < len`).
    fn locate(&self, row: u64) -> (usize, u64) {
        self.inner.core.locate(row)
    }

    /// The Arrow schema stored in a shard's footer (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn shard_file_schema(&self, i: usize) -> Result<Schema> {
        Ok(self.shard(i)?.schema.clone())
    }

    /// Number of IPC record batches in a shard (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn shard_num_batches(&self, i: usize) -> Result<usize> {
        Ok(self.shard(i)?.blocks.len())
    }

    /// Shard-local row ranges `[start, end)` of a shard's record batches (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn batch_row_ranges(&self, shard: usize) -> Result<Vec<(u64, u64)>> {
        let d = self.shard(shard)?;
        Ok(d.batch_starts.windows(2).map(|w| (w[0], w[1])).collect())
    }

    /// One record batch of a shard.
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn read_batch(&self, shard: usize, batch: usize) -> Result<RecordBatch> {
        let d = self.shard(shard)?;
        if batch >= d.blocks.len() {
            return Err(Error::InvalidArgument(format!(
                "shard {shard} has {} batches",
                d.blocks.len()
            )));
        }
        d.batch(batch, &self.inner.lru)
    }

    fn row_batch(&self, row: u64) -> Result<(RecordBatch, usize)> {
        let (s, local) = self.locate(row);
        let shard = self.shard(s)?;
        let (j, r) = shard.locate(local);
        Ok((shard.batch(j, &self.inner.lru)?, r))
    }
}

impl Backend for ArrowShards {
    fn layout(&self) -> &'static str {
        crate::cache::metadata::LAYOUT_ARROW_SHARDS
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        Ok(batch.slice(r, 1))
    }

    fn get(&self, index: i64) -> Result<Row> {
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        self.inner.core.decoder.decode_row(&batch, r)
    }

    fn get_with(&self, index: i64, decoder: &RowDecoder) -> Result<Row> {
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        decoder.decode_row(&batch, r)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        let n = self.len();
        if indices.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema()));
        }
        // Group lookups: consecutive indices usually hit the same batch.
        let mut batches: Vec<RecordBatch> = Vec::new();
        let mut ids: Vec<(usize, u64, usize)> = Vec::new(); // (shard, batch j, slot in `batches`)
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(indices.len());
        for &ix in indices {
            let row = normalize_index(ix, n)?;
            let (s, local) = self.locate(row);
            let shard = self.shard(s)?;
            let (j, r) = shard.locate(local);
            let slot = match ids.iter().rev().find(|(a, b, _)| *a == s && *b == j as u64) {
                Some(&(_, _, k)) => k,
                None => {
                    batches.push(shard.batch(j, &self.inner.lru)?);
                    ids.push((s, j as u64, batches.len() - 1));
                    batches.len() - 1
                }
            };
            picks.push((slot, r));
        }
        if batches.len() == 1 {
            let (first, last) = (picks[0].1, picks[picks.len() - 1].1);
            let contiguous = last >= first
                && last - first + 1 == picks.len()
                && picks.windows(2).all(|w| w[1].1 == w[0].1 + 1);
            if contiguous {
                return Ok(batches[0].slice(first, picks.len()));
            }
        }
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        arrow_select::interleave::interleave_record_batch(&refs, &picks)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))
    }

    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch> {
        crate::layouts::backend::slice_from_pieces(
            self.len(),
            start,
            len,
            &self.schema(),
            &self.inner.core.dir,
            |row| self.row_batch(row),
        )
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let this = self.clone();
        let iter = order.into_iter().flat_map(move |s| {
            let this = this.clone();
            let nb = match this.shard(s) {
                Ok(d) => d.blocks.len(),
                Err(e) => return Box::new(std::iter::once(Err(e))) as BatchIter<'static>,
            };
            Box::new((0..nb).map(move |j| {
                let d = this.shard(s)?;
                d.batch(j, &this.inner.lru)
            }))
        });
        Ok(Box::new(iter))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn reopened(&self) -> Box<dyn Backend> {
        let i = &self.inner;
        let names: Vec<String> = i
            .shards
            .iter()
            .map(|s| {
                s.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        Box::new(
            ArrowShards::new(
                &i.core.dir,
                &names,
                &i.core.row_counts,
                i.core.features.clone(),
                i.core.decoder.clone(),
                i.build_id.clone(),
            )
            .with_cache_bytes(self.cache_bytes()),
        )
    }
}
