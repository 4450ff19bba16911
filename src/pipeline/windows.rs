//! Video windows through the pipeline: a frames or segments cache's
//! windows decoded by its reader, then each window's frames run through
//! the `video` column's ops with parameters drawn once per window (the
//! same crop and flip on every frame), written straight into
//! `[B, T, C, H, W]`, `[B, T, H, W, C]` or `[B, C, T, H, W]`; the windows'
//! places (`video_idx`, `start_frame`, `sample_idx`) as int64 columns.

use super::batch::{BatchColumn, Element};
use super::columns::SampleKeys;
use super::ops::{ImagePlan, Placement, SampleRng};
use super::options::{Layout, PipelineOptions};
use crate::error::{Error, Result};
use crate::layouts::LanceVideoFrames;
use crate::value::ImageData;

/// The column of the frames, as the frames cache's decoded rows name it.
pub(crate) const VIDEO: &str = "video";
/// The windows' places, int64 `[B]`.
const PLACES: [&str; 3] = ["video_idx", "start_frame", "sample_idx"];

/// The columns of a window pipeline.
#[derive(Debug, Clone)]
pub(crate) struct WindowColumns {
    plan: Option<Box<ImagePlan>>,
    /// Output columns in order: `video` and places.
    names: Vec<String>,
    frames: usize,
}

impl WindowColumns {
    /// Each output column's element type.
    pub(crate) fn elements(&self) -> Vec<(&str, Element)> {
        self.names
            .iter()
            .map(|n| {
                let e = match (&self.plan, n.as_str()) {
                    (Some(p), VIDEO) => Element::from(p.out_dtype()),
                    _ => Element::Int64,
                };
                (n.as_str(), e)
            })
            .collect()
    }

    /// Bytes of one window in a batch.
    pub(crate) fn row_bytes(&self) -> usize {
        self.names
            .iter()
            .map(|n| match (&self.plan, n.as_str()) {
                (Some(p), VIDEO) => p.out_bytes() * self.frames,
                _ => 8,
            })
            .sum()
    }
}

/// The window columns of `fr` asked for in `opts`, checked.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the column: unknown, or `video`
/// without ops that fix the frame size.
pub(crate) fn plan_windows(fr: &LanceVideoFrames, opts: &PipelineOptions) -> Result<WindowColumns> {
    let known = format!("{VIDEO}, {}", PLACES.join(", "));
    for (c, _) in opts.ops() {
        if c != VIDEO {
            return Err(Error::InvalidArgument(format!(
                "ops are given for column '{c}'; a video cache's windows take ops on '{VIDEO}' \
                 (its columns: {known})"
            )));
        }
    }
    let names: Vec<String> = match opts.columns() {
        Some(c) => c.to_vec(),
        None => std::iter::once(VIDEO)
            .chain(PLACES)
            .map(String::from)
            .collect(),
    };
    for n in &names {
        if n != VIDEO && !PLACES.contains(&n.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "column '{n}' is not a column of a video cache's windows; its columns: {known}"
            )));
        }
    }
    let plan = match opts.ops().iter().find(|(c, _)| c == VIDEO) {
        Some((_, ops)) => Some(Box::new(ImagePlan::new(VIDEO, ops)?)),
        None if names.iter().any(|n| n == VIDEO) => {
            return Err(Error::InvalidArgument(format!(
                "column '{VIDEO}' holds frames of each video's own size: give it ops that fix \
                 the size (e.g. Resize to [h, w], or a CenterCrop), or leave it out of the columns"
            )))
        }
        None => None,
    };
    Ok(WindowColumns {
        plan,
        names,
        frames: fr.plan().spec().window_length() as usize,
    })
}

/// The columns of the windows `phys` (backend rows) of a batch.
pub(crate) fn fill_windows(
    fr: &LanceVideoFrames,
    cols: &WindowColumns,
    phys: &[i64],
    keys: &SampleKeys<'_>,
) -> Result<Vec<(String, BatchColumn)>> {
    let n = phys.len();
    let windows = if cols.plan.is_some() {
        fr.windows(phys)?
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(cols.names.len());
    for name in &cols.names {
        let column = match (name.as_str(), &cols.plan) {
            (VIDEO, Some(plan)) => frames_column(plan, &windows, cols.frames, keys)?,
            (place, _) => {
                let located = if windows.is_empty() {
                    fr.window_places(phys)?
                } else {
                    windows
                        .iter()
                        .map(|w| (w.video_idx, w.start_frame, w.sample_idx))
                        .collect()
                };
                let v: Vec<i64> = located
                    .iter()
                    .map(|&(v, s, i)| match place {
                        "video_idx" => v as i64,
                        "start_frame" => s as i64,
                        _ => i as i64,
                    })
                    .collect();
                BatchColumn {
                    data: v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                    element: Element::Int64,
                    shape: vec![n],
                }
            }
        };
        out.push((name.clone(), column));
    }
    Ok(out)
}

/// The `video` column: every window's frames through the ops, one draw of
/// parameters per window.
fn frames_column(
    plan: &ImagePlan,
    windows: &[crate::layouts::Window],
    t: usize,
    keys: &SampleKeys<'_>,
) -> Result<BatchColumn> {
    let (h, w) = plan.out_size();
    let (h, w) = (h as usize, w as usize);
    let each = plan.out_bytes();
    let esize = each / (h * w * 3);
    let n = windows.len();
    let mut data = keys.buffers.take(n * t * each);
    for (i, win) in windows.iter().enumerate() {
        let shape = &win.frames.shape;
        let (fh, fw) = (shape[1], shape[2]);
        let mut rng = SampleRng::new(keys.seed, keys.epoch, keys.keys[i]);
        let params = plan.draw(fh as u32, fw as u32, &mut rng);
        let frame_len = fh * fw * 3;
        for f in 0..t.min(shape[0]) {
            let px = win.frames.data[f * frame_len..(f + 1) * frame_len].to_vec();
            let img = ImageData::new(fh as u32, fw as u32, 3, px)?;
            let plane = h * w;
            let (start, place) = match keys.layout {
                Layout::Chw => ((i * t + f) * 3 * plane, Placement::Planes { stride: plane }),
                Layout::Hwc => ((i * t + f) * 3 * plane, Placement::Hwc),
                Layout::Cthw => (
                    i * 3 * t * plane + f * plane,
                    Placement::Planes { stride: t * plane },
                ),
            };
            let end = match keys.layout {
                Layout::Cthw => (i + 1) * 3 * t * plane,
                _ => start + 3 * plane,
            };
            plan.run_pixels(&img, &params, place, &mut data[start * esize..end * esize])?;
        }
    }
    let shape = match keys.layout {
        Layout::Chw => vec![n, t, 3, h, w],
        Layout::Hwc => vec![n, t, h, w, 3],
        Layout::Cthw => vec![n, 3, t, h, w],
    };
    Ok(BatchColumn {
        data,
        element: Element::from(plan.out_dtype()),
        shape,
    })
}
