//! What a segments build adds to the writer: the segment encoder tried
//! once before any video, and the segments part of the cache's metadata.

use std::path::Path;

use crate::cache::metadata::{SegmentQuality, SegmentsInfo, VideoEntry};
use crate::error::{Error, Result};

use super::VideoFramesOptions;

/// Opens the segment encoder once on a small frame, so that a codec this
/// FFmpeg lacks or a preset it refuses fails the build up front.
pub(super) fn check_segment_encoder(opts: &VideoFramesOptions) -> Result<()> {
    let s = opts.segments();
    // SVT-AV1 prints its configuration to stderr for every encoder it opens
    // (one per segment) unless its log level says otherwise; a user's own
    // SVT_LOG is kept.
    if s.codec() == crate::video::segment::SegmentCodec::Av1
        && std::env::var_os("SVT_LOG").is_none()
    {
        std::env::set_var("SVT_LOG", "1");
    }
    let side = 64u32;
    let frame = vec![128u8; (side * side * 3 / 2) as usize];
    // The encoders take a parameter they cannot parse with a warning and go
    // on without it: refused here instead, naming it.
    let (encoded, log) = crate::video::decode::capture_log(|| {
        crate::video::segment::encode_segment(&s.params(side, side), &[frame])
    });
    let unparsed: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("Error parsing option"))
        .collect();
    let encoded = if unparsed.is_empty() {
        encoded
    } else {
        Err(format!(
            "the encoder does not take {}",
            unparsed
                .iter()
                .map(|l| format!("'{l}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    encoded.map(|_| ()).map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot encode {} segments with {} (preset '{}', tune '{}', crf {}, \
                 encoder parameters '{}'): {e}",
            s.codec().as_str(),
            s.codec().encoder_name(),
            s.preset(),
            s.tune(),
            s.crf(),
            s.encoder_params()
        ))
    })
}

/// The segments part of the metadata: the encoder and its parameters, the
/// frame size when every video has the same, and the quality the encoding
/// cost, summed up from the segment rows (so a resumed build counts the
/// segments of its checkpoints too).
pub(super) fn segments_info(
    dir: &Path,
    opts: &VideoFramesOptions,
    videos: &[VideoEntry],
    num_segments: u64,
    packet_frames: bool,
) -> Result<SegmentsInfo> {
    let s = opts.segments();
    let (mut frames, mut psnr_sum, mut ssim_sum) = (0u64, 0f64, 0f64);
    let (mut psnr_min, mut ssim_min) = (f64::INFINITY, f64::INFINITY);
    super::super::format::scan_quality(dir, |q| {
        frames += q.frames;
        psnr_sum += q.psnr * q.frames as f64;
        ssim_sum += q.ssim * q.frames as f64;
        psnr_min = psnr_min.min(q.psnr_min);
        ssim_min = ssim_min.min(q.ssim_min);
    })?;
    let k = frames.max(1) as f64;
    let (w, h) = (videos[0].w, videos[0].h);
    let same = videos.iter().all(|v| (v.w, v.h) == (w, h));
    Ok(SegmentsInfo {
        codec: s.codec().as_str().into(),
        encoder: s.codec().encoder_name().into(),
        encoder_version: crate::video::segment::codec_library_version(),
        crf: s.crf(),
        preset: s.preset().to_string(),
        tune: s.tune().to_string(),
        encoder_params: s.encoder_params().to_string(),
        frames_per_segment: s.frames_per_segment(),
        closed_gop: true,
        scene_cut: false,
        pixel_format: "yuv420p".into(),
        extradata: String::new(),
        width: same.then_some(w),
        height: same.then_some(h),
        num_segments,
        packet_frames,
        quality: SegmentQuality {
            psnr: "mean over frames of the PSNR of RGB samples against the source frames (exact frames count 100 dB)".into(),
            ssim: "mean over frames of the SSIM of BT.601 luma from RGB, 11x11 Gaussian window".into(),
            psnr_mean: psnr_sum / k,
            psnr_min,
            ssim_mean: ssim_sum / k,
            ssim_min,
        },
    })
}
