//! Decode limits against caches that ask for too much: an image header
//! claiming 400 megapixels, video frames and windows larger than the read
//! allows, all refused with errors naming the limit before anything is
//! allocated, and allowed when the user raises the limit.

use shardset::features::limits::DecodeLimits;
use shardset::{open_cache_with, Error, Example, Feature, Features, OpenOptions, WindowSpec};

use crate::common::*;

/// The setting an error says was exceeded, if it is a limit error.
fn exceeded(e: &Error) -> Option<&'static str> {
    match e {
        Error::LimitExceeded { setting, .. } => Some(setting),
        _ => None,
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A real 4x4 PNG whose header (with a valid CRC) says `side` x `side`.
fn png_claiming(side: u32) -> Vec<u8> {
    let img = shardset::ImageData::new(4, 4, 3, vec![7u8; 48]).unwrap();
    let mut png = shardset::features::image::encode(&img, shardset::ImageFormat::Png).unwrap();
    png[16..20].copy_from_slice(&side.to_be_bytes());
    png[20..24].copy_from_slice(&side.to_be_bytes());
    // The IHDR CRC covers its type and data (bytes 12..29).
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

/// A cache of one image cell holding `bytes`, whose read under the default
/// limits must fail naming the claimed size `claim` and `max_image_pixels`.
fn refused_by_default(bytes: Vec<u8>, claim: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let f = Features::new().with("img", Feature::image());
    shardset::write_arrow_cache(
        [Example::new().with("img", bytes)],
        &f,
        &dir,
        &shardset::ArrowWriteOptions::default(),
    )
    .unwrap();
    let c = open_cache_with(&dir, &OpenOptions::default()).unwrap();
    let e = c.backend.get(0).unwrap_err();
    assert!(
        matches!(&e, Error::Decode { column, reason } if column == "img"
            && reason.contains(claim) && reason.contains("max_image_pixels")),
        "{claim}: {e}"
    );
    (tmp, dir)
}

#[test]
fn an_image_header_above_the_pixel_limit_is_refused_before_decoding() {
    let (_t, dir) = refused_by_default(png_claiming(20_000), "20000x20000");
    // Raised, the limit no longer stops it: the decoder's own checks do.
    let raised = DecodeLimits::default()
        .try_with_max_image_pixels(1 << 40)
        .unwrap();
    let c = open_cache_with(&dir, &OpenOptions::default().with_decode_limits(raised)).unwrap();
    let e = c.backend.get(0).unwrap_err().to_string();
    assert!(!e.contains("max_image_pixels"), "{e}");
}

/// A real 4x4 lossless WebP whose VP8L header says 16383 x 16383 (268
/// megapixels, about the most a WebP can claim).
fn webp_claiming_the_most() -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut out)
        .encode(&[7u8; 48], 4, 4, image::ExtendedColorType::Rgb8)
        .unwrap();
    assert_eq!(&out[12..16], b"VP8L");
    // After the 0x2f signature: 14 bits width - 1, 14 bits height - 1, alpha, version.
    // (16384 itself wraps to 0 in the decoder's 14-bit arithmetic.)
    let mut bits = u32::from_le_bytes(out[21..25].try_into().unwrap());
    bits = (bits & !((1 << 28) - 1)) | 16382 | (16382 << 14);
    out[21..25].copy_from_slice(&bits.to_le_bytes());
    out
}

/// A real 4x4 TIFF whose first directory says 65535 x 65535.
fn tiff_claiming(side: u16) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::ImageEncoder::write_image(
        image::codecs::tiff::TiffEncoder::new(&mut out),
        &[7u8; 48],
        4,
        4,
        image::ExtendedColorType::Rgb8,
    )
    .unwrap();
    let mut t = out.into_inner();
    assert_eq!(&t[..4], b"II*\0");
    let ifd = u32::from_le_bytes(t[4..8].try_into().unwrap()) as usize;
    let n = u16::from_le_bytes(t[ifd..ifd + 2].try_into().unwrap()) as usize;
    for e in 0..n {
        let at = ifd + 2 + 12 * e;
        let tag = u16::from_le_bytes(t[at..at + 2].try_into().unwrap());
        let kind = u16::from_le_bytes(t[at + 2..at + 4].try_into().unwrap());
        if tag == 256 || tag == 257 {
            // SHORT (3) or LONG (4), stored in the entry itself.
            t[at + 8..at + 12].fill(0);
            if kind == 3 {
                t[at + 8..at + 10].copy_from_slice(&side.to_le_bytes());
            } else {
                t[at + 8..at + 12].copy_from_slice(&u32::from(side).to_le_bytes());
            }
        }
    }
    t
}

#[test]
fn webp_and_tiff_headers_above_the_limit_are_refused_before_decoding() {
    for (name, bytes, claim) in [
        ("webp", webp_claiming_the_most(), "16383x16383"),
        ("tiff", tiff_claiming(65535), "65535x65535"),
    ] {
        let info = shardset::features::image::probe(&bytes).unwrap();
        assert!(
            info.width.unwrap() > 16_000,
            "{name}: the header's size is read: {info:?}"
        );
        refused_by_default(bytes, claim);
    }
}

#[cfg(feature = "video")]
#[test]
fn frames_and_windows_above_the_limits_are_refused_at_open() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let small = DecodeLimits::default()
        .try_with_max_frame_pixels(100)
        .unwrap();
    let e = open_cache_with(&dir, &OpenOptions::default().with_decode_limits(small)).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::LimitExceeded {
                setting: "max_frame_pixels",
                limit: 100,
                ..
            }
        ),
        "{e}"
    );
    let few = DecodeLimits::default()
        .try_with_max_window_frames(3)
        .unwrap();
    let e = open_cache_with(
        &dir,
        &OpenOptions::default()
            .with_decode_limits(few)
            .with_windows(WindowSpec::try_new(4, 0, 1).unwrap()),
    )
    .unwrap_err();
    assert_eq!(exceeded(&e), Some("max_window_frames"), "{e}");
    assert!(e.to_string().contains("raise the limit"), "{e}");
    // Within the limits it opens and reads.
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(3, 0, 1).unwrap()),
    )
    .unwrap();
    assert!(c.backend.get(0).is_ok());
    // The options carry their limits through their stored form.
    let o = OpenOptions::default().with_decode_limits(few);
    let back: OpenOptions = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
    assert_eq!(back.decode_limits(), few);
}

#[cfg(feature = "video")]
#[test]
fn a_video_cell_decoded_at_read_time_stays_within_the_limits() {
    use shardset::{Dataset, Value, VideoDecode};
    let (_t, dir) = golden_copy("arrow_video_bytes");
    let ds = Dataset::new(shardset::open_cache(&dir).unwrap());
    let Value::Video(r) = ds.get(0).unwrap().get("video").unwrap().clone() else {
        panic!("a video cell")
    };
    let p = VideoDecode::new(4);
    // The clips are 64x48: 3,072 pixels a frame.
    let tight = DecodeLimits::default()
        .try_with_max_frame_pixels(3_000)
        .unwrap();
    let e = p.decode_within(&r, 0, &tight).unwrap_err();
    assert_eq!(exceeded(&e), Some("max_frame_pixels"), "{e}");
    let few = DecodeLimits::default()
        .try_with_max_window_frames(3)
        .unwrap();
    let e = p.decode_within(&r, 0, &few).unwrap_err();
    assert_eq!(exceeded(&e), Some("max_window_frames"), "{e}");
    let enough = DecodeLimits::default()
        .try_with_max_frame_pixels(3_072)
        .unwrap();
    assert_eq!(p.decode_within(&r, 0, &enough).unwrap().frames.shape[0], 4);
}
