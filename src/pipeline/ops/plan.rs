//! The validated ops of one image column: every parameter and the sequence
//! are checked once, when the pipeline is built, so a bad transform fails
//! before the first batch with a message naming the column, the op and the
//! parameter, and every image of the column has one output size and dtype
//! (what lets the engine preallocate the batch buffer).

use super::geometry;
use super::rng::SampleRng;
use super::spec::{Op, OutDtype, ResizeTo};
use super::values::Lut;
use crate::error::{Error, Result};
use crate::pipeline::options::Layout;

/// The validated ops of one image column.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    pub(super) column: String,
    pub(super) ops: Vec<Op>,
    pub(super) out_size: (u32, u32),
    pub(super) out_dtype: OutDtype,
    /// What the value ops (ToDtype, Normalize) make of each u8 level per channel.
    pub(super) lut: Lut,
}

/// One sample's random choices, drawn by [`ImagePlan::draw`] for a source
/// size: what [`ImagePlan::run_pixels`] applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// The source (h, w) the params were drawn for.
    pub(super) src: (u32, u32),
    /// One per op.
    pub(super) steps: Vec<Step>,
}

impl Params {
    /// The source (h, w) these params were drawn for.
    pub fn source_size(&self) -> (u32, u32) {
        self.src
    }
}

/// What one op does to this sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// Nothing drawn: the op's effect follows from its parameters.
    Fixed,
    /// A crop of the op's input, then the op's resize (RandomResizedCrop).
    Crop { top: u32, left: u32, h: u32, w: u32 },
    /// RandomHorizontalFlip: whether it mirrors.
    Flip(bool),
}

/// Where one image's elements go in the output buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Contiguous `h * w * 3`, channels last.
    Hwc,
    /// Channel `c`'s `h * w` plane starts at element `c * stride` (CHW:
    /// `stride = h * w`; frame `t` of a `[C, T, H, W]` clip: out starts at
    /// `t * h * w`, `stride = T * h * w`).
    Planes {
        /// Elements between the starts of two channel planes.
        stride: usize,
    },
}

/// The error of one op's parameter.
fn bad(column: &str, i: usize, op: &Op, what: String) -> Error {
    Error::InvalidArgument(format!("column '{column}', op {i} ({}): {what}", op.name()))
}

fn check_size(column: &str, i: usize, op: &Op, size: [u32; 2]) -> Result<()> {
    if size.contains(&0) {
        return Err(bad(
            column,
            i,
            op,
            format!("size {size:?} has a 0 side; pass [h, w] of at least 1 pixel each"),
        ));
    }
    Ok(())
}

fn check_channels(column: &str, i: usize, op: &Op, name: &str, v: &[f32]) -> Result<()> {
    if v.len() != 1 && v.len() != 3 {
        return Err(bad(
            column,
            i,
            op,
            format!(
                "{name} has {} values; pass 1 (all channels) or 3 (R, G, B)",
                v.len()
            ),
        ));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(bad(
            column,
            i,
            op,
            format!("{name} {v:?} is not finite; pass finite numbers"),
        ));
    }
    Ok(())
}

/// Checks one op's own parameters.
fn check_op(column: &str, i: usize, op: &Op) -> Result<()> {
    match op {
        Op::Resize { size } => match *size {
            ResizeTo::Shorter(0) => Err(bad(
                column,
                i,
                op,
                "size 0; pass the shorter side's length (at least 1) or [h, w]".into(),
            )),
            ResizeTo::Shorter(_) => Ok(()),
            ResizeTo::Exact(s) => check_size(column, i, op, s),
        },
        Op::CenterCrop { size } => check_size(column, i, op, *size),
        Op::RandomResizedCrop { size, scale, ratio } => {
            check_size(column, i, op, *size)?;
            let [lo, hi] = *scale;
            if !(lo > 0.0 && hi <= 1.0 && lo <= hi) {
                return Err(bad(
                    column,
                    i,
                    op,
                    format!(
                        "scale {scale:?} is not within (0, 1] with min <= max; pass [min, max] \
                         area fractions such as [0.08, 1.0]"
                    ),
                ));
            }
            let [lo, hi] = *ratio;
            if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
                return Err(bad(
                    column,
                    i,
                    op,
                    format!(
                        "ratio {ratio:?} needs 0 < min <= max; pass [min, max] aspect ratios \
                         (width / height) such as [0.75, 1.3333]"
                    ),
                ));
            }
            Ok(())
        }
        Op::RandomHorizontalFlip { p } => {
            if !(0.0..=1.0).contains(p) {
                return Err(bad(
                    column,
                    i,
                    op,
                    format!("p {p} is not a probability; pass p within [0, 1]"),
                ));
            }
            Ok(())
        }
        Op::ToDtype { .. } => Ok(()),
        Op::Normalize { mean, std } => {
            check_channels(column, i, op, "mean", mean)?;
            check_channels(column, i, op, "std", std)?;
            if std.contains(&0.0) {
                return Err(bad(
                    column,
                    i,
                    op,
                    format!("std {std:?} has a 0, which divides by zero; pass non-zero std"),
                ));
            }
            Ok(())
        }
    }
}

impl ImagePlan {
    /// Validates every parameter and the sequence.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the column, the op (name and
    /// position) and the parameter: a 0 size, a scale not within (0, 1] or
    /// min > max, a ratio <= 0 or min > max, p outside [0, 1], mean/std of
    /// other than 1 or 3 values, a 0 std, Normalize before a float ToDtype,
    /// or ops that leave the output size open.
    pub fn new(column: &str, ops: &[Op]) -> Result<ImagePlan> {
        let mut dtype = OutDtype::Uint8;
        // The output size once an op fixes it; a shorter-side resize keeps a
        // fixed size fixed and an open one open.
        let mut size: Option<(u32, u32)> = None;
        for (i, op) in ops.iter().enumerate() {
            check_op(column, i, op)?;
            match op {
                Op::Resize {
                    size: ResizeTo::Shorter(s),
                } => size = size.map(|(h, w)| geometry::shorter_side(h, w, *s)),
                Op::Resize {
                    size: ResizeTo::Exact([h, w]),
                }
                | Op::CenterCrop { size: [h, w] }
                | Op::RandomResizedCrop { size: [h, w], .. } => size = Some((*h, *w)),
                Op::ToDtype { dtype: d, .. } => dtype = *d,
                Op::Normalize { .. } if !dtype.is_float() => {
                    return Err(bad(
                        column,
                        i,
                        op,
                        "the elements are uint8 here; add a to_dtype with a float dtype \
                         (e.g. {\"op\": \"to_dtype\", \"dtype\": \"float32\"}) before normalize"
                            .into(),
                    ))
                }
                _ => {}
            }
        }
        let Some(out_size) = size else {
            return Err(Error::InvalidArgument(format!(
                "column '{column}': the ops leave the output size open (images of a batch would \
                 differ in size); add a center_crop, a random_resized_crop or a resize to [h, w]"
            )));
        };
        Ok(ImagePlan {
            column: column.to_string(),
            ops: ops.to_vec(),
            out_size,
            out_dtype: dtype,
            lut: Lut::new(ops, dtype),
        })
    }

    /// The column the ops apply to.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// The ops, as declared.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The output's (h, w); the output always has 3 channels (RGB: grey is
    /// expanded and alpha dropped, as PIL's `convert("RGB")`).
    pub fn out_size(&self) -> (u32, u32) {
        self.out_size
    }

    /// Where each image goes in a buffer of `layout`, and its shape there
    /// (`[3, h, w]` or `[h, w, 3]`): the one reading of a layout for images,
    /// for batches and for single images alike.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the column for `CTHW`, which is for
    /// video windows.
    pub fn placement(&self, layout: Layout) -> Result<(Placement, [usize; 3])> {
        let (h, w) = (self.out_size.0 as usize, self.out_size.1 as usize);
        match layout {
            Layout::Hwc => Ok((Placement::Hwc, [h, w, 3])),
            Layout::Chw => Ok((Placement::Planes { stride: h * w }, [3, h, w])),
            Layout::Cthw => Err(Error::InvalidArgument(format!(
                "layout CTHW is for video windows; image column '{}' takes CHW or HWC",
                self.column
            ))),
        }
    }

    /// The output's element type: uint8 unless a ToDtype says otherwise
    /// (the last one counts).
    pub fn out_dtype(&self) -> OutDtype {
        self.out_dtype
    }

    /// Bytes of one output image: h * w * 3 * the dtype's size.
    pub fn out_bytes(&self) -> usize {
        let (h, w) = self.out_size;
        h as usize * w as usize * 3 * self.out_dtype.size()
    }

    /// This sample's random parameters for a source of (h, w), drawn from
    /// `rng` in op order (a flip draws even at p 0 or 1, so the stream of a
    /// later op does not depend on an earlier p).
    pub fn draw(&self, src_h: u32, src_w: u32, rng: &mut SampleRng) -> Params {
        let (mut h, mut w) = (src_h, src_w);
        let steps = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Resize { size } => {
                    (h, w) = match *size {
                        ResizeTo::Shorter(s) => geometry::shorter_side(h, w, s),
                        ResizeTo::Exact([rh, rw]) => (rh, rw),
                    };
                    Step::Fixed
                }
                Op::CenterCrop { size: [ch, cw] } => {
                    (h, w) = (*ch, *cw);
                    Step::Fixed
                }
                Op::RandomResizedCrop { size, scale, ratio } => {
                    let (top, left, ch, cw) =
                        geometry::random_resized_crop(h, w, *scale, *ratio, rng);
                    (h, w) = (size[0], size[1]);
                    Step::Crop {
                        top,
                        left,
                        h: ch,
                        w: cw,
                    }
                }
                Op::RandomHorizontalFlip { p } => Step::Flip(rng.uniform() < *p),
                Op::ToDtype { .. } | Op::Normalize { .. } => Step::Fixed,
            })
            .collect();
        Params {
            src: (src_h, src_w),
            steps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crop() -> Op {
        Op::CenterCrop { size: [8, 8] }
    }

    fn float() -> Op {
        Op::ToDtype {
            dtype: OutDtype::Float32,
            scale: true,
        }
    }

    fn rrc(scale: [f64; 2], ratio: [f64; 2]) -> Op {
        Op::RandomResizedCrop {
            size: [8, 8],
            scale,
            ratio,
        }
    }

    fn norm(mean: Vec<f32>, std: Vec<f32>) -> Op {
        Op::Normalize { mean, std }
    }

    #[test]
    fn every_bad_parameter_names_column_op_and_parameter() {
        let cases: Vec<(Vec<Op>, &str)> = vec![
            (
                vec![Op::Resize {
                    size: ResizeTo::Shorter(0),
                }],
                "op 0 (resize): size 0",
            ),
            (
                vec![Op::Resize {
                    size: ResizeTo::Exact([0, 3]),
                }],
                "op 0 (resize): size [0, 3]",
            ),
            (
                vec![Op::CenterCrop { size: [4, 0] }],
                "op 0 (center_crop): size",
            ),
            (
                vec![Op::RandomResizedCrop {
                    size: [0, 4],
                    scale: [0.5, 1.0],
                    ratio: [1.0, 1.0],
                }],
                "op 0 (random_resized_crop): size",
            ),
            (
                vec![rrc([0.0, 1.0], [1.0, 1.0])],
                "(random_resized_crop): scale",
            ),
            (
                vec![rrc([0.5, 1.5], [1.0, 1.0])],
                "(random_resized_crop): scale",
            ),
            (
                vec![rrc([0.9, 0.5], [1.0, 1.0])],
                "(random_resized_crop): scale",
            ),
            (
                vec![rrc([0.5, 1.0], [0.0, 1.0])],
                "(random_resized_crop): ratio",
            ),
            (
                vec![rrc([0.5, 1.0], [2.0, 1.0])],
                "(random_resized_crop): ratio",
            ),
            (
                vec![crop(), Op::RandomHorizontalFlip { p: 1.5 }],
                "op 1 (random_horizontal_flip): p",
            ),
            (
                vec![crop(), Op::RandomHorizontalFlip { p: -0.1 }],
                "op 1 (random_horizontal_flip): p",
            ),
            (
                vec![crop(), float(), norm(vec![0.5, 0.5], vec![1.0])],
                "op 2 (normalize): mean has 2 values",
            ),
            (
                vec![crop(), float(), norm(vec![0.5], vec![1.0; 4])],
                "op 2 (normalize): std has 4 values",
            ),
            (
                vec![crop(), float(), norm(vec![0.5], vec![1.0, 0.0, 1.0])],
                "op 2 (normalize): std",
            ),
            (
                vec![crop(), norm(vec![0.5], vec![0.5])],
                "op 1 (normalize): the elements are uint8",
            ),
            (
                vec![
                    crop(),
                    float(),
                    Op::ToDtype {
                        dtype: OutDtype::Uint8,
                        scale: true,
                    },
                    norm(vec![0.5], vec![0.5]),
                ],
                "op 3 (normalize): the elements are uint8",
            ),
            (
                vec![Op::Resize {
                    size: ResizeTo::Shorter(8),
                }],
                "the ops leave the output size open",
            ),
            (vec![], "the ops leave the output size open"),
        ];
        for (ops, want) in cases {
            let err = ImagePlan::new("img", &ops).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::InvalidArgument(_)), "{msg}");
            assert!(msg.contains("column 'img'"), "{msg}");
            assert!(msg.contains(want), "{ops:?}: {msg} lacks {want}");
            assert!(msg.contains("pass") || msg.contains("add"), "{msg}");
        }
    }

    #[test]
    fn size_and_dtype_follow_the_ops() {
        let plan = ImagePlan::new(
            "img",
            &[
                Op::CenterCrop { size: [30, 40] },
                Op::Resize {
                    size: ResizeTo::Shorter(15),
                },
                float(),
                Op::ToDtype {
                    dtype: OutDtype::Float16,
                    scale: true,
                },
            ],
        )
        .unwrap();
        assert_eq!(plan.out_size(), (15, 20));
        assert_eq!(plan.out_dtype(), OutDtype::Float16);
        assert_eq!(plan.out_bytes(), 15 * 20 * 3 * 2);
        assert_eq!(plan.ops().len(), 4);
        let plain = ImagePlan::new("img", &[crop()]).unwrap();
        assert_eq!(plain.out_dtype(), OutDtype::Uint8);
    }
}
