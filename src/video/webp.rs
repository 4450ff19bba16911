//! WebP frames through libwebp: lossy encode of YUV 4:2:0 planes (what video
//! decoders produce, so no RGB round trip) and decode to packed RGB.

use std::mem::MaybeUninit;
use std::os::raw::c_int;

use libwebp_sys as sys;

/// Lossy WebP settings: private fields, checked when set, so an encoder
/// never checks them again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WebpSettings {
    quality: f32,
    method: u8,
    input: WebpInput,
}

impl Default for WebpSettings {
    fn default() -> Self {
        WebpSettings {
            quality: 65.0,
            method: 4,
            input: WebpInput::Rgb,
        }
    }
}

impl WebpSettings {
    /// Settings with this quality and method, the other fields default.
    ///
    /// # Errors
    /// As [`Self::try_with_quality`] and [`Self::try_with_method`].
    pub fn try_new(quality: f32, method: u8) -> crate::error::Result<Self> {
        WebpSettings::default()
            .try_with_quality(quality)?
            .try_with_method(method)
    }

    /// Quality 0..=100 (the reference's default is 65).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a quality outside 0..=100 (or NaN).
    pub fn try_with_quality(mut self, quality: f32) -> crate::error::Result<Self> {
        if !(0.0..=100.0).contains(&quality) {
            return Err(crate::error::Error::InvalidArgument(format!(
                "WebP quality must be 0..=100, got {quality}"
            )));
        }
        self.quality = quality;
        Ok(self)
    }

    /// Effort 0 (fastest) ..= 6 (smallest); libwebp's and OpenCV's default is 4.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a method above 6.
    pub fn try_with_method(mut self, method: u8) -> crate::error::Result<Self> {
        if method > 6 {
            return Err(crate::error::Error::InvalidArgument(format!(
                "WebP method must be 0..=6, got {method}"
            )));
        }
        self.method = method;
        Ok(self)
    }

    /// What the encoder is given: RGB as the reference gives it (the
    /// default), or the decoder's YUV planes.
    pub fn with_input(mut self, input: WebpInput) -> Self {
        self.input = input;
        self
    }

    /// The quality.
    pub fn quality(&self) -> f32 {
        self.quality
    }

    /// The method.
    pub fn method(&self) -> u8 {
        self.method
    }

    /// The encoder input.
    pub fn input(&self) -> WebpInput {
        self.input
    }
}

pub use super::WebpInput;

/// A borrowed YUV 4:2:0 picture (planes with their strides).
#[derive(Debug, Clone, Copy)]
pub struct Yuv420<'a> {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Luma plane.
    pub y: &'a [u8],
    /// Bytes per luma row.
    pub y_stride: usize,
    /// Cb plane.
    pub u: &'a [u8],
    /// Cr plane.
    pub v: &'a [u8],
    /// Bytes per chroma row.
    pub uv_stride: usize,
}

impl Yuv420<'_> {
    fn check(&self) -> Result<(), String> {
        let (w, h) = (self.width, self.height);
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        if w == 0 || h == 0 || w > 16383 || h > 16383 {
            return Err(format!(
                "WebP cannot hold a {w}x{h} frame (1..=16383 per side)"
            ));
        }
        let need = |stride: usize, rows: usize, width: usize| (rows - 1) * stride + width;
        if self.y_stride < w
            || self.uv_stride < cw
            || self.y.len() < need(self.y_stride, h, w)
            || self.u.len() < need(self.uv_stride, ch, cw)
            || self.v.len() < need(self.uv_stride, ch, cw)
        {
            return Err("YUV planes smaller than the frame".into());
        }
        Ok(())
    }
}

unsafe extern "C" fn append_to_vec(
    data: *const u8,
    size: usize,
    pic: *const sys::WebPPicture,
) -> c_int {
    // SAFETY: `custom_ptr` is the `Vec<u8>` set up by `encode_yuv420` for the
    // duration of `WebPEncode`; libwebp passes `size` readable bytes.
    let out = unsafe { &mut *((*pic).custom_ptr as *mut Vec<u8>) };
    if size > 0 {
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(data, size) });
    }
    1
}

/// A lossy WebP encoder: the libwebp configuration, checked and built once
/// and used for every frame.
pub struct WebpEncoder {
    config: sys::WebPConfig,
}

impl WebpEncoder {
    /// An encoder with these settings (checked when they were set).
    ///
    /// # Errors
    /// A message when libwebp refuses its default configuration.
    pub fn new(settings: WebpSettings) -> Result<Self, String> {
        let mut config = sys::WebPConfig::new_with_preset(
            sys::WebPPreset::WEBP_PRESET_DEFAULT,
            settings.quality,
        )
        .map_err(|_| "libwebp refused its default configuration".to_string())?;
        config.method = c_int::from(settings.method);
        Ok(WebpEncoder { config })
    }

    /// Encodes one YUV 4:2:0 frame.
    ///
    /// # Errors
    /// A message when the frame is out of WebP's limits or libwebp fails.
    pub fn encode(&self, frame: &Yuv420<'_>) -> Result<Vec<u8>, String> {
        encode_with(&self.config, frame)
    }

    /// Encodes one packed RGB frame (`stride` bytes per row) the way
    /// OpenCV's `imencode('.webp')` does: libwebp's own RGB import.
    ///
    /// # Errors
    /// A message when the frame is out of WebP's limits or libwebp fails.
    pub fn encode_rgb(
        &self,
        rgb: &[u8],
        width: usize,
        height: usize,
        stride: usize,
    ) -> Result<Vec<u8>, String> {
        if width == 0 || height == 0 || width > 16383 || height > 16383 {
            return Err(format!(
                "WebP cannot hold a {width}x{height} frame (1..=16383 per side)"
            ));
        }
        if stride < width * 3 || rgb.len() < (height - 1) * stride + width * 3 {
            return Err("RGB buffer smaller than the frame".into());
        }
        let mut pic = sys::WebPPicture::new().map_err(|_| "libwebp: picture init".to_string())?;
        let mut out: Vec<u8> = Vec::with_capacity(width * height / 8);
        pic.use_argb = 0;
        pic.width = width as c_int;
        pic.height = height as c_int;
        pic.writer = Some(append_to_vec);
        pic.custom_ptr = &mut out as *mut Vec<u8> as *mut std::ffi::c_void;
        // SAFETY: the picture is initialised with its size; the buffer holds
        // `height` rows of `stride` bytes (checked above); libwebp copies it
        // into planes it allocates and frees in WebPPictureFree.
        let ok = unsafe {
            sys::WebPPictureImportRGB(&mut pic, rgb.as_ptr(), stride as c_int) != 0
                && sys::WebPEncode(&self.config, &mut pic) != 0
        };
        let code = pic.error_code;
        // SAFETY: frees the planes the import allocated.
        unsafe { sys::WebPPictureFree(&mut pic) };
        if !ok {
            return Err(format!("libwebp encode failed ({code:?})"));
        }
        Ok(out)
    }
}

/// Encodes one YUV 4:2:0 frame as lossy WebP.
///
/// # Errors
/// A message when the settings or the frame are out of WebP's limits or libwebp fails.
pub fn encode_yuv420(frame: &Yuv420<'_>, settings: WebpSettings) -> Result<Vec<u8>, String> {
    WebpEncoder::new(settings)?.encode(frame)
}

fn encode_with(config: &sys::WebPConfig, frame: &Yuv420<'_>) -> Result<Vec<u8>, String> {
    frame.check()?;
    let mut pic = sys::WebPPicture::new().map_err(|_| "libwebp: picture init".to_string())?;
    let mut out: Vec<u8> = Vec::with_capacity(frame.width * frame.height / 8);
    pic.use_argb = 0;
    pic.colorspace = sys::WebPEncCSP::WEBP_YUV420;
    pic.width = frame.width as c_int;
    pic.height = frame.height as c_int;
    // libwebp only reads the planes of a YUV picture it did not allocate.
    pic.y = frame.y.as_ptr() as *mut u8;
    pic.u = frame.u.as_ptr() as *mut u8;
    pic.v = frame.v.as_ptr() as *mut u8;
    pic.y_stride = frame.y_stride as c_int;
    pic.uv_stride = frame.uv_stride as c_int;
    pic.writer = Some(append_to_vec);
    pic.custom_ptr = &mut out as *mut Vec<u8> as *mut std::ffi::c_void;
    // SAFETY: config and picture are initialised; the planes outlive the call
    // and were bounds-checked above; the writer appends to `out`.
    let ok = unsafe { sys::WebPEncode(config, &mut pic) };
    let code = pic.error_code;
    // SAFETY: frees only what libwebp allocated itself (nothing for views).
    unsafe { sys::WebPPictureFree(&mut pic) };
    if ok == 0 {
        return Err(format!("libwebp encode failed ({code:?})"));
    }
    Ok(out)
}

/// Width and height of a WebP image.
///
/// # Errors
/// A message when the bytes are not a WebP image.
pub fn dimensions(data: &[u8]) -> Result<(usize, usize), String> {
    let (mut w, mut h) = (0 as c_int, 0 as c_int);
    // SAFETY: libwebp reads at most `data.len()` bytes.
    let ok = unsafe { sys::WebPGetInfo(data.as_ptr(), data.len(), &mut w, &mut h) };
    if ok == 0 || w <= 0 || h <= 0 {
        return Err(format!("not a WebP image ({} bytes)", data.len()));
    }
    Ok((w as usize, h as usize))
}

/// Decodes a WebP image into `out` as packed RGB (`w * h * 3` bytes),
/// expecting the given size.
///
/// # Errors
/// A message when the bytes are not a WebP image of that size.
pub fn decode_rgb_into(
    data: &[u8],
    width: usize,
    height: usize,
    out: &mut [u8],
) -> Result<(), String> {
    // SAFETY: u8 and MaybeUninit<u8> have the same layout, and the decoder
    // only writes initialised bytes through the view.
    let raw = unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) };
    decode_rgb_raw(data, width, height, raw)
}

/// As [`decode_rgb_into`], into memory that may be uninitialised: on Ok
/// libwebp has written every byte of `out` (all `h` rows of `w * 3`).
fn decode_rgb_raw(
    data: &[u8],
    width: usize,
    height: usize,
    out: &mut [MaybeUninit<u8>],
) -> Result<(), String> {
    let (w, h) = dimensions(data)?;
    if (w, h) != (width, height) {
        return Err(format!("frame is {w}x{h}, expected {width}x{height}"));
    }
    if out.len() != w * h * 3 {
        return Err("output buffer of the wrong size".into());
    }
    // SAFETY: `out` holds exactly h rows of w*3 bytes; libwebp writes within
    // it and, when it returns non-null, has written all of it.
    let p = unsafe {
        sys::WebPDecodeRGBInto(
            data.as_ptr(),
            data.len(),
            out.as_mut_ptr().cast::<u8>(),
            out.len(),
            (w * 3) as c_int,
        )
    };
    if p.is_null() {
        return Err(format!("corrupt WebP frame ({} bytes)", data.len()));
    }
    Ok(())
}

/// Decodes a WebP image to packed RGB with its size.
///
/// # Errors
/// As [`decode_rgb_into`].
pub fn decode_rgb(data: &[u8]) -> Result<(Vec<u8>, usize, usize), String> {
    let (w, h) = dimensions(data)?;
    let rgb = decode_frames(&[data], w, h).map_err(|(_, e)| e)?;
    Ok((rgb, w, h))
}

/// Decodes frames of `width x height` into one buffer of packed RGB, frame
/// after frame (`width * height * 3` bytes each), in parallel when there is
/// enough work. The buffer is not zeroed first: every byte is decoded into.
///
/// # Errors
/// The position of the first frame that does not decode or has another
/// size, and why.
pub fn decode_frames(
    frames: &[&[u8]],
    width: usize,
    height: usize,
) -> Result<Vec<u8>, (usize, String)> {
    use rayon::prelude::*;
    if width > 16383 || height > 16383 {
        return Err((
            0,
            format!("{width}x{height} is beyond WebP's 16383 pixels a side"),
        ));
    }
    let per = width * height * 3;
    let n = per.checked_mul(frames.len()).ok_or_else(|| {
        (
            0,
            format!(
                "{} frames of {width}x{height} overflow memory",
                frames.len()
            ),
        )
    })?;
    let mut data: Vec<u8> = Vec::with_capacity(n);
    let buf = &mut data.spare_capacity_mut()[..n];
    if per > 0 {
        let work = |(i, (out, f)): (usize, (&mut [MaybeUninit<u8>], &&[u8]))| {
            decode_rgb_raw(f, width, height, out).map_err(|e| (i, e))
        };
        if frames.len() > 1 && n > 64 * 1024 {
            crate::util::in_pool(|| {
                buf.par_chunks_mut(per)
                    .zip(frames.par_iter())
                    .enumerate()
                    .try_for_each(work)
            })
            .map_err(|e| (0, e.to_string()))??;
        } else {
            buf.chunks_mut(per)
                .zip(frames.iter())
                .enumerate()
                .try_for_each(work)?;
        }
    }
    // SAFETY: every frame's chunk was fully written by `decode_rgb_raw`
    // (the chunks cover all n bytes), or we returned above.
    unsafe { data.set_len(n) };
    Ok(data)
}

/// Decodes the frames of a window into one RGB u8 tensor `[T, H, W, 3]`,
/// frames in parallel. Every frame must have the first one's size.
///
/// # Errors
/// A message naming the frame that does not decode or has another size.
pub fn decode_window(frames: &[&[u8]]) -> Result<crate::value::Tensor, String> {
    let (w, h) = match frames.first() {
        Some(f) => dimensions(f).map_err(|e| format!("frame 0: {e}"))?,
        None => (0, 0),
    };
    let data = decode_frames(frames, w, h).map_err(|(i, e)| format!("frame {i}: {e}"))?;
    Ok(crate::value::Tensor {
        dtype: crate::dtype::Dtype::UInt8,
        shape: vec![frames.len(), h, w, 3],
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_is_close_and_garbage_is_an_error() {
        let (w, h) = (33usize, 17usize);
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        let y: Vec<u8> = (0..w * h).map(|i| (16 + (i % w) * 6) as u8).collect();
        let u = vec![128u8; cw * ch];
        let v = vec![128u8; cw * ch];
        let f = Yuv420 {
            width: w,
            height: h,
            y: &y,
            y_stride: w,
            u: &u,
            v: &v,
            uv_stride: cw,
        };
        let bytes = encode_yuv420(&f, WebpSettings::try_new(90.0, 4).unwrap()).unwrap();
        assert_eq!(&bytes[..4], b"RIFF");
        let (rgb, dw, dh) = decode_rgb(&bytes).unwrap();
        assert_eq!((dw, dh), (w, h));
        // A grey ramp: R = G = B close to the luma ramp (limited range).
        let px = |x: usize| rgb[(8 * w + x) * 3] as i32;
        assert!(px(30) > px(2) + 100, "{} {}", px(30), px(2));
        assert!(decode_rgb(b"RIFF....WEBPVP8 junk").is_err());
        assert!(decode_rgb(&bytes[..bytes.len() / 2]).is_err());
        // Batches: every frame decoded in place, the first bad one named.
        let many: Vec<&[u8]> = vec![&bytes; 200];
        assert_eq!(decode_frames(&many, w, h).unwrap(), rgb.repeat(200));
        let mut bad = many.clone();
        bad[150] = &bytes[..bytes.len() / 2];
        assert_eq!(decode_frames(&bad, w, h).unwrap_err().0, 150);
        assert!(decode_frames(&many, w + 1, h).is_err(), "size mismatch");
        assert!(decode_frames(&[], w, h).unwrap().is_empty());
        let small = Yuv420 { y: &y[..10], ..f };
        assert!(encode_yuv420(&small, WebpSettings::default()).is_err());
        // The RGB input of the reference's encoder: the decoded ramp back in.
        let enc = WebpEncoder::new(WebpSettings::try_new(90.0, 4).unwrap()).unwrap();
        let again = enc.encode_rgb(&rgb, w, h, w * 3).unwrap();
        let (rgb2, dw2, dh2) = decode_rgb(&again).unwrap();
        assert_eq!((dw2, dh2), (w, h));
        let px2 = |x: usize| rgb2[(8 * w + x) * 3] as i32;
        assert!((px2(30) - px(30)).abs() < 12 && (px2(2) - px(2)).abs() < 12);
        assert!(enc.encode_rgb(&rgb[..10], w, h, w * 3).is_err());
        assert!(enc.encode_rgb(&rgb, w, h, w).is_err());
    }
}
