//! Decoding a segment frame-exactly on this thread's decoder of its codec:
//! every frame, some frames as packed RGB, or the decoded frames kept to be
//! converted later.

use std::mem::MaybeUninit;

use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

use super::ff_err;
use super::settings::SegmentCodec;
use super::window::packet_uses;
use super::yuv::CONVERTER;
use crate::video::av1::UnitUse;
use crate::video::decode::init;

/// Decodes a segment's packets with a decoder of its own and hands frames
/// `keep` (by position in the segment) to `f` as packed RGB (`w*h*3`
/// bytes); frames before `keep` are decoded and dropped, not converted.
/// Returns the frames the segment decoded to.
///
/// # Errors
/// A message saying why (no decoder, damaged packets, a frame of another
/// size).
pub fn decode_segment(
    codec: SegmentCodec,
    width: u32,
    height: u32,
    data: &[u8],
    packet_offsets: &[u64],
    keep: std::ops::Range<usize>,
    f: impl FnMut(usize, &[u8]),
) -> Result<usize, String> {
    decode_segment_picked(
        &SegmentRead {
            codec,
            coded: (width, height),
            crop: (width, height),
            data,
            packet_offsets,
            packet_frames: None,
            pick: &|i| keep.contains(&i),
            upto: keep.end,
        },
        f,
    )
}

/// One segment's packets and what to read of them: the input of
/// [`decode_segment_picked`] and [`decode_segment_frames`].
#[derive(Clone, Copy)]
pub struct SegmentRead<'a> {
    /// The segment's codec.
    pub codec: SegmentCodec,
    /// The coded frame size (even sides).
    pub coded: (u32, u32),
    /// The stored frame size: the top-left part of the coded frame (an odd
    /// side is coded one pixel larger).
    pub crop: (u32, u32),
    /// The segment's packets, back to back.
    pub data: &'a [u8],
    /// Where each packet starts in `data`, then where the last one ends.
    pub packet_offsets: &'a [u64],
    /// The frame each packet presents, as
    /// [`EncodedSegment::packet_frames`](super::EncodedSegment::packet_frames)
    /// (`None`: frames are counted as they come out, every packet decoded).
    pub packet_frames: Option<&'a [i64]>,
    /// The frames (by position in the segment) to hand out.
    pub pick: &'a dyn Fn(usize) -> bool,
    /// Decoding stops once the frames below this are out.
    pub upto: usize,
}

/// Like [`decode_segment`], for frames coded at `r.coded` and stored at
/// `r.crop`: the frames at positions where `r.pick` is true are converted
/// to packed RGB of the stored size and handed to `f`; decoding stops once
/// `r.upto` frames are out.
///
/// With `r.packet_frames` a segment skips the packets of
/// pictures nothing refers to whose frames are not picked (H.264 pictures
/// with `nal_ref_idc` 0, AV1 temporal units that refresh no reference
/// slot): a window that starts inside a segment decodes the reference
/// pictures before it, not every frame. The return value is then the
/// frames up to the last one handed out.
///
/// # Errors
/// As [`decode_segment`].
pub fn decode_segment_picked(
    r: &SegmentRead,
    mut f: impl FnMut(usize, &[u8]),
) -> Result<usize, String> {
    CONVERTER.with(|cell| {
        let mut conv = cell.borrow_mut();
        decode_segment_with(r, &mut |i, picked, frame| {
            if picked {
                f(i, conv.packed_rgb(frame)?);
            }
            Ok(())
        })
    })
}

/// A frame a segment decoded to, as its decoder gave it (planar YUV whose
/// buffers the decoder shares: keeping one copies nothing), cropped to
/// the stored size. [`DecodedFrame::to_rgb`] converts it as
/// [`decode_segment_picked`] converts the frames it hands out.
pub struct DecodedFrame(Frame);

impl std::fmt::Debug for DecodedFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DecodedFrame({}x{})", self.0.width(), self.0.height())
    }
}

impl DecodedFrame {
    /// Bytes of the frame as packed RGB.
    pub fn rgb_len(&self) -> usize {
        self.0.width() as usize * self.0.height() as usize * 3
    }

    /// Writes the frame as packed RGB into `out` ([`DecodedFrame::rgb_len`]
    /// bytes), converted on this thread's converter; all of `out` is
    /// written.
    ///
    /// # Errors
    /// A message when `out` has another length or swscale fails.
    pub fn to_rgb(&self, out: &mut [MaybeUninit<u8>]) -> Result<(), String> {
        if out.len() != self.rgb_len() {
            return Err(format!(
                "a {}x{} frame is {} RGB bytes, not {}",
                self.0.width(),
                self.0.height(),
                self.rgb_len(),
                out.len()
            ));
        }
        CONVERTER.with(|cell| {
            let mut conv = cell.borrow_mut();
            let rgb = conv.convert(&self.0)?;
            let (w3, stride) = (self.0.width() as usize * 3, rgb.stride(0));
            let d = rgb.data(0);
            if w3 > 0 {
                for (row, o) in out.chunks_exact_mut(w3).enumerate() {
                    let src = &d[row * stride..row * stride + w3];
                    // SAFETY: `o` and `src` are both `w3` bytes, and a
                    // frame of ours does not overlap the converter's.
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), o.as_mut_ptr().cast::<u8>(), w3)
                    };
                }
            }
            Ok(())
        })
    }
}

/// Decodes a segment as [`decode_segment_picked`] does, keeping every
/// frame the decoder puts out below `r.upto` (picked or not) as it came, not
/// converted; each picked frame also goes to `picked` as it comes out (to
/// be converted while it is in the CPU's caches): `(frames up to the last
/// picked one, the frames by position)`.
///
/// # Errors
/// As [`decode_segment`], and the first error `picked` returns.
pub fn decode_segment_frames(
    r: &SegmentRead,
    picked: &mut dyn FnMut(usize, &DecodedFrame) -> Result<(), String>,
) -> Result<(usize, Vec<(usize, DecodedFrame)>), String> {
    let mut frames = Vec::new();
    let n = decode_segment_with(r, &mut |i, is_picked, frame| {
        let f = DecodedFrame(std::mem::replace(frame, Frame::empty()));
        if is_picked {
            picked(i, &f)?;
        }
        frames.push((i, f));
        Ok(())
    })?;
    Ok((n, frames))
}

/// What a decode hands each frame below `upto` to: its position, whether
/// it was picked, and the frame (cropped to the stored size; the callee may
/// take it).
type Sink<'a> = dyn FnMut(usize, bool, &mut Frame) -> Result<(), String> + 'a;

/// The decode of [`decode_segment_picked`] on this thread's decoder of the
/// codec, handing frames to `sink`.
fn decode_segment_with(r: &SegmentRead, sink: &mut Sink) -> Result<usize, String> {
    let SegmentRead {
        codec,
        coded,
        crop,
        data,
        packet_offsets,
        packet_frames,
        pick,
        upto,
    } = *r;
    init();
    let (width, height) = coded;
    let (cw, ch) = (crop.0.min(width), crop.1.min(height));
    if packet_offsets.first() != Some(&0) {
        return Err("packet offsets do not start at 0".into());
    }
    // This thread's decoder of the codec, flushed (a segment starts with a
    // keyframe and refers to nothing before it): opening a decoder (dav1d
    // starts its threads) per segment costs more than decoding a short
    // segment.
    DECODERS.with(|cell| {
        let mut cache = cell.borrow_mut();
        let Decoders { decoders, frame } = &mut *cache;
        let i = match decoders.iter().position(|(c, _)| *c == codec) {
            Some(i) => i,
            None => {
                decoders.push((codec, open_decoder(codec)?));
                decoders.len() - 1
            }
        };
        let dec = &mut decoders[i].1;
        dec.flush();
        // Skipping needs every packet's frame (else frames are counted as
        // they come out).
        let skip = packet_frames.filter(|pf| pf.len() + 1 == packet_offsets.len());
        let uses = skip.map(|pf| {
            let wanted: Vec<bool> = pf
                .iter()
                .map(|&t| usize::try_from(t).is_ok_and(|i| i < upto && pick(i)))
                .collect();
            packet_uses(codec, data, packet_offsets, &wanted)
        });
        let r = decode_with(
            dec,
            frame,
            (width, height),
            (cw, ch),
            data,
            packet_offsets,
            skip.zip(uses.as_deref()),
            pick,
            upto,
            sink,
        );
        if r.is_err() {
            // A decoder that failed mid-stream is not trusted again.
            decoders.retain(|(c, _)| *c != codec);
        }
        r
    })
}

/// Per-thread decoders (one per codec) and the frame they decode into
/// (kept: a frame's worth of memory allocated and freed per segment is
/// faulted in again each time).
struct Decoders {
    decoders: Vec<(SegmentCodec, ff::decoder::Video)>,
    frame: Frame,
}

impl Default for Decoders {
    fn default() -> Self {
        Decoders {
            decoders: Vec::new(),
            frame: Frame::empty(),
        }
    }
}

thread_local! {
    static DECODERS: std::cell::RefCell<Decoders> = std::cell::RefCell::new(Decoders::default());
}

fn open_decoder(codec: SegmentCodec) -> Result<ff::decoder::Video, String> {
    let dcodec =
        ff::decoder::find(codec.id()).ok_or_else(|| format!("no {} decoder", codec.as_str()))?;
    let mut ctx = ff::codec::context::Context::new_with_codec(dcodec);
    ctx.set_threading(ff::codec::threading::Config {
        kind: ff::codec::threading::Type::Frame,
        count: 1,
        ..Default::default()
    });
    ctx.decoder()
        .video()
        .map_err(|e| ff_err("cannot start the decoder", e))
}

/// The decode loop of [`decode_segment_with`] on a flushed decoder: every
/// frame out below `upto` goes to `sink`, cropped to `cw x ch`. With
/// `packet_frames` and how to send each packet ([`packet_uses`]), frames
/// are known by their timestamps (each packet carries its frame's), and
/// packets are sent as that says.
#[allow(clippy::too_many_arguments)]
fn decode_with(
    dec: &mut ff::decoder::Video,
    frame: &mut Frame,
    (width, height): (u32, u32),
    (cw, ch): (u32, u32),
    data: &[u8],
    packet_offsets: &[u64],
    packet_frames: Option<(&[i64], &[UnitUse])>,
    pick: &dyn Fn(usize) -> bool,
    upto: usize,
    sink: &mut Sink,
) -> Result<usize, String> {
    let timed = packet_frames.is_some();
    let wanted = |i: usize| i < upto && pick(i);
    // Counted: frames out so far. Timed: frames up to the last one handed
    // out (a later reference picture may come out before a window's last
    // frames).
    let mut n = 0usize;
    let mut handed = 0usize;
    // The picked frames the packets present below `upto`: counted over the
    // packets, so a huge `upto` (a direct caller's) costs nothing.
    let to_hand = packet_frames.map_or(0, |(pf, _)| {
        let mut present: Vec<usize> = pf
            .iter()
            .filter_map(|&t| usize::try_from(t).ok())
            .filter(|&i| wanted(i))
            .collect();
        present.sort_unstable();
        present.dedup();
        present.len()
    });
    let mut take =
        |dec: &mut ff::decoder::Video, n: &mut usize, handed: &mut usize| -> Result<(), String> {
            while dec.receive_frame(frame).is_ok() {
                let i = if timed {
                    let t = frame
                        .pts()
                        .ok_or("the decoder gave a frame without its timestamp")?;
                    usize::try_from(t).map_err(|_| format!("the decoder gave a frame at {t}"))?
                } else {
                    *n
                };
                if i < upto {
                    if frame.width() != width || frame.height() != height {
                        return Err(format!(
                            "a frame of {}x{} in a {width}x{height} segment",
                            frame.width(),
                            frame.height()
                        ));
                    }
                    // The stored part only (the top left): converted as a frame
                    // of that size, so chroma is interpolated as for the source.
                    frame.set_width(cw);
                    frame.set_height(ch);
                    let picked = wanted(i);
                    sink(i, picked, frame)?;
                    if picked {
                        *handed += 1;
                        if timed {
                            *n = (*n).max(i + 1);
                        }
                    }
                }
                if !timed {
                    *n += 1;
                }
            }
            Ok(())
        };
    for (j, w) in packet_offsets.windows(2).enumerate() {
        let (a, b) = (w[0] as usize, w[1] as usize);
        let bytes = data.get(a..b).ok_or_else(|| {
            format!(
                "packet {a}..{b} lies outside the segment's {} bytes",
                data.len()
            )
        })?;
        let mut pkt = match packet_frames.map(|(_, uses)| &uses[j]) {
            Some(UnitUse::Skip) => continue,
            Some(UnitUse::Part(part)) => ff::Packet::copy(part),
            Some(UnitUse::Whole) | None => ff::Packet::copy(bytes),
        };
        if let Some((pf, _)) = packet_frames {
            pkt.set_pts(Some(pf[j]));
        }
        dec.send_packet(&pkt)
            .map_err(|e| ff_err("the decoder refused a packet", e))?;
        take(dec, &mut n, &mut handed)?;
        if (timed && handed == to_hand) || (!timed && n >= upto) {
            return Ok(n);
        }
    }
    dec.send_eof()
        .map_err(|e| ff_err("cannot finish decoding the segment", e))?;
    take(dec, &mut n, &mut handed)?;
    Ok(n)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
