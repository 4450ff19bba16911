//! `lance-video-frames`: every video frame a WebP image in a Lance row (the
//! reference's layout), and `lance-video-segments` (ours): closed segments
//! of frames encoded with a video codec, a Lance row each. Both are built
//! resumably from decoded videos by one writer and read as windows of
//! frames by one backend.

pub mod format;
mod jobs;
pub mod options;
pub mod read;
pub(crate) mod resume;
mod segments;
pub mod write;
