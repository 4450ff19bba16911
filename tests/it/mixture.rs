//! Mixtures: shares follow the weights and the schedule; rows of a source
//! come in its epoch orders without replacement; `exhaust` sources give
//! every row once and drop out; a state saved at any step continues the
//! same sequence (also after a weight change, and with another world size
//! or worker count); columns are checked and mapped; progress counts rows
//! and epochs.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use shardset::{
    open_cache, write_arrow_cache, write_lance_cache, ArrowWriteOptions, Dataset, DrawUnit, Dtype,
    Error, Example, Feature, Features, LanceWriteOptions, Mixture, MixtureOptions, MixtureSource,
    MixtureState, Partition, Remainder, SourceEnd,
};

fn features() -> Features {
    Features::new()
        .with("id", Feature::value(Dtype::Int64))
        .with("text", Feature::value(Dtype::String))
        .with("label", Feature::class_label(["a", "b"]).unwrap())
}

/// A cache of `n` rows whose `id` is `source * 1000 + row`.
fn source_cache(dir: &Path, source: i64, n: i64, lance: bool) -> Dataset {
    let rows = (0..n).map(move |i| {
        Example::new()
            .with("id", source * 1000 + i)
            .with("text", format!("s{source}r{i}"))
            .with("label", i % 2)
    });
    if lance {
        write_lance_cache(
            rows,
            &features(),
            dir,
            &LanceWriteOptions::default()
                .try_with_max_rows_per_file(17)
                .unwrap(),
        )
        .unwrap();
    } else {
        write_arrow_cache(
            rows,
            &features(),
            dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(8)
                .unwrap()
                .try_with_shard_size_bytes(Some(512))
                .unwrap(),
        )
        .unwrap();
    }
    Dataset::new(open_cache(dir).unwrap())
}

/// Three sources of 50, 120 and 30 rows (the second a Lance cache).
fn sources(dir: &Path) -> Vec<Dataset> {
    vec![
        source_cache(&dir.join("a"), 0, 50, false),
        source_cache(&dir.join("b"), 1, 120, true),
        source_cache(&dir.join("c"), 2, 30, false),
    ]
}

fn mixture(ds: &[Dataset], weights: [f64; 3], end: SourceEnd, opts: MixtureOptions) -> Mixture {
    let src = ds
        .iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (d, w))| MixtureSource::new(format!("s{i}"), d.clone(), w).with_end(end))
        .collect();
    Mixture::new(src, opts).unwrap()
}

fn opts(batch: u64) -> MixtureOptions {
    MixtureOptions::default()
        .try_with_batch_size(batch)
        .unwrap()
        .with_seed(11)
}

fn ids(b: &shardset::MixtureBatch) -> Vec<i64> {
    b.batch
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

/// The ids of the first `steps` batches of one consumer.
fn take_ids(m: &Mixture, part: &Partition, steps: usize) -> Vec<(u64, Vec<i64>)> {
    m.batches(part)
        .take(steps)
        .map(|b| {
            let b = b.unwrap();
            (b.step, ids(&b))
        })
        .collect()
}

#[test]
fn rows_of_each_source_come_in_epochs_without_replacement_and_shares_follow_the_weights() {
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    let m = mixture(&ds, [1.0, 2.0, 1.0], SourceEnd::Cycle, opts(32));
    let got = take_ids(&m, &Partition::single(), 200);
    assert_eq!(
        got,
        take_ids(&m, &Partition::single(), 200),
        "deterministic"
    );
    let mut per: Vec<Vec<i64>> = vec![Vec::new(); 3];
    for (step, b) in &got {
        assert_eq!(b.len(), 32, "step {step}");
        for &id in b {
            per[(id / 1000) as usize].push(id % 1000);
        }
    }
    for (s, n) in [(0usize, 50usize), (1, 120), (2, 30)] {
        let share = per[s].len() as f64 / (200.0 * 32.0);
        let want = [0.25, 0.5, 0.25][s];
        assert!((share - want).abs() < 0.03, "source {s}: share {share}");
        for (e, epoch) in per[s].chunks_exact(n).enumerate() {
            let mut sorted = epoch.to_vec();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..n as i64).collect::<Vec<_>>(),
                "source {s} epoch {e}"
            );
        }
        let first: Vec<i64> = per[s][..n].to_vec();
        assert_ne!(
            first,
            per[s][n..2 * n].to_vec(),
            "each epoch has its own order"
        );
    }
    let progress = {
        let mut m = m.clone();
        m.set_done(200, 1);
        m.progress()
    };
    for (s, p) in progress.iter().enumerate() {
        assert_eq!(p.rows_consumed, per[s].len() as u64);
        assert_eq!(p.epochs_completed, per[s].len() as u64 / [50, 120, 30][s]);
        assert!(!p.exhausted);
    }
}

#[test]
fn exhausted_sources_give_every_row_once_then_the_mixture_ends() {
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    for draw in [DrawUnit::Sample, DrawUnit::Batch] {
        let m = mixture(
            &ds,
            [5.0, 1.0, 1.0],
            SourceEnd::Exhaust,
            opts(16).with_draw(draw),
        );
        let mut all: Vec<i64> = m
            .batches(&Partition::single())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(all.len(), 200, "{draw}");
        all.sort_unstable();
        let want: Vec<i64> = (0..50).chain(1000..1120).chain(2000..2030).collect();
        assert_eq!(all, want, "{draw}: every row once");
    }
}

#[test]
fn a_state_saved_at_any_step_continues_the_same_sequence_after_a_weight_change() {
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    let mut m = mixture(&ds, [1.0, 1.0, 1.0], SourceEnd::Cycle, opts(8));
    m.set_weights(30, &[0.0, 1.0, 3.0]).unwrap();
    let whole = take_ids(&m, &Partition::single(), 80);
    for (step, b) in &whole[30..] {
        assert!(
            b.iter().all(|id| id / 1000 != 0),
            "step {step}: source 0 has weight 0"
        );
    }
    for stop in [0u64, 1, 29, 30, 31, 79] {
        let mut a = m.clone();
        a.set_done(stop, 1);
        let json = serde_json::to_string(a.state()).unwrap();
        let state: MixtureState = serde_json::from_str(&json).unwrap();
        let mut b = mixture(&ds, [1.0, 1.0, 1.0], SourceEnd::Cycle, opts(8));
        b.load_state(state, 1).unwrap();
        let rest = take_ids(&b, &Partition::single(), 80 - stop as usize);
        assert_eq!(rest, whole[stop as usize..].to_vec(), "resumed at {stop}");
    }
    // A change of an already consumed step is refused, by name.
    let mut a = m.clone();
    a.set_done(40, 1);
    match a.set_weights(39, &[1.0, 1.0, 1.0]) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("39"), "{msg}"),
        other => panic!("{other:?}"),
    }
    a.set_weights(40, &[1.0, 0.0, 0.0]).unwrap();
    let after = take_ids(&a, &Partition::single(), 5);
    assert!(after.iter().all(|(_, b)| b.iter().all(|id| id / 1000 == 0)));
}

#[test]
fn ranks_and_workers_share_the_steps_and_resume_with_another_world_size() {
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    let m = mixture(&ds, [2.0, 1.0, 1.0], SourceEnd::Cycle, opts(8));
    let whole = take_ids(&m, &Partition::single(), 60);
    // 2 ranks x 3 workers: each step exactly once, with the same rows.
    let mut got = Vec::new();
    for rank in 0..2 {
        for worker in 0..3 {
            let p = Partition::new(rank, 2, worker, 3, Remainder::Partial).unwrap();
            got.extend(take_ids(&m, &p, 10));
        }
    }
    got.sort();
    assert_eq!(got, whole);
    // 2 ranks stop after 7 batches each (step 14); 3 ranks go on.
    let mut a = m.clone();
    a.set_done(7, 2);
    let mut rest = Vec::new();
    for rank in 0..3 {
        let p = Partition::new(rank, 3, 0, 1, Remainder::Partial).unwrap();
        let mut b = m.clone();
        b.load_state(a.state().clone(), 3).unwrap();
        rest.extend(take_ids(&b, &p, 10));
    }
    rest.sort();
    assert_eq!(rest[..30].to_vec(), whole[14..44].to_vec());
}

#[test]
fn columns_are_the_common_ones_or_mapped_and_mismatches_name_the_source() {
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    let other = {
        let f = Features::new()
            .with("key", Feature::value(Dtype::Int64))
            .with("label", Feature::value(Dtype::String));
        let dir = t.path().join("other");
        write_arrow_cache(
            (0..10).map(|i| Example::new().with("key", i).with("label", "z")),
            &f,
            &dir,
            &ArrowWriteOptions::default(),
        )
        .unwrap();
        Dataset::new(open_cache(&dir).unwrap())
    };
    // Common columns: `label` differs (ClassLabel against a string).
    let src = vec![
        MixtureSource::new("a", ds[0].clone(), 1.0),
        MixtureSource::new("other", other.clone(), 1.0),
    ];
    match Mixture::new(src, opts(4)) {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("label") && m.contains("'a'") && m.contains("'other'"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Mapped: `key` read as `id`.
    let src = vec![
        MixtureSource::new("a", ds[0].clone(), 1.0).with_columns(vec![("id".into(), "id".into())]),
        MixtureSource::new("other", other.clone(), 1.0)
            .with_columns(vec![("id".into(), "key".into())]),
    ];
    let m = Mixture::new(src, opts(4)).unwrap();
    assert_eq!(m.features().names(), vec!["id".to_string()]);
    let b = m.batches(&Partition::single()).next().unwrap().unwrap();
    assert_eq!(b.batch.num_columns(), 1);
    // A mapping of a column the source lacks.
    let src = vec![
        MixtureSource::new("a", ds[0].clone(), 1.0),
        MixtureSource::new("other", other, 1.0).with_columns(vec![("id".into(), "nope".into())]),
    ];
    match Mixture::new(src, opts(4)) {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("'other'") && m.contains("nope"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // A mixture of views: a filter and a column selection are sources too.
    let evens = ds[1].filter_expr("label = 0").unwrap();
    let m = Mixture::new(
        vec![
            MixtureSource::new("evens", evens, 1.0).with_end(SourceEnd::Exhaust),
            MixtureSource::new("c", ds[2].clone(), 1.0).with_end(SourceEnd::Exhaust),
        ],
        opts(7),
    )
    .unwrap();
    let all: Vec<i64> = m
        .batches(&Partition::single())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    assert_eq!(all.len(), 60 + 30);
    assert!(all
        .iter()
        .filter(|id| **id / 1000 == 1)
        .all(|id| id % 2 == 0));
}

/// The `id` column of a pipeline batch.
fn pipeline_ids(b: &shardset::pipeline::Batch) -> Vec<i64> {
    b.column("id")
        .unwrap()
        .data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn pipeline_opts(batch: usize, threads: usize) -> shardset::pipeline::PipelineOptions {
    shardset::pipeline::PipelineOptions::default()
        .with_loader(
            shardset::LoaderOptions::default()
                .try_with_batch_size(batch)
                .unwrap(),
        )
        .try_with_threads(threads)
        .unwrap()
        .with_columns(["id", "label"])
}

#[test]
fn the_input_pipeline_reads_a_mixture_as_it_is_drawn_at_any_thread_count_and_resumes() {
    use shardset::pipeline::MixturePipeline;
    let t = tempfile::tempdir().unwrap();
    let ds = sources(t.path());
    let mut m = mixture(&ds, [2.0, 1.0, 1.0], SourceEnd::Cycle, opts(16));
    m.set_weights(20, &[0.0, 0.0, 1.0]).unwrap();
    let drawn: Vec<Vec<i64>> = take_ids(&m, &Partition::single(), 30)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    for threads in [1, 3] {
        let p = MixturePipeline::new(m.clone(), pipeline_opts(16, threads)).unwrap();
        let batches: Vec<_> = p.take(30).map(|b| b.unwrap()).collect();
        let got: Vec<Vec<i64>> = batches.iter().map(pipeline_ids).collect();
        assert_eq!(got, drawn, "{threads} threads");
        // Each row's other columns come from the same source row.
        for b in &batches {
            let labels: Vec<i64> = b
                .column("label")
                .unwrap()
                .data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let want: Vec<i64> = pipeline_ids(b).iter().map(|id| id % 1000 % 2).collect();
            assert_eq!(labels, want, "{threads} threads");
        }
    }
    // Stopped after 11 batches, resumed at another thread count.
    let mut p = MixturePipeline::new(m.clone(), pipeline_opts(16, 2)).unwrap();
    let head: Vec<Vec<i64>> = p
        .by_ref()
        .take(11)
        .map(|b| pipeline_ids(&b.unwrap()))
        .collect();
    let saved = serde_json::to_string(p.state()).unwrap();
    let mut q = MixturePipeline::new(
        mixture(&ds, [2.0, 1.0, 1.0], SourceEnd::Cycle, opts(16)),
        pipeline_opts(16, 3),
    )
    .unwrap();
    q.load_state(serde_json::from_str(&saved).unwrap()).unwrap();
    let rest: Vec<Vec<i64>> = q.take(19).map(|b| pipeline_ids(&b.unwrap())).collect();
    assert_eq!(
        [head, rest].concat(),
        drawn,
        "the schedule came with the state"
    );
    // A batch size other than the mixture's is refused by name.
    match MixturePipeline::new(m, pipeline_opts(8, 1)) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("16"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

/// A cache of rows `id = base + row`, `n` rows, in default shards.
fn id_cache(dir: &Path, base: i64, n: i64) -> Dataset {
    let rows = (0..n).map(move |i| Example::new().with("id", base + i));
    let f = Features::new().with("id", Feature::value(Dtype::Int64));
    write_arrow_cache(rows, &f, dir, &ArrowWriteOptions::default()).unwrap();
    Dataset::new(open_cache(dir).unwrap())
}

#[test]
fn a_large_source_crossing_into_its_next_epoch_resumes_exactly() {
    // A consumer resumed at a step where a large source crosses into its
    // next epoch reads what the consumer that went through it read.
    let t = tempfile::tempdir().unwrap();
    const BIG: i64 = 70_000;
    let ds = [
        id_cache(&t.path().join("big"), 0, BIG),
        id_cache(&t.path().join("small"), 1_000_000, 100),
    ];
    let make = || {
        let src = ds
            .iter()
            .zip([0.9, 0.1])
            .enumerate()
            .map(|(i, (d, w))| MixtureSource::new(format!("s{i}"), d.clone(), w))
            .collect();
        Mixture::new(src, opts(1024)).unwrap()
    };
    let m = make();
    let steps = 170;
    let whole = take_ids(&m, &Partition::single(), steps);
    let big: Vec<i64> = whole
        .iter()
        .flat_map(|(_, b)| b.iter().copied().filter(|&id| id < BIG))
        .collect();
    assert!(
        big.len() as i64 > 2 * BIG,
        "{} rows of the big source",
        big.len()
    );
    for (e, epoch) in big.chunks_exact(BIG as usize).enumerate() {
        let mut sorted = epoch.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..BIG).collect::<Vec<_>>(), "epoch {e}");
    }
    assert_ne!(big[..BIG as usize], big[BIG as usize..2 * BIG as usize]);
    // The steps where the big source crosses into another epoch.
    let mut crossings = Vec::new();
    let mut before = 0;
    for (k, (_, b)) in whole.iter().enumerate() {
        let after = before + b.iter().filter(|&&id| id < BIG).count() as i64;
        if after / BIG > before / BIG {
            crossings.push(k);
        }
        before = after;
    }
    assert_eq!(crossings.len(), 2, "{crossings:?}");
    for &k in &crossings {
        for stop in [k, k + 1] {
            let mut b = make();
            b.set_done(stop as u64, 1);
            let rest = take_ids(&b, &Partition::single(), steps - stop);
            assert_eq!(rest, whole[stop..].to_vec(), "resumed at {stop}");
        }
    }
}
