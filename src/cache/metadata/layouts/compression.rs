//! [`Compression`], the IPC buffer compression of `arrow-shards` shards,
//! and its `_metadata.json` spelling.

crate::util::named_enum! {
    /// IPC buffer compression of `arrow-shards` shards. One spelling
    /// everywhere: `none`, `lz4`, `zstd` (CLI flags, `FromStr`, serde, the
    /// manifest); in `_metadata.json` the key is absent when uncompressed, as the
    /// reference writes it.
    #[derive(Default)]
    pub enum Compression("compression") {
        /// Uncompressed: shards are memory-mapped and read zero-copy (default).
        #[default]
        None = "none" | "NONE",
        /// LZ4 frame.
        Lz4 = "lz4" | "LZ4",
        /// Zstandard.
        Zstd = "zstd" | "ZSTD",
    }
}

impl Compression {
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
