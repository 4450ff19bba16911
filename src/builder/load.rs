//! [`load`]: open a warm cache, or build a missing or stale one under the
//! cache lock (resuming an interrupted build), then open it.

use std::path::{Path, PathBuf};

use crate::cache::lock::CacheLock;
use crate::cache::metadata::METADATA_FILE;
use crate::cache::naming::{cache_fingerprint, cache_root};
use crate::dataset::Dataset;
use crate::download::DownloadInfo;
use crate::error::{BoxError, Error, Result};
use crate::layouts::arrow_shards::manifest::ManifestHeader;
use crate::layouts::arrow_shards::write::{prepare_resumable, Extra};
use crate::layouts::open::Cache;
use crate::layouts::open::{open_cache_with, OpenOptions};

use super::merge::build_units;
pub use super::options::{LoadOptions, LoadReport};
use super::reasons::RebuildReason;
use super::sources::source_changes;
use super::{DatasetBuilder, DatasetInfo, Version};
use crate::layouts::spec::WriteSpec;

fn check_name(kind: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.contains(['/', '\\', '\0']) || s == "." || s == ".." {
        return Err(Error::InvalidArgument(format!(
            "{kind} name {s:?} cannot be part of a directory name (no '/', '\\\\', '..' or empty names)"
        )));
    }
    Ok(())
}

fn author(what: &str, e: BoxError) -> Error {
    Error::InvalidArgument(format!("{what}: {e}"))
}

/// Resolves the config a load uses.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown config name.
pub fn resolve_config(builder: &dyn DatasetBuilder, asked: Option<&str>) -> Result<String> {
    let configs = builder.configs();
    if configs.is_empty() {
        let name = asked.unwrap_or("default").to_string();
        check_name("config", &name)?;
        return Ok(name);
    }
    let name = asked
        .map(str::to_string)
        .or_else(|| builder.default_config())
        .unwrap_or_else(|| configs[0].name.clone());
    if !configs.iter().any(|c| c.name == name) {
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::InvalidArgument(format!(
            "Unknown config '{name}'. Available: {names:?}"
        )));
    }
    check_name("config", &name)?;
    Ok(name)
}

/// The cache directory of a builder's split, exactly as the reference names it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad version, config or split name.
pub fn cache_dir_for(
    builder: &dyn DatasetBuilder,
    config: &str,
    split: &str,
    opts: &LoadOptions,
) -> Result<PathBuf> {
    let version = Version::parse(builder.version())?;
    check_name("split", split)?;
    check_name("config", config)?;
    if let Some(dir) = &opts.cache_dir {
        return Ok(dir.clone());
    }
    let root = opts.cache_root.clone().unwrap_or_else(cache_root);
    Ok(root.join("processed").join(cache_fingerprint(
        builder.name(),
        &version.to_string(),
        config,
        split,
        opts.layout().cache_format(),
    )))
}

/// Opens `split` of the builder's dataset, building it first if needed.
///
/// # Errors
/// See [`load_with_report`].
pub fn load(builder: &dyn DatasetBuilder, split: &str, opts: &LoadOptions) -> Result<Dataset> {
    load_with_report(builder, split, opts).map(|(d, _)| d)
}

/// Whether an open error means "the cache on disk is damaged: build it again"
/// (as opposed to a features mismatch, which the user must decide about).
fn damaged(e: &Error) -> bool {
    matches!(
        e,
        Error::Metadata { .. }
            | Error::MissingShard { .. }
            | Error::CorruptShard { .. }
            | Error::UnsupportedVersion { .. }
    )
}

enum Warm {
    Ready(Box<Cache>),
    Stale(Vec<RebuildReason>),
}

/// Whether the cache at `dir` can be used as is; `Stale` says why not.
fn check_warm(
    dir: &Path,
    open_opts: &OpenOptions,
    stamp: Option<&serde_json::Value>,
    config_json: &serde_json::Value,
) -> Result<Warm> {
    if !crate::storage::storage_for(dir).is_file(&dir.join(METADATA_FILE)) {
        return Ok(Warm::Stale(vec![RebuildReason::NotBuilt]));
    }
    match open_cache_with(dir, open_opts) {
        Ok(c) => {
            let mut reasons = Vec::new();
            match (c.metadata.sources(), stamp) {
                (Some(r), Some(n)) => reasons.extend(
                    source_changes(r, n)
                        .into_iter()
                        .map(|change| RebuildReason::SourceChanged { change }),
                ),
                (None, Some(_)) => reasons.push(RebuildReason::SourcesNowDeclared),
                (Some(_), None) => reasons.push(RebuildReason::SourcesNoLongerDeclared),
                (None, None) => {}
            }
            if let Some(rc) = c.metadata.config() {
                if rc != config_json {
                    reasons.push(RebuildReason::ConfigChanged {
                        recorded: rc.clone(),
                        now: config_json.clone(),
                    });
                }
            }
            Ok(if reasons.is_empty() {
                Warm::Ready(Box::new(c))
            } else {
                Warm::Stale(reasons)
            })
        }
        Err(e) if damaged(&e) => Ok(Warm::Stale(vec![RebuildReason::Damaged {
            path: PathBuf::new(),
            detail: e.to_string(),
        }])),
        Err(e) => Err(e),
    }
}

/// Everything `load` needs to know about a builder's split before touching the cache.
struct Plan {
    config: String,
    info: DatasetInfo,
    dir: PathBuf,
    stamp: Option<serde_json::Value>,
    config_json: serde_json::Value,
    open_opts: OpenOptions,
    /// The split's assets, to download before building.
    assets: Vec<DownloadInfo>,
    download_dir: PathBuf,
}

fn plan(builder: &dyn DatasetBuilder, split: &str, opts: &LoadOptions) -> Result<Plan> {
    let config = resolve_config(builder, opts.config.as_deref())?;
    let params = builder
        .configs()
        .into_iter()
        .find(|c| c.name == config)
        .map(|c| c.params)
        .unwrap_or(serde_json::Value::Null);
    let info = builder
        .info(&config)
        .map_err(|e| author(&format!("{}.info({config})", builder.name()), e))?;
    let splits = builder
        .splits(&config)
        .map_err(|e| author(&format!("{}.splits({config})", builder.name()), e))?;
    if !splits.iter().any(|s| s == split) {
        return Err(Error::InvalidArgument(format!(
            "Split '{split}' not found. Available: {splits:?}"
        )));
    }
    let dir = cache_dir_for(builder, &config, split, opts)?;
    let mut stamp = builder
        .sources(&config, split)
        .map_err(|e| author(&format!("{}.sources({config}, {split})", builder.name()), e))?
        .map(|s| s.stamp())
        .transpose()?;
    let assets: Vec<(String, DownloadInfo)> = builder
        .assets(&config)
        .map_err(|e| author(&format!("{}.assets({config})", builder.name()), e))?
        .into_iter()
        .filter(|(key, _)| super::asset_split(key) == split)
        .collect();
    for (_, a) in &assets {
        a.validate()?;
    }
    if !assets.is_empty() {
        // Recorded as sources: a changed URL, fallback, checksum or name
        // rebuilds (known without downloading anything).
        let s = stamp.get_or_insert_with(
            || serde_json::json!({"root": "", "content_hash": false, "files": []}),
        );
        s["assets"] = assets_stamp(&assets);
    }
    let download_dir = opts.download_dir.clone().unwrap_or_else(|| {
        crate::download::downloads_dir(&opts.cache_root.clone().unwrap_or_else(cache_root))
    });
    let config_json = serde_json::json!({"name": config, "params": params});
    let open_opts = OpenOptions::default().with_features(info.features.clone());
    Ok(Plan {
        config,
        info,
        dir,
        stamp,
        config_json,
        open_opts,
        assets: assets.into_iter().map(|(_, a)| a).collect(),
        download_dir,
    })
}

/// The record of a split's assets kept with its sources.
pub(crate) fn assets_stamp(assets: &[(String, DownloadInfo)]) -> serde_json::Value {
    serde_json::Value::Array(
        assets
            .iter()
            .map(|(key, a)| {
                serde_json::json!({
                    "key": key, "url": a.url, "fallbacks": a.fallbacks,
                    "checksum": a.checksum, "filename": a.filename,
                    "local_name": a.local_name(),
                })
            })
            .collect(),
    )
}

/// Why `load` would (re)build this split now; empty when the cache is up to
/// date. Names the source, config value or feature that changed.
///
/// # Errors
/// As [`load`], except that a features mismatch is a reason, not an error.
pub fn why(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<Vec<RebuildReason>> {
    let p = plan(builder, split, opts)?;
    match check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json) {
        Ok(Warm::Ready(_)) => Ok(Vec::new()),
        Ok(Warm::Stale(r)) => Ok(r),
        Err(e @ Error::SchemaMismatch { .. }) => Ok(vec![RebuildReason::FeaturesChanged {
            detail: e.to_string(),
        }]),
        Err(e) => Err(e),
    }
}

/// Like [`load`], also saying whether it built the cache.
///
/// A warm cache is opened without taking the lock or touching any file. A
/// missing, damaged or stale one (a declared source or a config parameter
/// changed) is built under `<dir>.lock`; a second process asking for the same
/// cache waits for the lock and then opens what the first one published. A
/// killed build of the same cache is resumed from its last committed shard.
/// A cache built with different features under the same version is an error
/// naming what differs (bump the version, or rebuild).
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad version, config or split or an
/// author error in `info`/`splits`/`work_units`/`sources`;
/// [`Error::SchemaMismatch`]; any build error (nothing is published then).
pub fn load_with_report(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<(Dataset, LoadReport)> {
    let p = plan(builder, split, opts)?;
    let report = |built, resumed_rows, reasons| LoadReport {
        dir: p.dir.clone(),
        built,
        config: p.config.clone(),
        resumed_rows,
        reasons,
    };
    if !opts.rebuild {
        if let Warm::Ready(c) = check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json)?
        {
            return Ok((Dataset::new(*c), report(false, 0, Vec::new())));
        }
    }
    // A cache on object storage is built in a local staging directory (the
    // writers' crash safety and resume are the local ones) and then
    // published with a commit marker.
    #[cfg(feature = "s3")]
    let remote = crate::storage::is_object_uri(&p.dir);
    #[cfg(not(feature = "s3"))]
    let remote = false;
    let build_dir = if remote {
        #[cfg(feature = "s3")]
        {
            crate::cache::remote::staging_dir(&p.dir)?
        }
        #[cfg(not(feature = "s3"))]
        unreachable!("remote is false without the s3 feature")
    } else {
        p.dir.clone()
    };
    let lock = CacheLock::acquire(&build_dir)?;
    let reasons = if opts.rebuild {
        vec![RebuildReason::Requested]
    } else {
        match check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json)? {
            Warm::Ready(c) => return Ok((Dataset::new(*c), report(false, 0, Vec::new()))),
            Warm::Stale(r) => r,
        }
    };
    // The split's assets, before the author is asked for work units (which
    // may read them).
    let files = if p.assets.is_empty() {
        Vec::new()
    } else {
        crate::download::download_all(&p.assets, &p.download_dir, &opts.download)?
    };
    let mut units = builder.work_units(&p.config, split).map_err(|e| {
        author(
            &format!("{}.work_units({}, {split})", builder.name(), p.config),
            e,
        )
    })?;
    for u in &mut units {
        u.files = files.clone();
    }
    if opts.rebuild {
        // A rebuild is a new generation: no killed build is taken over.
        crate::cache::publish::remove_leftovers(
            &crate::storage::storage_for(&build_dir),
            &build_dir,
        );
    }
    let sources_digest = p
        .stamp
        .as_ref()
        .map(|s| crate::util::sha256_hex(s.to_string().as_bytes()))
        .unwrap_or_default();
    // What a resumed build's inputs must equal: the sources and the config.
    let inputs_digest =
        crate::util::sha256_hex(format!("{sources_digest}|{}", p.config_json).as_bytes());
    let extra = Extra {
        sources: p.stamp.clone(),
        config: Some(p.config_json.clone()),
    };
    #[cfg(any(not(feature = "lance"), not(feature = "video")))]
    let compiled_without = |layout: &str, feature: &str| Error::UnsupportedLayout {
        path: p.dir.clone(),
        layout: layout.into(),
        hint: format!("; this build was compiled without the `{feature}` feature"),
    };
    let resumed_rows = match &opts.write {
        #[cfg(feature = "video")]
        WriteSpec::VideoFrames(spec) => {
            // The frames writer takes over a killed build itself (its
            // progress file knows the videos done), so every example is
            // handed to it.
            let mut v = spec.video()?.with_sources(p.stamp.clone());
            if let Some(c) = &opts.progress {
                v = v.with_progress(c.clone());
            }
            build_units(
                builder,
                &p.config,
                split,
                &units,
                opts.unit_parallelism,
                &crate::cache::build::ResumePoint::default(),
                |stream| {
                    let items =
                        stream.map(|r| r.map(|(key, ex)| (serde_json::Value::String(key), ex)));
                    crate::layouts::video_frames::write::write_video_frames_cache_locked(
                        items,
                        &p.info.features,
                        &build_dir,
                        &v,
                        &lock,
                    )
                },
            )?
            .resumed_videos
        }
        #[cfg(not(feature = "video"))]
        WriteSpec::VideoFrames(_) => return Err(compiled_without("lance-video-frames", "video")),
        #[cfg(feature = "lance")]
        WriteSpec::Lance(spec) => {
            use crate::layouts::lance_rows::write::{prepare_resumable, LanceBuildHeader};
            let mut lw = spec.lance()?;
            if let Some(c) = &opts.progress {
                lw = lw.with_progress(c.clone());
            }
            let header = LanceBuildHeader::new(&build_dir, &p.info.features, &lw, inputs_digest);
            let prepared = prepare_resumable(&build_dir, &lock, &header)?;
            let resume = prepared.resume_point().clone();
            build_units(
                builder,
                &p.config,
                split,
                &units,
                opts.unit_parallelism,
                &resume,
                |stream| {
                    let rows = stream.map(|r| r.map(|(_, ex)| ex));
                    prepared.run(rows, &p.info.features, &lw, extra)
                },
            )?
            .resumed_rows
        }
        #[cfg(not(feature = "lance"))]
        WriteSpec::Lance(_) => return Err(compiled_without("lance-rows", "lance")),
        WriteSpec::Arrow(spec) => {
            let mut w = spec.arrow()?;
            if let Some(c) = &opts.progress {
                w = w.with_progress(c.clone());
            }
            let w = &w;
            let name = p
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fingerprint = p.info.features.fingerprint();
            // Same inputs, same build id: a resumed build is byte-identical
            // to an uninterrupted one. An explicit rebuild is a new generation.
            let build_id = if opts.rebuild {
                crate::layouts::arrow_shards::write::random_build_id()
            } else {
                let key = format!(
                    "{name}|{fingerprint}|{sources_digest}|{}|{}|{:?}|{:?}",
                    p.config_json,
                    w.batch_size(),
                    w.shard_size_bytes(),
                    w.compression()
                );
                crate::util::sha256_hex(key.as_bytes())[..16].to_string()
            };
            let header = ManifestHeader {
                cache_name: name,
                schema_fingerprint: fingerprint,
                build_id,
                batch_size: w.batch_size() as u64,
                shard_size_bytes: w.shard_size_bytes(),
                compression: w.compression(),
                sources_digest: inputs_digest,
                row_checksums: w.record_checksums(),
                dedup_threshold: w.dedup_threshold(),
            };
            let prepared = prepare_resumable(&p.info.features, &build_dir, w, &lock, header)?;
            let resume = prepared.resume_point().clone();
            build_units(
                builder,
                &p.config,
                split,
                &units,
                opts.unit_parallelism,
                &resume,
                |stream| {
                    let rows = stream.map(|r| r.map(|(_, ex)| ex));
                    prepared.run(rows, &p.info.features, w, extra)
                },
            )?
            .resumed_rows
        }
    };
    #[cfg(feature = "s3")]
    if remote {
        crate::cache::remote::publish_to_object_store(&build_dir, &p.dir)?;
        // The published copy is the cache now; the staging copy goes.
        let _ = std::fs::remove_dir_all(&build_dir);
    }
    drop(lock);
    let c = open_cache_with(&p.dir, &p.open_opts)?;
    Ok((Dataset::new(c), report(true, resumed_rows, reasons)))
}

/// A builder's cache directory and whether a cache is published there, without building.
///
/// # Errors
/// As [`cache_dir_for`].
pub fn cache_status(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<(PathBuf, bool)> {
    let config = resolve_config(builder, opts.config.as_deref())?;
    let dir = cache_dir_for(builder, &config, split, opts)?;
    let exists = Path::new(&dir).join(METADATA_FILE).exists();
    Ok((dir, exists))
}

/// The features of the published cache of `split` when it is up to date
/// with the builder's declared sources (none changed since it was built),
/// else `None`: a caller that would infer features by reading the data can
/// take these instead.
pub fn fresh_features(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Option<crate::features::Features> {
    if opts.rebuild {
        return None;
    }
    let (dir, exists) = cache_status(builder, split, opts).ok()?;
    if !exists {
        return None;
    }
    let c = crate::layouts::open::open_cache(&dir).ok()?;
    let recorded = c.metadata.sources()?;
    let config = resolve_config(builder, None).ok()?;
    let now = builder.sources(&config, split).ok()??.stamp().ok()?;
    if !source_changes(recorded, &now).is_empty() {
        return None;
    }
    Some(c.features().as_ref().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(Version::parse("1.2.3").unwrap().to_string(), "1.2.3");
        for bad in [
            "1.0", "1.0.0.0", "a.b.c", "01.0.0", "1..0", "", "1.0.-1", " 1.0.0",
        ] {
            let e = Version::parse(bad).unwrap_err().to_string();
            assert!(e.contains("major.minor.patch"), "{bad}: {e}");
        }
        assert!(Version::parse("0.10.0").unwrap() > Version::parse("0.9.9").unwrap());
    }

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        for bad in ["a/b", "..", "", "x\\y"] {
            assert!(check_name("split", bad).is_err(), "{bad}");
        }
        assert!(check_name("split", "train").is_ok());
    }
}
