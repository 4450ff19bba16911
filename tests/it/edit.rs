//! Staged edits committed as versions: reads through the staging area and
//! after a commit equal a plain Vec model, a crash at any step of a commit
//! leaves the old or the new version, untouched shards are the same files,
//! old versions stay readable until `gc`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use shardset::cache::versions::list_versions;
use shardset::layouts::edit::gc_versions;
use shardset::storage::storage_for;
use shardset::{
    open_cache, open_cache_with, verify_cache, write_arrow_cache, ArrowWriteOptions, Cache,
    Compression, Dtype, Error, Example, Feature, Features, OpenOptions, Value,
};

use crate::common::*;

pub(crate) type Model = Vec<(i64, String)>;

pub(crate) fn features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int64))
        .with("s", Feature::value(Dtype::String))
}

pub(crate) fn row(x: i64, s: &str) -> Example {
    Example::new().with("x", x).with("s", s.to_string())
}

/// A cache of `n` rows in batches of 4, about two batches a shard.
fn model_cache(dir: &Path, n: usize, checksums: bool, compression: Compression) -> Model {
    let model: Model = (0..n as i64).map(|i| (i * 10, format!("r{i}"))).collect();
    write_arrow_cache(
        model.iter().map(|(x, s)| row(*x, s)),
        &features(),
        dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(4)
            .unwrap()
            .try_with_shard_size_bytes(Some(100))
            .unwrap()
            .with_compression(compression)
            .with_record_checksums(checksums),
    )
    .unwrap();
    model
}

pub(crate) fn decode(r: &shardset::Row) -> (i64, String) {
    let x = match r.get("x") {
        Some(Value::Int(x)) => *x,
        other => panic!("x is {other:?}"),
    };
    let s = r.get("s").and_then(Value::as_str).unwrap().to_string();
    (x, s)
}

pub(crate) fn rows_of(c: &Cache) -> Model {
    (0..c.len() as i64)
        .map(|i| decode(&c.backend.get(i).unwrap()))
        .collect()
}

fn assert_clean(dir: &Path) {
    let rep = verify_cache(dir).unwrap();
    assert!(rep.damage.is_empty(), "{:?}", rep.damage);
    assert!(shardset::verify_checksums(dir).unwrap().is_empty());
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    SetRow(usize, i64),
    SetX(usize, i64),
    SetS(usize, String),
    Delete(usize),
    Append(i64),
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<usize>(), -999i64..999).prop_map(|(i, x)| Op::SetRow(i, x)),
        (any::<usize>(), -999i64..999).prop_map(|(i, x)| Op::SetX(i, x)),
        (any::<usize>(), "[a-z]{0,6}").prop_map(|(i, s)| Op::SetS(i, s)),
        any::<usize>().prop_map(Op::Delete),
        (-999i64..999).prop_map(Op::Append),
    ]
}

/// Applies `ops` to the staging area and the model alike.
pub(crate) fn apply(st: &mut shardset::layouts::edit::Staging, model: &mut Model, ops: &[Op]) {
    for op in ops {
        let n = model.len();
        match op.clone() {
            Op::Append(x) => {
                st.append(row(x, &format!("a{x}"))).unwrap();
                model.push((x, format!("a{x}")));
            }
            _ if n == 0 => {}
            Op::SetRow(i, x) => {
                st.set_row((i % n) as i64, row(x, &format!("s{x}")))
                    .unwrap();
                model[i % n] = (x, format!("s{x}"));
            }
            Op::SetX(i, x) => {
                st.set_cell((i % n) as i64, "x", x).unwrap();
                model[i % n].0 = x;
            }
            Op::SetS(i, s) => {
                st.set_cell((i % n) as i64, "s", s.clone()).unwrap();
                model[i % n].1 = s;
            }
            Op::Delete(i) => {
                st.delete((i % n) as i64).unwrap();
                model.remove(i % n);
            }
        }
    }
}

pub(crate) fn check_staging(st: &shardset::layouts::edit::Staging, model: &Model) {
    assert_eq!(st.len(), model.len() as u64);
    for (i, want) in model.iter().enumerate() {
        assert_eq!(&decode(&st.get(i as i64).unwrap()), want, "staged row {i}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random edit sequences: reads through the staging area, after the
    /// commit, and of the older versions equal the Vec model; two commits
    /// in a row; row and shard checksums stay right.
    #[test]
    fn random_edits_read_as_a_vec_model_through_staging_and_after_commit(
        n in 0usize..40,
        checksums in any::<bool>(),
        ops1 in prop::collection::vec(op(), 0..20),
        ops2 in prop::collection::vec(op(), 0..8),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let v1 = model_cache(&dir, n, checksums, Compression::None);
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
        prop_assert_eq!(plan.rows_after, model.len() as u64);
        let changed = !plan.is_empty();
        let rep = st.commit().unwrap();
        let v2 = model.clone();
        let c2 = open_cache_with(&dir, &OpenOptions::default().with_verify_on_read(checksums)).unwrap();
        prop_assert_eq!(rows_of(&c2), v2.clone());
        assert_clean(&dir);
        // The cache before the commit is still what a reader holding it reads.
        prop_assert_eq!(rows_of(&cache), v1.clone());
        if changed {
            prop_assert_eq!(rep.version, 2);
            let old = open_cache_with(&dir, &OpenOptions::default().with_version(1)).unwrap();
            prop_assert_eq!(rows_of(&old), v1.clone());
        }
        // A second commit on top.
        let mut st = c2.edit().unwrap();
        apply(&mut st, &mut model, &ops2);
        check_staging(&st, &model);
        st.commit().unwrap();
        let c3 = open_cache(&dir).unwrap();
        prop_assert_eq!(rows_of(&c3), model.clone());
        assert_clean(&dir);
        let ids: Vec<u64> = list_versions(storage_for(&dir).as_ref(), &dir)
            .unwrap()
            .iter()
            .map(|v| v.id)
            .collect();
        let now = shardset::cache::versions::version_id(&c3.metadata);
        prop_assert_eq!(*ids.last().unwrap(), now);
        for id in ids {
            let c = open_cache_with(&dir, &OpenOptions::default().with_version(id)).unwrap();
            let want = match id { 1 => &v1, 2 if changed => &v2, _ => &model };
            prop_assert_eq!(&rows_of(&c), want, "version {}", id);
        }
    }
}

pub(crate) fn ino(p: &Path) -> (u64, Vec<u8>) {
    (
        std::fs::metadata(p).unwrap().ino(),
        std::fs::read(p).unwrap(),
    )
}

/// A one-cell edit of a cache of many shards rewrites that one shard: every
/// other shard is the same file (same inode, same bytes), the old shard is
/// left as it was for readers of the old version, and pyarrow (reading the
/// shards `shard_filenames` names, as the reference does) reads the new
/// version.
#[test]
fn a_one_cell_edit_rewrites_one_shard_and_shares_the_rest() {
    require_python_module("pyarrow");
    for compression in [Compression::None, Compression::Zstd] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let mut model = model_cache(&dir, 160, true, compression);
        let cache = open_cache(&dir).unwrap();
        let names = cache
            .metadata
            .as_arrow_shards()
            .unwrap()
            .shard_filenames
            .clone();
        assert!(names.len() >= 15, "{} shards", names.len());
        let before: Vec<(u64, Vec<u8>)> = names.iter().map(|n| ino(&dir.join(n))).collect();
        let row = 7 * 8 + 3; // in shard 7 (8 rows a shard)
        let shard = cache.backend.shard_row_counts();
        assert!(shard.iter().all(|&r| r == 8), "{shard:?}");
        let mut st = cache.edit().unwrap().with_message("fix one value");
        st.set_cell(row, "s", "fixed".to_string()).unwrap();
        model[row as usize].1 = "fixed".into();
        let plan = st.plan().unwrap();
        assert_eq!(plan.rewritten, vec![7]);
        assert_eq!(plan.reused.len(), names.len() - 1);
        let rep = st.commit().unwrap();
        assert_eq!(rep.change.shards_rewritten, 1);
        let new_names = rep
            .metadata
            .as_arrow_shards()
            .unwrap()
            .shard_filenames
            .clone();
        for (i, n) in names.iter().enumerate() {
            if i == 7 {
                assert_eq!(new_names[i], "shard-00007.v2.arrow");
                assert_ne!(ino(&dir.join(&new_names[i])).0, before[i].0);
            } else {
                assert_eq!(&new_names[i], n);
            }
            // Every file of version 1 is untouched (same inode, same bytes).
            assert_eq!(ino(&dir.join(n)), before[i], "{n}");
        }
        let written = rep.change.bytes_written;
        assert_eq!(
            written,
            std::fs::metadata(dir.join(&new_names[7])).unwrap().len()
        );
        assert!(plan.bytes_estimate > 0 && plan.bytes_estimate < 2 * written + 1024);
        // Readers: the old handle, the old version, the new version.
        assert_eq!(rows_of(&cache)[row as usize].1, format!("r{row}"));
        let now = open_cache_with(&dir, &OpenOptions::default().with_verify_on_read(true)).unwrap();
        assert_eq!(rows_of(&now), model);
        assert_clean(&dir);
        let script = r#"
import json, sys
import pyarrow as pa, pyarrow.ipc as ipc
meta = json.load(open(sys.argv[1] + "/_metadata.json"))
rows = []
for name in meta["shard_filenames"]:
    rows += ipc.open_file(pa.memory_map(sys.argv[1] + "/" + name)).read_all().to_pylist()
print(json.dumps([[r["x"], r["s"]] for r in rows]))
"#;
        let got = python_json(script, &[&dir]);
        let want: Vec<serde_json::Value> = model
            .iter()
            .map(|(x, s)| serde_json::json!([x, s]))
            .collect();
        assert_eq!(got, serde_json::Value::Array(want));
        // The log says what happened.
        let log = list_versions(storage_for(&dir).as_ref(), &dir).unwrap();
        assert_eq!(log.len(), 2);
        let info = log[1].info.as_ref().unwrap();
        assert_eq!((info.id, info.parent, info.change.cells_set), (2, 1, 1));
        assert_eq!(info.change.message.as_deref(), Some("fix one value"));
    }
}

/// The edited cache's files and the CLI's input files for the crash test.
struct CliEdit {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    set: PathBuf,
    append: PathBuf,
    old: Model,
    new: Model,
}

fn cli_edit_case() -> CliEdit {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let old = model_cache(&dir, 60, true, Compression::None);
    let set = tmp.path().join("set.jsonl");
    std::fs::write(
        &set,
        "{\"row\": 5, \"x\": 999}\n{\"row\": 30, \"s\": \"changed\", \"x\": -1}\n",
    )
    .unwrap();
    let append = tmp.path().join("more.csv");
    std::fs::write(&append, "x,s\n7,seven\n8,eight\n").unwrap();
    let mut new = old.clone();
    new[5].0 = 999;
    new[30] = (-1, "changed".into());
    new.remove(17);
    new.remove(3);
    new.push((7, "seven".into()));
    new.push((8, "eight".into()));
    CliEdit {
        _tmp: tmp,
        dir,
        set,
        append,
        old,
        new,
    }
}

fn run_edit(case: &CliEdit, fault: Option<&str>) -> std::process::Output {
    let mut cmd = shardset_cli();
    cmd.arg("edit")
        .arg(&case.dir)
        .arg("--set")
        .arg(&case.set)
        .arg("--append")
        .arg(&case.append)
        .args(["--delete", "3,17", "-m", "cli edit"]);
    if let Some(p) = fault {
        cmd.env("SHARDSET_FAULT_POINT", p);
    }
    cmd.output().unwrap()
}

/// A crash at every step of a commit (the process aborts there) leaves the
/// old version or the new one, complete and verified, never a mix; the
/// next commit (or `gc`) clears what the dead one left.
#[test]
fn a_crash_at_every_step_of_a_commit_leaves_the_old_or_the_new_version() {
    for point in [
        "edit:after-base-version",
        "edit:after-rewritten-shard",
        "edit:after-shards",
        "edit:after-version-file",
        "edit:after-commit",
    ] {
        let case = cli_edit_case();
        let out = run_edit(&case, Some(point));
        assert!(!out.status.success(), "{point}: the process died");
        let c = open_cache(&case.dir).unwrap();
        let got = rows_of(&c);
        assert_clean(&case.dir);
        if point == "edit:after-commit" {
            assert_eq!(got, case.new, "{point}");
        } else {
            assert_eq!(got, case.old, "{point}: the old version");
            let out = run_edit(&case, None);
            assert!(
                out.status.success(),
                "{point}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                rows_of(&open_cache(&case.dir).unwrap()),
                case.new,
                "{point}"
            );
        }
        assert_clean(&case.dir);
        // Version 1 is still readable; gc keeping one version removes it
        // and every file only it named.
        let v1 = open_cache_with(&case.dir, &OpenOptions::default().with_version(1)).unwrap();
        assert_eq!(rows_of(&v1), case.old, "{point}");
        let g = gc_versions(&case.dir, 1, false).unwrap();
        assert_eq!(g.versions, vec![1], "{point}");
        let meta = open_cache(&case.dir).unwrap().metadata;
        let mut named = meta.as_arrow_shards().unwrap().shard_filenames.clone();
        named.sort();
        let mut on_disk: Vec<String> = std::fs::read_dir(&case.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".arrow"))
            .collect();
        on_disk.sort();
        assert_eq!(on_disk, named, "{point}: only the current version's shards");
        assert_eq!(rows_of(&open_cache(&case.dir).unwrap()), case.new);
        assert_clean(&case.dir);
        let e = open_cache_with(&case.dir, &OpenOptions::default().with_version(1)).unwrap_err();
        assert!(
            matches!(&e, Error::Metadata { path, .. } if path.ends_with("_cache_versions/1.json")),
            "{e}"
        );
    }
}

/// `shardset edit --dry-run` says what a commit would write and writes
/// nothing; `shardset log` lists the versions.
#[test]
fn the_cli_plans_commits_and_lists_versions() {
    let case = cli_edit_case();
    let before = snapshot(&case.dir);
    let out = succeeded(
        shardset_cli()
            .arg("edit")
            .arg(&case.dir)
            .arg("--set")
            .arg(&case.set)
            .args(["--dry-run", "--json"]),
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["plan"]["version"], 2);
    assert_eq!(j["plan"]["shards_rewritten"], serde_json::json!([0, 3]));
    assert_eq!(snapshot(&case.dir), before, "a dry run writes nothing");
    assert!(run_edit(&case, None).status.success());
    let out = shardset_cli()
        .arg("log")
        .arg(&case.dir)
        .arg("--json")
        .output()
        .unwrap();
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(log[0]["id"], 1);
    assert_eq!(log[1]["id"], 2);
    assert_eq!(log[1]["current"], true);
    assert_eq!(log[1]["rows"], case.new.len());
    assert_eq!(log[1]["change"]["cells_set"], 3);
    assert_eq!(log[1]["change"]["rows_deleted"], 2);
    assert_eq!(log[1]["change"]["rows_appended"], 2);
    assert_eq!(log[1]["change"]["message"], "cli edit");
    let text = shardset_cli().arg("log").arg(&case.dir).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("version 2 (current): 60 rows"), "{text}");
    // A bad cell names the file, the line and the column.
    let bad = case.dir.parent().unwrap().join("bad.jsonl");
    std::fs::write(&bad, "{\"row\": 1, \"x\": \"ten\"}\n").unwrap();
    let out = shardset_cli()
        .arg("edit")
        .arg(&case.dir)
        .arg("--set")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl") && err.contains(":1") && err.contains("x"),
        "{err}"
    );
}

/// Edits staged on a version another commit has since replaced are
/// refused, writing nothing; bad edits are typed errors that stage nothing.
#[test]
fn a_stale_commit_is_refused_and_bad_edits_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let model = model_cache(&dir, 20, false, Compression::None);
    let cache = open_cache(&dir).unwrap();
    let mut a = cache.edit().unwrap();
    let mut b = cache.edit().unwrap();
    a.set_cell(0, "x", 1i64).unwrap();
    b.delete(0).unwrap();
    a.commit().unwrap();
    let before = snapshot(&dir);
    let e = b.commit().unwrap_err();
    assert!(
        matches!(
            e,
            Error::EditConflict {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(snapshot(&dir), before, "nothing written");

    let mut st = open_cache(&dir).unwrap().edit().unwrap();
    let e = st.set_cell(0, "nope", 1i64).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("nope")),
        "{e}"
    );
    let e = st.set_cell(0, "x", "ten".to_string()).unwrap_err();
    assert!(
        matches!(&e, Error::Encode { column, .. } if column == "x"),
        "{e}"
    );
    let e = st.set_row(1, Example::new().with("x", 1i64)).unwrap_err();
    assert!(
        matches!(&e, Error::Encode { column, .. } if column == "s"),
        "{e}"
    );
    let e = st.delete(20).unwrap_err();
    assert!(matches!(e, Error::IndexOutOfRange { .. }), "{e}");
    assert!(st.is_unchanged());
    assert_eq!(st.len(), model.len() as u64);
    let e = gc_versions(&dir, 0, false).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

/// `shardset build --record-checksums`, then `cat --verify-on-read`
/// names a changed row; `cat --version` reads an older version.
#[test]
fn the_cli_records_checksums_verifies_on_read_and_reads_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("rows.jsonl");
    let lines: String = (0..40)
        .map(|i| format!("{{\"x\": {i}, \"s\": \"needle-{i:04}\"}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let out_dir = tmp.path().join("out");
    succeeded(
        shardset_cli()
            .args(["build", "jsonl"])
            .arg(&input)
            .arg("--out")
            .arg(&out_dir)
            .args(["--record-checksums", "--batch-size", "8", "--json", "-q"]),
    );
    let dir = shardset::cache::gc::dirs_under(&out_dir)
        .into_iter()
        .find(|d| shardset::cache::gc::is_cache(d))
        .expect("a cache under --out");
    let cat = |extra: &[&str]| {
        shardset_cli()
            .arg("cat")
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(cat(&["--verify-on-read", "--rows", "0..40"])
        .status
        .success());
    let mem = cat(&["--in-memory", "--rows", "39"]);
    assert!(String::from_utf8_lossy(&mem.stdout).contains("needle-0039"));
    // An edit, then the older version by id.
    let set = tmp.path().join("set.jsonl");
    std::fs::write(&set, "{\"row\": 2, \"s\": \"edited\"}\n").unwrap();
    succeeded(shardset_cli().arg("edit").arg(&dir).arg("--set").arg(&set));
    let v1 = String::from_utf8_lossy(&cat(&["--version", "1", "--rows", "2"]).stdout).into_owned();
    let v2 =
        String::from_utf8_lossy(&cat(&["--rows", "2", "--verify-on-read"]).stdout).into_owned();
    assert!(
        v1.contains("needle-0002") && v2.contains("edited"),
        "{v1} {v2}"
    );
    // A changed byte is named on read.
    let meta = open_cache(&dir).unwrap().metadata;
    let first = meta.as_arrow_shards().unwrap().shard_filenames[0].clone();
    let path = dir.join(&first);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(11).position(|w| w == b"needle-0005").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    let out = cat(&["--verify-on-read", "--rows", "0..40"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&first) && err.contains('5'), "{err}");
}
