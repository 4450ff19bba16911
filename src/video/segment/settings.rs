//! What a segments build encodes with: the codec, its defaults and limits,
//! the settings a build is given (checked when set) and the parameters an
//! encoder is opened with.

use ffmpeg_next as ff;

crate::util::named_enum! {
    /// The codec of a segment.
    pub enum SegmentCodec("segment codec") {
        /// H.264 (libx264 to encode).
        H264 = "h264",
        /// AV1 (SVT-AV1 to encode).
        Av1 = "av1",
    }
}

impl SegmentCodec {
    /// `h264` or `av1` (its [`name`](SegmentCodec::name)).
    pub fn as_str(self) -> &'static str {
        self.name()
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

    pub(super) fn id(self) -> ff::codec::Id {
        match self {
            SegmentCodec::H264 => ff::codec::Id::H264,
            SegmentCodec::Av1 => ff::codec::Id::AV1,
        }
    }
}

/// The H.264 default CRF (see [`SegmentCodec::default_crf`]).
pub const DEFAULT_H264_CRF: u32 = 26;
/// The AV1 default CRF (see [`SegmentCodec::default_crf`]).
pub const DEFAULT_AV1_CRF: u32 = 43;
/// The default frames per segment.
pub const DEFAULT_FRAMES_PER_SEGMENT: u32 = 32;
/// The most frames per segment a build takes (so a reader takes no more).
pub const MAX_FRAMES_PER_SEGMENT: u32 = 1024;

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
    /// [`crate::Error::InvalidArgument`] for 0 or more than
    /// [`MAX_FRAMES_PER_SEGMENT`].
    pub fn try_with_frames_per_segment(mut self, n: u32) -> crate::error::Result<Self> {
        if n == 0 || n > MAX_FRAMES_PER_SEGMENT {
            return Err(crate::error::Error::InvalidArgument(format!(
                "frames per segment must be 1 to {MAX_FRAMES_PER_SEGMENT}, got {n}"
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
