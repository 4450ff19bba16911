//! The one integration-test binary (one link of the heavy dependencies).

mod bad_input;
mod builder;
mod cli;
mod common;
mod crash;
mod dataset_api;
mod golden;
mod integrity;
#[cfg(feature = "lance")]
mod lance;
mod pyarrow;
mod roundtrip;
mod sampler;
#[cfg(feature = "video")]
mod video;
