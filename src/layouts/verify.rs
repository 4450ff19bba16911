//! What `shardset verify` does, for every layout by one rule: check the
//! structure always, the data bytes where checksums are recorded, and say
//! exactly which of those were done.
//!
//! - **Structure**: the metadata parses and agrees with itself (opening the
//!   cache checks that), every shard or Lance fragment opens, every record
//!   batch decodes, the row counts add up to what the metadata records, every
//!   shard has the schema of the features; for frames caches every row is the
//!   frame its video's entry says, and every frame is a WebP of the recorded
//!   size.
//! - **Checksums**: the xxh64 of each shard recorded in `_metadata.json`
//!   (shardset-written Arrow caches), per-row checksums to name the rows of a
//!   damaged shard, and the file checksums of a [`CHECKSUMS_FILE`] that
//!   [`stamp_checksums`] recorded for a cache written without them.
//!
//! A cache that records no checksums (written by the reference, or a Lance
//! cache never stamped) can have a flipped byte in a data buffer that still
//! decodes: the report says its data bytes were not verified, never that
//! they match.

use std::path::{Path, PathBuf};

use crate::cache::checksums::{read_file_checksums, write_file_checksums, xxh64_file_in};
use crate::cache::lock::CacheLock;
#[cfg(feature = "lance")]
use crate::cache::metadata::LAYOUT_LANCE_ROWS;
#[cfg(feature = "video")]
use crate::cache::metadata::LAYOUT_LANCE_VIDEO_FRAMES;
use crate::cache::metadata::{LAYOUT_ARROW_SHARDS, METADATA_FILE};
use crate::error::{Error, Result};
use crate::layouts::arrow_shards::integrity::locate_corrupt_rows;
use crate::layouts::open::{open_cache, Cache, FeaturesSource};
use crate::layouts::ArrowShards;
use crate::storage::storage_for;

/// File checksums recorded by [`stamp_checksums`] for a cache whose writer
/// recorded none. The reference never reads it, so stamping changes nothing
/// the reference sees.
pub use crate::cache::checksums::CHECKSUMS_FILE;

/// One damaged place a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file (a shard, a Lance data file, the metadata).
    pub path: PathBuf,
    /// Global rows known to be changed, where per-row checksums tell.
    pub rows: Vec<u64>,
    /// What is wrong.
    pub reason: String,
}

/// What [`verify_cache`] checked and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The cache directory.
    pub dir: PathBuf,
    /// Its layout (empty when the metadata could not be read).
    pub layout: String,
    /// Each check that was made, in words.
    pub checked: Vec<String>,
    /// Each check that could not be made, and why.
    pub not_checked: Vec<String>,
    /// What was found damaged (empty: no damage found).
    pub damage: Vec<Damage>,
    /// True when checksums covered every data file's bytes.
    pub data_bytes_verified: bool,
}

impl VerifyReport {
    /// True when no damage was found.
    pub fn is_ok(&self) -> bool {
        self.damage.is_empty()
    }

    /// One line saying what was checked: for messages such as `why`'s.
    pub fn summary(&self) -> String {
        let mut parts = self.checked.clone();
        parts.extend(self.not_checked.iter().cloned());
        parts.join("; ")
    }

    fn damaged(&mut self, path: &Path, reason: impl Into<String>) {
        self.damage.push(Damage {
            path: path.to_path_buf(),
            rows: Vec::new(),
            reason: reason.into(),
        });
    }
}

/// The path of `e`'s file when it names one, else `fallback`.
fn error_path(e: &Error, fallback: &Path) -> PathBuf {
    match e {
        Error::Io { path, .. }
        | Error::Metadata { path, .. }
        | Error::CorruptShard { path, .. }
        | Error::MissingShard { path }
        | Error::SchemaMismatch { path, .. }
        | Error::UnsupportedVersion { path, .. }
        | Error::UnsupportedLayout { path, .. }
        | Error::Video { path, .. } => path.clone(),
        Error::Arrow { path: Some(p), .. } => p.clone(),
        _ => fallback.to_path_buf(),
    }
}

/// Verifies the cache at `dir` (see the module doc for what that means).
/// Damage is reported, not returned as an error.
///
/// # Errors
/// [`Error::Io`] when `dir` has no `_metadata.json` at all (not a cache).
pub fn verify_cache(dir: &Path) -> Result<VerifyReport> {
    let meta_path = dir.join(METADATA_FILE);
    if !crate::storage::storage_for(dir).is_file(&meta_path) {
        return Err(Error::io(
            "open",
            &meta_path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not a cache (no _metadata.json)",
            ),
        ));
    }
    let mut rep = VerifyReport {
        dir: dir.to_path_buf(),
        layout: String::new(),
        checked: Vec::new(),
        not_checked: Vec::new(),
        damage: Vec::new(),
        data_bytes_verified: false,
    };
    let cache = match open_cache(dir) {
        Ok(c) => c,
        Err(e) => {
            rep.damaged(&error_path(&e, &meta_path), e.to_string());
            return Ok(rep);
        }
    };
    rep.layout = cache.layout.clone();
    rep.checked.push(
        if cache.metadata.has_self_checksum() {
            "metadata consistent and matching its own checksum"
        } else {
            "metadata consistent (it records no checksum of itself)"
        }
        .into(),
    );
    match cache.layout.as_str() {
        LAYOUT_ARROW_SHARDS => structure_arrow(&cache, &mut rep),
        #[cfg(feature = "lance")]
        LAYOUT_LANCE_ROWS => structure_lance(&cache, &mut rep, false),
        #[cfg(feature = "video")]
        LAYOUT_LANCE_VIDEO_FRAMES | crate::cache::metadata::LAYOUT_LANCE_VIDEO_SEGMENTS => {
            structure_lance(&cache, &mut rep, true)
        }
        other => rep.not_checked.push(format!(
            "structure of the {other} layout not checked: this build lacks its feature"
        )),
    }
    checksums(&cache, &mut rep);
    Ok(rep)
}

fn structure_arrow(cache: &Cache, rep: &mut VerifyReport) {
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
fn structure_lance(cache: &Cache, rep: &mut VerifyReport, frames: bool) {
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

/// Checks frames rows against the videos' entries as a scan goes.
#[cfg(feature = "video")]
struct FrameCheck<'a> {
    videos: &'a [crate::cache::metadata::VideoEntry],
    video: usize,
    bad: Option<String>,
    /// A segments cache's codec and frames per segment.
    segments: Option<(crate::video::segment::SegmentCodec, u64)>,
}

#[cfg(feature = "video")]
impl FrameCheck<'_> {
    fn batch(&mut self, first_row: u64, batch: &arrow_array::RecordBatch) {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Int32Type;
        if self.bad.is_some() {
            return;
        }
        if let Some((codec, per)) = self.segments {
            if let Err(bad) = self.segment_batch(codec, per, first_row, batch) {
                self.bad = Some(bad);
            }
            return;
        }
        let (Some(ids), Some(idx), Some(bytes)) = (
            batch.column(0).as_primitive_opt::<Int32Type>(),
            batch.column(1).as_primitive_opt::<Int32Type>(),
            batch.column(2).as_binary_opt::<i64>(),
        ) else {
            self.bad = Some("the frames table does not have the frames schema".into());
            return;
        };
        for r in 0..batch.num_rows() {
            let row = first_row + r as u64;
            while self
                .videos
                .get(self.video)
                .is_some_and(|v| row >= v.start_row + v.t)
            {
                self.video += 1;
            }
            let Some(v) = self.videos.get(self.video) else {
                self.bad = Some(format!("row {row} belongs to no recorded video"));
                return;
            };
            let want_idx = row - v.start_row;
            if i64::from(ids.value(r)) != v.id || u64::try_from(idx.value(r)).ok() != Some(want_idx)
            {
                self.bad = Some(format!(
                    "row {row} is video {} frame {}, the metadata says video {} frame {want_idx}",
                    ids.value(r),
                    idx.value(r),
                    v.id
                ));
                return;
            }
            match crate::video::webp::dimensions(bytes.value(r)) {
                Ok((w, h)) if w as u64 == v.w && h as u64 == v.h => {}
                Ok((w, h)) => {
                    self.bad = Some(format!(
                        "row {row} (video {} frame {want_idx}) is {w}x{h}, the metadata says {}x{}",
                        v.id, v.w, v.h
                    ));
                    return;
                }
                Err(e) => {
                    self.bad = Some(format!(
                        "row {row} (video {} frame {want_idx}) is not a WebP frame: {e}",
                        v.id
                    ));
                    return;
                }
            }
        }
    }
}

#[cfg(feature = "video")]
impl FrameCheck<'_> {
    /// Segment rows: each the next segment of its video, with the frames
    /// it should hold, decoding (without conversion) to exactly them.
    fn segment_batch(
        &mut self,
        codec: crate::video::segment::SegmentCodec,
        per: u64,
        first_row: u64,
        batch: &arrow_array::RecordBatch,
    ) -> std::result::Result<(), String> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type, Int64Type};
        let (Some(ids), Some(seg), Some(first), Some(count), Some(data), Some(offsets)) = (
            batch.column(0).as_primitive_opt::<Int32Type>(),
            batch.column(1).as_primitive_opt::<Int32Type>(),
            batch.column(2).as_primitive_opt::<Int64Type>(),
            batch.column(3).as_primitive_opt::<Int32Type>(),
            batch.column(4).as_binary_opt::<i64>(),
            batch.column(5).as_list_opt::<i32>(),
        ) else {
            return Err("the segments table does not have the segments schema".into());
        };
        for r in 0..batch.num_rows() {
            let row = first_row + r as u64;
            let rows_of = |v: &crate::cache::metadata::VideoEntry| v.t.div_ceil(per);
            while self
                .videos
                .get(self.video)
                .is_some_and(|v| row >= v.start_row + rows_of(v))
            {
                self.video += 1;
            }
            let v = self
                .videos
                .get(self.video)
                .ok_or_else(|| format!("row {row} belongs to no recorded video"))?;
            let s = row - v.start_row;
            let (want_first, want_count) = (s * per, per.min(v.t - s * per));
            if i64::from(ids.value(r)) != v.id
                || i64::from(seg.value(r)) != s as i64
                || first.value(r) != want_first as i64
                || i64::from(count.value(r)) != want_count as i64
            {
                return Err(format!(
                    "row {row} is video {} segment {} (frames {}..+{}), the metadata says video {} segment {s} (frames {want_first}..+{want_count})",
                    ids.value(r),
                    seg.value(r),
                    first.value(r),
                    count.value(r),
                    v.id
                ));
            }
            let offs: Vec<u64> = offsets
                .value(r)
                .as_primitive_opt::<Int64Type>()
                .map(|o| o.values().iter().map(|&x| x.max(0) as u64).collect())
                .unwrap_or_default();
            // The frame each packet presents, when the cache records them:
            // none (the encoder gave no timestamps) or each frame once.
            if let Some(list) = batch.columns().get(6) {
                match crate::layouts::video_frames::format::packet_frames_at(list, r) {
                    Some(f)
                        if f.is_empty()
                            || (f.len() + 1 == offs.len()
                                && crate::video::segment::is_permutation(
                                    &f,
                                    want_count as usize,
                                )) => {}
                    _ => {
                        return Err(format!(
                            "row {row} (video {} segment {s}): its packet frames do not name each of its {want_count} frames once, one per packet",
                            v.id
                        ))
                    }
                }
            }
            let (w, h) = (v.w as u32, v.h as u32);
            let n = crate::video::segment::decode_segment_picked(
                &crate::video::segment::SegmentRead {
                    codec,
                    coded: (w + (w & 1), h + (h & 1)),
                    crop: (w, h),
                    data: data.value(r),
                    packet_offsets: &offs,
                    packet_frames: None,
                    pick: &|_| false,
                    upto: usize::MAX,
                },
                |_, _| {},
            )
            .map_err(|e| format!("row {row} (video {} segment {s}): {e}", v.id))?;
            if n as u64 != want_count {
                return Err(format!(
                    "row {row} (video {} segment {s}) decodes to {n} frames, it holds {want_count}",
                    v.id
                ));
            }
        }
        Ok(())
    }
}

fn checksums(cache: &Cache, rep: &mut VerifyReport) {
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

/// Records the xxh64 of every data file of a cache that records none, in
/// [`CHECKSUMS_FILE`] beside its metadata, so that later [`verify_cache`]
/// runs check its data bytes. Nothing the reference reads changes. The
/// cache's structure is verified first: a damaged cache is not stamped.
/// Returns the number of files stamped.
///
/// # Errors
/// [`Error::InvalidArgument`] when the cache is already stamped or found
/// damaged; I/O errors naming the file.
pub fn stamp_checksums(dir: &Path) -> Result<usize> {
    let storage = storage_for(dir);
    let _lock = CacheLock::acquire_in(&storage, dir)?;
    let path = dir.join(CHECKSUMS_FILE);
    if storage.exists(&path) {
        return Err(Error::InvalidArgument(format!(
            "{} already exists: the cache is stamped",
            path.display()
        )));
    }
    let rep = verify_cache(dir)?;
    if let Some(d) = rep.damage.first() {
        return Err(Error::InvalidArgument(format!(
            "not stamping a damaged cache: {}: {}",
            d.path.display(),
            d.reason
        )));
    }
    write_file_checksums(storage.as_ref(), dir, &[])
}
