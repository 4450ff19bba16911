//! `lance-video-frames`: every video frame a WebP image in a Lance row (the
//! reference's layout), built resumably from decoded videos and read as
//! windows of frames.

pub mod format;
mod jobs;
pub mod options;
pub mod read;
pub(crate) mod resume;
pub mod write;
