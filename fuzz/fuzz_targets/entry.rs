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
//! [`open_lance_rows_input`] (lance builds): a `lance-rows` cache written
//! by shardset, its metadata, feature description, a data file or a
//! manifest replaced, written over or cut (lance_rows_entry.rs).
//!
//! [`resume_state_input`]: what a killed process leaves: an Arrow build's
//! manifest and files, a download's partial file and lock against a
//! server answering as the input says (resume_entry.rs).
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
/// Every file under `dir`, by its path relative to `dir`, with its bytes.
pub(crate) fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                files.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    files
}

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
        files_under(&dir)
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

#[cfg(feature = "video")]
#[path = "segments_entry.rs"]
mod segments_entry;
#[cfg(feature = "video")]
#[allow(unused_imports)] // each target uses some
pub use segments_entry::{open_segments_input, open_segments_seeds};

#[cfg(feature = "lance")]
#[path = "lance_rows_entry.rs"]
mod lance_rows_entry;
#[cfg(feature = "lance")]
#[allow(unused_imports)] // each target uses some
pub use lance_rows_entry::{open_lance_rows_input, open_lance_rows_seeds, panic_in_lance};

#[path = "resume_entry.rs"]
mod resume_entry;
#[allow(unused_imports)] // each target uses some
pub use resume_entry::{resume_state_input, resume_state_seeds};
