//! The one integration-test binary (one link of the heavy dependencies).

mod alloc_count;
mod architecture;
mod bad_input;
mod builder;
mod cli;
mod cli_read;
mod common;
mod crash;
mod dataset_api;
mod dedup;
mod download;
mod download_builds;
mod edit;
#[cfg(feature = "s3")]
mod faults;
mod fidelity;
mod fixed_arrays;
#[cfg(all(feature = "video", feature = "s3"))]
mod fork;
mod fuzz_replay;
mod gather;
mod golden;
#[cfg(feature = "lance")]
mod hf_dirs;
mod integrity;
#[cfg(feature = "s3")]
mod killed_uploads;
#[cfg(feature = "lance")]
mod lance;
#[cfg(feature = "lance")]
mod lance_bad;
#[cfg(feature = "lance")]
mod lance_edit;
#[cfg(feature = "lance")]
mod lance_fork;
mod limits;
mod memory;
#[cfg(feature = "lance")]
mod mixture;
#[cfg(feature = "s3")]
mod object_cli;
#[cfg(feature = "s3")]
mod object_downloads;
#[cfg(feature = "s3")]
mod object_lance;
#[cfg(feature = "s3")]
mod object_publish;
#[cfg(feature = "s3")]
mod object_storage;
#[cfg(feature = "parquet")]
mod parquet;
mod pipeline;
#[cfg(feature = "video")]
mod pipeline_video;
mod pyarrow;
mod read_modes;
mod report;
mod roundtrip;
mod row_access;
mod sampler;
#[cfg(feature = "video")]
mod segments_av1;
#[cfg(feature = "video")]
mod segments_damage;
#[cfg(feature = "video")]
mod segments_format;
#[cfg(feature = "video")]
mod trust;
#[cfg(feature = "video")]
mod video;
#[cfg(feature = "video")]
mod video_builds;
#[cfg(feature = "video")]
mod video_cli;
#[cfg(feature = "video")]
mod video_segments;
#[cfg(feature = "video")]
mod video_windows;
#[cfg(feature = "lance")]
mod views;
#[cfg(feature = "lance")]
mod webdataset;
mod write_spec;

#[global_allocator]
static ALLOC: alloc_count::Counting = alloc_count::Counting;
