//! The `lance-video-frames` writer: every input video is decoded with
//! FFmpeg, optionally resized, and each frame stored as one lossy WebP row
//! (`video_id int32, frame_idx int32, bytes large_binary`) of a Lance dataset.
//!
//! Videos are decoded and encoded in parallel on a rayon pool (one video per
//! job, jobs started in order, `threads + 1` running at once); their frames
//! stream back in chunks, and are written in video order by the one Lance
//! writer. A video that finishes before the ones ahead of it (a short clip
//! behind a long one) waits in memory, so the other cores keep working
//! instead of idling behind the long video; what waits counts against
//! [`VideoFramesOptions::buffer_bytes`], and a job whose video is not the one
//! being written pauses when that is spent. Memory is therefore bounded by
//! that budget plus a few chunks per running job, whatever the number or
//! length of the videos. Decoded frames go to WebP as YUV 4:2:0 planes, as
//! the decoder gives them (no RGB round trip). The Lance side commits in
//! segments at checkpoints, which makes a build with a sources stamp
//! resumable (see `frames_resume`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use arrow_array::builder::LargeBinaryBuilder;
use arrow_array::{Int32Array, RecordBatch};
use arrow_schema::SchemaRef;
use crossbeam_channel::{select, unbounded, Receiver, Sender};
use serde_json::Value as J;

use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    write_json_checksummed, VideoEntry, VideoFramesMetadata, WriterInfo, CACHE_FORMAT_VERSION,
    LAYOUT_LANCE_VIDEO_FRAMES, METADATA_FILE,
};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::{Feature, Features, VideoStorage};
use crate::lance::{fragment_rows, fsync_tree, lance_err};
use crate::layouts::video_frames::format::{frames_schema, INPUTS_DIR};
use crate::layouts::video_frames::resume::{
    Checkpoint, LanceSegments, ProgressFile, ProgressHeader, Resumed, PROGRESS_FILE,
};
use crate::value::{Example, Value};
use crate::video::decode::{PixelTarget, VideoFile};
use crate::video::webp::{WebpEncoder, WebpInput, WebpSettings, Yuv420};

/// How `resize` is applied to each video (decided on its stream size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResizeMode {
    /// The reference's rule: when the longer side exceeds `resize`, every
    /// frame becomes `resize x resize` (aspect ratio not kept).
    #[default]
    Square,
    /// Aspect-preserving: when the shorter side exceeds `resize`, scale so it equals `resize`.
    ShorterSide,
}

impl ResizeMode {
    fn name(self) -> &'static str {
        match self {
            ResizeMode::Square => "square",
            ResizeMode::ShorterSide => "shorter_side",
        }
    }

    /// Output size `(w, h)` of a `w x h` video.
    pub fn apply(self, resize: Option<u32>, w: usize, h: usize) -> (usize, usize) {
        let Some(r) = resize.map(|r| r as usize) else {
            return (w, h);
        };
        match self {
            ResizeMode::Square if w.max(h) > r => (r, r),
            ResizeMode::ShorterSide if w.min(h) > r => {
                if w <= h {
                    (r, ((h * r) as f64 / w as f64).round().max(1.0) as usize)
                } else {
                    (((w * r) as f64 / h as f64).round().max(1.0) as usize, r)
                }
            }
            _ => (w, h),
        }
    }
}

/// Options of [`write_video_frames_cache`].
#[derive(Debug, Clone)]
pub struct VideoFramesOptions {
    /// The `Video(storage='frames')` column (default: the only one).
    pub video_column: Option<String>,
    /// WebP quality and method (default 65 and 4, the reference's through OpenCV).
    pub webp: WebpSettings,
    /// Resize bound in pixels (None: keep the size).
    pub resize: Option<u32>,
    /// How `resize` applies.
    pub resize_mode: ResizeMode,
    /// Videos decoded at once (0 = one per core).
    pub threads: usize,
    /// Skip (and count) videos that cannot be opened or hold no frame;
    /// off, such a video fails the build (default on).
    pub skip_corrupt: bool,
    /// Rows per Lance data file.
    pub max_rows_per_file: usize,
    /// Provenance recorded under `lineage`.
    pub lineage: Option<J>,
    /// Frames written so far (for a progress display).
    pub progress: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// A stamp of the input files recorded as `sources` (see `builder::Sources::stamp`).
    pub sources: Option<J>,
    /// Encoded frames that may wait in memory for their video's turn to be
    /// written, in bytes (default 128 MiB). Videos are written in order, so
    /// the frames of a video that finishes early wait until the videos
    /// before it are written; when this is spent, jobs other than the
    /// video being written pause.
    pub buffer_bytes: usize,
    /// Frames between checkpoints (default 65,536): at the first video
    /// boundary after this many frames, or after `checkpoint_interval`,
    /// what was written is committed to Lance and recorded. When `sources`
    /// is set, a build of the same cache that was killed or failed is
    /// resumed from its last checkpoint by the next build with the same
    /// options and sources.
    pub checkpoint_frames: u64,
    /// Time between checkpoints (default two minutes; see `checkpoint_frames`).
    pub checkpoint_interval: std::time::Duration,
}

impl Default for VideoFramesOptions {
    fn default() -> Self {
        VideoFramesOptions {
            video_column: None,
            webp: WebpSettings::default(),
            resize: None,
            resize_mode: ResizeMode::Square,
            threads: 0,
            skip_corrupt: true,
            max_rows_per_file: 1024 * 1024,
            lineage: None,
            progress: None,
            sources: None,
            buffer_bytes: 128 << 20,
            checkpoint_frames: 1 << 16,
            checkpoint_interval: std::time::Duration::from_secs(120),
        }
    }
}

/// What a finished frames build produced.
#[derive(Debug, Clone)]
pub struct WrittenVideoFrames {
    /// The published cache directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub metadata: VideoFramesMetadata,
    /// Videos (written or skipped) taken over from an interrupted build of
    /// the same cache (0 when nothing was resumed).
    pub resumed_videos: u64,
}

/// Frames per record batch sent to Lance (and per message from a video job).
const FRAMES_PER_BATCH: usize = 32;

/// Builds a `lance-video-frames` cache at `cache_dir` from examples whose
/// video column holds a path (`Value::Path`/`Value::Str`), inline bytes
/// (`Value::Bytes`, with the first allowed extension) or a [`crate::VideoRef`].
/// Each example's other scalar fields become the video's `metadata`; keys
/// are the examples' positions.
///
/// # Errors
/// See [`try_write_video_frames_cache`].
pub fn write_video_frames_cache<I>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = Example>,
{
    try_write_video_frames_cache(
        examples
            .into_iter()
            .enumerate()
            .map(|(i, e)| Ok::<_, std::convert::Infallible>((J::from(i as u64), e))),
        features,
        cache_dir,
        opts,
    )
}

/// Like [`write_video_frames_cache`], for a generator of `(key, example)`
/// pairs that can fail.
///
/// # Errors
/// [`Error::InvalidArgument`] for a missing or ambiguous video column or bad
/// options; [`Error::Encode`] for an input that is not a video file or has
/// a disallowed extension; [`Error::Video`] naming the file for an
/// unreadable video when `skip_corrupt` is off, or when every video failed;
/// [`Error::Generator`]; I/O and Lance errors. Nothing is published then.
pub fn try_write_video_frames_cache<I, E>(
    items: I,
    features: &Features,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let column = video_column(features, opts.video_column.as_deref())?;
    let lock = CacheLock::acquire(cache_dir)?;
    write_locked(items, features, &column, cache_dir, opts, &lock)
}

fn video_column(features: &Features, asked: Option<&str>) -> Result<String> {
    let frames: Vec<String> = features
        .iter()
        .filter(|(_, f)| matches!(f, Feature::Video(v) if v.storage == VideoStorage::Frames))
        .map(|(n, _)| n.to_string())
        .collect();
    match asked {
        Some(c) => match features.get(c) {
            Some(Feature::Video(v)) if v.storage == VideoStorage::Frames => Ok(c.to_string()),
            Some(_) => Err(Error::InvalidArgument(format!(
                "video column '{c}' is not a Video(storage='frames') feature"
            ))),
            None => Err(Error::InvalidArgument(format!(
                "video column '{c}' is not a feature"
            ))),
        },
        None if frames.len() == 1 => Ok(frames[0].clone()),
        None => Err(Error::InvalidArgument(format!(
            "a lance-video-frames cache needs exactly one Video(storage='frames') column or an explicit video column; found {frames:?}"
        ))),
    }
}

/// One input video, resolved.
struct Task {
    id: i64,
    key: J,
    file: PathBuf,
    /// Recorded `path` (the source, or `<sha256><ext>` for inline bytes).
    recorded: String,
    checksum: Option<String>,
    metadata: serde_json::Map<String, J>,
    /// Inline bytes written for FFmpeg, removed when the video is done.
    temp: bool,
}

enum Msg {
    Size(usize, usize),
    Frames(Vec<Vec<u8>>),
    Done(u64),
    Failed(String),
}

fn scalar_json(v: &Value) -> Option<J> {
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

fn resolve(
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

/// Decodes and encodes one video, sending its frames in order.
fn encode_video(
    id: i64,
    file: &Path,
    opts: &VideoFramesOptions,
    tx: &Sender<Msg>,
    budget: &Budget,
) -> std::result::Result<u64, String> {
    let encoder = WebpEncoder::new(opts.webp)?;
    let mut v = VideoFile::open(file)?;
    let (w0, h0) = (v.info().width, v.info().height);
    let (w, h) = opts.resize_mode.apply(opts.resize, w0, h0);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(FRAMES_PER_BATCH);
    let mut sent_size = false;
    let gone = || "the build stopped".to_string();
    let send = |frames: Vec<Vec<u8>>| {
        budget
            .acquire(id, chunk_bytes(&frames))
            .map_err(|()| gone())?;
        tx.send(Msg::Frames(frames)).map_err(|_| gone())
    };
    let target = match opts.webp.input {
        WebpInput::Rgb => PixelTarget::Rgb,
        WebpInput::Yuv => PixelTarget::Yuv420,
    };
    let n = v.for_each_frame(file, target, Some((w, h)), |t, f| {
        if !sent_size {
            tx.send(Msg::Size(w, h)).map_err(|_| gone())?;
            sent_size = true;
        }
        let bytes = match opts.webp.input {
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

fn frames_batch(
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

/// Bytes of a chunk of encoded frames.
fn chunk_bytes(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

/// The memory budget of encoded frames sent but not yet written (see
/// [`VideoFramesOptions::buffer_bytes`]). The job of the video being written
/// (the head) never waits, so the writer always makes progress; other jobs
/// wait while the budget is spent, except that one chunk always fits.
struct Budget {
    state: Mutex<BudgetState>,
    cv: Condvar,
    limit: u64,
}

struct BudgetState {
    used: u64,
    head: i64,
    closed: bool,
}

impl Budget {
    fn new(limit: usize) -> Self {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `n` bytes for video `id`, waiting while it is not the head and
    /// the budget is spent. Err once the build has stopped.
    fn acquire(&self, id: i64, n: u64) -> std::result::Result<(), ()> {
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

    fn release(&self, n: u64) {
        let mut s = self.lock();
        s.used = s.used.saturating_sub(n);
        drop(s);
        self.cv.notify_all();
    }

    fn set_head(&self, id: i64) {
        let mut s = self.lock();
        if s.head != id {
            s.head = id;
            drop(s);
            self.cv.notify_all();
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_all();
    }
}

/// Closes the budget when the collector returns, so paused jobs stop.
struct CloseOnDrop(Arc<Budget>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Videos dispatched ahead of the one being written, at most (their jobs
/// finished or running; each holds a task and, for inline bytes, a temp file).
const MAX_AHEAD: usize = 256;

/// The collector: feeds jobs to the pool, forwards their frames in video
/// order, and returns the videos written and the ones skipped.
#[allow(clippy::too_many_arguments)]
fn collect<I, E>(
    items: I,
    column: &str,
    allowed: &[String],
    inputs_dir: &Path,
    opts: &VideoFramesOptions,
    schema: &SchemaRef,
    lance: &mut LanceSegments,
    progress: &mut ProgressFile,
    resumed: Resumed,
    lance_dir: &Path,
) -> Result<(Vec<VideoEntry>, Vec<J>, u64)>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let (pool, threads) = crate::cache::pipeline::thread_pool(opts.threads, "video")?;
    let budget = Arc::new(Budget::new(opts.buffer_bytes));
    let _close = CloseOnDrop(budget.clone());
    // Each job says here when it ends, so a new one starts while the writer
    // still waits on an earlier, longer video.
    let (ended_tx, ended_rx) = unbounded::<()>();
    let mut running = 0usize;
    let mut items = items.into_iter();
    let mut queue: VecDeque<(Task, Receiver<Msg>)> = VecDeque::new();
    let mut next_id = resumed.tasks as i64;
    let mut exhausted = false;
    let mut videos = resumed.videos;
    let mut skipped = resumed.skipped;
    let mut row: u64 = videos.iter().map(|v| v.t).sum();
    // What the next checkpoint records: videos and skips from these positions.
    let (mut videos_from, mut skipped_from) = (videos.len(), skipped.len());
    let mut since_checkpoint = 0u64;
    let mut last_checkpoint = std::time::Instant::now();
    // The head video's frame size and frames written so far.
    let mut size = (0usize, 0usize);
    let mut frames = 0u64;
    loop {
        while !exhausted && running <= threads && queue.len() < MAX_AHEAD {
            match items.next() {
                None => exhausted = true,
                Some(Err(e)) => {
                    return Err(Error::Generator {
                        rows: next_id as u64,
                        source: e.into(),
                    })
                }
                Some(Ok((key, ex))) => {
                    let task = resolve(next_id, key, ex, column, allowed, inputs_dir)?;
                    let id = next_id;
                    next_id += 1;
                    let (tx, rx) = unbounded::<Msg>();
                    let file = task.file.clone();
                    let o = opts.clone();
                    let b = budget.clone();
                    let ended = ended_tx.clone();
                    running += 1;
                    pool.spawn_fifo(move || {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            encode_video(id, &file, &o, &tx, &b)
                        }))
                        .unwrap_or_else(|p| Err(Error::from_panic("video encoder", p).to_string()));
                        let _ = tx.send(match r {
                            Ok(n) => Msg::Done(n),
                            Err(e) => Msg::Failed(e),
                        });
                        let _ = ended.send(());
                    });
                    queue.push_back((task, rx));
                }
            }
        }
        let Some((task, rx)) = queue.front() else {
            if exhausted {
                break;
            }
            // Every queued video is written, but a job's "ended" signal can
            // lag its last message, so the jobs still count as running and
            // no example was pulled: wait for one to end, then pull more.
            // (Breaking here dropped the remaining examples without an error.)
            ended_rx
                .recv()
                .map_err(|_| Error::InvalidArgument("the video jobs' channel closed".into()))?;
            running -= 1;
            continue;
        };
        budget.set_head(task.id);
        let msg = select! {
            recv(rx) -> m => m,
            recv(ended_rx) -> _ => {
                running -= 1;
                continue;
            }
        };
        let outcome = match msg {
            Ok(Msg::Size(w, h)) => {
                size = (w, h);
                continue;
            }
            Ok(Msg::Frames(f)) => {
                let b = frames_batch(schema, task.id, frames, &f)?;
                frames += f.len() as u64;
                lance.send(b)?;
                budget.release(chunk_bytes(&f));
                if let Some(p) = &opts.progress {
                    p.fetch_add(f.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                continue;
            }
            Ok(Msg::Done(n)) => Ok(n),
            Ok(Msg::Failed(e)) => Err(e),
            Err(_) => Err("the video job ended without a result".to_string()),
        };
        let (task, _) = queue.pop_front().expect("the head video");
        let done_tasks = task.id as u64 + 1;
        let written = std::mem::take(&mut frames);
        let (w, h) = std::mem::take(&mut size);
        if task.temp {
            let _ = std::fs::remove_file(&task.file);
        }
        match outcome {
            Ok(n) => {
                debug_assert_eq!(n, written);
                videos.push(VideoEntry {
                    id: task.id,
                    key: task.key,
                    path: Some(task.recorded),
                    checksum: task.checksum,
                    t: n,
                    h: h as u64,
                    w: w as u64,
                    start_row: row,
                    metadata: task.metadata,
                });
                row += n;
                since_checkpoint += n;
            }
            Err(reason) if written > 0 => {
                return Err(Error::Video {
                    path: task.file,
                    reason: format!("failed after {written} frames were written: {reason}"),
                })
            }
            Err(reason) if opts.skip_corrupt => {
                skipped.push(
                    serde_json::json!({"id": task.id, "path": task.recorded, "reason": reason}),
                );
            }
            Err(reason) => {
                return Err(Error::Video {
                    path: task.file,
                    reason,
                })
            }
        }
        if since_checkpoint > 0
            && (since_checkpoint >= opts.checkpoint_frames
                || last_checkpoint.elapsed() >= opts.checkpoint_interval)
        {
            if let Some(ds) = lance.commit()? {
                fsync_tree(lance_dir)?;
                progress.append(Checkpoint {
                    version: ds.version().version,
                    tasks: done_tasks,
                    videos: videos[videos_from..].to_vec(),
                    skipped: skipped[skipped_from..].to_vec(),
                })?;
                (videos_from, skipped_from) = (videos.len(), skipped.len());
            }
            since_checkpoint = 0;
            last_checkpoint = std::time::Instant::now();
        }
    }
    Ok((videos, skipped, next_id as u64))
}

/// Takes the examples an interrupted build already did off the front of
/// `items`, checking that each resolves to the input that was recorded.
/// Returns where and how they differ, if they do.
fn skip_resumed<It, E>(
    items: &mut It,
    resumed: &Resumed,
    column: &str,
    allowed: &[String],
    inputs_dir: &Path,
) -> Result<Option<String>>
where
    It: Iterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let mut recorded: std::collections::HashMap<i64, (Option<&J>, Option<&str>)> = resumed
        .videos
        .iter()
        .map(|v| (v.id, (Some(&v.key), v.path.as_deref())))
        .collect();
    for s in &resumed.skipped {
        if let Some(id) = s.get("id").and_then(J::as_i64) {
            recorded.insert(id, (None, s.get("path").and_then(J::as_str)));
        }
    }
    let differ = |id: i64, why: String| Ok(Some(format!("at example {id}: {why}")));
    for id in 0..resumed.tasks as i64 {
        let (key, ex) = match items.next() {
            None => return differ(id, "the generator ended".into()),
            Some(Err(e)) => {
                return Err(Error::Generator {
                    rows: id as u64,
                    source: e.into(),
                })
            }
            Some(Ok(kv)) => kv,
        };
        let task = resolve(id, key, ex, column, allowed, inputs_dir)?;
        if task.temp {
            let _ = std::fs::remove_file(&task.file);
        }
        match recorded.get(&id) {
            Some((k, p))
                if *p == Some(task.recorded.as_str()) && k.is_none_or(|k| *k == task.key) => {}
            Some((_, p)) => {
                return differ(
                    id,
                    format!("recorded {}, now {}", p.unwrap_or("?"), task.recorded),
                )
            }
            None => return differ(id, "it was not recorded".into()),
        }
    }
    Ok(None)
}

fn write_locked<I, E>(
    items: I,
    features: &Features,
    column: &str,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
    _lock: &CacheLock,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    if opts.max_rows_per_file == 0 || opts.resize == Some(0) {
        return Err(Error::InvalidArgument(
            "max_rows_per_file and resize must be at least 1".into(),
        ));
    }
    WebpEncoder::new(opts.webp).map_err(Error::InvalidArgument)?;
    let allowed = match features.get(column) {
        Some(Feature::Video(v)) => v.allowed_extensions.clone(),
        _ => unreachable!("checked by video_column"),
    };
    crate::video::decode::init();
    let header = ProgressHeader {
        cache_name: cache_dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        schema_fingerprint: features.fingerprint(),
        column: column.to_string(),
        quality: f64::from(opts.webp.quality),
        method: opts.webp.method,
        webp_input: opts.webp.input.name().to_string(),
        resize: opts.resize,
        resize_mode: opts.resize_mode.name().to_string(),
        max_rows_per_file: opts.max_rows_per_file,
        skip_corrupt: opts.skip_corrupt,
        sources: opts.sources.clone().unwrap_or(J::Null),
        writer: WriterInfo::current().version,
    };
    // Only a build that knows its inputs (a sources stamp) can be resumed.
    let resumable = opts.sources.is_some();
    let (mut staging, mut progress, resumed) =
        crate::layouts::video_frames::resume::prepare(cache_dir, &header, resumable)?;
    if resumable {
        // A failed or killed build leaves its checkpoints for the next one.
        staging.keep_on_drop();
    }
    let data_dir = staging.path().to_path_buf();
    let inputs_dir = data_dir.join(INPUTS_DIR);
    let resumed_videos = resumed.tasks;
    let mut items = items.into_iter();
    if let Some(why) = skip_resumed(&mut items, &resumed, column, &allowed, &inputs_dir)? {
        // The inputs changed under the checkpoints: they are no use any more.
        drop(staging);
        let _ = std::fs::remove_dir_all(&data_dir);
        return Err(Error::InvalidArgument(format!(
            "the examples differ from those of the interrupted build being resumed, {why}; its checkpoints were dropped, build again to start over"
        )));
    }
    if let Some(p) = &opts.progress {
        let frames: u64 = resumed.videos.iter().map(|v| v.t).sum();
        p.fetch_add(frames, std::sync::atomic::Ordering::Relaxed);
    }
    let schema = frames_schema();
    let mut lance = LanceSegments::new(
        &data_dir,
        schema.clone(),
        opts.max_rows_per_file,
        resumed.version > 0,
    )?;
    let (videos, skipped, tasks) = collect(
        items,
        column,
        &allowed,
        &inputs_dir,
        opts,
        &schema,
        &mut lance,
        &mut progress,
        resumed,
        &data_dir,
    )?;
    let written = lance.finish()?;
    if tasks == 0 {
        return Err(Error::InvalidArgument(
            "cannot build a lance-video-frames cache from an empty generator".into(),
        ));
    }
    let ds = match written {
        Some(ds) if !videos.is_empty() => ds,
        _ => {
            let first = skipped.first().map(|j| j.to_string()).unwrap_or_default();
            return Err(Error::Video {
                path: cache_dir.to_path_buf(),
                reason: format!("every one of the {tasks} videos was unreadable (first: {first}); nothing published"),
            });
        }
    };
    let _ = std::fs::remove_dir_all(&inputs_dir);
    let fragment_rows = fragment_rows(&ds, &data_dir)?;
    let num_rows: u64 = videos.iter().map(|v| v.t).sum();
    if fragment_rows.iter().sum::<u64>() != num_rows {
        return Err(lance_err(
            &data_dir,
            "Lance wrote a different number of frames than were sent",
        ));
    }
    fsync_tree(&data_dir)?;
    let quality = if opts.webp.quality.fract() == 0.0 {
        J::from(opts.webp.quality as i64)
    } else {
        J::from(f64::from(opts.webp.quality))
    };
    let metadata = VideoFramesMetadata {
        cache_format_version: CACHE_FORMAT_VERSION,
        format: "lance".into(),
        layout: LAYOUT_LANCE_VIDEO_FRAMES.into(),
        schema_fingerprint: features.fingerprint(),
        num_rows,
        total_rows: num_rows,
        n_videos: videos.len() as u64,
        n_skipped: tasks - videos.len() as u64,
        encoding: "webp".into(),
        quality,
        resize: opts.resize.map(u64::from),
        video_column: column.to_string(),
        videos,
        lineage: opts.lineage.clone(),
        resize_mode: opts.resize.map(|_| opts.resize_mode.name().to_string()),
        webp_method: Some(opts.webp.method),
        webp_input: Some(opts.webp.input.name().to_string()),
        skipped: (!skipped.is_empty()).then_some(skipped),
        sources: opts.sources.clone(),
        fragment_row_counts: Some(fragment_rows),
        features: Some(features_to_json(features)),
        writer: Some(WriterInfo::current()),
        metadata_xxh64: None,
    };
    write_json_checksummed(&staging.path().join(METADATA_FILE), &metadata)?;
    drop(progress);
    staging.publish()?;
    // The progress file is build-time state: it stays until publication (a
    // build killed while publishing resumes with everything committed).
    let _ = std::fs::remove_file(cache_dir.join(PROGRESS_FILE));
    Ok(WrittenVideoFrames {
        dir: cache_dir.to_path_buf(),
        metadata,
        resumed_videos,
    })
}
