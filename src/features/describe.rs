//! A JSON description of features, stored in `_metadata.json` under
//! `"features"` so that a cache describes itself (class names, array shapes,
//! video storage) and can be opened without the builder that wrote it.
//!
//! Form (one object per column, in order):
//! ```json
//! {"x": {"type": "Value", "dtype": "int32"},
//!  "label": {"type": "ClassLabel", "names": ["cat", "dog"]},
//!  "seq": {"type": "Sequence", "feature": {"type": "Value", "dtype": "int64"}},
//!  "img": {"type": "Image", "encode_format": "PNG"},
//!  "arr": {"type": "Array3D", "shape": [2, 3, 4], "dtype": "float32"},
//!  "video": {"type": "Video", "storage": "path", "allowed_extensions": [".mp4"]}}
//! ```

use std::path::Path;

use serde_json::{json, Map, Value as J};

use super::{ArrayFeature, ClassLabel, Dtype, Feature, Features, ImageFormat, VideoStorage};
use crate::error::{Error, Result};

/// Describes features as JSON.
pub fn features_to_json(features: &Features) -> J {
    let mut m = Map::new();
    for (name, f) in features.iter() {
        m.insert(name.to_string(), feature_to_json(f));
    }
    J::Object(m)
}

/// Describes one feature as JSON.
pub fn feature_to_json(f: &Feature) -> J {
    match f {
        Feature::Value(d) => json!({"type": "Value", "dtype": d.name()}),
        Feature::ClassLabel(c) => {
            if c.is_known() {
                json!({"type": "ClassLabel", "names": c.names().iter().map(|n| n.as_ref()).collect::<Vec<_>>()})
            } else {
                json!({"type": "ClassLabel"})
            }
        }
        Feature::Sequence(inner) => json!({"type": "Sequence", "feature": feature_to_json(inner)}),
        Feature::Image(fmt) => json!({"type": "Image", "encode_format": fmt.as_str()}),
        Feature::Array(a) => {
            let mut j = json!({"type": f.class_name(), "shape": a.shape, "dtype": a.dtype.name()});
            if a.fixed_size {
                j["fixed_size"] = J::Bool(true);
            }
            j
        }
        Feature::Video(v) => json!({
            "type": "Video",
            "storage": v.storage.as_str(),
            "allowed_extensions": v.allowed_extensions,
        }),
    }
}

/// Reads features back from their JSON description.
///
/// # Errors
/// [`Error::InvalidFeature`] naming the column and what is wrong.
pub fn features_from_json(j: &J) -> Result<Features> {
    let obj = j
        .as_object()
        .ok_or_else(|| Error::InvalidFeature("features description must be an object".into()))?;
    let mut out = Features::new();
    for (name, f) in obj {
        let feat = feature_from_json(f)
            .map_err(|e| Error::InvalidFeature(format!("column '{name}': {e}")))?;
        out.insert(name.clone(), feat);
    }
    Ok(out)
}

/// Reads a features file (the CLI's `--features`): the features description `_metadata.json`
/// stores (`{"col": {"type": "Value", "dtype": "int64"}, ...}`), where a bare
/// dtype string stands for a `Value` (`{"col": "int64"}`); a whole
/// `_metadata.json` is accepted too (its `features` are used).
///
/// # Errors
/// [`Error::Io`]; [`Error::Input`] naming the file and what is wrong.
pub fn read_features_file(path: &Path) -> Result<Features> {
    let text = std::fs::read(path).map_err(|e| Error::Io {
        op: "read features file",
        path: path.to_path_buf(),
        source: e,
    })?;
    let bad = |reason: String| Error::Input {
        path: path.to_path_buf(),
        location: String::new(),
        reason,
    };
    let mut j: J =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not valid JSON ({e})")))?;
    if let Some(f) = j
        .get("features")
        .filter(|_| j.get("cache_format_version").is_some())
    {
        j = f.clone();
    }
    let obj = j
        .as_object_mut()
        .ok_or_else(|| bad("the features must be a JSON object of column descriptions".into()))?;
    for v in obj.values_mut() {
        if let J::String(d) = v {
            *v = json!({"type": "Value", "dtype": d});
        }
    }
    let f = features_from_json(&j).map_err(|e| bad(e.to_string()))?;
    if f.is_empty() {
        return Err(bad("no column is described".into()));
    }
    Ok(f)
}

fn str_field<'a>(o: &'a Map<String, J>, k: &str) -> std::result::Result<&'a str, String> {
    o.get(k)
        .and_then(J::as_str)
        .ok_or_else(|| format!("missing string '{k}'"))
}

fn str_list(o: &Map<String, J>, k: &str) -> std::result::Result<Vec<String>, String> {
    o.get(k)
        .and_then(J::as_array)
        .ok_or_else(|| format!("missing list '{k}'"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("'{k}' must hold strings"))
        })
        .collect()
}

/// Reads one feature from its JSON description.
///
/// # Errors
/// A message saying what is wrong.
pub fn feature_from_json(j: &J) -> std::result::Result<Feature, String> {
    let o = j.as_object().ok_or("feature must be an object")?;
    let ty = str_field(o, "type")?;
    let e2s = |e: Error| e.to_string();
    Ok(match ty {
        "Value" => Feature::Value(Dtype::parse(str_field(o, "dtype")?).map_err(e2s)?),
        "ClassLabel" => match o.get("names") {
            Some(_) => {
                Feature::ClassLabel(ClassLabel::from_names(str_list(o, "names")?).map_err(e2s)?)
            }
            None => match o.get("num_classes").and_then(J::as_u64) {
                Some(n) => {
                    Feature::ClassLabel(ClassLabel::with_num_classes(n as usize).map_err(e2s)?)
                }
                None => Feature::ClassLabel(ClassLabel::unknown()),
            },
        },
        "Sequence" => Feature::sequence(feature_from_json(
            o.get("feature").ok_or("missing 'feature'")?,
        )?),
        "Image" => Feature::Image(match o.get("encode_format") {
            Some(_) => ImageFormat::parse(str_field(o, "encode_format")?).map_err(e2s)?,
            None => ImageFormat::Png,
        }),
        "Video" => {
            let storage = VideoStorage::parse(str_field(o, "storage")?)
                .ok_or("storage must be path, bytes or frames")?;
            match o.get("allowed_extensions") {
                Some(_) => {
                    Feature::video_with_extensions(storage, str_list(o, "allowed_extensions")?)
                        .map_err(e2s)?
                }
                None => Feature::video(storage),
            }
        }
        t if t.starts_with("Array") && t.ends_with('D') => {
            let ndim: usize = t[5..t.len() - 1]
                .parse()
                .map_err(|_| format!("unknown type '{t}'"))?;
            let shape: Vec<usize> = o
                .get("shape")
                .and_then(J::as_array)
                .ok_or("missing list 'shape'")?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .map(|d| d as usize)
                        .ok_or("shape must hold integers")
                })
                .collect::<std::result::Result<_, _>>()?;
            let dtype = Dtype::parse(str_field(o, "dtype")?).map_err(e2s)?;
            if shape.len() != ndim {
                return Err(format!("{t} needs {ndim} dimensions, shape is {shape:?}"));
            }
            let fixed = match o.get("fixed_size") {
                None => false,
                Some(J::Bool(b)) => *b,
                Some(_) => return Err("'fixed_size' must be true or false".into()),
            };
            let f = if fixed {
                Feature::fixed_array(shape, dtype)
            } else {
                Feature::array(shape, dtype)
            };
            match f.map_err(e2s)? {
                Feature::Array(a) => Feature::Array(ArrayFeature { ndim, ..a }),
                other => other,
            }
        }
        other => return Err(format!("unknown feature type '{other}'")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_kind() {
        let f = Features::new()
            .with("x", Feature::value(Dtype::Float16))
            .with("label", Feature::class_label(["a", "b"]).unwrap())
            .with(
                "seq",
                Feature::sequence(Feature::sequence(Feature::value(Dtype::Float32))),
            )
            .with("img", Feature::image_with(ImageFormat::Jpeg))
            .with(
                "arr",
                Feature::array(vec![2, 3, 4, 5], Dtype::UInt16).unwrap(),
            )
            .with(
                "v",
                Feature::video_with_extensions(VideoStorage::Bytes, ["MP4", ".avi"]).unwrap(),
            );
        let back = features_from_json(&features_to_json(&f)).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.fingerprint(), f.fingerprint());
    }

    #[test]
    fn rejects_garbage() {
        assert!(features_from_json(&json!([1])).is_err());
        assert!(features_from_json(&json!({"x": {"type": "Nope"}})).is_err());
        assert!(features_from_json(
            &json!({"x": {"type": "Array3D", "shape": [1, 2], "dtype": "uint8"}})
        )
        .is_err());
        assert!(features_from_json(&json!({"x": {"type": "Value", "dtype": "int7"}})).is_err());
    }
}
