//! The input pipeline: the same batches whatever the thread count, every
//! row once per epoch across ranks, exact resume, bounded memory, threads
//! gone when the consumer stops, and bad requests refused before the first
//! batch.

use std::collections::HashSet;

use shardset::pipeline::{Batch, Element, Layout, Pipeline, PipelineOptions};
use shardset::{
    open_cache, Dataset, LoaderOptions, LoaderState, Order, Partition, Remainder, WithinShard,
};

use crate::common::*;

fn scalars(n: usize) -> (tempfile::TempDir, Dataset) {
    let (tmp, dir) = f2_cache(n, 16, 200);
    (tmp, Dataset::new(open_cache(&dir).unwrap()))
}

fn loader(batch: usize, seed: u64, partition: Partition) -> LoaderOptions {
    LoaderOptions::default()
        .with_order(Order::ShardShuffle(WithinShard::Random))
        .with_seed(seed)
        .with_partition(partition)
        .try_with_batch_size(batch)
        .unwrap()
}

fn pipeline(ds: &Dataset, threads: usize, l: LoaderOptions) -> Pipeline {
    let opts = PipelineOptions::default()
        .with_loader(l)
        .try_with_threads(threads)
        .unwrap()
        .try_with_prefetch(2)
        .unwrap();
    Pipeline::new(ds.clone(), opts).unwrap()
}

fn xs(b: &Batch) -> Vec<i32> {
    let c = b.column("x").unwrap();
    assert_eq!(c.element, Element::Int32);
    c.data
        .chunks_exact(4)
        .map(|x| i32::from_ne_bytes(x.try_into().unwrap()))
        .collect()
}

fn epoch(p: &mut Pipeline) -> Vec<Batch> {
    p.by_ref().map(|b| b.unwrap()).collect()
}

#[test]
fn the_same_seed_gives_the_same_batches_at_any_thread_count() {
    let (_t, ds) = scalars(1000);
    let one: Vec<Vec<i32>> = epoch(&mut pipeline(&ds, 1, loader(32, 7, Partition::single())))
        .iter()
        .map(xs)
        .collect();
    assert_eq!(one.len(), 1000usize.div_ceil(32));
    for threads in [2, 4] {
        let got: Vec<Vec<i32>> = epoch(&mut pipeline(
            &ds,
            threads,
            loader(32, 7, Partition::single()),
        ))
        .iter()
        .map(xs)
        .collect();
        assert_eq!(got, one, "{threads} threads");
    }
    let other: Vec<Vec<i32>> = epoch(&mut pipeline(&ds, 2, loader(32, 8, Partition::single())))
        .iter()
        .map(xs)
        .collect();
    assert_ne!(other, one, "another seed, another order");
}

#[test]
fn columns_are_tensors_of_the_features_types() {
    let (_t, ds) = scalars(100);
    let b = pipeline(&ds, 2, loader(10, 0, Partition::single()))
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        b.columns
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["x", "label"]
    );
    let label = b.column("label").unwrap();
    assert_eq!(
        (label.element, label.shape.clone()),
        (Element::Int64, vec![10])
    );
    let labels: Vec<i64> = label
        .data
        .chunks_exact(8)
        .map(|x| i64::from_ne_bytes(x.try_into().unwrap()))
        .collect();
    let want: Vec<i64> = xs(&b).iter().map(|x| i64::from(*x % 2)).collect();
    assert_eq!(labels, want, "each row's label beside its x");
    assert_eq!(b.positions.len(), 10);
}

#[test]
fn every_row_once_per_epoch_across_ranks_and_threads() {
    let n = 1000;
    let (_t, ds) = scalars(n);
    for remainder in [Remainder::Partial, Remainder::DropLast, Remainder::Pad] {
        for world in [1u32, 3] {
            let mut seen = Vec::new();
            let mut per_rank = Vec::new();
            for rank in 0..world {
                let part = Partition::new(rank, world, 0, 1, remainder).unwrap();
                let mut p = pipeline(&ds, 1 + rank as usize % 3, loader(64, 3, part));
                let batches = epoch(&mut p);
                per_rank.push(batches.len());
                seen.extend(batches.iter().flat_map(xs));
            }
            let unique: HashSet<i32> = seen.iter().copied().collect();
            match remainder {
                Remainder::Partial => {
                    assert_eq!(seen.len(), n, "{remainder} × {world}");
                    assert_eq!(unique.len(), n);
                }
                Remainder::DropLast => {
                    assert_eq!(unique.len(), seen.len(), "no row twice");
                    assert!(per_rank.iter().all(|&b| b == per_rank[0]), "equal shares");
                    assert!(seen.len() > n - 64 * world as usize);
                }
                Remainder::Pad => {
                    assert_eq!(unique.len(), n, "every row read");
                    assert!(per_rank.iter().all(|&b| b == per_rank[0]), "equal shares");
                }
            }
        }
    }
}

#[test]
fn a_resume_at_any_batch_yields_exactly_the_rest() {
    let (_t, ds) = scalars(700);
    let full: Vec<Vec<i32>> = epoch(&mut pipeline(&ds, 2, loader(50, 1, Partition::single())))
        .iter()
        .map(xs)
        .collect();
    for stop in [0, 1, 5, full.len() - 1, full.len()] {
        let mut p = pipeline(&ds, 3, loader(50, 1, Partition::single()));
        let head: Vec<Vec<i32>> = p.by_ref().take(stop).map(|b| xs(&b.unwrap())).collect();
        let saved = serde_json::to_string(&p.state()).unwrap();
        drop(p);
        let mut q = pipeline(&ds, 1, loader(50, 1, Partition::single()));
        q.resume(serde_json::from_str::<LoaderState>(&saved).unwrap())
            .unwrap();
        assert_eq!(q.remaining_batches() as usize, full.len() - stop);
        let tail: Vec<Vec<i32>> = epoch(&mut q).iter().map(xs).collect();
        assert_eq!([head, tail].concat(), full, "stopped after {stop}");
    }
}

#[test]
fn a_resume_with_another_world_size_reads_the_rest_once() {
    let n = 960;
    let (_t, ds) = scalars(n);
    let r = Remainder::Partial;
    // Two ranks read 3 batches each, then three ranks read the rest.
    let mut seen = Vec::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let mut p = pipeline(
            &ds,
            2,
            loader(40, 9, Partition::new(rank, 2, 0, 1, r).unwrap()),
        );
        for b in p.by_ref().take(3) {
            seen.extend(xs(&b.unwrap()));
        }
        states.push(p.state());
    }
    let pos = LoaderState::rank_position(&states[..1]).unwrap();
    for rank in 0..3 {
        let mut p = pipeline(
            &ds,
            1,
            loader(40, 9, Partition::new(rank, 3, 0, 1, r).unwrap()),
        );
        p.resume_at(pos).unwrap();
        seen.extend(epoch(&mut p).iter().flat_map(xs));
    }
    let unique: HashSet<i32> = seen.iter().copied().collect();
    assert_eq!((seen.len(), unique.len()), (n, n));
}

#[test]
fn the_next_epoch_follows_the_end_and_differs() {
    let (_t, ds) = scalars(300);
    let mut p = pipeline(&ds, 2, loader(100, 4, Partition::single()));
    let e0: Vec<Vec<i32>> = epoch(&mut p).iter().map(xs).collect();
    assert_eq!(p.state().position.epoch, 1);
    let e1: Vec<Vec<i32>> = epoch(&mut p).iter().map(xs).collect();
    assert_eq!(e0.len(), e1.len());
    assert_ne!(e0, e1);
    p.set_epoch(0);
    let again: Vec<Vec<i32>> = epoch(&mut p).iter().map(xs).collect();
    assert_eq!(again, e0);
}

#[test]
fn every_run_ends_with_every_row_once_while_tokens_go_back_in_halves() {
    // The consumer keeps up to half the window's tokens before it gives
    // them back (all of them before it waits, so the threads work
    // meanwhile). Fewer than all of them are ever kept, so a thread can
    // always go on; this holds it over odd batch counts, windows of 2 to
    // 7, and consumers faster and slower than the threads: each run ends,
    // with every row once, within the deadline.
    let (_t, ds) = scalars(301);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        for (threads, prefetch) in [(1, 1), (1, 2), (1, 4), (2, 3), (3, 4)] {
            for slow in [false, true] {
                let opts = PipelineOptions::default()
                    .with_loader(loader(10, 3, Partition::single()))
                    .try_with_threads(threads)
                    .unwrap()
                    .try_with_prefetch(prefetch)
                    .unwrap();
                let mut p = Pipeline::new(ds.clone(), opts).unwrap();
                for _ in 0..2 {
                    let mut seen = Vec::new();
                    for b in p.by_ref() {
                        seen.extend(xs(&b.unwrap()));
                        if slow {
                            std::thread::sleep(std::time::Duration::from_micros(300));
                        }
                    }
                    seen.sort_unstable();
                    assert_eq!(seen, (0..301).collect::<Vec<i32>>(), "{threads} {prefetch}");
                }
            }
        }
        done_tx.send(()).unwrap();
    });
    let finished = done_rx.recv_timeout(std::time::Duration::from_secs(120));
    assert!(finished.is_ok(), "a pipeline run did not end within 120 s");
    worker.join().unwrap();
}

fn pipeline_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|c| c.starts_with("shardset-pipel"))
        .count()
}

#[test]
fn a_consumer_that_stops_early_leaves_no_thread_and_memory_is_bounded() {
    let (_t, ds) = scalars(5000);
    let mut p = pipeline(&ds, 3, loader(10, 0, Partition::single()));
    assert_eq!(p.batch_bytes(), 10 * (4 + 8));
    assert_eq!(p.max_bytes_in_flight(), p.batch_bytes() * (3 + 2));
    let _first = p.next().unwrap().unwrap();
    // Other tests run pipelines at the same time: their threads end too.
    drop(p);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pipeline_threads() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(pipeline_threads(), 0);
}

#[test]
fn bad_requests_are_refused_before_the_first_batch() {
    let (_t, ds) = scalars(10);
    let e = PipelineOptions::default().try_with_threads(0).unwrap_err();
    assert!(e.to_string().contains("threads"), "{e}");
    let e = PipelineOptions::default().try_with_prefetch(0).unwrap_err();
    assert!(e.to_string().contains("prefetch"), "{e}");
    let unknown = PipelineOptions::default().with_columns(["x", "nope"]);
    let e = Pipeline::new(ds.clone(), unknown).unwrap_err();
    assert!(
        e.to_string().contains("'nope'") && e.to_string().contains("x, label"),
        "{e}"
    );
    // CTHW is for video windows: an image column is refused by name, and
    // HWC puts the channels last.
    let (_t, images) = jpegs(4);
    let l = loader(2, 1, Partition::single());
    let e = Pipeline::new(images.clone(), train_ops(1, l).with_layout(Layout::Cthw)).unwrap_err();
    assert!(
        e.to_string().contains("'image'") && e.to_string().contains("CTHW"),
        "{e}"
    );
    let hwc = Pipeline::new(images, train_ops(1, l).with_layout(Layout::Hwc))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(hwc.column("image").unwrap().shape, vec![2, 24, 24, 3]);
}

/// JPEG images of several sizes (smooth gradients and a pattern) with ids.
fn jpegs(n: usize) -> (tempfile::TempDir, Dataset) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    let f = shardset::Features::new()
        .with(
            "image",
            shardset::Feature::image_with(shardset::ImageFormat::Jpeg),
        )
        .with("id", shardset::Feature::value(shardset::Dtype::Int64));
    let rows = (0..n).map(|i| {
        let (h, w) = [(40u32, 56u32), (64, 48), (33, 71)][i % 3];
        let px: Vec<u8> = (0..h * w * 3)
            .map(|k| ((k / 3 % w) * 4 + (k / 3 / w) * 3 + (k % 3) * 50 + i as u32) as u8)
            .collect();
        shardset::Example::new()
            .with("image", shardset::ImageData::new(h, w, 3, px).unwrap())
            .with("id", i as i64)
    });
    shardset::write_arrow_cache(rows, &f, &dir, &shardset::ArrowWriteOptions::default()).unwrap();
    (tmp, Dataset::new(open_cache(&dir).unwrap()))
}

fn train_ops(threads: usize, l: LoaderOptions) -> PipelineOptions {
    PipelineOptions::default()
        .with_loader(l)
        .try_with_threads(threads)
        .unwrap()
        .try_with_ops_json(
            "image",
            r#"[{"op": "random_resized_crop", "size": [24, 24]},
                {"op": "random_horizontal_flip"},
                {"op": "to_dtype", "dtype": "float32"},
                {"op": "normalize", "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.2, 0.2]}]"#,
        )
        .unwrap()
}

#[test]
fn augmented_images_are_the_same_at_any_thread_count_and_after_a_resume() {
    let (_t, ds) = jpegs(60);
    let run = |threads, l| -> Vec<Batch> {
        Pipeline::new(ds.clone(), train_ops(threads, l))
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    };
    let one = run(1, loader(8, 2, Partition::single()));
    let image = one[0].column("image").unwrap();
    assert_eq!(
        (image.element, image.shape.clone()),
        (Element::Float32, vec![8, 3, 24, 24])
    );
    for threads in [2, 4] {
        assert_eq!(
            run(threads, loader(8, 2, Partition::single())),
            one,
            "{threads} threads"
        );
    }
    // A resume after batch 3, with another thread count.
    let mut p = Pipeline::new(ds.clone(), train_ops(2, loader(8, 2, Partition::single()))).unwrap();
    let head: Vec<Batch> = p.by_ref().take(3).map(|b| b.unwrap()).collect();
    let mut q = Pipeline::new(ds.clone(), train_ops(3, loader(8, 2, Partition::single()))).unwrap();
    q.resume(p.state()).unwrap();
    let tail: Vec<Batch> = q.map(|b| b.unwrap()).collect();
    assert_eq!([head, tail].concat(), one);
    // Ranks see the same pixels for the same rows as one process does.
    let r = Remainder::Partial;
    let by_rank: Vec<Batch> = (0..2)
        .flat_map(|rank| run(2, loader(8, 2, Partition::new(rank, 2, 0, 1, r).unwrap())))
        .collect();
    let single = run(2, loader(8, 2, Partition::new(0, 1, 0, 1, r).unwrap()));
    let key = |b: &Batch| b.positions.clone();
    for b in &by_rank {
        let same = single
            .iter()
            .find(|s| key(s) == key(b))
            .expect("the same batch");
        assert_eq!(same.columns, b.columns, "the same pixels on any rank");
    }
}

#[test]
fn a_bad_image_is_a_typed_error_naming_the_column_and_the_state_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bad");
    let f = shardset::Features::new().with("image", shardset::Feature::image());
    let px = shardset::ImageData::new(4, 4, 3, vec![9; 48]).unwrap();
    let rows = (0..4).map(|i| {
        let e = shardset::Example::new();
        if i == 2 {
            e.with("image", b"\x89PNG\r\n\x1a\nnot really".to_vec())
        } else {
            e.with("image", px.clone())
        }
    });
    shardset::write_arrow_cache(rows, &f, &dir, &shardset::ArrowWriteOptions::default()).unwrap();
    let ds = Dataset::new(open_cache(&dir).unwrap());
    let opts = PipelineOptions::default()
        .with_loader(
            LoaderOptions::default()
                .with_order(Order::Sequential)
                .try_with_batch_size(1)
                .unwrap(),
        )
        .try_with_ops_json("image", r#"[{"op": "center_crop", "size": [2, 2]}]"#)
        .unwrap();
    let mut p = Pipeline::new(ds, opts).unwrap();
    assert!(p.next().unwrap().is_ok() && p.next().unwrap().is_ok());
    let before = p.state();
    let e = p.next().unwrap().unwrap_err();
    assert!(e.to_string().contains("image"), "{e}");
    assert_eq!(p.state(), before, "the failed batch is not consumed");
}

#[test]
fn buffers_given_back_are_written_over_with_the_same_results() {
    let (_t, ds) = jpegs(50);
    // Random crops, and a centre crop larger than some images (padding).
    let pad = PipelineOptions::default()
        .with_loader(loader(8, 6, Partition::single()))
        .try_with_threads(2)
        .unwrap()
        .try_with_ops_json("image", r#"[{"op": "center_crop", "size": [48, 48]}]"#)
        .unwrap();
    for opts in [train_ops(2, loader(8, 6, Partition::single())), pad] {
        let fresh: Vec<Batch> = Pipeline::new(ds.clone(), opts.clone())
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let mut p = Pipeline::new(ds.clone(), opts).unwrap();
        let pool = p.buffers();
        let mut recycled = Vec::new();
        while let Some(b) = p.next_batch() {
            let b = b.unwrap();
            recycled.push(b.clone());
            for (_, c) in b.columns {
                pool.give(c.data);
            }
            assert!(pool.held_bytes() <= p.max_bytes_in_flight());
        }
        assert!(pool.held_bytes() > 0, "buffers came back");
        assert_eq!(recycled, fresh, "a reused buffer is written over whole");
    }
}

#[cfg(feature = "s3")]
#[test]
fn a_cache_on_object_storage_gives_the_same_batches() {
    use shardset::cache::remote::publish_to_object_store;
    crate::object_storage::server();
    let (_t, local) = jpegs(40);
    let at = crate::object_storage::uri("pipeline/img");
    publish_to_object_store(local.cache_dir().unwrap(), &at).unwrap();
    let remote = Dataset::new(open_cache(&at).unwrap());
    let batches = |ds: &Dataset| -> Vec<Batch> {
        Pipeline::new(ds.clone(), train_ops(2, loader(8, 1, Partition::single())))
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    };
    assert_eq!(batches(&remote), batches(&local));
}

/// Rows are gathered from the cached batches that hold them: a null in a
/// row the view leaves out is never read, and a null the view keeps is a
/// typed error naming the column.
#[test]
fn nulls_outside_the_view_are_not_read_and_inside_it_are_named() {
    use shardset::{
        write_arrow_cache, ArrowWriteOptions, Dtype, Example, Feature, Features, Value,
    };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("c");
    let f = Features::new().with("x", Feature::value(Dtype::Int32));
    let rows = (0..100).map(|i| {
        Example::new().with(
            "x",
            if i % 10 == 3 {
                Value::Null
            } else {
                Value::Int(i)
            },
        )
    });
    write_arrow_cache(
        rows,
        &f,
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(25)
            .unwrap(),
    )
    .unwrap();
    let ds = Dataset::new(open_cache(&dir).unwrap());
    let keep: Vec<i64> = (0..100).filter(|i| i % 10 != 3).collect();
    let view = ds.select(&keep).unwrap();
    let mut p = pipeline(&view, 2, loader(16, 1, Partition::single()));
    let mut got: Vec<i32> = epoch(&mut p).iter().flat_map(xs).collect();
    got.sort();
    assert_eq!(got, keep.iter().map(|&i| i as i32).collect::<Vec<_>>());
    let mut whole = pipeline(&ds, 1, loader(16, 1, Partition::single()));
    let err = whole
        .find_map(|b| b.err())
        .expect("a null kept by the view");
    assert!(
        err.to_string().contains('x') && err.to_string().contains("null"),
        "{err}"
    );
}
