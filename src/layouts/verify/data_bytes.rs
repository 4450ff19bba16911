//! The data-bytes checks: shards against the xxh64 `_metadata.json`
//! records (per-row checksums naming the changed rows), and files against
//! the checksums [`stamp_checksums`](super::stamp_checksums) recorded.

use crate::cache::checksums::{read_file_checksums, xxh64_file_in};
use crate::layouts::arrow_shards::integrity::locate_corrupt_rows;
use crate::layouts::open::Cache;
use crate::storage::storage_for;

use super::{error_path, Damage, VerifyReport, CHECKSUMS_FILE};

pub(super) fn checksums(cache: &Cache, rep: &mut VerifyReport) {
    let dir = &cache.dir;
    let mut covered = false;
    if let Some(sums) = cache
        .metadata
        .as_arrow_shards()
        .and_then(|m| m.shard_xxh64.as_ref())
    {
        match crate::layouts::arrow_shards::integrity::verify_checksums(dir) {
            Ok(bad) => {
                let rows = if bad.is_empty() {
                    Vec::new()
                } else {
                    locate_corrupt_rows(dir).unwrap_or_default()
                };
                for b in bad {
                    let changed = rows
                        .iter()
                        .find(|l| l.shard == b.path)
                        .map(|l| l.rows.clone())
                        .unwrap_or_default();
                    rep.damage.push(Damage {
                        path: b.path.clone(),
                        rows: changed,
                        reason: format!(
                            "xxh64 is {}, the metadata records {}",
                            b.found, b.expected
                        ),
                    });
                }
                rep.checked.push(format!(
                    "data bytes: {} shard(s) against the xxh64 recorded in _metadata.json{}",
                    sums.len(),
                    if cache
                        .metadata
                        .as_arrow_shards()
                        .and_then(|m| m.row_checksums)
                        == Some(true)
                    {
                        " (per-row checksums name the changed rows)"
                    } else {
                        ""
                    }
                ));
                covered = true;
            }
            Err(e) => rep.damaged(&error_path(&e, dir), e.to_string()),
        }
    }
    let storage = storage_for(dir);
    let stamp_path = dir.join(CHECKSUMS_FILE);
    if storage.exists(&stamp_path) {
        match read_file_checksums(storage.as_ref(), &stamp_path) {
            Err(e) => rep.damaged(&stamp_path, e.to_string()),
            Ok(stamp) => {
                for f in &stamp.files {
                    // Stamped by an older writer; replaced by Lance at each commit.
                    if crate::cache::checksums::MUTABLE_FILES.contains(&f.path.as_str()) {
                        continue;
                    }
                    let path = dir.join(&f.path);
                    match storage.stat(&path) {
                        Err(e) => {
                            rep.damaged(&path, format!("stamped file cannot be read: {e}"));
                            continue;
                        }
                        Ok(None) => {
                            rep.damaged(
                                &path,
                                "stamped file cannot be read: No such file or directory (os error 2)",
                            );
                            continue;
                        }
                        Ok(Some(m)) if m.len != f.bytes => {
                            rep.damaged(
                                &path,
                                format!("{} bytes, stamped with {}", m.len, f.bytes),
                            );
                            continue;
                        }
                        Ok(Some(_)) => {}
                    }
                    match xxh64_file_in(storage.as_ref(), &path) {
                        Ok(got) if got == f.xxh64 => {}
                        Ok(got) => rep.damaged(
                            &path,
                            format!("xxh64 is {got}, {CHECKSUMS_FILE} records {}", f.xxh64),
                        ),
                        Err(e) => rep.damaged(&path, e.to_string()),
                    }
                }
                rep.checked.push(format!(
                    "data bytes: {} file(s) against the xxh64 stamped in {CHECKSUMS_FILE}",
                    stamp.files.len()
                ));
                covered = true;
            }
        }
    }
    rep.data_bytes_verified = covered;
    if !covered {
        rep.not_checked.push(format!(
            "no checksums recorded: data bytes not verified (`shardset verify --stamp` records them in {CHECKSUMS_FILE})"
        ));
    }
}
