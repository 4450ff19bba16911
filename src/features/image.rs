//! Image encoding (pixels to PNG/JPEG), validation of encoded bytes, and decoding back to pixels.

use std::io::Cursor;

use super::ImageFormat;
use crate::value::ImageData;

/// A recognised encoded-image container, from its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// PNG
    Png,
    /// JPEG
    Jpeg,
    /// GIF
    Gif,
    /// WebP
    Webp,
    /// BMP
    Bmp,
    /// TIFF
    Tiff,
}

impl Container {
    /// The usual upper-case name (`PNG`, `JPEG`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Container::Png => "PNG",
            Container::Jpeg => "JPEG",
            Container::Gif => "GIF",
            Container::Webp => "WEBP",
            Container::Bmp => "BMP",
            Container::Tiff => "TIFF",
        }
    }

    /// The usual file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Png => "png",
            Container::Jpeg => "jpg",
            Container::Gif => "gif",
            Container::Webp => "webp",
            Container::Bmp => "bmp",
            Container::Tiff => "tif",
        }
    }
}

/// What an encoded image's header says, read without decoding pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The container.
    pub container: Container,
    /// Width in pixels, when the header was read (every container but a
    /// GIF shorter than its header).
    pub width: Option<u32>,
    /// Height in pixels, when the header was read.
    pub height: Option<u32>,
}

/// Identifies an encoded image and reads its size from the header: PNG and
/// JPEG headers are parsed in full (a damaged header is an error), GIF and BMP
/// sizes are read from fixed offsets, WebP and TIFF headers by their decoders
/// (no pixel decoded).
///
/// # Errors
/// A message for bytes that are not a recognised image or whose header is damaged.
pub fn probe(bytes: &[u8]) -> Result<ImageInfo, String> {
    let container =
        sniff(bytes).ok_or("not a recognised image (PNG, JPEG, GIF, WebP, BMP, TIFF)")?;
    let (width, height) = match container {
        Container::Png => {
            let reader = png::Decoder::new(Cursor::new(bytes))
                .read_info()
                .map_err(|e| format!("damaged PNG: {e}"))?;
            let info = reader.info();
            (Some(info.width), Some(info.height))
        }
        Container::Jpeg => {
            let mut dec = jpeg_decoder::Decoder::new(Cursor::new(bytes));
            dec.read_info().map_err(|e| format!("damaged JPEG: {e}"))?;
            let info = dec.info().ok_or("damaged JPEG: no frame header")?;
            (Some(info.width as u32), Some(info.height as u32))
        }
        Container::Gif if bytes.len() >= 10 => (
            Some(u16::from_le_bytes([bytes[6], bytes[7]]) as u32),
            Some(u16::from_le_bytes([bytes[8], bytes[9]]) as u32),
        ),
        Container::Bmp => {
            let w = i32::from_le_bytes(bytes[18..22].try_into().expect("4 bytes"));
            let h = i32::from_le_bytes(bytes[22..26].try_into().expect("4 bytes"));
            (Some(w.unsigned_abs()), Some(h.unsigned_abs()))
        }
        Container::Webp | Container::Tiff => {
            // The decoders read the header (WebP's VP8/VP8L/VP8X chunk,
            // TIFF's first directory) and no pixel.
            use image::ImageDecoder;
            let dims = if container == Container::Webp {
                image::codecs::webp::WebPDecoder::new(Cursor::new(bytes)).map(|d| d.dimensions())
            } else {
                image::codecs::tiff::TiffDecoder::new(Cursor::new(bytes)).map(|d| d.dimensions())
            };
            let (w, h) = dims.map_err(|e| format!("damaged {}: {e}", container.name()))?;
            (Some(w), Some(h))
        }
        _ => (None, None),
    };
    Ok(ImageInfo {
        container,
        width,
        height,
    })
}

/// Identifies an encoded image by its magic bytes.
pub fn sniff(bytes: &[u8]) -> Option<Container> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Container::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(Container::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(Container::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(Container::Webp)
    } else if bytes.starts_with(b"BM") && bytes.len() >= 26 {
        Some(Container::Bmp)
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some(Container::Tiff)
    } else {
        None
    }
}

/// How PNG images are deflated when pixels are encoded. Decoders read
/// either; only size and encode time differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PngCompression {
    /// fdeflate's fast mode (default): several times faster than zlib level
    /// 6, a few percent larger on photographs.
    #[default]
    Fast,
    /// zlib (deflate) level 0 to 9 with adaptive row filters; 6 is what PIL,
    /// the reference's encoder, writes by default.
    Level(u8),
}

impl PngCompression {
    /// A zlib level from 0 to 9.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] above 9.
    pub fn level(n: u8) -> crate::error::Result<Self> {
        if n > 9 {
            return Err(crate::error::Error::InvalidArgument(format!(
                "PNG compression level must be 0 to 9, got {n}"
            )));
        }
        Ok(PngCompression::Level(n))
    }
}

/// Encodes pixels (PNG with the default [`PngCompression`]).
///
/// # Errors
/// A message when the encoder refuses the buffer.
pub fn encode(img: &ImageData, format: ImageFormat) -> Result<Vec<u8>, String> {
    encode_with(img, format, PngCompression::default())
}

/// Encodes pixels, PNG deflated as `png` says.
///
/// # Errors
/// A message when the encoder refuses the buffer.
pub fn encode_with(
    img: &ImageData,
    format: ImageFormat,
    png: PngCompression,
) -> Result<Vec<u8>, String> {
    match format {
        ImageFormat::Png => encode_png(img, png),
        ImageFormat::Jpeg => encode_jpeg(img),
    }
}

fn encode_png(img: &ImageData, png: PngCompression) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(img.data.len() / 2 + 128);
    {
        let mut enc = png::Encoder::new(&mut out, img.width, img.height);
        enc.set_color(match img.channels {
            1 => png::ColorType::Grayscale,
            2 => png::ColorType::GrayscaleAlpha,
            3 => png::ColorType::Rgb,
            _ => png::ColorType::Rgba,
        });
        enc.set_depth(png::BitDepth::Eight);
        match png {
            // fdeflate-backed "Fast" keeps encoding several times faster than
            // zlib level 6 at a size within a few percent of it on natural images.
            PngCompression::Fast => enc.set_compression(png::Compression::Fast),
            PngCompression::Level(n) => {
                enc.set_deflate_compression(png::DeflateCompression::Level(n));
                enc.set_filter(png::Filter::Adaptive);
            }
        }
        let mut w = enc.write_header().map_err(|e| e.to_string())?;
        w.write_image_data(&img.data).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn encode_jpeg(img: &ImageData) -> Result<Vec<u8>, String> {
    let (w, h) = (
        u16::try_from(img.width).map_err(|_| "JPEG width above 65535")?,
        u16::try_from(img.height).map_err(|_| "JPEG height above 65535")?,
    );
    let mut out = Vec::new();
    let enc = jpeg_encoder::Encoder::new(&mut out, 75);
    match img.channels {
        1 => enc.encode(&img.data, w, h, jpeg_encoder::ColorType::Luma),
        3 => enc.encode(&img.data, w, h, jpeg_encoder::ColorType::Rgb),
        4 => enc.encode(&img.data, w, h, jpeg_encoder::ColorType::Rgba),
        c => return Err(format!("JPEG cannot store {c}-channel images; use PNG")),
    }
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// GIF (first frame), WebP, BMP and TIFF through the `image` crate: 8-bit
/// gray, RGB or RGBA as the file has them (deeper samples are scaled to 8
/// bits), within [`MAX_DECODED_BYTES`].
fn decode_with_image(bytes: &[u8], format: image::ImageFormat) -> Result<ImageData, String> {
    let mut reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODED_BYTES as u64);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| e.to_string())?;
    let (w, h) = (img.width(), img.height());
    let color = img.color();
    let (channels, data) = match (color.channel_count(), color.has_alpha()) {
        (1, _) => (1, img.into_luma8().into_raw()),
        (2, _) => (2, img.into_luma_alpha8().into_raw()),
        (_, true) => (4, img.into_rgba8().into_raw()),
        _ => (3, img.into_rgb8().into_raw()),
    };
    ImageData::new(h, w, channels, data).map_err(|e| e.to_string())
}

/// Largest decoded image accepted (bytes of pixels): a corrupt or hostile
/// header must not make a reader allocate gigabytes.
pub const MAX_DECODED_BYTES: usize = 1 << 30;

/// Decodes encoded image bytes to pixels (PNG and JPEG).
///
/// # Errors
/// A message for corrupt bytes or a container this build does not decode.
pub fn decode(bytes: &[u8]) -> Result<ImageData, String> {
    match sniff(bytes) {
        Some(Container::Png) => decode_png(bytes),
        Some(Container::Jpeg) => decode_jpeg(bytes),
        Some(Container::Gif) => decode_with_image(bytes, image::ImageFormat::Gif),
        Some(Container::Webp) => decode_with_image(bytes, image::ImageFormat::WebP),
        Some(Container::Bmp) => decode_with_image(bytes, image::ImageFormat::Bmp),
        Some(Container::Tiff) => decode_with_image(bytes, image::ImageFormat::Tiff),
        None => Err("bytes are not a recognised image".into()),
    }
}

fn decode_png(bytes: &[u8]) -> Result<ImageData, String> {
    let mut dec = png::Decoder::new(Cursor::new(bytes));
    // Palette to RGB(A), 16-bit to 8-bit, low bit depths to 8: u8 pixels always.
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().map_err(|e| e.to_string())?;
    let size = reader
        .output_buffer_size()
        .ok_or("PNG too large to decode")?;
    if size > MAX_DECODED_BYTES {
        let info = reader.info();
        return Err(format!(
            "PNG of {}x{} needs {size} bytes decoded, above the {MAX_DECODED_BYTES}-byte limit",
            info.width, info.height
        ));
    }
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    buf.truncate(info.buffer_size());
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err("unexpanded palette PNG".into()),
    };
    ImageData::new(info.height, info.width, channels, buf).map_err(|e| e.to_string())
}

fn decode_jpeg(bytes: &[u8]) -> Result<ImageData, String> {
    let mut dec = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    dec.set_max_decoding_buffer_size(MAX_DECODED_BYTES);
    // jpeg-decoder splits a decode over the rayon pool of the calling
    // thread, which outside any pool is rayon's global one: a forked child
    // inherits that without its threads and would wait for ever. So the
    // decode runs on the library's per-process pool (in place when already
    // on a pool).
    let pixels = crate::util::in_pool(|| dec.decode())
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let info = dec.info().ok_or("JPEG without header")?;
    let (h, w) = (info.height as u32, info.width as u32);
    match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => ImageData::new(h, w, 1, pixels),
        jpeg_decoder::PixelFormat::RGB24 => ImageData::new(h, w, 3, pixels),
        jpeg_decoder::PixelFormat::L16 => {
            ImageData::new(h, w, 1, pixels.chunks_exact(2).map(|p| p[0]).collect())
        }
        jpeg_decoder::PixelFormat::CMYK32 => {
            // Adobe JPEGs store inverted CMYK; this matches PIL's RGB conversion.
            let rgb = pixels
                .chunks_exact(4)
                .flat_map(|p| {
                    let k = p[3] as u16;
                    [
                        (p[0] as u16 * k / 255) as u8,
                        (p[1] as u16 * k / 255) as u8,
                        (p[2] as u16 * k / 255) as u8,
                    ]
                })
                .collect();
            ImageData::new(h, w, 3, rgb)
        }
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(h: u32, w: u32, c: u8) -> ImageData {
        let data = (0..h * w * c as u32).map(|i| (i * 7 % 251) as u8).collect();
        ImageData::new(h, w, c, data).unwrap()
    }

    #[test]
    fn png_roundtrip_every_channel_count() {
        for c in 1..=4 {
            let img = gradient(7, 5, c);
            let bytes = encode(&img, ImageFormat::Png).unwrap();
            assert_eq!(sniff(&bytes), Some(Container::Png));
            assert_eq!(decode(&bytes).unwrap(), img);
        }
    }

    #[test]
    fn jpeg_roundtrip_shape() {
        let img = gradient(16, 24, 3);
        let bytes = encode(&img, ImageFormat::Jpeg).unwrap();
        assert_eq!(sniff(&bytes), Some(Container::Jpeg));
        let back = decode(&bytes).unwrap();
        assert_eq!((back.height, back.width, back.channels), (16, 24, 3));
        assert!(encode(&gradient(2, 2, 2), ImageFormat::Jpeg).is_err());
    }

    #[test]
    fn a_header_claiming_a_huge_image_is_an_error_not_an_allocation() {
        let mut png = encode(&gradient(4, 4, 3), ImageFormat::Png).unwrap();
        // IHDR width and height are the 4-byte fields at 16 and 20.
        png[16..20].copy_from_slice(&60_000u32.to_be_bytes());
        png[20..24].copy_from_slice(&60_000u32.to_be_bytes());
        let e = decode(&png).unwrap_err();
        assert!(
            e.contains("limit") || e.contains("CRC") || e.contains("crc"),
            "{e}"
        );
    }

    #[test]
    fn probe_reads_sizes_and_refuses_damaged_headers() {
        let png = encode(&gradient(7, 5, 3), ImageFormat::Png).unwrap();
        let i = probe(&png).unwrap();
        assert_eq!(
            (i.container, i.width, i.height),
            (Container::Png, Some(5), Some(7))
        );
        let jpg = encode(&gradient(16, 24, 3), ImageFormat::Jpeg).unwrap();
        let i = probe(&jpg).unwrap();
        assert_eq!((i.width, i.height), (Some(24), Some(16)));
        assert!(probe(&png[..20]).is_err());
        assert!(probe(b"not an image").is_err());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"hello").is_err());
        let mut png = encode(&gradient(4, 4, 3), ImageFormat::Png).unwrap();
        png.truncate(png.len() / 2);
        assert!(decode(&png).is_err());
    }
}
