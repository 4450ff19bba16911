//! Faults between the client and the S3 server: a proxy on 127.0.0.1,
//! started by the test, answers 503 SlowDown and 429 with Retry-After, drops
//! connections before answering, cuts responses mid-body and stalls, on a
//! seeded schedule (the first connections always get one fault of each
//! kind). Builds to `s3://` and reads from it through the proxy either
//! give the values a local build gives or fail with an error, and never
//! publish a partial cache.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{shardset_cli, succeeded};
use crate::object_storage::{server, BUCKET};

/// What the proxy did to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Pass,
    SlowDown,
    TooMany,
    Drop,
    Truncate,
    Stall,
}

struct FaultProxy {
    endpoint: String,
    stop: Arc<AtomicBool>,
    /// Connections seen and faults injected, by kind (Pass first).
    counts: Arc<[AtomicU64; 6]>,
}

impl FaultProxy {
    fn start(upstream: &str, seed: u64, fault_rate: f64) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[AtomicU64; 6]> = Arc::new(Default::default());
        let (stop_t, counts_t) = (stop.clone(), counts.clone());
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let mut rng = shardset::SplitMix64::new(seed);
            let scripted = [
                Fault::SlowDown,
                Fault::TooMany,
                Fault::Drop,
                Fault::Truncate,
                Fault::Stall,
            ];
            let mut n = 0usize;
            while !stop_t.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let fault = if n < scripted.len() {
                    scripted[n]
                } else if (rng.below(1000) as f64) < fault_rate * 1000.0 {
                    scripted[rng.below(scripted.len() as u64) as usize]
                } else {
                    Fault::Pass
                };
                n += 1;
                let cut = 64 + rng.below(2048) as usize;
                counts_t[fault as usize].fetch_add(1, Ordering::Relaxed);
                let up = upstream.clone();
                std::thread::spawn(move || serve(client, &up, fault, cut));
            }
        });
        FaultProxy {
            endpoint,
            stop,
            counts,
        }
    }

    fn faults(&self) -> u64 {
        self.counts[1..]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads a request's head (up to the blank line), so a refusal is sent
/// after the client has spoken.
fn read_head(s: &mut TcpStream) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
}

fn serve(mut client: TcpStream, upstream: &str, fault: Fault, cut: usize) {
    match fault {
        Fault::Drop => {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Fault::SlowDown | Fault::TooMany => {
            read_head(&mut client);
            let (status, code) = if fault == Fault::SlowDown {
                ("503 Slow Down", "SlowDown")
            } else {
                ("429 Too Many Requests", "TooManyRequests")
            };
            let body = format!(
                "<Error><Code>{code}</Code><Message>Please reduce your request rate.</Message></Error>"
            );
            let _ = write!(
                client,
                "HTTP/1.1 {status}\r\nRetry-After: 1\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Fault::Stall => std::thread::sleep(Duration::from_millis(700)),
        Fault::Pass | Fault::Truncate => {}
    }
    let Ok(up) = TcpStream::connect(upstream) else {
        return;
    };
    let (mut c_read, mut u_write) = (client.try_clone().unwrap(), up.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (up, client);
    if fault == Fault::Truncate {
        // The response's first bytes, then the connection is gone.
        let mut buf = vec![0u8; cut];
        let mut got = 0;
        while got < cut {
            match u_read.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        let _ = c_write.write_all(&buf[..got]);
        let _ = c_write.shutdown(Shutdown::Both);
        let _ = u_read.shutdown(Shutdown::Both);
        return;
    }
    let _ = std::io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
}

fn rows_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("d.jsonl");
    let text: String = (0..600)
        .map(|i| format!("{{\"x\": {i}, \"s\": \"{}\"}}\n", "w".repeat(i % 40)))
        .collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// What a local build of the rows of `file` reads back (`shardset cat`).
fn local_values(dir: &Path, file: &Path) -> Vec<u8> {
    let local = dir.join("local");
    succeeded(
        shardset_cli()
            .args(["build", "jsonl", file.to_str().unwrap(), "--out"])
            .arg(&local)
            .args(["--shard-size", "4KB"]),
    );
    succeeded(shardset_cli().args(["cat"]).arg(local.join("train"))).stdout
}

/// `shardset cat` of a whole cache, as its JSON lines.
fn cat(cache: &Path, endpoint: &str, dc: &Path) -> std::process::Output {
    shardset_cli()
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("SHARDSET_OBJECT_CACHE", dc)
        .args(["cat"])
        .arg(cache)
        .output()
        .unwrap()
}

#[test]
fn builds_and_reads_through_a_faulty_network_give_the_same_values_or_fail_whole() {
    let s = server();
    let t = tempfile::tempdir().unwrap();
    let file = rows_file(t.path());
    let want = local_values(t.path(), &file);
    for (seed, layout) in [(1u64, "arrow"), (2, "arrow"), (3, "lance")] {
        let proxy = FaultProxy::start(&s.endpoint, seed, 0.25);
        let out = std::path::PathBuf::from(format!("s3://{BUCKET}/faults/{layout}-{seed}"));
        let mut build = shardset_cli();
        build
            .env("AWS_ENDPOINT_URL", &proxy.endpoint)
            .env("SHARDSET_OBJECT_CACHE", t.path().join(format!("dc{seed}")))
            .args([
                "build",
                "jsonl",
                file.to_str().unwrap(),
                "--format",
                layout,
                "--out",
            ])
            .arg(&out);
        if layout == "arrow" {
            build.args(["--shard-size", "4KB"]);
        }
        let built = build.output().unwrap();
        let cache = out.join("train");
        // Read directly from the server: what the build published.
        let direct = cat(&cache, &s.endpoint, &t.path().join(format!("direct{seed}")));
        if built.status.success() {
            assert!(
                direct.status.success(),
                "{}",
                String::from_utf8_lossy(&direct.stderr)
            );
            assert!(
                direct.stdout == want,
                "{layout} seed {seed}: the values differ from a local build"
            );
        } else {
            // A failed build names why, and published nothing a reader sees.
            let err = String::from_utf8_lossy(&built.stderr);
            assert!(err.contains("error"), "{err}");
            assert!(
                !direct.status.success(),
                "{layout} seed {seed}: a failed build published"
            );
        }
        // Reads through the faults: the same rows, or an error (never other rows).
        if built.status.success() {
            let through = cat(
                &cache,
                &proxy.endpoint,
                &t.path().join(format!("through{seed}")),
            );
            if through.status.success() {
                assert!(
                    through.stdout == want,
                    "{layout} seed {seed}: a faulty read gave other rows"
                );
            }
        }
        let by_kind: Vec<u64> = proxy
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        eprintln!(
            "{layout} seed {seed}: build {}, connections [pass, 503, 429, drop, cut, stall] = {by_kind:?}",
            if built.status.success() { "succeeded" } else { "failed whole" }
        );
        assert!(
            proxy.faults() >= 5,
            "{layout} seed {seed}: only {} faults",
            proxy.faults()
        );
    }
}

/// A proxy that makes every request its own connection (`Connection:
/// close`) and forwards it, except that the first PUT of a
/// `_metadata.json` (a build's commit) reaches the server while its answer
/// never reaches the client: the commit lands, the client hears nothing.
/// Returns the endpoint and how many answers were cut.
fn commit_answer_cutter(upstream: &str) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    let cut = Arc::new(AtomicU64::new(0));
    let cut_t = cut.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let (up, cut) = (upstream.clone(), cut_t.clone());
            std::thread::spawn(move || forward_one(client, &up, &cut));
        }
    });
    (endpoint, cut)
}

/// One request read from `client` and sent to `upstream` on a connection
/// of its own (`Connection: close`), with the whole answer read back.
pub(crate) struct Relayed {
    /// The request line.
    pub(crate) request: String,
    /// The request's header lines.
    pub(crate) headers: Vec<String>,
    /// The upstream's answer, head and body.
    pub(crate) answer: Vec<u8>,
}

impl Relayed {
    /// The value of the request header `name`.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

pub(crate) fn relay(client: &mut TcpStream, upstream: &str) -> Option<Relayed> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines: Vec<String> = text.trim_end().split("\r\n").map(str::to_string).collect();
    let request = lines.remove(0);
    lines.retain(|l| !l.to_ascii_lowercase().starts_with("connection:"));
    let mut relayed = Relayed {
        request,
        headers: lines,
        answer: Vec::new(),
    };
    let len: usize = relayed
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    client.read_exact(&mut body).ok()?;
    let mut up = TcpStream::connect(upstream).ok()?;
    let head = format!(
        "{}\r\n{}\r\nConnection: close\r\n\r\n",
        relayed.request,
        relayed.headers.join("\r\n")
    );
    up.write_all(head.as_bytes())
        .and_then(|_| up.write_all(&body))
        .ok()?;
    let _ = up.read_to_end(&mut relayed.answer);
    Some(relayed)
}

fn forward_one(mut client: TcpStream, upstream: &str, cut: &AtomicU64) {
    let Some(r) = relay(&mut client, upstream) else {
        return;
    };
    // The commit: the put of the cache's own metadata (not a build's
    // staging copies of it).
    let target = r.request.split(' ').nth(1).unwrap_or("");
    let commit = r.request.starts_with("PUT ") && target.ends_with("/train/_metadata.json");
    if commit && cut.fetch_add(1, Ordering::SeqCst) == 0 {
        // The server has committed; the client hears nothing.
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let _ = client.write_all(&r.answer);
    let _ = client.shutdown(Shutdown::Both);
}

/// A commit whose answer is lost has still happened: the build reads the
/// metadata back, finds its own bytes and reports success (it used to
/// report a lost commit for a cache it had published); readers see exactly
/// the rows a local build gives.
#[test]
fn a_commit_whose_answer_is_lost_counts_as_committed() {
    let s = server();
    let t = tempfile::tempdir().unwrap();
    let file = rows_file(t.path());
    let want = local_values(t.path(), &file);
    for layout in ["arrow", "lance"] {
        let (endpoint, cut) = commit_answer_cutter(&s.endpoint);
        let out = std::path::PathBuf::from(format!("s3://{BUCKET}/commit-cut/{layout}"));
        let built = shardset_cli()
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env(
                "SHARDSET_OBJECT_CACHE",
                t.path().join(format!("dc-{layout}")),
            )
            .args([
                "build",
                "jsonl",
                file.to_str().unwrap(),
                "--format",
                layout,
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            cut.load(Ordering::SeqCst) >= 1,
            "{layout}: no commit went through the proxy"
        );
        assert!(
            built.status.success(),
            "{layout}: the build reported a failure for a commit that landed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let direct = cat(
            &out.join("train"),
            &s.endpoint,
            &t.path().join(format!("direct-{layout}")),
        );
        assert!(
            direct.status.success(),
            "{}",
            String::from_utf8_lossy(&direct.stderr)
        );
        assert!(
            direct.stdout == want,
            "{layout}: other values than a local build's"
        );
    }
}

/// A `503 SlowDown` that asks for 2 s is waited out: the client's next
/// request reaches the server no sooner than the answer asked (its own
/// backoff alone would retry within a few hundred milliseconds).
#[test]
fn a_slow_down_is_retried_no_sooner_than_its_retry_after() {
    let s = server();
    let key = format!("retry-after/{}.bin", std::process::id());
    let url = format!("s3://{BUCKET}/{key}");
    let p = std::path::PathBuf::from(&url);
    shardset::storage::object::object_storage(&p)
        .put(
            &p,
            bytes::Bytes::from(vec![7u8; 1000]),
            shardset::storage::object::update_mode(None),
        )
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = s.endpoint.trim_start_matches("http://").to_string();
    let arrivals: Arc<std::sync::Mutex<Vec<std::time::Instant>>> = Arc::default();
    let seen = arrivals.clone();
    std::thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(mut client) = client else { return };
            if n == 0 {
                read_head(&mut client);
                seen.lock().unwrap().push(std::time::Instant::now());
                let body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                let _ = write!(
                    client,
                    "HTTP/1.1 503 Slow Down\r\nRetry-After: 2\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            seen.lock().unwrap().push(std::time::Instant::now());
            let up = upstream.clone();
            std::thread::spawn(move || serve(client, &up, Fault::Pass, 0));
        }
    });
    let out = tempfile::tempdir().unwrap();
    let o = shardset_cli()
        .env("AWS_ENDPOINT_URL", &endpoint)
        .args(["download", &url, "--quiet", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = arrivals.lock().unwrap().clone();
    assert!(t.len() >= 2, "{} requests", t.len());
    let waited = t[1].duration_since(t[0]);
    assert!(
        waited >= Duration::from_secs(2),
        "the retry came after {waited:?}, before the 2 s the server asked"
    );
}
