//! Shared fixtures of the integration tests.

use std::path::{Path, PathBuf};

use shardset::{
    write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Example, Feature, Features,
    ImageData, Tensor, Value, VideoStorage,
};

/// The caches written by the Python reference (copied from the project's shared fixtures).
pub fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The `_metadata.json` keys the reference writes for an Arrow shards cache.
pub const REFERENCE_ARROW_KEYS: [&str; 9] = [
    "cache_format_version",
    "format",
    "layout",
    "schema_fingerprint",
    "num_rows",
    "num_shards",
    "shard_row_counts",
    "shard_filenames",
    "shard_size_target_bytes",
];

/// Copies a golden cache into a temp dir (tests never touch the originals).
pub fn golden_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join(name);
    copy_dir(&golden().join(name), &dst);
    (tmp, dst)
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
            let mut p = std::fs::metadata(&to).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            p.set_readonly(false);
            std::fs::set_permissions(&to, p).unwrap();
        }
    }
}

/// The reference's feature set `F` (golden README).
pub fn features_f() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("f", Feature::value(Dtype::Float32))
        .with("name", Feature::value(Dtype::String))
        .with("flag", Feature::value(Dtype::Bool))
        .with(
            "label",
            Feature::class_label(["cat", "dog", "bird"]).unwrap(),
        )
        .with("img", Feature::image())
        .with(
            "arr",
            Feature::array(vec![2, 3, 4], Dtype::Float32).unwrap(),
        )
        .with("seq", Feature::sequence(Feature::value(Dtype::Int64)))
}

/// `{x: int32, label: ClassLabel(names=[a, b])}` — the reference's `F2`.
pub fn features_f2() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("label", Feature::class_label(["a", "b"]).unwrap())
}

/// A published `F2` cache of `n` rows with the given batch size and shard
/// budget (several shards for small budgets); returns (tempdir, cache dir).
pub fn f2_cache(n: usize, batch: usize, budget: u64) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    shardset::write_arrow_cache(
        f2_rows(n),
        &features_f2(),
        &dir,
        &shardset::ArrowWriteOptions::default()
            .try_with_batch_size(batch)
            .unwrap()
            .try_with_shard_size_bytes(Some(budget))
            .unwrap(),
    )
    .unwrap();
    (tmp, dir)
}

pub fn f2_rows(n: usize) -> impl Iterator<Item = Example> {
    (0..n).map(|i| {
        Example::new()
            .with("x", i as i32)
            .with("label", (i % 2) as i64)
    })
}

/// Row i of the golden `F` dataset, with pixels for the image.
pub fn f_row(i: usize) -> Example {
    let (h, w) = (6u32, 5u32);
    let mut px = Vec::with_capacity(90);
    for _y in 0..h {
        for x in 0..w {
            px.extend_from_slice(&[i as u8, (x * 10) as u8, 255 - i as u8]);
        }
    }
    let arr: Vec<f32> = (0..24).map(|k| k as f32 + i as f32).collect();
    let label: Value = if i % 2 == 1 {
        ["cat", "dog", "bird"][i % 3].into()
    } else {
        ((i % 3) as i64).into()
    };
    Example::new()
        .with("x", i as i32)
        .with("f", i as f32 * 0.5)
        .with(
            "name",
            if i.is_multiple_of(7) {
                Value::Null
            } else {
                format!("row-{i}").into()
            },
        )
        .with("flag", i.is_multiple_of(3))
        .with("label", label)
        .with("img", ImageData::new(h, w, 3, px).unwrap())
        .with("arr", Tensor::from_vec(vec![2, 3, 4], arr).unwrap())
        .with("seq", (0..(i % 5) as i64).collect::<Vec<i64>>())
}

pub fn video_features(storage: VideoStorage) -> Features {
    Features::new()
        .with("video", Feature::video(storage))
        .with("label", Feature::value(Dtype::Int64))
}

pub fn sha256(b: &[u8]) -> String {
    shardset::sha256_hex(b)
}

/// Every entry of a directory whose name starts with a dot (temp/old left-overs).
pub fn dot_entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// A map of every file under `dir` to its bytes (for "nothing changed" checks).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(d: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut es: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        es.sort();
        for p in es {
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(dir, &mut out);
    out
}

/// The Python interpreter of the test set-up: `$SHARDSET_PYTHON`, else the
/// virtual environment with pinned pyarrow and pylance that `./dev test`
/// creates (`~/.cache/shardset/venv`). Never the system interpreter.
pub fn python_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SHARDSET_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/shardset/venv/bin/python")
}

/// A command running the `shardset` binary of this build.
pub fn shardset_cli() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_shardset"))
}

/// Runs `cmd` and fails the test with its stderr unless it succeeded.
pub fn succeeded(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A command running the set-up's Python.
pub fn python() -> std::process::Command {
    std::process::Command::new(python_path())
}

/// Runs `script` in the set-up's Python with `args` (paths or strings) as
/// `sys.argv[1:]`, fails the test with its stderr when it fails, and parses
/// its standard output as JSON.
pub fn python_json<A: AsRef<std::ffi::OsStr>>(script: &str, args: &[A]) -> serde_json::Value {
    let out = python()
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "missing: the test Python {} ({e}); `./dev test` creates it",
                python_path().display()
            )
        });
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "python printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Fails the test, naming what is missing and how to install it, when the
/// set-up's Python cannot import `module`.
pub fn require_python_module(module: &str) {
    let py = python_path();
    let out = python().args(["-c", &format!("import {module}")]).output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "missing: Python module '{module}' in {} ({}); `./dev test` installs the pinned versions",
            py.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "missing: the test Python {} ({e}); `./dev test` creates it with pinned pyarrow and pylance",
            py.display()
        ),
    }
}

/// Fails the test, naming what is missing, when the `ffmpeg` CLI is not on
/// PATH (the tests make their clips with it).
pub fn require_ffmpeg() {
    let ok = std::process::Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "missing: the ffmpeg command line tool, which makes the test clips \
         (`./dev test` installs it; on Debian: apt-get install ffmpeg)"
    );
}

/// 300 rows of 64 equal bytes (`i % 251`) and their index `i`, in batches of
/// 25 over shards of about 8000 bytes, with per-record checksums: a flipped
/// data byte lands in one row ([`flip_row_byte`]).
pub fn checked_binary_cache(dir: &Path, compression: Compression) {
    let features = Features::new()
        .with("data", Feature::value(Dtype::Binary))
        .with("i", Feature::value(Dtype::Int64));
    write_arrow_cache(
        (0..300).map(|i| {
            Example::new()
                .with("data", vec![(i % 251) as u8; 64])
                .with("i", i as i64)
        }),
        &features,
        dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(25)
            .unwrap()
            .try_with_shard_size_bytes(Some(8000))
            .unwrap()
            .with_compression(compression)
            .with_record_checksums(true),
    )
    .unwrap();
}

/// Changes one byte of `row`'s data in place in an uncompressed
/// [`checked_binary_cache`] (`row < 251`); returns the shard file and the
/// shard's first row.
pub fn flip_row_byte(dir: &Path, counts: &[u64], row: u64) -> (PathBuf, u64) {
    let (mut start, mut s) = (0u64, 0usize);
    while start + counts[s] <= row {
        start += counts[s];
        s += 1;
    }
    let path = dir.join(format!("shard-{s:05}.arrow"));
    let mut b = std::fs::read(&path).unwrap();
    let needle = vec![row as u8; 64];
    let pos = b
        .windows(64)
        .position(|w| w == needle.as_slice())
        .unwrap_or_else(|| panic!("row {row}'s bytes"));
    b[pos + 10] ^= 0xff;
    std::fs::write(&path, &b).unwrap();
    (path, start)
}

/// A cell as JSON, for comparing with what Python read (images and
/// tensors as null: compared elsewhere).
pub fn cell(v: &shardset::Value) -> serde_json::Value {
    match v {
        shardset::Value::Null => serde_json::Value::Null,
        shardset::Value::Bool(b) => (*b).into(),
        shardset::Value::Int(i) => (*i).into(),
        shardset::Value::UInt(u) => (*u).into(),
        shardset::Value::Float(f) => (*f).into(),
        shardset::Value::Str(s) => s.as_str().into(),
        shardset::Value::Bytes(b) => b.iter().map(|x| u64::from(*x)).collect(),
        shardset::Value::List(l) => l.iter().map(cell).collect(),
        shardset::Value::Label(l) => l.id.into(),
        shardset::Value::Image(_) | shardset::Value::Tensor(_) => serde_json::Value::Null,
        other => panic!("unexpected cell {other:?}"),
    }
}

/// Row `i` of `ds` as a JSON object of its cells ([`cell`]).
pub fn row_json(ds: &shardset::Dataset, i: i64) -> serde_json::Value {
    let r = ds.get(i).unwrap();
    let mut m = serde_json::Map::new();
    for name in ds.column_names() {
        m.insert(name.clone(), cell(r.get(&name).unwrap()));
    }
    serde_json::Value::Object(m)
}

thread_local! {
    /// Set when this thread panicked since it was last cleared ([`note_panics`]).
    pub static PANICKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The source file of each panic on this thread since it was last
    /// cleared ([`note_panics`]).
    pub static PANIC_FILES: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Notes a panic on this thread, even one the reader catches (as a fuzzer,
/// whose panic hook aborts, would see it), then runs the default hook.
pub fn note_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|p| p.set(true));
            let file = info.location().map_or("", |l| l.file()).to_string();
            PANIC_FILES.with(|f| f.borrow_mut().push(file));
            previous(info);
        }));
    });
}
