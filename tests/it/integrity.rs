//! Staleness, integrity and faults.

use std::path::{Path, PathBuf};
use std::process::Command;

use shardset::builder::{why, why_cache, Sources};
use shardset::error::BoxError;
use shardset::SplitMix64;
use shardset::{
    load_with_report, open_cache, write_arrow_cache, ArrowWriteOptions, BuilderConfig,
    DatasetBuilder, DatasetInfo, Dtype, Error, Example, ExampleStream, Feature, Features,
    LoadOptions, WorkUnit,
};

use crate::common::*;

fn texts(reasons: Vec<shardset::builder::RebuildReason>) -> Vec<String> {
    reasons.iter().map(ToString::to_string).collect()
}

/// Reads one integer per line from each source file.
struct FromFiles {
    root: PathBuf,
    by_content: bool,
    scale: i64,
}

impl DatasetBuilder for FromFiles {
    fn name(&self) -> &str {
        "FromFiles"
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    fn configs(&self) -> Vec<BuilderConfig> {
        vec![BuilderConfig::new("default", "").with_params(serde_json::json!({"scale": self.scale}))]
    }
    fn info(&self, _c: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(
            Features::new().with("v", Feature::value(Dtype::Int64)),
        ))
    }
    fn splits(&self, _c: &str) -> Result<Vec<String>, BoxError> {
        Ok(vec!["train".into()])
    }
    fn sources(&self, _c: &str, _s: &str) -> Result<Option<Sources>, BoxError> {
        let s = Sources::new(&self.root, ["a.txt", "b.txt"]);
        Ok(Some(if self.by_content { s.by_content() } else { s }))
    }
    fn work_units(&self, _c: &str, _s: &str) -> Result<Vec<WorkUnit>, BoxError> {
        Ok(vec![WorkUnit::new("a.txt"), WorkUnit::new("b.txt")])
    }
    fn generate<'a>(
        &'a self,
        _c: &'a str,
        _s: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        let text = std::fs::read_to_string(self.root.join(&unit.id))?;
        let scale = self.scale;
        Ok(Box::new(
            text.lines()
                .map(|l| l.trim().to_string())
                .collect::<Vec<_>>()
                .into_iter()
                .map(move |l| {
                    let v: i64 = l.parse()?;
                    Ok((l, Example::new().with("v", v * scale)))
                }),
        ))
    }
}

fn write_sources(root: &Path, a: &str, b: &str) {
    std::fs::write(root.join("a.txt"), a).unwrap();
    std::fs::write(root.join("b.txt"), b).unwrap();
}

fn vs(ds: &shardset::Dataset) -> Vec<i64> {
    ds.iter()
        .map(|r| r.unwrap().get("v").unwrap().as_i64().unwrap())
        .collect()
}

#[test]
fn changed_sources_and_config_values_rebuild_and_say_why() {
    let src = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write_sources(src.path(), "1\n2\n", "3\n");
    let b = FromFiles {
        root: src.path().to_path_buf(),
        by_content: false,
        scale: 1,
    };
    let opts = LoadOptions::default().with_cache_root(cache.path());
    let (ds, rep) = load_with_report(&b, "train", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(vs(&ds), vec![1, 2, 3]);
    assert!(texts(why(&b, "train", &opts).unwrap()).is_empty());
    assert!(texts(why_cache(&rep.dir).unwrap()).is_empty());
    // Execution knobs do not change the cache key or make it stale.
    let serde_json::Value::Object(m) = serde_json::json!({"batch_size": 1, "threads": 1}) else {
        unreachable!()
    };
    let knobs = opts
        .clone()
        .with_write_spec(shardset::WriteSpec::from_options(shardset::Layout::Arrow, &m).unwrap());
    let (_, r2) = load_with_report(&b, "train", &knobs).unwrap();
    assert!(!r2.built);
    assert_eq!(r2.dir, rep.dir);
    // A changed source: `why` names it, the next load rebuilds.
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(src.path().join("b.txt"), "3\n4\n").unwrap();
    let reasons = texts(why(&b, "train", &opts).unwrap());
    assert_eq!(reasons, vec!["source b.txt changed (size)".to_string()]);
    assert_eq!(
        texts(why_cache(&rep.dir).unwrap()),
        reasons,
        "the cache alone tells the same"
    );
    let out = crate::common::shardset_cli()
        .arg("why")
        .arg(&rep.dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("source b.txt changed"));
    let (ds, rep3) = load_with_report(&b, "train", &opts).unwrap();
    assert!(rep3.built);
    assert!(
        rep3.reasons.iter().any(|r| r.to_string().contains("b.txt")),
        "{:?}",
        rep3.reasons
    );
    assert_eq!(vs(&ds), vec![1, 2, 3, 4]);
    // Touched but unchanged: stale by mtime, not by content hash.
    let c = FromFiles {
        root: src.path().to_path_buf(),
        by_content: true,
        scale: 1,
    };
    load_with_report(&c, "train", &opts).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(src.path().join("a.txt"), "1\n2\n").unwrap();
    assert!(
        texts(why(&c, "train", &opts).unwrap()).is_empty(),
        "content unchanged"
    );
    assert_eq!(
        texts(why(&b, "train", &opts).unwrap()),
        vec!["sources are now stamped differently (content hash vs size+mtime)".to_string()]
    );
    std::fs::write(src.path().join("a.txt"), "1\n9\n").unwrap();
    assert_eq!(
        texts(why(&c, "train", &opts).unwrap()),
        vec!["source a.txt changed (content)".to_string()]
    );
    // A config value: recorded, compared, named.
    load_with_report(&c, "train", &opts).unwrap();
    let d = FromFiles {
        root: src.path().to_path_buf(),
        by_content: true,
        scale: 10,
    };
    let r = texts(why(&d, "train", &opts).unwrap());
    assert!(
        r.len() == 1 && r[0].contains("config changed") && r[0].contains("\"scale\":10"),
        "{r:?}"
    );
    let (ds, _) = load_with_report(&d, "train", &opts).unwrap();
    assert_eq!(vs(&ds), vec![10, 90, 30, 40]);
    // A removed source: the cache alone says so; load names the missing file.
    std::fs::remove_file(src.path().join("a.txt")).unwrap();
    assert!(texts(why_cache(&rep.dir).unwrap()).contains(&"source a.txt was removed".to_string()));
    let e = load_with_report(&d, "train", &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a.txt"), "{e}");
}

/// Every file of a cache, for flipping bytes in.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn one_hundred_byte_flips_are_each_detected_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write_arrow_cache(
        (0..120).map(f_row),
        &features_f(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(10)
            .unwrap()
            .try_with_shard_size_bytes(Some(6000))
            .unwrap(),
    )
    .unwrap();
    let fs = files(&dir);
    assert!(fs.len() >= 4, "{fs:?}");
    let sizes: Vec<u64> = fs
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    let total: u64 = sizes.iter().sum();
    let mut rng = SplitMix64::new(100);
    let (mut meta_flips, mut shard_flips) = (0, 0);
    for _ in 0..100 {
        // A uniformly random byte of the whole cache, XORed with a random non-zero value.
        let mut at = rng.below(total);
        let mut k = 0;
        while at >= sizes[k] {
            at -= sizes[k];
            k += 1;
        }
        let f = &fs[k];
        let orig = std::fs::read(f).unwrap();
        let mut b = orig.clone();
        b[at as usize] ^= 1 + rng.below(255) as u8;
        std::fs::write(f, &b).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name == "_metadata.json" {
            meta_flips += 1;
            let e = open_cache(&dir).expect_err("a flipped metadata byte is caught on open");
            assert!(e.to_string().contains("_metadata.json"), "{e}");
        } else {
            shard_flips += 1;
            let bad = shardset::verify_checksums(&dir).unwrap();
            assert_eq!(bad.len(), 1, "flip at {at} of {name}");
            assert_eq!(&bad[0].path, f);
        }
        std::fs::write(f, &orig).unwrap();
    }
    assert!(
        meta_flips > 0 && shard_flips > 0,
        "{meta_flips} / {shard_flips}"
    );
    assert!(shardset::verify_checksums(&dir).unwrap().is_empty());
}

#[test]
fn per_record_checksums_name_the_changed_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    checked_binary_cache(&dir, shardset::Compression::None);
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.metadata.to_json()["row_checksums"], true);
    let counts = c.backend.shard_row_counts().to_vec();
    assert!(counts.len() >= 2);
    // Change one byte of row 200's data in place.
    let (path, _) = flip_row_byte(&dir, &counts, 200);
    let located = shardset::layouts::arrow_shards::integrity::locate_corrupt_rows(&dir).unwrap();
    assert_eq!(located.len(), 1);
    assert_eq!(located[0].shard, path);
    assert_eq!(located[0].rows, vec![200]);
    let out = crate::common::shardset_cli()
        .arg("verify")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("changed row(s) 200"), "{err}");
}

/// A small tmpfs, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then(|| Tmpfs(at.to_path_buf()))
    }

    fn resize(&self, size: &str) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn demo_cmd(root: &Path, rows: &str) -> Command {
    let mut c = crate::common::shardset_cli();
    c.args([
        "demo",
        "--json",
        "--rows",
        rows,
        "--batch-size",
        "10",
        "--shard-size",
        "20KB",
        "--threads",
        "1",
        "--root",
    ])
    .arg(root);
    c
}

#[test]
fn a_full_disk_leaves_the_published_cache_untouched_and_the_build_resumable() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("disk");
    let fs = Tmpfs::mount(&root, "400k");
    // A small published cache that must survive the failed build untouched.
    let small = demo_cmd(&root, "20").output().unwrap();
    assert!(
        small.status.success(),
        "{}",
        String::from_utf8_lossy(&small.stderr)
    );
    let published = PathBuf::from(
        serde_json::from_slice::<serde_json::Value>(&small.stdout).unwrap()["dir"]
            .as_str()
            .unwrap(),
    );
    let before = snapshot(&published);
    let out = match &fs {
        Some(_) => demo_cmd(&root, "1500").output().unwrap(),
        None => {
            // No tmpfs (not root): a per-file size limit fails the writes instead.
            let exe = env!("CARGO_BIN_EXE_shardset");
            let script = format!(
                "ulimit -f 64; trap '' XFSZ; exec {exe} demo --json --rows 1500 --batch-size 100 --shard-size 10MB --threads 1 --root {}",
                root.display()
            );
            Command::new("bash")
                .arg("-c")
                .arg(&script)
                .output()
                .unwrap()
        }
    };
    assert!(
        !out.status.success(),
        "the build must fail on the full disk"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No space left")
            || err.contains("os error 28")
            || err.contains("File too large"),
        "{err}"
    );
    assert!(
        err.contains(root.to_str().unwrap()),
        "the error names the path: {err}"
    );
    assert_eq!(
        snapshot(&published),
        before,
        "the published cache is untouched"
    );
    let names: Vec<String> = std::fs::read_dir(published.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".lock") || n.contains("_tmp_") || published.ends_with(n)),
        "nothing half-written is published: {names:?}"
    );
    if let Some(fs) = &fs {
        // Space is back: the build continues from the shards it had committed.
        assert!(fs.resize("20m"));
        let ok = demo_cmd(&root, "1500").output().unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
        assert_eq!(j["rows"], 1500);
        assert!(j["resumed_rows"].as_u64().unwrap() > 0, "{j}");
        let dir = PathBuf::from(j["dir"].as_str().unwrap());
        assert!(shardset::verify_checksums(&dir).unwrap().is_empty());
    }
}

#[test]
fn permission_denied_on_the_cache_root_is_an_io_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ro");
    std::fs::create_dir(&root).unwrap();
    // Root ignores mode bits; the immutable attribute stops it too.
    let immutable = Command::new("chattr")
        .arg("+i")
        .arg(&root)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !immutable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let probe = std::fs::write(root.join("probe"), b"x");
    assert!(
        probe.is_err(),
        "cannot make a directory read-only here: as root this needs chattr \
         (e2fsprogs; `./dev test` installs it) on a filesystem with attributes \
         (chattr +i {} succeeded: {immutable})",
        root.display()
    );
    let e = write_arrow_cache(
        f2_rows(10),
        &features_f2(),
        &root.join("c"),
        &ArrowWriteOptions::default(),
    )
    .unwrap_err();
    if immutable {
        let _ = Command::new("chattr").arg("-i").arg(&root).status();
    }
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(e.to_string().contains(root.to_str().unwrap()), "{e}");
}
