//! The append-only build manifest that makes a killed build resumable.
//!
//! `_manifest.jsonl` lives in the build's temp dir. Its first line describes
//! the build (cache name, schema fingerprint, build id and every option that
//! shapes the shards); each later line commits one closed shard, written only
//! after the shard's bytes are fsynced, and is itself fsynced. A killed build
//! therefore leaves a manifest whose lines all describe complete shards, except
//! possibly a torn last line, which is dropped on resume.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layouts::arrow_shards::format::{Compression, ShardRecord};

/// File name of the manifest inside a build's temp dir.
pub const MANIFEST_FILE: &str = "_manifest.jsonl";

/// What a build is; a resumed build must match it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestHeader {
    /// The cache directory's name.
    pub cache_name: String,
    /// Schema fingerprint of the features.
    pub schema_fingerprint: String,
    /// The build id stamped into every shard.
    pub build_id: String,
    /// Rows per record batch.
    pub batch_size: u64,
    /// Shard byte budget.
    pub shard_size_bytes: Option<u64>,
    /// IPC compression.
    pub compression: Compression,
    /// Stamp of the declared sources (empty when none are declared).
    pub sources_digest: String,
    /// Whether per-record checksums are kept.
    #[serde(default)]
    pub row_checksums: bool,
}

/// One committed shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestShard {
    /// File name.
    pub filename: String,
    /// Rows in it.
    pub num_rows: u64,
    /// Its size.
    pub num_bytes: u64,
    /// Its xxh64.
    pub xxh64: String,
    /// Cumulative row counts at which work units ended, as known when this
    /// shard was committed (lets a resume skip whole units).
    #[serde(default)]
    pub unit_ends: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(ManifestHeader),
    Shard(ManifestShard),
}

/// Appends commits to a manifest.
#[derive(Debug)]
pub struct ManifestWriter {
    file: File,
    path: PathBuf,
}

fn fsync_line(file: &mut File, path: &Path, line: &Line) -> Result<()> {
    let mut text = serde_json::to_vec(line)
        .map_err(|e| Error::metadata(path, format!("cannot serialise manifest line: {e}")))?;
    text.push(b'\n');
    file.write_all(&text)
        .map_err(|e| Error::io("write manifest", path, e))?;
    file.sync_data()
        .map_err(|e| Error::io("fsync manifest", path, e))
}

impl ManifestWriter {
    /// Starts a new manifest with its header (the dir's entry is fsynced too).
    ///
    /// # Errors
    /// [`Error::Io`] naming the manifest.
    pub fn create(dir: &Path, header: &ManifestHeader) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("create manifest", &path, e))?;
        fsync_line(&mut file, &path, &Line::Header(header.clone()))?;
        crate::util::fsync_dir(dir)?;
        Ok(ManifestWriter { file, path })
    }

    /// Re-opens a validated manifest for appending; `keep_bytes` is the length
    /// of its valid prefix (a torn tail is cut off first).
    ///
    /// # Errors
    /// [`Error::Io`] naming the manifest.
    pub fn reopen(dir: &Path, keep_bytes: u64) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open manifest", &path, e))?;
        file.set_len(keep_bytes)
            .map_err(|e| Error::io("truncate torn manifest tail", &path, e))?;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
            .map_err(|e| Error::io("seek manifest", &path, e))?;
        file.sync_data()
            .map_err(|e| Error::io("fsync manifest", &path, e))?;
        Ok(ManifestWriter { file, path })
    }

    /// Commits a closed (already fsynced) shard.
    ///
    /// # Errors
    /// [`Error::Io`] naming the manifest.
    pub fn commit(&mut self, shard: &ShardRecord, unit_ends: Vec<u64>) -> Result<()> {
        let line = Line::Shard(ManifestShard {
            filename: shard.filename.clone(),
            num_rows: shard.num_rows,
            num_bytes: shard.num_bytes,
            xxh64: shard.xxh64.clone(),
            unit_ends,
        });
        fsync_line(&mut self.file, &self.path, &line)
    }
}

/// A manifest read back from a killed build and checked against its files.
#[derive(Debug, Clone)]
pub struct RecoveredBuild {
    /// The build's temp dir.
    pub dir: PathBuf,
    /// Its header.
    pub header: ManifestHeader,
    /// Committed shards whose files are intact, in order.
    pub shards: Vec<ManifestShard>,
    /// Length of the manifest's valid prefix (header + intact shard lines).
    pub valid_bytes: u64,
}

impl RecoveredBuild {
    /// Rows committed.
    pub fn rows(&self) -> u64 {
        self.shards.iter().map(|s| s.num_rows).sum()
    }

    /// Cumulative unit ends known at the last commit.
    pub fn unit_ends(&self) -> Vec<u64> {
        self.shards
            .last()
            .map(|s| s.unit_ends.clone())
            .unwrap_or_default()
    }
}

/// Reads a temp dir's manifest; returns `None` when there is none or its
/// header is unreadable. Committed shards are checked (size and xxh64); the
/// first damaged one and everything after it are dropped, as is a torn last
/// line. Shard files not committed are deleted.
pub fn recover(dir: &Path) -> Option<RecoveredBuild> {
    let path = dir.join(MANIFEST_FILE);
    let bytes = std::fs::read(&path).ok()?;
    let mut header: Option<ManifestHeader> = None;
    let mut shards = Vec::new();
    let mut valid = 0u64;
    let mut offset = 0usize;
    for chunk in bytes.split_inclusive(|&b| b == b'\n') {
        offset += chunk.len();
        if !chunk.ends_with(b"\n") {
            break; // torn tail
        }
        let Ok(line) = serde_json::from_slice::<Line>(&chunk[..chunk.len() - 1]) else {
            break;
        };
        match (line, header.is_some()) {
            (Line::Header(h), false) => header = Some(h),
            (Line::Shard(s), true) => {
                let expected = crate::layouts::arrow_shards::format::shard_filename(shards.len());
                if s.filename != expected || !shard_intact(&dir.join(&s.filename), &s) {
                    break;
                }
                shards.push(s);
            }
            _ => break,
        }
        valid = offset as u64;
    }
    let header = header?;
    // Anything else that looks like a shard was never committed.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("shard-") && !shards.iter().any(|s| s.filename == name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Some(RecoveredBuild {
        dir: dir.to_path_buf(),
        header,
        shards,
        valid_bytes: valid,
    })
}

fn shard_intact(path: &Path, s: &ManifestShard) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == s.num_bytes => {}
        _ => return false,
    }
    crate::cache::checksums::xxh64_file(path).is_ok_and(|h| h == s.xxh64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> ManifestHeader {
        ManifestHeader {
            cache_name: "c".into(),
            schema_fingerprint: "f".into(),
            build_id: "b".into(),
            batch_size: 10,
            shard_size_bytes: Some(100),
            compression: Compression::None,
            sources_digest: String::new(),
            row_checksums: false,
        }
    }

    fn shard(dir: &Path, i: usize, bytes: &[u8]) -> ShardRecord {
        let name = crate::layouts::arrow_shards::format::shard_filename(i);
        std::fs::write(dir.join(&name), bytes).unwrap();
        ShardRecord {
            filename: name,
            num_rows: 10,
            num_bytes: bytes.len() as u64,
            xxh64: format!("{:016x}", xxhash_rust::xxh64::xxh64(bytes, 0)),
        }
    }

    #[test]
    fn recovery_drops_a_torn_tail_and_uncommitted_files_and_keeps_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let mut m = ManifestWriter::create(d.path(), &header()).unwrap();
        m.commit(&shard(d.path(), 0, b"zero"), vec![10]).unwrap();
        m.commit(&shard(d.path(), 1, b"one"), vec![10]).unwrap();
        let good_len = std::fs::metadata(d.path().join(MANIFEST_FILE))
            .unwrap()
            .len();
        // A shard written but killed before its line was complete.
        shard(d.path(), 2, b"two");
        let mut f = OpenOptions::new()
            .append(true)
            .open(d.path().join(MANIFEST_FILE))
            .unwrap();
        f.write_all(b"{\"kind\":\"shard\",\"filename\":\"shard-0000")
            .unwrap();
        drop(f);
        let r = recover(d.path()).unwrap();
        assert_eq!(r.header, header());
        assert_eq!(r.shards.len(), 2);
        assert_eq!(r.rows(), 20);
        assert_eq!(r.unit_ends(), vec![10]);
        assert_eq!(r.valid_bytes, good_len);
        assert!(
            !d.path().join("shard-00002.arrow").exists(),
            "uncommitted shard removed"
        );
        // Appending after recovery continues the valid prefix.
        let mut m = ManifestWriter::reopen(d.path(), r.valid_bytes).unwrap();
        m.commit(&shard(d.path(), 2, b"two"), vec![]).unwrap();
        assert_eq!(recover(d.path()).unwrap().shards.len(), 3);
    }

    #[test]
    fn a_damaged_committed_shard_ends_the_valid_prefix() {
        let d = tempfile::tempdir().unwrap();
        let mut m = ManifestWriter::create(d.path(), &header()).unwrap();
        m.commit(&shard(d.path(), 0, b"zero"), vec![]).unwrap();
        m.commit(&shard(d.path(), 1, b"one"), vec![]).unwrap();
        m.commit(&shard(d.path(), 2, b"two"), vec![]).unwrap();
        std::fs::write(d.path().join("shard-00001.arrow"), b"ONE").unwrap();
        let r = recover(d.path()).unwrap();
        assert_eq!(r.shards.len(), 1);
        assert!(!d.path().join("shard-00002.arrow").exists());
        assert!(recover(&d.path().join("nothing")).is_none());
    }
}
