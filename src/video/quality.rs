//! What lossy storage costs a frame, measured against its source: PSNR
//! over the RGB samples (peak 255) and SSIM of the luma (BT.601 Y from
//! RGB) with the usual 11x11 Gaussian window (sigma 1.5, K1 0.01, K2 0.03;
//! Wang et al. 2004), mean over the valid window positions.

/// PSNR in dB of `got` against `want` (same length, 8-bit samples);
/// `f64::INFINITY` when they are equal.
///
/// # Panics
/// When the lengths differ (a caller's bug).
pub fn psnr(want: &[u8], got: &[u8]) -> f64 {
    assert_eq!(want.len(), got.len(), "psnr of buffers of different sizes");
    if want.is_empty() {
        return f64::INFINITY;
    }
    let se = squared_error(want, got);
    if se == 0 {
        return f64::INFINITY;
    }
    let mse = se as f64 / want.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

/// The summed squared error of two equally long buffers: summed in u32
/// over blocks of 2^15 samples (at most 2^15 * 255^2 < 2^32), which the
/// compiler vectorises, with AVX2 where the CPU has it (exact either way).
fn squared_error(want: &[u8], got: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { squared_error_avx2(want, got) };
    }
    squared_error_portable(want, got)
}

#[inline(always)]
fn squared_error_portable(want: &[u8], got: &[u8]) -> u64 {
    const BLOCK: usize = 1 << 15;
    want.chunks(BLOCK)
        .zip(got.chunks(BLOCK))
        .map(|(a, b)| {
            let block: u32 = a
                .iter()
                .zip(b)
                .map(|(&x, &y)| {
                    let d = i32::from(x) - i32::from(y);
                    (d * d) as u32
                })
                .sum();
            u64::from(block)
        })
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn squared_error_avx2(want: &[u8], got: &[u8]) -> u64 {
    squared_error_portable(want, got)
}

/// BT.601 luma of one RGB sample.
#[inline(always)]
fn luma_of(p: &[u8]) -> f32 {
    0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32
}

/// BT.601 luma of packed RGB.
fn luma(rgb: &[u8]) -> Vec<f32> {
    rgb.chunks_exact(3).map(luma_of).collect()
}

const WIN: usize = 11;
/// The window's centre tap.
const HALF: usize = WIN / 2;

fn gaussian() -> [f32; WIN] {
    let mut k = [0f32; WIN];
    let s = 1.5f32;
    for (i, v) in k.iter_mut().enumerate() {
        let x = i as f32 - (WIN / 2) as f32;
        *v = (-(x * x) / (2.0 * s * s)).exp();
    }
    let sum: f32 = k.iter().sum();
    k.iter_mut().for_each(|v| *v /= sum);
    k
}

/// SSIM of the luma of two packed RGB `w x h` frames. Frames smaller than
/// the window in either side are compared whole (one window over all).
///
/// The Gaussian-filtered planes are made a row at a time: the luma of a
/// row, its horizontal pass into a ring of the last eleven rows, then the
/// vertical pass of the output row those rows complete and its SSIM map,
/// so the working set stays in the CPU's caches whatever the frame size.
/// Four planes are filtered: the two means, the sum of the two second
/// moments (SSIM needs only the sum of the variances) and the covariance.
/// The taps are outermost, so each pass is a run of multiply-adds over a
/// row (the symmetric taps paired: six multiplies a sample, not eleven),
/// and every loop is vectorised (with AVX2 where the CPU has it, chosen at
/// run time; both paths give the same result).
///
/// # Panics
/// When a buffer is not `w * h * 3` bytes (a caller's bug).
pub fn ssim_rgb(want: &[u8], got: &[u8], w: usize, h: usize) -> f64 {
    assert_eq!(want.len(), w * h * 3, "ssim: frame size");
    assert_eq!(got.len(), w * h * 3, "ssim: frame size");
    if w < WIN || h < WIN {
        let (a, b) = (luma(want), luma(got));
        let (c1, c2) = ((0.01f64 * 255.0).powi(2), (0.03f64 * 255.0).powi(2));
        let n = (w * h).max(1) as f64;
        let ma = a.iter().map(|&v| v as f64).sum::<f64>() / n;
        let mb = b.iter().map(|&v| v as f64).sum::<f64>() / n;
        let (mut va, mut vb, mut cov) = (0.0, 0.0, 0.0);
        for (&x, &y) in a.iter().zip(&b) {
            let (dx, dy) = (x as f64 - ma, y as f64 - mb);
            va += dx * dx;
            vb += dy * dy;
            cov += dx * dy;
        }
        let (va, vb, cov) = (va / n, vb / n, cov / n);
        return ((2.0 * ma * mb + c1) * (2.0 * cov + c2))
            / ((ma * ma + mb * mb + c1) * (va + vb + c2));
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { ssim_windows_avx2(want, got, w, h) };
    }
    ssim_windows(want, got, w, h)
}

/// [`ssim_windows`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn ssim_windows_avx2(want: &[u8], got: &[u8], w: usize, h: usize) -> f64 {
    ssim_windows(want, got, w, h)
}

/// Lanes of the per-row sums of the SSIM map (a fixed order, so every
/// instruction set sums alike).
const LANES: usize = 8;

/// Planes filtered: the means of `a` and `b`, `a*a + b*b`, `a*b`.
const PLANES: usize = 4;

/// Mean SSIM over the valid 11x11 windows of the luma of two packed RGB
/// `w x h` frames (`w, h >= 11`).
#[inline(always)]
fn ssim_windows(want: &[u8], got: &[u8], w: usize, h: usize) -> f64 {
    let k = gaussian();
    let (c1, c2) = ((0.01f32 * 255.0).powi(2), (0.03f32 * 255.0).powi(2));
    let (ow, oh) = (w - WIN + 1, h - WIN + 1);
    // The planes of one input row, then the horizontal pass of the last
    // WIN rows: plane c of row y at `ring[(c * WIN + y % WIN) * ow..]`.
    let mut line = vec![0f32; PLANES * w];
    let mut ring = vec![0f32; PLANES * WIN * ow];
    let mut acc = vec![0f32; PLANES * ow];
    let mut map = vec![0f32; ow.next_multiple_of(LANES)];
    let mut total = 0.0f64;
    for y in 0..h {
        let (ra, rest) = line.split_at_mut(w);
        let (rb, rest) = rest.split_at_mut(w);
        let (sq, ab) = rest.split_at_mut(w);
        let pixels = y * w * 3..(y + 1) * w * 3;
        for (o, p) in ra.iter_mut().zip(want[pixels.clone()].chunks_exact(3)) {
            *o = luma_of(p);
        }
        for (o, p) in rb.iter_mut().zip(got[pixels].chunks_exact(3)) {
            *o = luma_of(p);
        }
        for (((sq, ab), &x), &y) in sq.iter_mut().zip(ab.iter_mut()).zip(&*ra).zip(&*rb) {
            (*sq, *ab) = (x * x + y * y, x * y);
        }
        let slot = y % WIN;
        for c in 0..PLANES {
            let src = &line[c * w..(c + 1) * w];
            let out = &mut ring[(c * WIN + slot) * ow..(c * WIN + slot + 1) * ow];
            for (o, &v) in out.iter_mut().zip(&src[HALF..HALF + ow]) {
                *o = k[HALF] * v;
            }
            for (i, &ki) in k[..HALF].iter().enumerate() {
                let (l, r) = (&src[i..i + ow], &src[WIN - 1 - i..WIN - 1 - i + ow]);
                for ((o, &v), &u) in out.iter_mut().zip(l).zip(r) {
                    *o += ki * (v + u);
                }
            }
        }
        // Rows y+1-WIN ..= y are in the ring: the output row they make.
        let Some(top) = (y + 1).checked_sub(WIN) else {
            continue;
        };
        for c in 0..PLANES {
            let out = &mut acc[c * ow..(c + 1) * ow];
            let row = |i: usize| {
                let s = (top + i) % WIN;
                &ring[(c * WIN + s) * ow..(c * WIN + s + 1) * ow]
            };
            for (o, &v) in out.iter_mut().zip(row(HALF)) {
                *o = k[HALF] * v;
            }
            for (i, &ki) in k[..HALF].iter().enumerate() {
                for ((o, &v), &u) in out.iter_mut().zip(row(i)).zip(row(WIN - 1 - i)) {
                    *o += ki * (v + u);
                }
            }
        }
        let (mu_a, rest) = acc.split_at(ow);
        let (mu_b, rest) = rest.split_at(ow);
        let (s_sq, s_ab) = rest.split_at(ow);
        let planes = mu_a.iter().zip(mu_b).zip(s_sq).zip(s_ab);
        for (m, (((&ma, &mb), &s_sq), &s_ab)) in map.iter_mut().zip(planes) {
            // Equal frames give exactly 1: `mm` is then `2 * ma * mb` and
            // `var` is `2 * cov`, each rounded once.
            let mm = ma * ma + mb * mb;
            let (var, cov) = (s_sq - mm, s_ab - ma * mb);
            *m = ((2.0 * ma * mb + c1) * (2.0 * cov + c2)) / ((mm + c1) * (var + c2));
        }
        // The padding past `ow` stays 0.
        let mut lanes = [0f32; LANES];
        for chunk in map.chunks_exact(LANES) {
            for (l, &v) in lanes.iter_mut().zip(chunk) {
                *l += v;
            }
        }
        total += lanes.iter().map(|&l| l as f64).sum::<f64>();
    }
    total / (ow * oh) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(w: usize, h: usize, seed: u64) -> Vec<u8> {
        let mut r = crate::util::SplitMix64::new(seed);
        (0..w * h * 3)
            .map(|i| ((i / 3 % w) * 2 + (i / 3 / w) * 3) as u8 ^ (r.next_u64() as u8 & 7))
            .collect()
    }

    #[test]
    fn psnr_follows_its_formula() {
        let a = vec![100u8; 300];
        assert_eq!(psnr(&a, &a), f64::INFINITY);
        let mut b = a.clone();
        b.iter_mut().for_each(|v| *v += 5); // MSE 25
        let want = 10.0 * (255.0f64 * 255.0 / 25.0).log10();
        assert!((psnr(&a, &b) - want).abs() < 1e-9);
        // Half the samples off by 10: MSE 50.
        let c: Vec<u8> = a
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 2 == 0 { v + 10 } else { v })
            .collect();
        let want = 10.0 * (255.0f64 * 255.0 / 50.0).log10();
        assert!((psnr(&a, &c) - want).abs() < 1e-9);
        // The largest error over more samples than one block sums: MSE 255^2.
        let (zeros, full) = (vec![0u8; 100_003], vec![255u8; 100_003]);
        assert_eq!(psnr(&zeros, &full), 0.0);
    }

    #[test]
    fn squared_errors_are_the_same_on_every_path() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        };
        for n in [0usize, 1, 31, 33, 1 << 15, (1 << 15) + 7, 230_400] {
            let a: Vec<u8> = (0..n).map(|_| next()).collect();
            let b: Vec<u8> = (0..n).map(|_| next()).collect();
            let direct: u64 = a
                .iter()
                .zip(&b)
                .map(|(&p, &q)| (i64::from(p) - i64::from(q)).pow(2) as u64)
                .sum();
            assert_eq!(squared_error(&a, &b), direct, "{n} samples");
            assert_eq!(squared_error_portable(&a, &b), direct, "{n} samples");
        }
    }

    /// The "valid" Gaussian filtering of a `w x h` image: `(w-10) x (h-10)`.
    fn blur(img: &[f32], w: usize, h: usize, k: &[f32; WIN]) -> Vec<f32> {
        let (ow, oh) = (w - WIN + 1, h - WIN + 1);
        let mut rows = vec![0f32; ow * h];
        for y in 0..h {
            for x in 0..ow {
                rows[y * ow + x] = (0..WIN).map(|i| k[i] * img[y * w + x + i]).sum();
            }
        }
        let mut out = vec![0f32; ow * oh];
        for y in 0..oh {
            for x in 0..ow {
                out[y * ow + x] = (0..WIN).map(|i| k[i] * rows[(y + i) * ow + x]).sum();
            }
        }
        out
    }

    /// The direct filter, as SSIM was computed before the fused passes
    /// (frames of at least the window's size; smaller ones take the same
    /// whole-frame branch of [`ssim_rgb`] either way).
    fn ssim_direct(want: &[u8], got: &[u8], w: usize, h: usize) -> f64 {
        assert!(w >= WIN && h >= WIN, "the reference filters whole windows");
        let (a, b) = (luma(want), luma(got));
        let (c1, c2) = ((0.01f64 * 255.0).powi(2), (0.03f64 * 255.0).powi(2));
        let k = gaussian();
        let prod =
            |x: &[f32], y: &[f32]| -> Vec<f32> { x.iter().zip(y).map(|(p, q)| p * q).collect() };
        let (mu_a, mu_b) = (blur(&a, w, h, &k), blur(&b, w, h, &k));
        let (saa, sbb, sab) = (
            blur(&prod(&a, &a), w, h, &k),
            blur(&prod(&b, &b), w, h, &k),
            blur(&prod(&a, &b), w, h, &k),
        );
        let mut total = 0.0f64;
        for i in 0..mu_a.len() {
            let (ma, mb) = (mu_a[i] as f64, mu_b[i] as f64);
            let va = saa[i] as f64 - ma * ma;
            let vb = sbb[i] as f64 - mb * mb;
            let cov = sab[i] as f64 - ma * mb;
            total += ((2.0 * ma * mb + c1) * (2.0 * cov + c2))
                / ((ma * ma + mb * mb + c1) * (va + vb + c2));
        }
        total / mu_a.len() as f64
    }

    #[test]
    fn the_fused_ssim_matches_a_direct_gaussian_filter() {
        for (w, h, seed) in [(11, 11, 1), (48, 32, 2), (97, 61, 3), (320, 240, 4)] {
            let a = frame(w, h, seed);
            let mut r = crate::util::SplitMix64::new(seed + 100);
            let b: Vec<u8> = a
                .iter()
                .map(|&v| (v as i64 + (r.next_u64() % 31) as i64 - 15).clamp(0, 255) as u8)
                .collect();
            let (fused, direct) = (ssim_rgb(&a, &b, w, h), ssim_direct(&a, &b, w, h));
            // The map in f32 rather than f64.
            assert!((fused - direct).abs() < 2e-6, "{w}x{h}: {fused} {direct}");
            assert!(fused < 1.0 && fused > 0.0);
            // The portable path gives what the AVX2 path gives.
            assert_eq!(ssim_windows(&a, &b, w, h).to_bits(), fused.to_bits());
        }
    }

    #[test]
    fn ssim_is_one_for_equal_frames_and_falls_with_noise() {
        let (w, h) = (48, 32);
        let a = frame(w, h, 1);
        // Exactly 1 (a lossless segment records 1).
        assert_eq!(ssim_rgb(&a, &a, w, h), 1.0);
        let big = frame(320, 240, 5);
        assert_eq!(ssim_rgb(&big, &big, 320, 240), 1.0);
        let mut r = crate::util::SplitMix64::new(9);
        let noisy = |amp: u64, r: &mut crate::util::SplitMix64| -> Vec<u8> {
            a.iter()
                .map(|&v| {
                    (v as i64 + (r.next_u64() % (2 * amp + 1)) as i64 - amp as i64).clamp(0, 255)
                        as u8
                })
                .collect()
        };
        let (n2, n20) = (noisy(2, &mut r), noisy(20, &mut r));
        let (s2, s20) = (ssim_rgb(&a, &n2, w, h), ssim_rgb(&a, &n20, w, h));
        assert!(s2 < 1.0 && s20 < s2 && s20 > 0.0, "{s2} {s20}");
        // A brightness shift keeps structure: SSIM stays high, PSNR drops.
        let shifted: Vec<u8> = a.iter().map(|&v| v.saturating_add(10)).collect();
        assert!(ssim_rgb(&a, &shifted, w, h) > 0.95);
        // Tiny frames are compared whole.
        let t = frame(4, 4, 3);
        assert!((ssim_rgb(&t, &t, 4, 4) - 1.0).abs() < 1e-9);
    }
}
