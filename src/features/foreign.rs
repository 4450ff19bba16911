//! Features of data written by other tools: Hugging Face `datasets`'
//! features JSON (in a Parquet file's `huggingface` metadata, or a
//! `save_to_disk` directory's `dataset_info.json`), and features inferred
//! from a plain Arrow schema (Parquet written by pyarrow, pandas, Spark).
//! Both give our `Features`, whose Arrow types a foreign column is then
//! adapted to ([`adapt_column`]).

use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{DataType, Schema};
use serde_json::Value as J;

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::features::{ClassLabel, Feature, Features};

/// The key of our own features in a foreign file's metadata (a Parquet file
/// we exported): read back as they are, for an exact round trip.
pub const FEATURES_KEY: &str = "shardset.features";

/// A Hugging Face dtype name as ours.
fn hf_dtype(name: &str) -> Option<Dtype> {
    Some(match name {
        "string" | "large_string" => Dtype::String,
        "binary" | "large_binary" => Dtype::Binary,
        "bool" => Dtype::Bool,
        "float" | "float32" => Dtype::Float32,
        "double" | "float64" => Dtype::Float64,
        "float16" | "halffloat" => Dtype::Float16,
        "int8" => Dtype::Int8,
        "int16" => Dtype::Int16,
        "int32" => Dtype::Int32,
        "int64" => Dtype::Int64,
        "uint8" => Dtype::UInt8,
        "uint16" => Dtype::UInt16,
        "uint32" => Dtype::UInt32,
        "uint64" => Dtype::UInt64,
        _ => return None,
    })
}

fn hf_feature(j: &J) -> std::result::Result<Feature, String> {
    if let Some(items) = j.as_array() {
        // `[feature]`: a list of that feature.
        return match items.as_slice() {
            [inner] => Ok(Feature::sequence(hf_feature(inner)?)),
            _ => Err("a list feature holds exactly one feature".into()),
        };
    }
    let kind = j.get("_type").and_then(J::as_str).unwrap_or("");
    match kind {
        "Value" => {
            let d = j.get("dtype").and_then(J::as_str).unwrap_or("");
            hf_dtype(d)
                .map(Feature::Value)
                .ok_or_else(|| format!("Value dtype '{d}' has no shardset dtype"))
        }
        "ClassLabel" => {
            let names: Vec<String> = j
                .get("names")
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(|n| n.as_str().map(String::from)).collect())
                .unwrap_or_default();
            if names.is_empty() {
                Ok(Feature::ClassLabel(ClassLabel::unknown()))
            } else {
                ClassLabel::from_names(names)
                    .map(Feature::ClassLabel)
                    .map_err(|e| e.to_string())
            }
        }
        "Image" => Ok(Feature::image()),
        "Sequence" | "List" | "LargeList" => {
            let inner = j.get("feature").ok_or("a list without its 'feature'")?;
            Ok(Feature::sequence(hf_feature(inner)?))
        }
        other => Err(format!(
            "Hugging Face feature type '{other}' is not one shardset reads (Value, ClassLabel, Image, Sequence, List)"
        )),
    }
}

/// Our features from Hugging Face's features JSON (`{"col": {"_type":
/// "Value", "dtype": "int64"}, ...}`).
///
/// # Errors
/// [`Error::InvalidFeature`] naming the column and the type.
pub fn from_hugging_face(j: &J) -> Result<Features> {
    let obj = j.as_object().ok_or_else(|| {
        Error::InvalidFeature("Hugging Face features must be a JSON object".into())
    })?;
    let mut out = Features::new();
    for (name, f) in obj {
        let feat =
            hf_feature(f).map_err(|e| Error::InvalidFeature(format!("column '{name}': {e}")))?;
        out.insert(name.clone(), feat);
    }
    Ok(out)
}

/// The feature a foreign Arrow column is read as, or None.
fn arrow_feature(t: &DataType) -> Option<Feature> {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Some(Feature::value(Dtype::String))
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            Some(Feature::value(Dtype::Binary))
        }
        DataType::List(item) | DataType::LargeList(item) => {
            arrow_feature(item.data_type()).map(Feature::sequence)
        }
        DataType::Dictionary(_, v) => arrow_feature(v),
        DataType::Struct(fields) if is_image_struct(fields) => Some(Feature::image()),
        t => Dtype::from_arrow(t).map(Feature::Value),
    }
}

/// Hugging Face's image cells: `{bytes: binary, path: string}`.
fn is_image_struct(fields: &arrow_schema::Fields) -> bool {
    fields.iter().any(|f| f.name() == "bytes") && fields.iter().any(|f| f.name() == "path")
}

/// The features of a foreign Arrow schema: ours, when we wrote it
/// ([`FEATURES_KEY`]); Hugging Face's, when the schema carries them (the
/// `huggingface` metadata key); else inferred from the Arrow types.
///
/// # Errors
/// [`Error::InvalidFeature`] naming a column whose type has no feature
/// (give the features instead).
pub fn of_foreign_schema(schema: &Schema) -> Result<Features> {
    if let Some(ours) = schema.metadata().get(FEATURES_KEY) {
        let j: J = serde_json::from_str(ours).map_err(|e| {
            Error::InvalidFeature(format!(
                "the schema's '{FEATURES_KEY}' metadata is not JSON: {e}"
            ))
        })?;
        return crate::features::describe::features_from_json(&j);
    }
    if let Some(hf) = schema.metadata().get("huggingface") {
        let j: J = serde_json::from_str(hf).map_err(|e| {
            Error::InvalidFeature(format!(
                "the schema's 'huggingface' metadata is not JSON: {e}"
            ))
        })?;
        if let Some(f) = j.get("info").and_then(|i| i.get("features")) {
            return from_hugging_face(f);
        }
    }
    let mut out = Features::new();
    for field in schema.fields() {
        let f = arrow_feature(field.data_type()).ok_or_else(|| {
            Error::InvalidFeature(format!(
                "column '{}' has Arrow type {}, which no feature holds: give the features, or leave the column out",
                field.name(),
                field.data_type()
            ))
        })?;
        out.insert(field.name().clone(), f);
    }
    Ok(out)
}

/// A foreign column as `feature`'s Arrow type: an image struct's `bytes`,
/// other types cast (large and view strings, dictionaries, list offsets).
///
/// # Errors
/// [`Error::InvalidFeature`] naming the column when the cast is impossible.
pub fn adapt_column(name: &str, a: &ArrayRef, feature: &Feature) -> Result<ArrayRef> {
    let want = feature.arrow_type();
    if a.data_type() == &want {
        return Ok(a.clone());
    }
    let a = match (feature, a.as_any().downcast_ref::<StructArray>()) {
        (Feature::Image(_), Some(s)) => s.column_by_name("bytes").cloned().ok_or_else(|| {
            Error::InvalidFeature(format!("image column '{name}' has no 'bytes'"))
        })?,
        _ => a.clone(),
    };
    arrow_cast::cast(&a, &want).map_err(|e| {
        Error::InvalidFeature(format!(
            "column '{name}' ({}) cannot be read as {}: {e}",
            a.data_type(),
            feature.class_name()
        ))
    })
}
