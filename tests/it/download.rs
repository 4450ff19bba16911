//! Source downloads against a real HTTP server on 127.0.0.1 (a small one in
//! this harness: Range support and faults on request), with the
//! reference's download tests as counterparts: resume with `Range`, a 200
//! that starts over, fallbacks in order, one error naming every URL,
//! checksums (a mismatch deletes the partial file), retries of 5xx, one
//! download across two processes, deduplicated assets across splits, and a
//! `load` that downloads, builds, and opens warm the second time without
//! any request.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardset::builder::{load, load_with_report, why, DatasetBuilder, DatasetInfo, WorkUnit};
use shardset::download::{download, download_all, DownloadInfo, DownloadOptions};
use shardset::error::BoxError;
use shardset::{Dtype, Error, Example, Feature, Features, LoadOptions};

use crate::common::*;

fn texts(reasons: Vec<shardset::builder::RebuildReason>) -> Vec<String> {
    reasons.iter().map(ToString::to_string).collect()
}

/// What the server does for a path.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Serves the file, honouring `Range` (206).
    None,
    /// Answers every request with a 200 and the whole file.
    IgnoreRange,
    /// The first request sends this many bytes of a full-length response,
    /// then closes the connection; later ones are served normally.
    CutOnce(usize),
    /// The first `n` requests get this status.
    Status(u16, usize),
    /// Sends the body in 64 KiB pieces this far apart.
    Slow(Duration),
}

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    faults: HashMap<String, Fault>,
    /// Each request: (path, its Range header).
    requests: Vec<(String, Option<String>)>,
}

/// An HTTP/1.1 server on 127.0.0.1 serving files from memory.
pub struct TestServer {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl TestServer {
    pub fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &st);
                });
            }
        });
        TestServer { port, state }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    pub fn put(&self, path: &str, bytes: Vec<u8>, fault: Fault) {
        let mut s = self.state.lock().unwrap();
        s.files.insert(path.to_string(), bytes);
        s.faults.insert(path.to_string(), fault);
    }

    /// The requests made so far: (path, Range header).
    pub fn requests(&self) -> Vec<(String, Option<String>)> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn count(&self, path: &str) -> usize {
        self.requests().iter().filter(|(p, _)| p == path).count()
    }
}

fn serve(conn: TcpStream, st: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .trim_start_matches('/')
        .to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let (body, fault) = {
        let mut s = st.lock().unwrap();
        s.requests.push((path.clone(), range.clone()));
        let fault = s.faults.get(&path).cloned();
        // Faults that happen a number of times count down.
        match s.faults.get_mut(&path) {
            Some(Fault::CutOnce(_)) => {
                s.faults.insert(path.clone(), Fault::None);
            }
            Some(Fault::Status(_, n)) => {
                *n -= 1;
                if *n == 0 {
                    s.faults.insert(path.clone(), Fault::None);
                }
            }
            _ => {}
        }
        (s.files.get(&path).cloned(), fault)
    };
    let mut out = conn;
    let Some(body) = body else {
        write!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return Ok(());
    };
    if let Some(Fault::Status(code, _)) = fault {
        write!(
            out,
            "HTTP/1.1 {code} Fault\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return Ok(());
    }
    let start = match (&fault, &range) {
        (Some(Fault::IgnoreRange), _) | (_, None) => None,
        (_, Some(r)) => r
            .strip_prefix("bytes=")
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|s| s.parse::<usize>().ok()),
    };
    let piece = match start {
        Some(s) if s < body.len() => {
            write!(
                out,
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {s}-{}/{}\r\nConnection: close\r\n\r\n",
                body.len() - s,
                body.len() - 1,
                body.len()
            )?;
            &body[s..]
        }
        _ => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            &body[..]
        }
    };
    match fault {
        Some(Fault::CutOnce(n)) => {
            out.write_all(&piece[..n.min(piece.len())])?;
            out.flush()?;
            // Closing mid-body: the client sees a short transfer.
        }
        Some(Fault::Slow(d)) => {
            for c in piece.chunks(64 << 10) {
                out.write_all(c)?;
                out.flush()?;
                std::thread::sleep(d);
            }
        }
        _ => out.write_all(piece)?,
    }
    Ok(())
}

/// Seeded bytes of length `n`.
fn content(n: usize, seed: u64) -> Vec<u8> {
    let mut r = shardset::SplitMix64::new(seed);
    (0..n).map(|_| r.next_u64() as u8).collect()
}

fn sha(b: &[u8]) -> String {
    format!("sha256:{}", sha256(b))
}

fn fast() -> DownloadOptions {
    DownloadOptions::default().with_backoff(Duration::from_millis(10))
}

/// A URL nothing listens on.
fn down_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/gone.bin")
}

fn leftovers(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A transfer cut halfway resumes from the byte where it stopped: the
/// server sees `Range: bytes=<n>-` and the file is whole; a `.tmp` left by
/// an earlier process (the reference's 7-byte case) is resumed the same way.
#[test]
fn a_cut_transfer_resumes_from_the_byte_where_it_stopped() {
    let srv = TestServer::start();
    let body = content(1 << 20, 1);
    srv.put("big.bin", body.clone(), Fault::CutOnce(300_000));
    let tmp = tempfile::tempdir().unwrap();
    let info = DownloadInfo::new(srv.url("big.bin")).with_checksum(sha(&body));
    let p = download(&info, tmp.path(), &fast()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), body);
    assert_eq!(p.file_name().unwrap().to_str().unwrap(), info.local_name());
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].1, None);
    let resumed: usize = reqs[1]
        .1
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .unwrap()
        .parse()
        .unwrap();
    assert!(resumed > 0 && resumed <= 300_000, "resumed at {resumed}");
    assert!(leftovers(tmp.path()).is_empty());

    // The reference's test: a 7-byte partial file -> `Range: bytes=7-`.
    let small = b"hello, partial world".to_vec();
    srv.put("small.txt", small.clone(), Fault::None);
    let info = DownloadInfo::new(srv.url("small.txt"));
    let partial = tmp.path().join(format!("{}.tmp", info.local_name()));
    std::fs::write(&partial, &small[..7]).unwrap();
    let p = download(&info, tmp.path(), &fast()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), small);
    let last = srv.requests().last().cloned().unwrap();
    assert_eq!(last, ("small.txt".into(), Some("bytes=7-".into())));
    // A hit: no request at all.
    let n = srv.requests().len();
    assert_eq!(download(&info, tmp.path(), &fast()).unwrap(), p);
    assert_eq!(srv.requests().len(), n);
}

/// A server that answers a Range request with a 200 gets the file written
/// from the start, not appended to the partial one.
#[test]
fn a_200_to_a_range_request_starts_over() {
    let srv = TestServer::start();
    let body = b"0123456789abcdefghij".to_vec();
    srv.put("f.txt", body.clone(), Fault::IgnoreRange);
    let tmp = tempfile::tempdir().unwrap();
    let info = DownloadInfo::new(srv.url("f.txt"));
    std::fs::write(
        tmp.path().join(format!("{}.tmp", info.local_name())),
        b"garbage",
    )
    .unwrap();
    let p = download(&info, tmp.path(), &fast()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), body);
    assert_eq!(srv.requests()[0].1.as_deref(), Some("bytes=7-"));
}

/// Fallbacks are tried in order after the primary fails; the file is named
/// by the primary URL; the checksum is checked on the fallback's bytes.
#[test]
fn fallbacks_are_tried_in_order_and_named_by_the_primary() {
    let srv = TestServer::start();
    let body = content(5000, 2);
    srv.put("mirror2.bin", body.clone(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let primary = down_url();
    let info = DownloadInfo::new(primary.clone())
        .with_fallback(srv.url("missing.bin"))
        .with_fallback(srv.url("mirror2.bin"))
        .with_checksum(sha(&body));
    let p = download(&info, tmp.path(), &fast().with_retries(1)).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), body);
    let h = sha256(primary.as_bytes());
    assert_eq!(
        p.file_name().unwrap().to_str().unwrap(),
        format!("gone.{}.bin", &h[..10])
    );
    let paths: Vec<String> = srv.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, vec!["missing.bin", "mirror2.bin"]);
}

/// When every URL fails, one error names each of them, in order, with why.
#[test]
fn an_error_names_every_url_when_all_fail() {
    let srv = TestServer::start();
    srv.put("five.bin", vec![1; 10], Fault::Status(503, 100));
    let tmp = tempfile::tempdir().unwrap();
    let down = down_url();
    let info = DownloadInfo::new(down.clone())
        .with_fallback(srv.url("absent.bin"))
        .with_fallback(srv.url("five.bin"));
    let e = download(&info, tmp.path(), &fast().with_retries(2)).unwrap_err();
    let Error::Download { path, failures } = &e else {
        panic!("{e}")
    };
    assert_eq!(path, &tmp.path().join(info.local_name()));
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(failures[0].starts_with(&down), "{failures:?}");
    assert!(failures[1].contains("absent.bin") && failures[1].contains("404"));
    assert!(failures[2].contains("five.bin") && failures[2].contains("503"));
    assert!(failures[2].contains("after 3 attempts"), "{failures:?}");
    // 404 is not retried; 503 is, twice.
    assert_eq!(srv.count("absent.bin"), 1);
    assert_eq!(srv.count("five.bin"), 3);
    assert!(!path.exists());
}

/// A 500 then a 200: retried with backoff, downloaded.
#[test]
fn a_server_error_is_retried() {
    let srv = TestServer::start();
    let body = content(1000, 3);
    srv.put("flaky.bin", body.clone(), Fault::Status(500, 1));
    let tmp = tempfile::tempdir().unwrap();
    let p = download(
        &DownloadInfo::new(srv.url("flaky.bin")).with_checksum(sha(&body)),
        tmp.path(),
        &fast(),
    )
    .unwrap();
    assert_eq!(std::fs::read(p).unwrap(), body);
    assert_eq!(srv.count("flaky.bin"), 2);
}

/// A wrong checksum deletes the partial file and names expected and got;
/// a right one (sha256 or md5) passes.
#[test]
fn a_checksum_mismatch_deletes_the_partial_file_and_names_both() {
    let srv = TestServer::start();
    let body = content(2048, 4);
    srv.put("c.bin", body.clone(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let info = DownloadInfo::new(srv.url("c.bin")).with_checksum(wrong.clone());
    let e = download(&info, tmp.path(), &fast()).unwrap_err();
    let Error::DownloadChecksum {
        path,
        expected,
        got,
        url,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(expected, &wrong);
    assert_eq!(got, &sha(&body));
    assert_eq!(url, &srv.url("c.bin"));
    assert!(!path.exists());
    assert!(
        leftovers(tmp.path()).is_empty(),
        "the partial file is deleted"
    );
    let md5 = {
        use md5::Digest;
        format!("md5:{:x}", md5::Md5::digest(&body))
    };
    let p = download(
        &DownloadInfo::new(srv.url("c.bin")).with_checksum(md5),
        tmp.path(),
        &fast(),
    )
    .unwrap();
    assert_eq!(std::fs::read(p).unwrap(), body);
    // A malformed checksum is refused before any request.
    let n = srv.requests().len();
    let e = download(
        &DownloadInfo::new(srv.url("c.bin")).with_checksum("crc32:1234"),
        tmp.path(),
        &fast(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(srv.requests().len(), n);
}

/// Two processes asking for the same file at once: one downloads it, the
/// other waits on its lock and finds it done (one request in all).
#[test]
fn two_processes_download_the_same_file_once() {
    let srv = TestServer::start();
    let body = content(1 << 20, 5);
    srv.put(
        "shared.bin",
        body.clone(),
        Fault::Slow(Duration::from_millis(20)),
    );
    let tmp = tempfile::tempdir().unwrap();
    let spawn = || {
        shardset_cli()
            .arg("download")
            .arg(srv.url("shared.bin"))
            .arg("--checksum")
            .arg(sha(&body))
            .arg("--out")
            .arg(tmp.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for o in [&a, &b] {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(a.stdout, b.stdout, "both print the same path");
    let p = PathBuf::from(String::from_utf8(a.stdout).unwrap().trim());
    assert_eq!(std::fs::read(&p).unwrap(), body);
    assert_eq!(srv.count("shared.bin"), 1, "{:?}", srv.requests());
}

/// Identical assets are downloaded once, in parallel with the others, and
/// returned in input order; `file://` URLs are copied.
#[test]
fn identical_assets_are_downloaded_once_and_returned_in_order() {
    let srv = TestServer::start();
    let (a, b) = (content(3000, 6), content(4000, 7));
    srv.put("a.bin", a.clone(), Fault::None);
    srv.put("b.bin", b.clone(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local.txt");
    std::fs::write(&local, b"local bytes").unwrap();
    let infos = vec![
        DownloadInfo::new(srv.url("b.bin")),
        DownloadInfo::new(srv.url("a.bin")),
        DownloadInfo::new(srv.url("b.bin")),
        DownloadInfo::new(format!("file://{}", local.display())),
    ];
    let out = tmp.path().join("dl");
    let paths = download_all(&infos, &out, &fast()).unwrap();
    assert_eq!(paths.len(), 4);
    assert_eq!(paths[0], paths[2]);
    assert_eq!(std::fs::read(&paths[0]).unwrap(), b);
    assert_eq!(std::fs::read(&paths[1]).unwrap(), a);
    assert_eq!(std::fs::read(&paths[3]).unwrap(), b"local bytes");
    assert_eq!(srv.count("b.bin"), 1);
    assert_eq!(srv.count("a.bin"), 1);
}

/// `gc` removes partial downloads old enough and not being resumed.
#[test]
fn gc_removes_stale_partial_downloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dl = tmp.path().join("downloads");
    std::fs::create_dir_all(&dl).unwrap();
    std::fs::write(dl.join("x.0123456789.bin.tmp"), vec![0; 100]).unwrap();
    std::fs::write(dl.join("done.0123456789.bin"), vec![0; 10]).unwrap();
    let out = succeeded(
        shardset_cli()
            .arg("gc")
            .arg(tmp.path())
            .args(["--dry-run", "--json"]),
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let removed = j["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{j}");
    assert_eq!(removed[0]["kind"], "partial download");
    assert!(
        dl.join("x.0123456789.bin.tmp").exists(),
        "a dry run keeps it"
    );
    // Too young for --older-than 1h: kept.
    let out =
        succeeded(
            shardset_cli()
                .arg("gc")
                .arg(tmp.path())
                .args(["--older-than", "1h", "--json"]),
        );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["removed"].as_array().unwrap().len(), 0, "{j}");
    succeeded(shardset_cli().arg("gc").arg(tmp.path()));
    assert!(!dl.join("x.0123456789.bin.tmp").exists());
    assert!(
        dl.join("done.0123456789.bin").exists(),
        "complete files stay"
    );
}

/// A builder whose splits are its assets: `train` and `val` (validation)
/// share one file; each row is one line of the downloaded file.
struct Lines {
    urls: Vec<(String, DownloadInfo)>,
}

impl DatasetBuilder for Lines {
    fn name(&self) -> &str {
        "Lines"
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    fn info(&self, _: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(
            Features::new()
                .with("line", Feature::value(Dtype::String))
                .with("split", Feature::value(Dtype::String)),
        ))
    }
    fn assets(&self, _: &str) -> Result<Vec<(String, DownloadInfo)>, BoxError> {
        Ok(self.urls.clone())
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        split: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<shardset::builder::ExampleStream<'a>, BoxError> {
        let text = std::fs::read_to_string(&unit.files[0])?;
        let rows: Vec<_> = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                Ok((
                    i.to_string(),
                    Example::new()
                        .with("line", l.to_string())
                        .with("split", split.to_string()),
                ))
            })
            .collect();
        Ok(Box::new(rows.into_iter()))
    }
}

/// `load` of a builder with assets: downloads (identical assets of two
/// splits once, `val` mapped to `validation`), builds, and the second
/// load opens warm without any request; a changed checksum or URL makes
/// `why` say so and the next load rebuild; the downloads folder option
/// is used.
#[test]
fn load_downloads_builds_and_opens_warm_without_a_request() {
    let srv = TestServer::start();
    let text = "alpha\nbeta\ngamma\n";
    srv.put("lines.txt", text.as_bytes().to_vec(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let asset = DownloadInfo::new(srv.url("lines.txt")).with_checksum(sha(text.as_bytes()));
    let b = Lines {
        urls: vec![
            ("train".into(), asset.clone()),
            ("val".into(), asset.clone()),
        ],
    };
    assert_eq!(b.splits("default").unwrap(), vec!["train", "validation"]);
    let dl = tmp.path().join("my-downloads");
    let opts = LoadOptions::default()
        .with_cache_root(tmp.path())
        .with_download_dir(&dl)
        .with_download(fast());
    let (ds, rep) = load_with_report(&b, "train", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(ds.len(), 3);
    assert_eq!(
        ds.get(1).unwrap().get("line").and_then(|v| v.as_str()),
        Some("beta")
    );
    assert!(dl.join(asset.local_name()).is_file());
    let (ds, rep) = load_with_report(&b, "validation", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(
        ds.get(0).unwrap().get("split").and_then(|v| v.as_str()),
        Some("validation")
    );
    assert_eq!(srv.count("lines.txt"), 1, "one download for both splits");
    // Warm: no request at all.
    let n = srv.requests().len();
    let (_, rep) = load_with_report(&b, "train", &opts).unwrap();
    assert!(!rep.built);
    assert_eq!(srv.requests().len(), n);
    assert!(texts(why(&b, "train", &opts).unwrap()).is_empty());
    // A changed checksum: `why` names it, the next load rebuilds (and
    // downloads again under the same name, which is already there).
    let mut changed = b.urls.clone();
    changed[0].1 = changed[0].1.clone().with_fallback(srv.url("mirror.txt"));
    let b2 = Lines { urls: changed };
    let reasons = texts(why(&b2, "train", &opts).unwrap());
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("asset 'train' fallbacks changed"),
        "{reasons:?}"
    );
    let (_, rep) = load_with_report(&b2, "train", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(texts(rep.reasons), reasons);
    let url2 = Lines {
        urls: vec![("train".into(), DownloadInfo::new(srv.url("other.txt")))],
    };
    srv.put("other.txt", b"one\ntwo\n".to_vec(), Fault::None);
    let reasons = texts(why(&url2, "train", &opts).unwrap());
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("asset 'train' url changed")),
        "{reasons:?}"
    );
    assert_eq!(load(&url2, "train", &opts).unwrap().len(), 2);
    // No assets and no splits: a typed error naming the builder.
    let none = Lines { urls: Vec::new() };
    let e = load(&none, "train", &opts).unwrap_err();
    assert!(e.to_string().contains("no assets are declared"), "{e}");
    // A failed download builds nothing.
    let bad = Lines {
        urls: vec![(
            "test".into(),
            DownloadInfo::new(srv.url("lines.txt"))
                .with_checksum(format!("md5:{}", "1".repeat(32))),
        )],
    };
    let e = load(&bad, "test", &opts).unwrap_err();
    assert!(matches!(e, Error::DownloadChecksum { .. }), "{e}");
    let dir = shardset::builder::cache_dir_for(&bad, "default", "test", &opts).unwrap();
    assert!(!dir.exists());
}

#[allow(dead_code)]
#[path = "../../examples/mnist/builder.rs"]
mod mnist_builder;

/// A gzipped IDX file of `dims` holding `data`.
fn idx_gz(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut raw = magic.to_be_bytes().to_vec();
    for d in dims {
        raw.extend_from_slice(&d.to_be_bytes());
    }
    raw.extend_from_slice(data);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

/// The example MNIST builder (real URLs and md5 in `examples/mnist`),
/// pointed at a local server holding a generated copy of the four files
/// behind a primary mirror that is down: downloads through the fallback,
/// checks the md5s, builds both splits with the pixels and labels written.
#[test]
fn the_example_mnist_builder_builds_from_a_local_mirror() {
    use md5::Digest;
    let srv = TestServer::start();
    let sizes = [("train", 20u32), ("test", 10u32)];
    let mut md5 = Vec::new();
    let mut want: HashMap<&str, (Vec<u8>, Vec<u8>)> = HashMap::new();
    for (split, file, _) in mnist_builder::FILES {
        let n = sizes.iter().find(|s| s.0 == *split).unwrap().1;
        let pixels = content(n as usize * 28 * 28, n as u64);
        let labels: Vec<u8> = (0..n).map(|i| (i * 7 % 10) as u8).collect();
        let body = if file.contains("images") {
            idx_gz(0x0803, &[n, 28, 28], &pixels)
        } else {
            idx_gz(0x0801, &[n], &labels)
        };
        md5.push(format!("{:x}", md5::Md5::digest(&body)));
        srv.put(&format!("mnist/{file}"), body, Fault::None);
        want.insert(split, (pixels, labels));
    }
    let tmp = tempfile::tempdir().unwrap();
    let down = down_url();
    let b = mnist_builder::Mnist::new(
        vec![
            down.trim_end_matches("gone.bin").to_string(),
            srv.url("mnist/"),
        ],
        md5,
    );
    let opts = LoadOptions::default()
        .with_cache_root(tmp.path())
        .with_download(fast().with_retries(0));
    for (split, n) in sizes {
        let ds = load(&b, split, &opts).unwrap();
        assert_eq!(ds.len(), n as u64);
        let (pixels, labels) = &want[split];
        for i in [0, n as usize - 1] {
            let row = ds.get(i as i64).unwrap();
            let Some(shardset::Value::Image(img)) = row.get("image") else {
                panic!("{row:?}")
            };
            assert_eq!(img.shape(), vec![28, 28]);
            assert_eq!(img.data, pixels[i * 784..(i + 1) * 784]);
            assert_eq!(row.get("label").unwrap().as_i64(), Some(labels[i] as i64));
        }
    }
    assert_eq!(srv.requests().len(), 4, "each file once");
    assert!(tmp.path().join("downloads").read_dir().unwrap().count() >= 4);
    // A split of two files: a changed checksum of the second is named.
    let mut md5b: Vec<String> = mnist_builder::FILES
        .iter()
        .map(|f| f.2.to_string())
        .collect();
    md5b[0] = b.assets("default").unwrap()[0].1.checksum.clone().unwrap()[4..].to_string();
    let b2 = mnist_builder::Mnist::new(
        vec![
            down.trim_end_matches("gone.bin").to_string(),
            srv.url("mnist/"),
        ],
        md5b,
    );
    let reasons = texts(why(&b2, "train", &opts).unwrap());
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("asset 'train[1]' checksum changed"),
        "{reasons:?}"
    );
}
