//! `shardset cat` (rows as JSON lines) and `shardset export` (a row's images
//! as PNG files).

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{json, Value as J};
use shardset::features::image::{self, probe, Container};
use shardset::{open_cache_with, Dataset, Dtype, Feature, OpenOptions, Tensor, Value};

use crate::fmt::{CliError, CliResult};

/// Parses `A..B`, `A..`, `..B` or `N` (negative values count from the end)
/// into a clamped `[start, end)` of `len` rows.
pub fn parse_rows(spec: &str, len: u64) -> Result<(u64, u64), String> {
    let bad = || format!("cannot read rows '{spec}' (e.g. 10..20, 5.., ..10, 7 or -1)");
    let num = |s: &str| -> Result<Option<i64>, String> {
        let s = s.trim();
        if s.is_empty() {
            Ok(None)
        } else {
            s.parse::<i64>().map(Some).map_err(|_| bad())
        }
    };
    let abs = |i: i64| -> u64 {
        if i < 0 {
            len.saturating_sub(i.unsigned_abs())
        } else {
            (i as u64).min(len)
        }
    };
    match spec.split_once("..") {
        Some((a, b)) => {
            let start = num(a)?.map_or(0, abs);
            let end = num(b)?.map_or(len, abs);
            Ok((start, end.max(start)))
        }
        None => {
            let i = num(spec)?.ok_or_else(bad)?;
            let r = if i < 0 { len as i64 + i } else { i };
            if r < 0 || r as u64 >= len {
                return Err(format!("row {i} is outside the cache's {len} rows"));
            }
            Ok((r as u64, r as u64 + 1))
        }
    }
}

fn xxh64(b: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh64::xxh64(b, 0))
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A float of a `dtype` column as a JSON number, in the shortest decimal that
/// reads back (decimal -> f64 -> the column's width, as numpy and the
/// reference do) to the same bits: `0.1` for the float32 nearest 0.1, not its
/// f64 expansion. JSON has no NaN or infinity; those print as null.
pub fn float_json(f: f64, dtype: Dtype) -> J {
    let text = match dtype {
        // f32's shortest repr; f16 values are exact f32 values, so f32's
        // shortest repr reads back to the same f16 too.
        Dtype::Float32 | Dtype::Float16 => (f as f32).to_string(),
        _ => return serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
    };
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(J::Null, J::Number)
}

fn tensor_json(t: &Tensor) -> J {
    macro_rules! flat {
        ($ty:ty) => {
            t.to_vec::<$ty>()
                .map(|v| v.into_iter().map(|x| json!(x)).collect::<Vec<J>>())
                .unwrap_or_default()
        };
    }
    let flat: Vec<J> = match t.dtype {
        Dtype::Int8 => flat!(i8),
        Dtype::Int16 => flat!(i16),
        Dtype::Int32 => flat!(i32),
        Dtype::Int64 => flat!(i64),
        Dtype::UInt8 => flat!(u8),
        Dtype::UInt16 => flat!(u16),
        Dtype::UInt32 => flat!(u32),
        Dtype::UInt64 => flat!(u64),
        Dtype::Float16 => t
            .to_vec::<half::f16>()
            .map(|v| {
                v.into_iter()
                    .map(|x| float_json(x.to_f64(), Dtype::Float16))
                    .collect()
            })
            .unwrap_or_default(),
        Dtype::Float32 => t
            .to_vec::<f32>()
            .map(|v| {
                v.into_iter()
                    .map(|x| float_json(f64::from(x), Dtype::Float32))
                    .collect()
            })
            .unwrap_or_default(),
        Dtype::Float64 => t
            .to_vec::<f64>()
            .map(|v| {
                v.into_iter()
                    .map(|x| float_json(x, Dtype::Float64))
                    .collect()
            })
            .unwrap_or_default(),
        Dtype::Bool => t.data.iter().map(|&b| J::Bool(b != 0)).collect(),
        Dtype::String | Dtype::Binary => Vec::new(),
    };
    // Nest from the innermost dimension out.
    let mut cur = flat;
    for &d in t.shape.iter().skip(1).rev() {
        cur = cur.chunks(d.max(1)).map(|c| J::Array(c.to_vec())).collect();
    }
    J::Array(cur)
}

/// A cell as JSON: scalars as they are; bytes, images and arrays summarised
/// unless `full`.
pub fn cell_json(v: &Value, feature: Option<&Feature>, full: bool) -> J {
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::Float(f) => match feature {
            Some(Feature::Value(d)) => float_json(*f, *d),
            _ => float_json(*f, Dtype::Float64),
        },
        Value::Str(s) => J::String(s.clone()),
        Value::Path(p) => J::String(p.to_string_lossy().into_owned()),
        Value::Bytes(b) if matches!(feature, Some(Feature::Image(_))) => {
            let mut o = match probe(b) {
                Ok(i) => {
                    json!({"format": i.container.name(), "width": i.width, "height": i.height})
                }
                Err(e) => json!({"format": null, "error": e}),
            };
            o["bytes"] = json!(b.len());
            if full {
                o["base64"] = J::String(b64(b));
            } else {
                o["xxh64"] = J::String(xxh64(b));
            }
            o
        }
        Value::Bytes(b) if full => json!({"bytes": b.len(), "base64": b64(b)}),
        Value::Bytes(b) => json!({"bytes": b.len(), "xxh64": xxh64(b)}),
        Value::List(items) => {
            let inner = match feature {
                Some(Feature::Sequence(f)) => Some(f.as_ref()),
                _ => None,
            };
            J::Array(items.iter().map(|x| cell_json(x, inner, full)).collect())
        }
        Value::Image(img) => json!({
            "height": img.height, "width": img.width, "channels": img.channels,
            "bytes": img.data.len(),
        }),
        Value::Tensor(t) if full => tensor_json(t),
        Value::Tensor(t) => json!({
            "shape": t.shape, "dtype": t.dtype.name(), "bytes": t.data.len(), "xxh64": xxh64(&t.data),
        }),
        Value::Label(l) => match &l.name {
            Some(n) => json!({"id": l.id, "name": n.as_ref()}),
            None => json!(l.id),
        },
        Value::Video(r) => {
            // `path` is the cell as stored (what the reference's users see);
            // `resolved_path` the file it names on this machine.
            let mut o = json!({
                "mode": r.mode.map(|m| m.as_str()),
                "path": r.stored_path.as_ref().map_or_else(
                    || r.path.as_ref().map(|p| J::String(p.to_string_lossy().into_owned())),
                    |s| Some(J::String(s.clone())),
                ),
                "resolved_path": r.path,
                "extension": r.extension,
                "media_type": r.media_type,
                "size": r.size,
                "checksum": r.checksum,
            });
            if let Some(b) = &r.bytes {
                o["bytes"] = if full {
                    J::String(b64(b))
                } else {
                    json!(b.len())
                };
            }
            o
        }
        other => J::String(format!("<{}>", other.kind())),
    }
}

/// Opens a cache for reading raw cells (images as their stored bytes).
fn open_dataset_with(path: &Path, opts: OpenOptions) -> CliResult<Dataset> {
    let cache = open_cache_with(path, &opts.with_decode_images(false))?;
    Ok(Dataset::new(cache))
}

/// Print rows as JSON lines (bytes, images and arrays summarised unless --full).
#[derive(clap::Args)]
pub struct CatArgs {
    /// The cache directory.
    pub path: PathBuf,
    /// Rows: A..B, A.., ..B or N; negative values count from the end (default 0..10).
    #[arg(long, allow_hyphen_values = true)]
    pub rows: Option<String>,
    /// Only these columns, comma-separated.
    #[arg(long)]
    pub columns: Option<String>,
    /// Print bytes and images as base64 and arrays as nested lists.
    #[arg(long)]
    pub full: bool,
    /// Read this version of an edited cache (`shardset log` lists them).
    #[arg(long)]
    pub version: Option<u64>,
    /// Check every row against its per-record checksum (caches built
    /// with --record-checksums); a changed row is an error naming it.
    #[arg(long)]
    pub verify_on_read: bool,
    /// Load the cache into memory first; refused, naming both sizes,
    /// when it needs more than half the memory available.
    #[arg(long)]
    pub in_memory: bool,
}

/// Runs `shardset cat`.
pub fn cat(args: CatArgs) -> CliResult {
    let CatArgs {
        path,
        rows,
        columns,
        full,
        version,
        verify_on_read,
        in_memory,
    } = args;
    let mut opts = OpenOptions::default()
        .with_verify_on_read(verify_on_read)
        .with_in_memory(in_memory);
    if let Some(v) = version {
        opts = opts.with_version(v);
    }
    let mut ds = open_dataset_with(&path, opts)?;
    if let Some(cols) = columns {
        let cols: Vec<&str> = cols
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        ds = ds.select_columns(&cols)?;
    }
    let (start, end) =
        parse_rows(rows.as_deref().unwrap_or("0..10"), ds.len()).map_err(CliError::Usage)?;
    let features = ds.features().clone();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for i in start..end {
        let row = ds.get(i as i64)?;
        let mut obj = serde_json::Map::new();
        for (name, v) in row.names().iter().zip(row.values()) {
            obj.insert(name.clone(), cell_json(v, features.get(name), full));
        }
        if let Err(e) = writeln!(out, "{}", J::Object(obj)) {
            // `shardset cat ... | head` closes the pipe early: not an error.
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(shardset::Error::Io {
                op: "write",
                path: PathBuf::from("<stdout>"),
                source: e,
            }
            .into());
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(shardset::Error::Io {
            op: "write",
            path: PathBuf::from("<stdout>"),
            source: e,
        }
        .into()),
        _ => Ok(()),
    }
}

/// One file `export` wrote.
struct Exported {
    column: String,
    path: PathBuf,
    note: Option<String>,
}

/// Writes one stored image as `<stem>.png` (PNG kept byte for byte, JPEG
/// converted); a container this build cannot decode is written as it is,
/// with its own extension.
fn write_image(bytes: &[u8], out: &Path, stem: &str, column: &str) -> CliResult<Exported> {
    let io = |p: &Path, e| shardset::Error::Io {
        op: "write",
        path: p.to_path_buf(),
        source: e,
    };
    let bad = |reason: String| {
        CliError::Lib(shardset::Error::Decode {
            column: column.to_string(),
            reason,
        })
    };
    let info = probe(bytes).map_err(bad)?;
    let (data, ext, note) = match info.container {
        Container::Png => (bytes.to_vec(), "png", None),
        Container::Jpeg => {
            let px = image::decode(bytes).map_err(bad)?;
            let png = image::encode(&px, shardset::ImageFormat::Png).map_err(bad)?;
            (png, "png", Some("converted from JPEG".to_string()))
        }
        other => (
            bytes.to_vec(),
            other.extension(),
            Some(format!(
                "kept as {} (this build converts only PNG and JPEG)",
                other.name()
            )),
        ),
    };
    let path = out.join(format!("{stem}.{ext}"));
    std::fs::write(&path, data).map_err(|e| io(&path, e))?;
    Ok(Exported {
        column: column.to_string(),
        path,
        note,
    })
}

/// Writes the frames of a clip (u8 `[T, H, W, 3]`) as PNG files and one
/// looping GIF, so a person can look at them.
#[cfg(feature = "video")]
fn write_clip(
    t: &shardset::Tensor,
    out: &Path,
    stem: &str,
    column: &str,
    indices: &[u64],
) -> CliResult<Vec<Exported>> {
    let bad = |reason: String| {
        CliError::Lib(shardset::Error::Decode {
            column: column.to_string(),
            reason,
        })
    };
    let io = |p: &Path, e: std::io::Error| shardset::Error::Io {
        op: "write",
        path: p.to_path_buf(),
        source: e,
    };
    let [n, h, w, 3] = t.shape[..] else {
        return Err(bad(format!(
            "a clip of shape {:?} is not [T, H, W, 3]",
            t.shape
        )));
    };
    if t.dtype != shardset::Dtype::UInt8 || w > u16::MAX as usize || h > u16::MAX as usize {
        return Err(bad("frames must be u8 and at most 65535 pixels wide".into()));
    }
    let per = h * w * 3;
    let mut files = Vec::new();
    let gif_path = out.join(format!("{stem}.gif"));
    let f = std::fs::File::create(&gif_path).map_err(|e| io(&gif_path, e))?;
    let mut enc = gif::Encoder::new(std::io::BufWriter::new(f), w as u16, h as u16, &[])
        .map_err(|e| bad(format!("gif: {e}")))?;
    enc.set_repeat(gif::Repeat::Infinite)
        .map_err(|e| bad(format!("gif: {e}")))?;
    for k in 0..n {
        let px = &t.data[k * per..(k + 1) * per];
        let img = shardset::ImageData {
            height: h as u32,
            width: w as u32,
            channels: 3,
            data: px.to_vec(),
        };
        let png = image::encode(&img, shardset::ImageFormat::Png).map_err(bad)?;
        let idx = indices.get(k).copied().unwrap_or(k as u64);
        let p = out.join(format!("{stem}_frame{idx:05}.png"));
        std::fs::write(&p, png).map_err(|e| io(&p, e))?;
        files.push(Exported {
            column: column.to_string(),
            path: p,
            note: None,
        });
        let mut frame = gif::Frame::from_rgb_speed(w as u16, h as u16, px, 10);
        frame.delay = 10;
        enc.write_frame(&frame)
            .map_err(|e| bad(format!("gif: {e}")))?;
    }
    drop(enc);
    files.push(Exported {
        column: column.to_string(),
        path: gif_path,
        note: Some(format!("{n} frames, animated")),
    });
    Ok(files)
}

/// Write the images of one row as PNG files, or (`--format parquet`) the
/// whole cache as one Parquet file.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// The cache directory.
    pub path: PathBuf,
    /// The row (negative counts from the end); not with `--format`.
    #[arg(long, allow_hyphen_values = true, required_unless_present = "format")]
    pub row: Option<i64>,
    /// Directory to write into (created if missing); with `--format
    /// parquet`, the file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// `parquet`: every row of the cache, its columns as stored, into the
    /// Parquet file `--out` (our features and Hugging Face's in its metadata).
    #[arg(long, value_parser = ["parquet"], conflicts_with = "row")]
    pub format: Option<String>,
    /// Video: frames per window (a lance-video-frames row is the window
    /// starting at that frame position; a path/bytes video gives this
    /// many uniformly sampled frames).
    #[arg(long, default_value_t = 8)]
    pub window: u32,
    /// Video: frames skipped between two frames of a window.
    #[arg(long, default_value_t = 0)]
    pub frame_skip: u32,
    /// Print the files written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `shardset export`: the image cells of one row, or the frames of its
/// video window or clip, as files in `out`.
pub fn export(args: ExportArgs) -> CliResult {
    let ExportArgs {
        path,
        row,
        out,
        window,
        frame_skip,
        json: json_out,
        format,
    } = args;
    let Some(row) = row else {
        // `--format parquet` (clap requires --row otherwise).
        let _ = format;
        let rows = open_dataset_with(&path, OpenOptions::default())?.write_parquet(&out)?;
        if json_out {
            println!("{}", json!({"rows": rows, "file": out}));
        } else {
            println!("{rows} rows written to {}", out.display());
        }
        return Ok(());
    };
    #[cfg(feature = "video")]
    let ds = {
        let spec = shardset::WindowSpec::try_new(window, frame_skip, 1)?;
        let cache = open_cache_with(
            &path,
            &OpenOptions::default()
                .with_decode_images(false)
                .with_windows(spec),
        )?;
        let ds = Dataset::new(cache);
        if ds
            .features()
            .iter()
            .any(|(_, f)| matches!(f, Feature::Video(v) if !v.storage.is_layout()))
        {
            ds.with_video_decode(Some(shardset::VideoDecode::new(window as usize)))?
        } else {
            ds
        }
    };
    #[cfg(not(feature = "video"))]
    let ds = {
        let _ = (window, frame_skip);
        open_dataset_with(&path, OpenOptions::default())?
    };
    let index = ds.physical_index(row)?;
    let r = ds.get(row)?;
    std::fs::create_dir_all(&out).map_err(|e| shardset::Error::Io {
        op: "create directory",
        path: out.clone(),
        source: e,
    })?;
    let features = ds.features().clone();
    let mut written = Vec::new();
    for (name, v) in r.names().iter().zip(r.values()) {
        let stem = format!("row{index}_{name}");
        match (features.get(name), v) {
            (Some(Feature::Image(_)), Value::Bytes(b)) => {
                written.push(write_image(b, &out, &stem, name)?);
            }
            (Some(Feature::Sequence(inner)), Value::List(items))
                if matches!(inner.as_ref(), Feature::Image(_)) =>
            {
                for (k, it) in items.iter().enumerate() {
                    if let Value::Bytes(b) = it {
                        written.push(write_image(b, &out, &format!("{stem}_{k}"), name)?);
                    }
                }
            }
            #[cfg(feature = "video")]
            (Some(Feature::Video(_)), Value::Tensor(t)) => {
                let indices: Vec<u64> = match r.get("frame_indices") {
                    Some(Value::List(l)) => l
                        .iter()
                        .filter_map(|v| v.as_i64())
                        .map(|i| i as u64)
                        .collect(),
                    _ => Vec::new(),
                };
                written.extend(write_clip(t, &out, &stem, name, &indices)?);
            }
            _ => {}
        }
    }
    if written.is_empty() {
        return Err(CliError::Failed(format!(
            "{}: row {row} has no image or video to export (columns: {})",
            path.display(),
            features.names().join(", ")
        )));
    }
    if json_out {
        let files: Vec<J> = written
            .iter()
            .map(|w| json!({"column": w.column, "path": w.path, "note": w.note}))
            .collect();
        println!("{}", json!({"row": index, "files": files}));
    } else {
        for w in &written {
            match &w.note {
                Some(n) => println!("{} ({}: {n})", w.path.display(), w.column),
                None => println!("{} ({})", w.path.display(), w.column),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ranges() {
        assert_eq!(parse_rows("10..20", 100), Ok((10, 20)));
        assert_eq!(parse_rows("90..", 100), Ok((90, 100)));
        assert_eq!(parse_rows("..5", 100), Ok((0, 5)));
        assert_eq!(parse_rows("-3..", 100), Ok((97, 100)));
        assert_eq!(parse_rows("50..500", 100), Ok((50, 100)));
        assert_eq!(parse_rows("7", 100), Ok((7, 8)));
        assert_eq!(parse_rows("-1", 100), Ok((99, 100)));
        assert!(parse_rows("100", 100).is_err());
        assert!(parse_rows("a..b", 100).is_err());
    }

    #[test]
    fn tensors_nest_by_shape() {
        let t = Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(tensor_json(&t), json!([[1, 2, 3], [4, 5, 6]]));
    }
}
