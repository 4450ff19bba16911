//! Pictures for the report, inline as `data:` URIs so the file opens with
//! no network: thumbnails through the input pipeline's own image plan
//! (decode within the decode limits, antialiased resize of the shorter
//! side, centre crop: the pixels a training loop would see), encoded as
//! JPEG by the `jpeg-encoder` the caches already use. A video window is one
//! vertical strip of its frames that CSS steps through, so an animated
//! thumbnail needs neither an animated-image encoder nor a script.

use base64::Engine as _;

use crate::error::{Error, Result};
use crate::features::limits::DecodeLimits;
use crate::pipeline::ops::{ImagePlan, Op, Placement, ResizeTo, SampleRng};
use crate::value::ImageData;

/// JPEG quality of the thumbnails: small files, no visible blocks at 96 px.
const QUALITY: u8 = 82;

/// The plan that makes a `side` x `side` RGB thumbnail.
fn plan(side: u32) -> Result<ImagePlan> {
    ImagePlan::new(
        "thumbnail",
        &[
            Op::Resize {
                size: ResizeTo::Shorter(side),
            },
            Op::CenterCrop { size: [side, side] },
        ],
    )
}

/// `rgb` (`h` x `w` x 3) as a `data:image/jpeg` URI.
pub fn jpeg_uri(rgb: &[u8], w: u32, h: u32) -> Result<String> {
    let (w16, h16) = (
        u16::try_from(w).map_err(|_| Error::InvalidArgument(format!("width {w} too large")))?,
        u16::try_from(h).map_err(|_| Error::InvalidArgument(format!("height {h} too large")))?,
    );
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, QUALITY)
        .encode(rgb, w16, h16, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| Error::InvalidArgument(format!("JPEG encoding of a thumbnail: {e}")))?;
    Ok(format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(out)
    ))
}

/// A square thumbnail of an encoded image (JPEG, PNG, WebP, ...).
///
/// # Errors
/// [`Error::LimitExceeded`] above `limits`; [`Error::Decode`] for bytes
/// that do not decode.
pub fn thumbnail(encoded: &[u8], side: u32, limits: &DecodeLimits) -> Result<String> {
    let plan = plan(side)?;
    let mut out = vec![0u8; plan.out_bytes()];
    plan.run_encoded(
        encoded,
        limits,
        &mut SampleRng::new(0, 0, 0),
        Placement::Hwc,
        &mut out,
    )?;
    jpeg_uri(&out, side, side)
}

/// Square thumbnails of RGB frames (`[T, H, W, 3]` u8, C order) stacked
/// into one vertical strip `side` wide and `T * side` high.
///
/// # Errors
/// [`Error::InvalidArgument`] when `data` is not `T * H * W * 3` bytes.
#[cfg_attr(not(feature = "video"), allow(dead_code))] // video windows only
pub fn strip(data: &[u8], t: usize, h: u32, w: u32, side: u32) -> Result<String> {
    let frame = h as usize * w as usize * 3;
    if t == 0 || data.len() != t * frame {
        return Err(Error::InvalidArgument(format!(
            "a window of {t} frames of {w}x{h} holds {} bytes, not {}",
            data.len(),
            t * frame
        )));
    }
    let plan = plan(side)?;
    let step = plan.out_bytes();
    let mut out = vec![0u8; step * t];
    for (i, pixels) in data.chunks_exact(frame).enumerate() {
        let img = ImageData {
            height: h,
            width: w,
            channels: 3,
            data: pixels.to_vec(),
        };
        let params = plan.draw(h, w, &mut SampleRng::new(0, 0, 0));
        plan.run_pixels(
            &img,
            &params,
            Placement::Hwc,
            &mut out[i * step..(i + 1) * step],
        )?;
    }
    jpeg_uri(&out, side, side * t as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strip_is_one_jpeg_of_every_frame() {
        let (t, h, w) = (3usize, 20u32, 30u32);
        let data: Vec<u8> = (0..t * h as usize * w as usize * 3)
            .map(|i| (i % 251) as u8)
            .collect();
        let uri = strip(&data, t, h, w, 16).unwrap();
        let jpeg = base64::engine::general_purpose::STANDARD
            .decode(uri.trim_start_matches("data:image/jpeg;base64,"))
            .unwrap();
        let mut d = jpeg_decoder::Decoder::new(&jpeg[..]);
        d.decode().unwrap();
        let info = d.info().unwrap();
        assert_eq!((info.width, info.height), (16, 48));
        assert!(strip(&data[1..], t, h, w, 16).is_err());
    }
}
