//! Dataset builders: cache naming, warm opens, locking, rebuilds, work units.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use shardset::error::BoxError;
use shardset::{
    load, load_with_report, BuilderConfig, DatasetBuilder, DatasetInfo, Dtype, Error, Example,
    ExampleStream, Feature, Features, Layout, LoadOptions, Value, WorkUnit,
};

use crate::common::*;

/// Rows `x = unit * 1000 + k` for each unit; units sleep differently so
/// that they finish out of order when run in parallel.
struct Tiny {
    version: &'static str,
    units: usize,
    per_unit: usize,
    label_names: Vec<&'static str>,
    generated: AtomicUsize,
    fail_in_unit: Option<usize>,
    /// Units 0 and 1 each wait here, at their first example, until both
    /// have arrived: a build that does not run them at the same time fails.
    rendezvous: Option<std::sync::Arc<AtomicUsize>>,
}

impl Tiny {
    fn new() -> Self {
        Tiny {
            version: "1.0.0",
            units: 5,
            per_unit: 300,
            label_names: vec!["a", "b", "c"],
            generated: AtomicUsize::new(0),
            fail_in_unit: None,
            rendezvous: None,
        }
    }
}

impl DatasetBuilder for Tiny {
    fn name(&self) -> &str {
        "Tiny"
    }
    fn version(&self) -> &str {
        self.version
    }
    fn configs(&self) -> Vec<BuilderConfig> {
        vec![
            BuilderConfig::new("small", "small"),
            BuilderConfig::new("other", "other"),
        ]
    }
    fn info(&self, _config: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(
            Features::new()
                .with("x", Feature::value(Dtype::Int64))
                .with("label", Feature::class_label(self.label_names.clone())?),
        ))
    }
    fn splits(&self, _config: &str) -> Result<Vec<String>, BoxError> {
        Ok(vec!["train".into(), "test".into()])
    }
    fn work_units(&self, _c: &str, _s: &str) -> Result<Vec<WorkUnit>, BoxError> {
        Ok((0..self.units)
            .map(|u| WorkUnit::new(u.to_string()))
            .collect())
    }
    fn generate<'a>(
        &'a self,
        _c: &'a str,
        split: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        self.generated.fetch_add(1, Ordering::SeqCst);
        let u: usize = unit.id.parse()?;
        let base = if split == "test" { 1_000_000 } else { 0 };
        let n = self.per_unit;
        let fail = self.fail_in_unit == Some(u);
        let rendezvous = self.rendezvous.clone().filter(|_| u < 2);
        Ok(Box::new((0..n).map(move |k| {
            if let (0, Some(r)) = (k, &rendezvous) {
                r.fetch_add(1, Ordering::SeqCst);
                let start = std::time::Instant::now();
                while r.load(Ordering::SeqCst) < 2 {
                    if start.elapsed() > std::time::Duration::from_secs(60) {
                        return Err(
                            format!("unit {u} ran alone: units 0 and 1 never overlapped").into(),
                        );
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            if k == 0 {
                std::thread::sleep(std::time::Duration::from_millis(((5 - u % 5) * 3) as u64));
            }
            if fail && k == n / 2 {
                return Err("source file is corrupt".into());
            }
            let x = (base + u * 1000 + k) as i64;
            Ok((
                x.to_string(),
                Example::new().with("x", x).with("label", x % 3),
            ))
        })))
    }
}

fn spec(layout: Layout, options: serde_json::Value) -> shardset::WriteSpec {
    let serde_json::Value::Object(m) = options else {
        panic!("options are an object")
    };
    shardset::WriteSpec::from_options(layout, &m).unwrap()
}

fn opts(root: &Path) -> LoadOptions {
    LoadOptions::default()
        .with_cache_root(root)
        .with_write_spec(spec(
            Layout::Arrow,
            serde_json::json!({"batch_size": 64, "shard_size": 2000}),
        ))
}

fn xs(ds: &shardset::Dataset) -> Vec<i64> {
    ds.iter()
        .map(|r| r.unwrap().get("x").unwrap().as_i64().unwrap())
        .collect()
}

fn mtimes(dir: &Path) -> Vec<(std::path::PathBuf, SystemTime)> {
    let mut out = vec![(
        dir.to_path_buf(),
        std::fs::metadata(dir).unwrap().modified().unwrap(),
    )];
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        out.push((e.path(), e.metadata().unwrap().modified().unwrap()));
    }
    out.sort();
    out
}

#[test]
fn builds_once_then_opens_warm_without_touching_files() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let (ds, rep) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    assert!(rep.built);
    assert_eq!(rep.config, "small");
    assert_eq!(ds.len(), 1500);
    assert!(rep.dir.starts_with(tmp.path().join("processed")));
    assert_eq!(
        rep.dir.file_name().unwrap().to_str().unwrap(),
        shardset::cache_fingerprint("Tiny", "1.0.0", "small", "train", "arrow")
    );
    let calls = b.generated.load(Ordering::SeqCst);
    let before = mtimes(&rep.dir);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (ds2, rep2) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    assert!(!rep2.built);
    assert_eq!(
        b.generated.load(Ordering::SeqCst),
        calls,
        "warm load generated nothing"
    );
    assert_eq!(mtimes(&rep.dir), before, "warm load touched no file");
    assert_eq!(xs(&ds2), xs(&ds));
    // The other split and config live in their own directories.
    let test = load(&b, "test", &opts(tmp.path())).unwrap();
    assert_eq!(xs(&test)[0], 1_000_000);
    let other = load(&b, "train", &opts(tmp.path()).with_config("other")).unwrap();
    assert_ne!(other.cache_dir(), ds.cache_dir());
}

#[test]
fn work_units_run_in_parallel_but_keep_unit_then_example_order() {
    let want: Vec<i64> = (0..5)
        .flat_map(|u| (0..300).map(move |k| (u * 1000 + k) as i64))
        .collect();
    for par in [1usize, 2, 5] {
        let tmp = tempfile::tempdir().unwrap();
        let ds = load(
            &Tiny::new(),
            "train",
            &opts(tmp.path()).with_unit_parallelism(par),
        )
        .unwrap();
        assert_eq!(xs(&ds), want, "parallelism {par}");
    }
    // Two units in flight at once: each of the first two waits for the
    // other, which only a parallel build can satisfy.
    let tmp = tempfile::tempdir().unwrap();
    let met = std::sync::Arc::new(AtomicUsize::new(0));
    let b = Tiny {
        rendezvous: Some(met.clone()),
        ..Tiny::new()
    };
    let ds = load(&b, "train", &opts(tmp.path()).with_unit_parallelism(2)).unwrap();
    assert_eq!(xs(&ds), want);
    assert_eq!(met.load(Ordering::SeqCst), 2);
}

#[test]
fn changed_features_under_the_same_version_say_what_and_how() {
    let tmp = tempfile::tempdir().unwrap();
    load(&Tiny::new(), "train", &opts(tmp.path())).unwrap();
    let mut changed = Tiny::new();
    changed.label_names = vec!["a", "b", "z"];
    let e = load(&changed, "train", &opts(tmp.path())).unwrap_err();
    assert!(matches!(e, Error::SchemaMismatch { .. }), "{e:?}");
    let reasons = shardset::builder::why(&changed, "train", &opts(tmp.path())).unwrap();
    assert!(
        reasons.len() == 1
            && matches!(
                reasons[0],
                shardset::builder::RebuildReason::FeaturesChanged { .. }
            )
            && reasons[0].to_string().contains("'label'"),
        "{reasons:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("'label'") && msg.contains("bump") && msg.contains("rebuild"),
        "{msg}"
    );
    // rebuild replaces it; a version bump builds beside it.
    let (ds, rep) =
        load_with_report(&changed, "train", &opts(tmp.path()).with_rebuild(true)).unwrap();
    assert!(rep.built);
    let Value::Label(l) = ds.get(2).unwrap().get("label").unwrap().clone() else {
        panic!()
    };
    assert_eq!(l.name.as_deref(), Some("z"));
    let mut bumped = Tiny::new();
    bumped.version = "1.1.0";
    let (_, rep2) = load_with_report(&bumped, "train", &opts(tmp.path())).unwrap();
    assert!(rep2.built);
    assert_ne!(rep2.dir, rep.dir);
}

#[test]
fn rebuild_replaces_atomically() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let (d1, _) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    let id1 = d1.cache().unwrap().metadata.to_json()["build_id"].clone();
    let rows1 = xs(&d1);
    let (d2, rep) = load_with_report(&b, "train", &opts(tmp.path()).with_rebuild(true)).unwrap();
    assert!(rep.built);
    assert_ne!(d2.cache().unwrap().metadata.to_json()["build_id"], id1);
    assert_eq!(xs(&d2), rows1);
    let processed = tmp.path().join("processed");
    assert!(
        dot_entries(&processed).is_empty(),
        "{:?}",
        dot_entries(&processed)
    );
}

#[test]
fn a_damaged_cache_is_rebuilt_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let (_, rep) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    std::fs::write(rep.dir.join("_metadata.json"), "{ truncated").unwrap();
    let (ds, rep2) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    assert!(rep2.built);
    assert_eq!(ds.len(), 1500);
}

#[test]
fn leftovers_of_a_killed_build_are_cleaned_under_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let dir = shardset::builder::cache_dir_for(&b, "small", "train", &opts(tmp.path())).unwrap();
    let stale = dir.with_file_name(format!(
        ".{}_tmp_deadbeef",
        dir.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("shard-00000.arrow"), b"partial").unwrap();
    load(&b, "train", &opts(tmp.path())).unwrap();
    assert!(!stale.exists());
}

#[test]
fn bad_names_versions_and_splits_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let e = load(&b, "validation", &opts(tmp.path()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Split 'validation' not found") && e.contains("train"),
        "{e}"
    );
    let e = load(&b, "train", &opts(tmp.path()).with_config("nope"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Unknown config 'nope'") && e.contains("small"),
        "{e}"
    );
    let mut v = Tiny::new();
    v.version = "1.0";
    assert!(load(&v, "train", &opts(tmp.path()))
        .unwrap_err()
        .to_string()
        .contains("major.minor.patch"));
    assert!(
        !tmp.path().join("processed").exists(),
        "nothing created by failed loads"
    );
}

#[test]
fn a_failing_work_unit_publishes_nothing_and_the_next_load_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Tiny::new();
    b.fail_in_unit = Some(3);
    let e = load(&b, "train", &opts(tmp.path())).unwrap_err();
    assert!(matches!(e, Error::Generator { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("work unit '3'") && msg.contains("source file is corrupt"),
        "{msg}"
    );
    let processed = tmp.path().join("processed");
    let names: Vec<String> = std::fs::read_dir(&processed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // Nothing published: only the lock and the resumable temp dir.
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".lock") || n.contains("_tmp_")),
        "{names:?}"
    );
    assert_eq!(names.iter().filter(|n| n.contains("_tmp_")).count(), 1);
    // The source is fixed: the next load continues from the committed shards.
    b.fail_in_unit = None;
    let (ds, rep) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    assert!(rep.built);
    assert!(
        rep.resumed_rows > 0 && rep.resumed_rows < 1500,
        "resumed {}",
        rep.resumed_rows
    );
    let want: Vec<i64> = (0..5)
        .flat_map(|u| (0..300).map(move |k| (u * 1000 + k) as i64))
        .collect();
    assert_eq!(xs(&ds), want);
    // Byte-identical to an uninterrupted build of the same cache.
    let tmp2 = tempfile::tempdir().unwrap();
    let (clean, _) = load_with_report(&Tiny::new(), "train", &opts(tmp2.path())).unwrap();
    let sums = |d: &shardset::Dataset| d.cache().unwrap().metadata.to_json()["shard_xxh64"].clone();
    assert_eq!(sums(&ds), sums(&clean));
    assert!(dot_entries(&processed).is_empty());
}

#[test]
fn a_killed_build_with_other_features_is_not_resumed_but_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Tiny::new();
    b.fail_in_unit = Some(4);
    assert!(load(&b, "train", &opts(tmp.path())).is_err());
    let processed = tmp.path().join("processed");
    assert_eq!(dot_entries(&processed).len(), 1, "a resumable temp dir");
    let mut changed = Tiny::new();
    changed.label_names = vec!["x", "y", "z"];
    let (_, rep) = load_with_report(&changed, "train", &opts(tmp.path())).unwrap();
    assert!(rep.built);
    assert_eq!(rep.resumed_rows, 0, "started fresh");
    assert!(
        dot_entries(&processed).is_empty(),
        "the stale temp dir was removed"
    );
}

fn demo_json(root: &Path, rows: usize) -> serde_json::Value {
    let out = crate::common::shardset_cli()
        .args(["demo", "--json", "--rows", &rows.to_string(), "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn two_processes_loading_a_missing_cache_build_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let spawn = |root: std::path::PathBuf| std::thread::spawn(move || demo_json(&root, 3000));
    let (a, b) = (spawn(root.clone()), spawn(root.clone()));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let built: Vec<bool> = [&a, &b]
        .iter()
        .map(|j| j["built"].as_bool().unwrap())
        .collect();
    assert_eq!(
        built.iter().filter(|&&x| x).count(),
        1,
        "exactly one built: {a} {b}"
    );
    assert_eq!(a["build_id"], b["build_id"], "both read the same build");
    assert_eq!(a["rows"], 3000);
    assert_eq!(b["rows"], 3000);
    assert!(dot_entries(&root.join("processed")).is_empty());
}

#[test]
fn cache_root_comes_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::common::shardset_cli()
        .args(["demo", "--json", "--rows", "200"])
        .env("STABLE_DATASETS_CACHE_DIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = std::path::PathBuf::from(j["dir"].as_str().unwrap());
    assert!(dir.starts_with(tmp.path().join("processed")), "{dir:?}");
    assert!(dir.join("_metadata.json").exists());
}

#[cfg(feature = "lance")]
#[test]
fn the_lance_format_builds_a_lance_cache_beside_the_arrow_one() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Tiny::new();
    let (lance_ds, rep) = load_with_report(
        &b,
        "train",
        &opts(tmp.path())
            .with_write_spec(spec(Layout::Lance, serde_json::json!({"batch_size": 64}))),
    )
    .unwrap();
    assert!(rep.built);
    assert_eq!(lance_ds.backend().layout(), "lance-rows");
    assert_eq!(
        rep.dir.file_name().unwrap().to_str().unwrap(),
        shardset::cache_fingerprint("Tiny", "1.0.0", "small", "train", "lance")
    );
    let (arrow_ds, rep2) = load_with_report(&b, "train", &opts(tmp.path())).unwrap();
    assert_ne!(rep.dir, rep2.dir);
    assert_eq!(xs(&lance_ds), xs(&arrow_ds));
    let (_, warm) = load_with_report(
        &b,
        "train",
        &opts(tmp.path())
            .with_write_spec(spec(Layout::Lance, serde_json::json!({"batch_size": 64}))),
    )
    .unwrap();
    assert!(!warm.built);
}
