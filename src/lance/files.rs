//! The files of a Lance dataset, checked before Lance reads them. Lance
//! trusts the offsets and lengths in its manifests, the footer of each
//! data file (it reserves memory for as many buffers as a footer counts,
//! and reads and slices at its offsets) and the sizes a manifest records,
//! so one damaged file could make it allocate gigabytes or panic. A
//! manifest is checked against `_checksums.json` where that records it,
//! and each data file's size and footer against the file's own length: an
//! error naming the file instead.

use std::path::Path;

use lance::dataset::fragment::FileFragment;
use lance::Dataset;

use super::{block_on_read, lance_err, open_dataset_at};
use crate::error::{Error, Result};
use crate::storage::{storage_for, Storage};

/// The dataset at `dir` at Lance version `version` (None: the latest),
/// that version's manifest first checked against `_checksums.json`.
///
/// # Errors
/// [`Error::CorruptShard`] naming a damaged manifest, or naming the
/// dataset when Lance cannot open it.
pub(crate) fn open_checked(dir: &Path, version: Option<u64>) -> Result<Dataset> {
    if let Some(v) = version {
        // Lance's names for it: `u64::MAX - version` in 20 digits, and the older one.
        let names = [
            format!("_versions/{:020}.manifest", u64::MAX - v),
            format!("_versions/{v}.manifest"),
        ];
        crate::cache::checksums::check_recorded(storage_for(dir).as_ref(), dir, &names)?;
    }
    let uri = dir.to_string_lossy().into_owned();
    block_on_read(dir, async move { open_dataset_at(&uri, version).await })?
        .map_err(|e| lance_err(dir, e))
}

/// Checks the data files of the fragments whose manifest entry records no
/// row count, which Lance counts by opening their files.
///
/// # Errors
/// As [`check_fragment_files`].
pub(crate) fn check_uncounted(dir: &Path, fragments: &[FileFragment]) -> Result<()> {
    let storage = storage_for(dir);
    for f in fragments
        .iter()
        .filter(|f| f.metadata().physical_rows.is_none())
    {
        check_fragment_files(storage.as_ref(), dir, f)?;
    }
    Ok(())
}

/// A Lance file (v2) ends with its footer: where the column metadata, its
/// offset table and the global buffers' offset table start (u64 each), the
/// number of global buffers and of columns (u32 each), the format version
/// (two u16) and `LANC`.
const FOOTER: u64 = 40;
const MAGIC: &[u8; 4] = b"LANC";

/// Global buffers a file may list: Lance writes its schema and a few more.
const MAX_GLOBAL_BUFFERS: u64 = 1 << 16;

/// Checks the data files of `fragment` of the dataset at `dir` (see the
/// module documentation); files in another base directory are Lance's.
///
/// # Errors
/// [`Error::CorruptShard`] naming the damaged file; [`Error::MissingShard`]
/// for a missing one; I/O errors naming it.
pub(crate) fn check_fragment_files(
    storage: &dyn Storage,
    dir: &Path,
    fragment: &FileFragment,
) -> Result<()> {
    for f in fragment
        .metadata()
        .files
        .iter()
        .filter(|f| f.base_id.is_none())
    {
        let path = dir.join("data").join(&f.path);
        check_data_file(storage, &path, f.file_size_bytes.get().map(u64::from))?;
    }
    Ok(())
}

fn check_data_file(storage: &dyn Storage, path: &Path, recorded: Option<u64>) -> Result<()> {
    let bad = |why: String| Error::corrupt(path, format!("Lance data file: {why}"));
    let len = storage
        .stat(path)?
        .ok_or_else(|| Error::MissingShard {
            path: path.to_path_buf(),
        })?
        .len;
    if let Some(n) = recorded.filter(|&n| n != len) {
        return Err(bad(format!("{len} bytes, the manifest records {n}")));
    }
    if len < FOOTER {
        return Err(bad(format!("{len} bytes, shorter than a footer")));
    }
    let tail = len - FOOTER;
    let footer = storage.read_range(path, tail..len)?;
    if footer.len() as u64 != FOOTER || &footer[36..] != MAGIC {
        return Err(bad("no footer (it does not end in LANC)".into()));
    }
    let u64_at = |k: usize| u64::from_le_bytes(footer[k..k + 8].try_into().expect("8 bytes"));
    let u32_at = |k: usize| u32::from_le_bytes(footer[k..k + 4].try_into().expect("4 bytes"));
    let u16_at = |k: usize| u16::from_le_bytes(footer[k..k + 2].try_into().expect("2 bytes"));
    if u16_at(32) == 0 && u16_at(34) <= 2 {
        return Ok(()); // the legacy format: another layout, read by Lance's older reader
    }
    let (meta, cmo, gbo) = (u64_at(0), u64_at(8), u64_at(16));
    let (buffers, columns) = (u64::from(u32_at(24)), u64::from(u32_at(28)));
    // The tables lie back to back, then the footer.
    let fits = meta <= cmo
        && cmo.checked_add(16 * columns) == Some(gbo)
        && gbo.checked_add(16 * buffers) == Some(tail)
        && (1..=MAX_GLOBAL_BUFFERS).contains(&buffers);
    if !fits {
        return Err(bad(format!(
            "its footer (column metadata at {meta}, offset tables at {cmo} and {gbo}, {columns} columns, {buffers} global buffers) does not describe a file of {len} bytes"
        )));
    }
    // Global buffers (the schema first) lie before the column metadata.
    let table = storage.read_range(path, gbo..tail)?;
    let mut total = 0u64;
    for (k, e) in table.chunks_exact(16).enumerate() {
        let at = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
        let size = u64::from_le_bytes(e[8..].try_into().expect("8 bytes"));
        total = total.saturating_add(size);
        if at.checked_add(size).is_none_or(|end| end > meta) || total > meta {
            return Err(bad(format!(
                "global buffer {k} ({size} bytes at {at}) runs past the column metadata at {meta}"
            )));
        }
    }
    Ok(())
}
