//! The order of an epoch's rows: sequential, a uniform permutation,
//! shard-aware (shards in a random order, each shard's rows together), or
//! block-aware (a shard's rows cut into blocks of at most so many rows, the
//! blocks of every shard in one random order, each block's rows shuffled:
//! FFCV's quasi-random and mosaic's block shuffles make the same trade), a
//! pure function of `(order, seed, epoch)` so that every process computes
//! the same one without talking to the others.
//!
//! A block shuffle keeps a batch's rows within one block of the cache: its
//! reads stay in a few pages or one range request, and so do the consumer's
//! own look-ups by row id (a loss table, a counter of ids seen), where a
//! full shuffle of a large shard scatters both over the whole shard.

use std::num::NonZeroU32;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::dataset::{Dataset, View};
use crate::error::{Error, Result};
use crate::util::SplitMix64;

/// Order of rows within a shard for [`Order::ShardShuffle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WithinShard {
    /// Rows of a shard in a random order.
    Random,
    /// Rows of a shard in storage order (best locality).
    Sequential,
}

/// How an epoch orders the dataset's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Order {
    /// View order, every epoch.
    Sequential,
    /// A uniform random permutation per epoch.
    Random,
    /// Shards in a random order per epoch, each shard's rows together
    /// (shuffled or not): random enough for SGD, and reads stay within one
    /// shard at a time.
    ShardShuffle(WithinShard),
    /// Each shard's rows cut into blocks of at most this many consecutive
    /// rows; the blocks of all shards in a random order per epoch, each
    /// block's rows shuffled. Spelled `block-shuffle:<rows>`.
    BlockShuffle(NonZeroU32),
}

impl Order {
    /// Every order with its name, in the one spelling the CLI, Python and
    /// serialised states use.
    pub const NAMES: [(&'static str, Order); 4] = [
        ("sequential", Order::Sequential),
        ("random", Order::Random),
        ("shard-shuffle", Order::ShardShuffle(WithinShard::Random)),
        (
            "shard-sequential",
            Order::ShardShuffle(WithinShard::Sequential),
        ),
    ];

    /// The name of a block shuffle, before `:<rows>`.
    pub const BLOCK_SHUFFLE: &'static str = "block-shuffle";

    /// The order's name (see [`Order::NAMES`]; a block shuffle's is
    /// [`Order::BLOCK_SHUFFLE`], its block size apart).
    pub fn name(self) -> &'static str {
        if let Order::BlockShuffle(_) = self {
            return Order::BLOCK_SHUFFLE;
        }
        Order::NAMES
            .iter()
            .find(|(_, o)| *o == self)
            .map(|(n, _)| *n)
            .expect("every order is named")
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Order::BlockShuffle(rows) => write!(f, "{}:{rows}", Order::BLOCK_SHUFFLE),
            _ => f.write_str(self.name()),
        }
    }
}

impl std::str::FromStr for Order {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Some(rows) = s
            .strip_prefix(Order::BLOCK_SHUFFLE)
            .and_then(|r| r.strip_prefix(':'))
        {
            // One spelling: the digits of a whole number ≥ 1, no sign, no
            // leading zero, so that equal orders have equal names.
            return rows
                .parse::<NonZeroU32>()
                .ok()
                .filter(|n| n.to_string() == rows)
                .map(Order::BlockShuffle)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "a block shuffle's block is a number of rows from 1 to {}, written \
                         without sign or leading zeros (e.g. '{}:65536'), got '{s}'",
                        u32::MAX,
                        Order::BLOCK_SHUFFLE
                    ))
                });
        }
        Order::NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, o)| *o)
            .ok_or_else(|| {
                let names: Vec<&str> = Order::NAMES.iter().map(|(n, _)| *n).collect();
                Error::InvalidArgument(format!(
                    "order must be one of {} or {}:<rows>, got '{s}'",
                    names.join(", "),
                    Order::BLOCK_SHUFFLE
                ))
            })
    }
}

fn epoch_rng(seed: u64, epoch: u64) -> SplitMix64 {
    // Two rounds of mixing so that nearby (seed, epoch) pairs give unrelated streams.
    let mut m = SplitMix64::new(seed ^ 0x5851_F42D_4C95_7F2D);
    let a = m.next_u64();
    let mut e = SplitMix64::new(a ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    SplitMix64::new(e.next_u64())
}

/// The groups of view positions that share a physical shard, in shard order.
fn shard_groups(ds: &Dataset) -> Vec<Vec<u64>> {
    let counts = ds.backend().shard_row_counts();
    let mut starts = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0u64;
    starts.push(0);
    for &c in counts {
        acc += c;
        starts.push(acc);
    }
    let n = ds.len();
    if counts.is_empty() {
        return vec![(0..n).collect()];
    }
    match ds.view() {
        View::All(_) | View::Range { .. } => {
            let (lo, hi) = match ds.view() {
                View::Range { start, len } => (*start, start + len),
                _ => (0, n),
            };
            (0..counts.len())
                .filter_map(|s| {
                    let (a, b) = (starts[s].max(lo), starts[s + 1].min(hi));
                    (a < b).then(|| (a - lo..b - lo).collect())
                })
                .collect()
        }
        View::Indices(_) => {
            let mut groups: Vec<Vec<u64>> = vec![Vec::new(); counts.len()];
            for p in 0..n {
                let phys = ds.view().physical(p);
                let s = starts.partition_point(|&x| x <= phys) - 1;
                groups[s].push(p);
            }
            groups.retain(|g| !g.is_empty());
            groups
        }
    }
}

/// Computes epoch orders of a dataset view (a clone shares its groups).
#[derive(Debug, Clone)]
pub struct Sampler {
    order: Order,
    seed: u64,
    n: u64,
    groups: Arc<[Vec<u64>]>,
}

impl Sampler {
    /// A sampler over `ds` (its shard groups are computed once).
    pub fn new(ds: &Dataset, order: Order, seed: u64) -> Self {
        let groups = match order {
            Order::ShardShuffle(_) => shard_groups(ds),
            Order::BlockShuffle(rows) => shard_groups(ds)
                .iter()
                .flat_map(|g| g.chunks(rows.get() as usize).map(<[u64]>::to_vec))
                .collect(),
            _ => Vec::new(),
        };
        Sampler {
            order,
            seed,
            n: ds.len(),
            groups: groups.into(),
        }
    }

    /// Rows per epoch.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True for an empty dataset.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The view positions of one epoch, a permutation of `0..len`.
    pub fn epoch_order(&self, epoch: u64) -> Vec<u64> {
        let mut rng = epoch_rng(self.seed, epoch);
        match self.order {
            Order::Sequential => (0..self.n).collect(),
            Order::Random => {
                let mut p: Vec<u64> = (0..self.n).collect();
                rng.shuffle(&mut p);
                p
            }
            Order::ShardShuffle(_) | Order::BlockShuffle(_) => {
                let within = match self.order {
                    Order::ShardShuffle(w) => w,
                    _ => WithinShard::Random,
                };
                let mut idx: Vec<usize> = (0..self.groups.len()).collect();
                rng.shuffle(&mut idx);
                let mut out = Vec::with_capacity(self.n as usize);
                for g in idx {
                    let start = out.len();
                    out.extend_from_slice(&self.groups[g]);
                    if within == WithinShard::Random {
                        rng.shuffle(&mut out[start..]);
                    }
                }
                out
            }
        }
    }
}
