//! The typed schema of a dataset: [`Features`], an ordered list of named [`Feature`]s.
//!
//! A feature knows its Arrow type and field metadata (exactly as the
//! stable-datasets reference writes them), how to encode an example's
//! [`Value`](crate::Value) into Arrow cells ([`encode`]), how to decode a cell
//! back ([`decode`]), its Python `repr` for the schema fingerprint ([`repr`]),
//! and a JSON description stored in `_metadata.json` so that a cache can be
//! opened without the builder ([`describe`]).

pub mod decode;
pub mod describe;
pub mod encode;
pub mod foreign;
pub mod image;
pub mod limits;
pub mod repr;
pub mod trust;
pub mod video;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

use crate::error::{Error, Result};
pub use crate::value::VideoStorage;

/// Field-metadata key naming the feature class, as the reference writes it.
pub const FEATURE_METADATA_KEY: &str = "stable_datasets.feature";
/// Field-metadata key holding a Video feature's storage mode.
pub const VIDEO_STORAGE_METADATA_KEY: &str = "stable_datasets.video.storage";
/// The reference's default video extension allow-list.
pub const DEFAULT_VIDEO_EXTENSIONS: [&str; 5] = [".mp4", ".avi", ".mov", ".webm", ".mkv"];

pub use crate::dtype::Dtype;

/// A categorical label: ids `0..n` with optional names.
#[derive(Debug, Clone)]
pub struct ClassLabel {
    names: Vec<Arc<str>>,
    index: Arc<HashMap<Arc<str>, i64>>,
    /// False only for features inferred from a reference cache, where the
    /// names (and so the class count) were never stored.
    known: bool,
}

impl PartialEq for ClassLabel {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names && self.known == other.known
    }
}

impl ClassLabel {
    /// A label with these class names (ids are positions).
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] for an empty list or duplicate names.
    pub fn from_names<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<Self> {
        let names: Vec<Arc<str>> = names.into_iter().map(|s| Arc::from(s.as_ref())).collect();
        if names.is_empty() {
            return Err(Error::InvalidFeature(
                "ClassLabel needs at least one name".into(),
            ));
        }
        let mut index = HashMap::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            if index.insert(n.clone(), i as i64).is_some() {
                return Err(Error::InvalidFeature(format!(
                    "ClassLabel name '{n}' appears twice"
                )));
            }
        }
        Ok(ClassLabel {
            names,
            index: Arc::new(index),
            known: true,
        })
    }

    /// A label with `n` classes named `"0"..."n-1"`, as the reference does.
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] when `n == 0`.
    pub fn with_num_classes(n: usize) -> Result<Self> {
        Self::from_names((0..n).map(|i| i.to_string()))
    }

    /// A label whose classes are unknown (reference caches store no names).
    pub fn unknown() -> Self {
        ClassLabel {
            names: Vec::new(),
            index: Arc::new(HashMap::new()),
            known: false,
        }
    }

    /// Number of classes (0 when unknown).
    pub fn num_classes(&self) -> usize {
        self.names.len()
    }

    /// The class names.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// True when the class names are known.
    pub fn is_known(&self) -> bool {
        self.known
    }

    /// Id of a class name.
    pub fn str2int(&self, name: &str) -> Option<i64> {
        self.index.get(name).copied()
    }

    /// Name of a class id.
    pub fn int2str(&self, id: i64) -> Option<&Arc<str>> {
        usize::try_from(id).ok().and_then(|i| self.names.get(i))
    }
}

/// How pixel buffers are compressed when an `Image` is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// Lossless PNG (the default).
    Png,
    /// Lossy JPEG (quality 75, PIL's default).
    Jpeg,
}

impl ImageFormat {
    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageFormat::Png => "PNG",
            ImageFormat::Jpeg => "JPEG",
        }
    }

    /// Parses `PNG` / `JPEG` / `JPG` (any case).
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] for any other format.
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "PNG" => Ok(ImageFormat::Png),
            "JPEG" | "JPG" => Ok(ImageFormat::Jpeg),
            _ => Err(Error::InvalidFeature(format!(
                "image encode_format must be PNG or JPEG, got '{s}'"
            ))),
        }
    }
}

/// A fixed-shape N-D array (2 to 5 dims), stored as flat C-order bytes.
///
/// By default a cell is a `large_binary` value, as the reference stores
/// it: an 8-byte offset per row locates the bytes. With `fixed_size` the
/// column is `fixed_size_binary(n)` (n = the shape's bytes): no offsets
/// buffer, row i at byte `i * n`, and a batch's cells are one contiguous
/// `[rows, ...shape]` block. Both read back the same values, by us and by
/// the reference; `fixed_size` is a storage choice, not part of the
/// feature's `repr` (so not of the schema fingerprint): the Arrow schema
/// and the features description record it.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayFeature {
    /// The shape; empty only when inferred from a cache that never stored it.
    pub shape: Vec<usize>,
    /// The element type (numeric or bool).
    pub dtype: Dtype,
    /// Number of dimensions of the class name (`Array3D` = 3), kept when the shape is unknown.
    pub ndim: usize,
    /// Stored as `fixed_size_binary` of the shape's byte size (see above).
    pub fixed_size: bool,
}

impl ArrayFeature {
    /// Bytes of one cell (shape product × dtype width); None when the shape is unknown.
    pub fn cell_bytes(&self) -> Option<usize> {
        (!self.shape.is_empty())
            .then(|| self.shape.iter().product::<usize>() * self.dtype.byte_width().unwrap_or(1))
    }

    /// The Arrow type of the column: `fixed_size_binary(cell bytes)` when
    /// `fixed_size` (and the shape is known), else `large_binary`.
    pub fn arrow_type(&self) -> DataType {
        match (self.fixed_size, self.cell_bytes()) {
            (true, Some(n)) => DataType::FixedSizeBinary(n as i32),
            _ => DataType::LargeBinary,
        }
    }
}

/// A video column.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoFeature {
    /// How the video is stored.
    pub storage: VideoStorage,
    /// Lowercase, dot-prefixed allowed extensions.
    pub allowed_extensions: Vec<String>,
}

/// One column's type.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Feature {
    /// A scalar of one of the 14 dtypes.
    Value(Dtype),
    /// A class id (int64) with names.
    ClassLabel(ClassLabel),
    /// A variable-length list of the inner feature.
    Sequence(Box<Feature>),
    /// An encoded image (PNG/JPEG bytes, large_binary).
    Image(ImageFormat),
    /// A fixed-shape tensor.
    Array(ArrayFeature),
    /// A video reference.
    Video(VideoFeature),
}

impl Feature {
    /// `Value(dtype)`.
    pub fn value(dtype: Dtype) -> Self {
        Feature::Value(dtype)
    }

    /// `ClassLabel(names=[...])`.
    ///
    /// # Errors
    /// See [`ClassLabel::from_names`].
    pub fn class_label<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<Self> {
        Ok(Feature::ClassLabel(ClassLabel::from_names(names)?))
    }

    /// `ClassLabel(num_classes=n)`.
    ///
    /// # Errors
    /// See [`ClassLabel::with_num_classes`].
    pub fn class_label_n(n: usize) -> Result<Self> {
        Ok(Feature::ClassLabel(ClassLabel::with_num_classes(n)?))
    }

    /// `Sequence(inner)`.
    pub fn sequence(inner: Feature) -> Self {
        Feature::Sequence(Box::new(inner))
    }

    /// `Image(encode_format='PNG')`.
    pub fn image() -> Self {
        Feature::Image(ImageFormat::Png)
    }

    /// `Image(encode_format=...)`.
    pub fn image_with(format: ImageFormat) -> Self {
        Feature::Image(format)
    }

    /// An N-D array feature (`Array2D` .. `Array5D`).
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] for fewer than 2 or more than 5 dims, a zero
    /// dimension, or a string/binary dtype.
    pub fn array(shape: impl Into<Vec<usize>>, dtype: Dtype) -> Result<Self> {
        let shape = shape.into();
        if !(2..=5).contains(&shape.len()) {
            return Err(Error::InvalidFeature(format!(
                "array features have 2 to 5 dimensions, got shape {shape:?}"
            )));
        }
        if dtype.byte_width().is_none() {
            return Err(Error::InvalidFeature(format!(
                "array dtype must be numeric or bool, got {}",
                dtype.name()
            )));
        }
        Ok(Feature::Array(ArrayFeature {
            ndim: shape.len(),
            shape,
            dtype,
            fixed_size: false,
        }))
    }

    /// An N-D array feature stored as `fixed_size_binary`: no offsets, row
    /// i at a fixed place (see [`ArrayFeature`]).
    ///
    /// # Errors
    /// As [`Feature::array`], and for a cell of 2 GiB or more (Arrow's
    /// fixed width is an i32).
    pub fn fixed_array(shape: impl Into<Vec<usize>>, dtype: Dtype) -> Result<Self> {
        let Feature::Array(mut a) = Feature::array(shape, dtype)? else {
            unreachable!("Feature::array makes an array feature")
        };
        let bytes = a.cell_bytes().unwrap_or(0);
        if bytes == 0 || i32::try_from(bytes).is_err() {
            return Err(Error::InvalidFeature(format!(
                "a fixed-size array cell must have 1 byte to 2 GiB, shape {:?} of {} has {bytes}",
                a.shape,
                a.dtype.name()
            )));
        }
        a.fixed_size = true;
        Ok(Feature::Array(a))
    }

    /// `Video(storage=...)` with the default extension allow-list.
    pub fn video(storage: VideoStorage) -> Self {
        Feature::Video(VideoFeature {
            storage,
            allowed_extensions: DEFAULT_VIDEO_EXTENSIONS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        })
    }

    /// `Video(storage=..., allowed_extensions=...)`; extensions are lowercased and dot-prefixed.
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] for an empty list.
    pub fn video_with_extensions<S: AsRef<str>>(
        storage: VideoStorage,
        extensions: impl IntoIterator<Item = S>,
    ) -> Result<Self> {
        let allowed_extensions: Vec<String> = extensions
            .into_iter()
            .map(|e| {
                let e = e.as_ref().to_ascii_lowercase();
                if e.starts_with('.') {
                    e
                } else {
                    format!(".{e}")
                }
            })
            .collect();
        if allowed_extensions.is_empty() {
            return Err(Error::InvalidFeature(
                "Video needs at least one allowed extension".into(),
            ));
        }
        Ok(Feature::Video(VideoFeature {
            storage,
            allowed_extensions,
        }))
    }

    /// The reference's class name (the `stable_datasets.feature` metadata value).
    pub fn class_name(&self) -> String {
        match self {
            Feature::Value(_) => "Value".into(),
            Feature::ClassLabel(_) => "ClassLabel".into(),
            Feature::Sequence(_) => "Sequence".into(),
            Feature::Image(_) => "Image".into(),
            Feature::Array(a) => format!("Array{}D", a.ndim),
            Feature::Video(_) => "Video".into(),
        }
    }

    /// The Arrow type of this feature's column.
    pub fn arrow_type(&self) -> DataType {
        match self {
            Feature::Value(d) => d.arrow_type(),
            Feature::ClassLabel(_) => DataType::Int64,
            Feature::Sequence(inner) => {
                DataType::List(Arc::new(Field::new("item", inner.arrow_type(), true)))
            }
            Feature::Image(_) => DataType::LargeBinary,
            Feature::Array(a) => a.arrow_type(),
            Feature::Video(_) => DataType::Struct(video_struct_fields()),
        }
    }

    /// The Arrow field metadata of this feature.
    pub fn arrow_metadata(&self) -> HashMap<String, String> {
        let mut m = HashMap::new();
        m.insert(FEATURE_METADATA_KEY.to_string(), self.class_name());
        if let Feature::Video(v) = self {
            m.insert(
                VIDEO_STORAGE_METADATA_KEY.to_string(),
                v.storage.as_str().to_string(),
            );
        }
        m
    }
}

/// The struct children of a `Video` column, in the reference's order.
pub fn video_struct_fields() -> Fields {
    Fields::from(vec![
        Field::new("mode", DataType::Utf8, true),
        Field::new("path", DataType::Utf8, true),
        Field::new("bytes", DataType::LargeBinary, true),
        Field::new("extension", DataType::Utf8, true),
        Field::new("media_type", DataType::Utf8, true),
        Field::new("size", DataType::Int64, true),
        Field::new("checksum", DataType::Utf8, true),
    ])
}

/// The ordered, named features of a dataset.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Features {
    fields: Vec<(String, Feature)>,
}

impl Features {
    /// No features yet.
    pub fn new() -> Self {
        Features { fields: Vec::new() }
    }

    /// Adds a feature, builder style.
    ///
    /// # Panics
    /// Never; a duplicate name replaces the earlier feature in place (as a Python dict does).
    pub fn with(mut self, name: impl Into<String>, feature: Feature) -> Self {
        self.insert(name, feature);
        self
    }

    /// Adds a feature (replacing one of the same name in place).
    pub fn insert(&mut self, name: impl Into<String>, feature: Feature) {
        let name = name.into();
        if let Some(slot) = self.fields.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = feature;
        } else {
            self.fields.push((name, feature));
        }
    }

    /// The features in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Feature)> {
        self.fields.iter().map(|(n, f)| (n.as_str(), f))
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there is no column.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The feature of a column.
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    /// Column names in order.
    pub fn names(&self) -> Vec<String> {
        self.fields.iter().map(|(n, _)| n.clone()).collect()
    }

    /// True when any column is an `Image`.
    pub fn has_image(&self) -> bool {
        self.fields
            .iter()
            .any(|(_, f)| matches!(f, Feature::Image(_)))
    }

    /// The Arrow schema (all fields nullable, reference field metadata).
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.fields
                .iter()
                .map(|(n, f)| Field::new(n, f.arrow_type(), true).with_metadata(f.arrow_metadata()))
                .collect::<Vec<_>>(),
        ))
    }

    /// The Python `repr(dict(features))` the reference hashes.
    pub fn fingerprint_data(&self) -> String {
        repr::features_repr(self)
    }

    /// The schema fingerprint: first 16 hex chars of sha256 of [`Self::fingerprint_data`].
    pub fn fingerprint(&self) -> String {
        crate::util::sha256_hex(self.fingerprint_data().as_bytes())[..16].to_string()
    }

    /// Best-effort features from an Arrow schema written by the reference
    /// (which stores no class names or array shapes).
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] when a field has no feature metadata or an
    /// Arrow type the feature class cannot have.
    pub fn infer_from_schema(schema: &Schema) -> Result<Self> {
        let mut out = Features::new();
        for field in schema.fields() {
            let class = field
                .metadata()
                .get(FEATURE_METADATA_KEY)
                .map(String::as_str);
            let f = infer_feature(class, field.data_type(), field.metadata()).ok_or_else(|| {
                Error::InvalidFeature(format!(
                    "column '{}' (Arrow type {}, feature class {:?}) cannot be described without the dataset's features",
                    field.name(),
                    field.data_type(),
                    class
                ))
            })?;
            out.insert(field.name().clone(), f);
        }
        Ok(out)
    }
}

fn infer_feature(
    class: Option<&str>,
    t: &DataType,
    meta: &HashMap<String, String>,
) -> Option<Feature> {
    match (class, t) {
        (Some("ClassLabel"), DataType::Int64) => Some(Feature::ClassLabel(ClassLabel::unknown())),
        (Some("Image"), DataType::LargeBinary) => Some(Feature::image()),
        (Some(c), DataType::LargeBinary | DataType::FixedSizeBinary(_))
            if c.starts_with("Array") && c.ends_with('D') =>
        {
            let ndim: usize = c[5..c.len() - 1].parse().ok()?;
            Some(Feature::Array(ArrayFeature {
                shape: Vec::new(),
                dtype: Dtype::UInt8,
                ndim,
                fixed_size: matches!(t, DataType::FixedSizeBinary(_)),
            }))
        }
        (Some("Video"), DataType::Struct(_)) => {
            let storage = meta
                .get(VIDEO_STORAGE_METADATA_KEY)
                .and_then(|s| VideoStorage::parse(s))?;
            Some(Feature::video(storage))
        }
        (Some("Sequence") | None, DataType::List(item)) => Some(Feature::sequence(infer_feature(
            None,
            item.data_type(),
            item.metadata(),
        )?)),
        (Some("Value") | None, t) => Dtype::from_arrow(t).map(Feature::Value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_types_match_reference() {
        let f = Features::new()
            .with("x", Feature::value(Dtype::Int32))
            .with("s", Feature::sequence(Feature::value(Dtype::Int64)))
            .with("v", Feature::video(VideoStorage::Path));
        let s = f.arrow_schema();
        assert_eq!(s.field(0).data_type(), &DataType::Int32);
        assert_eq!(
            s.field(1).data_type(),
            &DataType::List(Arc::new(Field::new("item", DataType::Int64, true)))
        );
        assert_eq!(
            s.field(2).metadata().get(VIDEO_STORAGE_METADATA_KEY),
            Some(&"path".to_string())
        );
    }

    #[test]
    fn bad_definitions_are_errors() {
        assert!(Feature::array(vec![3], Dtype::UInt8).is_err());
        assert!(Feature::array(vec![1, 2, 3, 4, 5, 6], Dtype::UInt8).is_err());
        assert!(Feature::array(vec![2, 2], Dtype::String).is_err());
        assert!(ClassLabel::from_names(["a", "a"]).is_err());
        assert!(ClassLabel::with_num_classes(0).is_err());
        assert!(Dtype::parse("int128").is_err());
    }
}
