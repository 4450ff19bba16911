//! # shardset
//!
//! Typed, sharded, crash-safe dataset caches for training pipelines,
//! byte-compatible with the stable-datasets (Python) cache format, version 1.
//!
//! A dataset author describes columns with [`Features`] and yields
//! [`Example`]s; [`write_arrow_cache`] encodes them in parallel into Arrow IPC
//! shards rotated by a byte budget and publishes the cache atomically.
//! [`open_cache`] reads `_metadata.json`, validates it and returns the
//! [`Backend`] for the cache's layout: random access, batched `take`, slices
//! across shards and shard-ordered iteration.
//!
//! ```no_run
//! use shardset::{write_arrow_cache, open_cache, ArrowWriteOptions, Dtype, Example, Feature, Features};
//!
//! let features = Features::new()
//!     .with("x", Feature::value(Dtype::Int32))
//!     .with("label", Feature::class_label(["cat", "dog"]).unwrap());
//! let examples = (0..100).map(|i| Example::new().with("x", i).with("label", i % 2));
//! write_arrow_cache(examples, &features, "/tmp/my_cache".as_ref(), &ArrowWriteOptions::default()).unwrap();
//! let cache = open_cache("/tmp/my_cache").unwrap();
//! let row = cache.backend.get(-1).unwrap();
//! assert_eq!(row.get("x").and_then(|v| v.as_i64()), Some(99));
//! ```

#![warn(missing_docs)]

pub mod builder;
pub mod cache;
pub mod dataset;
pub mod download;
pub mod dtype;
pub mod error;
pub mod features;
#[cfg(feature = "lance")]
pub mod lance;
pub mod layouts;
pub mod mixture;
pub mod pipeline;
pub mod report;
pub mod sampler;
pub mod sources;
pub mod storage;
pub(crate) mod util;
pub mod value;
pub mod video;

pub use builder::{
    load, load_with_report, BuilderConfig, DatasetBuilder, DatasetInfo, ExampleStream, LoadOptions,
    LoadReport, Version, WorkUnit,
};
pub use cache::metadata::ArrowShardsMetadata;
pub use cache::naming::{cache_fingerprint, cache_root};
#[cfg(feature = "lance")]
pub use dataset::filter::{FilterReport, FilterSource};
pub use dataset::{Dataset, Format, TestSize};
pub use error::{Error, Result};
pub use features::decode::{DecodeOptions, RowDecoder};
pub use features::image::PngCompression;
pub use features::{ClassLabel, Dtype, Feature, Features, ImageFormat, VideoStorage};
pub use layouts::arrow_shards::format::{Codec, Compression};
pub use layouts::arrow_shards::integrity::verify_checksums;
pub use layouts::arrow_shards::write::{
    try_write_arrow_cache, write_arrow_cache, ArrowWriteOptions, WrittenCache,
    DEFAULT_SHARD_SIZE_BYTES,
};
#[cfg(feature = "lance")]
pub use layouts::lance_rows::write::{
    try_write_lance_cache, write_lance_cache, LanceStorageVersion, LanceWriteOptions, WrittenLance,
};
pub use layouts::open::{open_cache, open_cache_with, Cache, FeaturesSource, OpenOptions};
pub use layouts::spec::{write_cache, Layout, WriteSpec, Written};
pub use layouts::verify::{stamp_checksums, verify_cache, Damage, VerifyReport};
#[cfg(feature = "video")]
pub use layouts::video_frames::write::{
    try_write_video_frames_cache, write_video_frames_cache, ResizeMode, VideoFramesOptions,
    WrittenVideoFrames,
};
pub use layouts::{hf_arrow::HfArrow, open::open_hf_with};
#[cfg(feature = "parquet")]
pub use layouts::{open::open_parquet_with, parquet::ParquetRows};
pub use layouts::{ArrowShards, Backend, IterOptions};
#[cfg(feature = "lance")]
pub use layouts::{LanceReadOptions, LanceRows};
#[cfg(feature = "video")]
pub use layouts::{LanceVideoFrames, Window, WindowBatch};
pub use mixture::{
    DrawUnit, Mixture, MixtureBatch, MixtureBatches, MixtureOptions, MixtureSource, MixtureState,
    SourceEnd, SourceProgress, StepRows,
};
pub use sampler::{
    EpochBatches, EpochPosition, Loader, LoaderOptions, LoaderState, Order, Partition, Remainder,
    Sampler, WithinShard,
};
pub use util::{sha256_hex, SplitMix64};
pub use value::{Example, ImageData, Label, Row, Tensor, Value, VideoRef};
#[cfg(feature = "video")]
pub use video::{
    segment::{SegmentCodec, SegmentSettings},
    Clip, ClipLayout, Pad, Sampling, VideoDecode, WebpInput, WebpSettings, WindowSpec,
};
