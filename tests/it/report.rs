//! `shardset report` as a user runs it: the page counts what it says it
//! counts (each histogram's bars add up to its rows, the grid shows the
//! images asked for, captioned with their labels), and a bad option, a
//! missing cache or a damaged one is an error that leaves no file behind.
//! (The page in a real browser: python/tests/test_report.py.)

use std::path::Path;

use regex::Regex;

use crate::cli::{fails, ok};
use crate::common::*;

/// (rows counted, sum of the bars) of every histogram of `html`.
fn histograms(html: &str) -> Vec<(String, u64, u64)> {
    let block =
        Regex::new(r#"<div class="histogram" data-column="([^"]*)" data-rows="(\d+)">(.*?)</div>"#)
            .unwrap();
    let bar = Regex::new(r#"data-count="(\d+)""#).unwrap();
    block
        .captures_iter(html)
        .map(|c| {
            let sum = bar
                .captures_iter(&c[3])
                .map(|b| b[1].parse::<u64>().unwrap())
                .sum();
            (c[1].to_string(), c[2].parse().unwrap(), sum)
        })
        .collect()
}

#[test]
fn a_report_counts_every_row_and_captions_its_sample() {
    let root = tempfile::tempdir().unwrap();
    let (_g, cache) = golden_copy("arrow_multi_shard");
    let out = root.path().join("r.html");
    let said = ok(
        root.path(),
        &[
            "report",
            cache.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--images",
            "10",
        ],
    );
    assert!(said.contains("statistics of 40 rows, 10 images"), "{said}");
    let html = std::fs::read_to_string(&out).unwrap();
    let charts = histograms(&html);
    let names: Vec<&str> = charts.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["x", "f", "name", "flag", "label", "img", "seq"]);
    for (column, rows, sum) in &charts {
        assert_eq!(rows, sum, "column {column}");
    }
    // `name` has 6 nulls among the 40 rows, the others none.
    assert!(charts
        .iter()
        .all(|(c, r, _)| *r == if c == "name" { 34 } else { 40 }));
    // The reference cache's labels have no names: captions say the id.
    let fig = Regex::new(r#"<figure class="sample" data-row="(\d+)"><img src="data:image/jpeg;base64,[^"]+"[^>]*><figcaption>id (\d)</figcaption>"#).unwrap();
    let shown: Vec<(u64, i64)> = fig
        .captures_iter(&html)
        .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()))
        .collect();
    assert_eq!(shown.len(), 10);
    let ds = shardset::open_cache(&cache).unwrap();
    for (row, label) in shown {
        let got = ds.backend.get(row as i64).unwrap();
        assert_eq!(
            got.get("label").and_then(|v| v.as_i64()),
            Some(label),
            "row {row}"
        );
    }
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
}

fn nothing_but(dir: &Path, names: &[&str]) {
    let mut got: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    got.sort();
    assert_eq!(got, names, "files left in {}", dir.display());
}

#[test]
fn bad_options_and_caches_are_errors_that_leave_no_file() {
    let root = tempfile::tempdir().unwrap();
    let outdir = root.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    let out = outdir.join("r.html");
    let o = out.to_str().unwrap();
    let (_g, cache) = golden_copy("arrow_multi_shard");
    let c = cache.to_str().unwrap();
    let e = fails(
        root.path(),
        &["report", c, "-o", o, "--sample-rows", "0"],
        1,
    );
    assert!(
        e.contains("sample_rows 0 is out of range: use 1 to 10,000,000"),
        "{e}"
    );
    let e = fails(
        root.path(),
        &["report", c, "-o", o, "--trusted-root", "/no/such/dir"],
        1,
    );
    assert!(e.contains("/no/such/dir"), "{e}");
    let missing = root.path().join("missing");
    let e = fails(
        root.path(),
        &["report", missing.to_str().unwrap(), "-o", o],
        1,
    );
    assert!(e.contains(missing.to_str().unwrap()), "{e}");
    // A shard cut short: the error names it, and no report is written.
    let shard = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "arrow"))
        .unwrap();
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let e = fails(root.path(), &["report", c, "-o", o], 1);
    assert!(
        e.contains(shard.file_name().unwrap().to_str().unwrap()),
        "{e}"
    );
    nothing_but(&outdir, &[]);
    // An existing report is replaced whole, never left half written.
    std::fs::write(&out, "old").unwrap();
    let (_g2, good) = golden_copy("arrow_single_zstd");
    ok(root.path(), &["report", good.to_str().unwrap(), "-o", o]);
    nothing_but(&outdir, &["r.html"]);
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .ends_with("</html>\n"));
}
