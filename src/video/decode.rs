//! Decoding video files with FFmpeg (the system's libraries, through
//! ffmpeg-next): frames in presentation order, converted (and resized) by
//! swscale to YUV 4:2:0 for WebP or to packed RGB for readers.
//!
//! Frame numbers are exact: frame `i` is the `i`-th frame the decoder puts
//! out from the start of the stream. Random reads seek to a keyframe and
//! decode forward, naming each decoded frame by the rank of its timestamp
//! among all the stream's packet timestamps (read once by demuxing, which
//! decodes nothing); when timestamps are missing or ambiguous they decode
//! from the start instead.

use std::path::Path;
use std::sync::Once;

use ff::format::Pixel;
use ff::software::scaling::{Context as Scaler, Flags};
use ff::util::frame::video::Video as Frame;
use ffmpeg_next as ff;

/// Makes FFmpeg quiet (we report errors ourselves) and registers formats.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = ff::init();
        ff::util::log::set_level(ff::util::log::Level::Quiet);
        // FFmpeg prints nothing (as at the `Quiet` level); its warnings
        // and errors go to `capture_log` where one is under way.
        #[cfg(all(target_arch = "x86_64", unix))]
        // SAFETY: the callback has the signature FFmpeg calls it with, and
        // setting it is FFmpeg's documented way to take its messages.
        unsafe {
            ff::ffi::av_log_set_callback(Some(log_callback));
        }
    });
}

thread_local! {
    /// FFmpeg's messages on this thread while `capture_log` runs.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// FFmpeg's log callback: keeps warnings and errors logged on a thread
/// where `capture_log` runs, and drops the rest.
#[cfg(all(target_arch = "x86_64", unix))]
unsafe extern "C" fn log_callback(
    avcl: *mut std::ffi::c_void,
    level: std::ffi::c_int,
    fmt: *const std::ffi::c_char,
    vl: *mut ff::ffi::__va_list_tag,
) {
    if level > ff::ffi::AV_LOG_WARNING {
        return;
    }
    let _ = CAPTURED.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let Some(lines) = c.as_mut() else {
            return;
        };
        let mut line = [0 as std::ffi::c_char; 1024];
        let mut prefix: std::ffi::c_int = 0;
        // SAFETY: FFmpeg hands the callback a format and its arguments
        // for exactly this call; `line` is as long as said and FFmpeg
        // ends it with a NUL.
        let text = unsafe {
            ff::ffi::av_log_format_line(
                avcl,
                level,
                fmt,
                vl,
                line.as_mut_ptr(),
                line.len() as std::ffi::c_int,
                &mut prefix,
            );
            std::ffi::CStr::from_ptr(line.as_ptr())
        };
        lines.push(text.to_string_lossy().trim_end().to_string());
    });
}

/// Runs `f`, and gives back the warnings and errors FFmpeg logged on this
/// thread meanwhile (such as an encoder's "Error parsing option" for a
/// parameter it does not take, which it does not fail for). Where FFmpeg's
/// messages cannot be taken (outside x86-64 Unix: the callback's argument
/// list differs), the list is empty.
pub fn capture_log<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    init();
    let before = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let out = f();
    let lines = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), before));
    (out, lines.unwrap_or_default())
}

/// What a frame is converted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelTarget {
    /// Planar YUV 4:2:0 (limited range), what WebP stores.
    Yuv420,
    /// Packed 8-bit RGB.
    Rgb,
}

/// Size and rate of a video stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInfo {
    /// Coded width.
    pub width: usize,
    /// Coded height.
    pub height: usize,
    /// Frames per second (average), 0 when unknown.
    pub fps: f64,
    /// Codec name.
    pub codec: String,
}

/// An opened video stream.
pub struct VideoFile {
    ictx: ff::format::context::Input,
    stream: usize,
    decoder: ff::decoder::Video,
    info: StreamInfo,
    scaler: Option<(Pixel, u32, u32, Pixel, u32, u32, Scaler)>,
    converted: Frame,
    /// Packets the decoder refused (damaged data), skipped like OpenCV does.
    pub bad_packets: u64,
}

/// The demuxers a video may be read with: the containers and elementary
/// streams of the videos the library reads. Not the playlist, concat,
/// image-sequence or other demuxers that open further files or URLs named
/// inside a file (a saved HLS playlist or concat script in a cache would
/// make FFmpeg read what it names).
pub const DEMUXERS: &str = "mov,matroska,webm,avi,mpegts,mpeg,flv,ivf,h264,hevc,m4v,mpegvideo,obu,ogg,asf,gif,nut,yuv4mpegpipe";

/// Opens `path` with FFmpeg allowed the `file` protocol alone and the
/// [`DEMUXERS`], so no file can make it open another file or a URL.
pub(crate) fn open_input(path: &Path) -> Result<ff::format::context::Input, ff::Error> {
    let mut o = ff::Dictionary::new();
    o.set("protocol_whitelist", "file");
    o.set("format_whitelist", DEMUXERS);
    ff::format::input_with_dictionary(path, o)
}

fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> String {
    format!("{what} {}: {e}", path.display())
}

impl VideoFile {
    /// Opens the best video stream of a file.
    ///
    /// # Errors
    /// A message naming the file when FFmpeg cannot open it, finds no video
    /// stream, or has no decoder for it.
    pub fn open(path: &Path) -> Result<Self, String> {
        init();
        let ictx = open_input(path).map_err(|e| err(path, "cannot open video", e))?;
        let (stream, params, fps) = {
            let s = ictx
                .streams()
                .best(ff::media::Type::Video)
                .ok_or_else(|| format!("no video stream in {}", path.display()))?;
            let r = s.avg_frame_rate();
            let fps = if r.denominator() != 0 {
                f64::from(r.numerator()) / f64::from(r.denominator())
            } else {
                0.0
            };
            (s.index(), s.parameters(), fps)
        };
        let mut ctx = ff::codec::context::Context::from_parameters(params)
            .map_err(|e| err(path, "no decoder for", e))?;
        // Parallelism is across videos and frames; one decoder thread each.
        ctx.set_threading(ff::codec::threading::Config {
            kind: ff::codec::threading::Type::Frame,
            count: 1,
            ..Default::default()
        });
        let decoder = ctx
            .decoder()
            .video()
            .map_err(|e| err(path, "cannot start the decoder of", e))?;
        let (w, h) = (decoder.width() as usize, decoder.height() as usize);
        if w == 0 || h == 0 {
            return Err(format!(
                "{}: video stream has no frame size",
                path.display()
            ));
        }
        let codec = decoder
            .codec()
            .map(|c| c.name().to_string())
            .unwrap_or_default();
        Ok(VideoFile {
            ictx,
            stream,
            decoder,
            info: StreamInfo {
                width: w,
                height: h,
                fps,
                codec,
            },
            scaler: None,
            converted: Frame::empty(),
            bad_packets: 0,
        })
    }

    /// The stream's size, rate and codec.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Decodes every frame from the current position, in presentation
    /// order, converting each to `target` at `size` (None: the frame's own
    /// size) and calling `f(frame_number_from_here, converted)`. `f` returns
    /// false to stop early. Returns the number of frames produced.
    ///
    /// # Errors
    /// A message naming the file on a read or conversion failure, or what `f` returns.
    pub fn for_each_frame(
        &mut self,
        path: &Path,
        target: PixelTarget,
        size: Option<(usize, usize)>,
        mut f: impl FnMut(u64, &Frame) -> Result<bool, String>,
    ) -> Result<u64, String> {
        let mut n = 0u64;
        let mut go_on = true;
        self.decode_loop(path, |this, decoded| {
            let out = this.convert(path, decoded, target, size)?;
            go_on = f(n, out)?;
            n += 1;
            Ok(go_on)
        })?;
        Ok(n)
    }

    /// The next packet of the video stream (None at the end). Read errors
    /// are retried (a damaged stretch of file), up to a limit.
    fn next_packet(&mut self, path: &Path) -> Result<Option<ff::Packet>, String> {
        let mut read_errors = 0u32;
        loop {
            let mut packet = ff::Packet::empty();
            match packet.read(&mut self.ictx) {
                Ok(()) if packet.stream() == self.stream => return Ok(Some(packet)),
                Ok(()) => {}
                Err(ff::Error::Eof) => return Ok(None),
                Err(e) => {
                    read_errors += 1;
                    if read_errors > 64 {
                        return Err(err(path, "cannot read", e));
                    }
                }
            }
        }
    }

    /// Feeds packets to the decoder and hands each decoded frame (raw) to `f`
    /// until the stream ends or `f` returns false.
    fn decode_loop(
        &mut self,
        path: &Path,
        mut f: impl FnMut(&mut Self, &Frame) -> Result<bool, String>,
    ) -> Result<(), String> {
        let mut decoded = Frame::empty();
        while let Some(packet) = self.next_packet(path)? {
            if self.decoder.send_packet(&packet).is_err() {
                self.bad_packets += 1;
                continue;
            }
            while self.decoder.receive_frame(&mut decoded).is_ok() {
                if !f(self, &decoded)? {
                    return Ok(());
                }
            }
        }
        let _ = self.decoder.send_eof();
        while self.decoder.receive_frame(&mut decoded).is_ok() {
            if !f(self, &decoded)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Converts a decoded frame; returns it as is when it already matches.
    fn convert<'a>(
        &'a mut self,
        path: &Path,
        frame: &'a Frame,
        target: PixelTarget,
        size: Option<(usize, usize)>,
    ) -> Result<&'a Frame, String> {
        let (w, h) = (frame.width(), frame.height());
        let (dw, dh) = size.map_or((w, h), |(a, b)| (a as u32, b as u32));
        let dst = match target {
            PixelTarget::Yuv420 => Pixel::YUV420P,
            PixelTarget::Rgb => Pixel::RGB24,
        };
        let src = frame.format();
        if src == dst && (w, h) == (dw, dh) {
            return Ok(frame);
        }
        let fresh = !matches!(&self.scaler, Some((a, b, c, d, e, g, _)) if (*a, *b, *c, *d, *e, *g) == (src, w, h, dst, dw, dh));
        if fresh {
            // Area averaging when shrinking (as OpenCV's INTER_AREA), bicubic when growing.
            let flags = if dw <= w && dh <= h {
                Flags::AREA
            } else {
                Flags::BICUBIC
            };
            let s = Scaler::get(src, w, h, dst, dw, dh, flags).map_err(|e| {
                err(
                    path,
                    &format!("cannot convert {src:?} {w}x{h} frames of"),
                    e,
                )
            })?;
            self.scaler = Some((src, w, h, dst, dw, dh, s));
            self.converted = Frame::empty();
        }
        let (.., s) = self.scaler.as_mut().expect("scaler set");
        s.run(frame, &mut self.converted)
            .map_err(|e| err(path, "cannot convert a frame of", e))?;
        Ok(&self.converted)
    }
}

/// Packet timestamps of a file's video stream, read without decoding.
#[derive(Debug, Clone)]
pub struct FrameIndex {
    /// Presentation timestamps in ascending order: frame `i` has `pts[i]`.
    /// Empty when some packet had no timestamp or two shared one.
    pub pts: Vec<i64>,
    /// Frame numbers of the keyframes, ascending.
    pub keyframes: Vec<u64>,
    /// Number of video packets (the frame count for every common codec).
    pub packets: u64,
}

impl FrameIndex {
    /// Demuxes `path` (no decoding) and indexes its video packets.
    ///
    /// # Errors
    /// As [`VideoFile::open`], or a read error naming the file.
    pub fn read(path: &Path) -> Result<Self, String> {
        Self::read_from(&mut VideoFile::open(path)?, path)
    }

    /// As [`FrameIndex::read`], through an opened file, which is left at the
    /// end of its stream ([`read_frames_rgb_from`] reads it from there).
    ///
    /// # Errors
    /// A read error naming the file.
    pub fn read_from(v: &mut VideoFile, path: &Path) -> Result<Self, String> {
        let mut ts = Vec::new();
        let mut key_ts = Vec::new();
        let mut complete = true;
        let mut count = 0u64;
        while let Some(packet) = v.next_packet(path)? {
            count += 1;
            match packet.pts() {
                Some(t) => {
                    ts.push(t);
                    if packet.is_key() {
                        key_ts.push(t);
                    }
                }
                None => complete = false,
            }
        }
        let mut sorted = ts.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let usable = complete && sorted.len() == ts.len();
        let keyframes = if usable {
            let mut k: Vec<u64> = key_ts
                .iter()
                .filter_map(|t| sorted.binary_search(t).ok().map(|i| i as u64))
                .collect();
            k.sort_unstable();
            k
        } else {
            Vec::new()
        };
        Ok(FrameIndex {
            packets: count,
            pts: if usable { sorted } else { Vec::new() },
            keyframes,
        })
    }
}

/// Reads the frames numbered `wanted` (any order, duplicates allowed) as
/// packed RGB of `size` (None: the stream's size). Returns them in the order
/// asked, with the size they have.
///
/// # Errors
/// A message naming the file, or saying which frame numbers the file does not have.
pub fn read_frames_rgb(
    path: &Path,
    wanted: &[u64],
    size: Option<(usize, usize)>,
    index: Option<&FrameIndex>,
) -> Result<(Vec<Vec<u8>>, usize, usize), String> {
    read_frames(VideoFile::open(path)?, true, path, wanted, size, index)
}

/// As [`read_frames_rgb`], through a file already opened (at any position,
/// e.g. just indexed by [`FrameIndex::read_from`]), so the video is not
/// opened and probed a second time.
///
/// # Errors
/// As [`read_frames_rgb`].
pub fn read_frames_rgb_from(
    file: VideoFile,
    path: &Path,
    wanted: &[u64],
    size: Option<(usize, usize)>,
    index: Option<&FrameIndex>,
) -> Result<(Vec<Vec<u8>>, usize, usize), String> {
    read_frames(file, false, path, wanted, size, index)
}

/// `at_start`: the file has not been read yet (a sequential decode can
/// start from where it is); otherwise every read seeks first, or reopens.
fn read_frames(
    mut file: VideoFile,
    at_start: bool,
    path: &Path,
    wanted: &[u64],
    size: Option<(usize, usize)>,
    index: Option<&FrameIndex>,
) -> Result<(Vec<Vec<u8>>, usize, usize), String> {
    let (w, h) = size.unwrap_or((file.info.width, file.info.height));
    let mut order: Vec<u64> = wanted.to_vec();
    order.sort_unstable();
    order.dedup();
    let mut got: std::collections::HashMap<u64, Vec<u8>> = std::collections::HashMap::new();
    let pack = |f: &Frame| -> Vec<u8> {
        let stride = f.stride(0);
        let row = w * 3;
        let data = f.data(0);
        let mut out = Vec::with_capacity(row * h);
        for y in 0..h {
            out.extend_from_slice(&data[y * stride..y * stride + row]);
        }
        out
    };
    let seekable = index.is_some_and(|ix| !ix.pts.is_empty() && !ix.keyframes.is_empty());
    if seekable {
        let ix = index.expect("checked");
        let mut i = 0;
        let mut pos: Option<u64> = None; // next frame number the decoder will put out, if known
        while i < order.len() {
            let target = order[i];
            if target as usize >= ix.pts.len() {
                break;
            }
            let key = ix.keyframes[ix
                .keyframes
                .partition_point(|&k| k <= target)
                .saturating_sub(1)];
            let must_seek = match pos {
                Some(p) => p > target || key > p,
                None => true,
            };
            if must_seek {
                let ts = ix.pts[key as usize];
                // SAFETY: a valid, opened input context and one of its stream indices.
                let r = unsafe {
                    ff::ffi::av_seek_frame(
                        file.ictx.as_mut_ptr(),
                        file.stream as i32,
                        ts,
                        ff::ffi::AVSEEK_FLAG_BACKWARD,
                    )
                };
                if r < 0 {
                    break;
                }
                file.decoder.flush();
            }
            let mut lost = false;
            let mut next_pos = None;
            file.decode_loop(path, |this, decoded| {
                let Some(t) = decoded.timestamp() else {
                    lost = true;
                    return Ok(false);
                };
                let Ok(n) = ix.pts.binary_search(&t) else {
                    lost = true;
                    return Ok(false);
                };
                let n = n as u64;
                next_pos = Some(n + 1);
                if order[i..].binary_search(&n).is_ok() {
                    let out = this.convert(path, decoded, PixelTarget::Rgb, Some((w, h)))?;
                    got.insert(n, pack(out));
                    while i < order.len() && got.contains_key(&order[i]) {
                        i += 1;
                    }
                }
                // Stop once past the frame we came for; the next target may need a seek.
                Ok(i < order.len() && n < order[i])
            })?;
            if lost {
                break;
            }
            match next_pos {
                Some(p) => pos = Some(p),
                None => break, // end of stream
            }
            if i < order.len() && got.contains_key(&order[i]) {
                continue;
            }
            if i < order.len() && pos.is_some_and(|p| p > order[i]) {
                // The frame we wanted was not put out under its timestamp.
                break;
            }
        }
        if i >= order.len() {
            return Ok((wanted.iter().map(|n| got[n].clone()).collect(), w, h));
        }
        // Fall back to decoding from the start.
        got.clear();
        file = VideoFile::open(path)?;
    } else if !at_start {
        file = VideoFile::open(path)?;
    }
    let last = *order.last().unwrap_or(&0);
    let produced = file.for_each_frame(path, PixelTarget::Rgb, Some((w, h)), |n, f| {
        if order.binary_search(&n).is_ok() {
            got.insert(n, pack(f));
        }
        Ok(n < last)
    })?;
    if let Some(missing) = order.iter().find(|n| !got.contains_key(n)) {
        return Err(format!(
            "{} has {} decodable frames, frame {missing} was asked for",
            path.display(),
            produced
        ));
    }
    Ok((wanted.iter().map(|n| got[n].clone()).collect(), w, h))
}
