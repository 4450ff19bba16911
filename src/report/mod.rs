//! `shardset report`: one self-contained HTML file that answers a dataset
//! author's first question after a build, "does it look right?" — the
//! cache's summary, per-column statistics with charts, a grid of sampled
//! images with their labels and, for video caches, animated windows and
//! what the segments layout's compression did to the frames.
//!
//! Bounded whatever the cache's size: statistics come from at most
//! `sample_rows` rows (all of them when the cache has no more), drawn with
//! a seed so two reports of one cache agree; images and windows are a few
//! dozen. Large cells are summarised (lengths, sizes, containers), never
//! embedded; pictures are small thumbnails. `text` spells the figures,
//! `columns` computes statistics, `svg` draws charts, `media` makes the
//! pictures, `html` assembles the page, `video` the video sections.

pub mod columns;
mod html;
mod media;
pub mod svg;
pub mod text;
#[cfg(feature = "video")]
mod video;

use std::path::Path;

use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::features::limits::DecodeLimits;
use crate::features::trust::TrustedRoots;
use crate::features::Feature;
use crate::layouts::open::{open_cache_with, Cache, OpenOptions};
use crate::util::SplitMix64;

use columns::{ColumnReport, ColumnStats, Summary};
use html::Page;
use text::{count, human, number};

/// What a report reads and shows; each bound checked when set.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    seed: u64,
    sample_rows: u64,
    images: usize,
    windows: usize,
    thumbnail: u32,
    trusted_roots: TrustedRoots,
    limits: DecodeLimits,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            seed: 0,
            sample_rows: 20_000,
            images: 24,
            windows: 4,
            thumbnail: 112,
            trusted_roots: TrustedRoots::default(),
            limits: DecodeLimits::default(),
        }
    }
}

fn out_of(what: &str, v: impl std::fmt::Display, range: &str) -> Error {
    Error::InvalidArgument(format!("report {what} {v} is out of range: use {range}"))
}

impl ReportOptions {
    /// The seed of every sample the report draws (rows, images, windows).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Rows read for the statistics (default 20,000; all rows when fewer).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside 1..=10,000,000.
    pub fn try_with_sample_rows(mut self, n: u64) -> Result<Self> {
        if !(1..=10_000_000).contains(&n) {
            return Err(out_of("sample_rows", n, "1 to 10,000,000"));
        }
        self.sample_rows = n;
        Ok(self)
    }

    /// Images in the sample grid of each image column (default 24).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] above 1,000.
    pub fn try_with_images(mut self, n: usize) -> Result<Self> {
        if n > 1000 {
            return Err(out_of("images", n, "0 to 1,000"));
        }
        self.images = n;
        Ok(self)
    }

    /// Windows shown as animated thumbnails for a video cache (default 4).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] above 64.
    pub fn try_with_windows(mut self, n: usize) -> Result<Self> {
        if n > 64 {
            return Err(out_of("windows", n, "0 to 64"));
        }
        self.windows = n;
        Ok(self)
    }

    /// Side of a thumbnail in pixels (default 112).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside 16..=512.
    pub fn try_with_thumbnail(mut self, side: u32) -> Result<Self> {
        if !(16..=512).contains(&side) {
            return Err(out_of("thumbnail", side, "16 to 512 pixels"));
        }
        self.thumbnail = side;
        Ok(self)
    }

    /// Where a segments cache's source videos may be read from, to show a
    /// source frame beside its decoded frame (none by default: a cache's
    /// paths are not followed outside it unless trusted).
    pub fn with_trusted_roots(mut self, roots: TrustedRoots) -> Self {
        self.trusted_roots = roots;
        self
    }

    /// The decode limits of the thumbnails (the reader's defaults).
    pub fn with_decode_limits(mut self, limits: DecodeLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// What a written report holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSummary {
    /// Bytes of the HTML file.
    pub bytes: u64,
    /// Rows the statistics were computed from.
    pub rows_read: u64,
    /// Images in the sample grids.
    pub images: usize,
    /// Animated windows.
    pub windows: usize,
}

/// Writes the report of the cache at `dir` to `out` (through a temporary
/// file renamed into place, so a failed report leaves no half file).
///
/// # Errors
/// When the cache does not open or a read fails; [`Error::Io`] naming
/// `out` when it cannot be written.
pub fn write_report(dir: &Path, out: &Path, opts: &ReportOptions) -> Result<ReportSummary> {
    let open = OpenOptions::default()
        .with_trusted_roots(opts.trusted_roots.clone())
        .with_decode_limits(opts.limits);
    let cache = open_cache_with(dir, &open)?;
    let (page, mut summary) = report_html(&cache, opts)?;
    let tmp = out.with_extension(format!("tmp-{}", crate::util::random_suffix()));
    std::fs::write(&tmp, &page).map_err(|e| Error::io("write the report", &tmp, e))?;
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("move the report into place", out, e)
    })?;
    summary.bytes = page.len() as u64;
    Ok(summary)
}

/// `n` distinct positions below `len`, sorted, drawn with `seed` (all of
/// them when `len <= n`).
pub fn sample_positions(len: u64, n: u64, seed: u64) -> Vec<u64> {
    if len <= n {
        return (0..len).collect();
    }
    // Floyd's algorithm: n draws, no permutation of `len`.
    let mut rng = SplitMix64::new(seed);
    let mut chosen = std::collections::HashSet::with_capacity(n as usize);
    for j in len - n..len {
        let t = rng.below(j + 1);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let mut v: Vec<u64> = chosen.into_iter().collect();
    v.sort_unstable();
    v
}

/// The report of an opened cache, as HTML, with what it holds (`bytes` 0
/// until written).
///
/// # Errors
/// When a read of the cache fails.
pub fn report_html(cache: &Cache, opts: &ReportOptions) -> Result<(String, ReportSummary)> {
    let name = cache.dir.file_name().map_or_else(
        || cache.dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut page = Page::new(
        &name,
        &format!(
            "{} · report by shardset {} · seed {}",
            cache.dir.display(),
            env!("CARGO_PKG_VERSION"),
            opts.seed
        ),
    );
    let mut summary = ReportSummary {
        bytes: 0,
        rows_read: 0,
        images: 0,
        windows: 0,
    };
    let info = crate::layouts::inspect::report_of(cache, false)?;
    summary_section(&mut page, cache, &info);
    if is_video(cache) {
        #[cfg(feature = "video")]
        video::sections(&mut page, cache, opts, &mut summary)?;
    } else {
        let positions = sample_positions(cache.len(), opts.sample_rows, opts.seed);
        let stats = column_stats(cache, &positions)?;
        summary.rows_read = positions.len() as u64;
        columns_section(&mut page, cache, &info, &stats, positions.len() as u64);
        summary.images = images_section(&mut page, cache, opts)?;
    }
    Ok((page.finish(&format!("{name}: shardset report")), summary))
}

fn is_video(cache: &Cache) -> bool {
    matches!(
        cache.metadata,
        crate::cache::metadata::CacheMetadata::VideoFrames(_)
    )
}

fn summary_section(page: &mut Page, cache: &Cache, info: &J) {
    page.heading(2, "Summary", "summary");
    let s = |k: &str| match &info[k] {
        J::Null => "none".to_string(),
        J::String(s) => s.clone(),
        v => v.to_string(),
    };
    let n = |k: &str| info[k].as_u64().unwrap_or(0);
    let sums = &info["checksums"];
    let yes = |k: &str| {
        if sums[k] == J::Bool(true) {
            "yes"
        } else {
            "no"
        }
    };
    let mut rows = vec![
        ("layout", s("layout")),
        ("format", s("format")),
        ("rows", count(n("num_rows"))),
        ("shards", count(n("num_shards"))),
        ("bytes on disk", human(n("bytes_on_disk"))),
        ("bytes in memory", human(n("bytes_in_memory"))),
        ("compression", s("compression")),
        ("version", s("version")),
        ("features from", s("features_source")),
        (
            "writer",
            match &info["writer"] {
                J::Object(w) => format!(
                    "{} {}",
                    w.get("name").and_then(J::as_str).unwrap_or("?"),
                    w.get("version").and_then(J::as_str).unwrap_or("")
                ),
                _ => s("writer"),
            },
        ),
        (
            "checksums",
            format!(
                "shards {}, metadata {}, rows {}, stamped file {}",
                yes("shard_xxh64"),
                yes("metadata_xxh64"),
                yes("row_xxh64"),
                yes("stamped")
            ),
        ),
    ];
    let storage = crate::storage::storage_for(&cache.dir);
    if let Ok(versions) = crate::cache::versions::list_versions(storage.as_ref(), &cache.dir) {
        if !versions.is_empty() {
            let ids: Vec<String> = versions.iter().map(|v| v.id.to_string()).collect();
            rows.push(("versions kept", ids.join(", ")));
        }
    }
    page.pairs(&rows);
}

fn column_stats(cache: &Cache, positions: &[u64]) -> Result<Vec<ColumnReport>> {
    let mut stats = ColumnStats::new(cache.features());
    for chunk in positions.chunks(1024) {
        let idx: Vec<i64> = chunk.iter().map(|&p| p as i64).collect();
        stats.add(&cache.backend.take(&idx)?)?;
    }
    Ok(stats.finish())
}

fn columns_section(page: &mut Page, cache: &Cache, info: &J, stats: &[ColumnReport], read: u64) {
    page.heading(2, "Columns", "columns");
    let of = if read == cache.len() {
        format!("all {} rows", count(read))
    } else {
        format!(
            "a seeded sample of {} of {} rows",
            count(read),
            count(cache.len())
        )
    };
    page.note(&format!(
        "Sizes for the whole cache (on disk {}, in memory {}); values from {of}.",
        info["column_bytes_on_disk"].as_str().unwrap_or(""),
        info["column_bytes_in_memory"].as_str().unwrap_or("")
    ));
    let bytes = |c: &str, k: &str| {
        info["columns"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == c))
            .and_then(|x| x[k].as_u64())
            .map_or_else(|| "-".into(), human)
    };
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.feature.clone(),
                bytes(&c.name, "bytes_on_disk"),
                bytes(&c.name, "bytes_in_memory"),
                count(c.nulls),
            ]
        })
        .collect();
    page.table(
        "columns",
        &["column", "feature", "on disk", "in memory", "nulls"],
        &rows,
    );
    for c in stats {
        column_detail(page, c);
    }
}

fn column_detail(page: &mut Page, c: &ColumnReport) {
    let present = c.rows - c.nulls;
    let chart = |page: &mut Page, bars: &[svg::Bar], labelled: bool| {
        page.raw(&format!(
            "<div class=\"histogram\" data-column=\"{}\" data-rows=\"{present}\">{}</div>",
            text::escape(&c.name),
            svg::bar_chart(bars, labelled)
        ));
    };
    match &c.summary {
        Summary::Numbers {
            min,
            max,
            mean,
            bars,
        } => {
            page.heading(3, &c.name, &format!("col-{}", c.name));
            page.note(&spread(present, [*min, *max, *mean], "", c.nulls));
            chart(page, bars, false);
        }
        Summary::Classes { bars } => {
            page.heading(
                3,
                &format!("{}: class balance", c.name),
                &format!("col-{}", c.name),
            );
            let top = bars.iter().max_by_key(|b| b.count);
            page.note(&format!(
                "{} classes; {} labelled rows; largest {}; {} null.",
                bars.len(),
                count(present),
                top.map_or_else(String::new, |b| format!("{} ({})", b.label, count(b.count))),
                count(c.nulls)
            ));
            chart(page, bars, true);
        }
        Summary::Lengths {
            unit,
            min,
            max,
            mean,
            bars,
        } => {
            page.heading(
                3,
                &format!("{}: lengths", c.name),
                &format!("col-{}", c.name),
            );
            page.note(&spread(present, [*min, *max, *mean], unit, c.nulls));
            chart(page, bars, false);
        }
        Summary::Images {
            containers,
            width,
            height,
            bars,
        } => {
            page.heading(
                3,
                &format!("{}: encoded images", c.name),
                &format!("col-{}", c.name),
            );
            let kinds: Vec<String> = containers
                .iter()
                .map(|b| format!("{} {}", b.label, count(b.count)))
                .collect();
            page.note(&format!(
                "{} images ({}), {} to {} pixels wide, {} to {} high; encoded sizes below; {} null.",
                count(present),
                kinds.join(", "),
                width.0,
                width.1,
                height.0,
                height.1,
                count(c.nulls)
            ));
            chart(page, bars, false);
        }
        Summary::Opaque => {}
    }
}

/// "`n` values from `min` to `max` `unit`, mean `mean`; `nulls` null."
fn spread(n: u64, [min, max, mean]: [f64; 3], unit: &str, nulls: u64) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    format!(
        "{} values from {} to {}{unit}, mean {}; {} null.",
        count(n),
        number(min),
        number(max),
        number(mean),
        count(nulls)
    )
}

/// The label of `row` for a caption: the names of its class labels, else
/// its strings, else its position.
fn caption(cache: &Cache, batch: &arrow_array::RecordBatch, i: usize, row: u64) -> String {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let mut parts = Vec::new();
    for (name, f) in cache.features().iter() {
        let Some(col) = batch.column_by_name(name) else {
            continue;
        };
        if col.is_null(i) {
            continue;
        }
        if let (Feature::ClassLabel(c), Some(ids)) =
            (f, col.as_primitive_opt::<arrow_array::types::Int64Type>())
        {
            let id = ids.value(i);
            let label = usize::try_from(id)
                .ok()
                .and_then(|k| c.names().get(k))
                .map_or_else(|| format!("id {id}"), |n| n.to_string());
            parts.push(label);
        }
    }
    if parts.is_empty() {
        format!("row {row}")
    } else {
        parts.join(" · ")
    }
}

fn images_section(page: &mut Page, cache: &Cache, opts: &ReportOptions) -> Result<usize> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let image_cols: Vec<String> = cache
        .features()
        .iter()
        .filter(|(_, f)| matches!(f, Feature::Image(_)))
        .map(|(n, _)| n.to_string())
        .collect();
    if image_cols.is_empty() || opts.images == 0 || cache.is_empty() {
        return Ok(0);
    }
    let positions = sample_positions(cache.len(), opts.images as u64, opts.seed ^ 0x1a6e);
    let idx: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
    let batch = cache.backend.take(&idx)?;
    let mut shown = 0;
    for name in &image_cols {
        page.heading(2, &format!("Sample of {name}"), &format!("grid-{name}"));
        page.note(&format!(
            "{} rows drawn with seed {}, each shown as the centre of its {} px shorter side.",
            positions.len(),
            opts.seed,
            opts.thumbnail
        ));
        let Some(col) = batch.column_by_name(name) else {
            continue;
        };
        let cells = col.as_binary_opt::<i64>();
        let mut grid = String::from("<div class=\"grid\">");
        for (i, &row) in positions.iter().enumerate() {
            let label = caption(cache, &batch, i, row);
            let fig = match cells.filter(|c| c.is_valid(i)) {
                None => format!(
                    "<figure class=\"missing\" data-row=\"{row}\">null · {}</figure>",
                    text::escape(&label)
                ),
                Some(c) => match media::thumbnail(c.value(i), opts.thumbnail, &opts.limits) {
                    Ok(uri) => {
                        shown += 1;
                        html::figure(&uri, row, &label, opts.thumbnail)
                    }
                    Err(e) => format!(
                        "<figure class=\"missing\" data-row=\"{row}\">{}</figure>",
                        text::escape(&format!("row {row}: {e}"))
                    ),
                },
            };
            grid.push_str(&fig);
        }
        grid.push_str("</div>");
        page.raw(&grid);
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_distinct_sorted_and_seeded() {
        let a = sample_positions(1_000_000, 500, 7);
        assert_eq!(a.len(), 500);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && *a.last().unwrap() < 1_000_000);
        assert_eq!(a, sample_positions(1_000_000, 500, 7));
        assert_ne!(a, sample_positions(1_000_000, 500, 8));
        assert_eq!(sample_positions(5, 10, 1), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn options_are_checked_when_set() {
        let o = ReportOptions::default();
        assert!(o.clone().try_with_sample_rows(0).is_err());
        assert!(o.clone().try_with_thumbnail(8).is_err());
        assert!(o.clone().try_with_windows(65).is_err());
        assert!(o.clone().try_with_images(1001).is_err());
        assert!(o.try_with_images(3).is_ok());
    }
}
