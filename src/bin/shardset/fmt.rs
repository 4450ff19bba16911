//! Small helpers of the command line: sizes and durations in and out,
//! finding caches under a root, the CLI's error type.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A library error (names the path and the reason).
    #[error(transparent)]
    Lib(#[from] shardset::Error),
    /// A bad option value or a request this build cannot do (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// A check that ran and found a problem (verify, why) (exit code 1).
    #[error("{0}")]
    Failed(String),
}

/// Result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Reads `90s`, `30m`, `1h`, `2d`, `1w`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("cannot read duration '{s}' (e.g. 30m, 1h, 2d)"))?;
    let secs = match unit.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        _ => return Err(format!("duration '{s}' needs a unit: s, m, h, d or w")),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("duration '{s}' must not be negative"));
    }
    Ok(Duration::from_secs_f64(v * secs))
}

// Bytes and counts for people: the report's spelling, one for both.
pub use shardset::report::text::{count, human};

/// An age or a remaining time for people: `42s`, `5m`, `3h`, `2d`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Time since a path was last modified (zero when unknown or in the future).
pub fn modified_ago(p: &Path) -> Duration {
    shardset::storage::storage_for(p)
        .stat(p)
        .ok()
        .flatten()
        .and_then(|e| e.modified)
        .and_then(|t| t.elapsed().ok())
        .unwrap_or_default()
}

pub use shardset::cache::gc::{dirs_under as walk_dirs, is_cache};

/// The caches at or under `root`, sorted.
pub fn find_caches(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walk_dirs(root)
        .into_iter()
        .filter(|d| is_cache(d))
        .collect();
    v.sort();
    v
}

/// `path` itself when it is a cache, else the caches under it; an error
/// naming `path` when it is neither.
pub fn cache_or_root(path: &Path) -> CliResult<(bool, Vec<PathBuf>)> {
    if is_cache(path) {
        return Ok((true, vec![path.to_path_buf()]));
    }
    if !shardset::storage::storage_for(path).exists(path) {
        return Err(shardset::Error::Io {
            op: "open",
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
        .into());
    }
    let found = find_caches(path);
    if found.is_empty() {
        // Opening it gives the library's precise reason (no _metadata.json, ...).
        shardset::open_cache(path)?;
        return Err(CliError::Failed(format!(
            "{}: not a cache and holds no cache",
            path.display()
        )));
    }
    Ok((false, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("x1h").is_err());
    }

    #[test]
    fn people_formats() {
        assert_eq!(age(Duration::from_secs(7200)), "2h");
    }
}
