//! The input pipeline: batches of finished tensors (decoded, augmented images) for a training loop.
pub mod ops;
