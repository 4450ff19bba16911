//! Short closed groups of pictures encoded as raw elementary streams: the
//! unit a compact video layout stores per row. Each segment is encoded by
//! an encoder of its own (so it starts with a keyframe and refers to no
//! other segment, whatever the codec's GOP options), with scene-cut
//! keyframes off, and is decoded by a decoder of its own: frame `i` of a
//! segment is the `i`-th frame its decoder puts out, exactly.
//!
//! H.264 goes through libx264 (the stream carries its parameter sets
//! in-band, so a segment needs no extradata); AV1 through SVT-AV1 when the
//! system FFmpeg has it.

mod bitstream;
mod decode;
mod encode;
mod measure;
mod settings;
mod window;
mod yuv;

use ffmpeg_next as ff;

pub use decode::{
    decode_segment, decode_segment_frames, decode_segment_picked, DecodedFrame, SegmentRead,
};
pub use encode::{encode_segment, is_permutation, EncodedSegment};
pub use measure::{encode_video, SegmentEncoder, VideoSegment, PSNR_CAP};
pub use settings::{
    SegmentCodec, SegmentParams, SegmentSettings, DEFAULT_AV1_CRF, DEFAULT_FRAMES_PER_SEGMENT,
    DEFAULT_H264_CRF, MAX_FRAMES_PER_SEGMENT,
};
pub use yuv::{pack_yuv420_even, read_yuv420, yuv420_to_rgb};

/// The version of the FFmpeg codec library that encodes and decodes
/// segments, as `libavcodec MAJOR.MINOR.MICRO`.
pub fn codec_library_version() -> String {
    let v = ff::codec::version();
    format!("libavcodec {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

fn ff_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// A moving gradient, YUV 4:2:0: the frames the tests of the parts encode.
#[cfg(test)]
fn frames(n: usize, w: usize, h: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|t| {
            let mut f = Vec::with_capacity(w * h * 3 / 2);
            for y in 0..h {
                for x in 0..w {
                    f.push(((x * 3 + y * 2 + t * 5) % 200 + 20) as u8);
                }
            }
            for _ in 0..2 {
                for y in 0..h / 2 {
                    for x in 0..w / 2 {
                        f.push(((x + y + t) % 40 + 108) as u8);
                    }
                }
            }
            f
        })
        .collect()
}
