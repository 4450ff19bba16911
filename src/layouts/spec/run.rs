//! [`write_cache`]: one entry point that writes any layout from a
//! [`WriteSpec`].

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use serde_json::Value as J;

use super::{unsupported, Layout, WriteSpec};
use crate::error::{BoxError, Result};
use crate::features::Features;
use crate::value::Example;

/// What [`write_cache`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The published cache (a local directory or an object-store URI).
    pub dir: PathBuf,
    /// The layout written.
    pub layout: Layout,
    /// Rows in the cache (videos' windows or frames rows for a video cache:
    /// the metadata's row count).
    pub num_rows: u64,
    /// Rows (or videos, for a video cache) taken over from a killed build.
    pub resumed: u64,
}

/// Writes `(key, example)` items into a cache at `location` (a directory or
/// an `s3://` URI) as `spec` says, replacing any cache there atomically;
/// `progress`, when given, counts rows (frames for a video cache) as they
/// are written. Keys name the examples of a video cache; the row layouts
/// ignore them.
///
/// # Errors
/// Any encode, generator, I/O or storage error; nothing is published then.
pub fn write_cache<I, E>(
    items: I,
    features: &Features,
    location: &Path,
    spec: &WriteSpec,
    progress: Option<Arc<AtomicU64>>,
) -> Result<Written>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let written = |num_rows, resumed, dir| Written {
        dir,
        layout: spec.layout(),
        num_rows,
        resumed,
    };
    // The writer's options with the progress counter, then the write.
    macro_rules! write_with {
        ($opts:expr, $write:path, $items:expr) => {{
            let mut o = $opts;
            if let Some(p) = progress {
                o = o.with_progress(p);
            }
            $write($items, features, location, &o)?
        }};
    }
    match spec {
        WriteSpec::Arrow(r) => {
            let rows = items.into_iter().map(|r| r.map(|(_, e)| e));
            let w = write_with!(
                r.arrow()?,
                crate::layouts::arrow_shards::write::try_write_arrow_cache,
                rows
            );
            Ok(written(w.metadata.num_rows, w.resumed_rows, w.dir))
        }
        #[cfg(feature = "lance")]
        WriteSpec::Lance(r) => {
            let rows = items.into_iter().map(|r| r.map(|(_, e)| e));
            let w = write_with!(
                r.lance()?,
                crate::layouts::lance_rows::write::try_write_lance_cache,
                rows
            );
            Ok(written(w.metadata.num_rows, w.resumed_rows, w.dir))
        }
        #[cfg(feature = "video")]
        WriteSpec::VideoFrames(v) => {
            let w = write_with!(
                v.video()?,
                crate::layouts::video_frames::write::try_write_video_frames_cache,
                items
            );
            Ok(written(w.metadata.num_rows, w.resumed_videos, w.dir))
        }
        #[allow(unreachable_patterns)]
        other => Err(unsupported(other.layout())),
    }
}
