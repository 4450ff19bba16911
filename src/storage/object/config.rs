//! What an [`ObjectStorage`](super::ObjectStorage) is configured from: the
//! AWS environment (region, endpoint override), the part size of uploads,
//! and the same settings as Lance storage options.

#[cfg(feature = "lance")]
use std::collections::HashMap;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::{BackoffConfig, RetryConfig};

use super::options::StorageOptions;
use super::{MAX_RETRIES, RETRY_TIMEOUT};

/// Files up to this size are put in one request; larger ones are uploaded
/// in parts of this size (S3 takes at most 5 GiB in one put, and parts of
/// 5 MiB at least). `SHARDSET_OBJECT_PART_BYTES` or
/// [`StorageOptions::part_bytes`] sets it.
pub const DEFAULT_PART_BYTES: u64 = 64 << 20;

/// The part size in effect.
pub(super) fn part_bytes() -> std::result::Result<u64, String> {
    let o = StorageOptions::effective().map_err(|e| e.to_string())?;
    Ok(o.part_bytes.unwrap_or(DEFAULT_PART_BYTES))
}

/// The region in effect, else `us-east-1`.
fn region(o: &StorageOptions) -> String {
    o.region.clone().unwrap_or_else(|| "us-east-1".to_string())
}

/// The configuration of [`ObjectStorage`](super::ObjectStorage) as Lance
/// storage options, for Lance's own S3 client: region, endpoint override,
/// plain HTTP for an `http://` endpoint, credentials when given, and the
/// same retries.
#[cfg(feature = "lance")]
pub(crate) fn lance_storage_options() -> HashMap<String, String> {
    let o = StorageOptions::effective().unwrap_or_default();
    let mut m = HashMap::new();
    m.insert("aws_region".to_string(), region(&o));
    if let Some(ep) = &o.endpoint {
        if ep.starts_with("http://") {
            m.insert("aws_allow_http".to_string(), "true".to_string());
        }
        m.insert("aws_endpoint".to_string(), ep.clone());
    }
    for (k, v) in [
        ("aws_access_key_id", &o.access_key_id),
        ("aws_secret_access_key", &o.secret_access_key),
        ("aws_session_token", &o.session_token),
    ] {
        if let Some(v) = v {
            m.insert(k.to_string(), v.clone());
        }
    }
    m.insert("client_max_retries".to_string(), MAX_RETRIES.to_string());
    m.insert(
        "client_retry_timeout".to_string(),
        RETRY_TIMEOUT.as_secs().to_string(),
    );
    m
}

/// The S3 client's configuration for `bucket`, from the settings in effect.
pub(super) fn store_config(bucket: &str) -> std::result::Result<AmazonS3Builder, String> {
    let o = StorageOptions::effective().map_err(|e| e.to_string())?;
    // https endpoints: reqwest's rustls with ring as the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_http_connector(super::retry_after::RetryAfterConnector)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(15),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        });
    b = b.with_region(region(&o));
    if let Some(ep) = &o.endpoint {
        if ep.starts_with("http://") {
            b = b.with_allow_http(true);
        }
        b = b.with_endpoint(ep.clone());
    }
    if let Some(k) = &o.access_key_id {
        b = b.with_access_key_id(k.clone());
    }
    if let Some(k) = &o.secret_access_key {
        b = b.with_secret_access_key(k.clone());
    }
    if let Some(t) = &o.session_token {
        b = b.with_token(t.clone());
    }
    Ok(b)
}

/// What an [`ObjectStorage`](super::ObjectStorage) is configured from: the
/// `AWS_*` and `SHARDSET_OBJECT_*` variables and the installed settings, as
/// one string.
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
    if let Ok(o) = StorageOptions::effective() {
        key.push_str(&serde_json::to_string(&o).unwrap_or_default());
    }
    key
}
