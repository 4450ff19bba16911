//! Staged edits of `lance-rows` caches, committed through Lance's own
//! versions: the same model checks as the Arrow caches' (reads through the
//! staging area and after commits equal a Vec model, old versions stay
//! readable), untouched fragments are the same data files, a crash at
//! every step leaves the old or the new version, pylance (as the reference
//! does) reads the latest, and `gc` removes what only old versions used.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use shardset::cache::versions::list_versions;
use shardset::layouts::edit::gc_versions;
use shardset::storage::storage_for;
use shardset::{
    open_cache, open_cache_with, verify_cache, write_lance_cache, Error, LanceWriteOptions,
    OpenOptions,
};

use crate::common::*;
use crate::edit::{apply, check_staging, features, ino, op, row, rows_of, Model};

/// A Lance cache of `n` rows, `per_fragment` rows a fragment.
fn lance_model_cache(dir: &Path, n: usize, per_fragment: usize) -> Model {
    let model: Model = (0..n as i64).map(|i| (i * 10, format!("r{i}"))).collect();
    write_lance_cache(
        model.iter().map(|(x, s)| row(*x, s)),
        &features(),
        dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(per_fragment)
            .unwrap(),
    )
    .unwrap();
    model
}

fn assert_clean(dir: &Path) {
    let rep = verify_cache(dir).unwrap();
    assert!(rep.damage.is_empty(), "{:?}", rep.damage);
}

/// The files under `data/`.
fn data_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The rows pylance reads from the latest Lance version (what the
/// reference's Lance backend opens).
fn pylance_rows(dir: &Path) -> serde_json::Value {
    python_json(
        r#"
import json, sys, lance
t = lance.dataset(sys.argv[1]).to_table()
print(json.dumps([[x, s] for x, s in zip(t.column("x").to_pylist(), t.column("s").to_pylist())]))
"#,
        &[dir],
    )
}

fn as_json(model: &Model) -> serde_json::Value {
    serde_json::Value::Array(
        model
            .iter()
            .map(|(x, s)| serde_json::json!([x, s]))
            .collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Random edit sequences on a Lance cache of several fragments: reads
    /// through the staging area, after each of two commits and of every
    /// kept version equal the Vec model; a reader opened before a commit
    /// keeps reading its version.
    #[test]
    fn random_lance_edits_read_as_a_vec_model(
        n in 0usize..30,
        ops1 in prop::collection::vec(op(), 0..16),
        ops2 in prop::collection::vec(op(), 0..6),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let v1 = lance_model_cache(&dir, n, 7);
        let mut model = v1.clone();
        let cache = open_cache(&dir).unwrap();
        let mut st = cache.edit().unwrap();
        apply(&mut st, &mut model, &ops1);
        check_staging(&st, &model);
        let plan = st.plan().unwrap();
        prop_assert_eq!(
            plan.rewritten.len() + plan.reused.len() + plan.removed.len(),
            cache.backend.num_shards()
        );
        let changed = !plan.is_empty();
        st.commit().unwrap();
        let v2 = model.clone();
        let c2 = open_cache(&dir).unwrap();
        prop_assert_eq!(rows_of(&c2), v2.clone());
        assert_clean(&dir);
        prop_assert_eq!(rows_of(&cache), v1.clone());
        let mut st = c2.edit().unwrap();
        apply(&mut st, &mut model, &ops2);
        check_staging(&st, &model);
        st.commit().unwrap();
        let c3 = open_cache(&dir).unwrap();
        prop_assert_eq!(rows_of(&c3), model.clone());
        assert_clean(&dir);
        for v in list_versions(storage_for(&dir).as_ref(), &dir).unwrap() {
            let c = open_cache_with(&dir, &OpenOptions::default().with_version(v.id)).unwrap();
            let want = match v.id { 1 => &v1, 2 if changed => &v2, _ => &model };
            prop_assert_eq!(&rows_of(&c), want, "version {}", v.id);
            prop_assert_eq!(v.num_rows, want.len() as u64);
        }
    }
}

/// A one-cell edit of a Lance cache of many fragments writes one data file
/// (that fragment anew, in its place) and shares the rest; pylance reads
/// the new version; `gc` keeping one version removes the old fragment's
/// file and the old version.
#[test]
fn a_one_cell_lance_edit_rewrites_one_fragment_and_shares_the_rest() {
    require_python_module("lance");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let mut model = lance_model_cache(&dir, 160, 8);
    let cache = open_cache(&dir).unwrap();
    assert_eq!(cache.backend.num_shards(), 20);
    let before_files = data_files(&dir);
    let before: Vec<(u64, Vec<u8>)> = before_files
        .iter()
        .map(|f| ino(&dir.join("data").join(f)))
        .collect();
    let mut st = cache.edit().unwrap().with_message("fix one value");
    st.set_cell(59, "s", "fixed".to_string()).unwrap();
    model[59].1 = "fixed".into();
    let plan = st.plan().unwrap();
    assert_eq!(plan.rewritten, vec![7]);
    assert_eq!(plan.reused.len(), 19);
    let rep = st.commit().unwrap();
    assert_eq!(rep.version, 2);
    assert_eq!(rep.change.shards_rewritten, 1);
    let after_files = data_files(&dir);
    let new: Vec<&String> = after_files.difference(&before_files).collect();
    assert_eq!(new.len(), 1, "one data file written: {new:?}");
    assert_eq!(
        rep.change.bytes_written,
        std::fs::metadata(dir.join("data").join(new[0]))
            .unwrap()
            .len()
    );
    for (f, was) in before_files.iter().zip(&before) {
        assert_eq!(&ino(&dir.join("data").join(f)), was, "{f} untouched");
    }
    // Readers: the old handle, the old version, the new one, and pylance
    // (the latest Lance version).
    assert_eq!(rows_of(&cache)[59].1, "r59");
    let now = open_cache(&dir).unwrap();
    assert_eq!(rows_of(&now), model);
    assert_eq!(now.backend.shard_row_counts(), &[8; 20]);
    assert_eq!(pylance_rows(&dir), as_json(&model));
    let old = open_cache_with(&dir, &OpenOptions::default().with_version(1)).unwrap();
    assert_eq!(rows_of(&old)[59].1, "r59");
    assert_clean(&dir);
    let log = list_versions(storage_for(&dir).as_ref(), &dir).unwrap();
    assert_eq!(log.len(), 2);
    let info = log[1].info.as_ref().unwrap();
    assert_eq!((info.id, info.parent, info.change.cells_set), (2, 1, 1));
    assert_eq!(info.change.message.as_deref(), Some("fix one value"));

    // gc: version 1 goes, and the one data file only it used.
    let g = gc_versions(&dir, 1, true).unwrap();
    assert_eq!(g.versions, vec![1]);
    assert_eq!(g.files.len(), 1, "{:?}", g.files);
    assert_eq!(data_files(&dir), after_files, "a dry run removes nothing");
    let g = gc_versions(&dir, 1, false).unwrap();
    assert_eq!(g.files.len(), 1);
    let left = data_files(&dir);
    assert_eq!(left.len(), 20);
    assert!(!left.contains(g.files[0].file_name().unwrap().to_str().unwrap()));
    assert_eq!(rows_of(&open_cache(&dir).unwrap()), model);
    assert_eq!(pylance_rows(&dir), as_json(&model));
    assert_clean(&dir);
    let e = open_cache_with(&dir, &OpenOptions::default().with_version(1)).unwrap_err();
    assert!(
        matches!(&e, Error::Metadata { path, .. } if path.ends_with("_cache_versions/1.json")),
        "{e}"
    );
}

struct Case {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    set: PathBuf,
    append: PathBuf,
    old: Model,
    new: Model,
}

fn case() -> Case {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let old = lance_model_cache(&dir, 40, 8);
    let set = tmp.path().join("set.jsonl");
    std::fs::write(
        &set,
        "{\"row\": 5, \"x\": 999}\n{\"row\": 30, \"s\": \"changed\", \"x\": -1}\n",
    )
    .unwrap();
    let append = tmp.path().join("more.jsonl");
    std::fs::write(
        &append,
        "{\"x\": 7, \"s\": \"seven\"}\n{\"x\": 8, \"s\": \"eight\"}\n",
    )
    .unwrap();
    let mut new = old.clone();
    new[5].0 = 999;
    new[30] = (-1, "changed".into());
    // Rows 16..24 (all of fragment 2) and row 3.
    new.drain(16..24);
    new.remove(3);
    new.push((7, "seven".into()));
    new.push((8, "eight".into()));
    Case {
        _tmp: tmp,
        dir,
        set,
        append,
        old,
        new,
    }
}

fn run(case: &Case, fault: Option<&str>) -> std::process::Output {
    let mut cmd = shardset_cli();
    cmd.arg("edit")
        .arg(&case.dir)
        .arg("--set")
        .arg(&case.set)
        .arg("--append")
        .arg(&case.append)
        .args(["--delete", "3,16..24", "-m", "lance edit"]);
    if let Some(p) = fault {
        cmd.env("SHARDSET_FAULT_POINT", p);
    }
    cmd.output().unwrap()
}

/// `shardset edit` of a Lance cache aborted at every step of its commit:
/// the cache reads the old version or the new one, verified, never a mix;
/// a Lance commit whose cache version never became current is undone by
/// the next commit, which then succeeds; pylance reads the result.
#[test]
fn a_crash_at_every_step_of_a_lance_commit_leaves_the_old_or_the_new_version() {
    require_python_module("lance");
    for point in [
        "edit:after-base-version",
        "edit:after-rewritten-shard",
        "edit:after-shards",
        "edit:after-lance-commit",
        "edit:after-version-file",
        "edit:after-commit",
    ] {
        let case = case();
        let out = run(&case, Some(point));
        assert!(!out.status.success(), "{point}: the process died");
        let got = rows_of(&open_cache(&case.dir).unwrap());
        assert_clean(&case.dir);
        if point == "edit:after-commit" {
            assert_eq!(got, case.new, "{point}");
        } else {
            assert_eq!(got, case.old, "{point}: the old version");
            let out = run(&case, None);
            assert!(
                out.status.success(),
                "{point}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let c = open_cache(&case.dir).unwrap();
        assert_eq!(rows_of(&c), case.new, "{point}");
        // Fragment 2 (every row deleted) is gone, fragment 0 and 3 rewritten.
        assert_eq!(c.backend.shard_row_counts(), &[7, 8, 8, 8, 2], "{point}");
        assert_eq!(pylance_rows(&case.dir), as_json(&case.new), "{point}");
        assert_clean(&case.dir);
        let v1 = open_cache_with(&case.dir, &OpenOptions::default().with_version(1)).unwrap();
        assert_eq!(rows_of(&v1), case.old, "{point}");
    }
}

/// A commit staged on a version that is no longer current is refused and
/// writes nothing; a Lance dataset whose rows were deleted outside `edit`
/// (a deletion file) is refused on read rather than read wrong.
#[test]
fn stale_lance_commits_and_foreign_deletions_are_typed_errors() {
    require_python_module("lance");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    lance_model_cache(&dir, 20, 8);
    let c = open_cache(&dir).unwrap();
    let mut a = c.edit().unwrap();
    let mut b = c.edit().unwrap();
    a.set_cell(1, "x", 5i64).unwrap();
    b.set_cell(2, "x", 6i64).unwrap();
    a.commit().unwrap();
    let before = snapshot(&dir);
    let e = b.commit().unwrap_err();
    assert!(
        matches!(
            &e,
            Error::EditConflict {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(snapshot(&dir), before, "nothing written");
    // pylance deletes a row the Lance way (a deletion file).
    python_json(
        r#"
import json, sys, lance
lance.dataset(sys.argv[1]).delete("x = 30")
print(json.dumps(True))
"#,
        &[&dir],
    );
    // The cache's own version still reads (it names its Lance version) ...
    assert_eq!(open_cache(&dir).unwrap().len(), 20);
    // ... but a cache that reads the latest Lance version refuses it.
    let meta_path = dir.join("_metadata.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    let m = meta.as_object_mut().unwrap();
    m.remove("lance_version");
    m.remove("metadata_xxh64");
    m.remove("version");
    std::fs::remove_dir_all(dir.join("_cache_versions")).unwrap();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let c = open_cache(&dir).unwrap();
    let e = c.backend.get(0).unwrap_err();
    assert!(e.to_string().contains("deletion file"), "{e}");
}
