//! Downloads as builders meet them: one file for two processes, identical
//! assets once and in order, stale partial files collected, a `load` that
//! downloads, builds and opens warm without a request, the example MNIST
//! builder from a local mirror (the server is `download.rs`').

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use shardset::builder::{load, load_with_report, why, DatasetBuilder};
use shardset::download::{download_all, DownloadInfo};
use shardset::{Error, LoadOptions};

use crate::common::*;

use crate::download::*;

/// Two processes asking for the same file at once: one downloads it, the
/// other waits on its lock and finds it done (one request in all).
#[test]
fn two_processes_download_the_same_file_once() {
    let srv = TestServer::start();
    let body = content(1 << 20, 5);
    srv.put(
        "shared.bin",
        body.clone(),
        Fault::Slow(Duration::from_millis(20)),
    );
    let tmp = tempfile::tempdir().unwrap();
    let spawn = || {
        shardset_cli()
            .arg("download")
            .arg(srv.url("shared.bin"))
            .arg("--checksum")
            .arg(sha(&body))
            .arg("--out")
            .arg(tmp.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for o in [&a, &b] {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(a.stdout, b.stdout, "both print the same path");
    let p = PathBuf::from(String::from_utf8(a.stdout).unwrap().trim());
    assert_eq!(std::fs::read(&p).unwrap(), body);
    assert_eq!(srv.count("shared.bin"), 1, "{:?}", srv.requests());
}

/// Identical assets are downloaded once, in parallel with the others, and
/// returned in input order; `file://` URLs are copied.
#[test]
fn identical_assets_are_downloaded_once_and_returned_in_order() {
    let srv = TestServer::start();
    let (a, b) = (content(3000, 6), content(4000, 7));
    srv.put("a.bin", a.clone(), Fault::None);
    srv.put("b.bin", b.clone(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local.txt");
    std::fs::write(&local, b"local bytes").unwrap();
    let infos = vec![
        DownloadInfo::new(srv.url("b.bin")),
        DownloadInfo::new(srv.url("a.bin")),
        DownloadInfo::new(srv.url("b.bin")),
        DownloadInfo::new(format!("file://{}", local.display())),
    ];
    let out = tmp.path().join("dl");
    let paths = download_all(&infos, &out, &fast()).unwrap();
    assert_eq!(paths.len(), 4);
    assert_eq!(paths[0], paths[2]);
    assert_eq!(std::fs::read(&paths[0]).unwrap(), b);
    assert_eq!(std::fs::read(&paths[1]).unwrap(), a);
    assert_eq!(std::fs::read(&paths[3]).unwrap(), b"local bytes");
    assert_eq!(srv.count("b.bin"), 1);
    assert_eq!(srv.count("a.bin"), 1);
}

/// `gc` removes partial downloads old enough and not being resumed.
#[test]
fn gc_removes_stale_partial_downloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dl = tmp.path().join("downloads");
    std::fs::create_dir_all(&dl).unwrap();
    std::fs::write(dl.join("x.0123456789.bin.tmp"), vec![0; 100]).unwrap();
    std::fs::write(dl.join("done.0123456789.bin"), vec![0; 10]).unwrap();
    let out = succeeded(
        shardset_cli()
            .arg("gc")
            .arg(tmp.path())
            .args(["--dry-run", "--json"]),
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let removed = j["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{j}");
    assert_eq!(removed[0]["kind"], "partial download");
    assert!(
        dl.join("x.0123456789.bin.tmp").exists(),
        "a dry run keeps it"
    );
    // Too young for --older-than 1h: kept.
    let out =
        succeeded(
            shardset_cli()
                .arg("gc")
                .arg(tmp.path())
                .args(["--older-than", "1h", "--json"]),
        );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["removed"].as_array().unwrap().len(), 0, "{j}");
    succeeded(shardset_cli().arg("gc").arg(tmp.path()));
    assert!(!dl.join("x.0123456789.bin.tmp").exists());
    assert!(
        dl.join("done.0123456789.bin").exists(),
        "complete files stay"
    );
}

/// `load` of a builder with assets: downloads (identical assets of two
/// splits once, `val` mapped to `validation`), builds, and the second
/// load opens warm without any request; a changed checksum or URL makes
/// `why` say so and the next load rebuild; the downloads folder option
/// is used.
#[test]
fn load_downloads_builds_and_opens_warm_without_a_request() {
    let srv = TestServer::start();
    let text = "alpha\nbeta\ngamma\n";
    srv.put("lines.txt", text.as_bytes().to_vec(), Fault::None);
    let tmp = tempfile::tempdir().unwrap();
    let asset = DownloadInfo::new(srv.url("lines.txt")).with_checksum(sha(text.as_bytes()));
    let b = Lines {
        urls: vec![
            ("train".into(), asset.clone()),
            ("val".into(), asset.clone()),
        ],
    };
    assert_eq!(b.splits("default").unwrap(), vec!["train", "validation"]);
    let dl = tmp.path().join("my-downloads");
    let opts = LoadOptions::default()
        .with_cache_root(tmp.path())
        .with_download_dir(&dl)
        .with_download(fast());
    let (ds, rep) = load_with_report(&b, "train", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(ds.len(), 3);
    assert_eq!(
        ds.get(1).unwrap().get("line").and_then(|v| v.as_str()),
        Some("beta")
    );
    assert!(dl.join(asset.local_name()).is_file());
    let (ds, rep) = load_with_report(&b, "validation", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(
        ds.get(0).unwrap().get("split").and_then(|v| v.as_str()),
        Some("validation")
    );
    assert_eq!(srv.count("lines.txt"), 1, "one download for both splits");
    // Warm: no request at all.
    let n = srv.requests().len();
    let (_, rep) = load_with_report(&b, "train", &opts).unwrap();
    assert!(!rep.built);
    assert_eq!(srv.requests().len(), n);
    assert!(texts(why(&b, "train", &opts).unwrap()).is_empty());
    // A changed checksum: `why` names it, the next load rebuilds (and
    // downloads again under the same name, which is already there).
    let mut changed = b.urls.clone();
    changed[0].1 = changed[0].1.clone().with_fallback(srv.url("mirror.txt"));
    let b2 = Lines { urls: changed };
    let reasons = texts(why(&b2, "train", &opts).unwrap());
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("asset 'train' fallbacks changed"),
        "{reasons:?}"
    );
    let (_, rep) = load_with_report(&b2, "train", &opts).unwrap();
    assert!(rep.built);
    assert_eq!(texts(rep.reasons), reasons);
    let url2 = Lines {
        urls: vec![("train".into(), DownloadInfo::new(srv.url("other.txt")))],
    };
    srv.put("other.txt", b"one\ntwo\n".to_vec(), Fault::None);
    let reasons = texts(why(&url2, "train", &opts).unwrap());
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("asset 'train' url changed")),
        "{reasons:?}"
    );
    assert_eq!(load(&url2, "train", &opts).unwrap().len(), 2);
    // No assets and no splits: a typed error naming the builder.
    let none = Lines { urls: Vec::new() };
    let e = load(&none, "train", &opts).unwrap_err();
    assert!(e.to_string().contains("no assets are declared"), "{e}");
    // A failed download builds nothing.
    let bad = Lines {
        urls: vec![(
            "test".into(),
            DownloadInfo::new(srv.url("lines.txt"))
                .with_checksum(format!("md5:{}", "1".repeat(32))),
        )],
    };
    let e = load(&bad, "test", &opts).unwrap_err();
    assert!(matches!(e, Error::DownloadChecksum { .. }), "{e}");
    let dir = shardset::builder::cache_dir_for(&bad, "default", "test", &opts).unwrap();
    assert!(!dir.exists());
}

#[allow(dead_code)]
#[path = "../../examples/mnist/builder.rs"]
mod mnist_builder;

/// The example MNIST builder (real URLs and md5 in `examples/mnist`),
/// pointed at a local server holding a generated copy of the four files
/// behind a primary mirror that is down: downloads through the fallback,
/// checks the md5s, builds both splits with the pixels and labels written.
#[test]
fn the_example_mnist_builder_builds_from_a_local_mirror() {
    use md5::Digest;
    let srv = TestServer::start();
    let sizes = [("train", 20u32), ("test", 10u32)];
    let mut md5 = Vec::new();
    let mut want: HashMap<&str, (Vec<u8>, Vec<u8>)> = HashMap::new();
    for (split, file, _) in mnist_builder::FILES {
        let n = sizes.iter().find(|s| s.0 == *split).unwrap().1;
        let pixels = content(n as usize * 28 * 28, n as u64);
        let labels: Vec<u8> = (0..n).map(|i| (i * 7 % 10) as u8).collect();
        let body = if file.contains("images") {
            idx_gz(0x0803, &[n, 28, 28], &pixels)
        } else {
            idx_gz(0x0801, &[n], &labels)
        };
        md5.push(format!("{:x}", md5::Md5::digest(&body)));
        srv.put(&format!("mnist/{file}"), body, Fault::None);
        want.insert(split, (pixels, labels));
    }
    let tmp = tempfile::tempdir().unwrap();
    let down = down_url();
    let b = mnist_builder::Mnist::new(
        vec![
            down.trim_end_matches("gone.bin").to_string(),
            srv.url("mnist/"),
        ],
        md5,
    );
    let opts = LoadOptions::default()
        .with_cache_root(tmp.path())
        .with_download(fast().with_retries(0));
    for (split, n) in sizes {
        let ds = load(&b, split, &opts).unwrap();
        assert_eq!(ds.len(), n as u64);
        let (pixels, labels) = &want[split];
        for i in [0, n as usize - 1] {
            let row = ds.get(i as i64).unwrap();
            let Some(shardset::Value::Image(img)) = row.get("image") else {
                panic!("{row:?}")
            };
            assert_eq!(img.shape(), vec![28, 28]);
            assert_eq!(img.data, pixels[i * 784..(i + 1) * 784]);
            assert_eq!(row.get("label").unwrap().as_i64(), Some(labels[i] as i64));
        }
    }
    assert_eq!(srv.requests().len(), 4, "each file once");
    assert!(tmp.path().join("downloads").read_dir().unwrap().count() >= 4);
    // A split of two files: a changed checksum of the second is named.
    let mut md5b: Vec<String> = mnist_builder::FILES
        .iter()
        .map(|f| f.2.to_string())
        .collect();
    md5b[0] = b.assets("default").unwrap()[0].1.checksum.clone().unwrap()[4..].to_string();
    let b2 = mnist_builder::Mnist::new(
        vec![
            down.trim_end_matches("gone.bin").to_string(),
            srv.url("mnist/"),
        ],
        md5b,
    );
    let reasons = texts(why(&b2, "train", &opts).unwrap());
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("asset 'train[1]' checksum changed"),
        "{reasons:?}"
    );
}
