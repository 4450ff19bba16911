//! The report of a video cache: its videos (count, frames, sizes, a
//! histogram of their lengths), a few windows as animated thumbnails and,
//! for the segments layout, what the compression cost per video (PSNR and
//! SSIM against the source frames, measured at build time) with one source
//! frame beside its decoded frame when the source may be read (inside the
//! cache, or under a trusted root).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::features::trust::resolve_stored_path;
use crate::layouts::backend::Backend;
use crate::layouts::open::Cache;
use crate::layouts::video_frames::format::scan_quality;
use crate::layouts::LanceVideoFrames;
use crate::video::WindowSpec;

use super::columns::histogram;
use super::html::{self, Page};
use super::media;
use super::svg;
use super::text::{count, number};
use super::{ReportOptions, ReportSummary};

/// Frames of an animated window (fewer when a video is shorter).
const CLIP_FRAMES: u64 = 12;

/// Every video section of `cache` (a frames or segments cache).
///
/// # Errors
/// When a window or the segments table cannot be read.
pub fn sections(
    page: &mut Page,
    cache: &Cache,
    opts: &ReportOptions,
    summary: &mut ReportSummary,
) -> Result<()> {
    let Some(f) = cache.backend.as_any().downcast_ref::<LanceVideoFrames>() else {
        return Ok(());
    };
    videos_section(page, f);
    // Clips of consecutive frames, whatever windows the cache was opened with.
    let shortest = f.metadata().videos.iter().map(|v| v.t).min().unwrap_or(1);
    let len = shortest.clamp(1, CLIP_FRAMES) as u32;
    let clips = f.with_windows(WindowSpec::try_new(len, 0, len)?)?;
    summary.windows = windows_section(page, &clips, opts)?;
    if f.metadata().is_segments() {
        quality_section(page, cache, &clips, opts)?;
    }
    Ok(())
}

fn videos_section(page: &mut Page, f: &LanceVideoFrames) {
    let m = f.metadata();
    page.heading(2, "Videos", "videos");
    let frames: u64 = m.videos.iter().map(|v| v.t).sum();
    let sizes: std::collections::BTreeSet<(u64, u64)> =
        m.videos.iter().map(|v| (v.w, v.h)).collect();
    let sizes: Vec<String> = sizes.iter().map(|(w, h)| format!("{w}x{h}")).collect();
    let mut rows = vec![
        ("videos", count(m.n_videos)),
        ("skipped as unreadable", count(m.n_skipped)),
        ("frames", count(frames)),
        ("frame sizes", sizes.join(", ")),
    ];
    match &m.segments {
        Some(s) => rows.push((
            "stored as",
            format!(
                "{} segments of {} frames ({}, crf {}, preset {})",
                s.codec, s.frames_per_segment, s.encoder, s.crf, s.preset
            ),
        )),
        None => rows.push(("stored as", format!("{} frames", m.encoding))),
    }
    page.pairs(&rows);
    page.heading(3, "Frames per video", "frames-per-video");
    let lengths: Vec<f64> = m.videos.iter().map(|v| v.t as f64).collect();
    page.raw(&format!(
        "<div class=\"histogram\" data-column=\"frames per video\" data-rows=\"{}\">{}</div>",
        m.videos.len(),
        svg::bar_chart(&histogram(&lengths), false)
    ));
}

fn windows_section(page: &mut Page, f: &LanceVideoFrames, opts: &ReportOptions) -> Result<usize> {
    if opts.windows == 0 || f.len() == 0 {
        return Ok(0);
    }
    let picks = f.sample(opts.windows, opts.seed, true);
    page.heading(2, "Windows", "windows");
    page.note(&format!(
        "{} windows drawn with seed {} (one per video first), played at 8 frames a second.",
        picks.len(),
        opts.seed
    ));
    let mut grid = String::from("<div class=\"grid\">");
    for (n, w) in f.windows(&picks)?.into_iter().enumerate() {
        let [t, h, wd, _] = w.frames.shape[..] else {
            continue;
        };
        let uri = media::strip(&w.frames.data, t, h as u32, wd as u32, opts.thumbnail)?;
        let name = w
            .filename
            .as_deref()
            .and_then(|p| std::path::Path::new(p).file_name())
            .map_or_else(
                || format!("video {}", w.video_idx),
                |n| n.to_string_lossy().into_owned(),
            );
        let caption = format!(
            "{name}, frames {}..{}",
            w.frame_indices.first().copied().unwrap_or(0),
            w.frame_indices.last().copied().unwrap_or(0)
        );
        grid.push_str(&html::clip(page, &uri, t, opts.thumbnail, n, &caption));
    }
    grid.push_str("</div>");
    page.raw(&grid);
    Ok(picks.len())
}

/// Frame-weighted means and minima of one video's segments.
#[derive(Default)]
struct Quality {
    frames: u64,
    psnr: f64,
    psnr_min: f64,
    ssim: f64,
    ssim_min: f64,
}

fn quality_section(
    page: &mut Page,
    cache: &Cache,
    f: &LanceVideoFrames,
    opts: &ReportOptions,
) -> Result<()> {
    let mut per: BTreeMap<i32, Quality> = BTreeMap::new();
    scan_quality(&cache.dir, |r| {
        let q = per.entry(r.video_id).or_insert(Quality {
            psnr_min: f64::INFINITY,
            ssim_min: f64::INFINITY,
            ..Quality::default()
        });
        q.frames += r.frames;
        q.psnr += r.psnr * r.frames as f64;
        q.ssim += r.ssim * r.frames as f64;
        q.psnr_min = q.psnr_min.min(r.psnr_min);
        q.ssim_min = q.ssim_min.min(r.ssim_min);
    })?;
    page.heading(2, "Compression quality", "quality");
    page.note(
        "Per video, against the source frames at build time: PSNR of RGB samples (exact frames \
         count 100 dB) and SSIM of luma, means weighted by frames, and the worst segment.",
    );
    let videos = &f.metadata().videos;
    let rows: Vec<Vec<String>> = per
        .iter()
        .map(|(&id, q)| {
            let k = q.frames.max(1) as f64;
            let name = usize::try_from(id)
                .ok()
                .and_then(|i| videos.get(i))
                .and_then(|v| v.path.clone())
                .unwrap_or_else(|| format!("video {id}"));
            vec![
                name,
                count(q.frames),
                format!("{:.2} dB", q.psnr / k),
                format!("{:.2} dB", q.psnr_min),
                number(q.ssim / k),
                number(q.ssim_min),
            ]
        })
        .collect();
    page.table(
        "quality",
        &[
            "video",
            "frames",
            "PSNR",
            "worst PSNR",
            "SSIM",
            "worst SSIM",
        ],
        &rows,
    );
    side_by_side(page, cache, f, opts)
}

/// The first frame of the first video, decoded from its segment, beside
/// the same frame read from the source video when the report may read it.
fn side_by_side(
    page: &mut Page,
    cache: &Cache,
    f: &LanceVideoFrames,
    opts: &ReportOptions,
) -> Result<()> {
    if f.len() == 0 {
        return Ok(());
    }
    let w = f.window(0)?;
    let [_, h, wd, _] = w.frames.shape[..] else {
        return Ok(());
    };
    let (h, wd) = (h as u32, wd as u32);
    let one = h as usize * wd as usize * 3;
    let decoded = &w.frames.data[..one];
    let frame_no = w.frame_indices.first().copied().unwrap_or(0);
    let side = opts.thumbnail * 2;
    let fit = |rgb: &[u8]| media::strip(rgb, 1, h, wd, side);
    page.heading(3, "A source frame and its decoded frame", "side-by-side");
    let stored = w.filename.clone().unwrap_or_default();
    let source = resolve_stored_path(&stored, Some(&cache.dir), &opts.trusted_roots)
        .and_then(|p| {
            crate::video::decode::read_frames_rgb(
                &p,
                &[frame_no],
                Some((wd as usize, h as usize)),
                None,
            )
        })
        .and_then(|(mut frames, _, _)| frames.pop().ok_or_else(|| "no frame read".to_string()));
    let mut pair = String::from("<div class=\"pair\">");
    match &source {
        Ok(src) => {
            page.note(&format!(
                "Frame {frame_no} of {stored}: PSNR {:.2} dB, SSIM {} for this frame.",
                crate::video::quality::psnr(src, decoded),
                number(crate::video::quality::ssim_rgb(
                    src,
                    decoded,
                    wd as usize,
                    h as usize
                ))
            ));
            pair.push_str(&html::figure(&fit(src)?, 0, "source", side));
        }
        Err(why) => page.note(&format!(
            "Frame {frame_no} of {stored}; the source is not shown: {why}"
        )),
    }
    pair.push_str(&html::figure(
        &fit(decoded)?,
        0,
        "decoded from its segment",
        side,
    ));
    pair.push_str("</div>");
    page.raw(&pair);
    Ok(())
}
