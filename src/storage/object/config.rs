//! What an [`ObjectStorage`](super::ObjectStorage) is configured from: the
//! AWS environment (region, endpoint override), the part size of uploads,
//! and the same settings as Lance storage options.

#[cfg(feature = "lance")]
use std::collections::HashMap;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::{BackoffConfig, RetryConfig};

use super::{MAX_RETRIES, RETRY_TIMEOUT};

/// Files up to this size are put in one request; larger ones are uploaded
/// in parts of this size (S3 takes at most 5 GiB in one put, and parts of
/// 5 MiB at least). `SHARDSET_OBJECT_PART_BYTES` sets it.
pub const DEFAULT_PART_BYTES: u64 = 64 << 20;

/// S3's smallest part but the last.
const MIN_PART_BYTES: u64 = 5 << 20;

/// The part size the environment names (`SHARDSET_OBJECT_PART_BYTES`).
pub(super) fn part_bytes_from_env() -> std::result::Result<u64, String> {
    match std::env::var("SHARDSET_OBJECT_PART_BYTES") {
        Err(_) => Ok(DEFAULT_PART_BYTES),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if (MIN_PART_BYTES..=(5 << 30)).contains(&n) => Ok(n),
            _ => Err(format!(
                "SHARDSET_OBJECT_PART_BYTES must be a number of bytes from {MIN_PART_BYTES} (5 MiB) to 5 GiB, not {v:?}"
            )),
        },
    }
}

/// The region: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
fn region() -> String {
    std::env::var("AWS_REGION")
        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|_| "us-east-1".to_string())
}

/// The endpoint override: `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` or
/// `AWS_ENDPOINT`.
fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL_S3")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .or_else(|_| std::env::var("AWS_ENDPOINT"))
        .ok()
}

/// The configuration of [`ObjectStorage`](super::ObjectStorage) as Lance
/// storage options, for Lance's own S3 client (Lance reads the credentials
/// from the AWS environment itself): region, endpoint override, plain HTTP
/// for an `http://` endpoint, and the same retries.
#[cfg(feature = "lance")]
pub(crate) fn lance_storage_options() -> HashMap<String, String> {
    let mut o = HashMap::new();
    o.insert("aws_region".to_string(), region());
    if let Some(ep) = endpoint() {
        if ep.starts_with("http://") {
            o.insert("aws_allow_http".to_string(), "true".to_string());
        }
        o.insert("aws_endpoint".to_string(), ep);
    }
    o.insert("client_max_retries".to_string(), MAX_RETRIES.to_string());
    o.insert(
        "client_retry_timeout".to_string(),
        RETRY_TIMEOUT.as_secs().to_string(),
    );
    o
}

/// The S3 client's configuration for `bucket`, from the environment.
pub(super) fn store_config(bucket: &str) -> std::result::Result<AmazonS3Builder, String> {
    // https endpoints: reqwest's rustls with ring as the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(15),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        });
    b = b.with_region(region());
    if let Some(ep) = endpoint() {
        if ep.starts_with("http://") {
            b = b.with_allow_http(true);
        }
        b = b.with_endpoint(ep);
    }
    Ok(b)
}

/// What an [`ObjectStorage`](super::ObjectStorage) is configured from: the
/// `AWS_*` and `SHARDSET_OBJECT_*` variables, as one string.
pub(super) fn config_key() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("SHARDSET_OBJECT_"))
        .collect();
    vars.sort();
    let mut key = String::new();
    for (k, v) in vars {
        key.push_str(&k);
        key.push('=');
        key.push_str(&v);
        key.push('\n');
    }
    key
}
