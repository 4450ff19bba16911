//! Small shared helpers: hashing, hex, a seeded RNG, directory fsync; the
//! process-wide pools and runtimes (`process`).

pub mod limits;
mod names;
mod process;

pub(crate) use names::named_enum;

#[cfg(any(feature = "lance", feature = "s3"))]
pub(crate) use process::block_on;
#[cfg(feature = "lance")]
pub(crate) use process::io_runtime;
#[cfg(any(feature = "lance", feature = "s3"))]
pub use process::ForkLocal;
pub(crate) use process::{fork_generation, in_pool};

use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SplitMix64: a tiny, fast, well-mixed PRNG whose stream is fixed forever
/// (no dependency upgrade can change a shuffle order a user has recorded).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform integer in `0..n` (Lemire's multiply-shift with rejection; n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            let t = n.wrapping_neg() % n;
            while (m as u64) < t {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            xs.swap(i, j);
        }
    }
}

/// A short random lowercase-alphanumeric suffix for temp names (unique per
/// process and call even when the clock does not move).
pub fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut rng = SplitMix64::new(
        nanos
            ^ (std::process::id() as u64).rotate_left(32)
            ^ COUNTER
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x2545_F491_4F6C_DD1D),
    );
    const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..8)
        .map(|_| A[rng.below(A.len() as u64) as usize] as char)
        .collect()
}

/// Environment variable naming a fault point at which the process aborts
/// (as if killed), for crash tests of the publish protocol.
pub const FAULT_POINT_ENV: &str = "SHARDSET_FAULT_POINT";

/// Aborts the process at the named point when `SHARDSET_FAULT_POINT` says so.
/// Costs one environment lookup; used only at the few steps of publication.
pub fn fault_point(name: &str) {
    if std::env::var_os(FAULT_POINT_ENV).is_some_and(|v| v == name) {
        std::process::abort();
    }
}

/// Memory this process can still take, in bytes: the kernel's
/// `MemAvailable` (free memory plus what the page cache can give back),
/// lowered to what the cgroup's `memory.max` leaves when one is set.
/// `None` where neither can be read (not Linux).
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })?;
    let cgroup = || -> Option<u64> {
        let max: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let current: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.current")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(max.saturating_sub(current))
    };
    Some(match cgroup() {
        Some(left) => available.min(left),
        None => available,
    })
}

/// Reads a byte size: `256MB`, `1.5GB`, `64KiB`, `1000` (bytes); the
/// suffixes K, M, G (with or without `B` or `iB`) are powers of 1024.
///
/// # Errors
/// A message saying what was not understood.
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mul) = [
        ("GIB", 1u64 << 30),
        ("MIB", 1 << 20),
        ("KIB", 1 << 10),
        ("GB", 1u64 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
        ("G", 1u64 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((t.clone(), 1));
    let v: f64 = num
        .parse()
        .map_err(|_| format!("cannot read size '{s}' (e.g. 256MB)"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("size '{s}' must be positive"));
    }
    Ok((v * mul as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("256MB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("10"), Ok(10));
        assert!(parse_bytes("-1MB").is_err());
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn shuffle_is_a_deterministic_permutation() {
        let mut a: Vec<u32> = (0..100).collect();
        SplitMix64::new(7).shuffle(&mut a);
        let mut b: Vec<u32> = (0..100).collect();
        SplitMix64::new(7).shuffle(&mut b);
        assert_eq!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
        a.sort();
        assert_eq!(a, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(1);
        for n in [1u64, 2, 3, 10, 1 << 40] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }

    /// The stream is fixed forever: these are SplitMix64's published
    /// reference outputs (Vigna's splitmix64.c) for seeds 0 and 1234567, and
    /// a shuffle computed by an independent implementation of the same
    /// algorithm (Lemire's bounded draw, Fisher-Yates from the end).
    #[test]
    fn the_stream_is_known() {
        let mut r = SplitMix64::new(0);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [
                0xe220_a839_7b1d_cdaf,
                0x6e78_9e6a_a1b9_65f4,
                0x06c4_5d18_8009_454f
            ]
        );
        let mut r = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..5).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821
            ]
        );
        let mut xs: Vec<u32> = (0..10).collect();
        SplitMix64::new(42).shuffle(&mut xs);
        assert_eq!(xs, [8, 3, 6, 5, 4, 0, 9, 2, 1, 7]);
    }

    #[test]
    fn hex_and_suffix() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        let a = random_suffix();
        assert_eq!(a.len(), 8);
        assert_ne!(a, random_suffix());
    }
}
