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

/// One segment row's quality, measured against the source frames at build
/// time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualityRow {
    /// The video's position in the cache's `videos` list.
    pub video_id: i32,
    /// Frames in the segment.
    pub frames: u64,
    /// Mean PSNR over the segment's frames.
    pub psnr: f64,
    /// The segment's worst frame's PSNR.
    pub psnr_min: f64,
    /// Mean SSIM over the segment's frames.
    pub ssim: f64,
    /// The segment's worst frame's SSIM.
    pub ssim_min: f64,
}

/// Every segment row's quality in the segments dataset at `dir`, reading
/// those columns alone (the writer sums them into the metadata, the report
/// shows them per video).
///
/// # Errors
/// A Lance error naming `dir`, or a corrupt-cache error when the columns
/// have other types.
pub fn scan_quality(
    dir: &std::path::Path,
    mut f: impl FnMut(QualityRow) + Send,
) -> crate::error::Result<()> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int32Type};
    let cols: Vec<String> = [
        "video_id",
        "frame_count",
        "psnr",
        "psnr_min",
        "ssim",
        "ssim_min",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    let mut bad = false;
    crate::lance::scan_dataset(dir, None, &cols, |b| {
        let (Some(v), Some(n), Some(p), Some(pm), Some(s), Some(sm)) = (
            b.column(0).as_primitive_opt::<Int32Type>(),
            b.column(1).as_primitive_opt::<Int32Type>(),
            b.column(2).as_primitive_opt::<Float64Type>(),
            b.column(3).as_primitive_opt::<Float64Type>(),
            b.column(4).as_primitive_opt::<Float64Type>(),
            b.column(5).as_primitive_opt::<Float64Type>(),
        ) else {
            bad = true;
            return;
        };
        for i in 0..b.num_rows() {
            f(QualityRow {
                video_id: v.value(i),
                frames: n.value(i).max(0) as u64,
                psnr: p.value(i),
                psnr_min: pm.value(i),
                ssim: s.value(i),
                ssim_min: sm.value(i),
            });
        }
    })?;
    if bad {
        return Err(crate::lance::lance_err(
            dir,
            "the segments' quality columns have unexpected types",
        ));
    }
    Ok(())
}
