//! Filters as views (`Dataset::filter_expr`): random rows with nulls and
//! random nested predicates, on both row layouts, against a plain
//! three-valued evaluation; the selection kept beside a cache and read back,
//! ignored when damaged or made for another version; typed errors before any
//! row is read; sub-views evaluated and not kept.

use std::path::Path;

use proptest::prelude::*;
use shardset::{
    open_cache, verify_cache, write_arrow_cache, write_lance_cache, ArrowWriteOptions, Dataset,
    Dtype, Error, Example, Feature, Features, FilterSource, LanceWriteOptions, Value,
};

/// One row of the model: every scalar may be null.
#[derive(Debug, Clone)]
struct M {
    x: Option<i32>,
    f: Option<f64>,
    name: Option<String>,
    label: Option<i64>,
}

fn features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("f", Feature::value(Dtype::Float64))
        .with("name", Feature::value(Dtype::String))
        .with("label", Feature::class_label(["a", "b", "c"]).unwrap())
        .with("seq", Feature::sequence(Feature::value(Dtype::Int64)))
}

fn example(m: &M) -> Example {
    fn or_null<T: Into<Value>>(v: Option<T>) -> Value {
        v.map(Into::into).unwrap_or(Value::Null)
    }
    Example::new()
        .with("x", or_null(m.x))
        .with("f", or_null(m.f))
        .with("name", or_null(m.name.clone()))
        .with("label", or_null(m.label))
        .with("seq", vec![1i64, 2])
}

fn arb_row() -> impl Strategy<Value = M> {
    (
        proptest::option::weighted(0.85, -5i32..5),
        proptest::option::weighted(0.85, (-6i32..6).prop_map(|v| v as f64 * 0.5)),
        proptest::option::weighted(0.8, (0u8..4).prop_map(|k| format!("r{k}"))),
        proptest::option::weighted(0.9, 0i64..3),
    )
        .prop_map(|(x, f, name, label)| M { x, f, name, label })
}

/// A predicate: its SQL and its three-valued meaning.
#[derive(Debug, Clone)]
enum P {
    XCmp(&'static str, i32),
    FGt(f64),
    LabelIn(Vec<i64>),
    XIsNull,
    NameNotNull,
    NameEq(String),
    XBetween(i32, i32),
    And(Box<P>, Box<P>),
    Or(Box<P>, Box<P>),
    Not(Box<P>),
}

impl P {
    fn sql(&self) -> String {
        match self {
            P::XCmp(op, k) => format!("x {op} {k}"),
            P::FGt(v) => format!("f > {v:?}"),
            P::LabelIn(ks) => format!(
                "label IN ({})",
                ks.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
            P::XIsNull => "x IS NULL".into(),
            P::NameNotNull => "name IS NOT NULL".into(),
            P::NameEq(s) => format!("name = '{s}'"),
            P::XBetween(a, b) => format!("x BETWEEN {a} AND {b}"),
            P::And(a, b) => format!("({}) AND ({})", a.sql(), b.sql()),
            P::Or(a, b) => format!("({}) OR ({})", a.sql(), b.sql()),
            P::Not(a) => format!("NOT ({})", a.sql()),
        }
    }

    /// SQL's three-valued logic: None is NULL.
    fn eval(&self, m: &M) -> Option<bool> {
        match self {
            P::XCmp(op, k) => m.x.map(|x| match *op {
                "<" => x < *k,
                "<=" => x <= *k,
                "=" => x == *k,
                "!=" => x != *k,
                ">=" => x >= *k,
                _ => x > *k,
            }),
            P::FGt(v) => m.f.map(|f| f > *v),
            P::LabelIn(ks) => m.label.map(|l| ks.contains(&l)),
            P::XIsNull => Some(m.x.is_none()),
            P::NameNotNull => Some(m.name.is_some()),
            P::NameEq(s) => m.name.as_ref().map(|n| n == s),
            P::XBetween(a, b) => m.x.map(|x| *a <= x && x <= *b),
            P::And(a, b) => match (a.eval(m), b.eval(m)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            P::Or(a, b) => match (a.eval(m), b.eval(m)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            P::Not(a) => a.eval(m).map(|v| !v),
        }
    }
}

fn arb_pred() -> impl Strategy<Value = P> {
    let leaf = prop_oneof![
        (
            prop_oneof![
                Just("<"),
                Just("<="),
                Just("="),
                Just("!="),
                Just(">="),
                Just(">")
            ],
            -6i32..6
        )
            .prop_map(|(op, k)| P::XCmp(op, k)),
        (-7i32..7).prop_map(|v| P::FGt(v as f64 * 0.5)),
        proptest::collection::vec(0i64..3, 1..3).prop_map(P::LabelIn),
        Just(P::XIsNull),
        Just(P::NameNotNull),
        (0u8..5).prop_map(|k| P::NameEq(format!("r{k}"))),
        (-6i32..6, 0i32..6).prop_map(|(a, w)| P::XBetween(a, a + w)),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| P::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| P::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| P::Not(Box::new(a))),
        ]
    })
}

fn write_arrow(dir: &Path, rows: &[M]) {
    write_arrow_cache(
        rows.iter().map(example),
        &features(),
        dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(16)
            .unwrap()
            .try_with_shard_size_bytes(Some(1024))
            .unwrap(),
    )
    .unwrap();
}

/// A Lance cache of `rows`, with scalar indices on `x` and `label`: the
/// filters below push their plain terms down to them.
fn write_lance(dir: &Path, rows: &[M]) {
    write_lance_with(dir, rows, &["x", "label"]);
}

fn write_lance_with(dir: &Path, rows: &[M], indexed: &[&str]) {
    write_lance_cache(
        rows.iter().map(example),
        &features(),
        dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(23)
            .unwrap()
            .with_scalar_index(indexed.iter().map(|c| c.to_string()).collect()),
    )
    .unwrap();
}

fn open(dir: &Path) -> Dataset {
    Dataset::new(open_cache(dir).unwrap())
}

/// The `x` cells of a view, as the rows it shows.
fn xs(ds: &Dataset) -> Vec<Option<i64>> {
    (0..ds.len() as i64)
        .map(|i| ds.get(i).unwrap().get("x").unwrap().as_i64())
        .collect()
}

fn expected(rows: &[M], p: &P) -> Vec<u64> {
    (0..rows.len() as u64)
        .filter(|&i| p.eval(&rows[i as usize]) == Some(true))
        .collect()
}

fn physical(ds: &Dataset) -> Vec<u64> {
    (0..ds.len() as i64)
        .map(|i| ds.physical_index(i).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Random rows and predicates on both layouts: the rows kept are those
    /// whose predicate is true; the first call evaluates (or pushes down to
    /// Lance), the second reads the kept selection and gives the same rows.
    #[test]
    fn filters_keep_the_rows_whose_predicate_is_true(
        rows in proptest::collection::vec(arb_row(), 1..120),
        preds in proptest::collection::vec(arb_pred(), 6),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let arrow = tmp.path().join("arrow");
        let lance = tmp.path().join("lance");
        write_arrow(&arrow, &rows);
        write_lance(&lance, &rows);
        for (dir, first) in [(&arrow, FilterSource::Evaluated), (&lance, FilterSource::LanceScan)] {
            let mut seen = std::collections::HashSet::new();
            for p in &preds {
                let want = expected(&rows, p);
                let (v, rep) = open(dir).filter_expr_report(&p.sql()).unwrap();
                prop_assert_eq!(physical(&v), want.clone(), "{} on {}", p.sql(), dir.display());
                // A filter drawn twice in one case is kept since its first time.
                let source = if seen.insert(p.sql()) { first } else { FilterSource::Kept };
                prop_assert_eq!(rep.source, source);
                prop_assert_eq!(rep.rows_kept, want.len() as u64);
                prop_assert_eq!(rep.rows_in, rows.len() as u64);
                let wx: Vec<Option<i64>> =
                    want.iter().map(|&i| rows[i as usize].x.map(i64::from)).collect();
                prop_assert_eq!(xs(&v), wx);
                let (again, rep2) = open(dir).filter_expr_report(&p.sql()).unwrap();
                prop_assert_eq!(rep2.source, FilterSource::Kept, "{}", p.sql());
                prop_assert_eq!(physical(&again), want);
            }
            let rep = verify_cache(dir).unwrap();
            prop_assert!(rep.damage.is_empty(), "{:?}", rep.damage);
        }
    }
}

fn rows_n(n: usize) -> Vec<M> {
    (0..n)
        .map(|i| M {
            x: (i % 7 != 3).then_some(i as i32),
            f: Some(i as f64 * 0.25),
            name: Some(format!("r{}", i % 4)),
            label: Some((i % 3) as i64),
        })
        .collect()
}

#[test]
fn bad_filters_are_typed_errors_naming_the_filter_before_any_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write_arrow(&dir, &rows_n(30));
    let ds = open(&dir);
    for (filter, says) in [
        ("   ", "empty"),
        ("x >", "x >"),
        ("nope = 1", "nope"),
        ("seq IS NULL", "Sequence"),
        ("x + 1", "not true or false"),
    ] {
        match ds.filter_expr(filter) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains(says), "{filter:?}: {m}");
                if !filter.trim().is_empty() {
                    assert!(m.contains(filter.trim()), "names the filter: {m}");
                }
            }
            other => panic!("{filter:?}: {other:?}"),
        }
    }
    assert!(
        !dir.join("_selections").exists(),
        "nothing kept for a bad filter"
    );
}

#[test]
fn a_damaged_selection_is_ignored_and_an_edit_makes_a_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    let rows = rows_n(200);
    write_arrow(&dir, &rows);
    let (v, rep) = open(&dir)
        .filter_expr_report("label = 1 AND x > 20")
        .unwrap();
    let want: Vec<u64> = (0..200u64)
        .filter(|&i| i % 3 == 1 && i > 20 && i % 7 != 3)
        .collect();
    assert_eq!(physical(&v), want);
    let kept = rep
        .kept_at
        .expect("a whole local cache keeps its selection");
    assert!(kept.starts_with(dir.join("_selections")));
    // A flipped byte: ignored, evaluated again, the file written anew.
    let mut bytes = std::fs::read(&kept).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&kept, &bytes).unwrap();
    let (v, rep) = open(&dir)
        .filter_expr_report("label = 1 AND x > 20")
        .unwrap();
    assert_eq!(rep.source, FilterSource::Evaluated);
    assert_eq!(physical(&v), want);
    let (_, rep) = open(&dir)
        .filter_expr_report("label = 1 AND x > 20")
        .unwrap();
    assert_eq!(rep.source, FilterSource::Kept);
    // An edit makes a new version: its rows are filtered anew, and the
    // old version's selections go when the new one is kept.
    let cache = open_cache(&dir).unwrap();
    let mut st = cache.edit().unwrap();
    st.set_cell(0, "label", 1i64).unwrap();
    st.set_cell(0, "x", 1000i32).unwrap();
    st.commit().unwrap();
    let (v, rep) = open(&dir)
        .filter_expr_report("label = 1 AND x > 20")
        .unwrap();
    assert_eq!(rep.source, FilterSource::Evaluated);
    let mut want2 = vec![0];
    want2.extend(&want);
    assert_eq!(physical(&v), want2);
    let versions: Vec<_> = std::fs::read_dir(dir.join("_selections"))
        .unwrap()
        .collect();
    assert_eq!(
        versions.len(),
        1,
        "only the current version's selections stay"
    );
    let rep = verify_cache(&dir).unwrap();
    assert!(rep.damage.is_empty(), "{:?}", rep.damage);
}

#[test]
fn a_sub_view_is_filtered_in_view_order_and_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    write_lance(&dir, &rows_n(100));
    let ds = open(&dir).shuffle(7).slice(10, 50).unwrap();
    let (v, rep) = ds.filter_expr_report("label = 2").unwrap();
    assert_eq!(rep.source, FilterSource::Evaluated);
    assert!(rep.kept_at.is_none() && rep.not_kept.is_some(), "{rep:?}");
    let want: Vec<u64> = physical(&ds).into_iter().filter(|i| i % 3 == 2).collect();
    assert!(!want.is_empty());
    assert_eq!(physical(&v), want, "view order kept");
    assert!(!dir.join("_selections").exists());
    // Filters compose: a filter of a filtered view.
    let both = open(&dir)
        .filter_expr("label = 2")
        .unwrap()
        .filter_expr("x < 50")
        .unwrap();
    let want: Vec<u64> = (0..50u64).filter(|i| i % 3 == 2 && i % 7 != 3).collect();
    assert_eq!(physical(&both), want);
}

/// A filter's plain terms are pushed down to Lance's scanner: with a scalar
/// index on their column the scan reads only the rows the index selects;
/// without one it reads every row. The rows kept are the same, and terms
/// under `NOT`/`OR` are never handed to Lance (their rows are still right).
#[test]
fn a_filter_on_an_indexed_lance_column_reads_only_the_rows_it_keeps() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = rows_n(20_000);
    let (indexed, plain) = (tmp.path().join("indexed"), tmp.path().join("plain"));
    write_lance_with(&indexed, &rows, &["x"]);
    write_lance_with(&plain, &rows, &[]);
    let sql = "x < 300 AND label = 1";
    let want: Vec<u64> = (0..rows.len() as u64)
        .filter(|&i| {
            let r = &rows[i as usize];
            r.x.is_some_and(|x| x < 300) && r.label == Some(1)
        })
        .collect();
    let (v, rep) = open(&indexed).filter_expr_report(sql).unwrap();
    assert_eq!(rep.source, FilterSource::LanceScan);
    assert_eq!(physical(&v), want);
    let scanned = rep.rows_scanned.unwrap();
    assert!(
        scanned <= 300,
        "the index should select at most 300 rows; {scanned} read"
    );
    let (v, rep) = open(&plain).filter_expr_report(sql).unwrap();
    assert_eq!(physical(&v), want);
    assert_eq!(rep.rows_scanned, Some(20_000), "no index: every row read");
    // Nothing under NOT or OR is pushed down: every row is read, and a
    // NULL x is not kept (SQL: NOT (NULL IN (...)) is NULL).
    let sql = "NOT (x IN (1)) OR NOT (x IN (0))";
    let (v, rep) = open(&indexed).filter_expr_report(sql).unwrap();
    assert_eq!(rep.rows_scanned, Some(20_000));
    let want: Vec<u64> = (0..rows.len() as u64)
        .filter(|&i| rows[i as usize].x.is_some())
        .collect();
    assert_eq!(physical(&v), want);
}

#[test]
fn a_scalar_index_on_a_column_that_cannot_have_one_is_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    for (column, why) in [("seq", "Sequence"), ("nope", "no column 'nope'")] {
        let dir = tmp.path().join(column);
        let e = write_lance_cache(
            rows_n(10).iter().map(example),
            &features(),
            &dir,
            &LanceWriteOptions::default().with_scalar_index(vec![column.to_string()]),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(msg.contains("scalar_index") && msg.contains(why), "{msg}");
        assert!(!dir.exists(), "nothing is published");
    }
}
