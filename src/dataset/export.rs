//! A dataset written as one Parquet file (`shardset export --format
//! parquet`, `Dataset.to_parquet`): the view's rows in order, its selected
//! columns as stored (images as their encoded bytes), snappy-compressed as
//! pyarrow writes by default. The file carries our features (exact round
//! trip through `open_parquet`) and, when every column has one, Hugging
//! Face's (images as its `{bytes, path}` struct), so `datasets` reads class
//! names and images too. Written beside the target and renamed into place.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Map, Value as J};

use super::Dataset;
use crate::error::{Error, Result};
use crate::features::describe::features_to_json;
use crate::features::foreign::FEATURES_KEY;
use crate::features::{Feature, Features};

/// Hugging Face's JSON for a feature, when it has one.
fn hf_feature(f: &Feature) -> Option<J> {
    Some(match f {
        Feature::Value(d) => json!({"dtype": d.name(), "_type": "Value"}),
        Feature::ClassLabel(c) if c.is_known() => json!({
            "names": c.names().iter().map(|n| n.as_ref()).collect::<Vec<_>>(),
            "_type": "ClassLabel"
        }),
        Feature::ClassLabel(_) => json!({"dtype": "int64", "_type": "Value"}),
        Feature::Sequence(inner) => json!({"feature": hf_feature(inner)?, "_type": "Sequence"}),
        Feature::Image(_) => json!({"_type": "Image"}),
        Feature::Array(_) | Feature::Video(_) => return None,
    })
}

fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ])
}

/// A column as written: images as Hugging Face's struct, the rest as stored.
fn column_out(a: &ArrayRef, f: &Feature) -> Result<ArrayRef> {
    if !matches!(f, Feature::Image(_)) {
        return Ok(a.clone());
    }
    let bytes = arrow_cast::cast(a, &DataType::Binary)
        .map_err(|e| Error::InvalidArgument(format!("an image column as binary: {e}")))?;
    let paths: ArrayRef = Arc::new(StringArray::new_null(a.len()));
    Ok(Arc::new(StructArray::new(
        image_fields(),
        vec![bytes, paths],
        a.nulls().cloned(),
    )))
}

fn bad(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("writing {}: {e}", path.display()))
}

impl Dataset {
    /// Writes the view's rows, its selected columns as stored, as one
    /// Parquet file at `path` (see the module docs); returns the rows
    /// written.
    ///
    /// # Errors
    /// Read errors; an error naming `path` when it cannot be written
    /// (nothing is left at `path` then).
    pub fn write_parquet(&self, path: &Path) -> Result<u64> {
        let features: Features = self.features().as_ref().clone();
        let fields: Vec<Field> = features
            .iter()
            .map(|(n, f)| match f {
                Feature::Image(_) => Field::new(n, DataType::Struct(image_fields()), true),
                f => Field::new(n, f.arrow_type(), true),
            })
            .collect();
        let mut meta = std::collections::HashMap::new();
        meta.insert(
            FEATURES_KEY.to_string(),
            features_to_json(&features).to_string(),
        );
        let hf: Option<Map<String, J>> = features
            .iter()
            .map(|(n, f)| hf_feature(f).map(|j| (n.to_string(), j)))
            .collect();
        if let Some(hf) = hf {
            meta.insert(
                "huggingface".into(),
                json!({"info": {"features": J::Object(hf)}}).to_string(),
            );
        }
        let schema = Arc::new(Schema::new(fields).with_metadata(meta));
        let tmp = path.with_file_name(format!(
            ".{}.tmp-{}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))
                .map_err(|e| bad(path, e))?;
            let mut rows = 0u64;
            for batch in self.iter_arrow(8192)? {
                let batch = batch?;
                let columns = features
                    .iter()
                    .map(|(n, f)| {
                        let a = batch
                            .column_by_name(n)
                            .ok_or_else(|| bad(path, format!("no column '{n}'")))?;
                        column_out(a, f)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let out =
                    RecordBatch::try_new(schema.clone(), columns).map_err(|e| bad(path, e))?;
                rows += out.num_rows() as u64;
                w.write(&out).map_err(|e| bad(path, e))?;
            }
            w.close().map_err(|e| bad(path, e))?;
            std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
            Ok(rows)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}
