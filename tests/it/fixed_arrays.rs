//! Fixed-shape arrays stored as `fixed_size_binary`: no offsets buffer,
//! row i at `i * width`, the same values (and checksums, and schema
//! fingerprint) as the reference's `large_binary` storage, in both row
//! layouts, through edits, and read by pyarrow.

use std::path::Path;

use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use shardset::{
    open_cache, verify_cache, write_arrow_cache, ArrowWriteOptions, Dtype, Error, Example, Feature,
    Features, Tensor, Value,
};

use crate::common::*;

/// (name, shape, dtype) of the array columns: 2-D to 5-D, four dtypes.
const COLUMNS: &[(&str, &[usize], Dtype)] = &[
    ("a2", &[4, 4], Dtype::UInt8),
    ("a3", &[2, 3, 4], Dtype::Float32),
    ("a4", &[1, 2, 2, 2], Dtype::Int16),
    ("a5", &[1, 1, 2, 1, 3], Dtype::Bool),
];

fn features(fixed: bool) -> Features {
    let mut f = Features::new().with("i", Feature::value(Dtype::Int64));
    for (name, shape, dtype) in COLUMNS {
        let feat = if fixed {
            Feature::fixed_array(shape.to_vec(), *dtype)
        } else {
            Feature::array(shape.to_vec(), *dtype)
        };
        f.insert(*name, feat.unwrap());
    }
    f
}

/// Row `i`: every 7th row's arrays are null, the others hold values that
/// depend on the row and the element.
fn tensor(i: u64, shape: &[usize], dtype: Dtype) -> Tensor {
    let n: usize = shape.iter().product();
    let shape = shape.to_vec();
    match dtype {
        Dtype::UInt8 => {
            Tensor::from_vec(shape, (0..n).map(|k| (i as usize * 7 + k) as u8).collect())
        }
        Dtype::Float32 => {
            Tensor::from_vec(shape, (0..n).map(|k| i as f32 * 0.25 - k as f32).collect())
        }
        Dtype::Int16 => {
            Tensor::from_vec(shape, (0..n).map(|k| (k as i16 - 4) * i as i16).collect())
        }
        Dtype::Bool => Tensor::from_vec(
            shape,
            (0..n).map(|k| (i as usize + k).is_multiple_of(3)).collect(),
        ),
        other => panic!("no test values for {}", other.name()),
    }
    .unwrap()
}

fn row(i: u64) -> Example {
    let mut e = Example::new().with("i", i as i64);
    for (name, shape, dtype) in COLUMNS {
        let v: Value = if i % 7 == 3 {
            Value::Null
        } else {
            tensor(i, shape, *dtype).into()
        };
        e.set(*name, v);
    }
    e
}

fn write(dir: &Path, fixed: bool, n: u64) {
    write_arrow_cache(
        (0..n).map(row),
        &features(fixed),
        dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(8)
            .unwrap()
            .try_with_shard_size_bytes(Some(1024))
            .unwrap()
            .with_record_checksums(true),
    )
    .unwrap();
}

/// The record batches of every shard of an Arrow cache, read with arrow-rs.
fn shard_batches(dir: &Path) -> Vec<RecordBatch> {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("_metadata.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for name in meta["shard_filenames"].as_array().unwrap() {
        let f = std::fs::File::open(dir.join(name.as_str().unwrap())).unwrap();
        let r = arrow_ipc::reader::FileReader::try_new(f, None).unwrap();
        out.extend(r.map(Result::unwrap));
    }
    out
}

#[test]
fn fixed_size_arrays_have_no_offsets_and_read_as_binary_arrays_do() {
    let n = 60u64;
    let tmp = tempfile::tempdir().unwrap();
    let (fixed, binary) = (tmp.path().join("fixed"), tmp.path().join("binary"));
    write(&fixed, true, n);
    write(&binary, false, n);

    // On disk: fixed_size_binary of the shape's bytes, one values buffer
    // (no offsets); the reference's storage has offsets and values.
    let batches = shard_batches(&fixed);
    assert!(batches.len() > 1, "several batches over several shards");
    for b in &batches {
        for (name, shape, dtype) in COLUMNS {
            let width = shape.iter().product::<usize>() * dtype.byte_width().unwrap();
            let col = b.column_by_name(name).unwrap();
            assert_eq!(col.data_type(), &DataType::FixedSizeBinary(width as i32));
            assert_eq!(col.to_data().buffers().len(), 1, "{name}: values only");
        }
    }
    for b in shard_batches(&binary) {
        let col = b.column_by_name("a3").unwrap();
        assert_eq!(col.data_type(), &DataType::LargeBinary);
        assert_eq!(col.to_data().buffers().len(), 2, "offsets and values");
    }

    let (cf, cb) = (open_cache(&fixed).unwrap(), open_cache(&binary).unwrap());
    // The storage choice is described in the metadata but is not part of
    // the schema fingerprint (the reference's repr of the features).
    assert_eq!(cf.features().as_ref(), &features(true));
    assert_eq!(cb.features().as_ref(), &features(false));
    assert_eq!(
        cf.metadata.schema_fingerprint(),
        cb.metadata.schema_fingerprint()
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixed.join("_metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["features"]["a3"]["fixed_size"], true);

    // Every row, every way of reading: the values written, the same as the
    // binary-stored twin's; nulls stay null.
    for i in 0..n {
        let (gf, gb) = (
            cf.backend.get(i as i64).unwrap(),
            cb.backend.get(i as i64).unwrap(),
        );
        let want = row(i);
        for (name, _, _) in COLUMNS {
            assert_eq!(gf.get(name), want.get(name), "row {i} column {name}");
            assert_eq!(gf.get(name), gb.get(name), "row {i} column {name}");
        }
    }
    let idx: Vec<i64> = vec![59, 0, 3, 3, 17, 40, 8];
    let taken = cf.backend.take(&idx).unwrap();
    assert!(matches!(
        taken.column_by_name("a3").unwrap().data_type(),
        DataType::FixedSizeBinary(96)
    ));
    let tf = cf.backend.decoder().decode_batch(&taken).unwrap();
    let tb = cb
        .backend
        .decoder()
        .decode_batch(&cb.backend.take(&idx).unwrap())
        .unwrap();
    assert_eq!(tf.len(), idx.len());
    for (k, (a, b)) in tf.iter().zip(&tb).enumerate() {
        assert_eq!(a, b, "take position {k}");
        assert_eq!(a.get("a4"), row(idx[k] as u64).get("a4"));
    }
    let raw = cf.backend.get_raw(10).unwrap();
    let cell = raw.column_by_name("a2").unwrap();
    assert_eq!(cell.len(), 1);

    // Row checksums hash the cell's bytes: the same whichever storage.
    for dir in [&fixed, &binary] {
        assert!(verify_cache(dir).unwrap().is_ok());
        assert!(shardset::verify_checksums(dir).unwrap().is_empty());
    }
    let sums = |d: &Path| -> Vec<Vec<u8>> {
        let mut files: Vec<_> = std::fs::read_dir(d.join("_row_xxh64"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    let (sf, sb) = (sums(&fixed), sums(&binary));
    assert!(!sf.is_empty());
    // Shards hold different row counts (the fixed rows are 8 bytes
    // smaller), so compare the concatenated per-row sums.
    assert_eq!(sf.concat(), sb.concat());
}

#[test]
fn fixed_size_arrays_refuse_a_wrong_shape_and_survive_an_edit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write(&dir, true, 20);
    let before = snapshot(&dir);
    let c = open_cache(&dir).unwrap();
    let mut s = c.edit().unwrap();
    // A tensor of the wrong shape is refused when staged, naming the column.
    let err = s
        .set_cell(
            2,
            "a3",
            Tensor::from_vec(vec![3, 2, 4], vec![0f32; 24]).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Encode { column, .. } if column == "a3"),
        "{err:?}"
    );
    assert_eq!(snapshot(&dir), before, "nothing written");
    let new = tensor(99, &[2, 3, 4], Dtype::Float32);
    s.set_cell(2, "a3", new.clone()).unwrap();
    s.append(row(5)).unwrap();
    s.commit().unwrap();
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.len(), 21);
    assert_eq!(c.backend.get(2).unwrap().get("a3"), Some(&Value::from(new)));
    assert_eq!(c.backend.get(20).unwrap().get("a5"), row(5).get("a5"));
    assert!(verify_cache(&dir).unwrap().is_ok());
    assert!(shardset::verify_checksums(&dir).unwrap().is_empty());
    for b in shard_batches(&dir) {
        assert!(matches!(
            b.column_by_name("a3").unwrap().data_type(),
            DataType::FixedSizeBinary(96)
        ));
    }
}

#[cfg(feature = "lance")]
#[test]
fn fixed_size_arrays_roundtrip_in_lance() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    shardset::write_lance_cache((0..30).map(row), &features(true), &dir, &Default::default())
        .unwrap();
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.features().as_ref(), &features(true));
    for i in 0..30u64 {
        let got = c.backend.get(i as i64).unwrap();
        for (name, _, _) in COLUMNS {
            assert_eq!(got.get(name), row(i).get(name), "row {i} column {name}");
        }
    }
    let raw = c.backend.get_raw(4).unwrap();
    assert_eq!(
        raw.column_by_name("a2").unwrap().data_type(),
        &DataType::FixedSizeBinary(16)
    );
}

const PYARROW_SCRIPT: &str = r#"
import json, sys
import numpy as np, pyarrow as pa, pyarrow.ipc as ipc
d = sys.argv[1]
meta = json.load(open(d + "/_metadata.json"))
out = {"type": None, "rows": []}
for name in meta["shard_filenames"]:
    t = ipc.open_file(pa.memory_map(d + "/" + name)).read_all()
    out["type"] = str(t.schema.field("a3").type)
    for v in t.column("a3").to_pylist():
        out["rows"].append(None if v is None else
                           np.frombuffer(v, dtype="<f4").reshape(2, 3, 4).tolist())
print(json.dumps(out))
"#;

#[test]
fn pyarrow_reads_fixed_size_arrays_as_the_bytes_written() {
    require_python_module("pyarrow");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write(&dir, true, 25);
    let j = python_json(PYARROW_SCRIPT, &[&dir]);
    assert_eq!(j["type"], "fixed_size_binary[96]");
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 25);
    for (i, got) in rows.iter().enumerate() {
        match row(i as u64).get("a3").unwrap() {
            Value::Null => assert!(got.is_null(), "row {i}"),
            Value::Tensor(t) => {
                let flat: Vec<f64> = got
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|a| a.as_array().unwrap().iter())
                    .flat_map(|a| a.as_array().unwrap().iter())
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                let want: Vec<f64> = t
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as f64)
                    .collect();
                assert_eq!(flat, want, "row {i}");
            }
            other => panic!("{other:?}"),
        }
    }
}
