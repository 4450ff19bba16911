//! Opening modes: rows checked against their checksums as they are read,
//! and caches loaded into memory behind a guard.

use std::path::{Path, PathBuf};

use shardset::{
    open_cache, open_cache_with, write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Error,
    Example, Feature, Features, IterOptions, OpenOptions,
};

use crate::common::{checked_binary_cache, flip_row_byte};

/// A [`checked_binary_cache`] under `root`, named after its compression.
fn checked_cache(root: &Path, compression: Compression) -> PathBuf {
    let dir = root.join(format!("c-{compression}"));
    checked_binary_cache(&dir, compression);
    dir
}

/// Every way of reading every row, as raw batches.
fn read_everything(dir: &Path, opts: &OpenOptions) -> shardset::Result<Vec<i64>> {
    let c = open_cache_with(dir, opts)?;
    let b = &c.backend;
    let mut ids = Vec::new();
    for i in 0..b.len() as i64 {
        b.get(i)?;
    }
    let all: Vec<i64> = (0..b.len() as i64).rev().collect();
    b.take(&all)?;
    b.slice(0, b.len())?;
    for batch in b.iter_batches(&IterOptions::default())? {
        let batch = batch?;
        let col = batch
            .column_by_name("i")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap()
            .clone();
        ids.extend(col.values().iter().copied());
    }
    Ok(ids)
}

#[test]
fn verify_on_read_passes_clean_rows_and_names_a_changed_row_its_column_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = OpenOptions::default().with_verify_on_read(true);
    for compression in [Compression::None, Compression::Zstd] {
        let dir = checked_cache(tmp.path(), compression);
        let ids = read_everything(&dir, &opts).unwrap();
        assert_eq!(ids, (0..300).collect::<Vec<i64>>());
    }
    // Change one byte of row 200's data in the uncompressed cache.
    let dir = tmp.path().join("c-none");
    let counts = open_cache(&dir)
        .unwrap()
        .backend
        .shard_row_counts()
        .to_vec();
    let (path, start) = flip_row_byte(&dir, &counts, 200);

    // Without the option, the changed row is read as it now is.
    assert!(read_everything(&dir, &OpenOptions::default()).is_ok());
    let c = open_cache_with(&dir, &opts).unwrap();
    // Rows of other batches read; row 200 is refused, by every read path.
    c.backend.get(199).unwrap();
    c.backend.get(225).unwrap();
    let check = |e: Error| match e {
        Error::ChecksumMismatch {
            path: p,
            row,
            local,
            columns,
        } => {
            assert_eq!(p, path);
            assert_eq!(row, 200);
            assert_eq!(local, 200 - start);
            assert_eq!(columns, vec!["data".to_string()]);
            let msg = Error::ChecksumMismatch {
                path: p,
                row,
                local,
                columns,
            }
            .to_string();
            assert!(msg.contains("row 200") && msg.contains("'data'"), "{msg}");
        }
        other => panic!("expected a checksum mismatch, got {other}"),
    };
    check(c.backend.get(200).unwrap_err());
    check(c.backend.take(&[3, 200]).unwrap_err());
    check(c.backend.slice(190, 20).unwrap_err());
    let err = c
        .backend
        .iter_batches(&IterOptions::default())
        .unwrap()
        .find_map(|b| b.err())
        .expect("iteration reaches the changed row");
    check(err);
}

#[test]
fn verify_on_read_refuses_a_cache_without_row_checksums() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plain");
    write_arrow_cache(
        (0..10).map(|i| Example::new().with("i", i as i64)),
        &Features::new().with("i", Feature::value(Dtype::Int64)),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let err = open_cache_with(&dir, &OpenOptions::default().with_verify_on_read(true)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    assert!(msg.contains("per-record checksums"), "{msg}");
}

#[test]
fn an_in_memory_cache_reads_the_same_rows_without_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    for compression in [Compression::None, Compression::Zstd, Compression::Lz4] {
        let dir = checked_cache(tmp.path(), compression);
        let mapped = read_everything(&dir, &OpenOptions::default()).unwrap();
        let c = open_cache_with(&dir, &OpenOptions::default().with_in_memory(true)).unwrap();
        assert!(c.in_memory);
        let before: Vec<_> = (0..300).map(|i| c.backend.get(i).unwrap()).collect();
        // The shard files are gone; the rows are still there.
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "arrow") {
                std::fs::remove_file(p).unwrap();
            }
        }
        let after: Vec<_> = (0..300).map(|i| c.backend.get(i).unwrap()).collect();
        assert_eq!(before, after);
        let mut ids = Vec::new();
        for batch in c.backend.iter_batches(&IterOptions::default()).unwrap() {
            let batch = batch.unwrap();
            let col = batch.column_by_name("i").unwrap();
            let col = col
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap();
            ids.extend(col.values().iter().copied());
        }
        assert_eq!(ids, mapped, "{compression}");
    }
}

#[cfg(feature = "lance")]
#[test]
fn an_in_memory_lance_cache_reads_the_same_rows_without_its_data_files() {
    let (_tmp, dir) = crate::lance::lance_f2_cache(100);
    let mapped = open_cache(&dir).unwrap();
    let want: Vec<_> = (0..100).map(|i| mapped.backend.get(i).unwrap()).collect();
    let c = open_cache_with(&dir, &OpenOptions::default().with_in_memory(true)).unwrap();
    assert!(c.in_memory);
    std::fs::remove_dir_all(dir.join("data")).unwrap();
    let got: Vec<_> = (0..100).map(|i| c.backend.get(i).unwrap()).collect();
    assert_eq!(got, want);
}

#[test]
fn the_memory_guard_refuses_naming_both_sizes_or_falls_back_to_maps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = checked_cache(tmp.path(), Compression::None);
    let tiny = OpenOptions::default()
        .with_in_memory(true)
        .try_with_memory_fraction(1e-12)
        .unwrap();
    match open_cache_with(&dir, &tiny).unwrap_err() {
        e @ Error::OutOfMemory { .. } => {
            let Error::OutOfMemory {
                ref path,
                needed,
                available,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(path, &dir);
            let files: u64 = std::fs::read_dir(&dir)
                .unwrap()
                .map(|f| f.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "arrow"))
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum();
            assert_eq!(needed, files);
            assert!(available > 0);
            let msg = e.to_string();
            assert!(
                msg.contains(&needed.to_string()) && msg.contains(&available.to_string()),
                "{msg}"
            );
        }
        other => panic!("expected OutOfMemory, got {other}"),
    }
    let c = open_cache_with(&dir, &tiny.with_in_memory_fallback(true)).unwrap();
    assert!(!c.in_memory);
    assert_eq!(c.backend.len(), 300);
    c.backend.get(299).unwrap();
    for bad in [0.0, -1.0, 1.5, f64::NAN] {
        assert!(matches!(
            OpenOptions::default().try_with_memory_fraction(bad),
            Err(Error::InvalidArgument(_))
        ));
    }
}

/// The decompressed batches a compressed cache keeps are counted by the
/// bytes their buffers span: buffers arrow-rs stored uncompressed (random
/// bytes do not compress) are slices of the mapped file, and counting the
/// whole file for each of them filled the budget with a few batches, so
/// random reads decompressed again and again.
#[test]
fn kept_decompressed_batches_are_counted_by_their_own_bytes() {
    use shardset::{ArrowShards, Dtype, Example, Feature, Features, SplitMix64};
    let f = Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("data", Feature::value(Dtype::Binary));
    let mut rng = SplitMix64::new(5);
    let rows = (0..20_000).map(move |i| {
        let b: Vec<u8> = (0..8).flat_map(|_| rng.next_u64().to_le_bytes()).collect();
        Example::new().with("x", i).with("data", b)
    });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("z");
    write_arrow_cache(
        rows,
        &f,
        &dir,
        &ArrowWriteOptions::default().with_compression(Compression::Zstd),
    )
    .unwrap();
    let c = open_cache_with(&dir, &OpenOptions::default().with_cache_bytes(64 << 20)).unwrap();
    let a = c.backend.as_any().downcast_ref::<ArrowShards>().unwrap();
    let data = a.in_memory_bytes().unwrap();
    for i in 0..20_000 {
        c.backend.get(i).unwrap();
    }
    let kept = a.cached_bytes() as u64;
    assert!(
        kept <= data + data / 10 && kept >= data - data / 10,
        "{kept} bytes kept for {data} bytes of decompressed data"
    );
}
