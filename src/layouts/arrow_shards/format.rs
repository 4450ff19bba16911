//! What the `arrow-shards` writer and reader share: file names, the footer
//! key of our build id, the compression of IPC buffers, and the in-memory
//! size of a batch as pyarrow reports it (the writer rotates shards by it,
//! `stats` reports it).

use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

/// Footer key holding the build id in every shard we write.
pub const BUILD_ID_FOOTER_KEY: &str = "shardset.build_id";

pub use crate::cache::metadata::{Codec, Compression};

/// The in-memory size of a batch as pyarrow's `RecordBatch.nbytes` reports it
/// (validity bitmap when present, `len * width` for offsets, referenced data).
/// Rotation uses it so that shard boundaries match the reference's.
pub fn pyarrow_nbytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| array_nbytes(c.as_ref()))
        .sum()
}

/// [`pyarrow_nbytes`] of each column of a batch.
pub fn column_nbytes(batch: &RecordBatch) -> Vec<u64> {
    batch
        .columns()
        .iter()
        .map(|c| array_nbytes(c.as_ref()))
        .collect()
}

fn array_nbytes(a: &dyn Array) -> u64 {
    use arrow_array::cast::AsArray;
    let len = a.len() as u64;
    let validity = if a.nulls().is_some() {
        len.div_ceil(8)
    } else {
        0
    };
    let body = match a.data_type() {
        DataType::Boolean => len.div_ceil(8),
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            let o = s.value_offsets();
            len * 4 + (o[o.len() - 1] - o[0]) as u64
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            let o = s.value_offsets();
            len * 4 + (o[o.len() - 1] - o[0]) as u64
        }
        DataType::LargeBinary => {
            let s = a.as_binary::<i64>();
            let o = s.value_offsets();
            len * 8 + (o[o.len() - 1] - o[0]) as u64
        }
        // pyarrow's nbytes: the values only (no offsets buffer).
        DataType::FixedSizeBinary(w) => len * *w as u64,
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            let o = l.value_offsets();
            let (start, end) = (o[0] as usize, o[o.len() - 1] as usize);
            len * 4 + array_nbytes(l.values().slice(start, end - start).as_ref())
        }
        DataType::Struct(_) => a
            .as_struct()
            .columns()
            .iter()
            .map(|c| array_nbytes(c.as_ref()))
            .sum(),
        t => t.primitive_width().map_or(0, |w| w as u64 * len),
    };
    validity + body
}

/// What one written shard holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecord {
    /// `shard-NNNNN.arrow`.
    pub filename: String,
    /// Rows.
    pub num_rows: u64,
    /// File size.
    pub num_bytes: u64,
    /// xxh64 of the file, 16 hex chars.
    pub xxh64: String,
    /// Deduped cells in it (see [`super::dedup`]).
    pub refs: u64,
}

/// Shard name for an index.
pub fn shard_filename(i: usize) -> String {
    format!("shard-{i:05}.arrow")
}
