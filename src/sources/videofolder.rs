//! A video folder as a dataset: `DIR/<class>/<video>` (one `train` split) or
//! `DIR/<split>/<class>/<video>`, like [`super::ImageFolder`]. Columns:
//! `video` (a `Video` feature with the chosen storage: `path` stages the
//! file into the cache, `bytes` inlines it) and `label` (the sorted class
//! folder names). For `frames` storage the command line hands the same
//! examples to the `lance-video-frames` writer instead ([`VideoFolder::examples`]).

use std::path::Path;

use super::builder_name;
use super::imagefolder::{scan_folder, Scan};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources, WorkUnit};
use crate::error::{BoxError, Result};
use crate::features::{Feature, Features, VideoStorage};
use crate::value::{Example, Value};

/// File extensions taken as videos (the reference's default allow-list).
pub const VIDEO_EXTENSIONS: [&str; 5] = ["mp4", "avi", "mov", "webm", "mkv"];

fn is_video_name(name: &str) -> bool {
    Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| VIDEO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// A scanned video folder.
#[derive(Debug, Clone)]
pub struct VideoFolder {
    scan: Scan,
    name: String,
    storage: VideoStorage,
}

impl VideoFolder {
    /// Scans `dir`.
    ///
    /// # Errors
    /// As [`super::ImageFolder::open`], for videos.
    pub fn open(dir: &Path, storage: VideoStorage) -> Result<Self> {
        Ok(VideoFolder {
            scan: scan_folder(dir, is_video_name, "video", &VIDEO_EXTENSIONS)?,
            name: builder_name(dir),
            storage,
        })
    }

    /// Sets the builder name (default: the folder's name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The class names, sorted.
    pub fn classes(&self) -> &[String] {
        &self.scan.classes
    }

    /// The split names found.
    pub fn split_names(&self) -> Vec<String> {
        self.scan.split_names()
    }

    /// Number of videos of a split.
    pub fn num_videos(&self, split: &str) -> u64 {
        self.scan.num_files(split)
    }

    /// The features: `video` (Video with the storage) and `label` (ClassLabel).
    pub fn features(&self) -> Features {
        Features::new()
            .with("video", Feature::video(self.storage))
            .with(
                "label",
                Feature::class_label(&self.scan.classes).expect("classes are non-empty and unique"),
            )
    }

    fn example(&self, rel: &Path, label: usize) -> Example {
        Example::with_capacity(2)
            .with("video", Value::Path(self.scan.root.join(rel)))
            .with("label", label as i64)
    }

    /// `(key, example)` of every video of a split, class by class: the key is
    /// the path relative to the folder, the video its absolute path.
    pub fn examples(&self, split: &str) -> Vec<(String, Example)> {
        let Some(files) = self.scan.split_files(split) else {
            return Vec::new();
        };
        files
            .iter()
            .enumerate()
            .flat_map(|(label, fs)| {
                fs.iter()
                    .map(move |rel| (rel.to_string_lossy().into_owned(), self.example(rel, label)))
            })
            .collect()
    }
}

impl DatasetBuilder for VideoFolder {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config per storage, so the three kinds of cache do not collide.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new(
            format!("videofolder-{}", self.storage.as_str()),
            "a video folder",
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
            Ok((rel.to_string_lossy().into_owned(), self.example(rel, label)))
        })))
    }
}
