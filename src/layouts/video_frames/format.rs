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
