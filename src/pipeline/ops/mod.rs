//! The per-image work of the input pipeline: the ops a user declares for
//! an image column (torchvision v2's names and meaning), validated into an
//! [`ImagePlan`] that decodes, augments and writes one image straight into
//! its place in a batch buffer, with randomness that depends only on
//! (seed, epoch, position), never on the thread that runs it.
//!
//! `spec` declares the ops, `plan` validates them and draws a sample's
//! params, `geometry` computes torchvision's sizes and crop boxes, `run`
//! applies crops, flips and resizes, `values` the dtype and normalisation
//! with the last write, `decode` goes from encoded bytes, `scratch` keeps
//! each thread's pixel buffers from one image to the next.

mod decode;
mod geometry;
mod plan;
mod rng;
mod run;
mod scratch;
mod spec;
#[cfg(test)]
mod tests;
mod values;

pub use plan::{ImagePlan, Params, Placement};
pub use rng::SampleRng;
pub use spec::{Op, OutDtype, ResizeTo};
