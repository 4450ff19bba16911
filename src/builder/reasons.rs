//! Why a cache is (re)built: a typed reason, so callers decide on the kind
//! (the CLI rebuilds on changed features) instead of matching message text,
//! and print it with `Display`, which gives the one wording.

use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// One reason to (re)build a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildReason {
    /// Nothing was built at that place yet.
    NotBuilt,
    /// The caller asked for a rebuild.
    Requested,
    /// The cache cannot be opened or verified.
    Unreadable {
        /// What failed.
        detail: String,
    },
    /// A file of the cache is damaged.
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A file does not match its recorded checksum.
    ChecksumMismatch {
        /// The file.
        path: PathBuf,
    },
    /// A declared source (file or asset) changed, appeared or went away.
    SourceChanged {
        /// Which, and how.
        change: String,
    },
    /// Sources are declared now; the cache recorded none.
    SourcesNowDeclared,
    /// The cache recorded sources that are no longer declared.
    SourcesNoLongerDeclared,
    /// The builder's config differs from the one the cache was built with.
    ConfigChanged {
        /// The cache's config.
        recorded: serde_json::Value,
        /// The builder's config now.
        now: serde_json::Value,
    },
    /// The features the builder gives differ from the cache's.
    FeaturesChanged {
        /// The difference.
        detail: String,
    },
}

impl std::fmt::Display for RebuildReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RebuildReason::NotBuilt => write!(f, "no cache has been built yet"),
            RebuildReason::Requested => write!(f, "a rebuild was requested"),
            RebuildReason::Unreadable { detail } => {
                write!(f, "the cache is missing or damaged: {detail}")
            }
            RebuildReason::Damaged { path, detail } if path.as_os_str().is_empty() => {
                write!(f, "the cache is damaged: {detail}")
            }
            RebuildReason::Damaged { path, detail } => {
                write!(f, "the cache is damaged: {}: {detail}", path.display())
            }
            RebuildReason::ChecksumMismatch { path } => {
                let what = if path.extension().is_some_and(|e| e == "arrow") {
                    "shard "
                } else {
                    ""
                };
                write!(f, "{what}{} does not match its checksum", path.display())
            }
            RebuildReason::SourceChanged { change } => f.write_str(change),
            RebuildReason::SourcesNowDeclared => {
                write!(f, "sources are declared now, but the cache recorded none")
            }
            RebuildReason::SourcesNoLongerDeclared => {
                write!(f, "the cache recorded sources that are no longer declared")
            }
            RebuildReason::ConfigChanged { recorded, now } => write!(
                f,
                "config changed: the cache has {recorded}, the builder now gives {now}"
            ),
            RebuildReason::FeaturesChanged { detail } => write!(f, "features changed: {detail}"),
        }
    }
}

/// Serialised as its sentence (the CLI's JSON reports).
impl Serialize for RebuildReason {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_reads_as_a_sentence_and_serialises_as_one() {
        let r = RebuildReason::ChecksumMismatch {
            path: PathBuf::from("c/x.arrow"),
        };
        assert_eq!(r.to_string(), "shard c/x.arrow does not match its checksum");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!("shard c/x.arrow does not match its checksum")
        );
        let f = RebuildReason::FeaturesChanged {
            detail: "x: int32 -> int64".into(),
        };
        assert!(f.to_string().starts_with("features changed: "));
    }
}
