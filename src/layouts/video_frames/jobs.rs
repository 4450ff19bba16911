//! The per-video side of a frames build: resolving an example to an input
//! file, the job that decodes it and encodes its frames to WebP, the chunks
//! of frames it sends, and the byte budget that holds jobs ahead of the
//! video being written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use arrow_array::builder::{Int32Builder, Int64Builder, LargeBinaryBuilder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};
use crossbeam_channel::Sender;
use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::value::{Example, Value};
use crate::video::decode::{PixelTarget, VideoFile};
use crate::video::segment::{pack_yuv420_even, SegmentEncoder, VideoSegment};
use crate::video::webp::{WebpEncoder, WebpInput, Yuv420};

use super::format::PACKET_FRAMES;
use super::options::{VideoFramesOptions, FRAMES_PER_BATCH};

/// One input video, resolved.
pub(super) struct Task {
    pub(super) id: i64,
    pub(super) key: J,
    pub(super) file: PathBuf,
    /// Recorded `path` (the source, or `<sha256><ext>` for inline bytes).
    pub(super) recorded: String,
    pub(super) checksum: Option<String>,
    pub(super) metadata: serde_json::Map<String, J>,
    /// Inline bytes written for FFmpeg, removed when the video is done.
    pub(super) temp: bool,
}

pub(super) enum Msg {
    Size(usize, usize),
    Rows(Chunk),
    Done(u64),
    Failed(String),
}

/// Rows of one video, encoded: WebP frames (a row each) or segments.
pub(super) enum Chunk {
    Webp(Vec<Vec<u8>>),
    Segments(Vec<VideoSegment>),
}

impl Chunk {
    /// Encoded bytes (what counts against the buffer budget).
    pub(super) fn bytes(&self) -> u64 {
        match self {
            Chunk::Webp(f) => f.iter().map(|f| f.len() as u64).sum(),
            Chunk::Segments(s) => s.iter().map(|s| s.encoded.data.len() as u64).sum(),
        }
    }

    /// Frames covered.
    pub(super) fn frames(&self) -> u64 {
        match self {
            Chunk::Webp(f) => f.len() as u64,
            Chunk::Segments(s) => s.iter().map(|s| s.encoded.frames as u64).sum(),
        }
    }

    /// Lance rows.
    pub(super) fn rows(&self) -> u64 {
        match self {
            Chunk::Webp(f) => f.len() as u64,
            Chunk::Segments(s) => s.len() as u64,
        }
    }

    /// The record batch of the chunk, for video `id` of which `rows` rows
    /// were written before it.
    pub(super) fn batch(&self, schema: &SchemaRef, id: i64, rows: u64) -> Result<RecordBatch> {
        match self {
            Chunk::Webp(f) => frames_batch(schema, id, rows, f),
            Chunk::Segments(s) => segments_batch(schema, id, rows, s),
        }
    }
}

pub(super) fn scalar_json(v: &Value) -> Option<J> {
    Some(match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::from(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Float(f) => J::from(*f),
        Value::Str(s) => J::from(s.as_str()),
        Value::Label(l) => J::from(l.id),
        _ => return None,
    })
}

pub(super) fn resolve(
    id: i64,
    key: J,
    ex: Example,
    column: &str,
    allowed: &[String],
    inputs_dir: &Path,
) -> Result<Task> {
    let bad = |reason: String| Error::encode(column, id as u64, reason);
    let mut metadata = serde_json::Map::new();
    let mut video = None;
    for (k, v) in ex.fields() {
        if &**k == column {
            video = Some(v.clone());
        } else if let Some(j) = scalar_json(v) {
            metadata.insert(k.to_string(), j);
        }
    }
    let video = video.ok_or_else(|| bad("the example has no video".into()))?;
    let (path, bytes, ext, checksum) = match video {
        Value::Path(p) => (Some(p), None, None, None),
        Value::Str(s) => (Some(PathBuf::from(s)), None, None, None),
        Value::Bytes(b) => (None, Some(b.to_vec()), None, None),
        Value::Video(r) => (r.path, r.bytes, r.extension, r.checksum),
        other => {
            return Err(bad(format!(
                "a frames video is a path, bytes or a VideoRef, got {}",
                other.kind()
            )))
        }
    };
    let key = match key {
        J::Null | J::Bool(_) | J::Number(_) | J::String(_) => key,
        other => J::from(other.to_string()),
    };
    let norm = |e: &str| {
        let e = e.to_ascii_lowercase();
        if e.starts_with('.') {
            e
        } else {
            format!(".{e}")
        }
    };
    if let Some(p) = path {
        let ext = p
            .extension()
            .map(|e| norm(&e.to_string_lossy()))
            .unwrap_or_default();
        if !p.is_file() {
            return Err(bad(format!("video file {} does not exist", p.display())));
        }
        if !allowed.contains(&ext) {
            return Err(bad(format!(
                "unsupported video extension '{ext}' of {}. Allowed: {allowed:?}",
                p.display()
            )));
        }
        let checksum = match checksum {
            Some(c) => c,
            None => crate::features::video::sha256_file(&p).map_err(bad)?,
        };
        return Ok(Task {
            id,
            key,
            recorded: p.to_string_lossy().into_owned(),
            file: p,
            checksum: Some(checksum),
            metadata,
            temp: false,
        });
    }
    let bytes = bytes.ok_or_else(|| bad("the video has neither a path nor bytes".into()))?;
    let ext = ext.map_or_else(
        || allowed.first().cloned().unwrap_or_default(),
        |e| norm(&e),
    );
    let digest = crate::util::sha256_hex(&bytes);
    std::fs::create_dir_all(inputs_dir).map_err(|e| Error::io("create", inputs_dir, e))?;
    let file = inputs_dir.join(format!("{id}-{digest}{ext}"));
    std::fs::write(&file, &bytes).map_err(|e| Error::io("write", &file, e))?;
    Ok(Task {
        id,
        key,
        file,
        recorded: format!("{digest}{ext}"),
        checksum: Some(checksum.unwrap_or(digest)),
        metadata,
        temp: true,
    })
}

/// Decodes one video and encodes it as closed segments, measuring each
/// against its source frames, sending them in order.
pub(super) fn encode_video_segments(
    id: i64,
    file: &Path,
    opts: &VideoFramesOptions,
    tx: &Sender<Msg>,
    budget: &Budget,
) -> std::result::Result<u64, String> {
    let settings = opts.segments();
    let per = settings.frames_per_segment() as usize;
    let mut v = VideoFile::open(file)?;
    let (w0, h0) = (v.info().width, v.info().height);
    let (w, h) = opts.resize_mode().apply(opts.resize(), w0, h0);
    let (ew, eh) = (w + (w & 1), h + (h & 1));
    let mut encoder =
        SegmentEncoder::new(settings.params(ew as u32, eh as u32), w as u32, h as u32)?;
    let gone = || "the build stopped".to_string();
    let send = |seg: VideoSegment| {
        let chunk = Chunk::Segments(vec![seg]);
        budget.acquire(id, chunk.bytes()).map_err(|()| gone())?;
        tx.send(Msg::Rows(chunk)).map_err(|_| gone())
    };
    let mut sent_size = false;
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(per);
    let mut first = 0u64;
    let n = v.for_each_frame(file, PixelTarget::Yuv420, Some((w, h)), |t, f| {
        if !sent_size {
            tx.send(Msg::Size(w, h)).map_err(|_| gone())?;
            sent_size = true;
        }
        frames.push(pack_yuv420_even(f, w, h));
        if frames.len() == per {
            send(encoder.encode(first, &frames)?)?;
            frames.clear();
            first = t + 1;
        }
        Ok(true)
    })?;
    if !frames.is_empty() {
        send(encoder.encode(first, &frames)?)?;
    }
    if n == 0 {
        return Err("empty video (no decodable frame)".into());
    }
    Ok(n)
}

/// Decodes and encodes one video, sending its frames in order.
pub(super) fn encode_video(
    id: i64,
    file: &Path,
    opts: &VideoFramesOptions,
    tx: &Sender<Msg>,
    budget: &Budget,
) -> std::result::Result<u64, String> {
    let encoder = WebpEncoder::new(opts.webp())?;
    let mut v = VideoFile::open(file)?;
    let (w0, h0) = (v.info().width, v.info().height);
    let (w, h) = opts.resize_mode().apply(opts.resize(), w0, h0);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(FRAMES_PER_BATCH);
    let mut sent_size = false;
    let gone = || "the build stopped".to_string();
    let send = |frames: Vec<Vec<u8>>| {
        let chunk = Chunk::Webp(frames);
        budget.acquire(id, chunk.bytes()).map_err(|()| gone())?;
        tx.send(Msg::Rows(chunk)).map_err(|_| gone())
    };
    let target = match opts.webp().input() {
        WebpInput::Rgb => PixelTarget::Rgb,
        WebpInput::Yuv => PixelTarget::Yuv420,
    };
    let n = v.for_each_frame(file, target, Some((w, h)), |t, f| {
        if !sent_size {
            tx.send(Msg::Size(w, h)).map_err(|_| gone())?;
            sent_size = true;
        }
        let bytes = match opts.webp().input() {
            WebpInput::Rgb => encoder.encode_rgb(f.data(0), w, h, f.stride(0)),
            WebpInput::Yuv => encoder.encode(&Yuv420 {
                width: w,
                height: h,
                y: f.data(0),
                y_stride: f.stride(0),
                u: f.data(1),
                v: f.data(2),
                uv_stride: f.stride(1),
            }),
        }
        .map_err(|e| format!("webp encode failed at t={t}: {e}"))?;
        batch.push(bytes);
        if batch.len() == FRAMES_PER_BATCH {
            send(std::mem::take(&mut batch))?;
        }
        Ok(true)
    })?;
    if !batch.is_empty() {
        send(batch)?;
    }
    if n == 0 {
        return Err("empty video (no decodable frame)".into());
    }
    Ok(n)
}

pub(super) fn frames_batch(
    schema: &SchemaRef,
    id: i64,
    first: u64,
    frames: &[Vec<u8>],
) -> Result<RecordBatch> {
    let n = frames.len();
    let ids = Int32Array::from(vec![id as i32; n]);
    let idx = Int32Array::from(
        (0..n)
            .map(|i| (first + i as u64) as i32)
            .collect::<Vec<_>>(),
    );
    let mut b = LargeBinaryBuilder::with_capacity(n, frames.iter().map(Vec::len).sum());
    for f in frames {
        b.append_value(f);
    }
    RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(ids), Arc::new(idx), Arc::new(b.finish())],
    )
    .map_err(|e| Error::arrow(None, e))
}

/// The rows of segments `first..` of video `id`.
pub(super) fn segments_batch(
    schema: &SchemaRef,
    id: i64,
    first: u64,
    segments: &[VideoSegment],
) -> Result<RecordBatch> {
    let n = segments.len();
    let mut data =
        LargeBinaryBuilder::with_capacity(n, segments.iter().map(|s| s.encoded.data.len()).sum());
    let mut offsets = ListBuilder::new(Int64Builder::new());
    for s in segments {
        data.append_value(&s.encoded.data);
        for &o in &s.encoded.packet_offsets {
            offsets.values().append_value(o as i64);
        }
        offsets.append(true);
    }
    let f64s = |f: fn(&VideoSegment) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from(
            segments.iter().map(f).collect::<Vec<_>>(),
        ))
    };
    let offsets = offsets.finish();
    let item = Arc::new(Field::new("item", DataType::Int64, true));
    let (_, o, v, nulls) = offsets.into_parts();
    let offsets = ListArray::try_new(item, o, v, nulls).map_err(|e| Error::arrow(None, e))?;
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![id as i32; n])),
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| (first + i as u64) as i32)
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            segments
                .iter()
                .map(|s| s.first_frame as i64)
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            segments
                .iter()
                .map(|s| s.encoded.frames as i32)
                .collect::<Vec<_>>(),
        )),
        Arc::new(data.finish()),
        Arc::new(offsets),
        f64s(|s| s.psnr),
        f64s(|s| s.psnr_min),
        f64s(|s| s.ssim),
        f64s(|s| s.ssim_min),
    ];
    if schema.field_with_name(PACKET_FRAMES).is_ok() {
        // The builder's item field ("item", nullable) is the schema's.
        let mut frames = ListBuilder::new(Int32Builder::new());
        for s in segments {
            for &f in &s.encoded.packet_frames {
                frames.values().append_value(f as i32);
            }
            frames.append(true);
        }
        cols.push(Arc::new(frames.finish()));
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| Error::arrow(None, e))
}

/// The memory budget of encoded frames sent but not yet written (see
/// [`VideoFramesOptions::with_buffer_bytes`]). The job of the video being written
/// (the head) never waits, so the writer always makes progress; other jobs
/// wait while the budget is spent, except that one chunk always fits.
pub(super) struct Budget {
    pub(super) state: Mutex<BudgetState>,
    pub(super) cv: Condvar,
    pub(super) limit: u64,
}

pub(super) struct BudgetState {
    pub(super) used: u64,
    pub(super) head: i64,
    pub(super) closed: bool,
}

impl Budget {
    pub(super) fn new(limit: usize) -> Self {
        Budget {
            state: Mutex::new(BudgetState {
                used: 0,
                head: 0,
                closed: false,
            }),
            cv: Condvar::new(),
            limit: limit as u64,
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `n` bytes for video `id`, waiting while it is not the head and
    /// the budget is spent. Err once the build has stopped.
    pub(super) fn acquire(&self, id: i64, n: u64) -> std::result::Result<(), ()> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return Err(());
            }
            if s.head == id || s.used == 0 || s.used + n <= self.limit {
                s.used += n;
                return Ok(());
            }
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub(super) fn release(&self, n: u64) {
        let mut s = self.lock();
        s.used = s.used.saturating_sub(n);
        drop(s);
        self.cv.notify_all();
    }

    pub(super) fn set_head(&self, id: i64) {
        let mut s = self.lock();
        if s.head != id {
            s.head = id;
            drop(s);
            self.cv.notify_all();
        }
    }

    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_all();
    }
}

/// Closes the budget when the collector returns, so paused jobs stop.
pub(super) struct CloseOnDrop(pub(super) Arc<Budget>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}
