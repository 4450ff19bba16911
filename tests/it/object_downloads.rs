//! `s3://` source assets, downloaded as HTTP ones are (`shardset download`,
//! run as a user runs it, against the real S3 server through a proxy on
//! 127.0.0.1 that logs every request and can cut one answer mid-body): a
//! cut transfer resumes with a ranged GET from the byte where it stopped, a
//! partial file left by a killed process resumes from its length, the
//! checksum is checked, and a missing object is one error naming the URL
//! with no partial file left.

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sha2::Digest;
use shardset::download::DownloadInfo;
use shardset::storage::object::{object_storage, update_mode};

use crate::common::shardset_cli;
use crate::faults::relay;
use crate::object_storage::{server, BUCKET};

/// Each request (its line and `Range` header) as the proxy saw it.
type Log = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A proxy to `upstream` that gives every request its own connection and,
/// for the first GET whose target ends with `cut_target`, forwards only the
/// answer's head and `cut_after` bytes of its body. Returns the endpoint,
/// the log, and how many GETs of `cut_target` it saw.
fn proxy(upstream: &str, cut_target: &str, cut_after: usize) -> (String, Log, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    let log: Log = Arc::default();
    let cuts = Arc::new(AtomicU64::new(0));
    let (log_t, cuts_t, target) = (log.clone(), cuts.clone(), cut_target.to_string());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let (up, log, cuts, target) = (
                upstream.clone(),
                log_t.clone(),
                cuts_t.clone(),
                target.clone(),
            );
            std::thread::spawn(move || forward(client, &up, &log, &cuts, &target, cut_after));
        }
    });
    (endpoint, log, cuts)
}

fn forward(
    mut client: TcpStream,
    upstream: &str,
    log: &Log,
    cuts: &AtomicU64,
    target: &str,
    cut_after: usize,
) {
    let Some(r) = relay(&mut client, upstream) else {
        return;
    };
    log.lock()
        .unwrap()
        .push((r.request.clone(), r.header("range")));
    let path = r.request.split(' ').nth(1).unwrap_or("");
    let is_target =
        r.request.starts_with("GET ") && path.split('?').next().unwrap_or("").ends_with(target);
    if is_target && cuts.fetch_add(1, Ordering::SeqCst) == 0 {
        let body_at = r
            .answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(0, |p| p + 4);
        let _ = client.write_all(&r.answer[..(body_at + cut_after).min(r.answer.len())]);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let _ = client.write_all(&r.answer);
    let _ = client.shutdown(Shutdown::Both);
}

/// `n` seeded bytes put at `s3://BUCKET/<key>`; returns its URL and bytes.
fn asset(key: &str, n: usize) -> (String, Vec<u8>) {
    let mut rng = shardset::SplitMix64::new(n as u64);
    let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
    let url = format!("s3://{BUCKET}/{key}");
    let p = PathBuf::from(&url);
    object_storage(&p)
        .put(&p, Bytes::from(bytes.clone()), update_mode(None))
        .unwrap();
    (url, bytes)
}

fn sha256(bytes: &[u8]) -> String {
    let hex: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

fn download(endpoint: &str, url: &str, out: &Path, checksum: &str) -> std::process::Output {
    shardset_cli()
        .env("AWS_ENDPOINT_URL", endpoint)
        .args(["download", url, "--quiet", "--checksum", checksum, "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    v.sort();
    v
}

fn gets(log: &Log, key: &str) -> Vec<Option<String>> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(r, _)| r.starts_with("GET ") && r.contains(key))
        .map(|(_, range)| range.clone())
        .collect()
}

#[test]
fn an_s3_asset_cut_mid_body_resumes_from_the_byte_where_it_stopped() {
    let s = server();
    let key = "assets/cut.bin";
    let (url, bytes) = asset(key, 3 << 20);
    let (endpoint, log, gets_seen) = proxy(&s.endpoint, key, 1 << 20);
    let out = tempfile::tempdir().unwrap();
    let o = download(&endpoint, &url, out.path(), &sha256(&bytes));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        gets_seen.load(Ordering::SeqCst) >= 2,
        "the proxy cut no transfer"
    );
    let local = out
        .path()
        .join(DownloadInfo::new(url.as_str()).local_name());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        local.to_str().unwrap()
    );
    assert!(
        std::fs::read(&local).unwrap() == bytes,
        "other bytes than the object's"
    );
    let g = gets(&log, key);
    // The first GET is whole; the next asks from where the cut left the
    // file (the S3 client resumes a broken body itself, with a range to
    // the end; a process killed mid-transfer resumes from the partial file,
    // the next test).
    assert_eq!(g[0], None, "{g:?}");
    let resumed: Vec<u64> = g[1..]
        .iter()
        .flatten()
        .filter_map(|r| r.strip_prefix("bytes=")?.split('-').next()?.parse().ok())
        .collect();
    assert!(
        resumed.len() == 1 && resumed[0] >= 1 << 20 && resumed[0] < 3 << 20,
        "no resumed GET: {g:?}"
    );
    assert_eq!(
        files(out.path()),
        [local.file_name().unwrap().to_str().unwrap()]
    );
}

#[test]
fn a_partial_s3_download_left_by_a_killed_process_resumes_from_its_length() {
    let s = server();
    let key = "assets/partial.bin";
    let (url, bytes) = asset(key, 2 << 20);
    let (endpoint, log, _) = proxy(&s.endpoint, "no-cut", 0);
    let out = tempfile::tempdir().unwrap();
    let name = DownloadInfo::new(url.as_str()).local_name();
    std::fs::write(out.path().join(format!("{name}.tmp")), &bytes[..1_000_000]).unwrap();
    let o = download(&endpoint, &url, out.path(), &sha256(&bytes));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gets(&log, key), [Some("bytes=1000000-".to_string())]);
    assert!(std::fs::read(out.path().join(&name)).unwrap() == bytes);
    assert_eq!(files(out.path()), [name]);
}

#[test]
fn a_missing_object_or_a_wrong_checksum_is_one_error_and_leaves_no_partial_file() {
    let s = server();
    let out = tempfile::tempdir().unwrap();
    let missing = format!("s3://{BUCKET}/assets/none.bin");
    let o = download(&s.endpoint, &missing, out.path(), &sha256(b""));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&missing) && err.to_lowercase().contains("not found"),
        "{err}"
    );
    assert!(
        !err.contains("attempts"),
        "a missing object is not retried: {err}"
    );
    let (url, bytes) = asset("assets/other.bin", 4096);
    let o = download(&s.endpoint, &url, out.path(), &sha256(&bytes[1..]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("checksum"), "{err}");
    assert_eq!(files(out.path()), Vec::<String>::new());
}
