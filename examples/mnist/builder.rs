//! The MNIST builder: four gzipped IDX files declared as assets with their
//! published md5 checksums and two mirrors; `load` downloads a split's two
//! files (images, labels) and the generator reads them from
//! `WorkUnit::files`.

use std::io::Read;
use std::path::Path;

use shardset::download::DownloadInfo;
use shardset::error::BoxError;
use shardset::{
    DatasetBuilder, DatasetInfo, Example, ExampleStream, Feature, Features, ImageData, WorkUnit,
};

/// The mirrors torchvision uses, in order.
pub const MIRRORS: &[&str] = &[
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
];

/// The files of each split (images, then labels) and their published md5.
pub const FILES: &[(&str, &str, &str)] = &[
    (
        "train",
        "train-images-idx3-ubyte.gz",
        "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    ),
    (
        "train",
        "train-labels-idx1-ubyte.gz",
        "d53e105ee54ea40749a09fcbcd1e9432",
    ),
    (
        "test",
        "t10k-images-idx3-ubyte.gz",
        "9fb629c4189551a2d022fa330f9573f3",
    ),
    (
        "test",
        "t10k-labels-idx1-ubyte.gz",
        "ec29112dd5afa0611ce80d1b7f02629c",
    ),
];

/// MNIST from a list of mirrors, each file checked against its md5.
pub struct Mnist {
    mirrors: Vec<String>,
    md5: Vec<String>,
}

impl Mnist {
    /// The published files from the public mirrors.
    pub fn official() -> Self {
        Mnist::new(
            MIRRORS.iter().map(|m| m.to_string()).collect(),
            FILES.iter().map(|f| f.2.to_string()).collect(),
        )
    }

    /// The same files from other mirrors (base URLs ending in `/`), with
    /// the md5 of each file in [`FILES`] order.
    pub fn new(mirrors: Vec<String>, md5: Vec<String>) -> Self {
        Mnist { mirrors, md5 }
    }
}

/// Reads a gzipped IDX file: its dimensions and its bytes.
fn read_idx(path: &Path, magic: u32) -> Result<(Vec<usize>, Vec<u8>), BoxError> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path)?).read_to_end(&mut raw)?;
    let word = |i: usize| -> Result<u32, BoxError> {
        raw.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
            .ok_or_else(|| format!("{}: truncated IDX header", path.display()).into())
    };
    if word(0)? != magic {
        return Err(format!("{}: not an IDX file of magic {magic}", path.display()).into());
    }
    let ndim = (magic & 0xff) as usize;
    let dims: Vec<usize> = (1..=ndim)
        .map(|i| word(i).map(|d| d as usize))
        .collect::<Result<_, _>>()?;
    let data = raw[(1 + ndim) * 4..].to_vec();
    if data.len() != dims.iter().product::<usize>() {
        return Err(format!(
            "{}: {} data bytes for dims {dims:?}",
            path.display(),
            data.len()
        )
        .into());
    }
    Ok((dims, data))
}

impl DatasetBuilder for Mnist {
    fn name(&self) -> &str {
        "MNIST"
    }

    fn version(&self) -> &str {
        "1.0.0"
    }

    fn info(&self, _config: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo {
            features: Features::new()
                .with("image", Feature::image())
                .with("label", Feature::class_label_n(10)?),
            description: "70,000 28x28 grayscale handwritten digits".into(),
            homepage: "http://yann.lecun.com/exdb/mnist/".into(),
            citation: "LeCun, Bottou, Bengio and Haffner, Gradient-based learning applied to document recognition, 1998".into(),
            license: "CC BY-SA 3.0".into(),
        })
    }

    fn assets(&self, _config: &str) -> Result<Vec<(String, DownloadInfo)>, BoxError> {
        Ok(FILES
            .iter()
            .zip(&self.md5)
            .map(|((split, file, _), md5)| {
                let mut info = DownloadInfo::new(format!("{}{file}", self.mirrors[0]))
                    .with_checksum(format!("md5:{md5}"));
                for m in &self.mirrors[1..] {
                    info = info.with_fallback(format!("{m}{file}"));
                }
                (split.to_string(), info)
            })
            .collect())
    }

    fn generate<'a>(
        &'a self,
        _config: &'a str,
        _split: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        let (dims, pixels) = read_idx(&unit.files[0], 0x0803)?;
        let (ldims, labels) = read_idx(&unit.files[1], 0x0801)?;
        if dims.len() != 3 || ldims[0] != dims[0] {
            return Err(format!("{} images for {} labels", dims[0], ldims[0]).into());
        }
        let (h, w) = (dims[1], dims[2]);
        Ok(Box::new((0..dims[0]).map(move |i| {
            let img = ImageData::new(
                h as u32,
                w as u32,
                1,
                pixels[i * h * w..(i + 1) * h * w].to_vec(),
            )?;
            Ok((
                i.to_string(),
                Example::new()
                    .with("image", img)
                    .with("label", labels[i] as i64),
            ))
        })))
    }
}
