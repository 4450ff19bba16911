//! Encoded image to finished tensor: the header's size is checked against
//! the decode limits before any pixel buffer exists, the params are drawn
//! for that size, and a JPEG whose selected crop still covers the output at
//! a quarter or an eighth of its size is decoded at that DCT scale (as
//! PIL's `draft`), which skips most of the decode and of the resize.
//!
//! Decoders, measured on 256x256 and 500x375 q90 photographs (one core,
//! release; µs per image, 256² / 500x375):
//!
//! | decoder                     | full        | 1/2         | 1/4         |
//! |-----------------------------|-------------|-------------|-------------|
//! | jpeg-decoder 0.3            | 340-395 / 815-965 | 235-260 / 690-935 | 175-260 / 480-510 |
//! | zune-jpeg 0.5               | 172-192 / 445-563 | —           | —           |
//! | libjpeg-turbo 2.1 (system)  | 140-172 / 406-441 | 104-121 / 281-306 | 87-111 / 245-270 |
//!
//! zune-jpeg decodes in about half jpeg-decoder's time, and libjpeg-turbo
//! is only 1.1-1.2x faster than it at full scale (below the 1.3x that would
//! pay for a system C library in the wheel), so full decodes are
//! zune-jpeg's. zune-jpeg has no DCT scaling and jpeg-decoder's 1/2 is
//! slower than zune-jpeg's full decode, so only the 1/4 and 1/8 scales,
//! which jpeg-decoder reaches about as fast as zune-jpeg's full decode and
//! which leave 16-64x fewer pixels to resize, go to jpeg-decoder.

use std::io::Cursor;

use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use super::plan::{ImagePlan, Params, Placement};
use super::rng::SampleRng;
use super::run::{self, geometry_steps, Geo};
use super::scratch;
use crate::error::{Error, Result};
use crate::features::image::{self as codec, Container};
use crate::features::limits::DecodeLimits;
use crate::value::ImageData;

/// The header's (h, w), read without decoding pixels.
fn header_size(bytes: &[u8]) -> std::result::Result<(Container, u32, u32), String> {
    let info = codec::probe(bytes)?;
    if let (Some(w), Some(h)) = (info.width, info.height) {
        return Ok((info.container, h, w));
    }
    let format = match info.container {
        Container::Webp => image::ImageFormat::WebP,
        Container::Tiff => image::ImageFormat::Tiff,
        Container::Gif => image::ImageFormat::Gif,
        other => return Err(format!("{} header without a size", other.name())),
    };
    let (w, h) = image::ImageReader::with_format(Cursor::new(bytes), format)
        .into_dimensions()
        .map_err(|e| format!("damaged {} header: {e}", info.container.name()))?;
    Ok((info.container, h, w))
}

/// The DCT scale denominator (4 or 8) at which the source window of the
/// first resample still covers its output, if any: crops (without padding)
/// and flips may come before it, nothing else needs the full pixels.
pub(super) fn reduction(plan: &ImagePlan, params: &Params) -> Option<u32> {
    let (sh, sw) = params.src;
    let (mut top, mut left, mut h, mut w) = (0i64, 0i64, sh, sw);
    let mut flip = false;
    for step in geometry_steps(plan, params) {
        match step {
            Geo::Crop {
                top: t,
                left: l,
                h: ch,
                w: cw,
            } => {
                let l = if flip {
                    i64::from(w) - l - i64::from(cw)
                } else {
                    l
                };
                (top, left, h, w) = (top + t, left + l, ch, cw);
                if top < 0 || left < 0 || top + i64::from(h) > i64::from(sh) {
                    return None;
                }
                if left + i64::from(w) > i64::from(sw) {
                    return None;
                }
            }
            Geo::Flip => flip = !flip,
            Geo::Resize { h: oh, w: ow } => {
                return [8, 4].into_iter().find(|&d| h / d >= oh && w / d >= ow);
            }
        }
    }
    None
}

/// A JPEG at 1/`d` of its size (jpeg-decoder's DCT scaling).
fn jpeg_scaled(bytes: &[u8], h: u32, w: u32, d: u32) -> std::result::Result<ImageData, String> {
    let mut dec = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    dec.set_max_decoding_buffer_size(codec::MAX_DECODED_BYTES);
    let want = |n: u32| u16::try_from(n.div_ceil(d)).unwrap_or(u16::MAX);
    dec.scale(want(w), want(h)).map_err(|e| e.to_string())?;
    // jpeg-decoder spreads over the calling thread's rayon pool: the
    // library's own per-process one (see features::image).
    let pixels = crate::util::in_pool(|| dec.decode())
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let info = dec.info().ok_or("JPEG without a frame header")?;
    let (h, w) = (u32::from(info.height), u32::from(info.width));
    match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => ImageData::new(h, w, 1, pixels),
        jpeg_decoder::PixelFormat::RGB24 => ImageData::new(h, w, 3, pixels),
        // Rare formats: decode them whole instead.
        _ => return jpeg_full(bytes),
    }
    .map_err(|e| e.to_string())
}

/// A JPEG at full size (zune-jpeg), grey kept as one channel, into one of
/// the thread's reused buffers (give it back with [`scratch::give`]).
fn jpeg_full(bytes: &[u8]) -> std::result::Result<ImageData, String> {
    let options = |out| {
        DecoderOptions::default()
            .jpeg_set_out_colorspace(out)
            .set_max_width(usize::from(u16::MAX))
            .set_max_height(usize::from(u16::MAX))
    };
    let open = |out| -> std::result::Result<_, String> {
        let mut dec = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options(out));
        dec.decode_headers().map_err(|e| e.to_string())?;
        Ok(dec)
    };
    // The headers are read once for a colour image; a grey one (rare) is
    // opened again to be decoded as one channel.
    let mut dec = open(ColorSpace::RGB)?;
    let grey = dec.input_colorspace() == Some(ColorSpace::Luma);
    if grey {
        dec = open(ColorSpace::Luma)?;
    }
    let size = dec
        .output_buffer_size()
        .ok_or("JPEG without a frame header")?;
    let info = dec.info().ok_or("JPEG without a frame header")?;
    let mut pixels = scratch::take(size);
    if let Err(e) = dec.decode_into(&mut pixels) {
        scratch::give(pixels);
        return Err(e.to_string());
    }
    let channels = if grey { 1 } else { 3 };
    ImageData::new(
        u32::from(info.height),
        u32::from(info.width),
        channels,
        pixels,
    )
    .map_err(|e| e.to_string())
}

impl ImagePlan {
    /// Decodes encoded bytes (JPEG, PNG, WebP; GIF, BMP, TIFF through the
    /// library's decoders), checks the header's size against
    /// `limits.max_image_pixels` before decoding, draws params, and runs
    /// (see [`run_pixels`](Self::run_pixels)); a JPEG is decoded at a
    /// reduced DCT scale when the selected crop still covers the output.
    ///
    /// # Errors
    /// [`Error::LimitExceeded`] for an image above the limit;
    /// [`Error::Decode`] naming the column and what was wrong for bytes
    /// that do not decode; see [`run_pixels`](Self::run_pixels).
    pub fn run_encoded(
        &self,
        encoded: &[u8],
        limits: &DecodeLimits,
        rng: &mut SampleRng,
        place: Placement,
        out: &mut [u8],
    ) -> Result<()> {
        let fail = |why: String| Error::decode(&self.column, why);
        let (container, h, w) = header_size(encoded).map_err(fail)?;
        let px = u64::from(h) * u64::from(w);
        if px > limits.max_image_pixels() {
            return Err(Error::LimitExceeded {
                what: format!(
                    "column '{}': an image of {w}x{h} is {px} pixels",
                    self.column
                ),
                limit: limits.max_image_pixels(),
                setting: "max_image_pixels",
            });
        }
        let params = self.draw(h, w, rng);
        let img = match (container, reduction(self, &params)) {
            (Container::Jpeg, Some(d)) => jpeg_scaled(encoded, h, w, d),
            (Container::Jpeg, None) => jpeg_full(encoded),
            _ => codec::decode(encoded),
        }
        .map_err(|e| fail(format!("the {} does not decode: {e}", container.name())))?;
        let full = (img.height, img.width) == (h, w);
        let reduced = img.height <= h && img.width <= w && container == Container::Jpeg;
        if !full && !reduced {
            return Err(fail(format!(
                "the header says {w}x{h} but the pixels are {}x{}",
                img.width, img.height
            )));
        }
        let done = run::run(self, &img, &params, place, out);
        scratch::give(img.data);
        done
    }
}
