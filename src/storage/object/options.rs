//! [`StorageOptions`]: the object-store settings as one typed, serialisable
//! value. A process gets them from its `AWS_*` environment by default;
//! [`StorageOptions::install`] makes others its settings (a Ray task given
//! the driver's, a DataLoader worker, a notebook) without touching the
//! process environment, which other threads may be reading.

use std::sync::atomic::{AtomicPtr, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Object-store settings; a field left `None` comes from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageOptions {
    /// The region (`AWS_REGION`, `AWS_DEFAULT_REGION`; default `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// An endpoint of an S3-compatible server, `http://` or `https://`
    /// (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, `AWS_ENDPOINT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The access key id (`AWS_ACCESS_KEY_ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// The secret access key (`AWS_SECRET_ACCESS_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    /// A session token (`AWS_SESSION_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
    /// Bytes per upload part, 5 MiB to 5 GiB (`SHARDSET_OBJECT_PART_BYTES`;
    /// default [`DEFAULT_PART_BYTES`](super::DEFAULT_PART_BYTES)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_bytes: Option<u64>,
}

/// S3's smallest part but the last.
pub(super) const MIN_PART_BYTES: u64 = 5 << 20;

/// The settings installed in this process, inherited by a forked child. No
/// lock (a fork could leave one held): an install swaps in a new value and
/// leaks the one before, which a reader may still be cloning; installs are
/// rare (once per task or process).
static INSTALLED: AtomicPtr<StorageOptions> = AtomicPtr::new(std::ptr::null_mut());

fn env(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| std::env::var(n).ok())
}

impl StorageOptions {
    /// Checks the values: an endpoint is an `http://` or `https://` URL,
    /// the part size within S3's limits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the setting.
    pub fn check(&self) -> Result<()> {
        if let Some(ep) = &self.endpoint {
            if !(ep.starts_with("http://") || ep.starts_with("https://")) {
                return Err(Error::InvalidArgument(format!(
                    "object store endpoint must start with http:// or https://, got '{ep}'"
                )));
            }
        }
        if let Some(n) = self.part_bytes {
            if !(MIN_PART_BYTES..=(5 << 30)).contains(&n) {
                return Err(Error::InvalidArgument(format!(
                    "object store part_bytes (SHARDSET_OBJECT_PART_BYTES) must be from {MIN_PART_BYTES} (5 MiB) to 5 GiB, got {n}"
                )));
            }
        }
        Ok(())
    }

    /// The settings the environment gives (`AWS_*`, `SHARDSET_OBJECT_PART_BYTES`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a part size that is not a number.
    pub fn from_env() -> Result<Self> {
        let part_bytes = match std::env::var("SHARDSET_OBJECT_PART_BYTES") {
            Err(_) => None,
            Ok(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "SHARDSET_OBJECT_PART_BYTES must be a number of bytes, not {v:?}"
                ))
            })?),
        };
        Ok(StorageOptions {
            region: env(&["AWS_REGION", "AWS_DEFAULT_REGION"]),
            endpoint: env(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]),
            access_key_id: env(&["AWS_ACCESS_KEY_ID"]),
            secret_access_key: env(&["AWS_SECRET_ACCESS_KEY"]),
            session_token: env(&["AWS_SESSION_TOKEN"]),
            part_bytes,
        })
    }

    /// Each setting of `self`, else of `under`.
    pub fn over(self, under: StorageOptions) -> StorageOptions {
        StorageOptions {
            region: self.region.or(under.region),
            endpoint: self.endpoint.or(under.endpoint),
            access_key_id: self.access_key_id.or(under.access_key_id),
            secret_access_key: self.secret_access_key.or(under.secret_access_key),
            session_token: self.session_token.or(under.session_token),
            part_bytes: self.part_bytes.or(under.part_bytes),
        }
    }

    /// Makes these this process's object-store settings, over the
    /// environment's (checked first); caches opened or written from now
    /// on use them.
    ///
    /// # Errors
    /// As [`StorageOptions::check`].
    pub fn install(self) -> Result<()> {
        self.check()?;
        INSTALLED.swap(Box::into_raw(Box::new(self)), Ordering::AcqRel);
        Ok(())
    }

    /// The settings in effect: those installed over the environment's.
    ///
    /// # Errors
    /// As [`StorageOptions::from_env`] and [`StorageOptions::check`].
    pub fn effective() -> Result<StorageOptions> {
        let p = INSTALLED.load(Ordering::Acquire);
        // SAFETY: a non-null pointer comes from `Box::into_raw` in
        // `install` and is never freed.
        let installed = unsafe { p.as_ref() }.cloned().unwrap_or_default();
        let o = installed.over(StorageOptions::from_env()?);
        o.check()?;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_settings_win_and_bad_ones_are_named() {
        let mine = StorageOptions {
            endpoint: Some("http://127.0.0.1:9".into()),
            part_bytes: Some(8 << 20),
            ..Default::default()
        };
        let env = StorageOptions {
            region: Some("eu-west-1".into()),
            endpoint: Some("https://s3.example".into()),
            ..Default::default()
        };
        let o = mine.over(env);
        assert_eq!(o.region.as_deref(), Some("eu-west-1"));
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        let j = serde_json::to_string(&o).unwrap();
        assert_eq!(serde_json::from_str::<StorageOptions>(&j).unwrap(), o);
        assert!(serde_json::from_str::<StorageOptions>(r#"{"bucket": "x"}"#).is_err());
        let bad = StorageOptions {
            endpoint: Some("ftp://x".into()),
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("endpoint"));
        let bad = StorageOptions {
            part_bytes: Some(1),
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("part_bytes"));
    }
}
