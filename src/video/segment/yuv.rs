//! Planar YUV 4:2:0 frames and their conversion to packed RGB: the one
//! swscale conversion that decoded frames and the source frames they are
//! measured against both go through, and the planes packed as encoders take
//! them.

use ff::format::Pixel;
use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

use super::ff_err;
use crate::video::decode::init;

/// A thread's last RGB converter (by source format and size), the frame it
/// converts into, and that frame's rows packed (when its rows are padded).
pub(super) struct Converter {
    scaler: Option<(Pixel, u32, u32, ff::software::scaling::Context)>,
    rgb: Frame,
    packed: Vec<u8>,
}

impl Default for Converter {
    fn default() -> Self {
        Converter {
            scaler: None,
            rgb: Frame::empty(),
            packed: Vec::new(),
        }
    }
}

impl Converter {
    /// `frame` converted to RGB24 of its size (rows perhaps padded).
    pub(super) fn convert(&mut self, frame: &Frame) -> Result<&Frame, String> {
        let key = (frame.format(), frame.width(), frame.height());
        if !matches!(&self.scaler, Some((p, w, h, _)) if (*p, *w, *h) == key) {
            let c = ff::software::scaling::Context::get(
                key.0,
                key.1,
                key.2,
                Pixel::RGB24,
                key.1,
                key.2,
                ff::software::scaling::Flags::BILINEAR,
            )
            .map_err(|e| ff_err("cannot convert frames", e))?;
            self.scaler = Some((key.0, key.1, key.2, c));
            // The converter writes frames of its own size only.
            self.rgb = Frame::empty();
        }
        let (.., s) = self.scaler.as_mut().expect("set above");
        s.run(frame, &mut self.rgb)
            .map_err(|e| ff_err("cannot convert a frame", e))?;
        Ok(&self.rgb)
    }

    /// `frame` converted to packed RGB24.
    pub(super) fn packed_rgb(&mut self, frame: &Frame) -> Result<&[u8], String> {
        let (w, h) = (frame.width() as usize, frame.height() as usize);
        self.convert(frame)?;
        Ok(rgb_rows(&self.rgb, w, h, &mut self.packed))
    }
}

thread_local! {
    pub(super) static CONVERTER: std::cell::RefCell<Converter> =
        std::cell::RefCell::new(Converter::default());
}

/// The swscale conversion of planar YUV 4:2:0 frames of `width x height`
/// to packed RGB, as decoded frames are converted.
pub(super) fn yuv420_to_rgb_converter(
    width: u32,
    height: u32,
) -> Result<ff::software::scaling::Context, String> {
    ff::software::scaling::Context::get(
        Pixel::YUV420P,
        width,
        height,
        Pixel::RGB24,
        width,
        height,
        ff::software::scaling::Flags::BILINEAR,
    )
    .map_err(|e| ff_err("cannot convert frames", e))
}

/// Packed RGB of a planar YUV 4:2:0 frame, converted by swscale as
/// [`decode_segment`](super::decode_segment) converts decoded frames (so a comparison of the two
/// measures the codec alone).
///
/// # Errors
/// A message when the frame has the wrong size or swscale fails.
pub fn yuv420_to_rgb(yuv: &[u8], width: u32, height: u32) -> Result<Vec<u8>, String> {
    init();
    let (w, h) = (width as usize, height as usize);
    if yuv.len() != w * h + 2 * (w / 2) * (h / 2) {
        return Err(format!(
            "{} bytes is not a {w}x{h} YUV 4:2:0 frame",
            yuv.len()
        ));
    }
    let mut src = Frame::new(Pixel::YUV420P, width, height);
    copy_planes(yuv, &mut src, w, h);
    let mut s = yuv420_to_rgb_converter(width, height)?;
    let mut rgb = Frame::empty();
    s.run(&src, &mut rgb)
        .map_err(|e| ff_err("cannot convert a frame", e))?;
    let mut packed = Vec::new();
    Ok(rgb_rows(&rgb, w, h, &mut packed).to_vec())
}

/// The packed RGB rows of an RGB24 frame: its own buffer when rows have no
/// padding, else copied into `scratch`.
pub(super) fn rgb_rows<'a>(
    rgb: &'a Frame,
    w: usize,
    h: usize,
    scratch: &'a mut Vec<u8>,
) -> &'a [u8] {
    let (w3, stride) = (w * 3, rgb.stride(0));
    let d = rgb.data(0);
    if stride == w3 {
        return &d[..w3 * h];
    }
    scratch.clear();
    for row in 0..h {
        scratch.extend_from_slice(&d[row * stride..row * stride + w3]);
    }
    scratch
}

/// Copies packed planar YUV 4:2:0 bytes into a frame's planes.
pub(super) fn copy_planes(f: &[u8], frame: &mut Frame, w: usize, h: usize) {
    let planes = [
        (0, w, h, 0),
        (1, w / 2, h / 2, w * h),
        (2, w / 2, h / 2, w * h + (w / 2) * (h / 2)),
    ];
    for (plane, pw, ph, start) in planes {
        let stride = frame.stride(plane);
        let dst = frame.data_mut(plane);
        for row in 0..ph {
            dst[row * stride..row * stride + pw]
                .copy_from_slice(&f[start + row * pw..start + (row + 1) * pw]);
        }
    }
}

/// Planar YUV 4:2:0 bytes of a frame's planes.
pub(super) fn pack_planes(frame: &Frame, w: usize, h: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(w * h * 3 / 2);
    for (plane, pw, ph) in [(0, w, h), (1, w / 2, h / 2), (2, w / 2, h / 2)] {
        let (stride, d) = (frame.stride(plane), frame.data(plane));
        for row in 0..ph {
            out.extend_from_slice(&d[row * stride..row * stride + pw]);
        }
    }
    out
}

/// Every frame of the video at `path` as planar YUV 4:2:0 at `width x
/// height` (the whole clip in memory: for measurements and tests).
///
/// # Errors
/// A message naming the file when it cannot be decoded.
pub fn read_yuv420(
    path: &std::path::Path,
    width: u32,
    height: u32,
) -> Result<Vec<Vec<u8>>, String> {
    let (w, h) = (width as usize, height as usize);
    let mut out = Vec::new();
    crate::video::decode::VideoFile::open(path)?.for_each_frame(
        path,
        crate::video::decode::PixelTarget::Yuv420,
        Some((w, h)),
        |_, f| {
            out.push(pack_planes(f, w, h));
            Ok(true)
        },
    )?;
    Ok(out)
}

/// Packs a decoded `w x h` YUV 4:2:0 frame into planes coded at even
/// sides: an odd width or height gets one more column or row, a copy of
/// the last (the chroma planes already have `ceil(side / 2)` samples).
pub fn pack_yuv420_even(frame: &Frame, w: usize, h: usize) -> Vec<u8> {
    let (ew, eh) = (w + (w & 1), h + (h & 1));
    let mut out = Vec::with_capacity(ew * eh * 3 / 2);
    let (stride, d) = (frame.stride(0), frame.data(0));
    for row in 0..eh {
        let r = &d[row.min(h - 1) * stride..][..w];
        out.extend_from_slice(r);
        if ew > w {
            out.push(r[w - 1]);
        }
    }
    for plane in [1, 2] {
        let (stride, d) = (frame.stride(plane), frame.data(plane));
        for row in 0..eh / 2 {
            out.extend_from_slice(&d[row * stride..][..ew / 2]);
        }
    }
    out
}
