//! The structure checks: every shard or Lance fragment opens, every batch
//! decodes, the rows add up to what the metadata records (and, for the
//! video layouts, every row is what its video's entry says).

use crate::layouts::open::{Cache, FeaturesSource};
use crate::layouts::ArrowShards;

#[cfg(feature = "video")]
use super::frames::FrameCheck;
use super::{error_path, VerifyReport};

pub(super) fn structure_arrow(cache: &Cache, rep: &mut VerifyReport) {
    // The cache's own backend: decompressed batches stay within its budget.
    let Some(be) = cache.backend.as_any().downcast_ref::<ArrowShards>() else {
        return rep
            .not_checked
            .push("structure not checked: not an Arrow shards backend".into());
    };
    let counts = crate::layouts::backend::Backend::shard_row_counts(be).to_vec();
    let mut rows_total = 0u64;
    let mut batches = 0usize;
    for (i, (path, &rows)) in be.shard_paths().iter().zip(&counts).enumerate() {
        // Opening a shard checks its footer schema against the features'.
        let n = match be.shard_num_batches(i) {
            Ok(n) => n,
            Err(e) => {
                rep.damaged(&error_path(&e, path), e.to_string());
                continue;
            }
        };
        let mut got = 0u64;
        for b in 0..n {
            match be.read_batch(i, b) {
                Ok(batch) => got += batch.num_rows() as u64,
                Err(e) => {
                    rep.damaged(
                        &error_path(&e, path),
                        format!("record batch {b} does not decode: {e}"),
                    );
                    break;
                }
            }
        }
        let mut refs_ok = true;
        if let Err(e) = be.dedup_refs(i) {
            rep.damaged(&error_path(&e, path), e.to_string());
            refs_ok = false;
        }
        batches += n;
        rows_total += got;
        if !refs_ok {
            continue;
        }
        if got != rows && !rep.damage.iter().any(|d| &d.path == path) {
            rep.damaged(
                path,
                format!("{got} row(s) decoded, the metadata records {rows}"),
            );
        }
    }
    rep.checked.push(format!(
        "structure: {} shard(s) open, {batches} record batch(es) decode to {rows_total} row(s), schema {}",
        counts.len(),
        match cache.features_source {
            FeaturesSource::Inferred => "consistent across shards (features inferred: no description to match)",
            _ => "matches the features and their fingerprint",
        }
    ));
}

#[cfg(feature = "lance")]
pub(super) fn structure_lance(cache: &Cache, rep: &mut VerifyReport, frames: bool) {
    use crate::lance::scan_dataset;
    let dir = &cache.dir;
    // The videos as opening the cache parsed and checked them.
    #[cfg(feature = "video")]
    let videos = cache
        .backend
        .as_any()
        .downcast_ref::<crate::layouts::LanceVideoFrames>()
        .map(|f| f.metadata().videos.clone())
        .unwrap_or_default();
    #[cfg(feature = "video")]
    let segments = cache
        .metadata
        .as_video_frames()
        .and_then(|m| m.segments.as_ref())
        .and_then(|s| {
            Some((
                s.codec
                    .parse::<crate::video::segment::SegmentCodec>()
                    .ok()?,
                u64::from(s.frames_per_segment.max(1)),
            ))
        });
    #[cfg(not(feature = "video"))]
    let segments: Option<()> = None;
    let packet_frames = cache
        .metadata
        .as_video_frames()
        .and_then(|m| m.segments.as_ref())
        .is_some_and(|s| s.packet_frames);
    let columns: Vec<String> = if frames && segments.is_some() {
        let mut c: Vec<String> = crate::cache::metadata::SEGMENT_COLUMNS[..6]
            .iter()
            .map(|c| c.to_string())
            .collect();
        if packet_frames {
            c.push(crate::cache::metadata::SEGMENT_PACKET_FRAMES.into());
        }
        c
    } else if frames {
        vec!["video_id".into(), "frame_idx".into(), "bytes".into()]
    } else {
        cache
            .backend
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    #[cfg(feature = "video")]
    let mut frame_check = FrameCheck {
        videos: &videos,
        video: 0,
        bad: None,
        segments,
    };
    // The Lance version this cache version reads (an edited cache's
    // history holds others).
    let version = match cache
        .backend
        .as_any()
        .downcast_ref::<crate::layouts::LanceRows>()
    {
        Some(rows) => match rows.lance_version() {
            Ok(v) => Some(v),
            Err(e) => {
                rep.damaged(&error_path(&e, dir), e.to_string());
                return;
            }
        },
        None => None,
    };
    let mut row = 0u64;
    let scanned = scan_dataset(dir, version, &columns, |batch| {
        #[cfg(feature = "video")]
        if frames {
            frame_check.batch(row, batch);
        }
        row += batch.num_rows() as u64;
    });
    match scanned {
        Err(e) => rep.damaged(&error_path(&e, dir), e.to_string()),
        Ok(fragments) => {
            let total: u64 = fragments.iter().sum();
            let want: &[u64] = cache.backend.shard_row_counts();
            let recorded_rows = cache.metadata.num_rows();
            // A frames cache counts `total_rows` (0: not recorded).
            let expected_rows = match cache.metadata.as_video_frames() {
                Some(m) if frames && m.segments.is_some() => {
                    m.segments.as_ref().map_or(0, |s| s.num_segments)
                }
                Some(m) if frames && m.total_rows > 0 => m.total_rows,
                Some(_) if frames => total,
                _ => recorded_rows,
            };
            if total != expected_rows {
                rep.damaged(
                    dir,
                    format!("{total} row(s) decoded, the metadata records {expected_rows}"),
                );
            } else if !frames && fragments.as_slice() != want {
                rep.damaged(
                    dir,
                    format!("fragment row counts {fragments:?}, the metadata records {want:?}"),
                );
            }
            #[cfg(feature = "video")]
            if let Some(bad) = frame_check.bad.take() {
                rep.damaged(dir, bad);
            }
            rep.checked.push(format!(
                "structure: {} Lance fragment(s) open and decode to {total} row(s){}",
                fragments.len(),
                if frames && segments.is_some() {
                    ", every row the segment its video's entry says, every segment decoding to exactly its frames"
                } else if frames {
                    ", every row the frame its video's entry says, every frame a WebP of the recorded size"
                } else {
                    ", schema matches the features"
                }
            ));
        }
    }
}
