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
//! redirects and timeouts handled. `s3://` URLs go through the object
//! storage's own S3 client (the endpoint, credentials and retries of
//! `s3://` caches), streamed to the partial file and resumed the same way;
//! an object replaced between two attempts is caught by the checksum, as
//! for HTTP. `file://` URLs are copied.
//!
//! Here the assets, the options and the parallel downloads; the checksums
//! (`checksum`), the per-file lock (`lock`), the attempts at each URL
//! (`fetch`) and the clean-up of abandoned partial files (`partials`) have
//! modules of their own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

mod checksum;
mod fetch;
mod lock;
mod partials;

use checksum::Checksum;
use fetch::fetch;
pub use partials::{remove_stale_partials, StalePartial};

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
    /// Bytes done and to do, over all files (the caller draws them).
    pub progress: Option<Arc<DownloadProgress>>,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            parallel: 8,
            retries: 3,
            backoff: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            progress: None,
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

    /// Counts the bytes downloaded, and the bytes to download as they
    /// become known, in `progress` (for the caller's display; the library
    /// prints nothing).
    pub fn with_progress(mut self, progress: Arc<DownloadProgress>) -> Self {
        self.progress = Some(progress);
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
    let quiet = DownloadProgress::default();
    let bar = opts.progress.as_deref().unwrap_or(&quiet);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<PathBuf>>>> =
        unique.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let workers = opts.parallel.max(1).min(unique.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(info) = unique.get(k) else { break };
                let r = fetch(&client, info, dest_dir, opts, bar);
                *results[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
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

/// Bytes of a download: done, and to do as the sizes become known (a
/// server's `Content-Length`, a local file's length); shared with the
/// caller, which reads it from its own thread to draw progress.
#[derive(Debug, Default)]
pub struct DownloadProgress {
    done: AtomicU64,
    total: AtomicU64,
}

impl DownloadProgress {
    /// `(bytes done, bytes known to do)`.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }

    pub(super) fn add_done(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn add_total(&self, n: u64) {
        self.total.fetch_add(n, Ordering::Relaxed);
    }
}

/// The downloads folder under a cache root (`<root>/downloads`).
pub fn downloads_dir(root: &Path) -> PathBuf {
    root.join("downloads")
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
