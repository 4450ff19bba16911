//! One asset made under its lock: each URL tried in order, each attempt
//! retried with backoff on transient failures, a partial file resumed with
//! a `Range` request (HTTP) or a ranged GET (`s3://`, through the object
//! storage's client and its settings), the checksum checked before the
//! final rename.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::checksum::Checksum;
use super::lock::{with_suffix, FileLock};
use super::{DownloadInfo, DownloadOptions, DownloadProgress};
use crate::error::{Error, Result};

/// Why one attempt failed, and whether trying the same URL again may help.
struct Failure {
    message: String,
    transient: bool,
}

fn transient(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        transient: true,
    }
}

fn permanent(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        transient: false,
    }
}

/// One asset, under its lock: a hit, or each URL in order (with retries)
/// until one gives the whole file with the right checksum.
pub(super) fn fetch(
    client: &reqwest::blocking::Client,
    info: &DownloadInfo,
    dir: &Path,
    opts: &DownloadOptions,
    bar: &DownloadProgress,
) -> Result<PathBuf> {
    let dest = dir.join(info.local_name());
    let _lock = FileLock::acquire(&dest)?;
    let checksum = info.checksum.as_deref().map(Checksum::parse).transpose()?;
    if dest.is_file() {
        // A hit, once its bytes are the declared ones (the file may have
        // been fetched for an asset of the same URL declared without, or
        // with another, checksum): else it is fetched again.
        match &checksum {
            Some(c) if c.of_file(&dest)? != format!("{}:{}", c.algo, c.hex) => {
                std::fs::remove_file(&dest).map_err(|e| Error::io("remove", &dest, e))?;
            }
            _ => return Ok(dest),
        }
    }
    let tmp = with_suffix(&dest, ".tmp");
    let mut failures = Vec::new();
    let mut checksum_error = None;
    for url in info.all_urls() {
        let mut wait = opts.backoff;
        let mut attempt = 0;
        let got = loop {
            match transfer(client, url, &tmp, bar) {
                Ok(()) => break Ok(()),
                Err(f) if f.transient && attempt < opts.retries => {
                    attempt += 1;
                    std::thread::sleep(wait);
                    wait *= 2;
                }
                Err(f) => break Err(f),
            }
        };
        if let Err(f) = got {
            let tries = if attempt > 0 {
                format!(" (after {} attempts)", attempt + 1)
            } else {
                String::new()
            };
            failures.push(format!("{url}: {}{tries}", f.message));
            continue;
        }
        if let Some(c) = &checksum {
            let got = c.of_file(&tmp)?;
            if got != format!("{}:{}", c.algo, c.hex) {
                let _ = std::fs::remove_file(&tmp);
                let e = Error::DownloadChecksum {
                    path: dest.clone(),
                    url: url.to_string(),
                    expected: format!("{}:{}", c.algo, c.hex),
                    got,
                };
                failures.push(format!("{url}: {e}"));
                checksum_error = Some(e);
                continue;
            }
        }
        let f = std::fs::File::open(&tmp).map_err(|e| Error::io("open", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
        std::fs::rename(&tmp, &dest).map_err(|e| Error::io("rename", &tmp, e))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        return Ok(dest);
    }
    match checksum_error {
        Some(e) if failures.len() == 1 => Err(e),
        _ => Err(Error::Download {
            path: dest,
            failures,
        }),
    }
}

/// One attempt at `url` into `tmp`: resumes a partial `tmp` with a Range
/// request; on success `tmp` holds the whole file.
fn transfer(
    client: &reqwest::blocking::Client,
    url: &str,
    tmp: &Path,
    bar: &DownloadProgress,
) -> std::result::Result<(), Failure> {
    if let Some(path) = url.strip_prefix("file://") {
        return copy_local(Path::new(path), tmp, bar);
    }
    if url.starts_with("s3://") {
        return transfer_object(url, tmp, bar);
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(permanent(
            "unsupported URL scheme (http, https, s3 and file are)",
        ));
    }
    let have = std::fs::metadata(tmp).map(|m| m.len()).unwrap_or(0);
    let mut req = client.get(url);
    if have > 0 {
        req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut resp = req.send().map_err(|e| transient(describe(&e)))?;
    let status = resp.status();
    let length = resp.content_length();
    let (append, total) = match status.as_u16() {
        206 if have > 0 => {
            let start = resp
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok());
            if start != Some(have) {
                // Not the range asked for: start over next time.
                let _ = std::fs::remove_file(tmp);
                return Err(transient(format!(
                    "asked for bytes {have}- and got a range starting at {start:?}"
                )));
            }
            match length {
                // No file is that long: a garbled answer (the partial file is kept).
                Some(l) if have.checked_add(l).is_none() => {
                    return Err(transient(format!(
                        "a Content-Length of {l} after byte {have} is past any file's end"
                    )));
                }
                l => (true, l.map(|l| have + l)),
            }
        }
        200 => (false, length),
        416 if have > 0 => {
            let _ = std::fs::remove_file(tmp);
            return Err(transient(
                "the partial file is not a prefix the server knows (416)",
            ));
        }
        408 | 429 | 500..=599 => return Err(transient(format!("HTTP {status}"))),
        _ => return Err(permanent(format!("HTTP {status}"))),
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(tmp)
        .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
    let start = if append { have } else { 0 };
    if let Some(t) = total {
        bar.add_total(t - start);
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut got = start;
    loop {
        let n = match resp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = file.flush();
                return Err(transient(format!(
                    "the transfer broke after {got} bytes: {e}"
                )));
            }
        };
        file.write_all(&buf[..n])
            .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
        got += n as u64;
        bar.add_done(n as u64);
    }
    file.flush()
        .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
    if let Some(t) = total {
        if got != t {
            return Err(transient(format!(
                "download incomplete: {got} of {t} bytes"
            )));
        }
    }
    Ok(())
}

/// One attempt at an object-store URL (`s3://bucket/key`) into `tmp`, as
/// for HTTP: a partial `tmp` is resumed from its length (a ranged GET), a
/// `tmp` longer than the object starts over, a missing object is final,
/// any other failure is retried.
#[cfg(feature = "s3")]
fn transfer_object(
    url: &str,
    tmp: &Path,
    bar: &DownloadProgress,
) -> std::result::Result<(), Failure> {
    let path = Path::new(url);
    let store = crate::storage::object::object_storage(path);
    let fail = |e: Error| match &e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            permanent(e.to_string())
        }
        Error::InvalidArgument(_) => permanent(e.to_string()),
        _ => transient(e.to_string()),
    };
    let total = store.object_len(path).map_err(fail)?;
    let mut have = std::fs::metadata(tmp).map(|m| m.len()).unwrap_or(0);
    if have > total {
        have = 0;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(have > 0)
        .truncate(have == 0)
        .open(tmp)
        .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
    bar.add_total(total - have);
    if have < total {
        store
            .copy_to(path, have, &mut file, tmp, &|n| bar.add_done(n))
            .map_err(fail)?;
    }
    let got = file.metadata().map(|m| m.len()).unwrap_or(0);
    if got != total {
        return Err(transient(format!(
            "download incomplete: {got} of {total} bytes"
        )));
    }
    Ok(())
}

#[cfg(not(feature = "s3"))]
fn transfer_object(_: &str, _: &Path, _: &DownloadProgress) -> std::result::Result<(), Failure> {
    Err(permanent(
        "s3:// URLs need object storage, which this build of shardset leaves out (feature `s3`)",
    ))
}

fn copy_local(src: &Path, tmp: &Path, bar: &DownloadProgress) -> std::result::Result<(), Failure> {
    let mut from = std::fs::File::open(src)
        .map_err(|e| permanent(format!("cannot open {}: {e}", src.display())))?;
    let len = from.metadata().map(|m| m.len()).unwrap_or(0);
    bar.add_total(len);
    let mut to = std::fs::File::create(tmp)
        .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
    let n =
        std::io::copy(&mut from, &mut to).map_err(|e| transient(format!("copy failed: {e}")))?;
    bar.add_done(n);
    if n != len {
        return Err(transient(format!("copied {n} of {len} bytes")));
    }
    Ok(())
}

/// A reqwest error in words, with its causes.
fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
