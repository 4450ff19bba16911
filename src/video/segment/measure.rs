//! Encoding a video's segments and measuring each against its source
//! frames (PSNR and SSIM of the frames a read decodes): what a segments
//! build stores and records per row.

use ff::format::Pixel;
use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

use super::decode::{decode_segment_picked, SegmentRead};
use super::encode::{encode_segment, EncodedSegment};
use super::ff_err;
use super::settings::{SegmentCodec, SegmentParams};
use super::yuv::{copy_planes, pack_planes, rgb_rows, yuv420_to_rgb_converter};
use crate::video::decode::init;

/// One segment of a video, encoded, with what the encoding cost.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoSegment {
    /// The video's frame number of the segment's first frame.
    pub first_frame: u64,
    /// The packets.
    pub encoded: EncodedSegment,
    /// Mean PSNR (dB, RGB samples) of its decoded frames against the
    /// source frames; a frame decoded exactly counts as [`PSNR_CAP`].
    pub psnr: f64,
    /// Lowest per-frame PSNR.
    pub psnr_min: f64,
    /// Mean SSIM (BT.601 luma) of its decoded frames.
    pub ssim: f64,
    /// Lowest per-frame SSIM.
    pub ssim_min: f64,
}

/// The PSNR recorded for a frame decoded exactly (its true PSNR is
/// infinite, which JSON cannot hold and a mean cannot use).
pub const PSNR_CAP: f64 = 100.0;

/// Encodes the segments of one video and measures each against its
/// source frames: one converter of source frames to RGB for the whole
/// video, the same conversion the decoded frames go through.
pub struct SegmentEncoder {
    params: SegmentParams,
    crop: (u32, u32),
    scaler: ff::software::scaling::Context,
    src: Frame,
    rgb: Frame,
    packed: Vec<u8>,
}

impl SegmentEncoder {
    /// An encoder of frames stored at `width x height`, coded at the even
    /// sides of `params`.
    ///
    /// # Errors
    /// A message when the sizes do not fit (odd coded sides, a stored size
    /// larger than the coded one, AV1 below 64x64) or swscale fails.
    pub fn new(params: SegmentParams, width: u32, height: u32) -> Result<Self, String> {
        init();
        let (ew, eh) = (params.width, params.height);
        if ew == 0 || eh == 0 || ew % 2 == 1 || eh % 2 == 1 || width > ew || height > eh {
            return Err(format!(
                "frames of {width}x{height} cannot be coded at {ew}x{eh}"
            ));
        }
        if params.codec == SegmentCodec::Av1 && (ew < 64 || eh < 64) {
            return Err(format!(
                "SVT-AV1 encodes frames of at least 64x64, this video's are {width}x{height} (use H.264)"
            ));
        }
        let scaler = yuv420_to_rgb_converter(width, height)?;
        Ok(SegmentEncoder {
            src: Frame::new(Pixel::YUV420P, ew, eh),
            params,
            crop: (width, height),
            scaler,
            rgb: Frame::empty(),
            packed: Vec::new(),
        })
    }

    /// Packed RGB of a coded YUV frame, cropped to the stored size.
    fn source_rgb(&mut self, yuv: &[u8]) -> Result<&[u8], String> {
        let (ew, eh) = (self.params.width, self.params.height);
        self.src.set_width(ew);
        self.src.set_height(eh);
        copy_planes(yuv, &mut self.src, ew as usize, eh as usize);
        // The stored part only, converted as a frame of that size (as the
        // reader converts decoded frames).
        self.src.set_width(self.crop.0);
        self.src.set_height(self.crop.1);
        self.scaler
            .run(&self.src, &mut self.rgb)
            .map_err(|e| ff_err("cannot convert a frame", e))?;
        Ok(rgb_rows(
            &self.rgb,
            self.crop.0 as usize,
            self.crop.1 as usize,
            &mut self.packed,
        ))
    }

    /// Encodes `frames` (coded YUV 4:2:0, as [`pack_yuv420_even`](super::pack_yuv420_even) packs
    /// them) as the segment starting at frame `first` of its video, decodes
    /// it back and measures every frame.
    ///
    /// # Errors
    /// An encoding or decoding error, or a segment that does not decode to
    /// exactly its frames.
    pub fn encode(&mut self, first: u64, frames: &[Vec<u8>]) -> Result<VideoSegment, String> {
        let encoded = encode_segment(&self.params, frames)?;
        let (cw, ch) = (self.crop.0 as usize, self.crop.1 as usize);
        let (codec, coded, crop) = (
            self.params.codec,
            (self.params.width, self.params.height),
            self.crop,
        );
        let mut psnrs = Vec::with_capacity(frames.len());
        let mut ssims = Vec::with_capacity(frames.len());
        let mut failed = None;
        // Each source frame goes to RGB as its decoded twin arrives: one
        // frame of each in memory at a time, whatever the segment length.
        let n = decode_segment_picked(
            &SegmentRead {
                codec,
                coded,
                crop,
                data: &encoded.data,
                packet_offsets: &encoded.packet_offsets,
                packet_frames: None,
                pick: &|_| true,
                upto: frames.len(),
            },
            |i, rgb| match frames.get(i).map(|f| self.source_rgb(f)) {
                Some(Ok(src)) => {
                    psnrs.push(crate::video::quality::psnr(src, rgb).min(PSNR_CAP));
                    ssims.push(crate::video::quality::ssim_rgb(src, rgb, cw, ch));
                }
                Some(Err(e)) => failed = Some(e),
                None => {}
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
        if n != frames.len() || psnrs.len() != frames.len() {
            return Err(format!(
                "a segment of {} frames decoded to {n} (from frame {first})",
                frames.len()
            ));
        }
        let k = psnrs.len().max(1) as f64;
        Ok(VideoSegment {
            first_frame: first,
            encoded,
            psnr: psnrs.iter().sum::<f64>() / k,
            psnr_min: psnrs.iter().copied().fold(PSNR_CAP, f64::min),
            ssim: ssims.iter().sum::<f64>() / k,
            ssim_min: ssims.iter().copied().fold(1.0, f64::min),
        })
    }
}

/// Decodes the video at `path` (at `p.width x p.height`), cuts it into
/// segments of `frames_per_segment` frames (the last one shorter), encodes
/// each, decodes it back and measures it against the source frames.
///
/// # Errors
/// A message naming the file when it cannot be decoded, or an encoding
/// error.
pub fn encode_video(
    path: &std::path::Path,
    p: &SegmentParams,
    frames_per_segment: usize,
) -> Result<Vec<VideoSegment>, String> {
    if frames_per_segment == 0 {
        return Err("segments need at least one frame".into());
    }
    let (w, h) = (p.width as usize, p.height as usize);
    let mut file = crate::video::decode::VideoFile::open(path)?;
    let mut enc = SegmentEncoder::new(p.clone(), p.width, p.height)?;
    let mut out = Vec::new();
    let mut chunk: Vec<Vec<u8>> = Vec::with_capacity(frames_per_segment);
    let mut first = 0u64;
    file.for_each_frame(
        path,
        crate::video::decode::PixelTarget::Yuv420,
        Some((w, h)),
        |i, frame| {
            chunk.push(pack_planes(frame, w, h));
            if chunk.len() == frames_per_segment {
                out.push(enc.encode(first, &chunk)?);
                chunk.clear();
                first = i + 1;
            }
            Ok(true)
        },
    )?;
    if !chunk.is_empty() {
        out.push(enc.encode(first, &chunk)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{decode_segment, yuv420_to_rgb};
    use super::*;

    /// A real clip (80x60, 24 frames) in segments of 5: every frame is
    /// in one segment, in order, each decoded frame is closest to its own
    /// source frame (frame-exact), and the measured quality is recorded.
    #[test]
    fn a_video_is_cut_into_segments_frame_exactly() {
        let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/sources/clip_a.mp4");
        let p = SegmentParams {
            codec: SegmentCodec::H264,
            width: 80,
            height: 60,
            crf: 23,
            preset: "medium".into(),
            tune: String::new(),
            encoder_params: String::new(),
        };
        // The source frames, converted the same way.
        let mut src = Vec::new();
        let mut file = crate::video::decode::VideoFile::open(&clip).unwrap();
        file.for_each_frame(
            &clip,
            crate::video::decode::PixelTarget::Yuv420,
            Some((80, 60)),
            |_, f| {
                src.push(yuv420_to_rgb(&pack_planes(f, 80, 60), 80, 60).unwrap());
                Ok(true)
            },
        )
        .unwrap();
        let n = src.len();
        assert!(n > 10 && n % 5 != 0, "{n} frames: a short last segment");
        let segs = encode_video(&clip, &p, 5).unwrap();
        assert_eq!(
            segs.iter()
                .map(|s| (s.first_frame, s.encoded.frames))
                .collect::<Vec<_>>(),
            (0..n)
                .step_by(5)
                .map(|f| (f as u64, (n - f).min(5)))
                .collect::<Vec<_>>()
        );
        for s in &segs {
            assert!(
                s.psnr > 30.0 && s.psnr_min <= s.psnr && s.ssim > 0.9 && s.ssim_min <= s.ssim,
                "segment at {}: {} {} {}",
                s.first_frame,
                s.psnr,
                s.psnr_min,
                s.ssim
            );
        }
        // Lossless (crf 0): every decoded frame is exactly its own source
        // frame, so frame i of a segment is frame first + i of the video.
        let lossless = SegmentParams {
            crf: 0,
            ..p.clone()
        };
        let segs = encode_video(&clip, &lossless, 5).unwrap();
        let mut seen = 0;
        for s in &segs {
            assert_eq!(
                (s.psnr, s.psnr_min, s.ssim, s.ssim_min),
                (PSNR_CAP, PSNR_CAP, 1.0, 1.0),
                "segment at {}",
                s.first_frame
            );
            decode_segment(
                p.codec,
                80,
                60,
                &s.encoded.data,
                &s.encoded.packet_offsets,
                0..5,
                |j, rgb| {
                    assert!(rgb == src[s.first_frame as usize + j].as_slice());
                    seen += 1;
                },
            )
            .unwrap();
        }
        assert_eq!(seen, n);
        assert!(encode_video(&clip, &p, 0).is_err());
        let broken = clip.with_file_name("broken.mp4");
        assert!(encode_video(&broken, &p, 4).is_err());
    }
}
