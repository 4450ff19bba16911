//! `shardset build imagefolder|jsonl|csv`: a cache from files, through the
//! library's ready-made builders (`shardset::sources`) and `load`, so the
//! cache is named, locked, published, resumed and kept fresh exactly as a
//! library build is. Here the arguments and each source's set-up; the
//! features of a file build (`features`) and the building of the splits
//! with their summary (`splits`) have modules of their own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::{json, Map, Value as J};
use shardset::sources::{
    open_input, CsvFile, ImageCheck, ImageFolder, InputKind, JsonLines, VideoFolder,
};
use shardset::{Compression, Features, Layout};

use crate::fmt::{CliError, CliResult};

mod features;
mod splits;

use features::{file_features, reuse_features};
use splits::{build_splits, load_options};

/// Options shared by every source.
#[derive(Args, Debug, Clone)]
pub struct BuildOpts {
    /// Write the caches to DIR/<split> instead of the cache root
    /// ($STABLE_DATASETS_CACHE_DIR or ~/.stable-datasets, reference naming).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The dataset (builder) name in cache names (default: the input's name).
    #[arg(long)]
    pub name: Option<String>,
    /// arrow (Arrow IPC shards) or lance (a Lance dataset).
    #[arg(long, value_enum, default_value_t = Layout::Arrow)]
    pub format: Layout,
    /// Shard byte budget, e.g. 256MB (arrow only; default 256 MiB, the
    /// library's `DEFAULT_SHARD_SIZE_BYTES`).
    #[arg(long, value_name = "SIZE")]
    pub shard_size: Option<String>,
    /// Compression: arrow: of the IPC buffers (default none); lance: asked
    /// of Lance for every column (default: Lance's choice per block).
    #[arg(long, value_enum)]
    pub compression: Option<Compression>,
    /// The zstd level: 1 to 22 for lance; arrow shards are compressed by
    /// arrow-rs at level 3 only.
    #[arg(long, requires = "compression")]
    pub compression_level: Option<i32>,
    /// Keep one checksum per row (arrow), so `verify` names damaged rows
    /// and `cat --verify-on-read` checks every row it reads.
    #[arg(long)]
    pub record_checksums: bool,
    /// Store each binary cell (image, array, bytes) of at least SIZE (e.g.
    /// 4KB) once, later repeats as refs to it (arrow). A cache where
    /// something repeated needs shardset to read it.
    #[arg(long, value_name = "SIZE")]
    pub dedup: Option<String>,
    /// Threads for reading and encoding (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Examples per record batch (default 128 for images, 1000 otherwise).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Build even if an up-to-date cache exists.
    #[arg(long)]
    pub rebuild: bool,
    /// No progress and no summary (errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Where a build reads from.
#[derive(Subcommand, Debug)]
pub enum BuildSource {
    /// DIR/<class>/<image>, or DIR/{train,validation,test}/<class>/<image>:
    /// columns `image` (bytes as stored) and `label` (sorted class folder names).
    Imagefolder {
        /// The folder.
        dir: PathBuf,
        /// Decode every image completely while building (default: check headers).
        #[arg(long)]
        decode_check: bool,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// A JSON lines file: one object per line, one `train` split.
    Jsonl {
        /// The file.
        file: PathBuf,
        /// The features as JSON (see README); default: inferred from the data.
        #[arg(long, value_name = "FILE")]
        features: Option<PathBuf>,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// Parquet files (a file, or a directory of `*.parquet` read in name
    /// order), one `train` split: converted into any layout (`--format`).
    Parquet {
        /// The file or directory.
        path: PathBuf,
        /// The features as JSON (see README); default: Hugging Face's in the
        /// files' metadata, else the Arrow types'.
        #[arg(long, value_name = "FILE")]
        features: Option<PathBuf>,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// A Hugging Face `datasets` directory written by `save_to_disk`: each
    /// split of a DatasetDict (a Dataset: its own split, or `train`),
    /// converted into any layout (`--format`).
    Hf {
        /// The directory.
        path: PathBuf,
        /// The features as JSON (see README); default: those in the
        /// directory's dataset_info.json.
        #[arg(long, value_name = "FILE")]
        features: Option<PathBuf>,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// WebDataset tar shards: a `.tar`/`.tar.gz`/`.tgz` file or a directory
    /// of them (one `train` split), or with `train/`, `validation/`,
    /// `test/` subdirectories of them. A column per member extension,
    /// typed by extension, and `__key__`.
    Webdataset {
        /// The tar file or directory.
        path: PathBuf,
        /// The features as JSON (see README); default: by extension
        /// (images, `cls` as int64, `txt`/`json` as strings, else binary).
        #[arg(long, value_name = "FILE")]
        features: Option<PathBuf>,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// A CSV file with a header row, one `train` split.
    Csv {
        /// The file.
        file: PathBuf,
        /// The features as JSON (see README); default: inferred from the data.
        #[arg(long, value_name = "FILE")]
        features: Option<PathBuf>,
        /// Field delimiter (default: tab for .tsv, else comma).
        #[arg(long)]
        delimiter: Option<char>,
        #[command(flatten)]
        opts: BuildOpts,
    },
    /// DIR/<class>/<video>, or DIR/{train,validation,test}/<class>/<video>:
    /// columns `video` and `label`. `--storage path` stages the files into
    /// the cache, `bytes` inlines them, `frames` decodes every frame to WebP
    /// (a lance-video-frames cache), `segments` encodes closed segments of
    /// frames with a video codec (a lance-video-segments cache: ours, far
    /// smaller; the reference does not read it).
    Videofolder {
        /// The folder.
        dir: PathBuf,
        /// path, bytes, frames or segments.
        #[arg(long, default_value = "path")]
        storage: String,
        /// segments: h264 (libx264) or av1 (SVT-AV1).
        #[arg(long, value_enum, default_value_t = shardset::video::segment::SegmentCodec::H264)]
        codec: shardset::video::segment::SegmentCodec,
        /// segments: constant rate factor (default: the codec's, 26 for h264
        /// and 43 for av1, chosen to match the PSNR of WebP quality 65 on
        /// recorded video; content WebP handles worse, such as synthetic
        /// frames, keeps that PSNR at a higher CRF; `inspect` shows the PSNR
        /// a build measured).
        #[arg(long)]
        crf: Option<u32>,
        /// segments: the encoder's speed preset (default medium for h264, 8 for av1).
        #[arg(long)]
        preset: Option<String>,
        /// segments: the encoder's tuning (x264 --tune names such as psnr;
        /// SVT-AV1 0 or 1; default: x264's own, SVT-AV1 1).
        #[arg(long)]
        tune: Option<String>,
        /// segments: more of the encoder's own parameters, key=value joined
        /// by ':' as FFmpeg's x264-params / svtav1-params take them (such as
        /// hierarchical-levels=5 for SVT-AV1 mini-GOPs of 32); keys the
        /// layout sets itself (keyint, scene cuts, crf, preset, threads,
        /// pixel format) are refused.
        #[arg(long)]
        encoder_params: Option<String>,
        /// segments: frames per segment (a closed group of pictures).
        #[arg(long = "frames-per-segment", alias = "segment-frames", default_value_t = shardset::video::segment::DEFAULT_FRAMES_PER_SEGMENT)]
        segment_frames: u32,
        /// frames: WebP quality 0-100.
        #[arg(long = "webp-quality", alias = "quality", default_value_t = 65.0)]
        quality: f32,
        /// frames: WebP method 0 (fastest) - 6 (smallest).
        #[arg(long = "webp-method", alias = "method", default_value_t = 4)]
        method: u8,
        /// frames: what the WebP encoder is given: rgb (as the reference's
        /// OpenCV encoder: the same quality gives the same size) or yuv (the
        /// decoder's planes: faster, keeps chroma detail, larger on noisy video).
        #[arg(long, value_enum, default_value_t = shardset::WebpInput::Rgb)]
        webp_input: shardset::WebpInput,
        /// frames: resize bound in pixels.
        #[arg(long)]
        resize: Option<u32>,
        /// frames: square (the reference's rule) or shorter-side (keeps the aspect ratio).
        #[arg(long, value_enum, default_value_t = shardset::ResizeMode::Square)]
        resize_mode: shardset::ResizeMode,
        /// frames: fail on an unreadable video instead of skipping it.
        #[arg(long)]
        strict: bool,
        /// frames: memory for encoded frames of videos that finished ahead
        /// of their turn to be written (e.g. 128MB).
        #[arg(long, default_value = "128MB")]
        buffer: String,
        /// frames, segments: frames between checkpoints of the build (at a
        /// video boundary); a killed build resumes from its last one.
        #[arg(long, default_value_t = 65536)]
        checkpoint_frames: u64,
        #[command(flatten)]
        opts: BuildOpts,
    },
}

/// Build a cache from an image folder, a JSON lines file or a CSV file.
#[derive(Args, Debug)]
pub struct BuildArgs {
    #[command(subcommand)]
    pub source: BuildSource,
}

/// Runs `shardset build`.
pub fn run(args: BuildArgs) -> CliResult {
    match args.source {
        BuildSource::Imagefolder {
            dir,
            decode_check,
            opts,
        } => {
            // Sources are recorded by absolute path, so a build from another
            // working directory finds the same cache fresh.
            let abs = match std::fs::canonicalize(&dir) {
                Ok(p) => p,
                Err(_) => {
                    ImageFolder::open(&dir)?;
                    dir.clone()
                }
            };
            let mut folder = ImageFolder::open(&abs)?.with_check(if decode_check {
                ImageCheck::Decode
            } else {
                ImageCheck::Header
            });
            if let Some(n) = &opts.name {
                folder = folder.with_name(n);
            }
            let splits: Vec<(String, Option<u64>)> = folder
                .split_names()
                .into_iter()
                .map(|s| {
                    let n = folder.num_images(&s);
                    (s, Some(n))
                })
                .collect();
            build_splits(
                &folder,
                "imagefolder",
                &splits,
                &opts,
                128,
                &|| Ok(None),
                None,
            )
        }
        BuildSource::Jsonl {
            file,
            features,
            opts,
        } => {
            let file = canonical(&file)?;
            let named = |b: JsonLines| match &opts.name {
                Some(n) => b.with_name(n),
                None => b,
            };
            let lopts = load_options(&opts, Arc::default(), 1000, None)?;
            let (features, rows) = file_features(
                features,
                || reuse_features(&named(JsonLines::new(&file, Features::new())), &lopts),
                &file,
                &opts,
                || JsonLines::infer(&file),
            )?;
            let b = named(JsonLines::new(&file, features));
            let f2 = file.clone();
            build_splits(
                &b,
                "jsonl",
                &[("train".into(), rows)],
                &opts,
                1000,
                &move || Ok(Some(JsonLines::count_rows(&f2)?)),
                None,
            )
        }
        BuildSource::Parquet {
            path,
            features,
            opts,
        } => build_input(InputKind::Parquet, &path, features, &opts),
        BuildSource::Hf {
            path,
            features,
            opts,
        } => build_input(InputKind::HuggingFace, &path, features, &opts),
        BuildSource::Webdataset {
            path,
            features,
            opts,
        } => build_input(InputKind::WebDataset, &path, features, &opts),
        BuildSource::Csv {
            file,
            features,
            delimiter,
            opts,
        } => {
            let file = canonical(&file)?;
            let delim = match delimiter {
                Some(c) if c.is_ascii() => c as u8,
                Some(c) => {
                    return Err(CliError::Usage(format!(
                        "--delimiter must be one ASCII character, got '{c}'"
                    )))
                }
                None => shardset::sources::csv::default_delimiter(&file),
            };
            let named = |b: CsvFile| {
                let b = b.with_delimiter(delim);
                match &opts.name {
                    Some(n) => b.with_name(n),
                    None => b,
                }
            };
            let lopts = load_options(&opts, Arc::default(), 1000, None)?;
            let (features, rows) = file_features(
                features,
                || reuse_features(&named(CsvFile::new(&file, Features::new())), &lopts),
                &file,
                &opts,
                || CsvFile::infer(&file, delim),
            )?;
            let b = named(CsvFile::new(&file, features));
            let f2 = file.clone();
            build_splits(
                &b,
                "csv",
                &[("train".into(), rows)],
                &opts,
                1000,
                &move || Ok(Some(CsvFile::count_rows(&f2, delim)?)),
                None,
            )
        }
        BuildSource::Videofolder {
            dir,
            storage,
            codec,
            crf,
            preset,
            tune,
            encoder_params,
            segment_frames,
            quality,
            method,
            webp_input,
            resize,
            resize_mode,
            strict,
            buffer,
            checkpoint_frames,
            opts,
        } => {
            let storage = match shardset::VideoStorage::parse(&storage) {
                Some(s) => s,
                None => {
                    return Err(CliError::Usage(format!(
                        "--storage must be path, bytes, frames or segments, got '{storage}'"
                    )))
                }
            };
            let abs = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            let mut folder = VideoFolder::open(&abs, storage)?;
            if let Some(n) = &opts.name {
                folder = folder.with_name(n);
            }
            let splits: Vec<(String, Option<u64>)> = folder
                .split_names()
                .into_iter()
                .map(|s| {
                    let n = folder.num_videos(&s);
                    (s, Some(n))
                })
                .collect();
            if !storage.is_layout() {
                return build_splits(
                    &folder,
                    "videofolder",
                    &splits,
                    &opts,
                    16,
                    &|| Ok(None),
                    None,
                );
            }
            let mut segments = Map::new();
            segments.insert("codec".into(), json!(codec.name()));
            segments.insert("frames_per_segment".into(), json!(segment_frames));
            let mut put = |k: &str, v: Option<J>| {
                if let Some(v) = v {
                    segments.insert(k.into(), v);
                }
            };
            put("crf", crf.map(J::from));
            put("preset", preset.map(J::from));
            put("tune", tune.map(J::from));
            put("encoder_params", encoder_params.map(J::from));
            let mut video = Map::new();
            video.insert("webp_quality".into(), json!(quality));
            video.insert("webp_method".into(), json!(method));
            video.insert("webp_input".into(), json!(webp_input.name()));
            if let Some(r) = resize {
                video.insert("resize".into(), json!(r));
            }
            video.insert("resize_mode".into(), json!(resize_mode.name()));
            video.insert("skip_corrupt".into(), json!(!strict));
            video.insert("buffer".into(), json!(buffer));
            video.insert("checkpoint_frames".into(), json!(checkpoint_frames));
            video.insert("segments".into(), J::Object(segments));
            // One lance-video-frames cache per split, through `load` like
            // every layout: reference naming (config `videofolder-frames`,
            // format `lance-video-frames`) or `--out DIR/<split>`, kept while
            // its recorded input files are unchanged, resumed when killed.
            build_splits(
                &folder,
                "videofolder",
                &splits,
                &opts,
                16,
                &|| Ok(None),
                Some(video),
            )
        }
    }
}

/// The absolute path of an existing input, or an error naming it.
fn canonical(p: &Path) -> CliResult<PathBuf> {
    std::fs::canonicalize(p).map_err(|e| {
        shardset::Error::Io {
            op: "open",
            path: p.to_path_buf(),
            source: e,
        }
        .into()
    })
}

/// Data another tool wrote (Parquet, a Hugging Face directory, WebDataset
/// tars), each of its splits converted.
fn build_input(
    kind: InputKind,
    path: &std::path::Path,
    features: Option<PathBuf>,
    opts: &BuildOpts,
) -> CliResult {
    let features = features
        .map(|f| shardset::features::describe::read_features_file(&f))
        .transpose()?;
    let input = open_input(kind, &canonical(path)?, features, opts.name.as_deref())?;
    let splits: Vec<(String, Option<u64>)> = input
        .splits
        .into_iter()
        .map(|(s, n)| (s, Some(n)))
        .collect();
    let config = input.builder.configs()[0].name.clone();
    build_splits(
        input.builder.as_ref(),
        &config,
        &splits,
        opts,
        1000,
        &|| Ok(None),
        None,
    )
}
