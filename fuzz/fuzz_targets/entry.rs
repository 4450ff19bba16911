//! The fuzz targets' entry points, shared with `cargo test`, which replays
//! every file under `fuzz/regressions/` through them (tests/it/fuzz_replay.rs).
//!
//! [`open_cache_input`]: what a reader of an Arrow cache trusts. The first
//! byte picks the mode (mod 4), the rest is the mutation:
//! * 0: the bytes are `_metadata.json`, beside a valid shard;
//! * 1: the bytes are edits (u16 position, byte) applied to valid metadata,
//!   the first two bytes a truncation length (0 = none);
//! * 2: the same edits applied to a valid shard, beside metadata that
//!   describes it without sizes or checksums (so reading, not validation,
//!   must cope);
//! * 3: the bytes are the shard itself, beside that metadata.
//!
//! [`documents_input`]: the documents beside a cache's data. The first byte
//! picks the reader (mod 4), the rest is the document:
//! * 0: a feature description (`features_from_json`);
//! * 1: `_checksums.json` of a valid cache, then `verify` and `open`;
//! * 2: the version file `_cache_versions/1.json` of an edited cache (at
//!   version 2), then the version list and an open of version 1;
//! * 3: a features file (`read_features_file`).
//!
//! [`image_ops_input`]: an encoded image (any bytes) through the input
//! pipeline's decoders and ops. The first byte picks the ops (mod 4), the
//! rest is the image: a random crop to 16x16 with a flip (small targets
//! take the reduced-size JPEG decode), a centre crop larger than most
//! images (padding), an exact resize to float32 normalised, a shorter-side
//! resize and centre crop to bfloat16.
//!
//! [`open_frames_input`] (video builds): what a reader of a frames cache
//! trusts in its `_metadata.json`, beside the reference's Lance dataset.
//! Mode 0: the bytes are the metadata; 1: edits of the reference's metadata.
//!
//! [`open_hf_input`]: a Hugging Face `save_to_disk` directory, one of its
//! three files replaced or edited (see there), opened and read.
//!
//! [`open_segments_input`] (video builds): what a reader of a segments
//! cache trusts beyond its metadata. The rows' packet offsets and frame
//! lists decide which packets a read sends, our own H.264 and AV1 parsing
//! decides which it may skip, and the packets reach FFmpeg's decoders;
//! none of it is checked before a read. Beside one of two small caches
//! under `fuzz/seeds/` (H.264: two videos, one of odd size, B-frames; AV1:
//! hidden frames shown later), which bit 0 of the first byte picks; the
//! rest of that byte (mod 6) is the mode:
//! * 0: the bytes are `_metadata.json`; 1: edits of the seed's;
//! * 2: the bytes are JSON changing the rows' numbers, the dataset written
//!   again: `{"rows": [{..}], "len": n, "drop": [column]}`, each object
//!   giving any of `video_id`, `segment_idx`, `first_frame`,
//!   `frame_count`, `packet_offsets`, `packet_frames` of its row, `len`
//!   the number of rows (the last repeated), `drop` columns left out;
//! * 3: (u16 position, xor byte) edits of the packets of every row, made in
//!   place in the data file (Lance stores them verbatim);
//! * 4: the bytes after the second (which picks the row) are that row's
//!   packets, offsets cut to their length, the dataset written again;
//! * 5: no cache: a row's packets replaced as in mode 4 go straight to the
//!   segment decoder, frames picked by the bit mask in the third byte,
//!   the packet frames used or not as the fourth says (fast: the parsers
//!   and decoders see many more inputs).
//!
//! Modes 0 to 4 open the cache, read rows, windows of three specs and
//! batches of them, then verify it.
//!
//! Any panic, abort or hang is a bug; errors are fine.

#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use shardset::{
    open_cache, write_arrow_cache, ArrowWriteOptions, Backend, Dtype, Example, Feature, Features,
    ImageData, IterOptions, Tensor,
};

struct Seed {
    shard: Vec<u8>,
    metadata: Vec<u8>,
    loose_metadata: Vec<u8>,
}

fn seed() -> &'static Seed {
    static S: OnceLock<Seed> = OnceLock::new();
    S.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let features = Features::new()
            .with("x", Feature::value(Dtype::Int32))
            .with("s", Feature::value(Dtype::String))
            .with("label", Feature::class_label(["a", "b"]).unwrap())
            .with("img", Feature::image())
            .with("arr", Feature::array(vec![2, 2], Dtype::Float32).unwrap())
            .with("seq", Feature::sequence(Feature::value(Dtype::Int64)));
        let img = ImageData::new(2, 2, 3, (0..12).collect()).unwrap();
        let rows = (0..12).map(|i| {
            Example::new()
                .with("x", i)
                .with("s", format!("r{i}"))
                .with("label", i % 2)
                .with("img", img.clone())
                .with(
                    "arr",
                    Tensor::from_vec(vec![2, 2], vec![i as f32; 4]).unwrap(),
                )
                .with("seq", (0..i as i64 % 3).collect::<Vec<i64>>())
        });
        write_arrow_cache(
            rows,
            &features,
            &dir,
            &ArrowWriteOptions::default().try_with_batch_size(4).unwrap(),
        )
        .unwrap();
        let shard = std::fs::read(dir.join("shard-00000.arrow")).unwrap();
        let metadata = std::fs::read(dir.join("_metadata.json")).unwrap();
        let mut j: serde_json::Value = serde_json::from_slice(&metadata).unwrap();
        let o = j.as_object_mut().unwrap();
        for k in [
            "shard_num_bytes",
            "shard_xxh64",
            "metadata_xxh64",
            "build_id",
        ] {
            o.remove(k);
        }
        Seed {
            shard,
            metadata,
            loose_metadata: serde_json::to_vec(&j).unwrap(),
        }
    })
}

fn exercise(b: &dyn Backend) {
    let n = b.len().min(64) as i64;
    for i in 0..n {
        let _ = b.get(i);
        let _ = b.get(-i - 1);
    }
    let _ = b.take(&[0, n - 1, 1, 0]);
    let _ = b.slice(1, 7);
    if let Ok(it) = b.iter_batches(&IterOptions::default().with_shuffle_seed(1)) {
        for batch in it.take(64).flatten() {
            let _ = b.decoder().decode_batch(&batch);
        }
    }
}

/// `base` with `body`'s edits: (u16 position, xor byte) triples after a u16
/// truncation length.
fn edited(base: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    if body.len() >= 2 {
        let cut = u16::from_le_bytes([body[0], body[1]]) as usize;
        for e in body[2..].chunks_exact(3) {
            let pos = u16::from_le_bytes([e[0], e[1]]) as usize;
            if !out.is_empty() {
                let p = pos % out.len();
                out[p] ^= e[2];
            }
        }
        if cut > 0 && cut < out.len() {
            out.truncate(cut);
        }
    }
    out
}

/// One input of the `open_cache` target; returns what opening gave.
pub fn open_cache_input(data: &[u8]) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    let s = seed();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    std::fs::create_dir(&dir).unwrap();
    let (meta, shard): (Vec<u8>, Vec<u8>) = match mode % 4 {
        0 => (body.to_vec(), s.shard.clone()),
        1 => (edited(&s.metadata, body), s.shard.clone()),
        2 => (s.loose_metadata.clone(), edited(&s.shard, body)),
        _ => (s.loose_metadata.clone(), body.to_vec()),
    };
    std::fs::write(dir.join("_metadata.json"), &meta).unwrap();
    std::fs::write(dir.join("shard-00000.arrow"), &shard).unwrap();
    let opened = open_cache(&dir).map(|cache| exercise(cache.backend.as_ref()));
    let _ = shardset::verify_checksums(&dir);
    let _ = shardset::layouts::arrow_shards::integrity::locate_corrupt_rows(&dir);
    let _ = shardset::verify_cache(&dir);
    Some(opened)
}

/// One input of the `open_frames_cache` target, beside a copy of the frames
/// cache at `reference` (the reference's golden one); returns what opening gave.
#[cfg(feature = "video")]
pub fn open_frames_input(data: &[u8], reference: &Path) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    copy_dir(reference, &dir);
    let meta_path = dir.join("_metadata.json");
    let meta = match mode % 2 {
        0 => body.to_vec(),
        _ => edited(&std::fs::read(&meta_path).unwrap(), body),
    };
    std::fs::write(&meta_path, &meta).unwrap();
    let opened = open_cache(&dir).map(|cache| {
        exercise(cache.backend.as_ref());
        if let Some(f) = cache
            .backend
            .as_any()
            .downcast_ref::<shardset::LanceVideoFrames>()
        {
            let _ = f.windows(&[0, -1]);
            let _ = f.windows_batch(&[0, -1]);
        }
    });
    let _ = shardset::verify_cache(&dir);
    Some(opened)
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A cache edited once (version 2, version 1 kept), as files to copy.
fn edited_seed() -> &'static Vec<(std::path::PathBuf, Vec<u8>)> {
    static S: OnceLock<Vec<(std::path::PathBuf, Vec<u8>)>> = OnceLock::new();
    S.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let features = Features::new().with("x", Feature::value(Dtype::Int32));
        write_arrow_cache(
            (0..6).map(|i| Example::new().with("x", i)),
            &features,
            &dir,
            &ArrowWriteOptions::default().try_with_batch_size(2).unwrap(),
        )
        .unwrap();
        shardset::stamp_checksums(&dir).unwrap();
        let mut st = open_cache(&dir).unwrap().edit().unwrap();
        st.set_cell(1, "x", 100).unwrap();
        st.commit().unwrap();
        let mut files = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&dir).unwrap().to_path_buf();
                    files.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        files
    })
}

/// See the module documentation; `None` when the input is empty.
pub fn documents_input(data: &[u8]) -> Option<shardset::Result<()>> {
    let (&mode, doc) = data.split_first()?;
    let tmp = tempfile::tempdir().ok()?;
    let dir = tmp.path().join("c");
    let write_seed = || {
        for (rel, bytes) in edited_seed() {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
    };
    Some(match mode % 4 {
        0 => serde_json::from_slice::<serde_json::Value>(doc)
            .map_err(|e| shardset::Error::InvalidFeature(e.to_string()))
            .and_then(|j| shardset::features::describe::features_from_json(&j))
            .map(drop),
        1 => {
            write_seed();
            std::fs::write(dir.join("_checksums.json"), doc).unwrap();
            let _ = shardset::verify_cache(&dir);
            open_cache(&dir).map(drop)
        }
        2 => {
            write_seed();
            std::fs::write(dir.join("_cache_versions").join("1.json"), doc).unwrap();
            let storage = shardset::storage::storage_for(&dir);
            let _ = shardset::cache::versions::list_versions(storage.as_ref(), &dir);
            shardset::open_cache_with(&dir, &shardset::OpenOptions::default().with_version(1))
                .and_then(|c| {
                    for i in 0..c.len() as i64 {
                        c.backend.get(i)?;
                    }
                    Ok(())
                })
        }
        _ => {
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join("features.json");
            std::fs::write(&p, doc).unwrap();
            shardset::features::describe::read_features_file(&p).map(drop)
        }
    })
}

/// Valid documents of each mode, for seed corpora and the replay test.
pub fn documents_seeds() -> Vec<Vec<u8>> {
    let file = |name: &str| {
        edited_seed()
            .iter()
            .find(|(p, _)| p.as_os_str() == name)
            .map(|(_, b)| b.clone())
            .unwrap()
    };
    let features = br#"{"x": {"type": "Value", "dtype": "int32"}, "l": {"type": "ClassLabel", "names": ["a", "b"]}, "s": {"type": "Sequence", "feature": {"type": "Image"}}}"#.to_vec();
    let mut out = Vec::new();
    for (mode, doc) in [
        (0u8, features.clone()),
        (1, file("_checksums.json")),
        (2, file("_cache_versions/1.json")),
        (3, br#"{"x": "int64", "name": "string"}"#.to_vec()),
    ] {
        let mut d = vec![mode];
        d.extend(doc);
        out.push(d);
    }
    out
}

/// The ops of [`image_ops_input`]'s modes.
const IMAGE_OPS: [&str; 4] = [
    r#"[{"op": "random_resized_crop", "size": [16, 16]}, {"op": "random_horizontal_flip"}]"#,
    r#"[{"op": "center_crop", "size": [40, 24]}]"#,
    r#"[{"op": "resize", "size": [9, 13]}, {"op": "to_dtype", "dtype": "float32"},
        {"op": "normalize", "mean": [0.5], "std": [0.25]}]"#,
    r#"[{"op": "resize", "size": 12}, {"op": "center_crop", "size": [12, 12]},
        {"op": "to_dtype", "dtype": "bfloat16"}]"#,
];

pub fn image_ops_input(data: &[u8]) -> Option<shardset::Result<()>> {
    use shardset::pipeline::ops::{ImagePlan, Op, Placement, SampleRng};
    let (&mode, bytes) = data.split_first()?;
    let ops: Vec<Op> = serde_json::from_str(IMAGE_OPS[mode as usize % 4]).unwrap();
    let plan = ImagePlan::new("image", &ops).unwrap();
    // Limits low enough that a header claiming a large image is refused
    // fast instead of decoded.
    let limits = shardset::features::limits::DecodeLimits::default()
        .try_with_max_image_pixels(1 << 20)
        .unwrap();
    let (h, w) = plan.out_size();
    let mut out = vec![0u8; plan.out_bytes()];
    let mut rng = SampleRng::new(u64::from(mode), 0, bytes.len() as u64);
    let place = if mode % 2 == 0 {
        Placement::Hwc
    } else {
        Placement::Planes {
            stride: (h * w) as usize,
        }
    };
    Some(plan.run_encoded(bytes, &limits, &mut rng, place, &mut out))
}

/// Small valid images for [`image_ops_input`]: a JPEG, a PNG, a grey PNG,
/// each under every mode.
pub fn image_ops_seeds() -> Vec<Vec<u8>> {
    use shardset::features::image::encode;
    use shardset::ImageFormat;
    let rgb = ImageData::new(
        37,
        53,
        3,
        (0..37 * 53 * 3).map(|i| (i * 7 % 251) as u8).collect(),
    )
    .unwrap();
    let grey = ImageData::new(20, 30, 1, (0..600).map(|i| (i % 256) as u8).collect()).unwrap();
    let images = [
        encode(&rgb, ImageFormat::Jpeg).unwrap(),
        encode(&rgb, ImageFormat::Png).unwrap(),
        encode(&grey, ImageFormat::Png).unwrap(),
    ];
    let mut out = Vec::new();
    for img in &images {
        for mode in 0..4u8 {
            let mut d = vec![mode];
            d.extend_from_slice(img);
            out.push(d);
        }
    }
    out
}

/// A Hugging Face `save_to_disk` directory's files, made as `datasets`
/// makes them: `state.json`, `dataset_info.json`, and one Arrow IPC stream
/// of three record batches (ids, strings, lists, an image struct, class
/// ids, an `Array2D` as nested lists).
pub fn hf_seed() -> &'static [(String, Vec<u8>); 3] {
    use std::sync::Arc;

    use arrow_array::builder::{
        BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
    };
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Fields};

    static S: OnceLock<[(String, Vec<u8>); 3]> = OnceLock::new();
    S.get_or_init(|| {
        let info = serde_json::json!({"features": {
            "id": {"dtype": "int64", "_type": "Value"},
            "text": {"dtype": "string", "_type": "Value"},
            "tags": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "List"},
            "img": {"_type": "Image"},
            "label": {"names": ["a", "b"], "_type": "ClassLabel"},
            "grid": {"shape": [2, 2], "dtype": "int32", "_type": "Array2D"},
        }});
        let state = serde_json::json!({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]});
        let img_fields = Fields::from(vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("path", DataType::Utf8, true),
        ]);
        let batch = |lo: i64| -> RecordBatch {
            let mut id = Int64Builder::new();
            let mut text = StringBuilder::new();
            let mut tags = ListBuilder::new(Int64Builder::new());
            let mut img = StructBuilder::new(
                img_fields.clone(),
                vec![
                    Box::new(BinaryBuilder::new()),
                    Box::new(StringBuilder::new()),
                ],
            );
            let mut label = Int64Builder::new();
            let mut grid = ListBuilder::new(ListBuilder::new(Int32Builder::new()));
            for i in lo..lo + 4 {
                id.append_value(i);
                text.append_value(format!("t{i}"));
                for k in 0..i % 3 {
                    tags.values().append_value(k);
                }
                tags.append(true);
                img.field_builder::<BinaryBuilder>(0)
                    .unwrap()
                    .append_value(PNG_1X1);
                img.field_builder::<StringBuilder>(1).unwrap().append_null();
                img.append(true);
                label.append_value(i % 2);
                for _ in 0..2 {
                    for _ in 0..2 {
                        grid.values().values().append_value(i as i32);
                    }
                    grid.values().append(true);
                }
                grid.append(true);
            }
            let cols: Vec<ArrayRef> = vec![
                Arc::new(id.finish()),
                Arc::new(text.finish()),
                Arc::new(tags.finish()),
                Arc::new(img.finish()),
                Arc::new(label.finish()),
                Arc::new(grid.finish()),
            ];
            let names = ["id", "text", "tags", "img", "label", "grid"];
            let fields: Vec<Field> = names
                .iter()
                .zip(&cols)
                .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
                .collect();
            RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), cols).unwrap()
        };
        let batches = [batch(0), batch(4), batch(8)];
        let mut stream = Vec::new();
        {
            let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut stream, &batches[0].schema())
                .unwrap();
            for b in &batches {
                w.write(b).unwrap();
            }
            w.finish().unwrap();
        }
        [
            ("state.json".into(), state.to_string().into_bytes()),
            ("dataset_info.json".into(), info.to_string().into_bytes()),
            ("data-00000-of-00001.arrow".into(), stream),
        ]
    })
}

/// A 1x1 RGB PNG.
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// One input of the `open_hf` target: what a reader of a Hugging Face
/// directory trusts. The first byte picks the file (mod 3: `state.json`,
/// `dataset_info.json`, the data stream) and whether the rest is that file
/// (bit 2 of the first byte clear) or edits of the seed's (set).
pub fn open_hf_input(data: &[u8]) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    let seed = hf_seed();
    let which = (mode % 3) as usize;
    let tmp = tempfile::tempdir().ok()?;
    for (k, (name, bytes)) in seed.iter().enumerate() {
        let bytes = match (k == which, mode & 4 != 0) {
            (false, _) => bytes.clone(),
            (true, false) => body.to_vec(),
            (true, true) => edited(bytes, body),
        };
        std::fs::write(tmp.path().join(name), bytes).ok()?;
    }
    let opened = shardset::open_hf_with(tmp.path(), None, &shardset::OpenOptions::default());
    Some(opened.map(|b| exercise(&b)))
}

/// One Lance row of a segments cache.
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
fn segment_seeds(root: &Path) -> &'static [SegSeed; 2] {
    static S: OnceLock<[SegSeed; 2]> = OnceLock::new();
    S.get_or_init(|| ["segments_h264", "segments_av1"].map(|n| load_segment_seed(&root.join(n))))
}

#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
fn offsets_for(offsets: &[i64], len: usize) -> Vec<i64> {
    let mut out: Vec<i64> = offsets.iter().map(|&o| o.min(len as i64)).collect();
    if let Some(last) = out.last_mut() {
        *last = len as i64;
    }
    out
}

/// The rows as a segments dataset (its columns but `drop`) at `dir`.
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
#[cfg(feature = "video")]
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
