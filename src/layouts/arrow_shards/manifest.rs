//! The append-only build manifest that makes a killed build resumable.
//!
//! `_manifest.jsonl` lives in the build's temp dir. Its first line describes
//! the build (cache name, schema fingerprint, build id and every option that
//! shapes the shards); each later line commits one closed shard, written only
//! after the shard's bytes are fsynced, and is itself fsynced. A killed build
//! therefore leaves a manifest whose lines all describe complete shards, except
//! possibly a torn last line, which is dropped on resume.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::build::LogLine;
use crate::cache::rowsum::ROW_SUMS_DIR;
use crate::error::Result;
use crate::layouts::arrow_shards::dedup::DEDUP_DIR;
use crate::layouts::arrow_shards::format::Compression;
use crate::storage::Storage;

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
    /// The dedup threshold, when large repeated cells are stored once.
    #[serde(default)]
    pub dedup_threshold: Option<u64>,
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
    /// Deduped cells in it (its refs file's entries).
    #[serde(default)]
    pub refs: u64,
    /// Cumulative row counts at which work units ended, as known when this
    /// shard was committed (lets a resume skip whole units).
    #[serde(default)]
    pub unit_ends: Vec<u64>,
    /// xxh64 of its row-checksum sidecars (`.xxh`, then `.cols`), when
    /// row checksums are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars_xxh64: Option<String>,
}

impl LogLine for ManifestHeader {
    const KIND: &'static str = "header";
}

impl LogLine for ManifestShard {
    const KIND: &'static str = "shard";
}

/// Whether a manifest line commits the next shard of `dir` and that shard's
/// files are intact: the shard (size and xxh64), its refs file (count and
/// its own checksum) and its row-checksum sidecars (their xxh64).
pub(crate) fn committed_shard_ok(
    storage: &dyn Storage,
    dir: &Path,
    s: &ManifestShard,
    before: &[ManifestShard],
) -> bool {
    let expected = crate::layouts::arrow_shards::format::shard_filename(before.len());
    let path = dir.join(&s.filename);
    let refs = crate::layouts::arrow_shards::dedup::refs_path(dir, &s.filename);
    s.filename == expected
        && matches!(storage.stat(&path), Ok(Some(e)) if e.len == s.num_bytes)
        && crate::cache::checksums::xxh64_file_in(storage, &path).is_ok_and(|h| h == s.xxh64)
        && (s.refs == 0 || crate::layouts::arrow_shards::dedup::refs_intact(storage, &refs, s.refs))
        && s.sidecars_xxh64.as_ref().is_none_or(|want| {
            crate::cache::rowsum::sidecars_digest_on_disk(storage, dir, &s.filename)
                .is_ok_and(|got| &got == want)
        })
}

/// Deletes every shard file of `dir` the manifest does not commit, and
/// the sidecars (refs, row checksums) of those shards.
pub(crate) fn drop_uncommitted(
    storage: &dyn Storage,
    dir: &Path,
    shards: &[ManifestShard],
) -> Result<()> {
    let committed = |name: &str| shards.iter().any(|s| s.filename == name);
    for e in storage.list(dir)? {
        let name = e.name();
        if name.starts_with("shard-") && !committed(&name) {
            storage.remove_file(&e.path)?;
        }
    }
    for sub in [DEDUP_DIR, ROW_SUMS_DIR] {
        let d = dir.join(sub);
        if !storage.is_dir(&d) {
            continue;
        }
        for e in storage.list(&d)? {
            // `<shard>.refs`, `<shard>.xxh`, `<shard>.cols`
            let name = e.name();
            if !committed(name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s)) {
                storage.remove_file(&e.path)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::build::ResumeLog;
    use crate::layouts::arrow_shards::format::ShardRecord;
    use crate::storage::StorageRef;
    use std::path::PathBuf;

    /// The manifest's appender: one [`ManifestShard`] line per closed shard.
    type ManifestWriter = ResumeLog<ManifestShard>;

    /// A manifest read back from a killed build and checked against its files.
    #[derive(Debug, Clone)]
    struct RecoveredBuild {
        /// The build's temp dir.
        #[allow(dead_code)]
        dir: PathBuf,
        /// Its header.
        header: ManifestHeader,
        /// Committed shards whose files are intact, in order.
        shards: Vec<ManifestShard>,
        /// Length of the manifest's valid prefix (header + intact shard lines).
        valid_bytes: u64,
    }

    impl RecoveredBuild {
        /// Rows committed.
        fn rows(&self) -> u64 {
            self.shards.iter().map(|s| s.num_rows).sum()
        }

        /// Cumulative unit ends known at the last commit.
        fn unit_ends(&self) -> Vec<u64> {
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
    fn recover(storage: &StorageRef, dir: &Path) -> Option<RecoveredBuild> {
        let r = ManifestWriter::read::<ManifestHeader>(
            storage,
            &dir.join(MANIFEST_FILE),
            |s, before| committed_shard_ok(storage.as_ref(), dir, s, before),
        )?;
        drop_uncommitted(storage.as_ref(), dir, &r.records).ok()?;
        Some(RecoveredBuild {
            dir: dir.to_path_buf(),
            header: r.header,
            shards: r.records,
            valid_bytes: r.valid_bytes,
        })
    }

    use std::io::Write;

    fn commit(m: &mut ManifestWriter, r: ShardRecord, unit_ends: Vec<u64>) {
        m.append(&ManifestShard {
            filename: r.filename,
            num_rows: r.num_rows,
            num_bytes: r.num_bytes,
            xxh64: r.xxh64,
            refs: r.refs,
            unit_ends,
            sidecars_xxh64: None,
        })
        .unwrap();
    }

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
            dedup_threshold: None,
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
            refs: 0,
        }
    }

    #[test]
    fn recovery_drops_a_torn_tail_and_uncommitted_files_and_keeps_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::storage::local();
        let mut m = ManifestWriter::create(&s, &d.path().join(MANIFEST_FILE), &header()).unwrap();
        commit(&mut m, shard(d.path(), 0, b"zero"), vec![10]);
        commit(&mut m, shard(d.path(), 1, b"one"), vec![10]);
        let good_len = std::fs::metadata(d.path().join(MANIFEST_FILE))
            .unwrap()
            .len();
        // A shard written but killed before its line was complete.
        shard(d.path(), 2, b"two");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join(MANIFEST_FILE))
            .unwrap();
        f.write_all(b"{\"kind\":\"shard\",\"filename\":\"shard-0000")
            .unwrap();
        drop(f);
        let r = recover(&s, d.path()).unwrap();
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
        let mut m =
            ManifestWriter::reopen(&s, &d.path().join(MANIFEST_FILE), r.valid_bytes).unwrap();
        commit(&mut m, shard(d.path(), 2, b"two"), vec![]);
        assert_eq!(recover(&s, d.path()).unwrap().shards.len(), 3);
    }

    #[test]
    fn a_line_changed_after_it_was_written_ends_the_valid_prefix() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::storage::local();
        let path = d.path().join(MANIFEST_FILE);
        let mut m = ManifestWriter::create(&s, &path, &header()).unwrap();
        commit(&mut m, shard(d.path(), 0, b"zero"), vec![10]);
        commit(&mut m, shard(d.path(), 1, b"one"), vec![10, 20]);
        let text = std::fs::read_to_string(&path).unwrap();
        // The second shard's row count; its name, size and xxh64 still right.
        let lied = text.replacen(
            "\"num_rows\":10,\"num_bytes\":3,",
            "\"num_rows\":12,\"num_bytes\":3,",
            1,
        );
        assert_ne!(lied, text);
        std::fs::write(&path, lied).unwrap();
        let r = recover(&s, d.path()).unwrap();
        assert_eq!(r.shards.len(), 1);
        assert_eq!(r.rows(), 10);
        assert!(!d.path().join("shard-00001.arrow").exists());
    }

    #[test]
    fn a_damaged_committed_shard_ends_the_valid_prefix() {
        let d = tempfile::tempdir().unwrap();
        let s = crate::storage::local();
        let mut m = ManifestWriter::create(&s, &d.path().join(MANIFEST_FILE), &header()).unwrap();
        commit(&mut m, shard(d.path(), 0, b"zero"), vec![]);
        commit(&mut m, shard(d.path(), 1, b"one"), vec![]);
        commit(&mut m, shard(d.path(), 2, b"two"), vec![]);
        std::fs::write(d.path().join("shard-00001.arrow"), b"ONE").unwrap();
        let r = recover(&s, d.path()).unwrap();
        assert_eq!(r.shards.len(), 1);
        assert!(!d.path().join("shard-00002.arrow").exists());
        assert!(recover(&s, &d.path().join("nothing")).is_none());
    }
}
