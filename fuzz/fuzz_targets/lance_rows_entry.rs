//! The `open_lance_rows` target's entry: what a reader of a `lance-rows`
//! cache trusts. A seed cache is written once by shardset's own writer
//! (300 rows in three Lance data files: ints, floats, strings, a class
//! label, a list and an image); each input copies it, changes one of its
//! files, and reads it every way a user can. The first byte picks the mode
//! (mod 6), the rest is the mutation:
//! * 0: the bytes are `_metadata.json`;
//! * 1: edits (u16 position, xor byte, after a u16 truncation length) of
//!   the seed's `_metadata.json`;
//! * 2: the bytes are the feature description (the metadata's `features`,
//!   the metadata's own checksum dropped): JSON, else a JSON string;
//! * 3: a data file (`data/*.lance`, the second byte picks which) written
//!   over in place: a u16 offset (counted back from the end when its top
//!   bit is set, to reach Lance's footer), then the bytes, cut at the end
//!   of the file;
//! * 4: a manifest (`_versions/*.manifest`) written over the same way;
//! * 5: any file of the cache (the second byte picks which, by folder
//!   then content) truncated to a u32 length (mod its length + 1).
//!
//! Then: open, length, rows first, last and in the middle, a take, a
//! slice, every batch decoded, a projection, a SQL filter, `verify`. Any
//! panic, abort, hang or huge allocation is a bug; errors are fine.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use shardset::{
    open_cache, write_lance_cache, Dataset, Dtype, Example, Feature, Features, ImageData,
    IterOptions, LanceWriteOptions,
};

use super::{edited, files_under};

/// Whether a panic at `file` (its location) is inside one of Lance's own
/// crates (`.../lance-file-14.0.2/src/...` from the registry, or the
/// patched copy shardset builds with, `.../third_party/lance-encoding/src/...`):
/// shardset catches those at its Lance boundary and returns
/// `Error::CorruptShard` ("a damaged file made Lance panic"). A panic
/// anywhere else is a bug, and so is one that escapes.
pub fn panic_in_lance(file: &str) -> bool {
    let parts: Vec<String> = Path::new(file)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.iter().enumerate().any(|(i, c)| {
        let registry = c.rsplit_once('-').is_some_and(|(name, version)| {
            name.starts_with("lance")
                && !version.is_empty()
                && version.chars().all(|ch| ch.is_ascii_digit() || ch == '.')
        });
        let patched = i > 0 && parts[i - 1] == "third_party" && c.starts_with("lance");
        registry || patched
    })
}

/// The seed cache's files (path relative to the cache, bytes).
fn lance_seed() -> &'static Vec<(PathBuf, Vec<u8>)> {
    static S: OnceLock<Vec<(PathBuf, Vec<u8>)>> = OnceLock::new();
    S.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let features = Features::new()
            .with("id", Feature::value(Dtype::Int64))
            .with("score", Feature::value(Dtype::Float32))
            .with("name", Feature::value(Dtype::String))
            .with(
                "label",
                Feature::class_label(["cat", "dog", "bird"]).unwrap(),
            )
            .with("tags", Feature::sequence(Feature::value(Dtype::Int32)))
            .with("img", Feature::image());
        let rows = (0..300i64).map(|i| {
            let px: Vec<u8> = (0..12).map(|k| (i as u8).wrapping_add(k)).collect();
            Example::new()
                .with("id", i)
                .with("score", i as f32 / 7.0)
                .with("name", format!("row {i}"))
                .with("label", i % 3)
                .with("tags", (0..(i % 4) as i32).collect::<Vec<i32>>())
                .with("img", ImageData::new(2, 2, 3, px).unwrap())
        });
        let opts = LanceWriteOptions::default()
            .try_with_batch_size(50)
            .unwrap()
            .try_with_max_rows_per_file(128)
            .unwrap()
            .with_encode_threads(1);
        write_lance_cache(rows, &features, &dir, &opts).unwrap();
        let mut files = files_under(&dir);
        // By folder, then content: data file names are random, their bytes
        // are not, so an input picks the same data file in every process.
        files.sort_by(|(a, x), (b, y)| (a.parent(), x, a).cmp(&(b.parent(), y, b)));
        files
    })
}

/// The seed's files whose path is under `folder` and ends with `ext`.
fn seed_files(folder: &str, ext: &str) -> Vec<usize> {
    lance_seed()
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p.starts_with(folder) && p.to_string_lossy().ends_with(ext))
        .map(|(k, _)| k)
        .collect()
}

/// `file` written over by `body`: a u16 offset (from the end when its top
/// bit is set), then the bytes, cut at the end of the file.
fn overwrite(file: &mut [u8], body: &[u8]) {
    let Some((&[lo, hi], bytes)) = body.split_first_chunk::<2>() else {
        return;
    };
    if file.is_empty() {
        return;
    }
    let raw = u16::from_le_bytes([lo, hi]);
    let off = usize::from(raw & 0x7fff) % file.len();
    let at = if raw & 0x8000 != 0 {
        file.len() - 1 - off
    } else {
        off
    };
    let n = bytes.len().min(file.len() - at);
    file[at..at + n].copy_from_slice(&bytes[..n]);
}

/// The seed's metadata with its `features` replaced by `doc` (JSON, else
/// the bytes as a JSON string) and its own checksum dropped.
fn with_features(metadata: &[u8], doc: &[u8]) -> Vec<u8> {
    let mut j: serde_json::Value = serde_json::from_slice(metadata).unwrap();
    let o = j.as_object_mut().unwrap();
    o.remove("metadata_xxh64");
    let f = serde_json::from_slice(doc)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(doc).into()));
    o.insert("features".into(), f);
    serde_json::to_vec(&j).unwrap()
}

/// Reads the cache at `dir` every way a user can; what the first reads gave.
fn read_lance_cache(dir: &Path) -> shardset::Result<()> {
    let cache = open_cache(dir)?;
    let b = cache.backend.as_ref();
    let n = b.len() as i64;
    let first = b.get(0).map(drop);
    for i in [n / 2, -1, n - 1] {
        let _ = b.get(i);
    }
    let took = b.take(&[n - 1, 0, n / 2, 1, 0]).map(drop);
    let _ = b.slice(1, 3);
    let mut batches = Ok(());
    match b.iter_batches(&IterOptions::default().with_shuffle_seed(3)) {
        Ok(it) => {
            for batch in it.take(16) {
                if let Err(e) = batch.and_then(|x| b.decoder().decode_batch(&x)) {
                    batches = Err(e);
                }
            }
        }
        Err(e) => batches = Err(e),
    }
    let ds = Dataset::new(cache);
    if let Ok(p) = ds.select_columns(&["label", "name"]) {
        let _ = p.get(-1);
        let _ = p.take(&[0, n / 2]);
    }
    let filtered = ds.filter_expr("id >= 100 AND label = 1").and_then(|f| {
        let k = f.len() as i64;
        f.take(&[0, k - 1]).map(drop)
    });
    first.and(took).and(batches).and(filtered)
}

/// One input of the `open_lance_rows` target (see the module
/// documentation); what reading and verifying gave (damage verify finds
/// is an error). `None` when the input is empty.
pub fn open_lance_rows_input(data: &[u8]) -> Option<shardset::Result<()>> {
    let (&mode, body) = data.split_first()?;
    let seed = lance_seed();
    let mut files: Vec<(PathBuf, Vec<u8>)> = seed.clone();
    let meta = seed_files("_metadata.json", "")[0];
    let pick = |among: &[usize]| among[usize::from(*body.first().unwrap_or(&0)) % among.len()];
    match mode % 6 {
        0 => files[meta].1 = body.to_vec(),
        1 => files[meta].1 = edited(&seed[meta].1, body),
        2 => files[meta].1 = with_features(&seed[meta].1, body),
        k @ (3 | 4) => {
            let among = if k == 3 {
                seed_files("data", ".lance")
            } else {
                seed_files("_versions", ".manifest")
            };
            let f = pick(&among);
            overwrite(&mut files[f].1, body.get(1..).unwrap_or_default());
        }
        _ => {
            let all: Vec<usize> = (0..files.len()).collect();
            let f = pick(&all);
            let len = body
                .get(1..5)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
            let file = &mut files[f].1;
            file.truncate(len % (file.len() + 1));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    for (rel, bytes) in &files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
    }
    let read = read_lance_cache(&dir);
    let verified = shardset::verify_cache(&dir).and_then(|rep| {
        if rep.is_ok() {
            Ok(())
        } else {
            Err(shardset::Error::CorruptShard {
                path: dir.clone(),
                reason: format!("verify: {:?}", rep.damage),
            })
        }
    });
    Some(read.and(verified))
}

/// Inputs of every mode that change nothing (each reads whole and
/// verifies), for seed corpora and the replay test.
pub fn open_lance_rows_seeds() -> Vec<Vec<u8>> {
    let seed = lance_seed();
    let meta = &seed[seed_files("_metadata.json", "")[0]].1;
    let j: serde_json::Value = serde_json::from_slice(meta).unwrap();
    let features = serde_json::to_vec(&j["features"]).unwrap();
    let mut out = vec![
        [&[0u8], meta.as_slice()].concat(),
        vec![1],
        [&[2u8], features.as_slice()].concat(),
    ];
    // The first and last 16 bytes of each data file and manifest, written
    // over with themselves.
    for (mode, among) in [
        (3u8, seed_files("data", ".lance")),
        (4, seed_files("_versions", ".manifest")),
    ] {
        for (k, &f) in among.iter().enumerate() {
            let bytes = &seed[f].1;
            let tail = bytes.len().min(16);
            out.push([&[mode, k as u8, 0, 0], &bytes[..tail]].concat());
            let back = (tail as u16 - 1) | 0x8000;
            let b = back.to_le_bytes();
            out.push([&[mode, k as u8, b[0], b[1]], &bytes[bytes.len() - tail..]].concat());
        }
    }
    // Every file truncated to its own length.
    for (k, (_, bytes)) in seed.iter().enumerate() {
        let len = (bytes.len() as u32).to_le_bytes();
        out.push([&[5u8, k as u8], len.as_slice()].concat());
    }
    out
}
