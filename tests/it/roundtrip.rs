//! Write-then-read behaviour of the Arrow shard path (over 600 lines: every
//! feature kind, null case and image format of one writer, kept together).

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::RecordBatch;
use shardset::{
    open_cache, write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Example, Feature,
    Features, ImageData, ImageFormat, Tensor, Value, VideoStorage,
};

use crate::common::*;

pub(crate) fn x_col(b: &RecordBatch) -> Vec<i32> {
    b.column(0).as_primitive::<Int32Type>().values().to_vec()
}

pub(crate) fn multi_shard(
    n: usize,
    batch: usize,
    budget: u64,
) -> (tempfile::TempDir, shardset::Cache) {
    let (tmp, dir) = f2_cache(n, batch, budget);
    (tmp, open_cache(&dir).unwrap())
}

/// One column of every feature kind: each dtype, class labels, nested and
/// labelled sequences, PNG and JPEG images, 2-D and 5-D arrays, videos by
/// path and by bytes.
pub(crate) fn all_kinds_features() -> Features {
    let mut features = Features::new();
    for d in Dtype::ALL {
        features.insert(format!("v_{}", d.name()), Feature::value(d));
    }
    features
        .with("label", Feature::class_label_n(7).unwrap())
        .with(
            "seq2",
            Feature::sequence(Feature::sequence(Feature::value(Dtype::Float32))),
        )
        .with(
            "seq_label",
            Feature::sequence(Feature::class_label(["a", "b"]).unwrap()),
        )
        .with("png", Feature::image())
        .with("jpeg", Feature::image_with(ImageFormat::Jpeg))
        .with("a2", Feature::array(vec![2, 2], Dtype::UInt8).unwrap())
        .with(
            "a5",
            Feature::array(vec![1, 2, 1, 2, 1], Dtype::Int64).unwrap(),
        )
        .with(
            "a3f",
            Feature::fixed_array(vec![2, 1, 3], Dtype::Float32).unwrap(),
        )
        .with("vp", Feature::video(VideoStorage::Path))
        .with("vb", Feature::video(VideoStorage::Bytes))
}

pub(crate) fn gray_image() -> ImageData {
    ImageData::new(3, 4, 1, (0..12).collect()).unwrap()
}

/// Row `i` of [`all_kinds_features`], every cell a value.
pub(crate) fn all_kinds_example(i: i64) -> Example {
    let video = golden().join("sources/clip_a.mp4");
    let rgb = ImageData::new(8, 8, 3, vec![128; 192]).unwrap();
    let mut e = Example::new();
    for d in Dtype::ALL {
        let v: Value = match d {
            Dtype::Bool => (i % 2 == 0).into(),
            Dtype::String => format!("s{i}").into(),
            Dtype::Binary => vec![i as u8, 0, 255].into(),
            Dtype::Float16 | Dtype::Float32 | Dtype::Float64 => (i as f64 + 0.5).into(),
            Dtype::UInt64 => (u64::MAX - i as u64).into(),
            Dtype::Int64 => (i64::MIN + i).into(),
            _ => i.into(),
        };
        e.set(format!("v_{}", d.name()), v);
    }
    e.with("label", i % 7)
        .with("seq2", vec![vec![1.5f32, 2.5], vec![]])
        .with("seq_label", vec![Value::from("b"), Value::from(0i64)])
        .with("png", gray_image())
        .with("jpeg", rgb)
        .with(
            "a2",
            Tensor::from_vec(vec![2, 2], vec![1u8, 2, 3, i as u8]).unwrap(),
        )
        .with(
            "a5",
            Tensor::from_vec(vec![1, 2, 1, 2, 1], vec![-1i64, 2, -3, i]).unwrap(),
        )
        .with(
            "a3f",
            Tensor::from_vec(vec![2, 1, 3], vec![0.5f32, -1.0, 2.0, 3.5, i as f32, -0.0]).unwrap(),
        )
        .with("vp", video.clone())
        .with("vb", video)
}

#[test]
fn every_feature_kind_roundtrips() {
    let tmp = tempfile::tempdir().unwrap();
    let video = golden().join("sources/clip_a.mp4");
    let features = all_kinds_features();
    let gray = gray_image();
    let ex = all_kinds_example;
    let dir = tmp.path().join("all");
    write_arrow_cache(
        (0..5).map(ex),
        &features,
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.features().as_ref(), &features);
    let r = c.backend.get(3).unwrap();
    assert_eq!(r.get("v_int8"), Some(&Value::Int(3)));
    assert_eq!(r.get("v_uint64"), Some(&Value::UInt(u64::MAX - 3)));
    assert_eq!(r.get("v_int64"), Some(&Value::Int(i64::MIN + 3)));
    assert_eq!(r.get("v_float16"), Some(&Value::Float(3.5)));
    assert_eq!(r.get("v_bool"), Some(&Value::Bool(false)));
    assert_eq!(r.get("v_string"), Some(&Value::Str("s3".into())));
    assert_eq!(r.get("v_binary"), Some(&Value::from(vec![3u8, 0, 255])));
    let Value::Label(l) = r.get("label").unwrap() else {
        panic!()
    };
    assert_eq!((l.id, l.name.as_deref()), (3, Some("3")));
    assert_eq!(
        r.get("seq2"),
        Some(&Value::List(vec![
            Value::List(vec![Value::Float(1.5), Value::Float(2.5)]),
            Value::List(vec![])
        ]))
    );
    let Value::List(sl) = r.get("seq_label").unwrap() else {
        panic!()
    };
    assert_eq!(
        sl.iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>(),
        vec![1, 0]
    );
    assert_eq!(r.get("png"), Some(&Value::from(gray.clone())));
    let Value::Image(j) = r.get("jpeg").unwrap() else {
        panic!()
    };
    assert_eq!(j.shape(), vec![8, 8, 3]);
    assert!(
        j.data.iter().all(|&p| p.abs_diff(128) <= 2),
        "JPEG of flat gray stays gray"
    );
    let Value::Tensor(t) = r.get("a5").unwrap() else {
        panic!()
    };
    assert_eq!(
        (t.shape.clone(), t.to_vec::<i64>().unwrap()),
        (vec![1, 2, 1, 2, 1], vec![-1, 2, -3, 3])
    );
    let Value::Tensor(t) = r.get("a3f").unwrap() else {
        panic!()
    };
    assert_eq!(
        (t.shape.clone(), t.to_vec::<f32>().unwrap()),
        (vec![2, 1, 3], vec![0.5, -1.0, 2.0, 3.5, 3.0, -0.0])
    );
    let want = std::fs::read(&video).unwrap();
    for col in ["vp", "vb"] {
        let Value::Video(v) = r.get(col).unwrap() else {
            panic!()
        };
        assert_eq!(v.read_bytes().unwrap().as_ref(), want.as_slice(), "{col}");
        assert_eq!(v.checksum.as_deref(), Some(sha256(&want).as_str()));
    }
    // The staged file lives inside the published cache, once (dedup by content).
    let assets: Vec<_> = std::fs::read_dir(dir.join("_assets/video"))
        .unwrap()
        .collect();
    assert_eq!(assets.len(), 1);
    // Raw cells are available without decoding.
    let raw = c.backend.get_raw(-1).unwrap();
    assert_eq!(raw.num_rows(), 1);
}

#[test]
fn nulls_roundtrip_in_every_column() {
    let features = features_f();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("n");
    let mut ex = Example::new();
    for name in features.names() {
        ex.set(name, Value::Null);
    }
    write_arrow_cache(vec![ex], &features, &dir, &ArrowWriteOptions::default()).unwrap();
    let r = open_cache(&dir).unwrap().backend.get(0).unwrap();
    assert_eq!(
        r.values().len(),
        features.names().len(),
        "a cell per column"
    );
    assert!(!r.values().is_empty());
    assert!(r.values().iter().all(|v| *v == Value::Null));
}

/// Every feature kind is nullable: rows of nothing but nulls between rows
/// of values, and null elements inside sequences, read back as written in
/// Arrow shards (uncompressed and zstd) and in a Lance dataset; the rows of
/// values read as those of a cache written without any null.
#[test]
fn nulls_beside_values_roundtrip_in_every_kind_and_layout() {
    let base = all_kinds_features();
    let features = base
        .clone()
        .with("seq_nulls", Feature::sequence(Feature::value(Dtype::Int64)))
        .with(
            "seq2_nulls",
            Feature::sequence(Feature::sequence(Feature::value(Dtype::Float32))),
        );
    let with_lists = |e: Example| {
        e.with("seq_nulls", vec![Value::Int(1), Value::Null, Value::Int(3)])
            .with(
                "seq2_nulls",
                vec![
                    Value::List(vec![Value::Float(1.5), Value::Null]),
                    Value::Null,
                ],
            )
    };
    let row = |i: i64| {
        if i % 3 == 1 {
            let mut e = Example::new();
            for name in features.names() {
                e.set(name, Value::Null);
            }
            e
        } else {
            with_lists(all_kinds_example(i))
        }
    };
    let n = 9i64;
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    write_arrow_cache(
        (0..n).map(|i| with_lists(all_kinds_example(i))),
        &features,
        &plain,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let plain = open_cache(&plain).unwrap();
    let mut dirs = Vec::new();
    for c in [Compression::None, Compression::Zstd] {
        let dir = tmp.path().join(format!("arrow-{c}"));
        write_arrow_cache(
            (0..n).map(row),
            &features,
            &dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(4)
                .unwrap()
                .with_compression(c),
        )
        .unwrap();
        dirs.push(dir);
    }
    #[cfg(feature = "lance")]
    {
        let dir = tmp.path().join("lance");
        shardset::write_lance_cache((0..n).map(row), &features, &dir, &Default::default()).unwrap();
        dirs.push(dir);
    }
    for dir in &dirs {
        let c = open_cache(dir).unwrap();
        assert_eq!(c.len(), n as u64);
        for i in 0..n {
            let got = c.backend.get(i).unwrap();
            if i % 3 == 1 {
                assert_eq!(got.values().len(), features.len());
                assert!(
                    got.values().iter().all(|v| *v == Value::Null),
                    "{}: row {i}: {got:?}",
                    dir.display()
                );
            } else {
                let want = plain.backend.get(i).unwrap();
                for name in features.names() {
                    let (g, w) = (got.get(&name).unwrap(), want.get(&name).unwrap());
                    match (g, w) {
                        // A path video names the file staged inside each cache.
                        (Value::Video(g), Value::Video(w)) => {
                            assert_eq!(g.read_bytes().unwrap(), w.read_bytes().unwrap());
                            assert_eq!(g.checksum, w.checksum);
                        }
                        _ => assert!(g == w, "{}: row {i}, column {name}", dir.display()),
                    }
                }
                assert_eq!(
                    got.get("seq_nulls"),
                    Some(&Value::List(vec![
                        Value::Int(1),
                        Value::Null,
                        Value::Int(3)
                    ]))
                );
                assert_eq!(
                    got.get("seq2_nulls"),
                    Some(&Value::List(vec![
                        Value::List(vec![Value::Float(1.5), Value::Null]),
                        Value::Null
                    ]))
                );
            }
        }
    }
}

#[test]
fn compression_roundtrips_and_is_recorded() {
    for comp in [Compression::Lz4, Compression::Zstd] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("z");
        write_arrow_cache(
            (0..50).map(f_row),
            &features_f(),
            &dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(16)
                .unwrap()
                .with_compression(comp),
        )
        .unwrap();
        let c = open_cache(&dir).unwrap();
        assert_eq!(
            c.metadata.to_json()["compression"],
            comp.as_metadata().unwrap()
        );
        // The level arrow-rs compresses at: zstd's 3; LZ4 frames have none.
        let level = c.metadata.as_arrow_shards().unwrap().compression_level;
        assert_eq!(level, (comp == Compression::Zstd).then_some(3));
        let r = c.backend.get(33).unwrap();
        assert_eq!(r.get("name"), Some(&Value::Str("row-33".into())));
        assert_eq!(
            x_col(&c.backend.take(&[49, 0, 17]).unwrap()),
            vec![49, 0, 17]
        );
    }
    let (_t, c) = multi_shard(10, 5, 1000);
    assert!(c.metadata.to_json().get("compression").is_none());
    assert!(c.metadata.to_json().get("compression_level").is_none());
}

#[test]
fn parallel_encode_matches_serial_byte_for_byte_in_content() {
    let mut outs = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    for threads in [1usize, 2, 4] {
        let dir = tmp.path().join(format!("t{threads}"));
        let w = write_arrow_cache(
            (0..300).map(|i| f_row(i % 40)),
            &features_f(),
            &dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(7)
                .unwrap()
                .try_with_shard_size_bytes(Some(5000))
                .unwrap()
                .with_encode_threads(threads),
        )
        .unwrap();
        outs.push((
            w.metadata.shard_row_counts.clone(),
            w.metadata.shard_xxh64.clone().unwrap(),
            dir,
        ));
    }
    // Shards carry a per-build id in their footer, so compare rows, not files.
    assert_eq!(outs[0].0, outs[1].0);
    assert_eq!(outs[1].0, outs[2].0);
    let read = |d: &std::path::Path| {
        let c = open_cache(d).unwrap();
        (0..300)
            .map(|i| c.backend.get(i).unwrap())
            .collect::<Vec<_>>()
    };
    let a = read(&outs[0].2);
    assert_eq!(a, read(&outs[1].2));
    assert_eq!(a, read(&outs[2].2));
}

#[test]
fn empty_generator_gives_a_usable_empty_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e");
    let w = write_arrow_cache(
        std::iter::empty(),
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    assert_eq!((w.metadata.num_rows, w.metadata.num_shards), (0, 0));
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.len(), 0);
    assert!(c.backend.get(0).is_err());
    assert!(dot_entries(tmp.path()).is_empty());
}

#[test]
fn rebuild_replaces_atomically_and_leaves_no_temp_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write_arrow_cache(
        f2_rows(10),
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    write_arrow_cache(
        f2_rows(25),
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    assert_eq!(open_cache(&dir).unwrap().len(), 25);
    assert!(
        dot_entries(tmp.path()).is_empty(),
        "{:?}",
        dot_entries(tmp.path())
    );
    // A reader that opened the old generation sees its own rows or a clear
    // error, never rows of another build.
    let old = open_cache(&dir).unwrap();
    write_arrow_cache(
        f2_rows(7),
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    match old.backend.get(20) {
        Err(shardset::Error::CorruptShard { reason, .. }) => {
            assert!(reason.contains("another build"), "{reason}")
        }
        other => panic!("expected a generation error, got {other:?}"),
    }
    assert_eq!(open_cache(&dir).unwrap().len(), 7);
}

#[test]
fn metadata_is_self_describing_and_has_our_keys() {
    let (_t, c) = multi_shard(100, 10, 300);
    let m = &c.metadata.to_json();
    let n = m["num_shards"].as_u64().unwrap() as usize;
    assert_eq!(m["shard_num_bytes"].as_array().unwrap().len(), n);
    assert_eq!(m["shard_xxh64"].as_array().unwrap().len(), n);
    assert_eq!(m["writer"]["name"], "shardset");
    assert_eq!(
        m["features"]["label"]["names"],
        serde_json::json!(["a", "b"])
    );
    assert!(shardset::verify_checksums(&c.dir).unwrap().is_empty());
    for (i, p) in c
        .backend
        .as_any()
        .downcast_ref::<shardset::ArrowShards>()
        .unwrap()
        .shard_paths()
        .iter()
        .enumerate()
    {
        assert_eq!(
            std::fs::metadata(p).unwrap().len(),
            m["shard_num_bytes"][i].as_u64().unwrap()
        );
    }
}

/// The PNG deflate level changes the bytes stored, never the pixels read
/// back; level 0 stores the filtered rows uncompressed, so every other level
/// and the fast mode store fewer bytes; a level above 9 is refused. (Level 9
/// is not always smaller than 6: deflate's levels are search efforts.)
#[test]
fn png_levels_change_size_not_pixels() {
    use shardset::{ArrowWriteOptions, PngCompression};
    // A smooth gradient with a little noise: compressible, not trivially.
    let mut rng = shardset::SplitMix64::new(7);
    let images: Vec<ImageData> = (0..12u32)
        .map(|k| {
            let (w, h) = (64, 48);
            let data = (0..w * h * 3)
                .map(|i| {
                    let (p, c) = (i / 3, i % 3);
                    let (x, y) = (p % w, p / w);
                    ((x * 3 + y * 2 + c * 40 + k * 5) as u64 % 256 + rng.next_u64() % 6) as u8
                })
                .collect();
            ImageData::new(h, w, 3, data).unwrap()
        })
        .collect();
    let features = Features::new().with("img", Feature::image_with(ImageFormat::Png));
    let write = |png: PngCompression| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let rows = images
            .iter()
            .map(|im| Example::new().with("img", Value::Image(Box::new(im.clone()))));
        write_arrow_cache(
            rows,
            &features,
            &dir,
            &ArrowWriteOptions::default().with_png_compression(png),
        )
        .unwrap();
        let c = open_cache(&dir).unwrap();
        for (i, im) in images.iter().enumerate() {
            let Some(Value::Image(got)) = c.backend.get(i as i64).unwrap().get("img").cloned()
            else {
                panic!("row {i} is not an image");
            };
            assert_eq!(&*got, im, "{png:?} row {i}");
        }
        let stored: usize = (0..images.len())
            .map(|i| {
                let raw = c.backend.get_raw(i as i64).unwrap();
                raw.column(0).as_binary::<i64>().value(0).len()
            })
            .sum();
        (stored, tmp)
    };
    let (fast, _a) = write(PngCompression::Fast);
    let (l0, _b) = write(PngCompression::level(0).unwrap());
    let (l6, _c) = write(PngCompression::level(6).unwrap());
    let (l9, _d) = write(PngCompression::level(9).unwrap());
    assert!(l0 > l6 && l0 > l9, "level 0 {l0}, 6 {l6}, 9 {l9} bytes");
    assert!(l6 * 3 < l0 * 2, "level 6 compresses: {l6} of {l0} bytes");
    assert!(l0 > fast, "fast {fast} vs stored {l0}");
    let e = PngCompression::level(10).unwrap_err();
    assert!(e.to_string().contains("0 to 9"), "{e}");
}

/// GIF, WebP, BMP and TIFF images are stored as given and decode to the
/// pixels they were made from (gray, RGB and RGBA, lossless encodings).
#[test]
fn gif_webp_bmp_and_tiff_images_decode_to_their_pixels() {
    use image::{DynamicImage, ImageFormat as F};
    let (w, h) = (9u32, 7u32);
    // Few colours, so GIF's palette holds them exactly.
    let rgb: Vec<u8> = (0..w * h)
        .flat_map(|i| {
            let c = [(0u8, 0u8, 0u8), (255, 0, 0), (0, 128, 255), (250, 250, 10)][(i % 4) as usize];
            [c.0, c.1, c.2]
        })
        .collect();
    let rgba: Vec<u8> = rgb
        .chunks(3)
        .enumerate()
        .flat_map(|(i, p)| [p[0], p[1], p[2], if i % 3 == 0 { 255 } else { 40 }])
        .collect();
    let gray: Vec<u8> = (0..w * h).map(|i| (i * 37 % 256) as u8).collect();
    let rgb_img = DynamicImage::ImageRgb8(image::RgbImage::from_raw(w, h, rgb.clone()).unwrap());
    let rgba_img =
        DynamicImage::ImageRgba8(image::RgbaImage::from_raw(w, h, rgba.clone()).unwrap());
    let gray_img =
        DynamicImage::ImageLuma8(image::GrayImage::from_raw(w, h, gray.clone()).unwrap());
    let enc = |img: &DynamicImage, f: F| {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, f).unwrap();
        out.into_inner()
    };
    let cases: Vec<(&str, Vec<u8>, u8, &Vec<u8>)> = vec![
        ("gif rgb", enc(&rgb_img, F::Gif), 4, &rgba), // GIF decodes with alpha
        ("webp rgb", enc(&rgb_img, F::WebP), 3, &rgb),
        ("webp rgba", enc(&rgba_img, F::WebP), 4, &rgba),
        ("bmp rgb", enc(&rgb_img, F::Bmp), 3, &rgb),
        ("tiff rgb", enc(&rgb_img, F::Tiff), 3, &rgb),
        ("tiff rgba", enc(&rgba_img, F::Tiff), 4, &rgba),
        ("tiff gray", enc(&gray_img, F::Tiff), 1, &gray),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let features = Features::new().with("img", Feature::image());
    let rows = cases
        .iter()
        .map(|(_, b, _, _)| Example::new().with("img", Value::Bytes(b.clone().into())));
    write_arrow_cache(rows, &features, &dir, &ArrowWriteOptions::default()).unwrap();
    let c = open_cache(&dir).unwrap();
    for (i, (name, bytes, channels, want)) in cases.iter().enumerate() {
        let raw = c.backend.get_raw(i as i64).unwrap();
        assert_eq!(
            raw.column(0).as_binary::<i64>().value(0),
            &bytes[..],
            "{name}: stored as given"
        );
        let Some(Value::Image(got)) = c.backend.get(i as i64).unwrap().get("img").cloned() else {
            panic!("{name}: not decoded to an image");
        };
        assert_eq!(
            (got.width, got.height, got.channels),
            (w, h, *channels),
            "{name}"
        );
        if name.starts_with("gif") {
            // GIF keeps the colours; its alpha is opaque here.
            let want_gif: Vec<u8> = rgb
                .chunks(3)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect();
            assert_eq!(got.data, want_gif, "{name}");
        } else {
            assert_eq!(&got.data, *want, "{name}");
        }
    }
}
