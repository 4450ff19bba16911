//! Encoding frames as one closed segment: the encoder's options (keyframes
//! only at the start, one thread, fixed instruction sets, so the same
//! frames encode to the same bytes) and its packets as stored.

use ff::format::Pixel;
use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

use super::bitstream::{drop_temporal_delimiter, take_x264_sei};
use super::ff_err;
use super::settings::{SegmentCodec, SegmentParams};
use super::yuv::copy_planes;
use crate::video::decode::init;

/// One encoded segment: its packets back to back, where each starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodedSegment {
    /// The packets, in decoding order, concatenated.
    pub data: Vec<u8>,
    /// The byte offset of each packet in `data`, then `data.len()`.
    pub packet_offsets: Vec<u64>,
    /// The frame (position in the segment) each packet presents, in
    /// packet order: the encoder's timestamps (packets come in decoding
    /// order, which differs from the frames' order around B-frames).
    /// Empty when the encoder gave a packet no timestamp.
    pub packet_frames: Vec<i64>,
    /// Frames it decodes to.
    pub frames: usize,
    /// What the encoder wrote about itself into the stream and was taken
    /// out of it (x264's version and options); empty when nothing was.
    pub encoder_info: String,
}

/// `:` and the user's encoder parameters, or nothing.
fn more_params(params: &str) -> String {
    let params = params.trim_matches(':');
    if params.is_empty() {
        String::new()
    } else {
        format!(":{params}")
    }
}

/// SVT-AV1 (1.4 as Debian ships it) keeps process-wide state that its
/// encoders set up and tear down without synchronisation: encoders opened,
/// run and closed on several threads at once crash in SVT's own threads
/// (a SIGSEGV in about a quarter of runs of the concurrency test below, and
/// in AV1 builds of many videos). So AV1 segments are encoded one at a
/// time; SVT spreads each over its own threads, and the build's other
/// threads decode sources and measure quality meanwhile.
static SVT_AV1_ENCODER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Encodes `frames` (each planar YUV 4:2:0, `w*h + 2*(w/2)*(h/2)` bytes)
/// as one closed segment.
///
/// # Errors
/// A message saying why (no such encoder in this FFmpeg, odd sizes, a
/// frame of the wrong size, an encoder failure).
pub fn encode_segment(p: &SegmentParams, frames: &[Vec<u8>]) -> Result<EncodedSegment, String> {
    init();
    let (w, h) = (p.width as usize, p.height as usize);
    if w == 0 || h == 0 || w % 2 == 1 || h % 2 == 1 {
        return Err(format!("segment frames must have even sizes, got {w}x{h}"));
    }
    if p.codec == SegmentCodec::Av1 && (w < 64 || h < 64) {
        return Err(format!(
            "SVT-AV1 encodes frames of at least 64x64, got {w}x{h} (use H.264)"
        ));
    }
    let want = w * h + 2 * (w / 2) * (h / 2);
    // Held until the encoder is closed (dropped after it): one SVT-AV1
    // encoder at a time in the process, each with SVT's own threads.
    let _svt = (p.codec == SegmentCodec::Av1)
        .then(|| SVT_AV1_ENCODER.lock().unwrap_or_else(|e| e.into_inner()));
    let codec = ff::encoder::find_by_name(p.codec.encoder_name()).ok_or_else(|| {
        format!(
            "this FFmpeg has no {} encoder (for {})",
            p.codec.encoder_name(),
            p.codec.as_str()
        )
    })?;
    let mut enc = ff::codec::context::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(|e| ff_err("cannot make the encoder", e))?;
    enc.set_width(p.width);
    enc.set_height(p.height);
    enc.set_format(Pixel::YUV420P);
    enc.set_time_base((1, 25));
    enc.set_frame_rate(Some((25, 1)));
    let gop = frames.len().max(1) as u32;
    enc.set_gop(gop);
    let mut opts = ff::Dictionary::new();
    opts.set("crf", &p.crf.to_string());
    opts.set("preset", &p.preset);
    match p.codec {
        SegmentCodec::H264 => {
            opts.set(
                "x264-params",
                &format!(
                    "keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0{}{}",
                    x264_asm(),
                    more_params(&p.encoder_params)
                ),
            );
            opts.set("threads", "1");
            if !p.tune.is_empty() {
                opts.set("tune", &p.tune);
            }
        }
        SegmentCodec::Av1 => {
            let tune = if p.tune.is_empty() {
                String::new()
            } else {
                format!(":tune={}", p.tune)
            };
            opts.set(
                "svtav1-params",
                &format!("keyint={gop}:scd=0{tune}{}", more_params(&p.encoder_params)),
            );
        }
    }
    let mut encoder = enc
        .open_as_with(codec, opts)
        .map_err(|e| ff_err("cannot open the encoder", e))?;
    let mut out = EncodedSegment {
        packet_offsets: vec![0],
        ..Default::default()
    };
    let mut packet = ff::Packet::empty();
    let mut untimed = false;
    let codec_of = p.codec;
    let mut drain = |encoder: &mut ff::encoder::Video, out: &mut EncodedSegment| {
        while encoder.receive_packet(&mut packet).is_ok() {
            if let Some(d) = packet.data() {
                let start = out.data.len();
                out.data.extend_from_slice(d);
                match codec_of {
                    // x264 describes itself once, in the first packet.
                    SegmentCodec::H264 if start == 0 => {
                        if let Some(info) = take_x264_sei(&mut out.data) {
                            out.encoder_info = info;
                        }
                    }
                    SegmentCodec::Av1 => drop_temporal_delimiter(&mut out.data, start),
                    SegmentCodec::H264 => {}
                }
                out.packet_offsets.push(out.data.len() as u64);
                match packet.pts() {
                    Some(t) => out.packet_frames.push(t),
                    None => untimed = true,
                }
            }
        }
    };
    let mut frame = Frame::new(Pixel::YUV420P, p.width, p.height);
    for (i, f) in frames.iter().enumerate() {
        if f.len() != want {
            return Err(format!(
                "frame {i} has {} bytes, a {w}x{h} YUV 4:2:0 frame has {want}",
                f.len()
            ));
        }
        copy_planes(f, &mut frame, w, h);
        frame.set_pts(Some(i as i64));
        encoder
            .send_frame(&frame)
            .map_err(|e| ff_err("the encoder refused a frame", e))?;
        drain(&mut encoder, &mut out);
    }
    encoder
        .send_eof()
        .map_err(|e| ff_err("cannot finish the segment", e))?;
    drain(&mut encoder, &mut out);
    out.frames = frames.len();
    if untimed || !is_permutation(&out.packet_frames, out.frames) {
        out.packet_frames.clear();
    }
    Ok(out)
}

/// Whether `packet_frames` names each of frames `0..frames` exactly once.
pub fn is_permutation(packet_frames: &[i64], frames: usize) -> bool {
    let mut seen = vec![false; frames];
    packet_frames.len() == frames
        && packet_frames.iter().all(|&f| {
            usize::try_from(f)
                .ok()
                .and_then(|f| seen.get_mut(f))
                .is_some_and(|s| !std::mem::replace(s, true))
        })
}

/// The instruction sets x264 may use, as its `asm` option: up to AVX2
/// where the CPU has AVX2 and the sets x264 counts with it. x264 164 (as
/// Debian ships it) picks its AVX-512 code on CPUs that have it, and that
/// code makes the bytes of an encode change from run to run (an encode of
/// the same frames differs in one process; the encodes agree when every
/// allocation is filled with the same byte, so it reads memory it never
/// wrote). Limited to AVX2, encodes of the same frames are the same bytes,
/// on this CPU and on any other with AVX2.
fn x264_asm() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("lzcnt");
        if avx2 {
            return ":asm=AVX2,Cache64";
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::super::bitstream::X264_SEI_UUID;
    use super::super::{decode_segment, frames, SegmentSettings};
    use super::*;

    #[test]
    fn encoder_params_reach_the_encoder() {
        let (w, h) = (64u32, 64u32);
        let src = frames(16, w as usize, h as usize);
        let base = SegmentParams {
            codec: SegmentCodec::H264,
            width: w,
            height: h,
            crf: 26,
            preset: "medium".into(),
            tune: String::new(),
            encoder_params: String::new(),
        };
        // x264's default B-frames present frames out of decoding order;
        // without B-frames every packet presents the next frame.
        let own = encode_segment(&base, &src).unwrap();
        assert_ne!(own.packet_frames, (0..16).collect::<Vec<i64>>());
        let no_b = SegmentParams {
            encoder_params: "bframes=0".into(),
            ..base.clone()
        };
        let seg = encode_segment(&no_b, &src).unwrap();
        assert_eq!(seg.packet_frames, (0..16).collect::<Vec<i64>>());
        assert!(
            seg.encoder_info.contains("bframes=0"),
            "{}",
            seg.encoder_info
        );
        // SVT-AV1's mini-GOPs of 16 (its default at preset 8) or 32.
        let av1 = SegmentParams {
            codec: SegmentCodec::Av1,
            preset: "8".into(),
            tune: "1".into(),
            crf: 43,
            ..base
        };
        let src = frames(32, w as usize, h as usize);
        let a = encode_segment(&av1, &src).unwrap();
        let b = encode_segment(
            &SegmentParams {
                encoder_params: "hierarchical-levels=5".into(),
                ..av1.clone()
            },
            &src,
        )
        .unwrap();
        assert_ne!(a.data, b.data);
        // Both decode to their 32 frames.
        for seg in [&a, &b] {
            let n = decode_segment(
                av1.codec,
                w,
                h,
                &seg.data,
                &seg.packet_offsets,
                0..32,
                |_, _| {},
            )
            .unwrap();
            assert_eq!(n, 32);
        }
    }

    /// The tuning reaches x264: the options string x264 writes into the
    /// stream (an SEI) shows x264's own settings (adaptive quantisation and
    /// psycho-visual optimisation on) by default, and PSNR tuning's
    /// (adaptive quantisation at strength 0, no psycho-visual
    /// optimisation) when asked.
    #[test]
    fn the_h264_tune_reaches_the_encoder() {
        let settings = SegmentSettings::new(SegmentCodec::H264);
        let opts_of = |s: &SegmentSettings| {
            let seg = encode_segment(&s.params(64, 48), &frames(4, 64, 48)).unwrap();
            let text = &seg.encoder_info;
            let at = text.find("options: ").expect("x264's options");
            text[at..]
                .split(' ')
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(settings.tune(), "");
        let tuned = opts_of(&settings.clone().try_with_tune("psnr").unwrap());
        // Adaptive quantisation off, or at strength 0.
        let aq_off = |o: &String| o == "aq=0" || (o.starts_with("aq=") && o.ends_with(":0.00"));
        assert!(tuned.iter().any(aq_off), "{tuned:?}");
        assert!(tuned.contains(&"psy=0".to_string()), "{tuned:?}");
        let plain = opts_of(&settings);
        assert!(
            plain.iter().any(|o| o.starts_with("aq=") && !aq_off(o)),
            "{plain:?}"
        );
        assert!(plain.contains(&"psy=1".to_string()), "{plain:?}");
    }

    /// x264's description of itself (about 700 bytes) is taken out of each
    /// segment and handed back; the segment still decodes to its frames.
    /// AV1 packets lose their temporal delimiters and decode likewise.
    #[test]
    fn encoder_self_descriptions_and_delimiters_are_not_stored() {
        let src = frames(8, 64, 64);
        let h264 = SegmentSettings::new(SegmentCodec::H264).params(64, 64);
        let seg = encode_segment(&h264, &src).unwrap();
        assert!(
            seg.encoder_info.starts_with("x264 - core ") && seg.encoder_info.contains(" options: "),
            "{}",
            seg.encoder_info
        );
        let hay = |d: &[u8], n: &[u8]| d.windows(n.len()).any(|w| w == n);
        assert!(!hay(&seg.data, b"x264"));
        assert!(!hay(&seg.data, &X264_SEI_UUID));
        let av1 = SegmentSettings::new(SegmentCodec::Av1).params(64, 64);
        let seg_av1 = encode_segment(&av1, &src).unwrap();
        assert!(seg_av1.encoder_info.is_empty());
        assert_eq!(seg_av1.packet_offsets.len(), 9);
        for w in seg_av1.packet_offsets.windows(2) {
            let packet = &seg_av1.data[w[0] as usize..w[1] as usize];
            assert!(!packet.starts_with(&[0x12, 0x00]), "{:x?}", &packet[..4]);
        }
        for (codec, seg) in [(SegmentCodec::H264, &seg), (SegmentCodec::Av1, &seg_av1)] {
            let mut got = Vec::new();
            let n = decode_segment(
                codec,
                64,
                64,
                &seg.data,
                &seg.packet_offsets,
                0..8,
                |i, f| got.push((i, f.to_vec())),
            )
            .unwrap();
            assert_eq!(n, 8);
            assert_eq!(
                got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                (0..8).collect::<Vec<_>>()
            );
            // Close to the source (its first luma sample against green).
            for (i, f) in &got {
                assert!(
                    (i32::from(src[*i][0]) - i32::from(f[1])).abs() < 40,
                    "{codec:?} {i}"
                );
            }
        }
    }

    /// Noisy frames of 176x144 (as a real clip of that size): x264's
    /// AVX-512 code, when x264 may use it, encodes them to other bytes each
    /// time. Encoded again and again in one process, each codec gives the
    /// same bytes every time.
    #[test]
    fn the_same_frames_encode_to_the_same_bytes_every_time() {
        let (w, h) = (176usize, 144usize);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 56) as u8 % 48
        };
        let src: Vec<Vec<u8>> = frames(32, w, h)
            .into_iter()
            .map(|f| f.into_iter().map(|v| v.saturating_add(noise())).collect())
            .collect();
        for codec in [SegmentCodec::H264, SegmentCodec::Av1] {
            let p = SegmentSettings::new(codec).params(w as u32, h as u32);
            let first = encode_segment(&p, &src).unwrap().data;
            for round in 1..5 {
                let again = encode_segment(&p, &src).unwrap().data;
                assert!(
                    again == first,
                    "{codec:?}: encode {round} differs from the first"
                );
            }
        }
    }

    /// SVT-AV1 keeps process-wide state that encoders opened and closed on
    /// several threads at once corrupt (a build of many videos crashed in
    /// SVT's own threads). Many threads encoding short AV1 segments at once
    /// each get back a segment that decodes to its frames.
    #[test]
    fn av1_segments_encoded_on_many_threads_at_once_all_decode() {
        const W: u32 = 640;
        const H: u32 = 360;
        let p = SegmentParams {
            codec: SegmentCodec::Av1,
            width: W,
            height: H,
            crf: 45,
            preset: "12".into(),
            tune: "1".into(),
            encoder_params: String::new(),
        };
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..6)
                .map(|t| {
                    let p = p.clone();
                    s.spawn(move || {
                        for k in 0..6 {
                            let src = frames(4 + (t + k) % 5, W as usize, H as usize);
                            let seg = encode_segment(&p, &src).unwrap();
                            let total = decode_segment(
                                p.codec,
                                W,
                                H,
                                &seg.data,
                                &seg.packet_offsets,
                                0..src.len(),
                                |_, _| {},
                            )
                            .unwrap();
                            assert_eq!(total, src.len());
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        });
    }

    #[test]
    fn bad_inputs_are_errors() {
        let p = SegmentParams {
            codec: SegmentCodec::H264,
            width: 63,
            height: 48,
            crf: 20,
            preset: "medium".into(),
            tune: String::new(),
            encoder_params: String::new(),
        };
        assert!(encode_segment(&p, &frames(1, 64, 48)).is_err());
        let p = SegmentParams { width: 64, ..p };
        assert!(encode_segment(&p, &[vec![0; 10]])
            .unwrap_err()
            .contains("frame 0"));
        let e = decode_segment(
            SegmentCodec::H264,
            64,
            48,
            &[0, 0, 1],
            &[0, 9],
            0..1,
            |_, _| {},
        );
        assert!(e.is_err());
    }
}
