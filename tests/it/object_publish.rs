//! Publishing to object storage and to a shared directory: the commit
//! marker and `gc` of uncommitted builds, parts committed in unit order,
//! a build killed before its commit, files uploaded in parts (against the
//! server of `object_storage.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use shardset::cache::remote::{collect_object_garbage, publish_to_object_store};
use shardset::storage::object::{object_storage, update_mode};
use shardset::storage::Storage;
use shardset::{open_cache, ArrowWriteOptions};

use crate::common::{python_json, shardset_cli, succeeded};

use crate::object_storage::*;

#[test]
fn publishing_commits_with_a_marker_and_gc_removes_only_uncommitted_builds() {
    server();
    let t = tempfile::tempdir().unwrap();
    let at = uri("commit/c");
    let a = local_cache(t.path(), 300, 1);
    let b = local_cache(t.path(), 250, 2);
    let c = local_cache(t.path(), 200, 3);
    let ra = publish_to_object_store(&a, &at).unwrap();
    let reader_a = open_cache(&at).unwrap();
    assert_eq!(reader_a.len(), 300);
    // Publishing the same build again commits nothing new.
    let again = publish_to_object_store(&a, &at).unwrap();
    assert!(!again.replaced);

    let rb = publish_to_object_store(&b, &at).unwrap();
    assert!(rb.replaced);
    assert_ne!(ra.build, rb.build);
    // A reader of the replaced build keeps reading it; a new one sees B.
    assert_eq!(row_x(&reader_a, 299), row_x(&open_cache(&a).unwrap(), 299));
    let reader_b = open_cache(&at).unwrap();
    assert_eq!(reader_b.len(), 250);
    assert_eq!(row_x(&reader_b, 7), row_x(&open_cache(&b).unwrap(), 7));

    // The commit is conditional: a put naming the metadata a build read
    // before another build committed is refused, and changes nothing.
    let store = object_storage(&at);
    let meta = at.join("_metadata.json");
    let (_, etag_b) = store.get_with_etag(&meta).unwrap().unwrap();
    publish_to_object_store(&c, &at).unwrap();
    let e = store
        .put(&meta, bytes::Bytes::from_static(b"{}"), update_mode(etag_b))
        .unwrap_err();
    match &e {
        shardset::Error::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists, "{e}")
        }
        other => panic!("{other:?}"),
    }
    let e = store
        .put(&meta, bytes::Bytes::from_static(b"{}"), update_mode(None))
        .unwrap_err();
    assert!(e.to_string().contains("_metadata.json"), "{e}");
    assert_eq!(open_cache(&at).unwrap().len(), 200);

    // A build that never committed: its objects are not seen by readers.
    let stray = at.join("_builds/0123456789abcdef/shard-00000.arrow");
    store
        .put(
            &stray,
            bytes::Bytes::from_static(b"partial"),
            update_mode(None),
        )
        .unwrap();
    assert_eq!(open_cache(&at).unwrap().len(), 200);

    // gc leaves young prefixes alone, then removes every uncommitted one.
    let young = collect_object_garbage(&at, Duration::from_secs(3600), false).unwrap();
    assert!(young.removed.is_empty());
    assert_eq!(young.kept_young.len(), 3, "{young:?}");
    let dry = collect_object_garbage(&at, Duration::ZERO, true).unwrap();
    assert_eq!(dry.removed.len(), 3);
    assert!(store.is_file(&stray));
    let g = collect_object_garbage(&at, Duration::ZERO, false).unwrap();
    assert_eq!(g.removed.len(), 3, "{g:?}");
    assert!(g.committed.is_some());
    assert!(!store.is_file(&stray));
    let left = store.list_recursive(&at).unwrap();
    let committed = g.committed.unwrap();
    assert!(left.iter().all(|e| e.path.ends_with("_metadata.json")
        || e.path
            .to_string_lossy()
            .contains(&format!("_builds/{committed}/"))));
    let reader_c = open_cache(&at).unwrap();
    assert_eq!(row_x(&reader_c, 199), row_x(&open_cache(&c).unwrap(), 199));

    // A downloaded copy of the committed cache is a plain local cache:
    // ours opens and verifies it, and pyarrow reads the shards its
    // metadata names as the reference does (directory / name).
    let copy = t.path().join("copy");
    download(&at, &copy);
    let local_copy = open_cache(&copy).unwrap();
    assert_eq!(local_copy.len(), 200);
    assert_eq!(row_x(&local_copy, 150), row_x(&reader_c, 150));
    assert!(
        shardset::layouts::arrow_shards::integrity::verify_checksums(&copy)
            .unwrap()
            .is_empty()
    );
    let j = python_json(
        "import json, sys, pathlib, pyarrow.ipc as ipc\n\
         d = pathlib.Path(sys.argv[1]); m = json.loads((d / '_metadata.json').read_text())\n\
         n = sum(ipc.open_file(str(d / f)).read_all().num_rows for f in m['shard_filenames'])\n\
         print(json.dumps({'rows': n, 'meta_rows': m['num_rows']}))",
        &[&copy],
    );
    assert_eq!(j["rows"], 200);
    assert_eq!(j["meta_rows"], 200);
}

#[test]
fn parts_commit_in_unit_order_to_a_shared_directory_and_an_object_store() {
    server();
    let t = tempfile::tempdir().unwrap();
    use shardset::cache::remote::{commit_parts, publish_part};
    let build = "feedfacecafebeef";
    // Three units of 70 rows each, written as parts with the build's id.
    let part = |k: usize| {
        let dir = t.path().join(format!("part{k}"));
        shardset::write_arrow_cache(
            rows(210, 9).skip(70 * k).take(70),
            &features(),
            &dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(25)
                .unwrap()
                .try_with_shard_size_bytes(Some(100_000))
                .unwrap()
                .with_record_checksums(true)
                .with_build_id(build.to_string()),
        )
        .unwrap();
        dir
    };
    let parts: Vec<PathBuf> = (0..3).map(part).collect();
    let whole = t.path().join("whole");
    shardset::write_arrow_cache(
        rows(210, 9),
        &features(),
        &whole,
        &ArrowWriteOptions::default()
            .try_with_batch_size(25)
            .unwrap(),
    )
    .unwrap();
    let whole = open_cache(&whole).unwrap();
    for target in [t.path().join("shared/cache"), uri("parts/c")] {
        // Units finish in any order (2, 0, 1) and one is retried: the
        // commit is in unit order and no row is stored twice.
        let mut records = vec![serde_json::Value::Null; 3];
        for k in [2usize, 0, 1, 0] {
            records[k] = publish_part(&parts[k], &target, build, k).unwrap();
        }
        let rep = commit_parts(&target, build, &records).unwrap();
        assert!(!rep.replaced);
        let c = open_cache(&target).unwrap();
        assert_eq!(c.len(), 210);
        for i in [0u64, 69, 70, 140, 209] {
            assert_eq!(
                row_x(&c, i),
                row_x(&whole, i),
                "row {i} of {}",
                target.display()
            );
        }
        let names = c
            .backend
            .as_any()
            .downcast_ref::<shardset::ArrowShards>()
            .unwrap()
            .shard_paths();
        assert!(names[0]
            .to_string_lossy()
            .contains("_builds/feedfacecafebeef/u00000-shard-"));
        // Each row is checked against the checksum its part recorded (the
        // sidecars were renamed with their shards).
        let checked = shardset::open_cache_with(
            &target,
            &shardset::OpenOptions::default().with_verify_on_read(true),
        )
        .unwrap();
        let all: Vec<i64> = (0..210).collect();
        assert_eq!(checked.backend.take(&all).unwrap().num_rows(), 210);
        // Committing again changes nothing; gc finds nothing to remove.
        assert!(!commit_parts(&target, build, &records).unwrap().replaced);
        let g = collect_object_garbage(&target, Duration::ZERO, false).unwrap();
        assert!(g.removed.is_empty(), "{g:?}");
        assert_eq!(g.committed.as_deref(), Some(build));
        // Parts of another build id, or no parts, are refused.
        let e = publish_part(&parts[0], &target, "0000000000000000", 0).unwrap_err();
        assert!(e.to_string().contains("build id"), "{e}");
        assert!(commit_parts(&target, build, &[]).is_err());
    }
    // The shared directory is a plain local cache: every shard checks.
    let shared = t.path().join("shared/cache");
    assert!(shardset::verify_checksums(&shared).unwrap().is_empty());
    // `shardset gc` on the root removes a build that never committed there.
    let stray = shared.join("_builds/0badc0de/u00000-shard-00000.arrow");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, b"partial").unwrap();
    let mut c = shardset_cli();
    c.arg("gc").arg(t.path().join("shared")).arg("--json");
    let j = json_of(&succeeded(&mut c));
    let removed = j["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{j}");
    assert!(
        removed[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("_builds/0badc0de"),
        "{j}"
    );
    assert!(!stray.exists());
    assert_eq!(open_cache(&shared).unwrap().len(), 210);
}

#[test]
fn a_build_killed_before_its_commit_changes_nothing_and_the_next_one_commits() {
    server();
    let t = tempfile::tempdir().unwrap();
    let dc = t.path().join("dc");
    let out = uri("killed");
    let write_rows = |n: usize| jsonl_rows(t.path(), n);
    let build = |file: &Path, fault: Option<&str>| {
        cli_build(&dc, file, &out, &["--shard-size", "1KB"], fault)
    };
    let cache = out.join("train");
    let store = object_storage(&cache);
    // A first build killed after uploading everything, before the commit:
    // nothing is visible, and its objects are an uncommitted prefix.
    let first = write_rows(300);
    let o = build(&first, Some("remote:before-commit"));
    assert!(!o.status.success(), "the process was killed");
    assert!(open_cache(&cache).is_err());
    assert!(!store.is_file(&cache.join("_metadata.json")));
    assert!(!store
        .list_recursive(&cache.join("_builds"))
        .unwrap()
        .is_empty());
    // Run again, it commits: the same build id, so the same objects.
    let o = build(&first, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(open_cache(&cache).unwrap().len(), 300);
    let g = collect_object_garbage(&cache, Duration::ZERO, true).unwrap();
    assert!(g.removed.is_empty(), "{g:?}");
    // A rebuild with other rows killed before its commit leaves the
    // committed cache as it was.
    let second = write_rows(120);
    let o = build(&second, Some("remote:before-commit"));
    assert!(!o.status.success());
    let c = open_cache(&cache).unwrap();
    assert_eq!(c.len(), 300);
    assert_eq!(row_x_int(&c, 299), 299);
    // Its upload is garbage gc removes; the committed build stays.
    let g = collect_object_garbage(&cache, Duration::ZERO, false).unwrap();
    assert_eq!(g.removed.len(), 1, "{g:?}");
    assert_eq!(open_cache(&cache).unwrap().len(), 300);
    let o = build(&second, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(open_cache(&cache).unwrap().len(), 120);
}

#[test]
fn files_larger_than_a_part_are_uploaded_in_parts() {
    server();
    let t = tempfile::tempdir().unwrap();
    let dc = t.path().join("dc");
    // 1,500 rows of ~8 KB: one shard of ~12 MB, above a 5 MiB part.
    let file = t.path().join("big.jsonl");
    let text: String = (0..1500)
        .map(|i| {
            format!(
                "{{\"x\": {i}, \"s\": \"{}\"}}\n",
                "abcdefgh".repeat(1000 + i % 7)
            )
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    let out = uri("multipart");
    let build = |part: &str, to: &Path| {
        let mut c = cli(&dc);
        c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
            .arg(to)
            .args(["--shard-size", "64MB", "--json"])
            .env("SHARDSET_OBJECT_PART_BYTES", part);
        c.output().unwrap()
    };
    let o = build("5242880", &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cache = out.join("train");
    let store = object_storage(&cache);
    let meta: serde_json::Value =
        serde_json::from_slice(&store.read(&cache.join("_metadata.json")).unwrap()).unwrap();
    let shard = cache.join(meta["shard_filenames"][0].as_str().unwrap());
    let (bytes, etag) = store.get_with_etag(&shard).unwrap().unwrap();
    assert!(bytes.len() > 10 << 20, "{}", bytes.len());
    // S3's ETag of a multipart upload ends in `-<parts>`.
    let etag = etag.unwrap();
    assert!(etag.trim_matches('"').ends_with("-3"), "{etag}");
    let c = open_cache(&cache).unwrap();
    assert_eq!(c.len(), 1500);
    assert_eq!(row_x_int(&c, 1499), 1499);
    assert!(shardset::verify_cache(&cache).unwrap().damage.is_empty());
    // A part size S3 would refuse is an error naming the setting.
    let o = build("1000", &uri("multipart-bad"));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("SHARDSET_OBJECT_PART_BYTES"), "{err}");
}
