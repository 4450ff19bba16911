//! `algo:hex` checksums of downloaded files (`sha256`, `md5`): parsed and
//! checked for form when an asset is declared, computed over a file once it
//! is downloaded.

use std::io::Read;
use std::path::Path;

use sha2::Digest;

use crate::error::{Error, Result};

/// A parsed `algo:hex` checksum.
#[derive(Debug, Clone)]
pub(super) struct Checksum {
    pub(super) algo: String,
    pub(super) hex: String,
}

impl Checksum {
    pub(super) fn parse(s: &str) -> Result<Self> {
        let (algo, hex) = s
            .split_once(':')
            .ok_or_else(|| Error::InvalidArgument(format!("checksum {s:?} is not 'algo:hex'")))?;
        let algo = algo.to_ascii_lowercase();
        let len = match algo.as_str() {
            "sha256" => 64,
            "md5" => 32,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "checksum algorithm '{other}' is not sha256 or md5"
                )))
            }
        };
        let hex = hex.to_ascii_lowercase();
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::InvalidArgument(format!(
                "checksum {s:?}: a {algo} digest is {len} hex digits"
            )));
        }
        Ok(Checksum { algo, hex })
    }

    /// The same algorithm's digest of a file, as `algo:hex`.
    pub(super) fn of_file(&self, path: &Path) -> Result<String> {
        fn digest<D: Digest>(path: &Path) -> Result<String> {
            let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
            let mut buf = vec![0u8; 1 << 20];
            let mut h = D::new();
            loop {
                let n = f.read(&mut buf).map_err(|e| Error::io("read", path, e))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(crate::util::hex(&h.finalize()))
        }
        let hex = match self.algo.as_str() {
            "md5" => digest::<md5::Md5>(path)?,
            _ => digest::<sha2::Sha256>(path)?,
        };
        Ok(format!("{}:{hex}", self.algo))
    }
}
