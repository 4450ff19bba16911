//! The sources a split is built from, stamped into `_metadata.json`, and the
//! reasons a cache is out of date.

use std::path::{Path, PathBuf};

use super::reasons::RebuildReason;
use crate::error::{Error, Result};

/// Source files a split is built from. A changed source (by size and
/// modification time, or by content hash on request) makes the next `load`
/// rebuild the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// The directory paths are recorded relative to (so a moved tree still matches).
    pub root: PathBuf,
    /// The files, relative to `root` or absolute inside it.
    pub files: Vec<PathBuf>,
    /// Stamp by sha256 of the content instead of size and mtime.
    pub content_hash: bool,
}

impl Sources {
    /// Files under a root, stamped by size and mtime.
    pub fn new(
        root: impl Into<PathBuf>,
        files: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Self {
        Sources {
            root: root.into(),
            files: files.into_iter().map(Into::into).collect(),
            content_hash: false,
        }
    }

    /// Stamps by content hash (slower, immune to touched-but-unchanged files).
    pub fn by_content(mut self) -> Self {
        self.content_hash = true;
        self
    }

    /// The stamps of the files as they are now.
    ///
    /// # Errors
    /// [`Error::Io`] naming a missing or unreadable source.
    pub fn stamp(&self) -> Result<serde_json::Value> {
        self.stamp_with(false)
    }

    /// Stamps, skipping missing files when `lenient` (they then read as removed).
    fn stamp_with(&self, lenient: bool) -> Result<serde_json::Value> {
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let abs = if f.is_absolute() {
                f.clone()
            } else {
                self.root.join(f)
            };
            let rel = abs
                .strip_prefix(&self.root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| abs.to_string_lossy().into_owned());
            let meta = match std::fs::metadata(&abs) {
                Ok(m) => m,
                Err(_) if lenient => continue,
                Err(e) => return Err(Error::io("stat source", &abs, e)),
            };
            if self.content_hash {
                use sha2::Digest;
                let mut h = sha2::Sha256::new();
                let mut file =
                    std::fs::File::open(&abs).map_err(|e| Error::io("open source", &abs, e))?;
                std::io::copy(&mut file, &mut h).map_err(|e| Error::io("read source", &abs, e))?;
                files.push(serde_json::json!({"path": rel, "size": meta.len(), "sha256": crate::util::hex(&h.finalize())}));
            } else {
                let mtime_ns = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as u64);
                files.push(
                    serde_json::json!({"path": rel, "size": meta.len(), "mtime_ns": mtime_ns}),
                );
            }
        }
        Ok(serde_json::json!({
            "root": self.root,
            "content_hash": self.content_hash,
            "files": files,
        }))
    }
}

/// Why the cache at `dir` is out of date as far as it can tell by itself:
/// damaged, or a recorded source changed. (Features and config values need
/// the builder: see [`why`].) Empty when up to date.
///
/// # Errors
/// Never for a damaged cache (that is a reason); only for internal failures.
pub fn why_cache(dir: &Path) -> Result<Vec<RebuildReason>> {
    Ok(why_cache_report(dir)?.reasons)
}

/// [`why_cache`]'s reasons, with what was checked to find them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhyReport {
    /// Reasons to rebuild (empty: up to date).
    pub reasons: Vec<RebuildReason>,
    /// What the verification checked and could not check, in words.
    pub checked: String,
    /// True when the cache records its sources (so changes could be seen).
    pub sources_recorded: bool,
}

/// [`why_cache`] with what was checked.
///
/// # Errors
/// As [`why_cache`].
pub fn why_cache_report(dir: &Path) -> Result<WhyReport> {
    let rep = match crate::layouts::verify::verify_cache(dir) {
        Ok(r) => r,
        Err(e) => {
            return Ok(WhyReport {
                reasons: vec![RebuildReason::Unreadable {
                    detail: e.to_string(),
                }],
                checked: String::new(),
                sources_recorded: false,
            })
        }
    };
    let mut out: Vec<RebuildReason> = rep
        .damage
        .iter()
        .map(|d| {
            if d.reason.starts_with("xxh64") {
                RebuildReason::ChecksumMismatch {
                    path: d.path.clone(),
                }
            } else {
                RebuildReason::Damaged {
                    path: d.path.clone(),
                    detail: d.reason.clone(),
                }
            }
        })
        .collect();
    let checked = rep.summary();
    let c = match crate::layouts::open::open_cache(dir) {
        Ok(c) => c,
        Err(_) => {
            return Ok(WhyReport {
                reasons: out,
                checked,
                sources_recorded: false,
            })
        }
    };
    let sources_recorded = c.metadata.sources().is_some();
    if let Some(rec) = c.metadata.sources() {
        let files = rec
            .get("files")
            .and_then(|f| f.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("path").and_then(|p| p.as_str()).map(PathBuf::from))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let src = Sources {
            root: rec
                .get("root")
                .and_then(|r| r.as_str())
                .map(PathBuf::from)
                .unwrap_or_default(),
            files,
            content_hash: rec
                .get("content_hash")
                .and_then(|b| b.as_bool())
                .unwrap_or(false),
        };
        let mut now = src.stamp_with(true)?;
        // Declared assets are known by their declaration, recorded as is.
        if let Some(a) = rec.get("assets") {
            now["assets"] = a.clone();
        }
        out.extend(
            source_changes(rec, &now)
                .into_iter()
                .map(|change| RebuildReason::SourceChanged { change }),
        );
    }
    Ok(WhyReport {
        reasons: out,
        checked,
        sources_recorded,
    })
}

/// Differences between recorded and current source stamps, one line each.
pub fn source_changes(recorded: &serde_json::Value, now: &serde_json::Value) -> Vec<String> {
    let files = |j: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        j.get("files")
            .and_then(|f| f.as_array())
            .map(|a| {
                a.iter()
                    .map(|f| {
                        (
                            f.get("path")
                                .and_then(|p| p.as_str())
                                .unwrap_or("")
                                .to_string(),
                            f.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if recorded.get("content_hash") != now.get("content_hash") {
        return vec!["sources are now stamped differently (content hash vs size+mtime)".into()];
    }
    let (old, new) = (files(recorded), files(now));
    let mut out = asset_changes(recorded.get("assets"), now.get("assets"));
    for (p, f) in &new {
        match old.iter().find(|(q, _)| q == p) {
            None => out.push(format!("source {p} was added")),
            Some((_, g)) if g != f => {
                let what = if f.get("sha256") != g.get("sha256") && f.get("sha256").is_some() {
                    "content"
                } else if f.get("size") != g.get("size") {
                    "size"
                } else {
                    "modification time"
                };
                out.push(format!("source {p} changed ({what})"));
            }
            _ => {}
        }
    }
    for (p, _) in &old {
        if !new.iter().any(|(q, _)| q == p) {
            out.push(format!("source {p} was removed"));
        }
    }
    out
}

/// Differences between recorded and declared assets, one line each.
fn asset_changes(
    recorded: Option<&serde_json::Value>,
    now: Option<&serde_json::Value>,
) -> Vec<String> {
    let list = |j: Option<&serde_json::Value>| -> Vec<serde_json::Value> {
        j.and_then(|a| a.as_array()).cloned().unwrap_or_default()
    };
    // Each entry by its key, the n-th repeat of a key (a split of several
    // files) as `key[n]`.
    let labelled = |v: Vec<serde_json::Value>| -> Vec<(String, serde_json::Value)> {
        let mut seen: std::collections::HashMap<String, usize> = Default::default();
        v.into_iter()
            .map(|a| {
                let k = a
                    .get("key")
                    .and_then(|k| k.as_str())
                    .unwrap_or("")
                    .to_string();
                let n = seen.entry(k.clone()).or_insert(0);
                let label = if *n == 0 { k } else { format!("{k}[{n}]") };
                *n += 1;
                (label, a)
            })
            .collect()
    };
    let (old, new) = (labelled(list(recorded)), labelled(list(now)));
    let mut out = Vec::new();
    for (k, a) in &new {
        match old.iter().find(|(l, _)| l == k).map(|(_, b)| b) {
            None => out.push(format!("asset '{k}' was added ({})", a["url"])),
            Some(b) if b != a => {
                for field in ["url", "fallbacks", "checksum", "filename"] {
                    if a.get(field) != b.get(field) {
                        out.push(format!(
                            "asset '{k}' {field} changed: {} -> {}",
                            b.get(field).unwrap_or(&serde_json::Value::Null),
                            a.get(field).unwrap_or(&serde_json::Value::Null)
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    for (k, _) in &old {
        if !new.iter().any(|(l, _)| l == k) {
            out.push(format!("asset '{k}' was removed"));
        }
    }
    out
}
