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
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardset::builder::{DatasetBuilder, DatasetInfo, WorkUnit};
use shardset::download::{download, DownloadInfo, DownloadOptions};
use shardset::error::BoxError;
use shardset::{Dtype, Error, Example, Feature, Features};

use crate::common::*;

pub(crate) fn texts(reasons: Vec<shardset::builder::RebuildReason>) -> Vec<String> {
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
pub(crate) struct State {
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

pub(crate) fn serve(conn: TcpStream, st: &Mutex<State>) -> std::io::Result<()> {
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
pub(crate) fn content(n: usize, seed: u64) -> Vec<u8> {
    let mut r = shardset::SplitMix64::new(seed);
    (0..n).map(|_| r.next_u64() as u8).collect()
}

pub(crate) fn sha(b: &[u8]) -> String {
    format!("sha256:{}", sha256(b))
}

pub(crate) fn fast() -> DownloadOptions {
    DownloadOptions::default().with_backoff(Duration::from_millis(10))
}

/// A URL nothing listens on.
pub(crate) fn down_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/gone.bin")
}

pub(crate) fn leftovers(dir: &Path) -> Vec<String> {
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

/// A builder whose splits are its assets: `train` and `val` (validation)
/// share one file; each row is one line of the downloaded file.
pub(crate) struct Lines {
    pub(crate) urls: Vec<(String, DownloadInfo)>,
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

/// A gzipped IDX file of `dims` holding `data`.
pub(crate) fn idx_gz(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut raw = magic.to_be_bytes().to_vec();
    for d in dims {
        raw.extend_from_slice(&d.to_be_bytes());
    }
    raw.extend_from_slice(data);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}
