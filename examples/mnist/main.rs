//! Builds MNIST from its public mirrors (downloads checked against the
//! published md5, resumable, with a fallback mirror) and reads a few rows:
//! `cargo run --release --example mnist [CACHE_ROOT]`. The second run opens
//! the caches warm without any request.

mod builder;

use shardset::download::DownloadOptions;
use shardset::{load_with_report, LoadOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut opts =
        LoadOptions::default().with_download(DownloadOptions::default().with_parallel(4));
    if let Some(root) = std::env::args().nth(1) {
        opts = opts.with_cache_root(root);
    }
    let mnist = builder::Mnist::official();
    for split in ["train", "test"] {
        let (ds, rep) = load_with_report(&mnist, split, &opts)?;
        println!(
            "{split}: {} rows in {} ({})",
            ds.len(),
            rep.dir.display(),
            if rep.built { "built" } else { "warm" }
        );
        let row = ds.get(0)?;
        println!("  row 0: label {:?}", row.get("label"));
    }
    Ok(())
}
