//! Reading Arrow IPC shard files safely: the file mapped, the footer parsed
//! and every length, offset and field of it checked against the file and
//! the expected schema before a batch is decoded, so a truncated or corrupt
//! shard is an error naming the file, never a panic. The reader
//! ([`super::read`]) and `stats` use it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use arrow_buffer::Buffer;
use arrow_ipc::reader::read_footer_length;
use arrow_ipc::{Block, MetadataVersion};
use arrow_schema::Schema;

use crate::error::{Error, Result};
use crate::storage::Storage;

const MAGIC: &[u8; 6] = b"ARROW1";

/// The parts of a shard's footer needed before any batch is read.
pub(crate) struct Footer {
    pub(crate) schema: Schema,
    pub(crate) version: MetadataVersion,
    pub(crate) blocks: Vec<Block>,
    pub(crate) custom: Vec<(String, String)>,
}

/// A shard file as an Arrow buffer, without copying where the storage maps
/// files (the local filesystem).
pub(crate) fn map_file(storage: &dyn Storage, path: &Path) -> Result<Buffer> {
    let bytes = storage.map(path).map_err(|e| match e {
        Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::MissingShard {
                path: path.to_path_buf(),
            }
        }
        e => e,
    })?;
    if bytes.len() < 18 {
        return Err(Error::corrupt(
            path,
            format!("{} bytes is too short for an Arrow IPC file", bytes.len()),
        ));
    }
    Ok(Buffer::from(bytes))
}

/// Checks a footer field before arrow-ipc converts it (which panics on
/// unknown types, odd widths and missing parts): only the types the cache
/// format and the Hugging Face streams read beside it use are accepted.
pub(crate) fn check_fb_field(
    f: arrow_ipc::Field<'_>,
    depth: usize,
) -> std::result::Result<(), String> {
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
        T::FixedSizeBinary => {
            let w = f
                .type_as_fixed_size_binary()
                .ok_or("a fixed-size binary field has no parameters")?
                .byteWidth();
            if w <= 0 {
                return Err(format!("a fixed-size binary field has byte width {w}"));
            }
        }
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
        T::List | T::LargeList if nchild == 1 => {}
        T::FixedSizeList if nchild == 1 => {
            let n = f
                .type_as_fixed_size_list()
                .ok_or("a fixed-size list field has no parameters")?
                .listSize();
            if n <= 0 {
                return Err(format!("a fixed-size list field has size {n}"));
            }
        }
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
    read_footer_parts(path, &buf[..6], buf, buf.len())
}

/// The footer's length, from the last 10 bytes of a file of `file_len` bytes.
pub(crate) fn footer_length(path: &Path, last10: &[u8], file_len: usize) -> Result<usize> {
    let tail: [u8; 10] = last10[last10.len() - 10..].try_into().expect("10 bytes");
    let footer_len = read_footer_length(tail).map_err(|e| {
        Error::corrupt(
            path,
            format!("bad footer ({e}); the file is truncated or not an Arrow IPC file"),
        )
    })?;
    if footer_len + 10 + 8 > file_len {
        return Err(Error::corrupt(
            path,
            format!("footer length {footer_len} exceeds the file"),
        ));
    }
    Ok(footer_len)
}

/// The footer of a file of `file_len` bytes from its first six bytes and a
/// suffix `tail` holding at least the footer and the 10 bytes after it.
pub(crate) fn read_footer_parts(
    path: &Path,
    head: &[u8],
    tail: &[u8],
    file_len: usize,
) -> Result<Footer> {
    if head.len() < 6 || &head[..6] != MAGIC {
        return Err(Error::corrupt(
            path,
            "does not start with the Arrow IPC magic",
        ));
    }
    let footer_len = footer_length(path, tail, file_len)?;
    let n = tail.len();
    if footer_len + 10 > n {
        return Err(Error::corrupt(path, "footer read short"));
    }
    let fb = &tail[n - 10 - footer_len..n - 10];
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
    at_least: usize,
) -> std::result::Result<(), String> {
    use arrow_schema::DataType as D;
    let (len, nulls) = nodes
        .next()
        .ok_or("fewer field nodes than the schema has fields")?;
    let len = usize::try_from(len).map_err(|_| "negative field length")?;
    if len < at_least {
        return Err(format!(
            "a child of {len} values where {at_least} are needed"
        ));
    }
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
        D::FixedSizeBinary(w) => {
            need("validity", validity, 1)?;
            need("values", len.saturating_mul(*w as usize), 1)?;
        }
        D::List(item) => {
            need("validity", validity, 1)?;
            need("offsets", offsets(4), 4)?;
            check_field(item.data_type(), nodes, bufs, 0)?;
        }
        D::LargeList(item) => {
            need("validity", validity, 1)?;
            need("offsets", offsets(8), 8)?;
            check_field(item.data_type(), nodes, bufs, 0)?;
        }
        D::FixedSizeList(item, n) => {
            need("validity", validity, 1)?;
            let child = len
                .checked_mul(*n as usize)
                .ok_or("a fixed-size list too long")?;
            check_field(item.data_type(), nodes, bufs, child)?;
        }
        D::Struct(children) => {
            need("validity", validity, 1)?;
            for c in children {
                check_field(c.data_type(), nodes, bufs, len)?;
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
pub(crate) fn block_rows(
    path: &Path,
    buf: &[u8],
    block: &Block,
    file_len: usize,
    schema: &Schema,
) -> Result<(u64, bool)> {
    let (start, meta_len, body_len) = block_span(path, block, file_len)?;
    block_rows_meta(path, &buf[start..start + meta_len], body_len, schema)
}

/// (offset, metadata length, body length) of `block`, checked to lie in a
/// file of `file_len` bytes and aligned as the format requires.
pub(crate) fn block_span(
    path: &Path,
    block: &Block,
    file_len: usize,
) -> Result<(usize, usize, usize)> {
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
    Ok((start, meta_len, body_len))
}

/// Rows of a record batch (and whether it is compressed) from its message
/// header `meta` (the block's first `metaDataLength` bytes); `body_len` is
/// the block's body length.
pub(crate) fn block_rows_meta(
    path: &Path,
    meta: &[u8],
    body_len: usize,
    schema: &Schema,
) -> Result<(u64, bool)> {
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
            check_field(f.data_type(), &mut nodes, &mut bufs, 0)
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
        D::FixedSizeBinary(_) => 2,
        D::List(item) | D::LargeList(item) => 2 + buffer_count(item.data_type()),
        D::FixedSizeList(item, _) => 1 + buffer_count(item.data_type()),
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
pub fn shard_column_bytes(
    storage: &dyn Storage,
    path: &Path,
    expected: &Schema,
) -> Result<Vec<(u64, u64)>> {
    let buf = map_file(storage, path)?;
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

pub(crate) fn check_schema(path: &Path, found: &Schema, expected: &Schema) -> Result<()> {
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
