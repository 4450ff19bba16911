//! Datasets shared by the benchmarks (the Python comparison builds the same ones).
#![allow(dead_code)]

pub mod seed;

use shardset::SplitMix64;
use shardset::{Dtype, Example, Feature, Features, ImageData};

/// 1 M rows {x: int32, label: ClassLabel(10)}.
pub fn scalar_features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("label", Feature::class_label_n(10).unwrap())
}

pub fn scalar_rows(n: usize) -> impl Iterator<Item = Example> {
    (0..n).map(|i| {
        Example::with_capacity(2)
            .with("x", i as i32)
            .with("label", (i % 10) as i64)
    })
}

/// 100 k rows {data: 1 KB of random bytes, idx: int64}.
pub fn binary_features() -> Features {
    Features::new()
        .with("data", Feature::value(Dtype::Binary))
        .with("idx", Feature::value(Dtype::Int64))
}

pub fn binary_rows(n: usize) -> impl Iterator<Item = Example> {
    let mut rng = SplitMix64::new(42);
    (0..n).map(move |i| {
        let mut b = vec![0u8; 1024];
        for c in b.chunks_exact_mut(8) {
            c.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        Example::with_capacity(2)
            .with("data", b)
            .with("idx", i as i64)
    })
}

/// 20 k rows {image: 32x32 RGB pixels encoded to PNG, label: ClassLabel(10)}.
pub fn image_features() -> Features {
    Features::new()
        .with("image", Feature::image())
        .with("label", Feature::class_label_n(10).unwrap())
}

/// Pixel (y, x, c) of image i: a smooth gradient that shifts with i
/// (the Python comparison computes the same formula with numpy).
pub fn image_pixels(i: usize) -> ImageData {
    let mut px = Vec::with_capacity(32 * 32 * 3);
    for y in 0..32usize {
        for x in 0..32usize {
            for c in 0..3usize {
                px.push(((x * 8 + y * 3 + c * 50 + i) % 256) as u8);
            }
        }
    }
    ImageData::new(32, 32, 3, px).unwrap()
}

pub fn image_rows(n: usize) -> impl Iterator<Item = Example> {
    (0..n).map(|i| {
        Example::with_capacity(2)
            .with("image", image_pixels(i))
            .with("label", (i % 10) as i64)
    })
}

/// `k` uniform random row indices below `n`.
pub fn random_indices(n: usize, k: usize, seed: u64) -> Vec<i64> {
    let mut r = SplitMix64::new(seed);
    (0..k).map(|_| r.below(n as u64) as i64).collect()
}
