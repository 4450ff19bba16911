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
        "Array2D" | "Array3D" | "Array4D" | "Array5D" => {
            let shape: Vec<usize> = j
                .get("shape")
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(|n| n.as_u64().map(|n| n as usize)).collect())
                .unwrap_or_default();
            let d = j.get("dtype").and_then(J::as_str).unwrap_or("");
            let dtype = hf_dtype(d).ok_or_else(|| format!("{kind} dtype '{d}' has no shardset dtype"))?;
            if shape.len() != kind[5..6].parse::<usize>().unwrap_or(0) {
                return Err(format!("{kind} with shape {shape:?} (a dimension of unknown size is not read)"));
            }
            Feature::array(shape, dtype).map_err(|e| e.to_string())
        }
        "Sequence" | "List" | "LargeList" => {
            let inner = j.get("feature").ok_or("a list without its 'feature'")?;
            Ok(Feature::sequence(hf_feature(inner)?))
        }
        "" => Err("a dict of features (a struct) is not one shardset reads".into()),
        other => Err(format!(
            "Hugging Face feature type '{other}' is not one shardset reads (Value, ClassLabel, Image, Sequence, List, Array2D to Array5D)"
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
        (Feature::Image(_), Some(s)) => image_bytes(name, s)?,
        (Feature::Array(af), None) if nested_list(a.data_type()) => {
            return array_cells(name, a, af);
        }
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

/// A batch of foreign columns as `features`' columns (`schema`, their
/// Arrow schema), each adapted by [`adapt_column`].
///
/// # Errors
/// [`Error::CorruptShard`] naming `path` when a column is missing or
/// cannot be read as its feature.
pub fn adapt_batch(
    features: &Features,
    schema: &arrow_schema::SchemaRef,
    path: &std::path::Path,
    batch: &arrow_array::RecordBatch,
) -> Result<arrow_array::RecordBatch> {
    let columns = features
        .iter()
        .map(|(name, feature)| {
            let a = batch
                .column_by_name(name)
                .ok_or_else(|| Error::corrupt(path, format!("no column '{name}'")))?;
            adapt_column(name, a, feature).map_err(|e| match e {
                Error::InvalidFeature(why) => Error::corrupt(path, why),
                e => e,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    arrow_array::RecordBatch::try_new_with_options(schema.clone(), columns, &opts)
        .map_err(|e| Error::arrow(Some(path), e))
}

/// The `bytes` of Hugging Face's image cells. A cell that names a file
/// (`path`) instead of holding its bytes is refused: data from elsewhere
/// is not let to reach files outside itself.
fn image_bytes(name: &str, s: &StructArray) -> Result<ArrayRef> {
    let bytes = s
        .column_by_name("bytes")
        .cloned()
        .ok_or_else(|| Error::InvalidFeature(format!("image column '{name}' has no 'bytes'")))?;
    if let Some(paths) = s.column_by_name("path") {
        let by_path =
            (0..s.len()).find(|&i| s.is_valid(i) && bytes.is_null(i) && paths.is_valid(i));
        if let Some(i) = by_path {
            return Err(Error::InvalidFeature(format!(
                "image column '{name}': cell {i} names a file instead of holding its bytes, and files outside the data are not read (embed the images, e.g. datasets' embed_table_storage, or build from the image files)"
            )));
        }
    }
    Ok(bytes)
}

fn nested_list(t: &DataType) -> bool {
    matches!(
        t,
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    )
}

/// Offsets of a list level: row `i` holds children `o[i]..o[i + 1]`.
fn list_level(a: &dyn Array) -> Option<(Vec<usize>, ArrayRef)> {
    use arrow_array::cast::AsArray;
    fn offsets<O: arrow_array::OffsetSizeTrait>(a: &dyn Array) -> Option<(Vec<usize>, ArrayRef)> {
        let l = a.as_list_opt::<O>()?;
        let o = l
            .value_offsets()
            .iter()
            .map(|x| x.to_usize().unwrap_or(0))
            .collect();
        Some((o, l.values().clone()))
    }
    if let Some(l) = a.as_fixed_size_list_opt() {
        let n = l.value_length().max(0) as usize;
        let o = (0..=l.len()).map(|i| (l.offset() + i) * n).collect();
        return Some((o, l.values().clone()));
    }
    offsets::<i32>(a).or_else(|| offsets::<i64>(a))
}

/// Hugging Face's `Array2D`..`Array5D` cells (nested lists of the shape)
/// as our fixed-shape cells: the flat C-order bytes of each.
fn array_cells(name: &str, a: &ArrayRef, af: &crate::features::ArrayFeature) -> Result<ArrayRef> {
    use arrow_array::builder::{FixedSizeBinaryBuilder, LargeBinaryBuilder};
    let bad = |why: String| Error::InvalidFeature(format!("array column '{name}': {why}"));
    let want: usize = af.shape.iter().product();
    // Each row's range of leaf values, level by level.
    let mut ranges: Vec<(usize, usize)> = (0..a.len()).map(|i| (i, i + 1)).collect();
    let mut level = a.clone();
    for _ in 0..af.shape.len() {
        let (o, child) = list_level(level.as_ref()).ok_or_else(|| {
            bad(format!(
                "{} is not nested {} deep",
                a.data_type(),
                af.shape.len()
            ))
        })?;
        for r in &mut ranges {
            *r = (o[r.0], o[r.1]);
        }
        level = child;
    }
    let leaves = arrow_cast::cast(&level, &af.dtype.arrow_type())
        .map_err(|e| bad(format!("its values cannot be read as {:?}: {e}", af.dtype)))?;
    if leaves.null_count() > 0 {
        return Err(bad("a cell holds a null value".into()));
    }
    let width = af.dtype.byte_width().unwrap_or(1);
    let data = leaves.to_data();
    let flat: Vec<u8>;
    let bytes: &[u8] = if matches!(af.dtype, Dtype::Bool) {
        let b = leaves
            .as_any()
            .downcast_ref::<arrow_array::BooleanArray>()
            .ok_or_else(|| bad("bool values are not booleans".into()))?;
        flat = b.iter().map(|v| u8::from(v.unwrap_or(false))).collect();
        &flat
    } else {
        let buf = &data.buffers()[0];
        &buf.as_slice()[data.offset() * width..]
    };
    let cell = want * width;
    let mut fixed = FixedSizeBinaryBuilder::new(cell as i32);
    let mut var = LargeBinaryBuilder::new();
    for (i, &(lo, hi)) in ranges.iter().enumerate() {
        let valid = a.is_valid(i);
        if valid && hi - lo != want {
            return Err(bad(format!(
                "row {i} holds {} values, not the {want} of shape {:?}",
                hi - lo,
                af.shape
            )));
        }
        let v = valid.then(|| &bytes[lo * width..hi * width]);
        match (af.fixed_size, v) {
            (true, Some(v)) => fixed.append_value(v).map_err(|e| bad(e.to_string()))?,
            (true, None) => fixed.append_null(),
            (false, v) => var.append_option(v),
        }
    }
    Ok(if af.fixed_size {
        std::sync::Arc::new(fixed.finish())
    } else {
        std::sync::Arc::new(var.finish())
    })
}
