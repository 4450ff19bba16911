//! The `shardset` command line: a thin layer over the library. Each command
//! lives in its own module; they share the helpers of `fmt`.

mod build;
mod demo;
mod edit;
mod fmt;
mod inspect;
mod manage;
mod progress;
mod rows;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::fmt::{CliError, CliResult};

#[derive(Parser)]
#[command(
    name = "shardset",
    version,
    about = "Build, inspect and read sharded dataset caches"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a small synthetic image + label dataset, reopen it and print a summary.
    Demo {
        /// Cache root (default: $STABLE_DATASETS_CACHE_DIR, else a fresh temp dir removed afterwards).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Number of training examples (the test split gets a fifth).
        #[arg(long, default_value_t = 5000)]
        rows: usize,
        /// Shard byte budget, e.g. 256KB, 64MB. The demo's 5,000 small images
        /// come to about 6 MB, so it uses 1MB rather than the library's
        /// 256 MiB default, to show several shards and shard-aware shuffling.
        #[arg(long, default_value = "1MB")]
        shard_size: String,
        /// IPC compression.
        #[arg(long, value_enum, default_value_t = shardset::Compression::None)]
        compression: shardset::Compression,
        /// Encode threads (0 = one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Examples per record batch.
        #[arg(long, default_value_t = 1000)]
        batch_size: usize,
        /// Build even if the cache exists.
        #[arg(long)]
        rebuild: bool,
        /// Print one JSON line instead of the summary.
        #[arg(long)]
        json: bool,
        /// arrow (Arrow IPC shards) or lance (a Lance dataset).
        #[arg(long, value_enum, default_value_t = shardset::Layout::Arrow)]
        format: shardset::Layout,
        /// lance: rows per data file, each committed on its own (default 1,048,576).
        #[arg(long)]
        max_rows_per_file: Option<usize>,
    },
    /// Build a cache from an image folder, a JSON lines file or a CSV file.
    Build {
        #[command(subcommand)]
        source: build::BuildSource,
    },
    /// What a cache (or every cache under a root) holds and costs: layout,
    /// rows, shards, bytes per column on disk and in memory, features, checksums.
    Inspect {
        /// A cache directory, or a root holding caches.
        path: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Verify the cache as `shardset verify` does (reads every byte); exit 1 on damage.
        #[arg(long)]
        verify: bool,
    },
    /// Print rows as JSON lines (bytes, images and arrays summarised unless --full).
    Cat {
        /// The cache directory.
        path: PathBuf,
        /// Rows: A..B, A.., ..B or N; negative values count from the end (default 0..10).
        #[arg(long, allow_hyphen_values = true)]
        rows: Option<String>,
        /// Only these columns, comma-separated.
        #[arg(long)]
        columns: Option<String>,
        /// Print bytes and images as base64 and arrays as nested lists.
        #[arg(long)]
        full: bool,
        /// Read this version of an edited cache (`shardset log` lists them).
        #[arg(long)]
        version: Option<u64>,
        /// Check every row against its per-record checksum (caches built
        /// with --record-checksums); a changed row is an error naming it.
        #[arg(long)]
        verify_on_read: bool,
        /// Load the cache into memory first; refused, naming both sizes,
        /// when it needs more than half the memory available.
        #[arg(long)]
        in_memory: bool,
    },
    /// Write the images of one row as PNG files.
    Export {
        /// The cache directory.
        path: PathBuf,
        /// The row (negative counts from the end).
        #[arg(long, allow_hyphen_values = true)]
        row: i64,
        /// Directory to write into (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Video: frames per window (a lance-video-frames row is the window
        /// starting at that frame position; a path/bytes video gives this
        /// many uniformly sampled frames).
        #[arg(long, default_value_t = 8)]
        window: u32,
        /// Video: frames skipped between two frames of a window.
        #[arg(long, default_value_t = 0)]
        frame_skip: u32,
        /// Print the files written as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify a cache (or every cache under a root): its structure always
    /// (metadata, every shard or fragment opens and decodes, row counts,
    /// schema), its data bytes where checksums are recorded; say which were
    /// checked. Exit 0 when no damage is found, 1 naming each damaged file.
    Verify {
        /// A cache directory, or a root holding caches.
        path: PathBuf,
        /// Record the checksums of every data file of a cache that records
        /// none (in `_checksums.json`; nothing the reference reads changes).
        #[arg(long)]
        stamp: bool,
    },
    /// Edit an arrow-shards or lance-rows cache and commit the edits as a new version:
    /// cells set (rows numbered as in the current version), then rows
    /// deleted (numbered as in the current version), then rows appended.
    /// Only the shards holding changed rows are written anew; the rest are
    /// shared with the previous version, which stays openable.
    Edit {
        /// The cache directory.
        path: PathBuf,
        /// JSON lines of cells to set: {"row": N, "<column>": value, ...}.
        #[arg(long)]
        set: Option<PathBuf>,
        /// Rows to append: JSON lines of {"<column>": value, ...}, or a CSV file with a header.
        #[arg(long)]
        append: Option<PathBuf>,
        /// Rows to delete: N, A..B (end excluded), comma-separated.
        #[arg(long)]
        delete: Option<String>,
        /// A message kept with the version.
        #[arg(long, short)]
        message: Option<String>,
        /// Only say what a commit would write.
        #[arg(long)]
        dry_run: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List the versions of a cache: id, rows, shards, what changed.
    Log {
        /// The cache directory.
        path: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Say why a cache would be rebuilt (damage, changed sources); exit 1 if it would.
    Why {
        /// The cache directory.
        path: PathBuf,
    },
    /// List the caches under a root: name, layout, rows, size on disk, age.
    Ls {
        /// The root (default: $STABLE_DATASETS_CACHE_DIR, else ~/.stable-datasets).
        root: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Download a file as a builder's asset is downloaded (resumable,
    /// retried, fallbacks in order, checksum checked, once across
    /// processes) and print its local path.
    Download {
        /// The primary URL (it names the local file).
        url: String,
        /// A URL tried when the ones before it fail (repeatable, in order).
        #[arg(long = "fallback")]
        fallbacks: Vec<String>,
        /// `sha256:<hex>` or `md5:<hex>`.
        #[arg(long)]
        checksum: Option<String>,
        /// The local file name's stem and suffix (default: the URL's).
        #[arg(long)]
        filename: Option<String>,
        /// The folder (default: the cache root's `downloads/`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Attempts per URL after the first, on transient failures.
        #[arg(long, default_value_t = 3)]
        retries: u32,
        /// No progress display.
        #[arg(long)]
        quiet: bool,
    },
    /// Remove temp dirs of builds that did not finish and replaced caches
    /// left behind, except those whose build lock a live build holds.
    Gc {
        /// The root (default: $STABLE_DATASETS_CACHE_DIR, else ~/.stable-datasets).
        root: Option<PathBuf>,
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Only left-overs at least this old: 30m, 1h, 2d, 1w.
        #[arg(long)]
        older_than: Option<String>,
        /// Also keep only the newest N versions of each edited cache,
        /// removing older versions and the shard files only they name.
        #[arg(long)]
        keep_versions: Option<usize>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

fn why(path: PathBuf) -> CliResult {
    let why = shardset::builder::why_cache_report(&path)?;
    let reasons = why.reasons;
    if reasons.is_empty() {
        println!(
            "up to date: {}; {}",
            if why.sources_recorded {
                "no recorded source changed"
            } else {
                "no sources recorded"
            },
            why.checked
        );
        return Ok(());
    }
    for r in &reasons {
        println!("{r}");
    }
    Err(CliError::Failed(format!(
        "{} reason(s) to rebuild",
        reasons.len()
    )))
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`shardset ls |
/// head -1`) would be an error in every `println!`; like other Unix tools,
/// end quietly instead.
fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists;
    // SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Demo {
            root,
            rows,
            shard_size,
            compression,
            threads,
            batch_size,
            rebuild,
            json,
            format,
            max_rows_per_file,
        } => demo::demo(demo::DemoArgs {
            format,
            max_rows_per_file,
            root,
            rows,
            batch_size,
            shard_size,
            compression,
            threads,
            rebuild,
            json,
        })
        .map_err(CliError::Failed),
        Cmd::Build { source } => build::run(source),
        Cmd::Inspect { path, json, verify } => inspect::inspect(path, json, verify),
        Cmd::Cat {
            path,
            rows,
            columns,
            full,
            version,
            verify_on_read,
            in_memory,
        } => rows::cat(
            path,
            rows,
            columns,
            full,
            rows::ReadMode {
                version,
                verify_on_read,
                in_memory,
            },
        ),
        Cmd::Export {
            path,
            row,
            out,
            window,
            frame_skip,
            json,
        } => rows::export(path, row, out, (window, frame_skip), json),
        Cmd::Verify { path, stamp } => inspect::verify(path, stamp),
        Cmd::Why { path } => why(path),
        Cmd::Edit {
            path,
            set,
            append,
            delete,
            message,
            dry_run,
            json,
        } => edit::edit(edit::EditArgs {
            path,
            set,
            append,
            delete,
            message,
            dry_run,
            json,
        }),
        Cmd::Log { path, json } => edit::log(path, json),
        Cmd::Ls { root, json } => manage::ls(root, json),
        Cmd::Download {
            url,
            fallbacks,
            checksum,
            filename,
            out,
            retries,
            quiet,
        } => manage::download(
            shardset::download::DownloadInfo {
                url,
                fallbacks,
                checksum,
                filename,
            },
            out,
            retries,
            !quiet,
        ),
        Cmd::Gc {
            root,
            dry_run,
            older_than,
            keep_versions,
            json,
        } => manage::gc(root, dry_run, older_than, keep_versions, json),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                CliError::Usage(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
