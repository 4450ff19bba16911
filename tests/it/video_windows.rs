//! Windows of a frames cache read in batches: the loader's shard-shuffled
//! windows, and window batches stacking the same frames as single windows
//! (helpers in `video.rs`).

use shardset::layouts::backend::Backend;
use shardset::{open_cache_with, Dataset, Error, OpenOptions, Value, WindowSpec};

use crate::common::golden_copy;

#[test]
fn the_loader_reads_windows_shard_shuffled() {
    use shardset::{Loader, LoaderOptions, Order, Partition, Remainder, WithinShard};
    let (_t, dir) = golden_copy("lance_video_frames");
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 1, 3).unwrap()),
    )
    .unwrap();
    let ds = Dataset::new(c);
    let mut seen = Vec::new();
    for worker in 0..3 {
        let loader = Loader::new(
            ds.clone(),
            LoaderOptions::default()
                .with_order(Order::ShardShuffle(WithinShard::Random))
                .with_seed(3)
                .with_partition(Partition::new(0, 1, worker, 3, Remainder::Partial).unwrap())
                .try_with_batch_size(2)
                .unwrap(),
        );
        for batch in loader {
            for row in batch.unwrap() {
                let Value::Tensor(t) = row.get("video").unwrap() else {
                    panic!()
                };
                assert_eq!(t.shape[0], 4);
                seen.push(row.get("sample_idx").unwrap().as_i64().unwrap());
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        (0..9).collect::<Vec<_>>(),
        "every window once across the three workers"
    );
}

#[test]
fn window_batches_stack_the_same_frames_as_single_windows() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 1, 3).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    // Golden videos differ in size, so stack windows of one video at a time,
    // in a scrambled order with a repeat and a negative index.
    let n = be.len() as i64;
    let by_video = |v: usize| -> Vec<i64> {
        (0..n)
            .filter(|&i| be.window(i).unwrap().video_idx == v)
            .collect()
    };
    for v in 0..be.metadata().videos.len() {
        let mut idx = by_video(v);
        if idx.is_empty() {
            continue;
        }
        idx.reverse();
        idx.push(idx[0]);
        if idx[0] == n - 1 {
            idx.push(-1);
        }
        let b = be.windows_batch(&idx).unwrap();
        let singles = be.windows(&idx).unwrap();
        let (t, h, w) = (
            singles[0].frames.shape[0],
            singles[0].frames.shape[1],
            singles[0].frames.shape[2],
        );
        assert_eq!(b.frames.shape, vec![idx.len(), t, h, w, 3]);
        let per = t * h * w * 3;
        for (k, s) in singles.iter().enumerate() {
            assert_eq!(&b.frames.data[k * per..(k + 1) * per], &s.frames.data[..]);
            assert_eq!(b.video_idx[k], s.video_idx);
            assert_eq!(b.start_frame[k], s.start_frame);
            assert_eq!(b.frame_indices[k], s.frame_indices);
            assert_eq!(b.sample_idx[k], s.sample_idx);
        }
    }
    // Windows of videos of different sizes do not stack: a typed error.
    let sizes: std::collections::BTreeSet<(u64, u64)> =
        be.metadata().videos.iter().map(|v| (v.w, v.h)).collect();
    if sizes.len() > 1 {
        let e = be.windows_batch(&(0..n).collect::<Vec<_>>()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("cannot share")),
            "{e}"
        );
    }
    assert!(matches!(
        be.windows_batch(&[n]),
        Err(Error::IndexOutOfRange { .. })
    ));
    let empty = be.windows_batch(&[]).unwrap();
    assert_eq!(empty.frames.shape[0], 0);
}
