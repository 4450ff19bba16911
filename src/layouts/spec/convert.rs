//! A [`WriteSpec`](super::WriteSpec)'s options turned into each layout
//! writer's option builder: the one conversion, run when a spec is made (so
//! a bad value is refused then) and again when it is written.

#[cfg(feature = "video")]
use super::VideoSpec;
use super::{option_error, RowSpec, Size};

/// What both row writers take alike: encode threads and rows per record batch.
macro_rules! threads_and_batches {
    ($spec:expr, $o:expr) => {{
        let mut o = $o;
        if let Some(t) = $spec.threads {
            o = o.with_encode_threads(t);
        }
        if let Some(b) = $spec.batch_size {
            o = o
                .try_with_batch_size(b)
                .map_err(|e| option_error("batch_size", &e))?;
        }
        o
    }};
}
#[cfg(feature = "video")]
use crate::error::Error;
use crate::error::Result;
use crate::features::image::PngCompression;
use crate::layouts::arrow_shards::format::{Codec, Compression};
use crate::layouts::arrow_shards::write::{ArrowWriteOptions, DEFAULT_SHARD_SIZE_BYTES};

impl RowSpec {
    /// The codec and its level as one value, if a compression was given.
    fn codec(&self) -> Result<Option<Codec>> {
        let c = self
            .compression
            .as_deref()
            .map(|c| c.parse::<Compression>())
            .transpose()
            .map_err(|e| option_error("compression", &e))?;
        match c {
            None if self.compression_level.is_some() => Err(option_error(
                "compression_level",
                &"needs compression='zstd'",
            )),
            None => Ok(None),
            Some(c) => Codec::try_new(c, self.compression_level)
                .map(Some)
                .map_err(|e| option_error("compression_level", &e)),
        }
    }

    fn png(&self) -> Result<PngCompression> {
        self.png_level
            .map(PngCompression::level)
            .transpose()
            .map_err(|e| option_error("png_level", &e))
            .map(Option::unwrap_or_default)
    }

    /// The Arrow writer's options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option with a bad value.
    pub fn arrow(&self) -> Result<ArrowWriteOptions> {
        let shard = match &self.shard_size {
            None => Some(DEFAULT_SHARD_SIZE_BYTES),
            Some(Size::Text(t)) if t == "one" => None,
            Some(s) => Some(s.bytes("shard_size")?),
        };
        let mut o = ArrowWriteOptions::default()
            .try_with_shard_size_bytes(shard)
            .map_err(|e| option_error("shard_size", &e))?
            .with_png_compression(self.png()?)
            .with_record_checksums(self.record_checksums.unwrap_or(false));
        if let Some(c) = self.codec()? {
            o = o
                .try_with_codec(c)
                .map_err(|e| option_error("compression_level", &e))?;
        }
        o = threads_and_batches!(self, o);
        if let Some(d) = &self.dedup {
            o = o
                .try_with_dedup(Some(d.bytes("dedup")?))
                .map_err(|e| option_error("dedup", &e))?;
        }
        if let Some(id) = &self.build_id {
            o = o.with_build_id(id.clone());
        }
        Ok(o)
    }

    /// The Lance writer's options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option with a bad value.
    #[cfg(feature = "lance")]
    pub fn lance(&self) -> Result<crate::layouts::lance_rows::write::LanceWriteOptions> {
        let mut o = crate::layouts::lance_rows::write::LanceWriteOptions::default()
            .with_png_compression(self.png()?);
        if let Some(c) = self.codec()? {
            o = o
                .try_with_codec(c)
                .map_err(|e| option_error("compression_level", &e))?;
        }
        o = threads_and_batches!(self, o);
        if let Some(n) = self.max_rows_per_file {
            o = o
                .try_with_max_rows_per_file(n)
                .map_err(|e| option_error("max_rows_per_file", &e))?;
        }
        if let Some(c) = &self.scalar_index {
            o = o.with_scalar_index(c.clone());
        }
        Ok(o)
    }
}

#[cfg(feature = "video")]
impl VideoSpec {
    /// The video writer's options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option with a bad value.
    pub fn video(&self) -> Result<crate::layouts::video_frames::options::VideoFramesOptions> {
        use crate::video::segment::{SegmentCodec, SegmentSettings};
        use crate::video::webp::WebpSettings;
        let mut o = crate::layouts::video_frames::options::VideoFramesOptions::default();
        let mut webp = WebpSettings::default();
        if let Some(q) = self.webp_quality {
            webp = webp
                .try_with_quality(q)
                .map_err(|e| option_error("webp_quality", &e))?;
        }
        if let Some(m) = self.webp_method {
            webp = webp
                .try_with_method(m)
                .map_err(|e| option_error("webp_method", &e))?;
        }
        if let Some(i) = &self.webp_input {
            webp = webp.with_input(i.parse().map_err(|e| option_error("webp_input", &e))?);
        }
        o = o.with_webp(webp);
        if let Some(r) = self.resize {
            o = o
                .try_with_resize(Some(r))
                .map_err(|e| option_error("resize", &e))?;
        }
        if let Some(m) = &self.resize_mode {
            o = o.with_resize_mode(m.parse().map_err(|e| option_error("resize_mode", &e))?);
        }
        if let Some(t) = self.threads {
            o = o.with_threads(t);
        }
        if let Some(s) = self.skip_corrupt {
            o = o.with_skip_corrupt(s);
        }
        if let Some(n) = self.max_rows_per_file {
            o = o
                .try_with_max_rows_per_file(n)
                .map_err(|e| option_error("max_rows_per_file", &e))?;
        }
        if let Some(b) = &self.buffer {
            o = o.with_buffer_bytes(b.bytes("buffer")? as usize);
        }
        if let Some(c) = self.checkpoint_frames {
            o = o.with_checkpoint_frames(c);
        }
        if let Some(s) = &self.segments {
            let seg =
                |key: &'static str| move |e: Error| option_error(&format!("segments.{key}"), &e);
            let codec: SegmentCodec = match &s.codec {
                Some(c) => c.parse().map_err(seg("codec"))?,
                None => SegmentCodec::H264,
            };
            let mut st = SegmentSettings::new(codec);
            if let Some(c) = s.crf {
                st = st.try_with_crf(c).map_err(seg("crf"))?;
            }
            if let Some(p) = &s.preset {
                st = st.with_preset(p.clone());
            }
            if let Some(t) = &s.tune {
                st = st.try_with_tune(t.clone()).map_err(seg("tune"))?;
            }
            if let Some(p) = &s.encoder_params {
                st = st
                    .try_with_encoder_params(p.clone())
                    .map_err(seg("encoder_params"))?;
            }
            if let Some(n) = s.frames_per_segment {
                st = st
                    .try_with_frames_per_segment(n)
                    .map_err(seg("frames_per_segment"))?;
            }
            o = o.with_segments(st);
        }
        Ok(o)
    }
}
