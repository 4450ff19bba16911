//! Short closed groups of pictures encoded as raw elementary streams: the
//! unit a compact video layout stores per row. Each segment is encoded by
//! an encoder of its own (so it starts with a keyframe and refers to no
//! other segment, whatever the codec's GOP options), with scene-cut
//! keyframes off, and is decoded by a decoder of its own: frame `i` of a
//! segment is the `i`-th frame its decoder puts out, exactly.
//!
//! H.264 goes through libx264 (the stream carries its parameter sets
//! in-band, so a segment needs no extradata); AV1 through SVT-AV1 when the
//! system FFmpeg has it.

use std::mem::MaybeUninit;

use ff::format::Pixel;
use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

use super::av1::UnitUse;
use super::decode::init;

/// The codec of a segment.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum SegmentCodec {
    /// H.264 (libx264 to encode).
    H264,
    /// AV1 (SVT-AV1 to encode).
    Av1,
}

impl SegmentCodec {
    /// `h264` or `av1`.
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentCodec::H264 => "h264",
            SegmentCodec::Av1 => "av1",
        }
    }

    /// The FFmpeg encoder used.
    pub fn encoder_name(self) -> &'static str {
        match self {
            SegmentCodec::H264 => "libx264",
            SegmentCodec::Av1 => "libsvtav1",
        }
    }

    /// The default constant rate factor: the highest whose mean PSNR is no
    /// lower than WebP q65's (the frames layout's default) on each of the
    /// bench contents (see `benches/segment_crf.py`). The real clips set
    /// it; on synthetic content, where WebP loses more, WebP's PSNR comes at
    /// a higher CRF (testsrc2: H.264 37 in 51% of the default's bytes, AV1
    /// 58 in 40%).
    pub fn default_crf(self) -> u32 {
        match self {
            SegmentCodec::H264 => DEFAULT_H264_CRF,
            SegmentCodec::Av1 => DEFAULT_AV1_CRF,
        }
    }

    /// The highest CRF the encoder takes.
    pub fn max_crf(self) -> u32 {
        match self {
            SegmentCodec::H264 => 51,
            SegmentCodec::Av1 => 63,
        }
    }

    /// The default speed preset (`medium` for x264, `8` for SVT-AV1).
    pub fn default_preset(self) -> &'static str {
        match self {
            SegmentCodec::H264 => "medium",
            SegmentCodec::Av1 => "8",
        }
    }

    /// The default tuning: the encoder's own (x264 none; SVT-AV1 `1`,
    /// PSNR, its own default). x264's `psnr` tuning (no psycho-visual
    /// rate-distortion, adaptive quantisation at strength 0) was measured
    /// against it with `benches/segment_crf.py`: on the real clips it keeps
    /// WebP's PSNR in 8% fewer bytes (CRF 27), but on the gradients it
    /// loses 4 dB at the same CRF (flat areas lose the bits adaptive
    /// quantisation gives them) and would need about CRF 24 (0.45 dB a
    /// step there), where the real clips take 29% more bytes. One default
    /// CRF has to serve both, so the default stays x264's own tuning;
    /// `psnr` is there to ask for.
    pub fn default_tune(self) -> &'static str {
        match self {
            SegmentCodec::H264 => "",
            SegmentCodec::Av1 => "1",
        }
    }

    /// Encoder parameters the layout sets itself or relies on (see
    /// [`SegmentSettings::try_with_encoder_params`]), as the encoder names
    /// them, with `-` for `_`.
    fn reserved_params(self) -> &'static [&'static str] {
        match self {
            SegmentCodec::H264 => &[
                "keyint",
                "min-keyint",
                "keyint-min",
                "scenecut",
                "open-gop",
                "intra-refresh",
                "crf",
                "crf-max",
                "qp",
                "bitrate",
                "pass",
                "stats",
                "preset",
                "tune",
                "threads",
                "lookahead-threads",
                "sliced-threads",
                "asm",
                "annexb",
                "input-csp",
                "output-csp",
                "input-depth",
                "input-res",
                "interlaced",
                "tff",
                "bff",
                "fake-interlaced",
                "pulldown",
                "fps",
                "force-cfr",
                "frame-packing",
            ],
            SegmentCodec::Av1 => &[
                "keyint",
                "intra-period",
                "scd",
                "irefresh-type",
                "crf",
                "qp",
                "rc",
                "tbr",
                "mbr",
                "passes",
                "pass",
                "stats",
                "preset",
                "tune",
                "input-depth",
                "color-format",
                "profile",
                "asm",
                "lp",
                "pin",
                "ss",
            ],
        }
    }

    fn id(self) -> ff::codec::Id {
        match self {
            SegmentCodec::H264 => ff::codec::Id::H264,
            SegmentCodec::Av1 => ff::codec::Id::AV1,
        }
    }
}

impl std::str::FromStr for SegmentCodec {
    type Err = crate::error::Error;

    /// Parses `h264` or `av1`.
    fn from_str(s: &str) -> crate::error::Result<Self> {
        match s {
            "h264" => Ok(SegmentCodec::H264),
            "av1" => Ok(SegmentCodec::Av1),
            other => Err(crate::error::Error::InvalidArgument(format!(
                "a segment codec is h264 or av1, got '{other}'"
            ))),
        }
    }
}

/// The H.264 default CRF (see [`SegmentCodec::default_crf`]).
pub const DEFAULT_H264_CRF: u32 = 26;
/// The AV1 default CRF (see [`SegmentCodec::default_crf`]).
pub const DEFAULT_AV1_CRF: u32 = 43;
/// The default frames per segment.
pub const DEFAULT_FRAMES_PER_SEGMENT: u32 = 32;

/// How a segments build encodes: codec, quality, speed and segment length,
/// checked when set (the same pattern as the other write options).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SegmentSettings {
    codec: SegmentCodec,
    crf: u32,
    preset: String,
    #[serde(default)]
    tune: String,
    #[serde(default)]
    encoder_params: String,
    frames_per_segment: u32,
}

impl Default for SegmentSettings {
    fn default() -> Self {
        SegmentSettings::new(SegmentCodec::H264)
    }
}

impl SegmentSettings {
    /// The codec with its default CRF and preset, segments of 32 frames.
    pub fn new(codec: SegmentCodec) -> Self {
        SegmentSettings {
            codec,
            crf: codec.default_crf(),
            preset: codec.default_preset().to_string(),
            tune: codec.default_tune().to_string(),
            encoder_params: String::new(),
            frames_per_segment: DEFAULT_FRAMES_PER_SEGMENT,
        }
    }

    /// The constant rate factor (lower is better and larger).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] above the codec's maximum (51 for
    /// H.264, 63 for AV1).
    pub fn try_with_crf(mut self, crf: u32) -> crate::error::Result<Self> {
        if crf > self.codec.max_crf() {
            return Err(crate::error::Error::InvalidArgument(format!(
                "{} takes a CRF of 0 to {}, got {crf}",
                self.codec.as_str(),
                self.codec.max_crf()
            )));
        }
        self.crf = crf;
        Ok(self)
    }

    /// The encoder's speed preset (x264: `ultrafast` ... `placebo`;
    /// SVT-AV1: `0` ... `13`), checked by the encoder when a build starts.
    pub fn with_preset(mut self, preset: impl Into<String>) -> Self {
        self.preset = preset.into();
        self
    }

    /// The encoder's tuning (x264: `--tune` names such as `psnr`, `ssim`,
    /// `film`, `animation`, comma-separated; SVT-AV1: its `tune` number,
    /// `0` visual quality or `1` PSNR; empty: the encoder's own default),
    /// checked by the encoder when a build starts. Default
    /// [`SegmentCodec::default_tune`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for an AV1 tuning that is not a
    /// number (SVT-AV1 would ignore it with a warning).
    pub fn try_with_tune(mut self, tune: impl Into<String>) -> crate::error::Result<Self> {
        let tune = tune.into();
        if self.codec == SegmentCodec::Av1 && !tune.is_empty() && tune.parse::<u8>().is_err() {
            return Err(crate::error::Error::InvalidArgument(format!(
                "an SVT-AV1 tune is a number (0 visual quality, 1 PSNR), got '{tune}'"
            )));
        }
        self.tune = tune;
        Ok(self)
    }

    /// More of the encoder's own parameters, `key=value` pairs joined by
    /// `:` as FFmpeg's `x264-params` and `svtav1-params` take them (for
    /// SVT-AV1, `hierarchical-levels=5` makes mini-GOPs of 32 frames; for
    /// x264, `bframes=5:ref=4`), set after the layout's own; empty: none.
    /// A build checks them with the encoder before it starts: a value the
    /// encoder refuses, or a key or value it cannot parse (which FFmpeg
    /// only warns of, on x86-64 Unix where the build takes FFmpeg's
    /// warnings), fails it with [`crate::Error::InvalidArgument`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a pair without `=` or a key the
    /// layout sets itself or relies on: the keyframe interval and scene
    /// cuts (keyframes only at segment starts), open GOPs and intra
    /// refresh, rate control (`crf` is its own setting), the preset and
    /// tuning (their own settings), threads and instruction sets (the same
    /// frames encode to the same bytes), the pixel format and bit depth
    /// (`yuv420p`), interlacing, and x264's Annex B output.
    pub fn try_with_encoder_params(
        mut self,
        params: impl Into<String>,
    ) -> crate::error::Result<Self> {
        let params = params.into();
        for pair in params.split(':').filter(|p| !p.is_empty()) {
            let Some((key, _)) = pair.split_once('=') else {
                return Err(crate::error::Error::InvalidArgument(format!(
                    "encoder parameters are key=value pairs joined by ':', got '{pair}' in '{params}'"
                )));
            };
            let key = key.trim().to_ascii_lowercase().replace('_', "-");
            // x264 reads `no-KEY` and `noKEY` as KEY=false.
            let bare = key
                .strip_prefix("no-")
                .or_else(|| key.strip_prefix("no"))
                .unwrap_or(&key);
            let reserved = self.codec.reserved_params();
            if key.is_empty() || reserved.contains(&key.as_str()) || reserved.contains(&bare) {
                return Err(crate::error::Error::InvalidArgument(format!(
                    "the {} encoder parameter '{key}' is the layout's own (keyframes only at \
                     segment starts, crf, preset and tune as their own settings, one thread and \
                     fixed instruction sets, 8-bit yuv420p); it cannot be set in '{params}'",
                    self.codec.encoder_name()
                )));
            }
        }
        self.encoder_params = params;
        Ok(self)
    }

    /// Frames per segment: the closed group of pictures a window read
    /// decodes from its keyframe (default 32).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for 0 or more than 1024.
    pub fn try_with_frames_per_segment(mut self, n: u32) -> crate::error::Result<Self> {
        if n == 0 || n > 1024 {
            return Err(crate::error::Error::InvalidArgument(format!(
                "frames per segment must be 1 to 1024, got {n}"
            )));
        }
        self.frames_per_segment = n;
        Ok(self)
    }

    /// The codec.
    pub fn codec(&self) -> SegmentCodec {
        self.codec
    }

    /// The CRF.
    pub fn crf(&self) -> u32 {
        self.crf
    }

    /// The preset.
    pub fn preset(&self) -> &str {
        &self.preset
    }

    /// The tuning (empty: the encoder's default).
    pub fn tune(&self) -> &str {
        &self.tune
    }

    /// The encoder's own parameters (empty: none; see
    /// [`SegmentSettings::try_with_encoder_params`]).
    pub fn encoder_params(&self) -> &str {
        &self.encoder_params
    }

    /// Frames per segment.
    pub fn frames_per_segment(&self) -> u32 {
        self.frames_per_segment
    }

    /// The encoder parameters for frames coded at `width x height`.
    pub fn params(&self, width: u32, height: u32) -> SegmentParams {
        SegmentParams {
            codec: self.codec,
            width,
            height,
            crf: self.crf,
            preset: self.preset.clone(),
            tune: self.tune.clone(),
            encoder_params: self.encoder_params.clone(),
        }
    }
}

/// The version of the FFmpeg codec library that encodes and decodes
/// segments, as `libavcodec MAJOR.MINOR.MICRO`.
pub fn codec_library_version() -> String {
    let v = ff::codec::version();
    format!("libavcodec {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// How segments are encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentParams {
    /// The codec.
    pub codec: SegmentCodec,
    /// Frame width (even).
    pub width: u32,
    /// Frame height (even).
    pub height: u32,
    /// Constant rate factor (quality; lower is better).
    pub crf: u32,
    /// The encoder's speed preset (`medium` for x264, `8` for SVT-AV1).
    pub preset: String,
    /// The encoder's tuning (see [`SegmentSettings::try_with_tune`]; empty:
    /// the encoder's default).
    pub tune: String,
    /// More of the encoder's own parameters, `key=value` joined by `:`,
    /// set after the layout's (see
    /// [`SegmentSettings::try_with_encoder_params`]; empty: none).
    pub encoder_params: String,
}

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

fn ff_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
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

/// The UUID of the unregistered user-data SEI in which x264 writes its
/// version and options.
const X264_SEI_UUID: [u8; 16] = [
    0xdc, 0x45, 0xe9, 0xbd, 0xe6, 0xd9, 0x48, 0xb7, 0x96, 0x2c, 0xd8, 0x20, 0xd9, 0x23, 0xee, 0xef,
];

/// Positions of the Annex B start codes (`00 00 01`) in `data`.
fn start_codes(data: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut i = 0usize;
    while let Some(k) = data
        .get(i..)
        .and_then(|d| d.windows(3).position(|w| w == [0, 0, 1]))
    {
        at.push(i + k);
        i += k + 3;
    }
    at
}

/// Takes x264's description of itself (an unregistered user-data SEI with
/// its version and every option, about 700 bytes) out of the Annex B
/// packet `data`, and returns its text. Each segment is a stream of its
/// own, so each would carry it; decoders do not need it (the cache's
/// metadata names the encoder, its version and settings). A NAL unit that
/// is anything else, another SEI included, is left as it is.
fn take_x264_sei(data: &mut Vec<u8>) -> Option<String> {
    let codes = start_codes(data);
    for (k, &at) in codes.iter().enumerate() {
        let end = codes.get(k + 1).copied().unwrap_or(data.len());
        let body = &data[at + 3..end];
        if body.first().map(|h| h & 0x1f) != Some(6) {
            continue;
        }
        // The SEI's bytes without emulation prevention.
        let mut rbsp = Vec::with_capacity(body.len());
        let mut zeros = 0;
        for &b in &body[1..] {
            if zeros >= 2 && b == 3 {
                zeros = 0;
                continue;
            }
            zeros = if b == 0 { zeros + 1 } else { 0 };
            rbsp.push(b);
        }
        let mut i = 0usize;
        let mut number = || {
            let mut v = 0usize;
            while let Some(&b) = rbsp.get(i) {
                i += 1;
                v += usize::from(b);
                if b != 0xff {
                    return Some(v);
                }
            }
            None
        };
        let (Some(kind), Some(size)) = (number(), number()) else {
            continue;
        };
        // One message only: user data with x264's UUID, then the trailing
        // bits (and the zero byte of a next 4-byte start code).
        let Some(payload) = rbsp.get(i..i + size) else {
            continue;
        };
        let rest = &rbsp[i + size..];
        if kind != 5
            || size < 16
            || payload[..16] != X264_SEI_UUID
            || rest.first() != Some(&0x80)
            || rest[1..].iter().any(|&b| b != 0)
        {
            continue;
        }
        let text = String::from_utf8_lossy(&payload[16..])
            .trim_end_matches('\0')
            .to_string();
        data.drain(at..end);
        return Some(text);
    }
    None
}

/// Drops the temporal delimiter (an empty OBU of type 2, `12 00`) that
/// starts the AV1 packet at `start` of `data`: each packet is one temporal
/// unit already, and AV1 stored per sample (ISOBMFF, Matroska) leaves the
/// delimiters out likewise.
fn drop_temporal_delimiter(data: &mut Vec<u8>, start: usize) {
    if data.get(start..start + 2) == Some(&[0x12, 0x00]) {
        data.drain(start..start + 2);
    }
}

/// Whether an H.264 packet (Annex B) is a picture no other picture refers
/// to: every coded slice in it has `nal_ref_idc` 0 (such a picture can be
/// left out of decoding without changing any other picture).
fn h264_disposable(packet: &[u8]) -> bool {
    let mut slices = 0usize;
    let mut i = 0usize;
    while let Some(at) = packet[i..].windows(3).position(|w| w == [0, 0, 1]) {
        let h = i + at + 3;
        let Some(&header) = packet.get(h) else {
            break;
        };
        if matches!(header & 0x1f, 1 | 5) {
            if header & 0x60 != 0 {
                return false;
            }
            slices += 1;
        }
        i = h;
    }
    slices > 0
}

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
    /// The frame each packet presents, as [`EncodedSegment::packet_frames`]
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

/// A thread's last RGB converter (by source format and size), the frame it
/// converts into, and that frame's rows packed (when its rows are padded).
struct Converter {
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
    fn convert(&mut self, frame: &Frame) -> Result<&Frame, String> {
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
    fn packed_rgb(&mut self, frame: &Frame) -> Result<&[u8], String> {
        let (w, h) = (frame.width() as usize, frame.height() as usize);
        self.convert(frame)?;
        Ok(rgb_rows(&self.rgb, w, h, &mut self.packed))
    }
}

thread_local! {
    static DECODERS: std::cell::RefCell<Decoders> = std::cell::RefCell::new(Decoders::default());
    static CONVERTER: std::cell::RefCell<Converter> = std::cell::RefCell::new(Converter::default());
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

/// How a read of the frames the packets in `wanted` present sends each
/// packet of a segment to the decoder. H.264: every packet up to the last
/// wanted but the unwanted ones no other picture refers to. AV1: the
/// frames the wanted ones depend on ([`super::av1::Units`]), units cut
/// down to them.
fn packet_uses(
    codec: SegmentCodec,
    data: &[u8],
    packet_offsets: &[u64],
    wanted: &[bool],
) -> Vec<UnitUse> {
    match codec {
        SegmentCodec::Av1 => {
            super::av1::Units::parse(data, packet_offsets).plan(data, packet_offsets, wanted)
        }
        SegmentCodec::H264 => {
            let last = wanted.iter().rposition(|&w| w);
            packet_offsets
                .windows(2)
                .enumerate()
                .map(|(j, w)| {
                    let bytes = usize::try_from(w[0])
                        .ok()
                        .zip(usize::try_from(w[1]).ok())
                        .and_then(|(a, b)| data.get(a..b));
                    if last.is_none_or(|l| j > l)
                        || (!wanted[j] && bytes.is_some_and(h264_disposable))
                    {
                        UnitUse::Skip
                    } else {
                        UnitUse::Whole
                    }
                })
                .collect()
        }
    }
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
    let to_hand = if timed {
        (0..upto).filter(|&i| pick(i)).count()
    } else {
        0
    };
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

/// The swscale conversion of planar YUV 4:2:0 frames of `width x height`
/// to packed RGB, as decoded frames are converted.
fn yuv420_to_rgb_converter(
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
/// [`decode_segment`] converts decoded frames (so a comparison of the two
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
fn rgb_rows<'a>(rgb: &'a Frame, w: usize, h: usize, scratch: &'a mut Vec<u8>) -> &'a [u8] {
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
fn copy_planes(f: &[u8], frame: &mut Frame, w: usize, h: usize) {
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
fn pack_planes(frame: &Frame, w: usize, h: usize) -> Vec<u8> {
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
    super::decode::VideoFile::open(path)?.for_each_frame(
        path,
        super::decode::PixelTarget::Yuv420,
        Some((w, h)),
        |_, f| {
            out.push(pack_planes(f, w, h));
            Ok(true)
        },
    )?;
    Ok(out)
}

/// One segment of a video, encoded, with what the encoding cost.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoSegment {
    /// The video's frame number of the segment's first frame.
    pub first_frame: u64,
    /// The packets.
    pub encoded: EncodedSegment,
    /// Mean PSNR (dB, RGB samples) of its decoded frames against the
    /// source frames; a frame decoded exactly counts as [`PSNR_CAP`].
    pub psnr: f64,
    /// Lowest per-frame PSNR.
    pub psnr_min: f64,
    /// Mean SSIM (BT.601 luma) of its decoded frames.
    pub ssim: f64,
    /// Lowest per-frame SSIM.
    pub ssim_min: f64,
}

/// The PSNR recorded for a frame decoded exactly (its true PSNR is
/// infinite, which JSON cannot hold and a mean cannot use).
pub const PSNR_CAP: f64 = 100.0;

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

/// Encodes the segments of one video and measures each against its
/// source frames: one converter of source frames to RGB for the whole
/// video, the same conversion the decoded frames go through.
pub struct SegmentEncoder {
    params: SegmentParams,
    crop: (u32, u32),
    scaler: ff::software::scaling::Context,
    src: Frame,
    rgb: Frame,
    packed: Vec<u8>,
}

impl SegmentEncoder {
    /// An encoder of frames stored at `width x height`, coded at the even
    /// sides of `params`.
    ///
    /// # Errors
    /// A message when the sizes do not fit (odd coded sides, a stored size
    /// larger than the coded one, AV1 below 64x64) or swscale fails.
    pub fn new(params: SegmentParams, width: u32, height: u32) -> Result<Self, String> {
        init();
        let (ew, eh) = (params.width, params.height);
        if ew == 0 || eh == 0 || ew % 2 == 1 || eh % 2 == 1 || width > ew || height > eh {
            return Err(format!(
                "frames of {width}x{height} cannot be coded at {ew}x{eh}"
            ));
        }
        if params.codec == SegmentCodec::Av1 && (ew < 64 || eh < 64) {
            return Err(format!(
                "SVT-AV1 encodes frames of at least 64x64, this video's are {width}x{height} (use H.264)"
            ));
        }
        let scaler = yuv420_to_rgb_converter(width, height)?;
        Ok(SegmentEncoder {
            src: Frame::new(Pixel::YUV420P, ew, eh),
            params,
            crop: (width, height),
            scaler,
            rgb: Frame::empty(),
            packed: Vec::new(),
        })
    }

    /// Packed RGB of a coded YUV frame, cropped to the stored size.
    fn source_rgb(&mut self, yuv: &[u8]) -> Result<&[u8], String> {
        let (ew, eh) = (self.params.width, self.params.height);
        self.src.set_width(ew);
        self.src.set_height(eh);
        copy_planes(yuv, &mut self.src, ew as usize, eh as usize);
        // The stored part only, converted as a frame of that size (as the
        // reader converts decoded frames).
        self.src.set_width(self.crop.0);
        self.src.set_height(self.crop.1);
        self.scaler
            .run(&self.src, &mut self.rgb)
            .map_err(|e| ff_err("cannot convert a frame", e))?;
        Ok(rgb_rows(
            &self.rgb,
            self.crop.0 as usize,
            self.crop.1 as usize,
            &mut self.packed,
        ))
    }

    /// Encodes `frames` (coded YUV 4:2:0, as [`pack_yuv420_even`] packs
    /// them) as the segment starting at frame `first` of its video, decodes
    /// it back and measures every frame.
    ///
    /// # Errors
    /// An encoding or decoding error, or a segment that does not decode to
    /// exactly its frames.
    pub fn encode(&mut self, first: u64, frames: &[Vec<u8>]) -> Result<VideoSegment, String> {
        let encoded = encode_segment(&self.params, frames)?;
        let (cw, ch) = (self.crop.0 as usize, self.crop.1 as usize);
        let (codec, coded, crop) = (
            self.params.codec,
            (self.params.width, self.params.height),
            self.crop,
        );
        let mut psnrs = Vec::with_capacity(frames.len());
        let mut ssims = Vec::with_capacity(frames.len());
        let mut failed = None;
        // Each source frame goes to RGB as its decoded twin arrives: one
        // frame of each in memory at a time, whatever the segment length.
        let n = decode_segment_picked(
            &SegmentRead {
                codec,
                coded,
                crop,
                data: &encoded.data,
                packet_offsets: &encoded.packet_offsets,
                packet_frames: None,
                pick: &|_| true,
                upto: frames.len(),
            },
            |i, rgb| match frames.get(i).map(|f| self.source_rgb(f)) {
                Some(Ok(src)) => {
                    psnrs.push(super::quality::psnr(src, rgb).min(PSNR_CAP));
                    ssims.push(super::quality::ssim_rgb(src, rgb, cw, ch));
                }
                Some(Err(e)) => failed = Some(e),
                None => {}
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
        if n != frames.len() || psnrs.len() != frames.len() {
            return Err(format!(
                "a segment of {} frames decoded to {n} (from frame {first})",
                frames.len()
            ));
        }
        let k = psnrs.len().max(1) as f64;
        Ok(VideoSegment {
            first_frame: first,
            encoded,
            psnr: psnrs.iter().sum::<f64>() / k,
            psnr_min: psnrs.iter().copied().fold(PSNR_CAP, f64::min),
            ssim: ssims.iter().sum::<f64>() / k,
            ssim_min: ssims.iter().copied().fold(1.0, f64::min),
        })
    }
}

/// Decodes the video at `path` (at `p.width x p.height`), cuts it into
/// segments of `frames_per_segment` frames (the last one shorter), encodes
/// each, decodes it back and measures it against the source frames.
///
/// # Errors
/// A message naming the file when it cannot be decoded, or an encoding
/// error.
pub fn encode_video(
    path: &std::path::Path,
    p: &SegmentParams,
    frames_per_segment: usize,
) -> Result<Vec<VideoSegment>, String> {
    if frames_per_segment == 0 {
        return Err("segments need at least one frame".into());
    }
    let (w, h) = (p.width as usize, p.height as usize);
    let mut file = super::decode::VideoFile::open(path)?;
    let mut enc = SegmentEncoder::new(p.clone(), p.width, p.height)?;
    let mut out = Vec::new();
    let mut chunk: Vec<Vec<u8>> = Vec::with_capacity(frames_per_segment);
    let mut first = 0u64;
    file.for_each_frame(
        path,
        super::decode::PixelTarget::Yuv420,
        Some((w, h)),
        |i, frame| {
            chunk.push(pack_planes(frame, w, h));
            if chunk.len() == frames_per_segment {
                out.push(enc.encode(first, &chunk)?);
                chunk.clear();
                first = i + 1;
            }
            Ok(true)
        },
    )?;
    if !chunk.is_empty() {
        out.push(enc.encode(first, &chunk)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A moving gradient, YUV 4:2:0.
    fn frames(n: usize, w: usize, h: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|t| {
                let mut f = Vec::with_capacity(w * h * 3 / 2);
                for y in 0..h {
                    for x in 0..w {
                        f.push(((x * 3 + y * 2 + t * 5) % 200 + 20) as u8);
                    }
                }
                for _ in 0..2 {
                    for y in 0..h / 2 {
                        for x in 0..w / 2 {
                            f.push(((x + y + t) % 40 + 108) as u8);
                        }
                    }
                }
                f
            })
            .collect()
    }

    #[test]
    fn encoder_params_are_checked_when_set() {
        let h = SegmentSettings::new(SegmentCodec::H264);
        let a = SegmentSettings::new(SegmentCodec::Av1);
        assert_eq!(h.encoder_params(), "");
        let ok = h
            .clone()
            .try_with_encoder_params("bframes=5:ref=4")
            .unwrap();
        assert_eq!(ok.encoder_params(), "bframes=5:ref=4");
        assert_eq!(ok.params(64, 64).encoder_params, "bframes=5:ref=4");
        assert!(a
            .clone()
            .try_with_encoder_params("hierarchical-levels=5")
            .is_ok());
        // Keys the layout sets, however spelled (x264 reads `no-KEY` and
        // `noKEY` as KEY=false, and `_` as `-`), and pairs without `=`.
        for bad in [
            "keyint=250",
            "bframes=2:Min_Keyint=5",
            "no-scenecut=1",
            "noscenecut=1",
            "open_gop=1",
            "threads=4",
            "asm=AVX512",
            "annexb=0",
            "output-csp=i444",
            "crf=10",
            "bframes",
        ] {
            let e = h.clone().try_with_encoder_params(bad).unwrap_err();
            assert!(
                matches!(&e, crate::Error::InvalidArgument(m) if m.contains(bad)),
                "{bad}: {e}"
            );
        }
        for bad in [
            "scd=1",
            "keyint=64",
            "irefresh-type=1",
            "lp=4",
            "input-depth=10",
        ] {
            let e = a.clone().try_with_encoder_params(bad).unwrap_err();
            assert!(matches!(&e, crate::Error::InvalidArgument(m) if m.contains("libsvtav1")));
        }
        // A key of one encoder is not reserved by the other: scd is SVT-AV1's.
        assert!(h.try_with_encoder_params("scd=1").is_ok());
    }

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

    #[test]
    fn h264_segments_decode_to_exactly_their_frames() {
        let (w, h) = (64u32, 48u32);
        let p = SegmentParams {
            codec: SegmentCodec::H264,
            width: w,
            height: h,
            crf: 20,
            preset: "medium".into(),
            tune: String::new(),
            encoder_params: String::new(),
        };
        for n in [1usize, 2, 7, 16] {
            let src = frames(n, w as usize, h as usize);
            let seg = encode_segment(&p, &src).unwrap();
            assert_eq!(seg.frames, n);
            assert_eq!(*seg.packet_offsets.last().unwrap(), seg.data.len() as u64);
            // Every frame, and a window from the middle.
            let mut got = Vec::new();
            let total = decode_segment(
                p.codec,
                w,
                h,
                &seg.data,
                &seg.packet_offsets,
                0..n,
                |i, rgb| got.push((i, rgb.to_vec())),
            )
            .unwrap();
            assert_eq!(total, n);
            assert_eq!(got.len(), n);
            assert!(got
                .iter()
                .enumerate()
                .all(|(k, (i, f))| *i == k && f.len() == (w * h * 3) as usize));
            // Each frame is close to its source (gray-ish gradient: compare luma-ish).
            for (i, rgb) in &got {
                let y0 = src[*i][0] as i32;
                let g = rgb[1] as i32;
                assert!((y0 - g).abs() < 40, "frame {i}: {y0} vs {g}");
            }
            if n > 3 {
                let mut kept = Vec::new();
                decode_segment(
                    p.codec,
                    w,
                    h,
                    &seg.data,
                    &seg.packet_offsets,
                    2..4,
                    |i, rgb| kept.push((i, rgb.to_vec())),
                )
                .unwrap();
                assert_eq!(kept, got[2..4].to_vec());
            }
        }
    }

    #[test]
    fn kept_frames_convert_to_the_frames_a_decode_hands_out() {
        // Stored sizes whose RGB rows swscale pads (90 * 3 bytes) and odd
        // sides coded one pixel larger, at both codecs' sizes.
        for (codec, (w, h)) in [
            (SegmentCodec::H264, (90u32, 48u32)),
            (SegmentCodec::H264, (63, 47)),
            (SegmentCodec::Av1, (90, 66)),
        ] {
            let coded = (w + (w & 1), h + (h & 1));
            let p = SegmentSettings::new(codec).params(coded.0, coded.1);
            let seg = encode_segment(&p, &frames(12, coded.0 as usize, coded.1 as usize)).unwrap();
            // Every frame, every packet decoded.
            let every = SegmentRead {
                codec,
                coded,
                crop: (w, h),
                data: &seg.data,
                packet_offsets: &seg.packet_offsets,
                packet_frames: None,
                pick: &|_| true,
                upto: 12,
            };
            let mut want = Vec::new();
            decode_segment_picked(&every, |i, rgb| want.push((i, rgb.to_vec()))).unwrap();
            assert_eq!(want.len(), 12);
            let rgb = |f: &DecodedFrame| {
                let mut out = vec![MaybeUninit::new(0xa5u8); f.rgb_len()];
                f.to_rgb(&mut out).unwrap();
                out.iter()
                    .map(|b| unsafe { b.assume_init() })
                    .collect::<Vec<u8>>()
            };
            // Frames 5..8 asked for: each goes to the callee as it comes
            // out, and every frame out up to the last one is kept, those
            // not asked for too.
            let mut handed = Vec::new();
            let (n, kept) = decode_segment_frames(
                &SegmentRead {
                    packet_frames: Some(&seg.packet_frames),
                    pick: &|i| (5..8).contains(&i),
                    upto: 8,
                    ..every
                },
                &mut |i, f| {
                    handed.push((i, rgb(f)));
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(n, 8, "{codec:?} {w}x{h}");
            for i in 5..8 {
                assert!(kept.iter().any(|(k, _)| *k == i), "{codec:?} frame {i}");
            }
            assert!(kept.iter().all(|(i, _)| *i < 8));
            handed.sort();
            assert_eq!(
                handed.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                [5, 6, 7]
            );
            for (i, f) in &handed {
                assert!(*f == want[*i].1, "{codec:?} {w}x{h} handed frame {i}");
            }
            for (i, f) in &kept {
                assert_eq!(f.rgb_len(), (w * h * 3) as usize);
                assert!(rgb(f) == want[*i].1, "{codec:?} {w}x{h} frame {i}");
            }
            // Without packet frames every frame up to the last is kept.
            let (n, all) = decode_segment_frames(
                &SegmentRead {
                    pick: &|i| i == 6,
                    upto: 7,
                    ..every
                },
                &mut |_, _| Ok(()),
            )
            .unwrap();
            assert_eq!(n, 7);
            assert_eq!(
                all.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                (0..7).collect::<Vec<_>>()
            );
            for (i, f) in &all {
                assert!(
                    rgb(f) == want[*i].1,
                    "{codec:?} {w}x{h} frame {i}, every packet"
                );
            }
            // The error of a picked frame's callee ends the decode.
            let e = decode_segment_frames(
                &SegmentRead {
                    pick: &|i| i == 2,
                    upto: 7,
                    ..every
                },
                &mut |i, _| Err(format!("stop at {i}")),
            )
            .unwrap_err();
            assert_eq!(e, "stop at 2");
            // An output of another size is an error, and left alone.
            let mut short = vec![MaybeUninit::new(7u8); all[0].1.rgb_len() - 1];
            let e = all[0].1.to_rgb(&mut short).unwrap_err();
            assert!(e.contains("RGB bytes"), "{e}");
            assert!(short.iter().all(|b| unsafe { b.assume_init() } == 7));
        }
    }

    /// 32 frames encoded as one segment at the codec's default settings,
    /// with the frame of each packet recorded.
    fn default_segment_of_32(
        codec: SegmentCodec,
        w: u32,
        h: u32,
    ) -> (SegmentParams, EncodedSegment) {
        let p = SegmentSettings::new(codec).params(w, h);
        let seg = encode_segment(&p, &frames(32, w as usize, h as usize)).unwrap();
        assert!(
            is_permutation(&seg.packet_frames, 32),
            "{:?}",
            seg.packet_frames
        );
        (p, seg)
    }

    /// The frames at `keep` of a segment, decoded with or without its
    /// packets' frames: the frames decoded up to, and the frames in order.
    fn decode_kept(
        p: &SegmentParams,
        seg: &EncodedSegment,
        frames: Option<&[i64]>,
        keep: std::ops::Range<usize>,
    ) -> (usize, Vec<Vec<u8>>) {
        let mut got = Vec::new();
        let end = keep.end;
        let n = decode_segment_picked(
            &SegmentRead {
                codec: p.codec,
                coded: (p.width, p.height),
                crop: (p.width, p.height),
                data: &seg.data,
                packet_offsets: &seg.packet_offsets,
                packet_frames: frames,
                pick: &|i| keep.contains(&i),
                upto: end,
            },
            |i, rgb| got.push((i, rgb.to_vec())),
        )
        .unwrap();
        got.sort_by_key(|(i, _)| *i);
        (n, got.into_iter().map(|(_, f)| f).collect())
    }

    /// Every window (lengths 1, 5 and 16, at every start) of a 32-frame
    /// segment, read with only the packets (or frames) it needs, equals those
    /// frames of the whole segment decoded; returns the whole.
    fn every_window_equals_a_full_decode(p: &SegmentParams, seg: &EncodedSegment) -> Vec<Vec<u8>> {
        let (n, full) = decode_kept(p, seg, None, 0..32);
        assert_eq!((n, full.len()), (32, 32));
        for start in 0..32 {
            for len in [1usize, 5, 16] {
                let keep = start..(start + len).min(32);
                let (n, got) = decode_kept(p, seg, Some(&seg.packet_frames), keep.clone());
                assert_eq!(n, keep.end, "window {keep:?}");
                assert!(got == full[keep.clone()], "window {keep:?}");
            }
        }
        full
    }

    #[test]
    fn h264_windows_leave_out_unreferenced_pictures_and_equal_a_full_decode() {
        // The layout's default encoding: segments of 32, B-frames.
        let (p, seg) = default_segment_of_32(SegmentCodec::H264, 64, 48);
        assert!(
            seg.packet_frames
                .iter()
                .enumerate()
                .any(|(j, &f)| f != j as i64),
            "B-frames: packets out of frame order {:?}",
            seg.packet_frames
        );
        let packets: Vec<&[u8]> = seg
            .packet_offsets
            .windows(2)
            .map(|o| &seg.data[o[0] as usize..o[1] as usize])
            .collect();
        let disposable = packets.iter().filter(|b| h264_disposable(b)).count();
        assert!(
            disposable >= 8 && !h264_disposable(packets[0]),
            "{disposable} of 32 pictures unreferenced"
        );
        let full = every_window_equals_a_full_decode(&p, &seg);
        // Packets out of step with their list (a damaged row) decode every
        // packet, counted as they come out.
        let (n, got) = decode_kept(&p, &seg, Some(&seg.packet_frames[1..]), 3..9);
        assert_eq!((n, got), (9, full[3..9].to_vec()));
    }

    #[test]
    fn av1_windows_decode_only_the_frames_they_depend_on_and_equal_a_full_decode() {
        use super::super::av1::Units;
        // The layout's default AV1 encoding: segments of 32, SVT-AV1's
        // hierarchical prediction (frames decoded early and shown later,
        // several to a unit).
        let (p, seg) = default_segment_of_32(SegmentCodec::Av1, 64, 64);
        let units = Units::parse(&seg.data, &seg.packet_offsets);
        let frames = units.frame_count();
        assert!(frames > 40, "{frames} frames in 32 units");
        let wanted = |r: std::ops::Range<usize>| -> Vec<bool> {
            let r = r.start as i64..r.end as i64;
            seg.packet_frames.iter().map(|f| r.contains(f)).collect()
        };
        // Every frame for the whole segment; for its last 16 frames, or
        // its last frame, fewer (not the hidden frames of the first half),
        // with units cut down to some of their frames.
        assert_eq!(units.decoded(&wanted(0..32)), (frames, 0));
        let (last16, opaque) = units.decoded(&wanted(16..32));
        let (last1, _) = units.decoded(&wanted(31..32));
        assert!(
            opaque == 0 && last16 + 6 <= frames && last1 < last16 && last1 >= 5,
            "{last16} and {last1} of {frames} frames"
        );
        let plan = units.plan(&seg.data, &seg.packet_offsets, &wanted(31..32));
        assert!(
            plan.iter().any(|u| matches!(u, UnitUse::Part(_))),
            "{plan:?}"
        );
        let full = every_window_equals_a_full_decode(&p, &seg);
        // Distinct frames: a frame left out and another shown in its place
        // would not compare equal.
        assert!(full.windows(2).all(|f| f[0] != f[1]));
        // A segment whose units this reader cannot follow is decoded whole:
        // with its sequence header damaged, every unit up to the last
        // wanted is sent whole.
        let mut damaged = seg.data.clone();
        let at = damaged.iter().position(|&b| b == 0x0a).unwrap();
        damaged[at] = 0x80;
        let units = Units::parse(&damaged, &seg.packet_offsets);
        let last = wanted(3..4).iter().rposition(|&w| w).unwrap();
        assert_eq!(units.decoded(&wanted(3..4)), (0, last + 1));
    }

    #[test]
    fn av1_segments_decode_to_exactly_their_frames() {
        let (w, h) = (64u32, 64u32);
        let p = SegmentParams {
            codec: SegmentCodec::Av1,
            width: w,
            height: h,
            crf: 40,
            preset: "8".into(),
            tune: "1".into(),
            encoder_params: String::new(),
        };
        let small = SegmentParams {
            height: 48,
            ..p.clone()
        };
        assert!(encode_segment(&small, &frames(1, 64, 48))
            .unwrap_err()
            .contains("64x64"));
        let src = frames(9, w as usize, h as usize);
        let seg = encode_segment(&p, &src).unwrap();
        let mut n = 0;
        let total = decode_segment(
            p.codec,
            w,
            h,
            &seg.data,
            &seg.packet_offsets,
            0..9,
            |i, _| {
                assert_eq!(i, n);
                n += 1;
            },
        )
        .unwrap();
        assert_eq!((total, n), (9, 9));
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

    /// Only an SEI that is x264's user data and nothing more is taken out:
    /// another user-data SEI, and one with a second message, stay.
    #[test]
    fn only_x264s_own_sei_is_taken_out() {
        let mut x264 = vec![0, 0, 0, 1, 0x06, 5];
        let text = b"x264 - core 164 - options: cabac=1\0";
        x264.push((16 + text.len()) as u8);
        x264.extend_from_slice(&X264_SEI_UUID);
        x264.extend_from_slice(text);
        x264.push(0x80);
        let other = |extra: &[u8]| {
            let mut v = vec![0, 0, 1, 0x06, 5, 16];
            v.extend_from_slice(&[7u8; 16]);
            v.extend_from_slice(extra);
            v.push(0x80);
            v
        };
        let sps = [0, 0, 0, 1, 0x67, 0x42, 0, 0x0a];
        let idr = [0, 0, 1, 0x65, 0x88, 0x84];
        let mut packet = sps.to_vec();
        packet.extend_from_slice(&x264);
        packet.extend(other(&[]));
        packet.extend_from_slice(&idr);
        let info = take_x264_sei(&mut packet).unwrap();
        assert_eq!(info, "x264 - core 164 - options: cabac=1");
        let mut want = sps.to_vec();
        // The SEI's leading zero stays: the next NAL unit keeps a start code.
        want.push(0);
        want.extend(other(&[]));
        want.extend_from_slice(&idr);
        assert_eq!(packet, want);
        assert_eq!(take_x264_sei(&mut packet), None);
        // x264's UUID with a second message after it: kept.
        let mut two = x264[..x264.len() - 1].to_vec();
        two.extend_from_slice(&[1, 1, 0, 0x80]);
        let mut p2 = sps.to_vec();
        p2.extend_from_slice(&two);
        let before = p2.clone();
        assert_eq!(take_x264_sei(&mut p2), None);
        assert_eq!(p2, before);
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

    /// A real clip (80x60, 24 frames) in segments of 5: every frame is
    /// in one segment, in order, each decoded frame is closest to its own
    /// source frame (frame-exact), and the measured quality is recorded.
    #[test]
    fn a_video_is_cut_into_segments_frame_exactly() {
        let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/sources/clip_a.mp4");
        let p = SegmentParams {
            codec: SegmentCodec::H264,
            width: 80,
            height: 60,
            crf: 23,
            preset: "medium".into(),
            tune: String::new(),
            encoder_params: String::new(),
        };
        // The source frames, converted the same way.
        let mut src = Vec::new();
        let mut file = crate::video::decode::VideoFile::open(&clip).unwrap();
        file.for_each_frame(
            &clip,
            crate::video::decode::PixelTarget::Yuv420,
            Some((80, 60)),
            |_, f| {
                src.push(yuv420_to_rgb(&pack_planes(f, 80, 60), 80, 60).unwrap());
                Ok(true)
            },
        )
        .unwrap();
        let n = src.len();
        assert!(n > 10 && n % 5 != 0, "{n} frames: a short last segment");
        let segs = encode_video(&clip, &p, 5).unwrap();
        assert_eq!(
            segs.iter()
                .map(|s| (s.first_frame, s.encoded.frames))
                .collect::<Vec<_>>(),
            (0..n)
                .step_by(5)
                .map(|f| (f as u64, (n - f).min(5)))
                .collect::<Vec<_>>()
        );
        for s in &segs {
            assert!(
                s.psnr > 30.0 && s.psnr_min <= s.psnr && s.ssim > 0.9 && s.ssim_min <= s.ssim,
                "segment at {}: {} {} {}",
                s.first_frame,
                s.psnr,
                s.psnr_min,
                s.ssim
            );
        }
        // Lossless (crf 0): every decoded frame is exactly its own source
        // frame, so frame i of a segment is frame first + i of the video.
        let lossless = SegmentParams {
            crf: 0,
            ..p.clone()
        };
        let segs = encode_video(&clip, &lossless, 5).unwrap();
        let mut seen = 0;
        for s in &segs {
            assert_eq!(
                (s.psnr, s.psnr_min, s.ssim, s.ssim_min),
                (PSNR_CAP, PSNR_CAP, 1.0, 1.0),
                "segment at {}",
                s.first_frame
            );
            decode_segment(
                p.codec,
                80,
                60,
                &s.encoded.data,
                &s.encoded.packet_offsets,
                0..5,
                |j, rgb| {
                    assert!(rgb == src[s.first_frame as usize + j].as_slice());
                    seen += 1;
                },
            )
            .unwrap();
        }
        assert_eq!(seen, n);
        assert!(encode_video(&clip, &p, 0).is_err());
        let broken = clip.with_file_name("broken.mp4");
        assert!(encode_video(&broken, &p, 4).is_err());
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
