//! Per-column statistics of the rows a report reads: numeric histograms,
//! class balance, string and byte lengths, image sizes and containers, and
//! null counts. Computed on the Arrow cells as stored (no decode), so a
//! column of images costs its headers, not its pixels.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::features::image::probe;
use crate::features::repr::feature_repr;
use crate::features::{Dtype, Feature, Features};

use super::svg::Bar;
use super::text::number;

/// Bins of a histogram of values that are not a few integers.
pub const BINS: usize = 20;

/// What a column's values look like.
#[derive(Debug, Clone, PartialEq)]
pub enum Summary {
    /// Numbers (and booleans, as 0 and 1): range, mean and a histogram.
    Numbers {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Mean.
        mean: f64,
        /// The histogram (one bar per value when they are a few integers).
        bars: Vec<Bar>,
    },
    /// Class ids, one bar per class name (ids without a name after them).
    Classes {
        /// Count per class, in id order.
        bars: Vec<Bar>,
    },
    /// Lengths of strings (characters), binaries (bytes) or lists (items).
    Lengths {
        /// What a length counts.
        unit: &'static str,
        /// Shortest.
        min: f64,
        /// Longest.
        max: f64,
        /// Mean.
        mean: f64,
        /// Histogram of the lengths.
        bars: Vec<Bar>,
    },
    /// Encoded images: their containers, pixel sizes and encoded bytes.
    Images {
        /// Count per container (PNG, JPEG, ...; `unreadable` for a bad header).
        containers: Vec<Bar>,
        /// Smallest and largest width.
        width: (u32, u32),
        /// Smallest and largest height.
        height: (u32, u32),
        /// Histogram of the encoded sizes in bytes.
        bars: Vec<Bar>,
    },
    /// Nothing summarised beyond nulls (arrays, videos, nested values).
    Opaque,
}

/// One column's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnReport {
    /// Column name.
    pub name: String,
    /// The feature, as the reference spells it.
    pub feature: String,
    /// Rows looked at.
    pub rows: u64,
    /// Null cells among them.
    pub nulls: u64,
    /// The values.
    pub summary: Summary,
}

#[derive(Default)]
struct Acc {
    rows: u64,
    nulls: u64,
    values: Vec<f64>,
    classes: BTreeMap<i64, u64>,
    containers: BTreeMap<&'static str, u64>,
    widths: Vec<u32>,
    heights: Vec<u32>,
}

/// How a feature's cells are read.
#[derive(Clone, Copy)]
enum Kind {
    Number,
    Class,
    Chars,
    Bytes,
    Items,
    Image,
    Opaque,
}

fn kind(f: &Feature) -> Kind {
    match f {
        Feature::Value(Dtype::String) => Kind::Chars,
        Feature::Value(Dtype::Binary) => Kind::Bytes,
        Feature::Value(_) => Kind::Number,
        Feature::ClassLabel(_) => Kind::Class,
        Feature::Sequence(_) => Kind::Items,
        Feature::Image(_) => Kind::Image,
        _ => Kind::Opaque,
    }
}

/// Statistics of every column, accumulated batch by batch.
pub struct ColumnStats {
    features: Features,
    accs: Vec<Acc>,
}

impl ColumnStats {
    /// Empty statistics for `features`.
    pub fn new(features: &Features) -> Self {
        ColumnStats {
            accs: features.iter().map(|_| Acc::default()).collect(),
            features: features.clone(),
        }
    }

    /// Adds the rows of `batch` (columns by the features' names).
    ///
    /// # Errors
    /// [`Error::Corrupt`]-like [`Error::InvalidArgument`] when a column is
    /// missing or not of its feature's Arrow type.
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        for ((name, feature), acc) in self.features.iter().zip(&mut self.accs) {
            let col = batch.column_by_name(name).ok_or_else(|| {
                Error::InvalidArgument(format!("the rows read have no column '{name}'"))
            })?;
            add_column(name, kind(feature), col, acc)?;
        }
        Ok(())
    }

    /// The statistics of each column, in feature order.
    pub fn finish(self) -> Vec<ColumnReport> {
        self.features
            .iter()
            .zip(self.accs)
            .map(|((name, feature), acc)| ColumnReport {
                name: name.to_string(),
                feature: feature_repr(feature),
                rows: acc.rows,
                nulls: acc.nulls,
                summary: summarise(feature, kind(feature), acc),
            })
            .collect()
    }
}

fn wrong(name: &str, col: &ArrayRef) -> Error {
    Error::InvalidArgument(format!(
        "column '{name}' is stored as {}, not its feature's type",
        col.data_type()
    ))
}

fn add_column(name: &str, kind: Kind, col: &ArrayRef, acc: &mut Acc) -> Result<()> {
    acc.rows += col.len() as u64;
    acc.nulls += col.logical_null_count() as u64;
    let valid = |i: usize| col.is_valid(i);
    match kind {
        Kind::Number => {
            let f = arrow_cast::cast(col, &DataType::Float64).map_err(|_| wrong(name, col))?;
            let f = f.as_primitive::<Float64Type>();
            acc.values.extend(
                (0..f.len())
                    .filter(|&i| f.is_valid(i))
                    .map(|i| f.value(i))
                    .filter(|v| v.is_finite()),
            );
        }
        Kind::Class => {
            let ids = col
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| wrong(name, col))?;
            for i in (0..ids.len()).filter(|&i| valid(i)) {
                *acc.classes.entry(ids.value(i)).or_default() += 1;
            }
        }
        Kind::Chars => {
            let lens: Vec<f64> = match col.data_type() {
                DataType::Utf8 => {
                    let s = col.as_string::<i32>();
                    (0..s.len())
                        .filter(|&i| valid(i))
                        .map(|i| s.value(i).chars().count() as f64)
                        .collect()
                }
                DataType::LargeUtf8 => {
                    let s = col.as_string::<i64>();
                    (0..s.len())
                        .filter(|&i| valid(i))
                        .map(|i| s.value(i).chars().count() as f64)
                        .collect()
                }
                _ => return Err(wrong(name, col)),
            };
            acc.values.extend(lens);
        }
        Kind::Bytes | Kind::Image => {
            let cells: Vec<&[u8]> = match col.data_type() {
                DataType::Binary => {
                    let b = col.as_binary::<i32>();
                    (0..b.len())
                        .filter(|&i| valid(i))
                        .map(|i| b.value(i))
                        .collect()
                }
                DataType::LargeBinary => {
                    let b = col.as_binary::<i64>();
                    (0..b.len())
                        .filter(|&i| valid(i))
                        .map(|i| b.value(i))
                        .collect()
                }
                _ => return Err(wrong(name, col)),
            };
            for c in cells {
                acc.values.push(c.len() as f64);
                if matches!(kind, Kind::Image) {
                    match probe(c) {
                        Ok(info) => {
                            *acc.containers.entry(info.container.name()).or_default() += 1;
                            if let (Some(w), Some(h)) = (info.width, info.height) {
                                acc.widths.push(w);
                                acc.heights.push(h);
                            }
                        }
                        Err(_) => *acc.containers.entry("unreadable").or_default() += 1,
                    }
                }
            }
        }
        Kind::Items => match col.data_type() {
            DataType::List(_) => {
                let l = col.as_list::<i32>();
                acc.values.extend(
                    (0..l.len())
                        .filter(|&i| valid(i))
                        .map(|i| l.value_length(i) as f64),
                );
            }
            DataType::LargeList(_) => {
                let l = col.as_list::<i64>();
                acc.values.extend(
                    (0..l.len())
                        .filter(|&i| valid(i))
                        .map(|i| l.value_length(i) as f64),
                );
            }
            DataType::FixedSizeList(_, n) => {
                let n = f64::from(*n);
                acc.values
                    .extend((0..col.len()).filter(|&i| valid(i)).map(|_| n));
            }
            _ => return Err(wrong(name, col)),
        },
        Kind::Opaque => {}
    }
    Ok(())
}

/// A histogram of `values`: one bar per integer when they are at most
/// [`BINS`] consecutive integers, else [`BINS`] equal bins from the
/// smallest to the largest (the last one closed). The bars sum to
/// `values.len()`.
pub fn histogram(values: &[f64]) -> Vec<Bar> {
    let Some((lo, hi)) = range(values) else {
        return Vec::new();
    };
    let integers = values.iter().all(|v| v.fract() == 0.0);
    if integers && hi - lo < BINS as f64 {
        let mut counts = vec![0u64; (hi - lo) as usize + 1];
        for v in values {
            counts[(v - lo) as usize] += 1;
        }
        return counts
            .into_iter()
            .enumerate()
            .map(|(i, count)| Bar {
                label: number(lo + i as f64),
                count,
            })
            .collect();
    }
    let width = (hi - lo) / BINS as f64;
    let mut counts = vec![0u64; BINS];
    for v in values {
        let b = (((v - lo) / width) as usize).min(BINS - 1);
        counts[b] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, count)| Bar {
            label: format!(
                "{} to {}",
                number(lo + i as f64 * width),
                number(if i + 1 == BINS {
                    hi
                } else {
                    lo + (i + 1) as f64 * width
                })
            ),
            count,
        })
        .collect()
}

fn range(values: &[f64]) -> Option<(f64, f64)> {
    let lo = values.iter().copied().reduce(f64::min)?;
    let hi = values.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn summarise(feature: &Feature, kind: Kind, acc: Acc) -> Summary {
    let (min, max) = range(&acc.values).unwrap_or((0.0, 0.0));
    let lengths = |unit| Summary::Lengths {
        unit,
        min,
        max,
        mean: mean(&acc.values),
        bars: histogram(&acc.values),
    };
    match kind {
        Kind::Number => Summary::Numbers {
            min,
            max,
            mean: mean(&acc.values),
            bars: histogram(&acc.values),
        },
        Kind::Class => {
            let names: &[std::sync::Arc<str>] = match feature {
                Feature::ClassLabel(c) => c.names(),
                _ => &[],
            };
            let mut bars: Vec<Bar> = names
                .iter()
                .enumerate()
                .map(|(i, n)| Bar {
                    label: n.to_string(),
                    count: acc.classes.get(&(i as i64)).copied().unwrap_or(0),
                })
                .collect();
            bars.extend(
                acc.classes
                    .iter()
                    .filter(|(&id, _)| id < 0 || id as usize >= names.len())
                    .map(|(id, &count)| Bar {
                        label: format!("id {id}"),
                        count,
                    }),
            );
            Summary::Classes { bars }
        }
        Kind::Chars => lengths("characters"),
        Kind::Bytes => lengths("bytes"),
        Kind::Items => lengths("items"),
        Kind::Image => {
            let span = |v: &[u32]| {
                (
                    v.iter().copied().min().unwrap_or(0),
                    v.iter().copied().max().unwrap_or(0),
                )
            };
            Summary::Images {
                containers: acc
                    .containers
                    .iter()
                    .map(|(n, &count)| Bar {
                        label: n.to_string(),
                        count,
                    })
                    .collect(),
                width: span(&acc.widths),
                height: span(&acc.heights),
                bars: histogram(&acc.values),
            }
        }
        Kind::Opaque => Summary::Opaque,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_every_value_once() {
        let few: Vec<f64> = (0..100).map(|i| f64::from(i % 5)).collect();
        let bars = histogram(&few);
        assert_eq!(bars.len(), 5);
        assert!(bars.iter().all(|b| b.count == 20));
        let many: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.37).collect();
        let bars = histogram(&many);
        assert_eq!(bars.len(), BINS);
        assert_eq!(bars.iter().map(|b| b.count).sum::<u64>(), 1000);
        assert_eq!(
            histogram(&[7.5, 7.5]).iter().map(|b| b.count).sum::<u64>(),
            2
        );
        assert!(histogram(&[]).is_empty());
    }
}
