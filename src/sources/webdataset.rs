//! WebDataset tar shards as a build's input (`shardset build webdataset`):
//! a `.tar` (or gzip-compressed `.tar.gz`/`.tgz`) file, or a directory of
//! them read in name order (one `train` split), or one with `train/`,
//! `validation/`, `test/` subdirectories of them (a split each).
//!
//! Samples are grouped as the `webdataset` package groups them: consecutive
//! members sharing a key, the member's path up to the first dot of its file
//! name; the rest of the name is the extension, and each extension is a
//! column (`__key__` holds the key; a dot in an extension becomes `_` in
//! its column name, `seg.png` → `seg_png`, as Lance allows no dot there). Columns are typed by extension as
//! `webdataset`'s default decoders read them: images (`jpg`, `png`, `webp`,
//! ... and `seg.png`) as [`Feature::image`] with their bytes kept as they
//! are, `cls`/`cls2`/`index`/`inx`/`id` as `int64` (their text parsed),
//! `txt`/`text`/`transcript`/`json`/`jsn` as strings, anything else as
//! binary. A sample missing an extension has a null there. Given features
//! override the types (a `ClassLabel` reads a number as its id and any
//! other text as a class name).
//!
//! Tars are parsed with the `tar` crate and inflated with `flate2`, both
//! maintained and already what Rust's package tools use. Members are read
//! into memory, never extracted: a member name such as `../x` is only a
//! key. Links, directories and hidden files (a name starting with `.`)
//! are skipped.

use std::collections::BTreeSet;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::imagefolder::{IMAGE_EXTENSIONS, SPLIT_FOLDERS};
use super::{builder_name, open_file};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources, WorkUnit};
use crate::dtype::Dtype;
use crate::error::{BoxError, Error, Result};
use crate::features::image::probe;
use crate::features::{Feature, Features};
use crate::value::{Example, Value};

/// The column holding each sample's key.
pub const KEY_COLUMN: &str = "__key__";

/// The column of an extension: the extension, its dots as `_` (`seg.png`
/// is `seg_png`), since Lance reads a dot in a column name as a struct path.
pub fn extension_column(ext: &str) -> String {
    ext.replace('.', "_")
}

/// The feature an extension's members are read as by default.
pub fn extension_feature(ext: &str) -> Feature {
    let last = ext.rsplit('.').next().unwrap_or(ext).to_ascii_lowercase();
    match last.as_str() {
        e if IMAGE_EXTENSIONS.contains(&e) => Feature::image(),
        "cls" | "cls2" | "index" | "inx" | "id" => Feature::value(Dtype::Int64),
        "txt" | "text" | "transcript" | "json" | "jsn" => Feature::value(Dtype::String),
        _ => Feature::value(Dtype::Binary),
    }
}

/// A member name as (key, extension), as `webdataset` splits it.
fn key_and_ext(name: &str) -> Option<(&str, &str)> {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    if name[base..].starts_with('.') {
        return None;
    }
    let dot = base + name[base..].find('.')?;
    Some((&name[..dot], &name[dot + 1..]))
}

fn is_tar(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase());
    n.is_some_and(|n| n.ends_with(".tar") || n.ends_with(".tar.gz") || n.ends_with(".tgz"))
}

fn tars_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("list", dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_tar(p))
        .collect();
    out.sort();
    Ok(out)
}

/// One sample: its key and its members (extension, bytes), in tar order.
type Sample = (String, Vec<(String, Vec<u8>)>);

/// Calls `f` with each sample of the tar at `path`; member contents are
/// read only when `contents` (else empty).
fn for_each_sample(
    path: &Path,
    contents: bool,
    mut f: impl FnMut(Sample) -> Result<()>,
) -> Result<()> {
    let file = BufReader::with_capacity(1 << 20, open_file(path)?);
    let plain = path
        .to_string_lossy()
        .to_ascii_lowercase()
        .ends_with(".tar");
    let reader: Box<dyn Read> = if plain {
        Box::new(file)
    } else {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    };
    let bad = |e: std::io::Error| Error::input(path, None, format!("not a readable tar: {e}"));
    let mut archive = tar::Archive::new(reader);
    let mut current: Option<Sample> = None;
    for entry in archive.entries().map_err(bad)? {
        let mut e = entry.map_err(bad)?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let Some((key, ext)) = key_and_ext(&name) else {
            continue;
        };
        let (key, ext) = (key.to_string(), ext.to_string());
        let mut bytes = Vec::new();
        if contents {
            e.read_to_end(&mut bytes).map_err(bad)?;
        }
        match &mut current {
            Some((k, members)) if *k == key => {
                if members.iter().any(|(x, _)| *x == ext) {
                    return Err(Error::input(
                        path,
                        None,
                        format!("sample '{key}' has two '.{ext}' members"),
                    ));
                }
                members.push((ext, bytes));
            }
            _ => {
                if let Some(done) = current.take() {
                    f(done)?;
                }
                current = Some((key, vec![(ext, bytes)]));
            }
        }
    }
    match current {
        Some(done) => f(done),
        None => Ok(()),
    }
}

#[derive(Debug, Clone)]
struct Split {
    name: String,
    /// Tars, relative to the root.
    tars: Vec<PathBuf>,
    rows: u64,
}

/// WebDataset tars as a dataset builder.
#[derive(Debug, Clone)]
pub struct WebDataset {
    root: PathBuf,
    name: String,
    splits: Vec<Split>,
    features: Features,
}

impl WebDataset {
    /// Scans the tar or directory at `path` (headers only) and types its
    /// columns: `features` when given, else by extension
    /// ([`extension_feature`]).
    ///
    /// # Errors
    /// [`Error::Io`] naming a missing or unreadable file; [`Error::Input`]
    /// naming a tar that is not one, a sample with a repeated extension, a
    /// directory with no tar, or an extension the given features lack.
    pub fn open(path: &Path, features: Option<Features>) -> Result<WebDataset> {
        let (root, found) = if path.is_dir() {
            let mut found: Vec<(String, Vec<PathBuf>)> = SPLIT_FOLDERS
                .iter()
                .filter(|s| path.join(s).is_dir())
                .map(|s| Ok((s.to_string(), tars_in(&path.join(s))?)))
                .collect::<Result<_>>()?;
            if found.is_empty() {
                found.push(("train".into(), tars_in(path)?));
            }
            (path.to_path_buf(), found)
        } else {
            let parent = path.parent().unwrap_or(Path::new(".")).to_path_buf();
            (parent, vec![("train".into(), vec![path.to_path_buf()])])
        };
        let mut exts = BTreeSet::new();
        let mut splits = Vec::new();
        for (name, tars) in found {
            if tars.is_empty() {
                return Err(Error::input(
                    root.join(&name),
                    None,
                    "holds no .tar, .tar.gz or .tgz file",
                ));
            }
            let mut rows = 0u64;
            for t in &tars {
                for_each_sample(t, false, |(_, members)| {
                    rows += 1;
                    exts.extend(members.into_iter().map(|(x, _)| x));
                    Ok(())
                })?;
            }
            let tars = tars
                .into_iter()
                .map(|t| t.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(t))
                .collect();
            splits.push(Split { name, tars, rows });
        }
        let features = match features {
            Some(f) => {
                if let Some(x) = exts
                    .iter()
                    .map(|x| extension_column(x))
                    .find(|x| f.get(x).is_none())
                {
                    return Err(Error::input(
                        path,
                        None,
                        format!(
                            "the given features have no column '{x}' for these members; add it"
                        ),
                    ));
                }
                f
            }
            None => {
                let mut f = Features::new().with(KEY_COLUMN, Feature::value(Dtype::String));
                for x in &exts {
                    f.insert(extension_column(x), extension_feature(x));
                }
                f
            }
        };
        Ok(WebDataset {
            name: builder_name(path),
            root,
            splits,
            features,
        })
    }

    /// Sets the builder name (default: the file or directory stem).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The features.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The splits and their sample counts.
    pub fn split_rows(&self) -> Vec<(String, u64)> {
        self.splits
            .iter()
            .map(|s| (s.name.clone(), s.rows))
            .collect()
    }

    fn split(&self, name: &str) -> Result<&Split> {
        self.splits
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no split '{name}'")))
    }

    /// One sample as an example of the features' columns.
    fn example(&self, tar: &Path, (key, members): Sample) -> Result<(String, Example)> {
        let mut members: std::collections::HashMap<String, Vec<u8>> = members
            .into_iter()
            .map(|(x, b)| (extension_column(&x), b))
            .collect();
        let mut ex = Example::with_capacity(self.features.len());
        for (ext, feature) in self.features.iter() {
            if ext == KEY_COLUMN {
                ex = ex.with(KEY_COLUMN, key.clone());
                continue;
            }
            let Some(bytes) = members.remove(ext) else {
                ex = ex.with(ext.to_string(), Value::Null);
                continue;
            };
            let bad = |why: String| Error::input(tar, None, format!("'{key}.{ext}': {why}"));
            let text =
                |b: Vec<u8>| String::from_utf8(b).map_err(|_| bad("is not UTF-8 text".into()));
            let v: Value = match feature {
                Feature::Image(_) => {
                    probe(&bytes).map_err(|e| bad(e.to_string()))?;
                    Value::Bytes(bytes.into())
                }
                Feature::Value(Dtype::String) => Value::Str(text(bytes)?),
                Feature::Value(Dtype::Binary) => Value::Bytes(bytes.into()),
                Feature::Value(Dtype::Bool) => match text(bytes)?.trim() {
                    "1" | "true" | "True" => Value::Bool(true),
                    "0" | "false" | "False" => Value::Bool(false),
                    t => return Err(bad(format!("'{t}' is not a boolean"))),
                },
                Feature::Value(Dtype::Float16 | Dtype::Float32 | Dtype::Float64) => {
                    let t = text(bytes)?;
                    Value::Float(
                        t.trim()
                            .parse()
                            .map_err(|_| bad(format!("'{t}' is not a number")))?,
                    )
                }
                Feature::Value(_) | Feature::ClassLabel(_) => {
                    let t = text(bytes)?;
                    match t.trim().parse::<i64>() {
                        Ok(i) => Value::Int(i),
                        Err(_) if matches!(feature, Feature::ClassLabel(_)) => {
                            Value::Str(t.trim().to_string())
                        }
                        Err(_) => return Err(bad(format!("'{t}' is not an integer"))),
                    }
                }
                other => {
                    return Err(bad(format!(
                        "members are read as Value, ClassLabel or Image, not {}",
                        other.class_name()
                    )))
                }
            };
            ex = ex.with(ext.to_string(), v);
        }
        if let Some(ext) = members.keys().next() {
            return Err(Error::input(
                tar,
                None,
                format!("'{key}.{ext}': no column '{ext}' in the features"),
            ));
        }
        Ok((key, ex))
    }
}

impl DatasetBuilder for WebDataset {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new(
            "webdataset",
            "WebDataset tar shards",
        )]
    }
    fn info(&self, _config: &str) -> std::result::Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(self.features.clone()))
    }
    fn splits(&self, _config: &str) -> std::result::Result<Vec<String>, BoxError> {
        Ok(self.splits.iter().map(|s| s.name.clone()).collect())
    }
    /// One unit per tar, generated in parallel, written in tar order.
    fn work_units(&self, _c: &str, split: &str) -> std::result::Result<Vec<WorkUnit>, BoxError> {
        Ok(self
            .split(split)?
            .tars
            .iter()
            .map(|t| WorkUnit::new(t.to_string_lossy()))
            .collect())
    }
    /// The tars themselves: a changed tar is a rebuild.
    fn sources(&self, _c: &str, split: &str) -> std::result::Result<Option<Sources>, BoxError> {
        Ok(Some(Sources::new(
            &self.root,
            self.split(split)?.tars.clone(),
        )))
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        _split: &'a str,
        unit: &'a WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError> {
        // Read on a thread of its own, a few samples ahead: a tar is
        // streamed, never held in memory whole.
        let tar = self.root.join(&unit.id);
        let this = self.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(String, Example)>>(16);
        std::thread::Builder::new()
            .name("shardset-webdataset".into())
            .spawn(move || {
                let read = for_each_sample(&tar, true, |s| {
                    tx.send(this.example(&tar, s))
                        .map_err(|_| Error::InvalidArgument("the build stopped".into()))
                });
                if let Err(e) = read {
                    let _ = tx.send(Err(e));
                }
            })
            .map_err(|e| Error::io("start a reader thread for", &self.root, e))?;
        Ok(Box::new(rx.into_iter().map(|r| r.map_err(BoxError::from))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_extensions_split_as_webdataset_splits_them() {
        assert_eq!(key_and_ext("a/b/x01.seg.png"), Some(("a/b/x01", "seg.png")));
        assert_eq!(key_and_ext("x.jpg"), Some(("x", "jpg")));
        assert_eq!(key_and_ext("a.b/x"), None);
        assert_eq!(key_and_ext("d/.hidden.txt"), None);
        assert_eq!(extension_feature("seg.PNG"), Feature::image());
        assert_eq!(extension_feature("cls"), Feature::value(Dtype::Int64));
        assert_eq!(extension_feature("npy"), Feature::value(Dtype::Binary));
    }
}
