//! The `open_segments_cache` target's entry (its modes: entry.rs's
//! documentation): the seed caches loaded once, their rows rewritten or
//! their packets edited, then every read of the cache, or the packets sent
//! straight to the segment decoder.

use std::path::Path;
use std::sync::OnceLock;

use shardset::{open_cache, Backend, IterOptions};

use super::{copy_dir, edited};

/// One Lance row of a segments cache.
#[derive(Clone, Debug)]
struct SegRow {
    video_id: i32,
    segment_idx: i32,
    first_frame: i64,
    frame_count: i32,
    data: Vec<u8>,
    packet_offsets: Vec<i64>,
    quality: [f64; 4],
    packet_frames: Vec<i32>,
}

/// A seed segments cache, loaded: its rows, the stored size of each row's
/// video, and where each row's packets lie in its one data file.
struct SegSeed {
    dir: std::path::PathBuf,
    codec: shardset::SegmentCodec,
    metadata: Vec<u8>,
    rows: Vec<SegRow>,
    sizes: Vec<(u32, u32)>,
    data_file: std::path::PathBuf,
    data_at: Vec<usize>,
}

/// The seeds under `root` (the H.264 cache, then the AV1 one).
fn segment_seeds(root: &Path) -> &'static [SegSeed; 2] {
    static S: OnceLock<[SegSeed; 2]> = OnceLock::new();
    S.get_or_init(|| ["segments_h264", "segments_av1"].map(|n| load_segment_seed(&root.join(n))))
}

fn load_segment_seed(dir: &Path) -> SegSeed {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int32Type, Int64Type};
    let metadata = std::fs::read(dir.join("_metadata.json")).unwrap();
    let m: serde_json::Value = serde_json::from_slice(&metadata).unwrap();
    let codec = m["segments"]["codec"].as_str().unwrap().parse().unwrap();
    let per = m["segments"]["frames_per_segment"].as_u64().unwrap();
    let mut sizes = Vec::new();
    for v in m["videos"].as_array().unwrap() {
        let n = |k: &str| v[k].as_u64().unwrap();
        for _ in 0..n("T").div_ceil(per) {
            sizes.push((n("W") as u32, n("H") as u32));
        }
    }
    let columns: Vec<String> = shardset::layouts::video_frames::format::segments_schema(true)
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut rows = Vec::new();
    shardset::lance::scan_dataset(dir, None, &columns, |b| {
        let int32 = |k: usize, r: usize| b.column(k).as_primitive::<Int32Type>().value(r);
        let float = |k: usize, r: usize| b.column(k).as_primitive::<Float64Type>().value(r);
        for r in 0..b.num_rows() {
            let offsets = b.column(5).as_list::<i32>().value(r);
            let frames = b.column(10).as_list::<i32>().value(r);
            rows.push(SegRow {
                video_id: int32(0, r),
                segment_idx: int32(1, r),
                first_frame: b.column(2).as_primitive::<Int64Type>().value(r),
                frame_count: int32(3, r),
                data: b.column(4).as_binary::<i64>().value(r).to_vec(),
                packet_offsets: offsets.as_primitive::<Int64Type>().values().to_vec(),
                quality: [float(6, r), float(7, r), float(8, r), float(9, r)],
                packet_frames: frames.as_primitive::<Int32Type>().values().to_vec(),
            });
        }
    })
    .unwrap();
    let file = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&file).unwrap();
    let data_at = rows
        .iter()
        .map(|r| {
            bytes
                .windows(r.data.len())
                .position(|w| w == r.data.as_slice())
                .expect("packets stored verbatim")
        })
        .collect();
    assert_eq!(rows.len(), sizes.len());
    SegSeed {
        dir: dir.to_path_buf(),
        codec,
        metadata,
        rows,
        sizes,
        data_file: file.strip_prefix(dir).unwrap().to_path_buf(),
        data_at,
    }
}

/// `offsets` for packets cut (or grown) to `len` bytes: each at most
/// `len`, the last `len`.
fn offsets_for(offsets: &[i64], len: usize) -> Vec<i64> {
    let mut out: Vec<i64> = offsets.iter().map(|&o| o.min(len as i64)).collect();
    if let Some(last) = out.last_mut() {
        *last = len as i64;
    }
    out
}

/// The rows as a segments dataset (its columns but `drop`) at `dir`.
fn write_segment_rows(dir: &Path, rows: &[SegRow], drop: &[String]) -> Result<(), String> {
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, Int64Builder, ListBuilder};
    use arrow_array::{
        ArrayRef, Float64Array, Int32Array, Int64Array, LargeBinaryArray, RecordBatch,
        RecordBatchIterator,
    };
    let schema = shardset::layouts::video_frames::format::segments_schema(true);
    let mut offsets = ListBuilder::new(Int64Builder::new());
    let mut frames = ListBuilder::new(Int32Builder::new());
    for r in rows {
        offsets.values().append_slice(&r.packet_offsets);
        offsets.append(true);
        frames.values().append_slice(&r.packet_frames);
        frames.append(true);
    }
    let quality = |k: usize| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|r| r.quality[k]),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.video_id),
        )),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.segment_idx),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.first_frame),
        )),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.frame_count),
        )),
        Arc::new(LargeBinaryArray::from_iter_values(
            rows.iter().map(|r| r.data.as_slice()),
        )),
        Arc::new(offsets.finish()),
        quality(0),
        quality(1),
        quality(2),
        quality(3),
        Arc::new(frames.finish()),
    ];
    let keep: Vec<usize> = (0..columns.len())
        .filter(|&k| !drop.contains(schema.field(k).name()))
        .collect();
    let schema = Arc::new(schema.project(&keep).map_err(|e| e.to_string())?);
    let columns = keep.iter().map(|&k| columns[k].clone()).collect();
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())?;
    let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
    let uri = dir.to_str().ok_or("a UTF-8 path")?.to_string();
    shardset::lance::block_on(async move {
        lance::dataset::Dataset::write(reader, uri.as_str(), None)
            .await
            .map(|_| ())
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// Mode 2's edits (see the module documentation) applied to `rows`; the
/// columns to drop, or None when the bytes are not such JSON.
fn edit_segment_rows(rows: &mut Vec<SegRow>, body: &[u8]) -> Option<Vec<String>> {
    use serde_json::Value as J;
    let j: J = serde_json::from_slice(body).ok()?;
    let num = |v: &J| v.as_i64().or_else(|| v.as_u64().map(|u| u as i64));
    let list = |v: Option<&J>| -> Option<Vec<i64>> {
        Some(v?.as_array()?.iter().take(4096).filter_map(num).collect())
    };
    if let Some(n) = j.get("len").and_then(J::as_u64) {
        let last = rows.last().cloned()?;
        rows.resize(n.min(64) as usize, last);
    }
    for (r, e) in rows.iter_mut().zip(j.get("rows")?.as_array()?) {
        let field = |k: &str| e.get(k).and_then(num);
        if let Some(v) = field("video_id") {
            r.video_id = v as i32;
        }
        if let Some(v) = field("segment_idx") {
            r.segment_idx = v as i32;
        }
        if let Some(v) = field("first_frame") {
            r.first_frame = v;
        }
        if let Some(v) = field("frame_count") {
            r.frame_count = v as i32;
        }
        if let Some(v) = list(e.get("packet_offsets")) {
            r.packet_offsets = v;
        }
        if let Some(v) = list(e.get("packet_frames")) {
            r.packet_frames = v.into_iter().map(|f| f as i32).collect();
        }
    }
    Some(
        j.get("drop")
            .and_then(J::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Reads windows of `f`: some one by one (the first and last twice, so
/// the segment decoded last serves them), two as a batch; what the first
/// read gave.
fn read_windows(f: &shardset::LanceVideoFrames) -> shardset::Result<()> {
    let n = f.len() as i64;
    let first = f.windows(&[0, -1, n / 2, 0]).map(drop);
    let _ = f.windows(&[n / 2]);
    // At most four frames a read of a batch: a frame may claim 16383x16383.
    let batch = f.windows_batch(&[-2, -1]).map(drop);
    let _ = f.windows_batch(&[1, 0]);
    let _ = f.window_places(&[0, -1]);
    let _ = f.sample(2, 1, true);
    first.and(batch)
}

/// Opens the segments cache at `dir` and reads it as rows and as windows
/// of three specs; what the first reads gave.
fn read_segments_cache(dir: &Path) -> shardset::Result<()> {
    let cache = open_cache(dir)?;
    let b = cache.backend.as_ref();
    let n = b.len() as i64;
    for i in [0, n / 2, -1] {
        let _ = b.get(i);
    }
    let _ = b.take(&[n - 1, 0, 1]);
    let _ = b.slice(1, 2);
    if let Ok(it) = b.iter_batches(&IterOptions::default().with_shuffle_seed(1)) {
        for batch in it.take(1).flatten() {
            let _ = b.decoder().decode_batch(&batch);
        }
    }
    let f = b
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .ok_or_else(|| shardset::Error::InvalidArgument("not a video cache".into()))?;
    let first = read_windows(f);
    for (t, skip, hop) in [(2, 1, 1), (2, 0, 5)] {
        if let Ok(g) = shardset::WindowSpec::try_new(t, skip, hop).and_then(|s| f.with_windows(s)) {
            let _ = read_windows(&g);
        }
    }
    first
}

/// A seed row's packets replaced by `packets` and decoded with no cache
/// around (mode 5): frames picked by the bits of `pick`, the packet frames
/// used (bit 0 of `flags`) or not, a second decode to RGB (bit 1), to the
/// segment's end (bit 2, without packet frames), at the stored size
/// (bit 3, odd sides not coded one larger).
fn decode_segment_input(
    seed: &SegSeed,
    row: u8,
    pick: u8,
    flags: u8,
    packets: &[u8],
) -> Result<(), String> {
    use std::mem::MaybeUninit;

    use shardset::video::segment::{
        decode_segment_frames, decode_segment_picked, DecodedFrame, SegmentRead,
    };
    let k = row as usize % seed.rows.len();
    let r = &seed.rows[k];
    let (w, h) = seed.sizes[k];
    let offsets: Vec<u64> = offsets_for(&r.packet_offsets, packets.len())
        .into_iter()
        .map(|o| o as u64)
        .collect();
    let frames: Vec<i64> = r.packet_frames.iter().map(|&f| i64::from(f)).collect();
    let timed = flags & 1 != 0;
    let upto = if flags & 4 != 0 && !timed {
        usize::MAX
    } else {
        8 - pick.leading_zeros() as usize
    };
    let picked = move |i: usize| i < 8 && (pick >> i) & 1 == 1;
    let read = SegmentRead {
        codec: seed.codec,
        coded: if flags & 8 != 0 {
            (w, h)
        } else {
            (w + (w & 1), h + (h & 1))
        },
        crop: (w, h),
        data: packets,
        packet_offsets: &offsets,
        packet_frames: timed.then_some(frames.as_slice()),
        pick: &picked,
        upto,
    };
    let rgb = |f: &DecodedFrame| {
        let mut out = vec![MaybeUninit::uninit(); f.rgb_len()];
        f.to_rgb(&mut out)
    };
    let (_, kept) = decode_segment_frames(&read, &mut |_, f| rgb(f))?;
    for (_, f) in &kept {
        rgb(f)?;
    }
    if flags & 2 != 0 {
        decode_segment_picked(&read, |_, px| {
            std::hint::black_box(px);
        })?;
    }
    Ok(())
}

/// One input of the `open_segments_cache` target (see the module
/// documentation), beside the seed caches under `seeds`; what reading and
/// verifying gave (damage found is an error).
pub fn open_segments_input(data: &[u8], seeds: &Path) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    let seed = &segment_seeds(seeds)[usize::from(mode & 1)];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let video_err = |reason: String| shardset::Error::Video {
        path: seed.dir.clone(),
        reason,
    };
    let rows_with = |body: &[u8]| -> Option<Vec<SegRow>> {
        let (&row, packets) = body.split_first()?;
        let mut rows = seed.rows.clone();
        let r = &mut rows[row as usize % seed.rows.len()];
        r.packet_offsets = offsets_for(&r.packet_offsets, packets.len());
        r.data = packets.to_vec();
        Some(rows)
    };
    match (mode >> 1) % 6 {
        k @ (0 | 1) => {
            copy_dir(&seed.dir, &dir);
            let meta = match k {
                0 => body.to_vec(),
                _ => edited(&seed.metadata, body),
            };
            std::fs::write(dir.join("_metadata.json"), meta).unwrap();
        }
        3 => {
            copy_dir(&seed.dir, &dir);
            let mut packets: Vec<u8> = seed.rows.iter().flat_map(|r| r.data.clone()).collect();
            for e in body.chunks_exact(3) {
                let at = u16::from_le_bytes([e[0], e[1]]) as usize % packets.len();
                packets[at] ^= e[2];
            }
            let path = dir.join(&seed.data_file);
            let mut file = std::fs::read(&path).unwrap();
            let mut from = 0;
            for (r, &at) in seed.rows.iter().zip(&seed.data_at) {
                let n = r.data.len();
                file[at..at + n].copy_from_slice(&packets[from..from + n]);
                from += n;
            }
            std::fs::write(&path, file).unwrap();
        }
        k @ (2 | 4) => {
            let (rows, drop) = if k == 2 {
                let mut rows = seed.rows.clone();
                let drop = edit_segment_rows(&mut rows, body)?;
                (rows, drop)
            } else {
                (rows_with(body)?, Vec::new())
            };
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("_metadata.json"), &seed.metadata).unwrap();
            if let Err(e) = write_segment_rows(&dir, &rows, &drop) {
                // Rows Lance will not write (no rows): not a reader's input.
                return Some(Err(video_err(e)));
            }
        }
        _ => {
            let (&[row, pick, flags], packets) = body.split_first_chunk::<3>()?;
            return Some(decode_segment_input(seed, row, pick, flags, packets).map_err(video_err));
        }
    }
    let read = read_segments_cache(&dir);
    let verified = shardset::verify_cache(&dir).and_then(|rep| {
        if rep.is_ok() {
            Ok(())
        } else {
            Err(video_err(format!("verify: {:?}", rep.damage)))
        }
    });
    Some(read.and(verified))
}

/// Valid inputs of every mode for both seeds (each reads without an
/// error), for seed corpora and the replay test.
pub fn open_segments_seeds(seeds: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (c, s) in segment_seeds(seeds).iter().enumerate() {
        let m = |k: u8| c as u8 | (k << 1);
        out.push([&[m(0)], s.metadata.as_slice()].concat());
        out.push(vec![m(1)]);
        let rows: Vec<serde_json::Value> = s
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "video_id": r.video_id,
                    "segment_idx": r.segment_idx,
                    "first_frame": r.first_frame,
                    "frame_count": r.frame_count,
                    "packet_offsets": r.packet_offsets,
                    "packet_frames": r.packet_frames,
                })
            })
            .collect();
        let doc = serde_json::json!({ "rows": rows });
        out.push([vec![m(2)], serde_json::to_vec(&doc).unwrap()].concat());
        out.push(vec![m(3)]);
        for (k, r) in s.rows.iter().enumerate() {
            out.push([&[m(4), k as u8], r.data.as_slice()].concat());
            // Every frame, twice; one frame in the middle, packet frames used.
            out.push([&[m(5), k as u8, 0xff, 3], r.data.as_slice()].concat());
            out.push([&[m(5), k as u8, 0x08, 1], r.data.as_slice()].concat());
        }
    }
    out
}
