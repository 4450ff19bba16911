//! The options of a [`Pipeline`](super::Pipeline): which rows in which order
//! (the [`LoaderOptions`] of the one epoch model), which columns with which
//! ops, in which layout, on how many threads with how many batches ready
//! ahead. Private fields, each checked when set.

use std::num::NonZeroUsize;

use super::ops::Op;
use crate::error::{Error, Result};
use crate::sampler::LoaderOptions;

crate::util::named_enum! {
    /// Where the channels of an image (or video) column go.
    pub enum Layout("layout") {
        /// Images `[B, C, H, W]`, video windows `[B, T, C, H, W]` (torch's convention).
        Chw = "CHW",
        /// Images `[B, H, W, C]`, video windows `[B, T, H, W, C]`.
        Hwc = "HWC",
        /// Video windows `[B, C, T, H, W]` (3-D convolutions); not for images.
        Cthw = "CTHW",
    }
}

/// Batches ready ahead of the consumer by default.
pub const DEFAULT_PREFETCH: usize = 2;

/// Options of a [`Pipeline`](super::Pipeline).
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineOptions {
    loader: LoaderOptions,
    threads: NonZeroUsize,
    prefetch: NonZeroUsize,
    columns: Option<Vec<String>>,
    ops: Vec<(String, Vec<Op>)>,
    layout: Layout,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            loader: LoaderOptions::default(),
            threads: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            prefetch: NonZeroUsize::new(DEFAULT_PREFETCH).expect("positive"),
            columns: None,
            ops: Vec::new(),
            layout: Layout::Chw,
        }
    }
}

impl PipelineOptions {
    /// The epoch order, seed, partition and batch size.
    pub fn with_loader(mut self, loader: LoaderOptions) -> Self {
        self.loader = loader;
        self
    }

    /// Threads assembling batches (default: the machine's cores).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_threads(mut self, n: usize) -> Result<Self> {
        self.threads = NonZeroUsize::new(n).ok_or_else(|| {
            Error::InvalidArgument(
                "threads must be at least 1 (1 inside a DataLoader worker)".into(),
            )
        })?;
        Ok(self)
    }

    /// Batches kept ready ahead of the consumer (default
    /// [`DEFAULT_PREFETCH`]). At most `threads + prefetch` batches exist at
    /// once, which bounds the memory ([`Pipeline::max_bytes_in_flight`](super::Pipeline::max_bytes_in_flight)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_prefetch(mut self, n: usize) -> Result<Self> {
        self.prefetch = NonZeroUsize::new(n)
            .ok_or_else(|| Error::InvalidArgument("prefetch must be at least 1 batch".into()))?;
        Ok(self)
    }

    /// The columns of each batch, in this order (default: every column
    /// that makes a tensor: numbers, class ids, fixed-shape arrays, and
    /// images given ops; strings, bytes, lists and videos are left out).
    pub fn with_columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// The ops of an image column (checked against the column's feature
    /// when the pipeline is made).
    pub fn with_ops(mut self, column: impl Into<String>, ops: Vec<Op>) -> Self {
        let column = column.into();
        self.ops.retain(|(c, _)| *c != column);
        self.ops.push((column, ops));
        self
    }

    /// The ops of an image column from their JSON (a list of
    /// `{"op": name, ...}` objects, as the Python package writes them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the column and the op's position
    /// when the JSON is not a list of known ops with known parameters.
    pub fn try_with_ops_json(self, column: &str, json: &str) -> Result<Self> {
        let ops = Op::list_from_json(column, json)?;
        Ok(self.with_ops(column, ops))
    }

    /// Where channels go (default [`Layout::Chw`]).
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The loader options.
    pub fn loader(&self) -> &LoaderOptions {
        &self.loader
    }

    /// Threads.
    pub fn threads(&self) -> usize {
        self.threads.get()
    }

    /// Batches ready ahead.
    pub fn prefetch(&self) -> usize {
        self.prefetch.get()
    }

    /// The columns asked for, if any.
    pub fn columns(&self) -> Option<&[String]> {
        self.columns.as_deref()
    }

    /// The ops of each column given some.
    pub fn ops(&self) -> &[(String, Vec<Op>)] {
        &self.ops
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }
}
