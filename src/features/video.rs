//! `Video(storage='path'|'bytes')` cells: staging files into the cache and
//! building the reference's struct cell. (Frames storage is a Lance layout.)

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{VideoFeature, VideoStorage};
use crate::value::{Value, VideoRef};

/// Where staged video files live inside a cache.
pub const ASSETS_DIR: &str = "_assets/video";

/// The reference's struct cell of a `Video` column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoCell {
    /// `path` or `bytes`.
    pub mode: VideoStorage,
    /// Staged file name (path mode).
    pub path: Option<String>,
    /// Inline bytes (bytes mode).
    pub bytes: Option<Vec<u8>>,
    /// Lowercase dotted extension.
    pub extension: String,
    /// Media type guessed from the extension.
    pub media_type: String,
    /// Size in bytes.
    pub size: i64,
    /// Given checksum, else the sha256 hex of the content.
    pub checksum: String,
}

/// Media type of a video extension, as Python's `mimetypes` guesses it.
pub fn media_type(ext: &str) -> &'static str {
    match ext {
        ".mp4" | ".m4v" => "video/mp4",
        ".avi" => "video/x-msvideo",
        ".mov" | ".qt" => "video/quicktime",
        ".webm" => "video/webm",
        ".mkv" => "video/x-matroska",
        ".mpg" | ".mpeg" | ".mpe" | ".m1v" => "video/mpeg",
        ".ogv" => "video/ogg",
        ".ts" => "video/mp2t",
        ".wmv" => "video/x-ms-wmv",
        ".flv" => "video/x-flv",
        ".3gp" => "video/3gpp",
        _ => "application/octet-stream",
    }
}

fn suffix(p: &Path) -> String {
    p.extension()
        .map(|e| format!(".{}", e.to_string_lossy().to_ascii_lowercase()))
        .unwrap_or_default()
}

fn check_ext(ext: &str, feat: &VideoFeature) -> Result<(), String> {
    if feat.allowed_extensions.iter().any(|a| a == ext) {
        Ok(())
    } else {
        Err(format!(
            "unsupported video extension '{ext}'. Allowed: {:?}",
            feat.allowed_extensions
        ))
    }
}

/// The sha256 hex of a file's content.
///
/// # Errors
/// A message naming the file.
pub fn sha256_file(path: &Path) -> Result<String, String> {
    let mut f = fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(crate::util::hex(&h.finalize()))
}

/// Stages `src` as `<cache>/_assets/video/<name>`: hard link, else copy
/// through a temporary name so a partial copy is never visible.
fn stage(src: &Path, cache_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = cache_dir.join(ASSETS_DIR);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dest = dir.join(name);
    if dest.exists() {
        return Ok(dest);
    }
    match fs::hard_link(src, &dest) {
        Ok(()) => Ok(dest),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dest),
        Err(_) => {
            let tmp = dir.join(format!(".{name}.{}", crate::util::random_suffix()));
            fs::copy(src, &tmp).map_err(|e| {
                let _ = fs::remove_file(&tmp);
                format!("cannot copy {} into the cache: {e}", src.display())
            })?;
            fs::rename(&tmp, &dest)
                .map_err(|e| format!("cannot rename into {}: {e}", dest.display()))?;
            Ok(dest)
        }
    }
}

/// Encodes one input value into a cell (None for null).
///
/// # Errors
/// A message naming the file and the reason.
pub fn encode(
    value: Value,
    feat: &VideoFeature,
    cache_dir: Option<&Path>,
) -> Result<Option<VideoCell>, String> {
    let input = match value {
        Value::Null => return Ok(None),
        Value::Path(p) => VideoRef::from_path(p),
        Value::Str(s) if feat.storage == VideoStorage::Path => VideoRef::from_path(s),
        Value::Bytes(b) if feat.storage == VideoStorage::Bytes => {
            VideoRef::from_bytes(b.to_vec(), None)
        }
        Value::Video(r) => *r,
        other => {
            return Err(format!(
                "Video(storage='{}') takes a path{} or a VideoRef, got {}",
                feat.storage.as_str(),
                if feat.storage == VideoStorage::Bytes {
                    ", bytes"
                } else {
                    ""
                },
                other.kind()
            ))
        }
    };
    match feat.storage {
        VideoStorage::Frames => Err(
            "Video(storage='frames') is stored by the lance-video-frames layout, not in Arrow shards"
                .into(),
        ),
        VideoStorage::Segments => Err(
            "Video(storage='segments') is stored by the lance-video-segments layout, not in Arrow shards"
                .into(),
        ),
        VideoStorage::Path => {
            let src = input
                .path
                .ok_or("Video(storage='path') needs a file path")?;
            let meta = fs::metadata(&src)
                .map_err(|e| format!("video file {}: {e}", src.display()))?;
            if !meta.is_file() {
                return Err(format!("video path {} is not a file", src.display()));
            }
            let ext = suffix(&src);
            check_ext(&ext, feat)?;
            let cache_dir = cache_dir.ok_or("Video(storage='path') needs a cache directory to stage into")?;
            let digest = sha256_file(&src)?;
            let name = format!("{digest}{ext}");
            let staged = stage(&src, cache_dir, &name)?;
            let size = fs::metadata(&staged)
                .map_err(|e| format!("{}: {e}", staged.display()))?
                .len() as i64;
            Ok(Some(VideoCell {
                mode: VideoStorage::Path,
                path: Some(name),
                bytes: None,
                media_type: media_type(&ext).to_string(),
                extension: ext,
                size,
                checksum: input.checksum.unwrap_or(digest),
            }))
        }
        VideoStorage::Bytes => {
            let (bytes, ext) = match (input.bytes, input.path) {
                (Some(b), _) => {
                    let ext = input
                        .extension
                        .map(|e| normalise_ext(&e))
                        .unwrap_or_else(|| feat.allowed_extensions[0].clone());
                    (b, ext)
                }
                (None, Some(p)) => {
                    let b = fs::read(&p).map_err(|e| format!("video file {}: {e}", p.display()))?;
                    let ext = input
                        .extension
                        .map(|e| normalise_ext(&e))
                        .unwrap_or_else(|| suffix(&p));
                    (b, ext)
                }
                (None, None) => return Err("video reference has neither bytes nor a path".into()),
            };
            check_ext(&ext, feat)?;
            let checksum = input
                .checksum
                .unwrap_or_else(|| crate::util::sha256_hex(&bytes));
            Ok(Some(VideoCell {
                mode: VideoStorage::Bytes,
                path: None,
                size: bytes.len() as i64,
                bytes: Some(bytes),
                media_type: media_type(&ext).to_string(),
                extension: ext,
                checksum,
            }))
        }
    }
}

fn normalise_ext(e: &str) -> String {
    let e = e.to_ascii_lowercase();
    if e.starts_with('.') {
        e
    } else {
        format!(".{e}")
    }
}
