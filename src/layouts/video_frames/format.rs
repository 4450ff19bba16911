//! What the `lance-video-frames` writer and reader share: the Lance schema of
//! frame rows (the reference's) and the names of the build's working files.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// The Lance schema of a frames cache (the reference's).
pub fn frames_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("video_id", DataType::Int32, true),
        Field::new("frame_idx", DataType::Int32, true),
        Field::new("bytes", DataType::LargeBinary, true),
    ]))
}

/// Where inline video bytes are written for FFmpeg, inside the temp dir.
pub const INPUTS_DIR: &str = "_video_inputs";

/// The Lance schema of a segments cache: one row per (video, segment).
/// `data` holds the segment's packets back to back (raw elementary stream,
/// no container), `packet_offsets` where each starts then the end; the
/// quality columns are measured against the source frames at build time.
/// With `packet_frames` (caches written since it exists, as their
/// metadata says), a last column holds the frame each packet presents.
pub fn segments_schema(packet_frames: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("video_id", DataType::Int32, false),
        Field::new("segment_idx", DataType::Int32, false),
        Field::new("first_frame", DataType::Int64, false),
        Field::new("frame_count", DataType::Int32, false),
        Field::new("data", DataType::LargeBinary, false),
        Field::new(
            "packet_offsets",
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            false,
        ),
        Field::new("psnr", DataType::Float64, false),
        Field::new("psnr_min", DataType::Float64, false),
        Field::new("ssim", DataType::Float64, false),
        Field::new("ssim_min", DataType::Float64, false),
    ];
    if packet_frames {
        fields.push(Field::new(
            PACKET_FRAMES,
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            false,
        ));
    }
    Arc::new(Schema::new(fields))
}

pub use crate::cache::metadata::SEGMENT_PACKET_FRAMES as PACKET_FRAMES;

/// Row `row` of a `packet_frames` column (a list of int32), widened; None
/// when the column is not such a list.
pub fn packet_frames_at(column: &dyn arrow_array::Array, row: usize) -> Option<Vec<i64>> {
    use arrow_array::cast::AsArray;
    let list = column.as_list_opt::<i32>()?.value(row);
    let frames = list.as_primitive_opt::<arrow_array::types::Int32Type>()?;
    Some(frames.values().iter().map(|&f| i64::from(f)).collect())
}
