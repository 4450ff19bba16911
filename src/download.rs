//! Downloads of a builder's source assets, as the reference makes them and
//! sturdier: a file is named `<stem>.<sha256(primary url)[:10]><suffix>`
//! in the downloads folder (so both find each other's files), fetched under
//! a lock on `<name>.lock` (two processes asking for one file download it
//! once), into `<name>.tmp`, resumed with a `Range` request where a partial
//! `.tmp` is left (a 206 appends, a 200 starts over), retried with backoff
//! on transient failures (connection errors, cut transfers, 5xx, 408,
//! 429), then from each fallback URL in order; the size is checked against
//! the `Content-Length`, an `algo:hex` checksum (`sha256`, `md5`) against
//! the bytes, and only then is `.tmp` renamed to the final name. Nothing
//! half-downloaded ever has the final name.
//!
//! The HTTP client is `reqwest` (blocking, rustls with the system's roots):
//! already in the dependency tree through Lance, maintained, with proxies,
//! redirects and timeouts handled. `file://` URLs are copied.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::Digest;

use crate::error::{Error, Result};

/// One asset: a URL, fallback URLs tried in order when it fails, an
/// optional `algo:hex` checksum and an optional file name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DownloadInfo {
    /// The primary URL (it names the local file, whoever serves it).
    pub url: String,
    /// Tried in order when the primary fails.
    pub fallbacks: Vec<String>,
    /// `sha256:<hex>` or `md5:<hex>`.
    pub checksum: Option<String>,
    /// The local name's stem and suffix (default: the URL's last segment).
    pub filename: Option<String>,
}

impl DownloadInfo {
    /// An asset at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        DownloadInfo {
            url: url.into(),
            fallbacks: Vec::new(),
            checksum: None,
            filename: None,
        }
    }

    /// Adds a fallback URL.
    pub fn with_fallback(mut self, url: impl Into<String>) -> Self {
        self.fallbacks.push(url.into());
        self
    }

    /// Sets the `algo:hex` checksum.
    pub fn with_checksum(mut self, checksum: impl Into<String>) -> Self {
        self.checksum = Some(checksum.into());
        self
    }

    /// Sets the local file name.
    pub fn with_filename(mut self, name: impl Into<String>) -> Self {
        self.filename = Some(name.into());
        self
    }

    /// The primary URL, then the fallbacks.
    pub fn all_urls(&self) -> Vec<&str> {
        std::iter::once(self.url.as_str())
            .chain(self.fallbacks.iter().map(String::as_str))
            .collect()
    }

    /// Checks the URLs are non-empty and the checksum names a known algorithm.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.all_urls().iter().any(|u| u.is_empty()) {
            return Err(Error::InvalidArgument(format!(
                "a download URL is empty in {self:?}"
            )));
        }
        if let Some(c) = &self.checksum {
            Checksum::parse(c)?;
        }
        if let Some(f) = &self.filename {
            if f.is_empty() || f.contains(['/', '\\', '\0']) || f == "." || f == ".." {
                return Err(Error::InvalidArgument(format!(
                    "download filename {f:?} is not a plain file name"
                )));
            }
        }
        Ok(())
    }

    /// The local file name: `<stem>.<sha256(url)[:10]><suffix>`.
    pub fn local_name(&self) -> String {
        let base = match &self.filename {
            Some(f) => f.clone(),
            None => url_basename(&self.url),
        };
        // Python's Path.stem / Path.suffix: the suffix is the last
        // `.xxx` of a name that does not start with it.
        let (stem, suffix) = match base.rfind('.') {
            Some(i) if i > 0 && i + 1 < base.len() => (&base[..i], &base[i..]),
            _ => (base.as_str(), ""),
        };
        let digest = crate::util::sha256_hex(self.url.as_bytes());
        format!("{stem}.{}{suffix}", &digest[..10])
    }
}

impl From<&str> for DownloadInfo {
    fn from(url: &str) -> Self {
        DownloadInfo::new(url)
    }
}

impl From<String> for DownloadInfo {
    fn from(url: String) -> Self {
        DownloadInfo::new(url)
    }
}

/// The last segment of a URL's path (query and fragment dropped).
fn url_basename(url: &str) -> String {
    let no_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let path = no_scheme.split(['?', '#']).next().unwrap_or("");
    let path = path.split_once('/').map_or("", |(_, p)| p);
    let name = path.rsplit('/').next().unwrap_or("");
    if name.is_empty() {
        "download".to_string()
    } else {
        name.to_string()
    }
}

/// A parsed `algo:hex` checksum.
#[derive(Debug, Clone)]
struct Checksum {
    algo: String,
    hex: String,
}

impl Checksum {
    fn parse(s: &str) -> Result<Self> {
        let (algo, hex) = s
            .split_once(':')
            .ok_or_else(|| Error::InvalidArgument(format!("checksum {s:?} is not 'algo:hex'")))?;
        let algo = algo.to_ascii_lowercase();
        let len = match algo.as_str() {
            "sha256" => 64,
            "md5" => 32,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "checksum algorithm '{other}' is not sha256 or md5"
                )))
            }
        };
        let hex = hex.to_ascii_lowercase();
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::InvalidArgument(format!(
                "checksum {s:?}: a {algo} digest is {len} hex digits"
            )));
        }
        Ok(Checksum { algo, hex })
    }

    /// The same algorithm's digest of a file, as `algo:hex`.
    fn of_file(&self, path: &Path) -> Result<String> {
        fn digest<D: Digest>(path: &Path) -> Result<String> {
            let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
            let mut buf = vec![0u8; 1 << 20];
            let mut h = D::new();
            loop {
                let n = f.read(&mut buf).map_err(|e| Error::io("read", path, e))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(crate::util::hex(&h.finalize()))
        }
        let hex = match self.algo.as_str() {
            "md5" => digest::<md5::Md5>(path)?,
            _ => digest::<sha2::Sha256>(path)?,
        };
        Ok(format!("{}:{hex}", self.algo))
    }
}

/// How downloads are made.
#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Files downloaded at once (default 8, at most one per file).
    pub parallel: usize,
    /// Attempts per URL after the first, on transient failures (default 3).
    pub retries: u32,
    /// The wait before the first retry, doubled each time (default 250 ms).
    pub backoff: Duration,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Longest wait for bytes of a response (default 300 s).
    pub read_timeout: Duration,
    /// Show one progress bar for all files on stderr.
    pub progress: bool,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            parallel: 8,
            retries: 3,
            backoff: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            progress: false,
        }
    }
}

impl DownloadOptions {
    /// Sets the retries per URL.
    pub fn with_retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }

    /// Sets the first backoff.
    pub fn with_backoff(mut self, d: Duration) -> Self {
        self.backoff = d;
        self
    }

    /// Shows progress on stderr.
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }

    /// Sets the files downloaded at once (at least 1).
    pub fn with_parallel(mut self, n: usize) -> Self {
        self.parallel = n.max(1);
        self
    }
}

/// Downloads one asset into `dest_dir` (see the module documentation) and
/// returns the local path; an existing file of that name is a hit.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad asset; [`Error::DownloadChecksum`]
/// (one URL) or [`Error::Download`] naming every URL tried and why each
/// failed; [`Error::Io`] naming the local file.
pub fn download(info: &DownloadInfo, dest_dir: &Path, opts: &DownloadOptions) -> Result<PathBuf> {
    Ok(download_all(std::slice::from_ref(info), dest_dir, opts)?.remove(0))
}

/// Downloads every asset (identical ones once), `opts.parallel` at a time
/// with one progress display, and returns their local paths in input order.
///
/// # Errors
/// The first failure (by input order), as [`download`]; the other
/// downloads are finished first.
pub fn download_all(
    infos: &[DownloadInfo],
    dest_dir: &Path,
    opts: &DownloadOptions,
) -> Result<Vec<PathBuf>> {
    for i in infos {
        i.validate()?;
    }
    std::fs::create_dir_all(dest_dir).map_err(|e| Error::io("create", dest_dir, e))?;
    let mut unique: Vec<&DownloadInfo> = Vec::new();
    let mut index: HashMap<&DownloadInfo, usize> = HashMap::new();
    let slot: Vec<usize> = infos
        .iter()
        .map(|i| {
            *index.entry(i).or_insert_with(|| {
                unique.push(i);
                unique.len() - 1
            })
        })
        .collect();
    let client = reqwest::blocking::Client::builder()
        .user_agent(concat!("shardset/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(opts.connect_timeout)
        // Blocking reqwest applies it to each read of the body, not to the
        // whole transfer.
        .timeout(opts.read_timeout)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot start the HTTP client: {e}")))?;
    let bar = progress_bar(opts.progress);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<PathBuf>>>> =
        unique.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let workers = opts.parallel.max(1).min(unique.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(info) = unique.get(k) else { break };
                let r = fetch(&client, info, dest_dir, opts, &bar);
                *results[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    bar.finish_and_clear();
    let results: Vec<Result<PathBuf>> = results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every asset was fetched")
        })
        .collect();
    let mut out = Vec::with_capacity(infos.len());
    for k in slot {
        match &results[k] {
            Ok(p) => out.push(p.clone()),
            Err(_) => {
                // The first failure, in input order, moved out whole.
                let mut results = results;
                return Err(results.swap_remove(k).expect_err("an error"));
            }
        }
    }
    Ok(out)
}

fn progress_bar(show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(0),
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "downloading {msg} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .expect("a valid template"),
    );
    bar
}

/// A lock on `<dest>.lock`, held while the file is made.
struct FileLock(std::fs::File);

impl FileLock {
    fn acquire(dest: &Path) -> Result<Self> {
        let p = with_suffix(dest, ".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| Error::io("open the download lock", &p, e))?;
        f.lock().map_err(|e| Error::io("lock", &p, e))?;
        Ok(FileLock(f))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

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
fn fetch(
    client: &reqwest::blocking::Client,
    info: &DownloadInfo,
    dir: &Path,
    opts: &DownloadOptions,
    bar: &indicatif::ProgressBar,
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
    bar: &indicatif::ProgressBar,
) -> std::result::Result<(), Failure> {
    if let Some(path) = url.strip_prefix("file://") {
        return copy_local(Path::new(path), tmp, bar);
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(permanent(
            "unsupported URL scheme (http, https and file are)",
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
            (true, length.map(|l| have + l))
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
        bar.inc_length(t - start);
    }
    bar.inc(0);
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
        bar.inc(n as u64);
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

fn copy_local(
    src: &Path,
    tmp: &Path,
    bar: &indicatif::ProgressBar,
) -> std::result::Result<(), Failure> {
    let mut from = std::fs::File::open(src)
        .map_err(|e| permanent(format!("cannot open {}: {e}", src.display())))?;
    let len = from.metadata().map(|m| m.len()).unwrap_or(0);
    bar.inc_length(len);
    let mut to = std::fs::File::create(tmp)
        .map_err(|e| permanent(format!("cannot write {}: {e}", tmp.display())))?;
    let n =
        std::io::copy(&mut from, &mut to).map_err(|e| transient(format!("copy failed: {e}")))?;
    bar.inc(n);
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

/// The downloads folder under a cache root (`<root>/downloads`).
pub fn downloads_dir(root: &Path) -> PathBuf {
    root.join("downloads")
}

/// A partial download (`<name>.tmp`) no process is making.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalePartial {
    /// The `.tmp` file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Time since it was last written.
    pub age: Duration,
}

/// The `.tmp` files in `dir` at least `min_age` old whose download lock is
/// free, removed unless `dry_run` (each under its lock, so a download
/// resuming it is never cut short).
///
/// # Errors
/// [`Error::Io`] naming the folder or file.
pub fn remove_stale_partials(
    dir: &Path,
    min_age: Duration,
    dry_run: bool,
) -> Result<Vec<StalePartial>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    for e in entries {
        let e = e.map_err(|e| Error::io("list", dir, e))?;
        let path = e.path();
        let Some(dest) = path
            .to_str()
            .and_then(|p| p.strip_suffix(".tmp"))
            .map(PathBuf::from)
        else {
            continue;
        };
        let meta = e.metadata().map_err(|e| Error::io("stat", &path, e))?;
        if !meta.is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default();
        if age < min_age {
            continue;
        }
        let lock_file = with_suffix(&dest, ".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(|e| Error::io("open the download lock", &lock_file, e))?;
        if lock.try_lock().is_err() {
            continue; // a download is resuming it now
        }
        if !dry_run {
            std::fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        }
        let _ = lock.unlock();
        out.push(StalePartial {
            path,
            bytes: meta.len(),
            age,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names_follow_the_reference() {
        let d = DownloadInfo::new("https://example.com/data/train.tar.gz?x=1");
        let h = crate::util::sha256_hex(b"https://example.com/data/train.tar.gz?x=1");
        assert_eq!(d.local_name(), format!("train.tar.{}.gz", &h[..10]));
        let d = DownloadInfo::new("https://example.com/").with_filename("labels.csv");
        let h = crate::util::sha256_hex(b"https://example.com/");
        assert_eq!(d.local_name(), format!("labels.{}.csv", &h[..10]));
        let d = DownloadInfo::new("https://example.com/README");
        assert!(d.local_name().starts_with("README."));
    }

    #[test]
    fn a_url_is_an_asset_without_fallbacks() {
        let d: DownloadInfo = "https://example.com/a.zip".into();
        assert_eq!(d, DownloadInfo::new("https://example.com/a.zip"));
        assert!(d.fallbacks.is_empty() && d.checksum.is_none() && d.filename.is_none());
        let d = DownloadInfo::new("https://a/x").with_fallback("https://b/x");
        assert_eq!(d.all_urls(), vec!["https://a/x", "https://b/x"]);
    }

    #[test]
    fn checksums_are_checked_for_form() {
        assert!(Checksum::parse("sha256:abc").is_err());
        assert!(Checksum::parse("crc32:00000000").is_err());
        assert!(Checksum::parse("nothing").is_err());
        assert!(Checksum::parse(&format!("md5:{}", "a".repeat(32))).is_ok());
        assert!(DownloadInfo::new("").validate().is_err());
        assert!(DownloadInfo::new("http://x/y")
            .with_filename("../evil")
            .validate()
            .is_err());
    }
}
