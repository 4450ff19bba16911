//! Cache directory naming and the cache root, exactly as the reference does them.

use std::path::PathBuf;

/// Environment variable naming the cache root.
pub const CACHE_DIR_ENV: &str = "STABLE_DATASETS_CACHE_DIR";

/// The folder inside a cache where filters keep their row selections
/// (`Dataset::filter_expr`): not data, left out of checksums and `verify`.
pub const SELECTIONS_DIR: &str = "_selections";

/// `{class lower}_{config}_{split}_{sha256("{Class}:{version}:{config}:{split}:{format}")[:16]}`.
pub fn cache_fingerprint(
    class_name: &str,
    version: &str,
    config_name: &str,
    split: &str,
    storage_format: &str,
) -> String {
    let key = format!("{class_name}:{version}:{config_name}:{split}:{storage_format}");
    let digest = crate::util::sha256_hex(key.as_bytes());
    format!(
        "{}_{config_name}_{split}_{}",
        class_name.to_lowercase(),
        &digest[..16]
    )
}

/// The cache root: `$STABLE_DATASETS_CACHE_DIR` (with `~` expanded), else `~/.stable-datasets`.
pub fn cache_root() -> PathBuf {
    match std::env::var_os(CACHE_DIR_ENV) {
        Some(v) if !v.is_empty() => expand_tilde(PathBuf::from(v)),
        _ => home_dir().join(".stable-datasets"),
    }
}

/// `<root>/processed`.
pub fn processed_dir() -> PathBuf {
    cache_root().join("processed")
}

/// `<root>/downloads`.
pub fn downloads_dir() -> PathBuf {
    cache_root().join("downloads")
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn expand_tilde(p: PathBuf) -> PathBuf {
    match p.to_str() {
        Some("~") => home_dir(),
        Some(s) if s.starts_with("~/") => home_dir().join(&s[2..]),
        _ => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        assert_eq!(
            cache_fingerprint("CIFAR10", "1.0.0", "default", "train", "arrow"),
            "cifar10_default_train_52b279be17f256c9"
        );
        assert_eq!(
            cache_fingerprint("CIFAR10", "1.0.0", "default", "train", "lance"),
            "cifar10_default_train_88e5ef8050c82e5e"
        );
        assert_eq!(
            cache_fingerprint("MedMNIST", "1.0.0", "pathmnist", "validation", "arrow"),
            "medmnist_pathmnist_validation_6b6b4f6ee4e52126"
        );
    }
}
