//! Batches of numbers are gathered from the record batches, not taken: the
//! values equal a take's in every storage of an Arrow cache (kept batches,
//! compressed batches through the LRU, batches loaded into memory, caches
//! the reference wrote), in Lance caches and Parquet files (read by
//! chunks), through views and mixtures, and a gather still checks rows
//! when verify-on-read is on.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use shardset::layouts::gather::FixedOut;
use shardset::pipeline::{Batch, Pipeline, PipelineOptions};
use shardset::{
    open_cache, open_cache_with, write_arrow_cache, ArrowShards, ArrowWriteOptions, Compression,
    Dataset, Dtype, Error, Example, Feature, Features, LoaderOptions, Mixture, MixtureOptions,
    MixtureSource, OpenOptions, Order, WithinShard,
};

use crate::common::golden;

fn features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("y", Feature::value(Dtype::Float64))
        .with("small", Feature::value(Dtype::UInt8))
        .with("label", Feature::class_label(["a", "b", "c"]).unwrap())
}

/// `n` rows whose `x` is `base + i` (a pattern findable in the file), with
/// row checksums.
fn write(dir: &Path, n: usize, base: i32, compression: Compression) {
    let rows = (0..n).map(move |i| {
        Example::new()
            .with("x", base + i as i32)
            .with("y", i as f64 * 0.25)
            .with("small", (i % 251) as i64)
            .with("label", (i % 3) as i64)
    });
    write_arrow_cache(
        rows,
        &features(),
        dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap()
            .try_with_shard_size_bytes(Some(2_000))
            .unwrap()
            .with_compression(compression)
            .with_record_checksums(true),
    )
    .unwrap();
}

/// The bytes of column `name` of `rows` (a take), as a tensor holds them.
fn bytes_of(rows: &RecordBatch, name: &str) -> Vec<u8> {
    let a = rows.column_by_name(name).unwrap();
    assert_eq!(a.null_count(), 0);
    macro_rules! prim {
        ($t:ty) => {
            a.as_primitive::<$t>()
                .values()
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect()
        };
    }
    match a.data_type() {
        arrow_schema::DataType::Int32 => prim!(Int32Type),
        arrow_schema::DataType::Int64 => prim!(Int64Type),
        arrow_schema::DataType::UInt8 => prim!(UInt8Type),
        arrow_schema::DataType::Float64 => prim!(Float64Type),
        t => panic!("no test bytes for {t}"),
    }
}

/// Shuffled rows of every record batch, with repeats and negative indices.
fn scattered(n: i64) -> Vec<i64> {
    let mut idx: Vec<i64> = (0..n).map(|i| (i * 7919 + 13) % n).collect();
    idx.extend([0, n - 1, -1, -n, 5, 5]);
    idx
}

/// Gathers `names` of rows `idx` from `ds`'s backend; None when it cannot.
fn gather(ds: &Dataset, idx: &[i64], names: &[(&str, usize)]) -> Option<Vec<Vec<u8>>> {
    let schema = ds.backend().schema();
    let mut data: Vec<Vec<u8>> = names.iter().map(|(_, w)| vec![0; idx.len() * w]).collect();
    let mut outs: Vec<FixedOut<'_>> = names
        .iter()
        .zip(data.iter_mut())
        .map(|((n, w), d)| FixedOut {
            column: schema.index_of(n).unwrap(),
            width: *w,
            data: d,
        })
        .collect();
    let done = ds.backend().gather_fixed(idx, None, &mut outs).unwrap();
    done.then_some(data)
}

const COLUMNS: [(&str, usize); 4] = [("x", 4), ("y", 8), ("small", 1), ("label", 8)];

fn gathers_as_it_takes(ds: &Dataset, what: &str) {
    let idx = scattered(ds.len() as i64);
    let got = gather(ds, &idx, &COLUMNS).unwrap_or_else(|| panic!("{what}: no gather"));
    let taken = ds.backend().take(&idx).unwrap();
    for ((name, _), got) in COLUMNS.iter().zip(&got) {
        assert_eq!(got, &bytes_of(&taken, name), "{what}: column {name}");
    }
}

fn arrow(ds: &Dataset) -> &ArrowShards {
    ds.backend().as_any().downcast_ref::<ArrowShards>().unwrap()
}

#[test]
fn gathered_values_equal_the_take_in_every_storage() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    write(&plain, 437, 0, Compression::None);
    let ds = Dataset::new(open_cache(&plain).unwrap());
    assert!(arrow(&ds).shard_paths().len() >= 3, "several shards");
    gathers_as_it_takes(&ds, "uncompressed");

    let zstd = tmp.path().join("zstd");
    write(&zstd, 437, 0, Compression::Zstd);
    let ds = Dataset::new(open_cache(&zstd).unwrap());
    gathers_as_it_takes(&ds, "compressed, through the LRU");
    let _ = arrow(&ds).clone().with_cache_bytes(0);
    gathers_as_it_takes(&ds, "compressed, nothing kept");
    arrow(&ds).load_into_memory().unwrap();
    gathers_as_it_takes(&ds, "compressed, loaded into memory");
}

#[test]
fn lance_caches_and_parquet_files_gather_as_they_take() {
    let tmp = tempfile::tempdir().unwrap();
    let arrow_dir = tmp.path().join("arrow");
    write(&arrow_dir, 437, 0, Compression::None);
    let rows = Dataset::new(open_cache(&arrow_dir).unwrap());
    let lance = tmp.path().join("lance");
    let examples = (0..437usize).map(|i| {
        Example::new()
            .with("x", i as i32)
            .with("y", i as f64 * 0.25)
            .with("small", (i % 251) as i64)
            .with("label", (i % 3) as i64)
    });
    shardset::write_lance_cache(
        examples,
        &features(),
        &lance,
        &shardset::LanceWriteOptions::default()
            .try_with_max_rows_per_file(100)
            .unwrap(),
    )
    .unwrap();
    gathers_as_it_takes(&Dataset::new(open_cache(&lance).unwrap()), "lance rows");
    let file = tmp.path().join("rows.parquet");
    rows.write_parquet(&file).unwrap();
    let parquet =
        shardset::layouts::open::open_parquet_with(&file, &OpenOptions::default()).unwrap();
    gathers_as_it_takes(
        &Dataset::from_backend(std::sync::Arc::new(parquet)),
        "parquet file",
    );
}

#[test]
fn caches_the_reference_wrote_gather_their_numbers_as_a_take_gives_them() {
    for name in ["arrow_multi_shard", "arrow_single_zstd"] {
        let ds = Dataset::new(open_cache(golden().join(name)).unwrap());
        let schema = ds.backend().schema();
        let numbers: Vec<(&str, usize)> = schema
            .fields()
            .iter()
            .filter_map(|f| {
                f.data_type()
                    .primitive_width()
                    .filter(|_| f.data_type().is_numeric())
                    .map(|w| (f.name().as_str(), w))
            })
            .collect();
        assert!(!numbers.is_empty(), "{name} has number columns");
        let idx = scattered(ds.len() as i64);
        let got = gather(&ds, &idx, &numbers).unwrap_or_else(|| panic!("{name}: no gather"));
        let taken = ds.backend().take(&idx).unwrap();
        for ((col, w), got) in numbers.iter().zip(&got) {
            let want = taken.column_by_name(col).unwrap().to_data();
            let want = &want.buffers()[0].as_slice()[..idx.len() * w];
            assert_eq!(got.as_slice(), want, "{name}: column {col}");
        }
    }
}

#[test]
fn columns_with_nulls_or_another_width_are_not_gathered() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write(&dir, 50, 0, Compression::None);
    let ds = Dataset::new(open_cache(&dir).unwrap());
    assert_eq!(
        gather(&ds, &[1, 2], &[("x", 8)]),
        None,
        "int32 read as 8 bytes"
    );
    let n = Features::new().with("v", Feature::value(Dtype::Int64));
    let nulls = tmp.path().join("nulls");
    let rows = (0..20i64).map(|i| {
        if i == 3 {
            Example::new().with("v", shardset::Value::Null)
        } else {
            Example::new().with("v", i)
        }
    });
    write_arrow_cache(rows, &n, &nulls, &ArrowWriteOptions::default()).unwrap();
    let ds = Dataset::new(open_cache(&nulls).unwrap());
    assert_eq!(
        gather(&ds, &[0, 1], &[("v", 8)]),
        None,
        "a batch with a null"
    );
}

/// The pipeline's batches of a dataset: each column's bytes, by batch.
fn pipeline_columns(ds: &Dataset, threads: usize) -> Vec<Batch> {
    let l = LoaderOptions::default()
        .with_order(Order::ShardShuffle(WithinShard::Random))
        .with_seed(3)
        .try_with_batch_size(32)
        .unwrap();
    let opts = PipelineOptions::default()
        .with_loader(l)
        .try_with_threads(threads)
        .unwrap();
    Pipeline::new(ds.clone(), opts)
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

#[test]
fn pipeline_batches_of_views_hold_the_rows_a_take_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write(&dir, 300, 0, Compression::Zstd);
    let full = Dataset::new(open_cache(&dir).unwrap());
    let views = [
        ("shuffled", full.shuffle(9)),
        ("selected", full.select(&scattered(300)[..120]).unwrap()),
        ("sliced", full.slice(37, 200).unwrap()),
    ];
    for (what, ds) in views {
        let batches = pipeline_columns(&ds, 2);
        assert_eq!(
            batches.iter().map(Batch::len).sum::<usize>() as u64,
            ds.len()
        );
        for b in &batches {
            let pos: Vec<i64> = b.positions.iter().map(|&p| p as i64).collect();
            let taken = ds.take_arrow(&pos).unwrap();
            for (name, _) in COLUMNS {
                let col = b.column(name).unwrap();
                assert_eq!(col.shape, vec![b.len()]);
                assert_eq!(col.data, bytes_of(&taken, name), "{what}: column {name}");
            }
        }
    }
}

#[test]
fn located_values_are_the_takes_and_only_where_the_batches_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    write(&plain, 1000, 0, Compression::None);
    let ds = Dataset::new(open_cache(&plain).unwrap());
    // More shards than a gather keeps in its short list of tables.
    assert!(
        ds.backend().num_shards() > 8,
        "{}",
        ds.backend().num_shards()
    );
    let schema = ds.backend().schema();
    let columns: Vec<(usize, usize)> = COLUMNS
        .iter()
        .map(|(n, w)| (schema.index_of(n).unwrap(), *w))
        .collect();
    let idx = scattered(ds.len() as i64);
    // Row i to slot (i * 5) % n: every slot once, out of order.
    let slots: Vec<usize> = (0..idx.len()).map(|i| (i * 5) % idx.len()).collect();
    let mut dst: Vec<Vec<&[u8]>> = COLUMNS.iter().map(|_| vec![&[][..]; idx.len()]).collect();
    assert!(ds
        .backend()
        .locate_fixed(&idx, &columns, Some(&slots), &mut dst)
        .unwrap());
    let taken = ds.backend().take(&idx).unwrap();
    for ((name, w), located) in COLUMNS.iter().zip(&dst) {
        let want = bytes_of(&taken, name);
        for (i, &k) in slots.iter().enumerate() {
            assert_eq!(
                located[k],
                &want[i * w..(i + 1) * w],
                "column {name}, row {i}"
            );
        }
    }
    let mut short: Vec<Vec<&[u8]>> = COLUMNS.iter().map(|_| vec![&[][..]; 3]).collect();
    let e = ds
        .backend()
        .locate_fixed(&idx, &columns, None, &mut short)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // Batches through the LRU, or rows to check: nothing kept to point at.
    let zstd = tmp.path().join("zstd");
    write(&zstd, 1000, 0, Compression::Zstd);
    let ds = Dataset::new(open_cache(&zstd).unwrap());
    let mut dst: Vec<Vec<&[u8]>> = COLUMNS.iter().map(|_| vec![&[][..]; idx.len()]).collect();
    assert!(!ds
        .backend()
        .locate_fixed(&idx, &columns, None, &mut dst)
        .unwrap());
    let checked = Dataset::new(
        open_cache_with(&plain, &OpenOptions::default().with_verify_on_read(true)).unwrap(),
    );
    let mut dst: Vec<Vec<&[u8]>> = COLUMNS.iter().map(|_| vec![&[][..]; idx.len()]).collect();
    assert!(!checked
        .backend()
        .locate_fixed(&idx, &columns, None, &mut dst)
        .unwrap());
}

#[test]
fn a_mixture_gathers_each_sources_rows_into_draw_order() {
    // Sources that keep their batches are located and copied once; a
    // compressed one makes the mixture gather source by source.
    for compressed in [Compression::None, Compression::Zstd] {
        mixture_in_draw_order(compressed);
    }
}

fn mixture_in_draw_order(second: Compression) {
    let tmp = tempfile::tempdir().unwrap();
    let mut sources = Vec::new();
    for (k, n) in [(0, 90), (1, 250), (2, 40)] {
        let dir = tmp.path().join(format!("s{k}"));
        let c = if k == 1 { second } else { Compression::None };
        write(&dir, n, k * 10_000, c);
        let ds = Dataset::new(open_cache(&dir).unwrap());
        sources.push(MixtureSource::new(format!("s{k}"), ds, 1.0 + k as f64));
    }
    let mix = MixtureOptions::default()
        .with_seed(4)
        .try_with_batch_size(16)
        .unwrap();
    let m = Mixture::new(sources, mix).unwrap();
    let opts = PipelineOptions::default()
        .with_loader(LoaderOptions::default().try_with_batch_size(16).unwrap())
        .try_with_threads(2)
        .unwrap();
    let p = shardset::pipeline::MixturePipeline::new(m, opts).unwrap();
    let mut seen = 0;
    for b in p.take(20) {
        let b = b.unwrap();
        let xs: Vec<i32> = b
            .column("x")
            .unwrap()
            .data
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        for ((x, &s), &pos) in xs.iter().zip(&b.sources).zip(&b.positions) {
            assert_eq!(
                *x,
                s as i32 * 10_000 + pos as i32,
                "row {pos} of source {s}"
            );
        }
        let ys = &b.column("y").unwrap().data;
        for (i, &pos) in b.positions.iter().enumerate() {
            let y = f64::from_ne_bytes(ys[i * 8..i * 8 + 8].try_into().unwrap());
            assert_eq!(y, pos as f64 * 0.25);
        }
        seen += b.len();
    }
    assert_eq!(seen, 20 * 16);
}

#[test]
fn a_gather_checks_rows_when_verify_on_read_is_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write(&dir, 200, 1_000_000, Compression::None);
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.metadata.to_json()["row_checksums"], true);
    // Row 123's x, changed in place in its shard.
    let want = (1_000_000i32 + 123).to_le_bytes();
    let shard = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "arrow")
                && std::fs::read(p).unwrap().windows(4).any(|w| w == want)
        })
        .expect("a shard holds row 123's x");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.windows(4).position(|w| w == want).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(&shard, bytes).unwrap();

    let unchecked = Dataset::new(open_cache(&dir).unwrap());
    assert!(gather(&unchecked, &[123], &[("x", 4)]).is_some());
    let checked = Dataset::new(
        open_cache_with(&dir, &OpenOptions::default().with_verify_on_read(true)).unwrap(),
    );
    let mut x = vec![0u8; 8];
    let mut outs = [FixedOut {
        column: 0,
        width: 4,
        data: &mut x,
    }];
    let e = checked
        .backend()
        .gather_fixed(&[5, 123], None, &mut outs)
        .unwrap_err();
    assert!(
        matches!(&e, Error::ChecksumMismatch { row: 123, .. }),
        "{e:?}"
    );
}
