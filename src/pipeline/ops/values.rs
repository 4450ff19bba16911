//! The value ops (ToDtype, Normalize) and the last pass over the pixels.
//!
//! Every value op maps one channel's element to one element, so the whole
//! chain is a function of (channel, u8 level): it is computed once per plan
//! into a table of 3 × 256 output elements, each step rounded to the dtype it
//! has at that point (f16 arithmetic in f16, as torch's), and the last pass
//! only looks values up. That pass also mirrors, reads the crop window
//! (zeros outside the image: CenterCrop's padding), expands grey to RGB and
//! writes channels last or as planes: one read and one write per element.
//!
//! The table is applied after the geometric ops, so a resize that follows a
//! float ToDtype resamples u8 levels rather than floats (within half a level
//! of torchvision's), and padding is zero before the value ops.

use half::{bf16, f16};

use super::spec::{Op, OutDtype};
use crate::error::{Error, Result};

/// The output element of each (channel, u8 level), as native-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Lut {
    size: usize,
    /// `(c * 256 + level) * size ..` is one element.
    bytes: Vec<u8>,
}

/// `x` rounded to what `dtype` holds.
fn round_to(dtype: OutDtype, x: f32) -> f32 {
    match dtype {
        OutDtype::Float16 => f16::from_f32(x).to_f32(),
        OutDtype::Bfloat16 => bf16::from_f32(x).to_f32(),
        OutDtype::Float32 | OutDtype::Uint8 => x,
    }
}

/// Runs the value ops on one element of channel `c`.
fn chain(ops: &[Op], c: usize, level: u8) -> (OutDtype, f32) {
    let mut dtype = OutDtype::Uint8;
    let mut x = f32::from(level);
    for op in ops {
        match op {
            Op::ToDtype { dtype: to, scale } => {
                x = match (dtype.is_float(), to.is_float(), *scale) {
                    (_, _, _) if dtype == *to => x,
                    // uint8 -> float: `to(dtype).mul_(1 / 255)`.
                    (false, true, true) => round_to(*to, x * (1.0f64 / 255.0) as f32),
                    // float -> uint8: `mul(255 + 1 - 1e-3).to(uint8)`, in the float dtype.
                    (true, false, true) => round_to(dtype, x * (256.0 - 1e-3))
                        .trunc()
                        .clamp(0.0, 255.0),
                    (true, false, false) => x.trunc().clamp(0.0, 255.0),
                    _ => round_to(*to, x),
                };
                dtype = *to;
            }
            Op::Normalize { mean, std } => {
                let pick = |v: &[f32]| round_to(dtype, v[if v.len() == 1 { 0 } else { c }]);
                x = round_to(dtype, x - pick(mean));
                x = round_to(dtype, x / pick(std));
            }
            _ => {}
        }
    }
    (dtype, x)
}

impl Lut {
    /// The table of `ops` whose output is `dtype`.
    pub(super) fn new(ops: &[Op], dtype: OutDtype) -> Lut {
        let mut bytes = Vec::with_capacity(3 * 256 * dtype.size());
        for c in 0..3 {
            for level in 0..=255u8 {
                let (_, x) = chain(ops, c, level);
                match dtype {
                    OutDtype::Uint8 => bytes.push(x as u8),
                    OutDtype::Float32 => bytes.extend_from_slice(&x.to_ne_bytes()),
                    OutDtype::Float16 => bytes.extend_from_slice(&f16::from_f32(x).to_ne_bytes()),
                    OutDtype::Bfloat16 => bytes.extend_from_slice(&bf16::from_f32(x).to_ne_bytes()),
                }
            }
        }
        Lut {
            size: dtype.size(),
            bytes,
        }
    }
}

/// The pixels the last pass reads: a u8 buffer of 1 (grey) or 3 channels
/// and the integer window of it that is the image (it may reach outside the
/// buffer: zeros there).
pub(super) struct Window<'a> {
    pub data: &'a [u8],
    pub buf_h: u32,
    pub buf_w: u32,
    pub channels: usize,
    pub top: i64,
    pub left: i64,
    pub h: u32,
    pub w: u32,
    pub flip: bool,
}

/// Where the elements of pixel `i`, channel `c` go: element
/// `i * pixel_step + c * channel_step` (channels last: 3 and 1; planes: 1
/// and the plane stride).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub pixel_step: usize,
    pub channel_step: usize,
}

/// Writes the window through the table at `out` as `layout` says.
///
/// # Errors
/// [`Error::InvalidArgument`] when `out` is too short for the layout.
pub(super) fn write(win: &Window, lut: &Lut, layout: Layout, out: &mut [u8]) -> Result<()> {
    let Layout {
        pixel_step,
        channel_step,
    } = layout;
    let last_pixel = (win.h as usize * win.w as usize).saturating_sub(1);
    let elems = last_pixel * pixel_step + 2 * channel_step + 1;
    if out.len() < elems * lut.size {
        return Err(Error::InvalidArgument(format!(
            "the output slice has {} bytes, an image of {}x{} placed {pixel_step} elements per \
             pixel and {channel_step} per channel needs {}; pass a slice that starts at the \
             image's first element and holds all of it",
            out.len(),
            win.h,
            win.w,
            elems * lut.size
        )));
    }
    match lut.size {
        1 => write_as::<1>(win, lut, pixel_step, channel_step, out),
        2 => write_as::<2>(win, lut, pixel_step, channel_step, out),
        _ => write_as::<4>(win, lut, pixel_step, channel_step, out),
    }
    Ok(())
}

fn write_as<const S: usize>(
    win: &Window,
    lut: &Lut,
    pixel_step: usize,
    channel_step: usize,
    out: &mut [u8],
) {
    let table: Vec<[u8; S]> = lut
        .bytes
        .chunks_exact(S)
        .map(|e| e.try_into().expect("S bytes"))
        .collect();
    if write_inside(win, &table, pixel_step, channel_step, out) {
        return;
    }
    let zero = [0u8; 3];
    let (bh, bw, ch) = (i64::from(win.buf_h), i64::from(win.buf_w), win.channels);
    let mut put = |elem: usize, v: [u8; S]| out[elem * S..elem * S + S].copy_from_slice(&v);
    for y in 0..win.h as usize {
        let sy = win.top + y as i64;
        let row_in = (0..bh).contains(&sy);
        for x in 0..win.w as usize {
            let sx = win.left
                + if win.flip {
                    (win.w as usize - 1 - x) as i64
                } else {
                    x as i64
                };
            let px: &[u8] = if row_in && (0..bw).contains(&sx) {
                let at = (sy * bw + sx) as usize * ch;
                &win.data[at..at + ch]
            } else {
                &zero[..ch]
            };
            let base = (y * win.w as usize + x) * pixel_step;
            for c in 0..3 {
                let level = px[if ch == 1 { 0 } else { c }] as usize;
                put(base + c * channel_step, table[c * 256 + level]);
            }
        }
    }
}

/// The common case, row by row with no per-pixel checks: an RGB window
/// wholly inside its buffer (no padding). A row of the source feeds each
/// output channel's row through that channel's table, forwards or
/// mirrored; about 4x the general loop's speed on float32 planes. False
/// when the window does not fit the case (the general loop then writes it).
fn write_inside<const S: usize>(
    win: &Window,
    table: &[[u8; S]],
    pixel_step: usize,
    channel_step: usize,
    out: &mut [u8],
) -> bool {
    let (h, w) = (win.h as usize, win.w as usize);
    let inside = win.channels == 3
        && win.top >= 0
        && win.left >= 0
        && win.top as u64 + h as u64 <= u64::from(win.buf_h)
        && win.left as u64 + w as u64 <= u64::from(win.buf_w);
    let planes = pixel_step == 1 && channel_step >= h * w;
    let last = pixel_step == 3 && channel_step == 1;
    if !inside || !(planes || last) || w == 0 {
        return false;
    }
    let tables: [&[[u8; S]; 256]; 3] = std::array::from_fn(|c| {
        table[c * 256..(c + 1) * 256]
            .try_into()
            .expect("256 levels")
    });
    let bw = win.buf_w as usize;
    let stream = planes && streams::<S>(w, channel_step, out);
    // The tables as 4-byte words, for the streamed float32 planes.
    let words: Option<[[u32; 256]; 3]> = stream.then(|| {
        std::array::from_fn(|c| {
            std::array::from_fn(|l| {
                u32::from_ne_bytes(table[c * 256 + l].as_slice().try_into().expect("4 bytes"))
            })
        })
    });
    for y in 0..h {
        let start = ((win.top as usize + y) * bw + win.left as usize) * 3;
        let src = &win.data[start..start + w * 3];
        if let Some(words) = &words {
            plane_rows_streamed(src, words, (y * w, channel_step), win.flip, out);
        } else if planes {
            for (c, t) in tables.iter().enumerate() {
                let at = (y * w + c * channel_step) * S;
                let dst = &mut out[at..at + w * S];
                let px = dst.chunks_exact_mut(S);
                if win.flip {
                    for (d, p) in px.zip(src.chunks_exact(3).rev()) {
                        d.copy_from_slice(&t[p[c] as usize]);
                    }
                } else {
                    for (d, p) in px.zip(src.chunks_exact(3)) {
                        d.copy_from_slice(&t[p[c] as usize]);
                    }
                }
            }
        } else {
            let at = y * w * 3 * S;
            let dst = &mut out[at..at + w * 3 * S];
            let put = |d: &mut [u8], p: &[u8]| {
                for (c, t) in tables.iter().enumerate() {
                    d[c * S..(c + 1) * S].copy_from_slice(&t[p[c] as usize]);
                }
            };
            if win.flip {
                for (d, p) in dst.chunks_exact_mut(3 * S).zip(src.chunks_exact(3).rev()) {
                    put(d, p);
                }
            } else {
                for (d, p) in dst.chunks_exact_mut(3 * S).zip(src.chunks_exact(3)) {
                    put(d, p);
                }
            }
        }
    }
    if stream {
        fence();
    }
    true
}

/// An image whose planes are at least this big is written with streaming
/// stores: its batch is far larger than the caches by the time the consumer
/// reads it, and a plain store first reads each line it writes. On a
/// 224x224 float32 image into a 256-image batch that took the last pass
/// from 33-35 to 28 µs (one core).
const STREAM_BYTES: usize = 256 << 10;

/// Whether planes of `w`-pixel rows `stride` elements apart at `out` are
/// written with streaming stores: big enough, on x86_64, and every row of
/// every plane starting on a 16-byte boundary.
fn streams<const S: usize>(w: usize, stride: usize, out: &[u8]) -> bool {
    cfg!(target_arch = "x86_64")
        && S == 4
        && 3 * stride * S >= STREAM_BYTES
        && (out.as_ptr() as usize).is_multiple_of(16)
        && (w * S).is_multiple_of(16)
        && (stride * S).is_multiple_of(16)
}

/// One source row into its three planes of 4-byte elements (the row
/// starts at element `first` of plane 0, planes are `stride` elements
/// apart), 4 pixels at a time with non-temporal stores. [`streams`] said
/// the rows are aligned and whole 16-byte blocks.
fn plane_rows_streamed(
    src: &[u8],
    tables: &[[u32; 256]; 3],
    (first, stride): (usize, usize),
    flip: bool,
    out: &mut [u8],
) {
    let w = src.len() / 3;
    let mut block = [[0u32; 4]; 3];
    for b in 0..w / 4 {
        // Indexed loops: the iterator forms measured 25% slower here.
        #[allow(clippy::needless_range_loop)]
        for k in 0..4 {
            let x = if flip { w - 1 - (4 * b + k) } else { 4 * b + k };
            let p = &src[3 * x..3 * x + 3];
            for c in 0..3 {
                block[c][k] = tables[c][p[c] as usize];
            }
        }
        for (c, v) in block.iter().enumerate() {
            let at = (first + c * stride + 4 * b) * 4;
            store16(&mut out[at..at + 16], v);
        }
    }
}

/// Stores 16 bytes at `dst` (16-byte aligned) bypassing the caches.
#[inline(always)]
fn store16(dst: &mut [u8], v: &[u32; 4]) {
    assert!(dst.len() == 16 && (dst.as_ptr() as usize).is_multiple_of(16));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `dst` is 16 writable bytes at a 16-byte aligned address
    // (checked above); `v` is 16 readable bytes. SSE2 is part of x86_64.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let v = _mm_loadu_si128(v.as_ptr().cast::<__m128i>());
        _mm_stream_si128(dst.as_mut_ptr().cast::<__m128i>(), v);
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (d, x) in dst.chunks_exact_mut(4).zip(v) {
        d.copy_from_slice(&x.to_ne_bytes());
    }
}

/// Orders the streaming stores before what follows (the batch is handed to
/// another thread after this).
fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a store fence; SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(dtype: OutDtype) -> Op {
        Op::ToDtype { dtype, scale: true }
    }

    fn norm() -> Op {
        Op::Normalize {
            mean: vec![0.5, 0.25, 0.0],
            std: vec![0.5, 0.25, 2.0],
        }
    }

    fn element(lut: &Lut, c: usize, level: usize) -> &[u8] {
        &lut.bytes[(c * 256 + level) * lut.size..][..lut.size]
    }

    #[test]
    fn float_tables_by_hand() {
        let f32_lut = Lut::new(&[to(OutDtype::Float32), norm()], OutDtype::Float32);
        let get = |c, l| f32::from_ne_bytes(element(&f32_lut, c, l).try_into().unwrap());
        let scaled = |l: f32| l * (1.0f64 / 255.0) as f32;
        assert_eq!(get(0, 0), -1.0);
        assert_eq!(get(0, 255), (scaled(255.0) - 0.5) / 0.5);
        assert_eq!(get(1, 51), (scaled(51.0) - 0.25) / 0.25);
        assert_eq!(get(2, 255), scaled(255.0) / 2.0);

        let f16_lut = Lut::new(&[to(OutDtype::Float16), norm()], OutDtype::Float16);
        let get = |c, l| f16::from_ne_bytes(element(&f16_lut, c, l).try_into().unwrap());
        assert_eq!(get(0, 0), f16::from_f32(-1.0));
        assert_eq!(get(0, 255), f16::from_f32(1.0));
        // 128 / 255 in f16 is 0.50195..., minus 0.5 then / 0.5.
        let x = f16::from_f32(128.0 * (1.0f64 / 255.0) as f32).to_f32();
        let want = f16::from_f32(f16::from_f32(x - 0.5).to_f32() / 0.5);
        assert_eq!(get(0, 128), want);

        let bf_lut = Lut::new(&[to(OutDtype::Bfloat16)], OutDtype::Bfloat16);
        let get = |c, l| bf16::from_ne_bytes(element(&bf_lut, c, l).try_into().unwrap());
        assert_eq!(get(1, 255), bf16::from_f32(1.0));
        assert_eq!(get(2, 0), bf16::from_f32(0.0));
        assert_eq!(get(0, 64), bf16::from_f32(64.0 / 255.0));
    }

    #[test]
    fn uint8_round_trips_and_unscaled_conversion() {
        let back = Lut::new(
            &[to(OutDtype::Float32), to(OutDtype::Uint8)],
            OutDtype::Uint8,
        );
        assert!((0..256).all(|l| element(&back, 1, l) == [l as u8]));
        let raw = Lut::new(
            &[Op::ToDtype {
                dtype: OutDtype::Float32,
                scale: false,
            }],
            OutDtype::Float32,
        );
        assert_eq!(element(&raw, 0, 200), 200.0f32.to_ne_bytes());
    }

    #[test]
    fn planes_with_a_stride_and_grey_expanded() {
        // A 1x2 grey image, levels 10 and 20, into planes 5 elements apart.
        let lut = Lut::new(&[], OutDtype::Uint8);
        let win = Window {
            data: &[10, 20],
            buf_h: 1,
            buf_w: 2,
            channels: 1,
            top: 0,
            left: 0,
            h: 1,
            w: 2,
            flip: false,
        };
        let mut out = vec![0u8; 12];
        let planes = Layout {
            pixel_step: 1,
            channel_step: 5,
        };
        let hwc = Layout {
            pixel_step: 3,
            channel_step: 1,
        };
        write(&win, &lut, planes, &mut out).unwrap();
        assert_eq!(out, [10, 20, 0, 0, 0, 10, 20, 0, 0, 0, 10, 20]);
        let mut mirrored = vec![0u8; 6];
        write(&Window { flip: true, ..win }, &lut, hwc, &mut mirrored).unwrap();
        assert_eq!(mirrored, [20, 20, 20, 10, 10, 10]);
        let err = write(&win, &lut, planes, &mut [0; 11]).unwrap_err();
        assert!(err.to_string().contains("needs 12"), "{err}");
    }

    #[test]
    fn streamed_planes_are_the_plain_loops_bytes() {
        // 160x160 float32 planes (300 KiB) are streamed when aligned; one
        // element off the alignment they take the plain loop.
        let (h, w) = (160u32, 160u32);
        let data: Vec<u8> = (0..h * (w + 8) * 3)
            .map(|i| (i * 7919 % 251) as u8)
            .collect();
        let lut = Lut::new(&[to(OutDtype::Float32), norm()], OutDtype::Float32);
        let plane = (h * w) as usize;
        let planes = Layout {
            pixel_step: 1,
            channel_step: plane,
        };
        for flip in [false, true] {
            let win = Window {
                data: &data,
                buf_h: h,
                buf_w: w + 8,
                channels: 3,
                top: 0,
                left: 4,
                h,
                w,
                flip,
            };
            let mut buf = vec![0u8; 3 * plane * 4 + 32];
            let off = buf.as_ptr().align_offset(16);
            let bytes = &mut buf[off..];
            assert!(
                streams::<4>(w as usize, plane, bytes),
                "the case is streamed"
            );
            write(&win, &lut, planes, bytes).unwrap();
            let streamed = bytes[..3 * plane * 4].to_vec();
            write(&win, &lut, planes, &mut bytes[4..]).unwrap();
            assert_eq!(streamed, bytes[4..4 + 3 * plane * 4], "flip {flip}");
            // And each element is the table's value of its source level.
            let x = 17;
            let level = data
                [((w + 8) as usize * 2 + 4 + if flip { w as usize - 1 - x } else { x }) * 3 + 1];
            let at = (plane + 2 * w as usize + x) * 4;
            assert_eq!(
                &streamed[at..at + 4],
                element(&lut, 1, level as usize),
                "flip {flip}"
            );
        }
    }
}
