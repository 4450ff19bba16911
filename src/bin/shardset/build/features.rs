//! The features of a build from files: a `--features` file read, those of
//! an up-to-date cache of the same input reused, or inferred by reading the
//! input.

use std::path::{Path, PathBuf};

use shardset::features::describe::read_features_file;
use shardset::{DatasetBuilder, Features, LoadOptions};

use super::BuildOpts;
use crate::fmt::CliResult;
use crate::progress;

/// The features of a jsonl or csv build: the `--features` file, else those
/// of an up-to-date cache of the same input, else inferred by reading the
/// file (which also counts its rows).
pub(super) fn file_features(
    given: Option<PathBuf>,
    reuse: impl FnOnce() -> Option<Features>,
    file: &Path,
    o: &BuildOpts,
    infer: impl FnOnce() -> shardset::Result<(Features, u64)>,
) -> CliResult<(Features, Option<u64>)> {
    if let Some(p) = given {
        return Ok((read_features_file(&p)?, None));
    }
    if let Some(f) = reuse() {
        return Ok((f, None));
    }
    let (f, n) = inferring(file, o, infer)?;
    Ok((f, Some(n)))
}

/// Runs the inference pass, saying so on a terminal (it reads the whole file).
fn inferring<T>(
    file: &Path,
    o: &BuildOpts,
    f: impl FnOnce() -> shardset::Result<T>,
) -> CliResult<T> {
    let show = progress::wanted(o.quiet);
    if show {
        eprint!("reading {} to infer its features...", file.display());
    }
    let r = f();
    if show {
        eprint!("\r\x1b[2K");
    }
    Ok(r?)
}

/// The features of a published cache of this builder whose sources have
/// not changed (the library decides): a warm `build` then skips reading the
/// data to infer them.
pub(super) fn reuse_features(b: &dyn DatasetBuilder, opts: &LoadOptions) -> Option<Features> {
    shardset::builder::fresh_features(b, "train", opts)
}
