//! What closed segments cost against WebP frames on a clip: bytes per
//! frame, mean and lowest PSNR (RGB) and mean SSIM (luma) of H.264 (or
//! AV1) segments at each CRF, beside WebP at one quality, all measured
//! against the same source frames converted to RGB the same way.
//!
//! `cargo run --release --example segment_quality -- CLIP [--size 320x240]
//! [--segment 32] [--codec h264|av1] [--crf 23,26,30] [--webp 65]`

use shardset::video::quality::{psnr, ssim_rgb};
use shardset::video::segment::{
    encode_video, read_yuv420, yuv420_to_rgb, SegmentCodec, SegmentParams,
};
use shardset::video::webp::{WebpEncoder, WebpSettings, Yuv420};

/// A WebP frame decoded to planar YUV 4:2:0 (libwebp's own decoder, no
/// colour conversion), so it goes to RGB the way the segments' frames do.
fn webp_to_yuv420(data: &[u8], w: usize, h: usize) -> Result<Vec<u8>, String> {
    let (mut fw, mut fh, mut stride, mut uv_stride) = (0, 0, 0, 0);
    let (mut u, mut v) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: libwebp reads `data` and returns planes it owns (freed below),
    // of the sizes and strides it reports.
    unsafe {
        let y = libwebp_sys::WebPDecodeYUV(
            data.as_ptr(),
            data.len(),
            &mut fw,
            &mut fh,
            &mut u,
            &mut v,
            &mut stride,
            &mut uv_stride,
        );
        if y.is_null() || fw as usize != w || fh as usize != h {
            return Err("libwebp could not decode a frame".into());
        }
        let mut out = Vec::with_capacity(w * h * 3 / 2);
        for (p, pw, ph, st) in [
            (y, w, h, stride),
            (u, w / 2, h / 2, uv_stride),
            (v, w / 2, h / 2, uv_stride),
        ] {
            for row in 0..ph {
                out.extend_from_slice(std::slice::from_raw_parts(p.add(row * st as usize), pw));
            }
        }
        libwebp_sys::WebPFree(y.cast());
        Ok(out)
    }
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let clip = std::path::PathBuf::from(args.first().ok_or("usage: segment_quality CLIP ...")?);
    let (w, h) = arg(&args, "--size", "320x240")
        .split_once('x')
        .map(|(a, b)| (a.parse::<u32>(), b.parse::<u32>()))
        .ok_or("--size WxH")?;
    let (w, h) = (w?, h?);
    let seg: usize = arg(&args, "--segment", "32").parse()?;
    let codec = match arg(&args, "--codec", "h264").as_str() {
        "av1" => SegmentCodec::Av1,
        _ => SegmentCodec::H264,
    };
    let preset = if codec == SegmentCodec::Av1 {
        "8"
    } else {
        "medium"
    };
    let src = read_yuv420(&clip, w, h)?;
    let rgb: Vec<Vec<u8>> = src
        .iter()
        .map(|f| yuv420_to_rgb(f, w, h))
        .collect::<Result<_, _>>()?;
    let n = src.len();
    println!("{} frames of {w}x{h} from {}", n, clip.display());
    println!("storage | bytes/frame | PSNR mean | PSNR min | SSIM mean");
    let q: f32 = arg(&args, "--webp", "65").parse()?;
    let enc = WebpEncoder::new(WebpSettings::try_new(q, 4)?)?;
    let (mut bytes, mut ps, mut pmin, mut ss) = (0usize, 0.0, f64::INFINITY, 0.0);
    let (wu, hu) = (w as usize, h as usize);
    for (f, want) in src.iter().zip(&rgb) {
        let (y, rest) = f.split_at(wu * hu);
        let (u, v) = rest.split_at((wu / 2) * (hu / 2));
        let data = enc.encode(&Yuv420 {
            width: wu,
            height: hu,
            y,
            y_stride: wu,
            u,
            v,
            uv_stride: wu / 2,
        })?;
        bytes += data.len();
        let got = yuv420_to_rgb(&webp_to_yuv420(&data, wu, hu)?, w, h)?;
        let p = psnr(want, &got);
        ps += p;
        pmin = pmin.min(p);
        ss += ssim_rgb(want, &got, wu, hu);
    }
    println!(
        "WebP q{q} | {:.0} | {:.2} | {:.2} | {:.4}",
        bytes as f64 / n as f64,
        ps / n as f64,
        pmin,
        ss / n as f64
    );
    for crf in arg(&args, "--crf", "23,26,30").split(',') {
        let p = SegmentParams {
            codec,
            width: w,
            height: h,
            crf: crf.parse()?,
            preset: preset.into(),
            tune: codec.default_tune().into(),
            encoder_params: String::new(),
        };
        let segs = encode_video(&clip, &p, seg)?;
        let bytes: usize = segs.iter().map(|s| s.encoded.data.len()).sum();
        let frames: usize = segs.iter().map(|s| s.encoded.frames).sum();
        let psnr_mean = segs
            .iter()
            .map(|s| s.psnr * s.encoded.frames as f64)
            .sum::<f64>()
            / frames as f64;
        let ssim_mean = segs
            .iter()
            .map(|s| s.ssim * s.encoded.frames as f64)
            .sum::<f64>()
            / frames as f64;
        let psnr_min = segs
            .iter()
            .map(|s| s.psnr_min)
            .fold(f64::INFINITY, f64::min);
        println!(
            "{} crf {crf}, segments of {seg} | {:.0} | {psnr_mean:.2} | {psnr_min:.2} | {ssim_mean:.4}",
            codec.as_str(),
            bytes as f64 / frames as f64
        );
    }
    Ok(())
}
