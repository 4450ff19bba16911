//! One write entry point: a `WriteSpec` made from options by name writes
//! each row layout with the options applied, and what it wrote reads back.

use serde_json::{json, Map, Value as J};
use shardset::{open_cache, write_cache, Dataset, Layout, WriteSpec};

use crate::common::*;

fn spec(layout: Layout, options: J) -> WriteSpec {
    let J::Object(m) = options else { panic!() };
    WriteSpec::from_options(layout, &m).unwrap()
}

fn keyed(
    n: usize,
) -> impl Iterator<Item = Result<(J, shardset::Example), std::convert::Infallible>> {
    f2_rows(n).enumerate().map(|(i, e)| Ok((json!(i), e)))
}

#[test]
fn an_arrow_spec_writes_shards_with_its_options() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let s = spec(
        Layout::Arrow,
        json!({"shard_size": "1KB", "compression": "zstd", "batch_size": 50, "record_checksums": true}),
    );
    let w = write_cache(keyed(500), &features_f2(), &dir, &s, None).unwrap();
    assert_eq!((w.num_rows, w.layout, w.resumed), (500, Layout::Arrow, 0));
    let c = open_cache(&dir).unwrap();
    let meta = c.metadata.as_arrow_shards().unwrap();
    assert_eq!(meta.compression, shardset::Compression::Zstd);
    let ds = Dataset::new(c);
    assert!(
        ds.backend().num_shards() > 1,
        "the 1 KB budget rotates shards"
    );
    assert_eq!(ds.get(499).unwrap().get("x").unwrap().as_i64(), Some(499));
}

#[cfg(feature = "lance")]
#[test]
fn a_lance_spec_writes_rows_and_counts_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let s = spec(
        Layout::Lance,
        json!({"compression": "zstd", "compression_level": 7}),
    );
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let w = write_cache(keyed(300), &features_f2(), &dir, &s, Some(progress.clone())).unwrap();
    assert_eq!(w.num_rows, 300);
    assert_eq!(progress.load(std::sync::atomic::Ordering::Relaxed), 300);
    let ds = Dataset::new(open_cache(&dir).unwrap());
    assert_eq!(ds.len(), 300);
    assert_eq!(ds.get(7).unwrap().get("x").unwrap().as_i64(), Some(7));
}

#[test]
fn an_option_of_another_layout_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = Map::new();
    m.insert("shard_size".into(), json!("1MB"));
    let e = WriteSpec::from_options(Layout::Lance, &m).unwrap_err();
    assert!(
        e.to_string()
            .contains("'shard_size' applies to layout arrow, not lance"),
        "{e}"
    );
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}
