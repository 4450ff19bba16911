//! `shardset report`: the HTML report of one cache (`shardset::report`).

use std::path::PathBuf;

use shardset::features::trust::TrustedRoots;
use shardset::report::{write_report, ReportOptions};

use crate::fmt::{count, human, CliResult};

/// One self-contained HTML page of a cache: summary, per-column statistics
/// and charts, a grid of sampled images with their labels, animated video
/// windows and the segments layout's compression quality. Opens offline.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// The cache directory.
    pub path: PathBuf,
    /// The HTML file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Seed of the sampled rows, images and windows.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Rows read for the statistics (all rows when the cache has fewer).
    #[arg(long, default_value_t = 20_000)]
    pub sample_rows: u64,
    /// Images in the grid of each image column.
    #[arg(long, default_value_t = 24)]
    pub images: usize,
    /// Video windows shown as animated thumbnails.
    #[arg(long, default_value_t = 4)]
    pub windows: usize,
    /// A directory whose source videos the report may read, to show a
    /// source frame beside its decoded frame (repeatable).
    #[arg(long = "trusted-root")]
    pub trusted_roots: Vec<PathBuf>,
}

/// Runs `shardset report`.
pub fn report(args: ReportArgs) -> CliResult {
    let opts = ReportOptions::default()
        .with_seed(args.seed)
        .try_with_sample_rows(args.sample_rows)?
        .try_with_images(args.images)?
        .try_with_windows(args.windows)?
        .with_trusted_roots(
            TrustedRoots::from_env()?.merged(&TrustedRoots::try_new(&args.trusted_roots)?),
        );
    let s = write_report(&args.path, &args.output, &opts)?;
    println!(
        "wrote {} ({}): statistics of {} rows, {} images, {} windows",
        args.output.display(),
        human(s.bytes),
        count(s.rows_read),
        s.images,
        s.windows
    );
    Ok(())
}
