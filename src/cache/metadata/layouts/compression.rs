//! [`Compression`], the IPC buffer compression of `arrow-shards` shards,
//! and its `_metadata.json` spelling.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// IPC buffer compression of `arrow-shards` shards. One spelling
/// everywhere: `none`, `lz4`, `zstd` (CLI flags, `FromStr`, serde, the
/// manifest); in `_metadata.json` the key is absent when uncompressed, as the
/// reference writes it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Uncompressed: shards are memory-mapped and read zero-copy (default).
    #[default]
    None,
    /// LZ4 frame.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The name: `none`, `lz4` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The metadata spelling (`None` for uncompressed: the key is absent).
    pub fn as_metadata(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            c => Some(c.name()),
        }
    }

    /// True when uncompressed.
    pub fn is_none(&self) -> bool {
        *self == Compression::None
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;

    /// Parses `none`, `lz4` or `zstd` (any case).
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(Error::InvalidArgument(format!(
                "compression must be none, lz4 or zstd, got '{s}'"
            ))),
        }
    }
}

/// `compression` in `_metadata.json`: absent or null when uncompressed.
pub(super) mod compression_key {
    use super::Compression;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(Compression::None),
            Some(s) => match s.as_str() {
                "lz4" => Ok(Compression::Lz4),
                "zstd" => Ok(Compression::Zstd),
                _ => Err(serde::de::Error::custom(format!(
                    "unknown compression '{s}' (zstd or lz4)"
                ))),
            },
        }
    }
}
