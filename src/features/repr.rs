//! Python `repr` of features, byte for byte as the reference prints them.
//!
//! The schema fingerprint is `sha256(repr(dict(features)))[:16]`, so every
//! quote, space and comma here is part of the on-disk contract.

use super::{Feature, Features, VideoStorage, DEFAULT_VIDEO_EXTENSIONS};

/// `repr(dict(features))`.
pub fn features_repr(features: &Features) -> String {
    let mut out = String::from("{");
    for (i, (name, f)) in features.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&py_str(name));
        out.push_str(": ");
        out.push_str(&feature_repr(f));
    }
    out.push('}');
    out
}

/// `repr(feature)`.
pub fn feature_repr(f: &Feature) -> String {
    match f {
        Feature::Value(d) => format!("Value({})", py_str(d.name())),
        Feature::ClassLabel(c) => {
            if !c.is_known() {
                // Inferred from a reference cache: the names were never stored.
                "ClassLabel(num_classes=?)".to_string()
            } else if c.num_classes() <= 5 {
                let names: Vec<String> = c.names().iter().map(|n| py_str(n)).collect();
                format!("ClassLabel(names=[{}])", names.join(", "))
            } else {
                format!("ClassLabel(num_classes={})", c.num_classes())
            }
        }
        Feature::Sequence(inner) => format!("Sequence({})", feature_repr(inner)),
        Feature::Image(fmt) => format!("Image(encode_format={})", py_str(fmt.as_str())),
        Feature::Array(a) if a.shape.is_empty() => format!("Array{}D(shape=?, dtype=?)", a.ndim),
        Feature::Array(a) => {
            let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
            let shape = if dims.len() == 1 {
                format!("({},)", dims[0])
            } else {
                format!("({})", dims.join(", "))
            };
            format!(
                "Array{}D(shape={}, dtype={})",
                a.ndim,
                shape,
                py_str(a.dtype.name())
            )
        }
        Feature::Video(v) => {
            let default = v.allowed_extensions.len() == DEFAULT_VIDEO_EXTENSIONS.len()
                && v.allowed_extensions
                    .iter()
                    .zip(DEFAULT_VIDEO_EXTENSIONS)
                    .all(|(a, b)| a == b);
            if v.storage == VideoStorage::Path && default {
                "Video(storage='path')".to_string()
            } else {
                let exts: Vec<String> = v.allowed_extensions.iter().map(|e| py_str(e)).collect();
                let tuple = if exts.len() == 1 {
                    format!("({},)", exts[0])
                } else {
                    format!("({})", exts.join(", "))
                };
                format!(
                    "Video(storage={}, allowed_extensions={})",
                    py_str(v.storage.as_str()),
                    tuple
                )
            }
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and
/// no double quote; backslash escapes for quotes, `\\`, `\t`, `\n`, `\r`, and
/// `\xNN` / `\uNNNN` / `\UNNNNNNNN` for non-printable characters.
pub fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let v = c as u32;
                if v <= 0xff {
                    out.push_str(&format!("\\x{v:02x}"));
                } else if v <= 0xffff {
                    out.push_str(&format!("\\u{v:04x}"));
                } else {
                    out.push_str(&format!("\\U{v:08x}"));
                }
            }
        }
    }
    out.push(quote);
    out
}

/// An approximation of Python's `str.isprintable` for one character: control
/// characters, separators other than the ASCII space, and unassigned
/// surrogate-like ranges are escaped.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() {
        return false;
    }
    // Unicode separators (Zl, Zp, Zs other than ' ') and common format characters.
    !matches!(c as u32,
        0x00a0 | 0x00ad | 0x1680 | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064
        | 0x3000 | 0xfeff | 0xfff9..=0xfffb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_string_repr() {
        assert_eq!(py_str("abc"), "'abc'");
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_str("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_str("tab\there"), "'tab\\there'");
        assert_eq!(py_str("back\\slash"), "'back\\\\slash'");
        assert_eq!(py_str("\u{1}"), "'\\x01'");
        assert_eq!(py_str("été"), "'été'");
    }
}
