//! The `resume_state` target's entry: what a killed process leaves on disk
//! and the next one reads. Bit 0 of the first byte picks the state, the
//! rest of that byte the mode.
//!
//! Arrow builds (bit 0 clear; modes mod 4). A build through `load` (three
//! work units of 8 rows, batches of 4, a shard a batch, dedup and row
//! checksums on) failed where its generator fails, at row 14; the build
//! directory it left (its `_manifest.jsonl` commits the shards closed
//! before) is copied, then:
//! * 0: the bytes are the manifest;
//! * 1: edits (u16 position, xor byte, after a u16 truncation length) of
//!   the manifest;
//! * 2: one field of one line changed: the second byte picks the line, the
//!   third the field (`num_rows`, `num_bytes`, `refs`, `unit_ends`,
//!   `filename`, `xxh64`, `kind`), the rest is its value (JSON, else a
//!   string);
//! * 3: edits of another file of the directory (the second byte picks it).
//!
//! Then the build is run again. It must publish the rows a clean build
//! publishes, in a cache `verify` finds whole, or fail with an error and
//! publish nothing.
//!
//! Downloads (bit 0 set). A 1,500-byte file with a declared sha256 is
//! served by an HTTP server on 127.0.0.1 whose answers the input writes;
//! what a killed download left is there first. After the first byte: a
//! byte of state (bits 0-1: no `.tmp`, a prefix of the file, other bytes,
//! the file and more; bit 2: a `.lock` holding bytes; bit 3: a final-named
//! file with one wrong byte; bits 4-5: retries), a u16 length of that
//! `.tmp`, then four bytes an answer (the last repeated): the status
//! (range honoured, 200, 206 from the asked start, 206 from another, 416,
//! 500, 404, 206 without or with a garbled `Content-Range`, 408), the
//! `Content-Length` (right, absent, one short, one long, huge, 0), where
//! the body is cut and which byte is flipped. The download must end with
//! the file's exact bytes or an error, and no file of the final name may
//! hold other bytes.
//!
//! Any panic is a bug; so is a wrong cache or file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use shardset::builder::{cache_status, load, DatasetBuilder, DatasetInfo, ExampleStream, WorkUnit};
use shardset::download::{download, DownloadInfo, DownloadOptions};
use shardset::error::BoxError;
use shardset::{Dtype, Example, Feature, Features, LoadOptions, Row, WriteSpec};

use super::{edited, files_under};

/// A temp dir on a memory file system where there is one: a build fsyncs
/// every shard, and an input should take milliseconds.
fn fast_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Three units of 8 rows; the generator fails at row `fail_at` if set.
struct Rows {
    fail_at: Option<u64>,
}

impl DatasetBuilder for Rows {
    fn name(&self) -> &str {
        "ResumeRows"
    }

    fn version(&self) -> &str {
        "1.0.0"
    }

    fn info(&self, _: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(
            Features::new()
                .with("id", Feature::value(Dtype::Int64))
                .with("text", Feature::value(Dtype::String))
                .with("label", Feature::class_label(["a", "b", "c"])?)
                .with("blob", Feature::value(Dtype::Binary))
                .with("vals", Feature::sequence(Feature::value(Dtype::Float32))),
        ))
    }

    fn splits(&self, _: &str) -> Result<Vec<String>, BoxError> {
        Ok(vec!["train".into()])
    }

    fn work_units(&self, _: &str, _: &str) -> Result<Vec<WorkUnit>, BoxError> {
        Ok((0..3).map(|k| WorkUnit::new(format!("{k}"))).collect())
    }

    fn generate<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        let k: u64 = unit.id.parse()?;
        Ok(Box::new((k * 8..k * 8 + 8).map(move |i| {
            if Some(i) == self.fail_at {
                return Err(format!("stopped at row {i}").into());
            }
            // Every third blob repeats (dedup refs), the others differ.
            let blob: Vec<u8> = (0..48u64).map(|b| (b + i % 3 * 7) as u8).collect();
            let ex = Example::new()
                .with("id", i as i64)
                .with("text", format!("row {i}"))
                .with("label", (i % 3) as i64)
                .with("blob", blob)
                .with("vals", vec![i as f32; (i % 4) as usize]);
            Ok((format!("{i}"), ex))
        })))
    }
}

fn load_options(root: &Path) -> LoadOptions {
    let spec = serde_json::json!({
        "batch_size": 4, "shard_size": 1, "threads": 1, "dedup": 32, "record_checksums": true,
    });
    let spec = WriteSpec::from_options(shardset::Layout::Arrow, spec.as_object().unwrap()).unwrap();
    LoadOptions::default()
        .with_cache_root(root)
        .with_write_spec(spec)
        .with_unit_parallelism(1)
}

/// The cache `load` publishes under `root`, if there is one, and its rows.
fn published(root: &Path) -> Option<(PathBuf, shardset::Result<Vec<Row>>)> {
    let opts = load_options(root);
    let (dir, exists) = cache_status(&Rows { fail_at: None }, "train", &opts).ok()?;
    let rows = || {
        let cache = shardset::open_cache(&dir)?;
        (0..cache.len() as i64)
            .map(|i| cache.backend.get(i))
            .collect()
    };
    exists.then(|| (dir.clone(), rows()))
}

struct ResumeSeed {
    /// The clean build's rows.
    rows: Vec<Row>,
    /// The stopped build's files under the cache root (relative), by path.
    files: Vec<(PathBuf, Vec<u8>)>,
    /// Which of them is the manifest.
    manifest: usize,
}

fn resume_seed() -> &'static ResumeSeed {
    static S: OnceLock<ResumeSeed> = OnceLock::new();
    S.get_or_init(|| {
        let clean = fast_tempdir();
        load(
            &Rows { fail_at: None },
            "train",
            &load_options(clean.path()),
        )
        .unwrap();
        let rows = published(clean.path()).unwrap().1.unwrap();
        assert_eq!(rows.len(), 24);
        let stopped = fast_tempdir();
        let root = stopped.path();
        assert!(load(&Rows { fail_at: Some(14) }, "train", &load_options(root)).is_err());
        let mut files = files_under(root);
        files.sort();
        let manifest = files
            .iter()
            .position(|(p, _)| p.ends_with("_manifest.jsonl"))
            .expect("the stopped build left its manifest");
        ResumeSeed {
            rows,
            files,
            manifest,
        }
    })
}

/// The manifest's lines with one field of one line set (mode 2).
fn set_field(manifest: &[u8], body: &[u8]) -> Vec<u8> {
    const FIELDS: [&str; 7] = [
        "num_rows",
        "num_bytes",
        "refs",
        "unit_ends",
        "filename",
        "xxh64",
        "kind",
    ];
    let Some((&[line, field], value)) = body.split_first_chunk::<2>() else {
        return manifest.to_vec();
    };
    let text = String::from_utf8_lossy(manifest);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let k = usize::from(line) % lines.len();
    if let Ok(serde_json::Value::Object(mut o)) = serde_json::from_str(&lines[k]) {
        let v = serde_json::from_slice(value).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(value).into_owned())
        });
        o.insert(FIELDS[usize::from(field) % FIELDS.len()].into(), v);
        lines[k] = serde_json::Value::Object(o).to_string();
    }
    (lines.join("\n") + "\n").into_bytes()
}

/// An Arrow build resumed from the stopped build's files, mutated.
fn resume_arrow(mode: u8, body: &[u8]) -> shardset::Result<()> {
    let seed = resume_seed();
    let mut files = seed.files.clone();
    let manifest = &seed.files[seed.manifest].1;
    match mode % 4 {
        0 => files[seed.manifest].1 = body.to_vec(),
        1 => files[seed.manifest].1 = edited(manifest, body),
        2 => files[seed.manifest].1 = set_field(manifest, body),
        _ => {
            let (&k, edits) = body.split_first().unwrap_or((&0, &[]));
            let others: Vec<usize> = (0..files.len()).filter(|&f| f != seed.manifest).collect();
            let f = others[usize::from(k) % others.len()];
            files[f].1 = edited(&files[f].1, edits);
        }
    }
    let tmp = fast_tempdir();
    for (rel, bytes) in &files {
        let p = tmp.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
    }
    let built = load(&Rows { fail_at: None }, "train", &load_options(tmp.path()));
    match published(tmp.path()) {
        Some((dir, Ok(rows))) if rows == seed.rows => {
            let rep = shardset::verify_cache(&dir).unwrap();
            assert!(
                rep.is_ok(),
                "verify finds a resumed build's cache damaged: {rep:?}"
            );
        }
        Some((_, Ok(rows))) => panic!(
            "a resumed build published {} rows that are not the clean build's {} (load: {built:?})",
            rows.len(),
            seed.rows.len()
        ),
        Some((_, Err(e))) => panic!("a resumed build published a cache that does not read: {e}"),
        None => assert!(built.is_err(), "load succeeded and published nothing"),
    }
    built.map(drop)
}

/// The served file: 1,500 seeded bytes.
fn served() -> &'static Vec<u8> {
    static S: OnceLock<Vec<u8>> = OnceLock::new();
    S.get_or_init(|| {
        let mut r = shardset::SplitMix64::new(5);
        (0..1500).map(|_| r.next_u64() as u8).collect()
    })
}

/// The answers each path gets, in order (the last repeated).
type Scripts = Mutex<HashMap<String, (Vec<[u8; 4]>, usize)>>;

/// The server's port and scripts, started once per process.
fn server() -> &'static (u16, Scripts) {
    static S: OnceLock<(u16, Scripts)> = OnceLock::new();
    S.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = answer(conn);
                });
            }
        });
        (port, Mutex::new(HashMap::new()))
    })
}

/// Answers one request by its path's script.
fn answer(conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut asked = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                asked = v
                    .trim()
                    .strip_prefix("bytes=")
                    .and_then(|r| r.strip_suffix('-'))
                    .and_then(|s| s.parse::<usize>().ok());
            }
        }
    }
    let [status, length, cut, flip] = {
        let mut scripts = server().1.lock().unwrap();
        let Some((answers, n)) = scripts.get_mut(&path) else {
            return write!(&conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        };
        let a = answers
            .get(*n)
            .or(answers.last())
            .copied()
            .unwrap_or([0; 4]);
        *n += 1;
        a
    };
    let file = served();
    let len = file.len();
    let start = asked.unwrap_or(0);
    let from = |s: usize| file.get(s..).unwrap_or_default().to_vec();
    let range = |s: usize| format!("Content-Range: bytes {s}-{}/{len}\r\n", len - 1);
    let (code, mut body, extra) = match status % 11 {
        0 if asked.is_some() && start < len => (206, from(start), range(start)),
        0 | 1 => (200, file.clone(), String::new()),
        2 => (206, from(start), range(start)),
        3 => {
            let s = if start > 0 { start - 1 } else { start + 1 };
            (206, from(s), range(s))
        }
        4 => (416, Vec::new(), format!("Content-Range: bytes */{len}\r\n")),
        5 => (500, Vec::new(), String::new()),
        6 => (404, Vec::new(), String::new()),
        7 => (206, from(start), String::new()),
        8 => (206, from(start), "Content-Range: bytes x-y/z\r\n".into()),
        9 => (408, Vec::new(), String::new()),
        _ => (
            206,
            from(start),
            format!("Content-Range: bytes {start}-\r\n"),
        ),
    };
    let declared = body.len() as u64;
    if flip != 0 && !body.is_empty() {
        let k = usize::from(flip) % body.len();
        body[k] ^= 0x5a;
    }
    if cut != 0 && !body.is_empty() {
        body.truncate(usize::from(cut) * 7 % body.len());
    }
    let length = match length % 6 {
        0 => Some(declared),
        1 => None,
        2 => Some(declared.saturating_sub(1)),
        3 => Some(declared + 1),
        4 => Some(u64::MAX - 2 - u64::from(cut)),
        _ => Some(0),
    };
    let mut out = conn;
    let mut head = format!("HTTP/1.1 {code} Answer\r\n{extra}Connection: close\r\n");
    if let Some(l) = length {
        head.push_str(&format!("Content-Length: {l}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(&body)?;
    out.flush()
}

/// A download of the served file with what the input says left behind
/// and answered (see the module documentation).
fn download_input(body: &[u8]) -> shardset::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let file = served();
    let (state, body) = body.split_first().unwrap_or((&0, &[]));
    let (tmp_len, body) = match body.split_first_chunk::<2>() {
        Some((l, rest)) => (usize::from(u16::from_le_bytes(*l)), rest),
        None => (0, body),
    };
    let answers: Vec<[u8; 4]> = body
        .chunks_exact(4)
        .take(8)
        .map(|c| c.try_into().unwrap())
        .collect();
    let (port, scripts) = server();
    let path = format!("/f{}.bin", NEXT.fetch_add(1, Ordering::Relaxed));
    scripts.lock().unwrap().insert(path.clone(), (answers, 0));
    let dir = fast_tempdir();
    let info = DownloadInfo::new(format!("http://127.0.0.1:{port}{path}"))
        .with_checksum(format!("sha256:{}", shardset::sha256_hex(file)));
    let dest = dir.path().join(info.local_name());
    let sibling = |suffix: &str| PathBuf::from(format!("{}{suffix}", dest.display()));
    let partial = match state & 3 {
        0 => None,
        1 => Some(file[..tmp_len % (file.len() + 1)].to_vec()),
        2 => Some((0..tmp_len % 3000).map(|i| (i * 31) as u8).collect()),
        _ => Some([file.as_slice(), &vec![7u8; tmp_len % 64 + 1]].concat()),
    };
    if let Some(p) = partial {
        std::fs::write(sibling(".tmp"), p).unwrap();
    }
    if state & 4 != 0 {
        std::fs::write(sibling(".lock"), b"12345\n").unwrap();
    }
    if state & 8 != 0 {
        let mut wrong = file.clone();
        wrong[tmp_len % file.len()] ^= 1;
        std::fs::write(&dest, wrong).unwrap();
    }
    let mut opts = DownloadOptions::default()
        .with_retries(u32::from(state >> 4 & 3))
        .with_backoff(Duration::ZERO);
    opts.connect_timeout = Duration::from_secs(2);
    opts.read_timeout = Duration::from_secs(5);
    let got = download(&info, dir.path(), &opts);
    scripts.lock().unwrap().remove(&path);
    if let Ok(p) = &got {
        assert_eq!(p, &dest);
    }
    match std::fs::read(&dest) {
        Ok(bytes) => assert!(
            bytes == *file,
            "{} holds {} bytes that are not the file's (download: {got:?})",
            dest.display(),
            bytes.len()
        ),
        Err(_) => assert!(got.is_err(), "a download returned no file"),
    }
    // What gc does with what is left: nothing of the final file.
    let _ = shardset::download::remove_stale_partials(dir.path(), Duration::ZERO, false);
    assert!(!dest.exists() || std::fs::read(&dest).unwrap() == *file);
    got.map(drop)
}

/// One input of the `resume_state` target (see the module documentation);
/// what the build or download gave. `None` when the input is empty.
pub fn resume_state_input(data: &[u8]) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    Some(if mode & 1 == 0 {
        resume_arrow(mode >> 1, body)
    } else {
        download_input(body)
    })
}

/// Inputs that change nothing or answer well (each ends in the clean
/// cache or the exact file), for seed corpora and the replay test.
pub fn resume_state_seeds() -> Vec<Vec<u8>> {
    let seed = resume_seed();
    let manifest = &seed.files[seed.manifest].1;
    let mut out = vec![
        [&[0u8], manifest.as_slice()].concat(),
        vec![1 << 1],
        vec![3 << 1, 0],
    ];
    // Each line's `num_rows` set to what it is (the header gains one).
    for line in 0..4u8 {
        let text = String::from_utf8_lossy(manifest);
        let rows = text
            .lines()
            .nth(usize::from(line))
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .and_then(|j| j.get("num_rows").cloned());
        if let Some(r) = rows {
            out.push([vec![2 << 1, line, 0], r.to_string().into_bytes()].concat());
        }
    }
    // Downloads: nothing left, ranges honoured; a prefix of 700 bytes
    // resumed; the file and more (a 416, then, retried, the whole file); a wrong
    // final file and a lock left, one retry after a cut answer.
    let [lo, hi] = 700u16.to_le_bytes();
    out.push(vec![1, 0, 0, 0]);
    out.push(vec![1, 1, lo, hi, 0, 0, 0, 0]);
    out.push(vec![1, 3 | 16, lo, hi, 4, 0, 0, 0, 1, 0, 0, 0]);
    out.push(vec![1, 4 | 8 | 16 | 1, lo, hi, 0, 0, 9, 0, 0, 0, 0, 0]);
    out
}
