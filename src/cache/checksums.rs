//! Whole-file checksums (xxh64, as `_checksums.json` and the manifests
//! record them), shared by every layout's writer and by `verify`.

use std::path::Path;

use crate::error::{Error, Result};

/// xxh64 of a file, 16 hex chars.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn xxh64_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut h = xxhash_rust::xxh64::Xxh64::new(0);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:016x}", h.digest()))
}
