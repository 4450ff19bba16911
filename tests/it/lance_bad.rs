//! Lance caches at the edges: damaged caches are typed errors and change
//! nothing, a failed write publishes nothing, an empty write publishes an
//! empty cache, compression levels change bytes and not rows.

use shardset::{
    open_cache, open_cache_with, write_lance_cache, Error, LanceWriteOptions, OpenOptions,
};

use crate::common::*;

#[test]
fn bad_lance_caches_are_typed_errors_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    write_lance_cache(
        f2_rows(60),
        &features_f2(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(20)
            .unwrap(),
    )
    .unwrap();
    let before = snapshot(&dir);
    // Garbled and missing metadata.
    let meta = std::fs::read(dir.join("_metadata.json")).unwrap();
    std::fs::write(dir.join("_metadata.json"), b"{ nope").unwrap();
    assert!(matches!(open_cache(&dir), Err(Error::Metadata { .. })));
    std::fs::remove_file(dir.join("_metadata.json")).unwrap();
    assert!(matches!(open_cache(&dir), Err(Error::Metadata { .. })));
    std::fs::write(dir.join("_metadata.json"), &meta).unwrap();
    assert_eq!(snapshot(&dir), before);
    // A deleted data file: an error naming the dataset when it is read.
    let data: Vec<_> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let victim = data[0].clone();
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let res = open_cache(&dir).and_then(|c| {
        for i in 0..60 {
            c.backend.get(i)?;
        }
        Ok(())
    });
    let e = res.unwrap_err();
    assert!(e.to_string().contains(dir.to_str().unwrap()), "{e}");
    std::fs::write(&victim, saved).unwrap();
    // A manifest from another dataset.
    let other = tmp.path().join("o");
    write_lance_cache(
        f2_rows(7),
        &features_f2(),
        &other,
        &LanceWriteOptions::default(),
    )
    .unwrap();
    let mine = dir.join("_versions");
    let keep = tmp.path().join("versions_backup");
    copy_dir(&mine, &keep);
    std::fs::remove_dir_all(&mine).unwrap();
    copy_dir(&other.join("_versions"), &mine);
    let res = open_cache(&dir).and_then(|c| c.backend.get(0).map(|_| ()));
    let e = res.unwrap_err();
    assert!(
        matches!(e, Error::CorruptShard { .. }) || matches!(e, Error::Metadata { .. }),
        "{e:?}"
    );
    std::fs::remove_dir_all(&mine).unwrap();
    copy_dir(&keep, &mine);
    // Schema mismatch.
    let e = open_cache_with(&dir, &OpenOptions::default().with_features(features_f())).unwrap_err();
    assert!(matches!(e, Error::SchemaMismatch { .. }), "{e:?}");
    // Everything restored reads again.
    assert_eq!(
        open_cache(&dir)
            .unwrap()
            .backend
            .get(-1)
            .unwrap()
            .get("x")
            .unwrap()
            .as_i64(),
        Some(59)
    );
}

#[test]
fn a_failed_lance_write_publishes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    let gen = (0..100).map(|i| {
        Example::new()
            .with("x", i)
            .with("label", if i == 70 { 5 } else { 0 })
    });
    let e = write_lance_cache(
        gen,
        &features_f2(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Encode { row: 70, .. }), "{e:?}");
    assert!(!dir.exists());
    assert!(
        dot_entries(tmp.path()).is_empty(),
        "{:?}",
        dot_entries(tmp.path())
    );
}

use shardset::Example;

/// A write of no rows publishes an empty Lance dataset (no commit of rows
/// ever happens, so the writer creates the dataset itself) that opens,
/// reads as empty and verifies clean.
#[test]
fn an_empty_lance_write_publishes_an_empty_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    let w = write_lance_cache(
        f2_rows(0),
        &features_f2(),
        &dir,
        &LanceWriteOptions::default(),
    )
    .unwrap();
    assert_eq!(w.metadata.num_rows, 0);
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.len(), 0);
    assert_eq!(c.layout, "lance-rows");
    let report = shardset::verify_cache(&dir).unwrap();
    assert!(report.damage.is_empty(), "{:?}", report.damage);
}

/// Compression asked of Lance with a level: recorded in the metadata and in
/// the dataset's field metadata, the same rows read back, and the level
/// changes the bytes on disk of compressible data (zstd 19 no larger than
/// zstd 1, both smaller than none). Bad levels are refused.
#[test]
fn lance_compression_levels_are_recorded_and_change_bytes_not_rows() {
    use shardset::{Compression, Dtype, Example, Feature, Features};
    let features = Features::new()
        .with("text", Feature::value(Dtype::String))
        .with("blob", Feature::value(Dtype::Binary));
    // Text-like data: words of a small vocabulary in a seeded random order.
    let words: Vec<String> = (0..300u64)
        .map(|w| format!("w{}x{}", w * 7919 % 1000, w % 13))
        .collect();
    let rows = || {
        let mut rng = shardset::SplitMix64::new(7);
        let words = words.clone();
        (0..3000u32).map(move |_| {
            let mut text = String::new();
            for _ in 0..40 {
                text.push_str(&words[rng.below(300) as usize]);
                text.push(' ');
            }
            let blob = text.as_bytes().iter().rev().copied().collect::<Vec<u8>>();
            Example::new().with("text", text).with("blob", blob)
        })
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut sizes = Vec::new();
    let mut first: Option<Vec<shardset::Row>> = None;
    for (codec, level) in [
        (Compression::None, None),
        (Compression::Lz4, None),
        (Compression::Zstd, Some(1)),
        (Compression::Zstd, None),
        (Compression::Zstd, Some(19)),
    ] {
        let dir = tmp.path().join(format!("{codec}-{level:?}"));
        let opts = LanceWriteOptions::default()
            .with_data_storage_version(shardset::LanceStorageVersion::V2_1)
            .try_with_codec(shardset::Codec::try_new(codec, level).unwrap())
            .unwrap();
        let w = write_lance_cache(rows(), &features, &dir, &opts).unwrap();
        assert_eq!(w.metadata.compression, Some(codec));
        let want_level = (codec == Compression::Zstd).then(|| level.unwrap_or(3));
        assert_eq!(w.metadata.compression_level, want_level);
        let schema = shardset::LanceRows::dataset_schema(&dir).unwrap();
        for f in schema.fields() {
            assert_eq!(
                f.metadata()
                    .get("lance-encoding:compression")
                    .map(String::as_str),
                Some(codec.name())
            );
        }
        let c = open_cache(&dir).unwrap();
        let got: Vec<shardset::Row> = (0..c.len() as i64)
            .map(|i| c.backend.get(i).unwrap())
            .collect();
        match &first {
            None => first = Some(got),
            Some(f) => assert!(f == &got, "{codec} {level:?} reads the same rows"),
        }
        sizes.push((
            codec,
            level,
            shardset::layouts::stats::dir_size(&dir.join("data")).unwrap(),
        ));
    }
    let size = |c, l| sizes.iter().find(|s| s.0 == c && s.1 == l).unwrap().2;
    let none = size(Compression::None, None);
    assert!(size(Compression::Zstd, Some(1)) < none, "{sizes:?}");
    assert!(
        size(Compression::Zstd, Some(19)) < size(Compression::Zstd, Some(1)),
        "{sizes:?}"
    );
    for l in [0, 23] {
        let e = LanceWriteOptions::default()
            .try_with_codec(shardset::Codec::Zstd { level: Some(l) })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    // Only zstd takes a level: the one value cannot hold another pairing.
    let e = shardset::Codec::try_new(Compression::Lz4, Some(1)).unwrap_err();
    assert!(e.to_string().contains("only zstd takes a level"), "{e}");
    let e = shardset::ArrowWriteOptions::default()
        .try_with_codec(shardset::Codec::Zstd { level: Some(9) })
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("level 3")),
        "{e}"
    );
}

/// A Lance cache whose pages state a decompressed size their bytes cannot
/// expand to: a typed error naming the cache, before anything of that size is
/// allocated, and the cache unchanged. Lance writes a value over 32 KiB as a
/// zstd frame of its own behind an 8-byte stated size, whatever the codec
/// asked for; Lance 14.0.2 reserved what that size said and aborted the
/// process when memory could not hold it (1 TiB here). shardset builds it with
/// the bounds of `third_party/lance-encoding`; LZ4's own bound is tested on
/// its compressor below.
#[test]
fn a_lance_page_stating_more_than_its_bytes_expand_to_is_a_typed_error() {
    use shardset::{Compression, Dtype, Example, Feature, Features};
    const VALUE: usize = 40_961;
    let features = Features::new().with("blob", Feature::value(Dtype::Binary));
    let rows = || {
        let mut rng = shardset::SplitMix64::new(11);
        (0..6).map(move |_| {
            let blob: Vec<u8> = (0..VALUE).map(|_| b'a' + rng.below(4) as u8).collect();
            Example::new().with("blob", blob)
        })
    };
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    let opts = LanceWriteOptions::default()
        .with_data_storage_version(shardset::LanceStorageVersion::V2_1)
        .try_with_codec(shardset::Codec::try_new(Compression::Zstd, None).unwrap())
        .unwrap();
    write_lance_cache(rows(), &features, &clean, &opts).unwrap();
    // The stated size, then the frame's magic number.
    let mut pattern = (VALUE as u64).to_le_bytes().to_vec();
    pattern.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
    for claim in [1 << 40, u64::MAX, u32::MAX as u64 + 1] {
        let dir = tmp.path().join(format!("claims-{claim}"));
        copy_dir(&clean, &dir);
        let mut found = 0;
        for e in std::fs::read_dir(dir.join("data")).unwrap() {
            let path = e.unwrap().path();
            let mut bytes = std::fs::read(&path).unwrap();
            let mut at = 0;
            while let Some(i) = bytes[at..]
                .windows(pattern.len())
                .position(|w| w == pattern.as_slice())
            {
                let i = at + i;
                bytes[i..i + 8].copy_from_slice(&claim.to_le_bytes());
                found += 1;
                at = i + pattern.len();
            }
            std::fs::write(&path, bytes).unwrap();
        }
        assert_eq!(found, 6, "every value is a frame of its own");
        let before = snapshot(&dir);
        let c = open_cache(&dir).unwrap();
        for i in 0..6 {
            let e = c.backend.get(i).unwrap_err();
            assert!(matches!(e, Error::CorruptShard { .. }), "{claim}: {e:?}");
            let text = e.to_string();
            assert!(text.contains(dir.to_str().unwrap()), "{claim}: {text}");
            assert!(
                text.contains("more than the") && text.contains("they can expand to"),
                "{claim}: {text}"
            );
        }
        drop(c);
        assert_eq!(snapshot(&dir), before, "{claim}: reading changed nothing");
    }
    // The clean copy reads.
    let c = open_cache(&clean).unwrap();
    for i in 0..6 {
        let row = c.backend.get(i).unwrap();
        match row.get("blob") {
            Some(shardset::Value::Bytes(b)) => assert_eq!(b.len(), VALUE),
            other => panic!("{other:?}"),
        }
    }
}

/// The bounds themselves, on the compressors Lance decodes pages with: a
/// stated size beyond what the bytes expand to (LZ4: 255 a byte; zstd: 32 Ki
/// a byte; either: 2 GiB a buffer) is refused, and buffers within them,
/// however compressible, decode as before.
#[test]
fn lance_decompression_is_bounded_by_the_compressed_bytes() {
    use lance_encoding::encodings::physical::block::{
        CompressionConfig, CompressionScheme, GeneralBufferCompressor,
        MAX_DECOMPRESSED_BUFFER_BYTES,
    };
    assert_eq!(MAX_DECOMPRESSED_BUFFER_BYTES, i32::MAX as usize);
    let zeros = vec![0u8; 8 << 20];
    let mut rng = shardset::SplitMix64::new(5);
    let noise: Vec<u8> = (0..100_000).map(|_| rng.below(256) as u8).collect();
    for scheme in [CompressionScheme::Lz4, CompressionScheme::Zstd] {
        let c =
            GeneralBufferCompressor::get_compressor(CompressionConfig::new(scheme, None)).unwrap();
        // Within the bounds: the most compressible input and an incompressible one.
        for input in [&zeros, &noise] {
            let mut packed = Vec::new();
            c.compress(input, &mut packed).unwrap();
            let mut out = vec![7u8];
            c.decompress(&packed, &mut out).unwrap();
            assert!(out[0] == 7 && &out[1..] == input.as_slice(), "{scheme:?}");
            let mut exact = Vec::new();
            c.decompress_exact(&packed, &mut exact, input.len())
                .unwrap();
            assert!(exact == *input, "{scheme:?}");
        }
        // A stated size past the bound: refused, the output left as it was.
        let mut packed = Vec::new();
        c.compress(&noise, &mut packed).unwrap();
        let width = if scheme == CompressionScheme::Lz4 {
            4
        } else {
            8
        };
        let payload = packed.len() - width;
        let expansion = if scheme == CompressionScheme::Lz4 {
            255
        } else {
            32 * 1024
        };
        let past = (payload * expansion + expansion + 1).min(MAX_DECOMPRESSED_BUFFER_BYTES + 1);
        for stated in [past, u32::MAX as usize, 1 << 40] {
            if scheme == CompressionScheme::Lz4 && stated > u32::MAX as usize {
                continue;
            }
            let mut bad = packed.clone();
            bad[..width].copy_from_slice(&(stated as u64).to_le_bytes()[..width]);
            let mut out = vec![1u8, 2];
            let e = c.decompress(&bad, &mut out).unwrap_err().to_string();
            assert!(e.contains("they can expand to"), "{scheme:?} {stated}: {e}");
            assert_eq!(out, [1, 2]);
            let e = c
                .decompress_exact(&bad, &mut out, stated)
                .unwrap_err()
                .to_string();
            assert!(e.contains("they can expand to"), "{scheme:?} {stated}: {e}");
            assert_eq!(out, [1, 2]);
        }
    }
}
