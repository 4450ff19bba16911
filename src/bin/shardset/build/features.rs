//! The features of a build from files: a `--features` file read, those of
//! an up-to-date cache of the same input reused, or inferred by reading the
//! input.

use std::path::{Path, PathBuf};

use serde_json::{json, Value as J};
use shardset::builder::{cache_status, source_changes};
use shardset::features::describe::features_from_json;
use shardset::{open_cache, DatasetBuilder, Features, LoadOptions};

use super::BuildOpts;
use crate::fmt::{CliError, CliResult};
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
        return Ok((read_features(&p)?, None));
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

/// Reads a `--features` file: the features description `_metadata.json`
/// stores (`{"col": {"type": "Value", "dtype": "int64"}, ...}`), where a bare
/// dtype string stands for a `Value` (`{"col": "int64"}`); a whole
/// `_metadata.json` is accepted too (its `features` are used).
pub fn read_features(path: &Path) -> CliResult<Features> {
    let text = std::fs::read(path).map_err(|e| shardset::Error::Io {
        op: "read features file",
        path: path.to_path_buf(),
        source: e,
    })?;
    let bad = |reason: String| -> CliError {
        shardset::Error::Input {
            path: path.to_path_buf(),
            location: String::new(),
            reason,
        }
        .into()
    };
    let mut j: J =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not valid JSON ({e})")))?;
    if let Some(f) = j
        .get("features")
        .filter(|_| j.get("cache_format_version").is_some())
    {
        j = f.clone();
    }
    let obj = j
        .as_object_mut()
        .ok_or_else(|| bad("the features must be a JSON object of column descriptions".into()))?;
    for v in obj.values_mut() {
        if let J::String(d) = v {
            *v = json!({"type": "Value", "dtype": d});
        }
    }
    let f = features_from_json(&j).map_err(|e| bad(e.to_string()))?;
    if f.is_empty() {
        return Err(bad("no column is described".into()));
    }
    Ok(f)
}

/// The features of a published cache of this builder whose sources have not
/// changed: a warm `build` then skips reading the data to infer them.
pub(super) fn reuse_features(b: &dyn DatasetBuilder, opts: &LoadOptions) -> Option<Features> {
    if opts.rebuild {
        return None;
    }
    let (dir, exists) = cache_status(b, "train", opts).ok()?;
    if !exists {
        return None;
    }
    let c = open_cache(&dir).ok()?;
    let recorded = c.metadata.sources()?;
    let config = shardset::builder::resolve_config(b, None).ok()?;
    let now = b.sources(&config, "train").ok()??.stamp().ok()?;
    if !source_changes(recorded, &now).is_empty() {
        return None;
    }
    Some(c.features().as_ref().clone())
}
