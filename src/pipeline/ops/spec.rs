//! The ops a user declares for an image column, spelled as torchvision v2
//! names them (`{"op": "random_resized_crop", "size": [224, 224]}`), with
//! torchvision's defaults, so a training script's transform list carries over
//! as data: serialisable, comparable and checked before any image is read.

use serde::{Deserialize, Serialize};

crate::util::named_enum! {
    /// The element type of an image column's output tensor.
    pub enum OutDtype("output dtype") {
        /// 8-bit unsigned, 0..=255 (no ToDtype, or `ToDtype(uint8)`).
        Uint8 = "uint8",
        /// 32-bit float.
        Float32 = "float32",
        /// IEEE half precision.
        Float16 = "float16",
        /// bfloat16 (8-bit exponent, 7-bit mantissa).
        Bfloat16 = "bfloat16",
    }
}

impl OutDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            OutDtype::Uint8 => 1,
            OutDtype::Float32 => 4,
            OutDtype::Float16 | OutDtype::Bfloat16 => 2,
        }
    }

    /// Whether the elements are floating point.
    pub fn is_float(self) -> bool {
        self != OutDtype::Uint8
    }
}

/// The size a [`Op::Resize`] resizes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResizeTo {
    /// The shorter side becomes this many pixels, the longer one keeps the
    /// aspect ratio (`int(size * long / short)`, as torchvision); a number.
    Shorter(u32),
    /// Exactly `[h, w]`.
    Exact([u32; 2]),
}

fn default_scale() -> [f64; 2] {
    [0.08, 1.0]
}

fn default_ratio() -> [f64; 2] {
    [3.0 / 4.0, 4.0 / 3.0]
}

fn half() -> f64 {
    0.5
}

fn yes() -> bool {
    true
}

/// One declared op, with torchvision v2's meaning and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Bilinear, antialiased resize.
    Resize {
        /// The shorter side (a number) or the exact `[h, w]`.
        size: ResizeTo,
    },
    /// A centred `[h, w]` crop, zero-padded where the image is smaller.
    CenterCrop {
        /// `[h, w]`.
        size: [u32; 2],
    },
    /// A random crop of random area and aspect ratio, resized to `size`.
    RandomResizedCrop {
        /// `[h, w]` of the output.
        size: [u32; 2],
        /// Bounds of the crop's area as a fraction of the image's.
        #[serde(default = "default_scale")]
        scale: [f64; 2],
        /// Bounds of the crop's aspect ratio (width / height), drawn log-uniform.
        #[serde(default = "default_ratio")]
        ratio: [f64; 2],
    },
    /// A left-right mirror with probability `p`.
    RandomHorizontalFlip {
        /// The probability of the flip.
        #[serde(default = "half")]
        p: f64,
    },
    /// A conversion of the elements, as torchvision v2's `ToDtype`: with
    /// `scale`, uint8 becomes float in [0, 1] and float becomes uint8 times 255.
    ToDtype {
        /// The element type after the op.
        dtype: OutDtype,
        /// Rescale the values to the new type's range.
        #[serde(default = "yes")]
        scale: bool,
    },
    /// `(x - mean) / std` per channel, on float elements.
    Normalize {
        /// One value, or one per channel (R, G, B).
        mean: Vec<f32>,
        /// One value, or one per channel (R, G, B).
        std: Vec<f32>,
    },
}

impl Op {
    /// The ops of image column `column` from JSON (`[{"op": "resize",
    /// "size": 256}, ...]`, as `shardset.ops` writes them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the
    /// column and the op it could not read.
    pub fn list_from_json(column: &str, json: &str) -> crate::Result<Vec<Op>> {
        let bad = |what: String| {
            crate::Error::InvalidArgument(format!(
                "the ops of column '{column}': {what}; see shardset.ops for the ops and their parameters"
            ))
        };
        let list: Vec<serde_json::Value> =
            serde_json::from_str(json).map_err(|e| bad(format!("not a list of ops ({e})")))?;
        list.into_iter()
            .enumerate()
            .map(|(i, v)| serde_json::from_value::<Op>(v).map_err(|e| bad(format!("op {i}: {e}"))))
            .collect()
    }

    /// The op's name as serde spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Resize { .. } => "resize",
            Op::CenterCrop { .. } => "center_crop",
            Op::RandomResizedCrop { .. } => "random_resized_crop",
            Op::RandomHorizontalFlip { .. } => "random_horizontal_flip",
            Op::ToDtype { .. } => "to_dtype",
            Op::Normalize { .. } => "normalize",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_op() -> Vec<Op> {
        vec![
            Op::Resize {
                size: ResizeTo::Shorter(256),
            },
            Op::Resize {
                size: ResizeTo::Exact([20, 30]),
            },
            Op::CenterCrop { size: [224, 200] },
            Op::RandomResizedCrop {
                size: [224, 224],
                scale: [0.2, 0.9],
                ratio: [0.5, 2.0],
            },
            Op::RandomHorizontalFlip { p: 0.25 },
            Op::ToDtype {
                dtype: OutDtype::Bfloat16,
                scale: false,
            },
            Op::Normalize {
                mean: vec![0.485, 0.456, 0.406],
                std: vec![0.229, 0.224, 0.225],
            },
        ]
    }

    #[test]
    fn every_op_round_trips_through_json() {
        for op in every_op() {
            let json = serde_json::to_string(&op).unwrap();
            let back: Op = serde_json::from_str(&json).unwrap();
            assert_eq!(back, op, "{json}");
            assert!(
                json.contains(&format!("\"op\":\"{}\"", op.name())),
                "{json}"
            );
        }
    }

    #[test]
    fn torchvision_spelling_with_defaults() {
        let ops: Vec<Op> = serde_json::from_str(
            r#"[{"op": "resize", "size": 256},
                {"op": "resize", "size": [32, 48]},
                {"op": "center_crop", "size": [224, 224]},
                {"op": "random_resized_crop", "size": [224, 224]},
                {"op": "random_horizontal_flip"},
                {"op": "to_dtype", "dtype": "float16"},
                {"op": "normalize", "mean": [0.5], "std": [0.25]}]"#,
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::Resize {
                    size: ResizeTo::Shorter(256)
                },
                Op::Resize {
                    size: ResizeTo::Exact([32, 48])
                },
                Op::CenterCrop { size: [224, 224] },
                Op::RandomResizedCrop {
                    size: [224, 224],
                    scale: [0.08, 1.0],
                    ratio: [0.75, 4.0 / 3.0],
                },
                Op::RandomHorizontalFlip { p: 0.5 },
                Op::ToDtype {
                    dtype: OutDtype::Float16,
                    scale: true
                },
                Op::Normalize {
                    mean: vec![0.5],
                    std: vec![0.25]
                },
            ]
        );
        let unknown =
            serde_json::from_str::<Op>(r#"{"op": "center_crop", "size": [1, 1], "x": 1}"#);
        assert!(unknown.unwrap_err().to_string().contains("unknown field"));
        let bad_dtype = serde_json::from_str::<Op>(r#"{"op": "to_dtype", "dtype": "float64"}"#);
        assert!(bad_dtype
            .unwrap_err()
            .to_string()
            .contains("uint8, float32"));
    }

    #[test]
    fn dtype_names_and_sizes() {
        for (name, d) in OutDtype::NAMES {
            assert_eq!(name.parse::<OutDtype>().unwrap(), *d);
            assert_eq!(d.to_string(), *name);
        }
        let sizes: Vec<usize> = OutDtype::NAMES.iter().map(|(_, d)| d.size()).collect();
        assert_eq!(sizes, [1, 4, 2, 2]);
    }
}
