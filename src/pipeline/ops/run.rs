//! Applying a plan's geometric ops to decoded pixels.
//!
//! Crops and flips only move a window over the pixels; the pixels are
//! touched when an op resamples (one antialiased bilinear pass of
//! `fast_image_resize` over the window, crop and resize together) and in the
//! last pass of [`super::values`]. So `Resize(256), CenterCrop(224)` is one
//! resize and a windowed read, and `RandomResizedCrop, flip, ToDtype,
//! Normalize` is one resize and one write. The source may be a JPEG decoded
//! at a reduced DCT scale: the window is then kept in the reduced pixels'
//! fractional coordinates until the first resample.

use std::borrow::Cow;

use fast_image_resize::images::{CroppedImage, Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::geometry;
use super::plan::{ImagePlan, Params, Placement, Step};
use super::scratch;
use super::spec::{Op, ResizeTo};
use super::values::{self, Layout, Window};
use crate::error::{Error, Result};
use crate::value::ImageData;

/// Owned or borrowed u8 pixels of 1 or 3 channels.
struct Pixels<'a> {
    data: Cow<'a, [u8]>,
    h: u32,
    w: u32,
    channels: usize,
}

/// The current image: a window of the pixels (in their coordinates, which
/// are fractional on a reduced decode), its logical size, and a pending mirror.
#[derive(Debug, Clone, Copy)]
struct View {
    top: f64,
    left: f64,
    h: f64,
    w: f64,
    vh: u32,
    vw: u32,
    flip: bool,
}

/// A geometric step of the ops with this sample's params.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Geo {
    /// A crop of the current image (may reach outside it: padding).
    Crop { top: i64, left: i64, h: u32, w: u32 },
    /// A resample to (h, w).
    Resize { h: u32, w: u32 },
    /// A mirror.
    Flip,
}

/// The geometric steps of `plan` with `params`, from the source size.
pub(super) fn geometry_steps(plan: &ImagePlan, params: &Params) -> Vec<Geo> {
    let (mut h, mut w) = params.src;
    let mut steps = Vec::new();
    for (op, step) in plan.ops.iter().zip(&params.steps) {
        match (op, step) {
            (Op::Resize { size }, _) => {
                let (nh, nw) = match *size {
                    ResizeTo::Shorter(s) => geometry::shorter_side(h, w, s),
                    ResizeTo::Exact([rh, rw]) => (rh, rw),
                };
                if (nh, nw) != (h, w) {
                    steps.push(Geo::Resize { h: nh, w: nw });
                }
                (h, w) = (nh, nw);
            }
            (Op::CenterCrop { size: [ch, cw] }, _) => {
                if (*ch, *cw) != (h, w) {
                    steps.push(Geo::Crop {
                        top: geometry::center_offset(h, *ch),
                        left: geometry::center_offset(w, *cw),
                        h: *ch,
                        w: *cw,
                    });
                }
                (h, w) = (*ch, *cw);
            }
            (
                Op::RandomResizedCrop { size: [rh, rw], .. },
                Step::Crop {
                    top,
                    left,
                    h: ch,
                    w: cw,
                },
            ) => {
                steps.push(Geo::Crop {
                    top: i64::from(*top),
                    left: i64::from(*left),
                    h: *ch,
                    w: *cw,
                });
                if (*rh, *rw) != (*ch, *cw) {
                    steps.push(Geo::Resize { h: *rh, w: *rw });
                }
                (h, w) = (*rh, *rw);
            }
            (Op::RandomHorizontalFlip { .. }, Step::Flip(true)) => steps.push(Geo::Flip),
            _ => {}
        }
    }
    steps
}

impl View {
    fn whole(px: &Pixels, src: (u32, u32)) -> View {
        View {
            top: 0.0,
            left: 0.0,
            h: f64::from(px.h),
            w: f64::from(px.w),
            vh: src.0,
            vw: src.1,
            flip: false,
        }
    }

    fn crop(&mut self, top: i64, left: i64, h: u32, w: u32) {
        let (sy, sx) = (self.h / f64::from(self.vh), self.w / f64::from(self.vw));
        let left = if self.flip {
            i64::from(self.vw) - left - i64::from(w)
        } else {
            left
        };
        self.top += top as f64 * sy;
        self.left += left as f64 * sx;
        (self.h, self.w) = (f64::from(h) * sy, f64::from(w) * sx);
        (self.vh, self.vw) = (h, w);
    }

    /// The window in whole pixels at scale 1, if it is that.
    fn integral(&self) -> Option<(i64, i64)> {
        let whole = |v: f64| (v - v.round()).abs() < 1e-6;
        (whole(self.top)
            && whole(self.left)
            && (self.h - f64::from(self.vh)).abs() < 1e-6
            && (self.w - f64::from(self.vw)).abs() < 1e-6)
            .then(|| (self.top.round() as i64, self.left.round() as i64))
    }
}

/// The window `(top, left, h, w)` of `px` copied out, zeros outside.
fn padded(px: &Pixels, top: i64, left: i64, h: u32, w: u32) -> Pixels<'static> {
    let c = px.channels;
    let mut data = vec![0u8; h as usize * w as usize * c];
    for y in 0..h as i64 {
        let sy = top + y;
        if !(0..i64::from(px.h)).contains(&sy) {
            continue;
        }
        let x0 = left.max(0);
        let x1 = (left + i64::from(w)).min(i64::from(px.w));
        if x0 >= x1 {
            continue;
        }
        let src = (sy as usize * px.w as usize + x0 as usize) * c;
        let dst = (y as usize * w as usize + (x0 - left) as usize) * c;
        let n = (x1 - x0) as usize * c;
        data[dst..dst + n].copy_from_slice(&px.data[src..src + n]);
    }
    Pixels {
        data: Cow::Owned(data),
        h,
        w,
        channels: c,
    }
}

/// Resamples the view's window of `px` to (h, w).
fn resample(px: &Pixels, view: &View, h: u32, w: u32, column: &str) -> Result<Pixels<'static>> {
    let fail = |e: String| Error::decode(column, format!("resizing the image failed: {e}"));
    let inside = view.top > -1e-6
        && view.left > -1e-6
        && view.top + view.h < f64::from(px.h) + 1e-6
        && view.left + view.w < f64::from(px.w) + 1e-6;
    if !inside {
        // A padded crop before a resize: the padding becomes pixels first.
        let (top, left) = (view.top.round() as i64, view.left.round() as i64);
        let (ph, pw) = (
            view.h.round().max(1.0) as u32,
            view.w.round().max(1.0) as u32,
        );
        let own = padded(px, top, left, ph, pw);
        let whole = View {
            top: 0.0,
            left: 0.0,
            h: f64::from(ph),
            w: f64::from(pw),
            ..*view
        };
        return resample(&own, &whole, h, w, column);
    }
    let pixel_type = if px.channels == 1 {
        PixelType::U8
    } else {
        PixelType::U8x3
    };
    let src = ImageRef::new(px.w, px.h, &px.data, pixel_type).map_err(|e| fail(e.to_string()))?;
    // The filter reads the whole-pixel box around the window only (as
    // torchvision resizes a crop), and the fraction within it.
    let y0 = (view.top + 1e-6).floor().max(0.0);
    let x0 = (view.left + 1e-6).floor().max(0.0);
    let y1 = (view.top + view.h - 1e-6).ceil().min(f64::from(px.h));
    let x1 = (view.left + view.w - 1e-6).ceil().min(f64::from(px.w));
    let boxed = CroppedImage::new(
        &src,
        x0 as u32,
        y0 as u32,
        (x1 - x0) as u32,
        (y1 - y0) as u32,
    )
    .map_err(|e| fail(e.to_string()))?;
    let len = w as usize * h as usize * px.channels;
    let mut dst = Image::from_vec_u8(w, h, scratch::take(len), pixel_type)
        .map_err(|e| fail(e.to_string()))?;
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(
            (view.left - x0).max(0.0),
            (view.top - y0).max(0.0),
            view.w.min(x1 - x0),
            view.h.min(y1 - y0),
        );
    Resizer::new()
        .resize(&boxed, &mut dst, &options)
        .map_err(|e| fail(e.to_string()))?;
    Ok(Pixels {
        data: Cow::Owned(dst.into_vec()),
        h,
        w,
        channels: px.channels,
    })
}

/// Gives an owned buffer back to the thread's scratch buffers.
fn recycle(px: Pixels) {
    if let Cow::Owned(data) = px.data {
        scratch::give(data);
    }
}

/// Grey or RGB pixels of `img`: alpha dropped, 3 or 1 channels borrowed.
fn colour(img: &ImageData) -> Pixels<'_> {
    let data = match img.channels {
        1 | 3 => Cow::Borrowed(&img.data[..]),
        2 => Cow::Owned(img.data.chunks_exact(2).map(|p| p[0]).collect()),
        _ => Cow::Owned(
            img.data
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2]])
                .collect(),
        ),
    };
    Pixels {
        data,
        h: img.height,
        w: img.width,
        channels: if img.channels <= 2 { 1 } else { 3 },
    }
}

/// Runs `plan` with `params` on `img`, which is the source or the source
/// decoded at a reduced scale (the window scales with it).
pub(super) fn run(
    plan: &ImagePlan,
    img: &ImageData,
    params: &Params,
    place: Placement,
    out: &mut [u8],
) -> Result<()> {
    if img.height == 0 || img.width == 0 {
        return Err(Error::decode(
            &plan.column,
            format!(
                "an image of {}x{} pixels has nothing to transform",
                img.height, img.width
            ),
        ));
    }
    let mut px = colour(img);
    let mut view = View::whole(&px, params.src);
    for step in geometry_steps(plan, params) {
        match step {
            Geo::Crop { top, left, h, w } => view.crop(top, left, h, w),
            Geo::Flip => view.flip = !view.flip,
            Geo::Resize { h, w } => {
                let resized = resample(&px, &view, h, w, &plan.column)?;
                recycle(std::mem::replace(&mut px, resized));
                view = View {
                    flip: view.flip,
                    ..View::whole(&px, (h, w))
                };
            }
        }
    }
    let (top, left) = match view.integral() {
        Some(at) => at,
        None => {
            // Still in reduced coordinates: resample to the logical size.
            let resized = resample(&px, &view, view.vh, view.vw, &plan.column)?;
            recycle(std::mem::replace(&mut px, resized));
            view = View {
                flip: view.flip,
                ..View::whole(&px, (view.vh, view.vw))
            };
            (0, 0)
        }
    };
    debug_assert_eq!((view.vh, view.vw), plan.out_size);
    let win = Window {
        data: &px.data,
        buf_h: px.h,
        buf_w: px.w,
        channels: px.channels,
        top,
        left,
        h: view.vh,
        w: view.vw,
        flip: view.flip,
    };
    let layout = match place {
        Placement::Hwc => Layout {
            pixel_step: 3,
            channel_step: 1,
        },
        Placement::Planes { stride } => Layout {
            pixel_step: 1,
            channel_step: stride,
        },
    };
    let written = values::write(&win, &plan.lut, layout, out);
    recycle(px);
    written
}

impl ImagePlan {
    /// Applies the ops with `params` to decoded pixels (HWC u8 of 1 to 4
    /// channels) and writes the result at `out` as `place` says: `out`
    /// starts at this image's first element (elements of
    /// [`out_dtype`](Self::out_dtype), native endian).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `params` were drawn for another size
    /// or `out` is too short; [`Error::Decode`] for an empty image.
    pub fn run_pixels(
        &self,
        img: &ImageData,
        params: &Params,
        place: Placement,
        out: &mut [u8],
    ) -> Result<()> {
        if (img.height, img.width) != params.src {
            return Err(Error::InvalidArgument(format!(
                "column '{}': params drawn for a {}x{} image applied to a {}x{} one; draw them \
                 with the image's own size",
                self.column, params.src.0, params.src.1, img.height, img.width
            )));
        }
        run(self, img, params, place, out)
    }
}
