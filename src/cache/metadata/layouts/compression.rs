//! [`Compression`], the name of a codec (the IPC buffer compression of
//! `arrow-shards` shards, what a Lance cache asked of Lance) and its
//! `_metadata.json` spelling; [`Codec`], a codec with its level as one value,
//! what writers are asked for.

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

/// A compression as a writer is asked for it: the codec and, for zstd, its
/// level, one value (so no level can stand beside a codec that takes none).
/// Which levels a writer can honour is its own check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    /// Uncompressed.
    #[default]
    None,
    /// LZ4 (no level).
    Lz4,
    /// Zstandard at `level` (`None`: the writer's default).
    Zstd {
        /// The zstd level.
        level: Option<i32>,
    },
}

impl Codec {
    /// The codec named `compression` at `level`.
    ///
    /// # Errors
    /// [`crate::error::Error::InvalidArgument`] for a level with a codec
    /// other than zstd.
    pub fn try_new(compression: Compression, level: Option<i32>) -> crate::error::Result<Codec> {
        match (compression, level) {
            (Compression::Zstd, level) => Ok(Codec::Zstd { level }),
            (c, Some(l)) => Err(crate::error::Error::InvalidArgument(format!(
                "compression level {l} with {c}: only zstd takes a level"
            ))),
            (Compression::None, None) => Ok(Codec::None),
            (Compression::Lz4, None) => Ok(Codec::Lz4),
        }
    }

    /// The codec's name.
    pub fn compression(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd { .. } => Compression::Zstd,
        }
    }

    /// The zstd level asked for, if any.
    pub fn level(self) -> Option<i32> {
        match self {
            Codec::Zstd { level } => level,
            _ => None,
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
