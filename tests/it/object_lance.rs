//! Lance-layout caches on object storage: published and read through
//! Lance's object store (the reference reads a downloaded copy), and a
//! build killed between its Lance commit and its metadata, undone by `gc`.

use std::path::Path;
use std::time::Duration;

use shardset::cache::remote::{collect_object_garbage, publish_to_object_store};
use shardset::open_cache;
use shardset::storage::object::{object_storage, update_mode};
use shardset::storage::Storage;

use crate::object_storage::*;

#[test]
fn lance_caches_are_published_and_read_through_lances_object_store() {
    server();
    let t = tempfile::tempdir().unwrap();
    // lance-rows: written here, published, read back through Lance.
    let dir = t.path().join("lance");
    shardset::write_lance_cache(
        rows(300, 5),
        &features(),
        &dir,
        &shardset::LanceWriteOptions::default()
            .try_with_max_rows_per_file(100)
            .unwrap(),
    )
    .unwrap();
    let at = uri("lance/rows");
    let rep = publish_to_object_store(&dir, &at).unwrap();
    let store = object_storage(&at);
    // The cache's root is one Lance dataset (as the reference writes it),
    // and the root metadata, put last, names the build's Lance version.
    let v1 = rep.lance_version.expect("a Lance version");
    let root: serde_json::Value =
        serde_json::from_slice(&store.read(&at.join("_metadata.json")).unwrap()).unwrap();
    assert_eq!(root["lance_version"], v1);
    assert!(root.get("build_dir").is_none());
    assert_eq!(root["layout"], "lance-rows");
    assert!(store
        .list_recursive(&at.join("_builds"))
        .unwrap()
        .is_empty());
    assert!(!store
        .list_recursive(&at.join("_versions"))
        .unwrap()
        .is_empty());
    let l = open_cache(&dir).unwrap();
    let r = open_cache(&at).unwrap();
    assert_eq!(r.layout, "lance-rows");
    assert_eq!(r.len(), 300);
    assert_eq!(r.dir, at);
    for i in [0u64, 99, 100, 299] {
        assert_eq!(row_x(&r, i), row_x(&l, i));
    }
    let idx: Vec<i64> = vec![299, 0, 150, 150];
    assert_eq!(r.backend.take(&idx).unwrap(), l.backend.take(&idx).unwrap());
    // verify reads every data file back and checks it.
    let v = shardset::verify_cache(&at).unwrap();
    assert!(v.damage.is_empty(), "{v:?}");
    // Publishing the same build again commits nothing new.
    let again = publish_to_object_store(&dir, &at).unwrap();
    assert_eq!(again.lance_version, Some(v1));
    assert!(!again.replaced);
    // A cache the first publisher wrote (the whole build under
    // `_builds/<id>`, a root metadata naming it) still opens.
    let old = uri("lance/first-publisher");
    for f in walk(&dir) {
        store
            .put(
                &old.join("_builds/0123abcd").join(&f),
                std::fs::read(dir.join(&f)).unwrap().into(),
                update_mode(None),
            )
            .unwrap();
    }
    let mut marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("_metadata.json")).unwrap()).unwrap();
    marker["build_dir"] = "_builds/0123abcd".into();
    marker.as_object_mut().unwrap().remove("metadata_xxh64");
    store
        .put(
            &old.join("_metadata.json"),
            serde_json::to_vec(&marker).unwrap().into(),
            update_mode(None),
        )
        .unwrap();
    let o = open_cache(&old).unwrap();
    assert_eq!(o.len(), 300);
    assert_eq!(row_x(&o, 299), row_x(&l, 299));
    // A downloaded copy is a cache the reference opens at its root.
    let copy = t.path().join("lance-copy");
    assert_eq!(
        reference_sees(&at, &copy),
        (Some(300), Some(299), Some(300))
    );
    assert_eq!(open_cache(&copy).unwrap().len(), 300);

    // A second build replaces the first: a newer Lance version. A reader
    // holding the first keeps reading it; a new one sees the second.
    let dir2 = t.path().join("lance2");
    shardset::write_lance_cache(rows(120, 6), &features(), &dir2, &Default::default()).unwrap();
    let rep2 = publish_to_object_store(&dir2, &at).unwrap();
    assert!(rep2.replaced);
    let v2 = rep2.lance_version.unwrap();
    assert!(v2 > v1);
    assert_eq!(r.len(), 300);
    assert_eq!(row_x(&r, 299), row_x(&l, 299));
    let r2 = open_cache(&at).unwrap();
    assert_eq!(r2.len(), 120);
    assert_eq!(row_x(&r2, 119), row_x(&open_cache(&dir2).unwrap(), 119));
    // gc removes the first build's version and the data files only it used.
    let before = store.list_recursive(&at.join("data")).unwrap().len();
    let g = collect_object_garbage(&at, Duration::ZERO, false).unwrap();
    assert!(g.lance_versions_removed >= 1, "{g:?}");
    assert_eq!(g.lance_restored, None);
    assert!(g.objects > 0 && g.bytes > 0, "{g:?}");
    let after = store.list_recursive(&at.join("data")).unwrap().len();
    assert!(after < before, "{before} -> {after}");
    assert_eq!(open_cache(&at).unwrap().len(), 120);
    assert_eq!(
        reference_sees(&at, &copy),
        (Some(120), Some(119), Some(120))
    );
    assert!(shardset::verify_cache(&at).unwrap().damage.is_empty());

    // lance-video-frames: the reference's golden cache, published; every
    // window reads as from the local copy.
    #[cfg(feature = "video")]
    {
        let (_g, frames) = crate::common::golden_copy("lance_video_frames");
        let at = uri("lance/frames");
        publish_to_object_store(&frames, &at).unwrap();
        let l = open_cache(&frames).unwrap();
        let r = open_cache(&at).unwrap();
        assert_eq!(r.layout, "lance-video-frames");
        assert_eq!(r.len(), l.len());
        let (a, b) = (
            l.backend
                .as_any()
                .downcast_ref::<shardset::LanceVideoFrames>()
                .unwrap(),
            r.backend
                .as_any()
                .downcast_ref::<shardset::LanceVideoFrames>()
                .unwrap(),
        );
        for i in 0..l.len() as i64 {
            let (x, y) = (a.window(i).unwrap(), b.window(i).unwrap());
            assert_eq!(x.frames, y.frames, "window {i}");
            assert_eq!(x.frame_indices, y.frame_indices);
        }
    }
}

#[test]
fn a_lance_build_killed_between_its_lance_commit_and_its_metadata_is_undone_by_gc() {
    server();
    let t = tempfile::tempdir().unwrap();
    let dc = t.path().join("dc");
    let out = uri("killed-lance");
    let write_rows = |n: usize| jsonl_rows(t.path(), n);
    let build = |file: &Path, fault: Option<&str>| {
        cli_build(&dc, file, &out, &["--format", "lance"], fault)
    };
    let cache = out.join("train");
    let o = build(&write_rows(300), None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(open_cache(&cache).unwrap().len(), 300);
    // A rebuild killed after its Lance commit, before its metadata: ours
    // still read the committed build (the version the metadata names)...
    let second = write_rows(120);
    let o = build(&second, Some("remote:before-commit"));
    assert!(!o.status.success(), "the process was killed");
    let c = open_cache(&cache).unwrap();
    assert_eq!(c.len(), 300);
    assert_eq!(row_x_int(&c, 299), 299);
    // ...while the dataset's newest version is the uncommitted one, which
    // a reader of the newest version (the reference, on a copy) would see.
    let copy = t.path().join("copy");
    assert_eq!(
        reference_sees(&cache, &copy),
        (Some(120), Some(119), Some(300))
    );
    // A dry run changes nothing; gc restores the committed version as the
    // newest and removes the undone one.
    let dry = collect_object_garbage(&cache, Duration::ZERO, true).unwrap();
    assert_eq!(dry.lance_restored, None);
    assert_eq!(reference_sees(&cache, &copy).0, Some(120));
    let young = collect_object_garbage(&cache, Duration::from_secs(3600), false).unwrap();
    assert_eq!(
        young.lance_restored, None,
        "a young version may be a build committing now"
    );
    let g = collect_object_garbage(&cache, Duration::ZERO, false).unwrap();
    assert!(g.lance_restored.is_some(), "{g:?}");
    assert!(g.lance_versions_removed >= 1, "{g:?}");
    assert_eq!(
        reference_sees(&cache, &copy),
        (Some(300), Some(299), Some(300))
    );
    assert_eq!(open_cache(&cache).unwrap().len(), 300);
    assert!(shardset::verify_cache(&cache).unwrap().damage.is_empty());
    // The next build commits.
    let o = build(&second, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(open_cache(&cache).unwrap().len(), 120);
    assert_eq!(
        reference_sees(&cache, &copy),
        (Some(120), Some(119), Some(120))
    );
}
