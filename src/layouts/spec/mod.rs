//! One description of a cache write, [`WriteSpec`], and one entry point,
//! [`write_cache`], for the CLI, Python, `shardset.ray` and builders alike.
//!
//! Every caller used to turn its own arguments into the per-layout option
//! builders, and they drifted: other defaults, other names, options that one
//! caller refused for a layout and another ignored. Now a caller only names
//! a [`Layout`] and passes its options by name ([`WriteSpec::from_options`]);
//! the table [`OPTIONS`] is the one place that says which option applies to
//! which layout, an option that does not apply is an error naming it, and
//! the spec is checked whole when it is made (the conversion to the layout's
//! option builder runs then), so a bad value never reaches a build.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as J};

use crate::error::{Error, Result};
use crate::util::parse_bytes;

mod convert;
mod run;

pub use run::{write_cache, Written};

crate::util::named_enum! {
    /// The on-disk layout of a cache.
    #[derive(Default)]
    pub enum Layout("layout") {
        /// Arrow IPC shards rotated by a byte budget (the reference's `arrow`).
        #[default]
        Arrow = "arrow",
        /// A Lance dataset of rows (the reference's `lance`).
        Lance = "lance",
        /// A Lance video cache: every frame of the one video column as a WebP
        /// image, or (with the `segments` option) encoded segments.
        VideoFrames = "video-frames" | "lance-video-frames",
    }
}

impl Layout {
    /// The spelling in a builder's cache key (the reference's `arrow` and
    /// `lance`; `lance-video-frames` for video caches).
    pub fn cache_format(self) -> &'static str {
        match self {
            Layout::Arrow => "arrow",
            Layout::Lance => "lance",
            Layout::VideoFrames => "lance-video-frames",
        }
    }
}

/// A write option: its name (the Python keyword; the CLI flag is the same
/// with dashes), the layouts it applies to, and what it does.
#[derive(Debug, Clone, Copy)]
pub struct WriteOption {
    /// The option's name.
    pub name: &'static str,
    /// The layouts that take it.
    pub layouts: &'static [Layout],
    /// What it sets, and its default.
    pub help: &'static str,
}

const ROWS: &[Layout] = &[Layout::Arrow, Layout::Lance];
const ALL: &[Layout] = &[Layout::Arrow, Layout::Lance, Layout::VideoFrames];
const ARROW: &[Layout] = &[Layout::Arrow];
const VIDEO: &[Layout] = &[Layout::VideoFrames];
const FILES: &[Layout] = &[Layout::Lance, Layout::VideoFrames];
const LANCE: &[Layout] = &[Layout::Lance];

/// Every write option and the layouts it applies to: the one table.
pub const OPTIONS: &[WriteOption] = &[
    WriteOption { name: "shard_size", layouts: ARROW, help: "soft byte budget per shard, bytes or a size such as \"256MB\", or \"one\" for a single shard (default 256 MiB)" },
    WriteOption { name: "compression", layouts: ROWS, help: "none, lz4 or zstd (default none)" },
    WriteOption { name: "compression_level", layouts: ROWS, help: "zstd level (Lance 1 to 22; Arrow shards 3 only)" },
    WriteOption { name: "threads", layouts: ALL, help: "encode threads (default 0: one per core)" },
    WriteOption { name: "batch_size", layouts: ROWS, help: "examples per record batch (default 1000)" },
    WriteOption { name: "png_level", layouts: ROWS, help: "PNG level 0 to 9 for images encoded from pixels (default: fdeflate's fast mode)" },
    WriteOption { name: "build_id", layouts: ARROW, help: "the id written in each shard's footer (default: a fresh one)" },
    WriteOption { name: "record_checksums", layouts: ARROW, help: "write a row checksum sidecar per shard (default false)" },
    WriteOption { name: "dedup", layouts: ARROW, help: "store binary cells of at least this many bytes once (default off)" },
    WriteOption { name: "max_rows_per_file", layouts: FILES, help: "rows per Lance data file (default 1 Mi)" },
    WriteOption { name: "scalar_index", layouts: LANCE, help: "columns given a BTree index, so filters on them read only the rows they keep (default none)" },
    WriteOption { name: "webp_quality", layouts: VIDEO, help: "WebP quality 0 to 100 of frames (default 65)" },
    WriteOption { name: "webp_method", layouts: VIDEO, help: "WebP method 0 to 6 (default 4)" },
    WriteOption { name: "webp_input", layouts: VIDEO, help: "rgb or yuv (default rgb)" },
    WriteOption { name: "resize", layouts: VIDEO, help: "resize frames to this side (see resize_mode; default: as decoded)" },
    WriteOption { name: "resize_mode", layouts: VIDEO, help: "square or shorter_side (default square)" },
    WriteOption { name: "skip_corrupt", layouts: VIDEO, help: "skip an unreadable video instead of failing (default true)" },
    WriteOption { name: "buffer", layouts: VIDEO, help: "bytes of encoded rows held for videos behind the one written (default 128 MiB)" },
    WriteOption { name: "checkpoint_frames", layouts: VIDEO, help: "frames between resumable checkpoints (default 65536)" },
    WriteOption { name: "segments", layouts: VIDEO, help: "write encoded segments instead of WebP frames: {codec, crf, preset, tune, encoder_params, frames_per_segment}" },
];

/// A byte size: a number of bytes, or a string such as `"256MB"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// Bytes.
    Bytes(u64),
    /// `"256MB"`, `"1.5GiB"`, `"4096"`; for `shard_size`, `"one"`.
    Text(String),
}

impl Size {
    fn bytes(&self, name: &str) -> Result<u64> {
        match self {
            Size::Bytes(b) => Ok(*b),
            Size::Text(t) => parse_bytes(t).map_err(|e| option_error(name, &e)),
        }
    }
}

fn option_error(name: &str, e: &dyn std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("write option {name}: {e}"))
}

/// Options of the Arrow and Lance row layouts (see [`OPTIONS`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shard_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compression: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compression_level: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    png_level: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    build_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    record_checksums: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dedup: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rows_per_file: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scalar_index: Option<Vec<String>>,
}

/// Options of the video layout (see [`OPTIONS`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VideoSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rows_per_file: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webp_quality: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webp_method: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webp_input: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resize: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resize_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    skip_corrupt: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    buffer: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint_frames: Option<u64>,
    /// Encoded segments instead of WebP frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<SegmentSpec>,
}

/// The encoder of a segments cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentSpec {
    /// h264 (default) or av1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<String>,
    /// The encoder's constant rate factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crf: Option<u32>,
    /// The encoder's preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The encoder's tune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<String>,
    /// Extra encoder parameters (`key=value:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder_params: Option<String>,
    /// Frames per segment (closed GOP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_per_segment: Option<u32>,
}

/// How to write a cache: the layout and its options. Made by
/// [`WriteSpec::from_options`] or deserialised (`{"layout": "lance",
/// "compression": "zstd"}`); either way checked whole when made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawSpec", into = "RawSpec")]
pub enum WriteSpec {
    /// Arrow IPC shards.
    Arrow(RowSpec),
    /// A Lance dataset of rows.
    Lance(RowSpec),
    /// A Lance video cache of WebP frames or encoded segments.
    VideoFrames(VideoSpec),
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "layout", rename_all = "kebab-case")]
enum RawSpec {
    Arrow(RowSpec),
    Lance(RowSpec),
    VideoFrames(VideoSpec),
}

impl TryFrom<RawSpec> for WriteSpec {
    type Error = Error;

    fn try_from(raw: RawSpec) -> Result<Self> {
        let spec = match raw {
            RawSpec::Arrow(r) => WriteSpec::Arrow(r),
            RawSpec::Lance(r) => WriteSpec::Lance(r),
            RawSpec::VideoFrames(v) => WriteSpec::VideoFrames(v),
        };
        spec.check()?;
        Ok(spec)
    }
}

impl From<WriteSpec> for RawSpec {
    fn from(s: WriteSpec) -> Self {
        match s {
            WriteSpec::Arrow(r) => RawSpec::Arrow(r),
            WriteSpec::Lance(r) => RawSpec::Lance(r),
            WriteSpec::VideoFrames(v) => RawSpec::VideoFrames(v),
        }
    }
}

impl Default for WriteSpec {
    fn default() -> Self {
        WriteSpec::Arrow(RowSpec::default())
    }
}

impl WriteSpec {
    /// A spec from options by name (Python keywords, CLI flags): an option
    /// that is unknown, or that does not apply to `layout`, is an error
    /// naming it and the layouts it applies to; values are checked too.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option.
    pub fn from_options(layout: Layout, options: &Map<String, J>) -> Result<WriteSpec> {
        for (name, value) in options {
            if !value.is_null() {
                option_applies(name, layout)?;
            }
        }
        let mut obj = options.clone();
        obj.retain(|_, v| !v.is_null());
        obj.insert("layout".into(), J::String(layout.name().into()));
        serde_json::from_value(J::Object(obj.clone())).map_err(|e| {
            // Serde's message for a value of the wrong type names no field
            // inside a tagged enum: find the option (or segments key) that
            // fails alone, and name it.
            locate_bad_value(layout, &obj).unwrap_or_else(|| Error::InvalidArgument(e.to_string()))
        })
    }

    /// The layout written.
    pub fn layout(&self) -> Layout {
        match self {
            WriteSpec::Arrow(_) => Layout::Arrow,
            WriteSpec::Lance(_) => Layout::Lance,
            WriteSpec::VideoFrames(_) => Layout::VideoFrames,
        }
    }

    /// The spec as options by name (what [`WriteSpec::from_options`] takes).
    pub fn options(&self) -> Map<String, J> {
        match serde_json::to_value(self) {
            Ok(J::Object(mut m)) => {
                m.remove("layout");
                m
            }
            _ => Map::new(),
        }
    }

    fn check(&self) -> Result<()> {
        for name in self.options().keys() {
            option_applies(name, self.layout())?;
        }
        match self {
            WriteSpec::Arrow(r) => r.arrow().map(drop),
            #[cfg(feature = "lance")]
            WriteSpec::Lance(r) => r.lance().map(drop),
            #[cfg(feature = "video")]
            WriteSpec::VideoFrames(v) => v.video().map(drop),
            #[allow(unreachable_patterns)]
            other => Err(unsupported(other.layout())),
        }
    }
}

/// Checks in the table that option `name` exists and applies to `layout`.
fn option_applies(name: &str, layout: Layout) -> Result<()> {
    let opt = OPTIONS.iter().find(|o| o.name == name).ok_or_else(|| {
        let names: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
        Error::InvalidArgument(format!(
            "unknown write option '{name}'; the options are {}",
            names.join(", ")
        ))
    })?;
    if !opt.layouts.contains(&layout) {
        let to: Vec<&str> = opt.layouts.iter().map(|l| l.name()).collect();
        return Err(Error::InvalidArgument(format!(
            "write option '{name}' applies to layout {}, not {layout}",
            to.join(" and ")
        )));
    }
    Ok(())
}

/// The first option of `obj` whose value does not deserialise on its own
/// (for `segments`, the first of its keys), named in an error.
fn locate_bad_value(layout: Layout, obj: &Map<String, J>) -> Option<Error> {
    let alone = |k: &str, v: &J| -> std::result::Result<RawSpec, serde_json::Error> {
        let mut m = Map::new();
        m.insert("layout".into(), J::String(layout.name().into()));
        m.insert(k.into(), v.clone());
        serde_json::from_value(J::Object(m))
    };
    for (k, v) in obj.iter().filter(|(k, _)| *k != "layout") {
        let Err(e) = alone(k, v) else { continue };
        if let (Some(sub), true) = (v.as_object(), k == "segments") {
            for (sk, sv) in sub {
                let one = J::Object(Map::from_iter([(sk.clone(), sv.clone())]));
                if let Err(e) = alone(k, &one) {
                    return Some(option_error(&format!("segments.{sk}"), &e));
                }
            }
        }
        return Some(option_error(k, &e));
    }
    None
}

#[allow(dead_code)]
fn unsupported(layout: Layout) -> Error {
    Error::InvalidArgument(format!(
        "this build of shardset has no {layout} layout; build it with the default features"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::arrow_shards::write::DEFAULT_SHARD_SIZE_BYTES;

    /// A valid value of each option, for the table's tests.
    fn sample(name: &str) -> J {
        serde_json::json!(match name {
            "shard_size" => serde_json::json!("64MB"),
            "compression" => serde_json::json!("zstd"),
            "compression_level" => serde_json::json!(3),
            "threads" | "batch_size" | "max_rows_per_file" | "resize" => serde_json::json!(2),
            "png_level" | "webp_method" => serde_json::json!(6),
            "build_id" => serde_json::json!("b1"),
            "record_checksums" | "skip_corrupt" => serde_json::json!(true),
            "dedup" | "buffer" => serde_json::json!(4096),
            "webp_quality" => serde_json::json!(80.0),
            "webp_input" => serde_json::json!("yuv"),
            "resize_mode" => serde_json::json!("shorter_side"),
            "checkpoint_frames" => serde_json::json!(100),
            "segments" => serde_json::json!({"codec": "h264", "crf": 30}),
            "scalar_index" => serde_json::json!(["x"]),
            other => panic!("no sample for {other}"),
        })
    }

    fn with(name: &str) -> Map<String, J> {
        let mut m = Map::new();
        // compression_level needs its codec.
        if name == "compression_level" {
            m.insert("compression".into(), sample("compression"));
        }
        m.insert(name.into(), sample(name));
        m
    }

    /// Each option on each layout: applied where the table says, refused by
    /// name elsewhere; the spec round-trips through JSON.
    #[test]
    fn each_option_on_each_layout_is_applied_or_refused_by_name() {
        for opt in OPTIONS {
            for &(_, layout) in Layout::NAMES {
                let applies = opt.layouts.contains(&layout);
                let alone = Map::from_iter([(opt.name.to_string(), sample(opt.name))]);
                let given = if applies { with(opt.name) } else { alone };
                let got = WriteSpec::from_options(layout, &given);
                if applies {
                    let spec = got.unwrap_or_else(|e| panic!("{} on {layout}: {e}", opt.name));
                    assert_eq!(spec.layout(), layout);
                    assert!(spec.options().contains_key(opt.name), "{}", opt.name);
                    let json = serde_json::to_string(&spec).unwrap();
                    let back: WriteSpec = serde_json::from_str(&json).unwrap();
                    assert_eq!(back, spec);
                } else {
                    let e = got.unwrap_err().to_string();
                    assert!(
                        e.contains(&format!("'{}'", opt.name)) && e.contains(layout.name()),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_values_are_refused_when_the_spec_is_made() {
        let bad = [
            (Layout::Arrow, "shard_size", serde_json::json!(0)),
            (Layout::Arrow, "shard_size", serde_json::json!("lots")),
            (Layout::Arrow, "compression", serde_json::json!("gzip")),
            (Layout::Lance, "png_level", serde_json::json!(12)),
            (Layout::Lance, "batch_size", serde_json::json!(0)),
            (
                Layout::VideoFrames,
                "webp_quality",
                serde_json::json!(101.0),
            ),
            (
                Layout::VideoFrames,
                "segments",
                serde_json::json!({"codec": "vp9"}),
            ),
            (
                Layout::VideoFrames,
                "segments",
                serde_json::json!({"bitrate": 5}),
            ),
        ];
        for (layout, name, v) in bad {
            let mut m = Map::new();
            m.insert(name.into(), v.clone());
            let e = WriteSpec::from_options(layout, &m).unwrap_err().to_string();
            assert!(e.contains(name) || e.contains("bitrate"), "{name}={v}: {e}");
        }
        let mut m = Map::new();
        m.insert("compression_level".into(), serde_json::json!(5));
        let e = WriteSpec::from_options(Layout::Lance, &m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs compression"), "{e}");
        let nope = Map::from_iter([("nope".to_string(), J::Bool(true))]);
        let e = WriteSpec::from_options(Layout::Arrow, &nope).unwrap_err();
        assert!(e.to_string().contains("unknown write option 'nope'"), "{e}");
        // Deserialised specs are checked too.
        let e = serde_json::from_str::<WriteSpec>(r#"{"layout":"lance","dedup":10}"#);
        assert!(e.is_err());
        let e = serde_json::from_str::<WriteSpec>(r#"{"layout":"arrow","batch_size":0}"#);
        assert!(e.unwrap_err().to_string().contains("batch_size"));
    }

    #[test]
    fn the_shard_size_default_is_the_librarys_and_one_means_one_shard() {
        let a = RowSpec::default().arrow().unwrap();
        assert_eq!(a.shard_size_bytes(), Some(DEFAULT_SHARD_SIZE_BYTES));
        let mut m = Map::new();
        m.insert("shard_size".into(), serde_json::json!("one"));
        let WriteSpec::Arrow(r) = WriteSpec::from_options(Layout::Arrow, &m).unwrap() else {
            panic!()
        };
        assert_eq!(r.arrow().unwrap().shard_size_bytes(), None);
        // Nulls are options not given, wherever they apply.
        let mut m = Map::new();
        m.insert("dedup".into(), J::Null);
        m.insert("threads".into(), J::Null);
        assert_eq!(
            WriteSpec::from_options(Layout::Lance, &m).unwrap(),
            WriteSpec::Lance(RowSpec::default())
        );
    }

    #[test]
    fn layouts_have_one_spelling() {
        for &(name, l) in Layout::NAMES {
            assert_eq!(name.parse::<Layout>().unwrap(), l);
            assert_eq!(
                serde_json::to_value(l).unwrap(),
                serde_json::json!(name),
                "serde"
            );
            #[cfg(feature = "cli")]
            assert_eq!(
                clap::ValueEnum::to_possible_value(&l).unwrap().get_name(),
                name,
                "clap"
            );
        }
    }
}
