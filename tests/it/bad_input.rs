//! Bad input gives a typed error naming the path (or column and row) and the
//! reason, and never changes a published cache.

use std::path::Path;

use shardset::{
    open_cache, open_cache_with, try_write_arrow_cache, write_arrow_cache, ArrowWriteOptions,
    Dtype, Error, Example, Feature, Features, ImageData, OpenOptions, Tensor, Value, VideoStorage,
};

use crate::common::*;

/// A published cache to break; returns (tempdir, cache dir).
fn cache(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    f2_cache(n, 10, 200)
}

fn edit_meta(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("_metadata.json");
    let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    // A deliberate edit drops the self-checksum (otherwise any edit is caught by it first).
    j.as_object_mut().unwrap().remove("metadata_xxh64");
    f(&mut j);
    std::fs::write(&p, serde_json::to_vec_pretty(&j).unwrap()).unwrap();
}

fn mentions(e: &Error, needle: &str) {
    let s = e.to_string();
    assert!(s.contains(needle), "error {s:?} should mention {needle:?}");
}

#[test]
fn missing_metadata() {
    let (_t, dir) = cache(30);
    std::fs::remove_file(dir.join("_metadata.json")).unwrap();
    let e = open_cache(&dir).unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e:?}");
    mentions(&e, "_metadata.json");
    let e = open_cache(dir.join("nope")).unwrap_err();
    mentions(&e, "does not exist");
}

#[test]
fn garbled_metadata() {
    let (_t, dir) = cache(30);
    for text in [
        "{ not json",
        "[1,2]",
        "",
        "{\"cache_format_version\": 1}",
        "{\"cache_format_version\": \"1\", \"format\": \"arrow\", \"layout\": \"arrow-shards\"}",
    ] {
        std::fs::write(dir.join("_metadata.json"), text).unwrap();
        let e = open_cache(&dir).unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{text}: {e:?}");
        mentions(&e, &dir.join("_metadata.json").display().to_string());
    }
}

#[test]
fn wrong_format_version() {
    let (_t, dir) = cache(30);
    edit_meta(&dir, |j| j["cache_format_version"] = 2.into());
    let e = open_cache(&dir).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 2, .. }),
        "{e:?}"
    );
}

#[test]
fn unknown_or_unbuilt_layouts_are_named() {
    let (_t, dir) = cache(30);
    // A layout that does not match its format (an Arrow cache relabelled).
    edit_meta(&dir, |j| j["layout"] = "lance-video-frames".into());
    let e = open_cache(&dir).unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e:?}");
    mentions(&e, "not a Lance video frames cache");
    edit_meta(&dir, |j| j["layout"] = "lance-rows".into());
    mentions(&open_cache(&dir).unwrap_err(), "not a Lance rows cache");
    edit_meta(&dir, |j| j["layout"] = "parquet-blobs".into());
    let e = open_cache(&dir).unwrap_err();
    assert!(matches!(e, Error::UnsupportedLayout { .. }), "{e:?}");
    mentions(&e, "parquet-blobs");
}

#[test]
fn missing_shard() {
    let (_t, dir) = cache(30);
    std::fs::remove_file(dir.join("shard-00001.arrow")).unwrap();
    let e = open_cache(&dir).unwrap_err();
    assert!(matches!(e, Error::MissingShard { .. }), "{e:?}");
    mentions(&e, "shard-00001.arrow");
}

#[test]
fn row_counts_that_do_not_add_up() {
    let (_t, dir) = cache(30);
    edit_meta(&dir, |j| j["num_rows"] = 31.into());
    mentions(&open_cache(&dir).unwrap_err(), "add up to 30");
    let (_t2, dir) = cache(30);
    edit_meta(&dir, |j| {
        j["num_shards"] = 9.into();
    });
    mentions(&open_cache(&dir).unwrap_err(), "num_shards is 9");
    // Counts that add up but do not match the files: caught when the shard opens.
    let (_t3, dir) = cache(30);
    edit_meta(&dir, |j| {
        let a = j["shard_row_counts"].as_array_mut().unwrap();
        let (x, y) = (a[0].as_u64().unwrap(), a[1].as_u64().unwrap());
        a[0] = (x - 1).into();
        a[1] = (y + 1).into();
    });
    let c = open_cache(&dir).unwrap();
    let e = c.backend.get(0).unwrap_err();
    assert!(matches!(e, Error::CorruptShard { .. }), "{e:?}");
    mentions(&e, "shard-00000.arrow");
}

#[test]
fn path_traversal_in_shard_names_is_refused() {
    let (_t, dir) = cache(30);
    edit_meta(&dir, |j| {
        j["shard_filenames"][0] = "../../etc/passwd".into()
    });
    mentions(&open_cache(&dir).unwrap_err(), "not a plain file name");
}

#[test]
fn truncated_shard() {
    let (_t, dir) = cache(30);
    let p = dir.join("shard-00000.arrow");
    let bytes = std::fs::read(&p).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 3, 10] {
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let e = open_cache(&dir).unwrap_err();
        assert!(matches!(e, Error::CorruptShard { .. }), "{e:?}");
        mentions(&e, "shard-00000.arrow");
    }
    // A reference cache records no sizes: the truncation is found when the
    // shard is read, still as a typed error.
    let (_g, gdir) = golden_copy("arrow_multi_shard");
    let p = gdir.join("shard-00001.arrow");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 100]).unwrap();
    let c = open_cache_with(&gdir, &OpenOptions::default().with_features(features_f())).unwrap();
    assert!(c.backend.get(0).is_ok());
    let e = c.backend.get(20).unwrap_err();
    assert!(matches!(e, Error::CorruptShard { .. }), "{e:?}");
    mentions(&e, "shard-00001.arrow");
}

#[test]
fn garbage_shard_bytes_never_panic() {
    let (_t, dir) = cache(30);
    let p = dir.join("shard-00000.arrow");
    let good = std::fs::read(&p).unwrap();
    let len = good.len();
    // Flip bytes all over the file; every read must be Ok or a typed error.
    for k in 0..200usize {
        let mut b = good.clone();
        let pos = (k * 7919) % len;
        b[pos] ^= 0xA5;
        std::fs::write(&p, &b).unwrap();
        let c = open_cache(&dir).unwrap();
        for i in 0..10 {
            let _ = c.backend.get(i);
        }
        let _ = c.backend.take(&[3, 1, 2]);
    }
    // With checksums verified, every flip is caught on open.
    let mut b = good.clone();
    b[len / 2] ^= 1;
    std::fs::write(&p, &b).unwrap();
    let e = open_cache_with(&dir, &OpenOptions::default().with_verify_checksums(true)).unwrap_err();
    mentions(&e, "xxh64");
    assert_eq!(shardset::verify_checksums(&dir).unwrap().len(), 1);
}

#[test]
fn schema_fingerprint_mismatch_says_what_differs() {
    let (_t, dir) = cache(30);
    let other = Features::new()
        .with("x", Feature::value(Dtype::Int64))
        .with("label", Feature::class_label(["a", "b"]).unwrap());
    let e = open_cache_with(&dir, &OpenOptions::default().with_features(other)).unwrap_err();
    assert!(matches!(e, Error::SchemaMismatch { .. }), "{e:?}");
    mentions(&e, "'x'");
    mentions(&e, "bump");
    // Golden (reference) cache with the wrong features.
    let e = open_cache_with(
        golden().join("arrow_multi_shard"),
        &OpenOptions::default().with_features(features_f2()),
    )
    .unwrap_err();
    mentions(&e, "9c4e7c45ac074612");
}

#[test]
fn edited_features_description_is_detected() {
    let (_t, dir) = cache(30);
    edit_meta(&dir, |j| {
        j["features"]["label"]["names"] = serde_json::json!(["a", "z"])
    });
    mentions(&open_cache(&dir).unwrap_err(), "edited metadata");
}

fn encode_err(features: Features, ex: Example) -> Error {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let e =
        write_arrow_cache(vec![ex], &features, &dir, &ArrowWriteOptions::default()).unwrap_err();
    assert!(!dir.exists(), "nothing published");
    assert!(
        dot_entries(tmp.path()).is_empty(),
        "temp dir removed: {:?}",
        dot_entries(tmp.path())
    );
    e
}

#[test]
fn wrong_dtypes_are_refused() {
    let f = |d| Features::new().with("v", Feature::value(d));
    let cases: Vec<(Dtype, Value, &str)> = vec![
        (Dtype::Int32, 1.5.into(), "float"),
        (Dtype::Int8, 300.into(), "out of range"),
        (Dtype::UInt8, (-1).into(), "negative"),
        (Dtype::Int64, "7".into(), "expected an integer"),
        (Dtype::Bool, 1.into(), "expected a bool"),
        (Dtype::String, 3.into(), "expected a string"),
        (Dtype::Binary, "x".into(), "expected bytes"),
        (Dtype::Float32, "x".into(), "expected a number"),
    ];
    for (d, v, why) in cases {
        let e = encode_err(f(d), Example::new().with("v", v));
        assert!(matches!(e, Error::Encode { row: 0, .. }), "{e:?}");
        mentions(&e, "'v'");
        mentions(&e, why);
    }
}

#[test]
fn class_labels_are_checked() {
    let f = Features::new().with("label", Feature::class_label(["cat", "dog"]).unwrap());
    mentions(
        &encode_err(f.clone(), Example::new().with("label", "cow")),
        "unknown class name 'cow'",
    );
    mentions(
        &encode_err(f.clone(), Example::new().with("label", 2)),
        "out of range",
    );
    mentions(
        &encode_err(f, Example::new().with("label", -1)),
        "out of range",
    );
}

#[test]
fn array_shape_and_dtype_are_checked() {
    let f = Features::new().with("a", Feature::array(vec![2, 3], Dtype::Float32).unwrap());
    let wrong_shape = Tensor::from_vec(vec![3, 2], vec![0f32; 6]).unwrap();
    mentions(
        &encode_err(f.clone(), Example::new().with("a", wrong_shape)),
        "shape [3, 2]",
    );
    let wrong_dtype = Tensor::from_vec(vec![2, 3], vec![0f64; 6]).unwrap();
    mentions(
        &encode_err(f.clone(), Example::new().with("a", wrong_dtype)),
        "dtype float64",
    );
    mentions(
        &encode_err(f, Example::new().with("a", vec![1u8, 2])),
        "raw array bytes",
    );
}

#[test]
fn bad_images_are_refused() {
    let f = Features::new().with("img", Feature::image());
    mentions(
        &encode_err(
            f.clone(),
            Example::new().with("img", b"not an image".to_vec()),
        ),
        "not a recognised image",
    );
    let e = encode_err(
        f.clone(),
        Example::new().with("img", Path::new("/no/such/image.png")),
    );
    mentions(&e, "/no/such/image.png");
    let tmp = tempfile::tempdir().unwrap();
    let txt = tmp.path().join("notes.txt");
    std::fs::write(&txt, "hello").unwrap();
    mentions(
        &encode_err(f.clone(), Example::new().with("img", txt.as_path())),
        "notes.txt",
    );
    mentions(
        &encode_err(f, Example::new().with("img", 5)),
        "an Image takes",
    );
    assert!(ImageData::new(2, 2, 3, vec![0; 5]).is_err());
}

#[test]
fn missing_and_unknown_keys_are_refused() {
    mentions(
        &encode_err(features_f2(), Example::new().with("x", 1)),
        "'label'",
    );
    mentions(
        &encode_err(
            features_f2(),
            Example::new()
                .with("x", 1)
                .with("label", 0)
                .with("lable", 1),
        ),
        "'lable'",
    );
}

#[test]
fn video_inputs_are_checked() {
    let f = video_features(VideoStorage::Path);
    let ex = |v: Value| Example::new().with("video", v).with("label", 0);
    mentions(
        &encode_err(f.clone(), ex(Path::new("/no/such.mp4").into())),
        "/no/such.mp4",
    );
    let tmp = tempfile::tempdir().unwrap();
    let txt = tmp.path().join("clip.txt");
    std::fs::write(&txt, "x").unwrap();
    mentions(
        &encode_err(f.clone(), ex(txt.as_path().into())),
        "unsupported video extension '.txt'",
    );
    mentions(&encode_err(f, ex(5.into())), "takes a path");
    let frames = video_features(VideoStorage::Frames);
    mentions(
        &encode_err(frames, ex(golden().join("sources/clip_a.mp4").into())),
        "lance-video-frames",
    );
}

#[derive(Debug)]
struct Boom;
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("source file vanished")
    }
}
impl std::error::Error for Boom {}

#[test]
fn failing_generator_changes_no_published_cache() {
    let (tmp, dir) = cache(30);
    let before = snapshot(&dir);
    let gen = (0..100).map(|i| {
        if i == 55 {
            Err(Boom)
        } else {
            Ok(Example::new().with("x", i).with("label", 0))
        }
    });
    let e = try_write_arrow_cache(
        gen,
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Generator { rows: 55, .. }), "{e:?}");
    mentions(&e, "source file vanished");
    assert_eq!(snapshot(&dir), before, "published cache untouched");
    assert!(
        dot_entries(tmp.path()).is_empty(),
        "{:?}",
        dot_entries(tmp.path())
    );
    // An encode error halfway: same guarantees.
    let gen = (0..100).map(|i| {
        Example::new()
            .with("x", i)
            .with("label", if i == 77 { 9 } else { 0 })
    });
    let e = write_arrow_cache(
        gen,
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Encode { row: 77, .. }), "{e:?}");
    assert_eq!(snapshot(&dir), before);
    assert!(dot_entries(tmp.path()).is_empty());
    assert_eq!(open_cache(&dir).unwrap().len(), 30);
}

#[test]
fn panicking_generator_changes_no_published_cache() {
    let (tmp, dir) = cache(30);
    let before = snapshot(&dir);
    let gen = (0..100).map(|i| {
        if i == 42 {
            panic!("author bug at row 42");
        }
        Example::new().with("x", i).with("label", 0)
    });
    let e = write_arrow_cache(
        gen,
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Panic {
                what: "generator",
                ..
            }
        ),
        "{e:?}"
    );
    mentions(&e, "author bug at row 42");
    assert_eq!(snapshot(&dir), before);
    assert!(dot_entries(tmp.path()).is_empty());
}

#[test]
fn unwritable_cache_root_is_an_io_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a_file");
    std::fs::write(&file, "x").unwrap();
    let e = write_arrow_cache(
        f2_rows(3),
        &features_f2(),
        &file.join("c"),
        &ArrowWriteOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    mentions(&e, "a_file");
}

#[test]
fn bad_options_are_refused() {
    // Refused when set, naming the option; nothing is written.
    let tmp = tempfile::tempdir().unwrap();
    let e = ArrowWriteOptions::default()
        .try_with_batch_size(0)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    mentions(&e, "batch_size");
    let e = ArrowWriteOptions::default()
        .try_with_shard_size_bytes(Some(0))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    mentions(&e, "shard_size_bytes");
    #[cfg(feature = "lance")]
    {
        let e = shardset::LanceWriteOptions::default()
            .try_with_max_rows_per_file(0)
            .unwrap_err();
        mentions(&e, "max_rows_per_file");
        let e = "2.9".parse::<shardset::LanceStorageVersion>().unwrap_err();
        mentions(&e, "2.9");
    }
    let e = "gzip".parse::<shardset::Compression>().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    mentions(&e, "gzip");
    let e = shardset::LoaderOptions::default()
        .try_with_batch_size(0)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    mentions(&e, "batch_size");
    #[cfg(feature = "video")]
    {
        use shardset::{VideoFramesOptions, WebpSettings};
        for q in [-1.0, 100.5, f32::NAN] {
            let e = WebpSettings::try_new(q, 4).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
            mentions(&e, "quality");
        }
        let e = WebpSettings::default().try_with_method(7).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        mentions(&e, "method");
        let ok = WebpSettings::try_new(100.0, 6).unwrap();
        assert_eq!((ok.quality(), ok.method()), (100.0, 6));
        let e = VideoFramesOptions::default()
            .try_with_resize(Some(0))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        mentions(&e, "resize");
        let e = VideoFramesOptions::default()
            .try_with_max_rows_per_file(0)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        mentions(&e, "max_rows_per_file");
    }
    assert!(dot_entries(tmp.path()).is_empty());
}

/// Each option enum parses its names, writes the same names to JSON (the
/// metadata and resume files), and refuses anything else naming the value.
#[test]
fn option_enums_have_one_spelling() {
    use shardset::{Compression, Layout};
    fn check<T>(names: &[&str], bad: &str)
    where
        T: std::str::FromStr<Err = Error> + serde::Serialize + std::fmt::Debug,
    {
        for n in names {
            let v: T = n.parse().unwrap_or_else(|e| panic!("{n}: {e}"));
            let json = serde_json::to_value(&v).unwrap();
            let back: T = json.as_str().unwrap().parse().unwrap();
            assert_eq!(format!("{v:?}"), format!("{back:?}"), "{n}");
        }
        let e = bad.parse::<T>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        mentions(&e, bad);
    }
    check::<Compression>(&["none", "lz4", "zstd"], "gzip");
    check::<Layout>(&["arrow", "lance", "video-frames"], "parquet");
    check::<shardset::Remainder>(&["drop_last", "pad", "partial"], "all");
    #[cfg(feature = "video")]
    {
        check::<shardset::WebpInput>(&["rgb", "yuv"], "bgr");
        check::<shardset::ResizeMode>(&["square", "shorter_side", "shorter-side"], "fit");
        assert_eq!(
            serde_json::to_value(shardset::ResizeMode::ShorterSide).unwrap(),
            "shorter_side"
        );
    }
}
