//! An image folder as a dataset: `DIR/<class>/<image>` (one `train` split),
//! or `DIR/<split>/<class>/<image>` with `split` among `train`,
//! `validation`, `test`. Columns: `image` (the file's bytes, kept as they
//! are) and `label` (a `ClassLabel` of the sorted class folder names, the
//! union over splits). Files are taken in name order, recursively inside a
//! class folder; hidden files and files whose extension is not an image's
//! are skipped. One work unit per class, generated in parallel.

use std::path::{Path, PathBuf};

use super::builder_name;
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources, WorkUnit};
use crate::error::{BoxError, Error, Result};
use crate::features::image::{decode, probe};
use crate::features::{Feature, Features};
use crate::value::Example;

/// Split folder names recognised, in the order the splits are listed.
pub const SPLIT_FOLDERS: [&str; 3] = ["train", "validation", "test"];

/// File extensions taken as images (lowercase, without the dot).
pub const IMAGE_EXTENSIONS: [&str; 9] = [
    "png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "jfif",
];

/// How thoroughly each image is checked while building.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageCheck {
    /// Magic bytes, and the full header of PNG and JPEG files (default).
    #[default]
    Header,
    /// Also decode every image completely (catches truncated pixel data).
    Decode,
}

/// A scanned image folder.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    scan: Scan,
    name: String,
    check: ImageCheck,
}

fn list_dir(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let e = e.map_err(|e| Error::io("read directory", dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        // Follows symlinks, as a user linking class folders in expects.
        let is_dir = std::fs::metadata(e.path())
            .map(|m| m.is_dir())
            .unwrap_or(false);
        out.push((name, e.path(), is_dir));
    }
    out.sort();
    Ok(out)
}

fn is_image_name(name: &str) -> bool {
    Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

fn collect_files(
    dir: &Path,
    root: &Path,
    keep: fn(&str) -> bool,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    for (name, path, is_dir) in list_dir(dir)? {
        if is_dir {
            collect_files(&path, root, keep, out)?;
        } else if keep(&name) {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

/// Class folders of one split: (class name, files relative to the root).
type ClassFiles = Vec<(String, Vec<PathBuf>)>;

/// Class folders of one split directory: (class name, files relative to `root`).
fn scan_classes(split_dir: &Path, root: &Path, keep: fn(&str) -> bool) -> Result<ClassFiles> {
    let mut out = Vec::new();
    for (name, path, is_dir) in list_dir(split_dir)? {
        if is_dir {
            let mut files = Vec::new();
            collect_files(&path, root, keep, &mut files)?;
            out.push((name, files));
        }
    }
    Ok(out)
}

/// A scanned media folder: sorted class names and, per split, per class, its files.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub root: PathBuf,
    pub classes: Vec<String>,
    pub splits: Vec<(String, Vec<Vec<PathBuf>>)>,
}

impl Scan {
    /// The split names found.
    pub fn split_names(&self) -> Vec<String> {
        self.splits.iter().map(|(s, _)| s.clone()).collect()
    }

    /// Per class, the files of a split (relative to the root).
    pub fn split_files(&self, split: &str) -> Option<&Vec<Vec<PathBuf>>> {
        self.splits.iter().find(|(s, _)| s == split).map(|(_, f)| f)
    }

    /// Number of files of a split (0 for an unknown split).
    pub fn num_files(&self, split: &str) -> u64 {
        self.split_files(split)
            .map_or(0, |f| f.iter().map(|c| c.len() as u64).sum())
    }

    /// One work unit per class.
    pub fn work_units(&self) -> Vec<WorkUnit> {
        self.classes.iter().map(WorkUnit::new).collect()
    }

    /// The split's files, as the build's sources.
    pub fn sources(&self, split: &str) -> Sources {
        let files = self.split_files(split).cloned().unwrap_or_default();
        Sources::new(self.root.clone(), files.into_iter().flatten())
    }

    /// The label of a work unit and its files in a split.
    pub fn unit_files(
        &self,
        split: &str,
        unit: &WorkUnit,
    ) -> std::result::Result<(usize, &[PathBuf]), BoxError> {
        let label = self
            .classes
            .iter()
            .position(|c| *c == unit.id)
            .ok_or_else(|| format!("unknown class '{}'", unit.id))?;
        let files = self
            .split_files(split)
            .and_then(|f| f.get(label))
            .ok_or_else(|| format!("unknown split '{split}'"))?;
        Ok((label, files))
    }
}

/// Scans `DIR/<class>/<file>` or `DIR/<split>/<class>/<file>` keeping files
/// whose name `keep` accepts (`what` names them in errors: "image", "video").
pub(crate) fn scan_folder(
    dir: &Path,
    keep: fn(&str) -> bool,
    what: &str,
    extensions: &[&str],
) -> Result<Scan> {
    let meta = std::fs::metadata(dir).map_err(|e| {
        Error::io(
            if what == "image" {
                "open image folder"
            } else {
                "open video folder"
            },
            dir,
            e,
        )
    })?;
    if !meta.is_dir() {
        return Err(Error::input(dir, None, "not a directory"));
    }
    let top = list_dir(dir)?;
    let subdirs: Vec<&String> = top.iter().filter(|t| t.2).map(|t| &t.0).collect();
    let has_splits = subdirs.iter().any(|d| SPLIT_FOLDERS.contains(&d.as_str()));
    let mut per_split: Vec<(String, ClassFiles)> = Vec::new();
    if has_splits {
        if let Some(other) = subdirs
            .iter()
            .find(|d| !SPLIT_FOLDERS.contains(&d.as_str()))
        {
            return Err(Error::input(
                dir,
                None,
                format!(
                    "has split folders ({}) and also '{other}', which is not a split name; \
                     split folders must be named {}",
                    subdirs
                        .iter()
                        .filter(|d| SPLIT_FOLDERS.contains(&d.as_str()))
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    SPLIT_FOLDERS.join(", ")
                ),
            ));
        }
        for s in SPLIT_FOLDERS {
            if subdirs.iter().any(|d| d.as_str() == s) {
                per_split.push((s.to_string(), scan_classes(&dir.join(s), dir, keep)?));
            }
        }
    } else {
        per_split.push(("train".to_string(), scan_classes(dir, dir, keep)?));
    }
    let mut classes: Vec<String> = per_split
        .iter()
        .flat_map(|(_, cs)| cs.iter().map(|(c, _)| c.clone()))
        .collect();
    classes.sort();
    classes.dedup();
    if classes.is_empty() {
        return Err(Error::input(
            dir,
            None,
            format!(
                "no class folders: expected DIR/<class>/<{what}> or DIR/<split>/<class>/<{what}>"
            ),
        ));
    }
    for c in &classes {
        let n: usize = per_split
            .iter()
            .flat_map(|(_, cs)| cs.iter().filter(|(n, _)| n == c).map(|(_, f)| f.len()))
            .sum();
        if n == 0 {
            return Err(Error::input(
                dir,
                None,
                format!(
                    "class folder '{c}' holds no {what} (extensions: {})",
                    extensions.join(", ")
                ),
            ));
        }
    }
    let splits = per_split
        .into_iter()
        .map(|(s, cs)| {
            let files: Vec<Vec<PathBuf>> = classes
                .iter()
                .map(|c| {
                    cs.iter()
                        .find(|(n, _)| n == c)
                        .map(|(_, f)| f.clone())
                        .unwrap_or_default()
                })
                .collect();
            (s, files)
        })
        .collect::<Vec<_>>();
    for (s, files) in &splits {
        if files.iter().all(Vec::is_empty) {
            return Err(Error::input(
                dir.join(s),
                None,
                format!("this split holds no {what}"),
            ));
        }
    }
    Ok(Scan {
        root: dir.to_path_buf(),
        classes,
        splits,
    })
}

impl ImageFolder {
    /// Scans `dir`.
    ///
    /// # Errors
    /// [`Error::Io`] for a missing or unreadable folder; [`Error::Input`]
    /// naming the folder when it is not a directory, has no class folder or
    /// no image, mixes split folders with other folders, or when a split or
    /// a class holds no image.
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(ImageFolder {
            scan: scan_folder(dir, is_image_name, "image", &IMAGE_EXTENSIONS)?,
            name: builder_name(dir),
            check: ImageCheck::default(),
        })
    }

    /// Sets the builder name (default: the folder's name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets how images are checked.
    pub fn with_check(mut self, check: ImageCheck) -> Self {
        self.check = check;
        self
    }

    /// The class names, sorted (label ids are positions).
    pub fn classes(&self) -> &[String] {
        &self.scan.classes
    }

    /// The split names found.
    pub fn split_names(&self) -> Vec<String> {
        self.scan.split_names()
    }

    /// Number of images of a split (0 for an unknown split).
    pub fn num_images(&self, split: &str) -> u64 {
        self.scan.num_files(split)
    }

    /// The features: `image` (Image) and `label` (ClassLabel).
    pub fn features(&self) -> Features {
        Features::new().with("image", Feature::image()).with(
            "label",
            Feature::class_label(&self.scan.classes).expect("classes are non-empty and unique"),
        )
    }

    /// Reads and checks one image file.
    fn read_image(&self, rel: &Path) -> Result<Vec<u8>> {
        let path = self.scan.root.join(rel);
        let bytes = std::fs::read(&path).map_err(|e| Error::io("read image", &path, e))?;
        let info = probe(&bytes).map_err(|e| Error::input(&path, None, e))?;
        if self.check == ImageCheck::Decode {
            decode(&bytes).map_err(|e| {
                Error::input(
                    &path,
                    None,
                    format!("damaged {}: {e}", info.container.name()),
                )
            })?;
        }
        Ok(bytes)
    }
}

impl DatasetBuilder for ImageFolder {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input, so that `data.jsonl` and
    /// `data.csv` do not share a cache.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new(
            "imagefolder",
            "an image folder",
        )]
    }
    fn info(&self, _config: &str) -> std::result::Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(self.features()))
    }
    fn splits(&self, _config: &str) -> std::result::Result<Vec<String>, BoxError> {
        Ok(self.split_names())
    }
    fn work_units(&self, _c: &str, _split: &str) -> std::result::Result<Vec<WorkUnit>, BoxError> {
        Ok(self.scan.work_units())
    }
    fn sources(&self, _c: &str, split: &str) -> std::result::Result<Option<Sources>, BoxError> {
        Ok(Some(self.scan.sources(split)))
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        split: &'a str,
        unit: &'a WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError> {
        let (label, files) = self.scan.unit_files(split, unit)?;
        Ok(Box::new(files.iter().map(move |rel| {
            let bytes = self.read_image(rel)?;
            Ok((
                rel.to_string_lossy().into_owned(),
                Example::with_capacity(2)
                    .with("image", bytes)
                    .with("label", label as i64),
            ))
        })))
    }
}
