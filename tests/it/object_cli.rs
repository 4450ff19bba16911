//! The command line on `s3://` URIs: build, read, verify, list and collect
//! garbage, as a user runs it against the server of `object_storage.rs`.

use std::path::Path;
use std::process::Stdio;

use shardset::open_cache;

use crate::common::{shardset_cli, succeeded};

use crate::object_storage::*;

#[test]
fn the_cli_builds_reads_verifies_lists_and_collects_on_s3_uris() {
    server();
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("d.jsonl");
    let text: String = (0..400)
        .map(|i| format!("{{\"x\": {i}, \"s\": \"{}\"}}\n", "v".repeat(i % 50)))
        .collect();
    std::fs::write(&file, text).unwrap();
    let dc = t.path().join("dc");
    let out = uri("cli");
    let build = |extra: &[&str]| {
        let mut c = cli(&dc);
        c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
            .arg(&out)
            .args(["--shard-size", "4KB", "--json"])
            .args(extra);
        json_of(&succeeded(&mut c))
    };
    let s = build(&[]);
    assert_eq!(s["caches"][0]["rows"], 400);
    assert_eq!(s["caches"][0]["built"], true);
    let cache = out.join("train");
    // Warm: the committed cache is reused, nothing is built.
    assert_eq!(build(&[])["caches"][0]["built"], false);

    // The same rows as a local build of the same file.
    let local_out = t.path().join("local");
    let mut c = shardset_cli();
    c.args(["build", "jsonl", file.to_str().unwrap(), "--out"])
        .arg(&local_out)
        .args(["--shard-size", "4KB", "--json"]);
    succeeded(&mut c);
    let cat = |path: &Path| {
        let mut c = cli(&dc);
        c.arg("cat").arg(path).args(["--rows", "0..", "--full"]);
        succeeded(&mut c).stdout
    };
    let remote_rows = cat(&cache);
    assert_eq!(remote_rows, cat(&local_out.join("train")));
    assert_eq!(remote_rows.iter().filter(|&&b| b == b'\n').count(), 400);

    let mut c = cli(&dc);
    c.arg("inspect").arg(&cache).arg("--json");
    let j = json_of(&succeeded(&mut c));
    assert_eq!(j["layout"], "arrow-shards", "{j}");
    assert_eq!(j["num_rows"], 400, "{j}");
    let mut c = cli(&dc);
    c.arg("verify").arg(&cache);
    succeeded(&mut c);
    let mut c = cli(&dc);
    c.arg("ls").arg(&out).arg("--json");
    let j = json_of(&succeeded(&mut c));
    assert_eq!(j["caches"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["caches"][0]["rows"], 400, "{j}");

    // A rebuild commits a new build; gc then removes the replaced one.
    let s = build(&["--rebuild"]);
    assert_eq!(s["caches"][0]["built"], true);
    let mut c = cli(&dc);
    c.arg("gc").arg(&out).arg("--json");
    let j = json_of(&succeeded(&mut c));
    let removed = j["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{j}");
    assert!(
        removed[0]["path"].as_str().unwrap().contains("/_builds/"),
        "{j}"
    );
    assert_eq!(cat(&cache), remote_rows);

    // Two processes share one small disk cache: both read right, and the
    // budget holds.
    let small = t.path().join("small-dc");
    let spawn = || {
        let mut c = cli(&small);
        c.env("SHARDSET_OBJECT_CACHE_BYTES", "16384")
            .arg("cat")
            .arg(&cache)
            .args(["--rows", "0..", "--full"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let (p1, p2) = (spawn(), spawn());
    for p in [p1, p2] {
        let o = p.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.stdout, remote_rows);
    }
    // Each process looks again after writing a sixteenth of the budget.
    let disk = shardset::storage::disk_cache::DiskCache::new(&small, 16384);
    assert!(
        disk.disk_bytes() <= 16384 + 16384 / 16,
        "{} bytes",
        disk.disk_bytes()
    );

    // A Lance build to object storage: built locally, published, read back.
    let lance_out = uri("cli-lance");
    let mut c = cli(&dc);
    c.args([
        "build",
        "jsonl",
        file.to_str().unwrap(),
        "--format",
        "lance",
        "--out",
    ])
    .arg(&lance_out)
    .arg("--json");
    let s = json_of(&succeeded(&mut c));
    assert_eq!(s["caches"][0]["rows"], 400, "{s}");
    assert_eq!(s["caches"][0]["layout"], "lance-rows", "{s}");
    assert_eq!(cat(&lance_out.join("train")), remote_rows);

    // Edits in place are refused, naming the cache.
    let e = open_cache(&cache).unwrap().edit().unwrap_err();
    assert!(e.to_string().contains("not edited in place"), "{e}");

    // A bad disk cache budget is an error naming the variable.
    let mut c = cli(&dc);
    c.env("SHARDSET_OBJECT_CACHE_BYTES", "lots")
        .arg("cat")
        .arg(&cache);
    let o = c.output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("SHARDSET_OBJECT_CACHE_BYTES"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A bad location is a typed error naming it, not a panic.
    let mut c = cli(&dc);
    c.arg("cat").arg(uri("no/such/cache"));
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("s3://shardset-test/no/such/cache"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
