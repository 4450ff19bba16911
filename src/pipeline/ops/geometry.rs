//! The sizes and crop boxes of the geometric ops, computed exactly as
//! torchvision v2 computes them (its float formulas and Python's
//! round-half-to-even), so a crop lands on the same pixels as torchvision's.

use super::rng::SampleRng;

/// Python's `int(round(x))` for x >= 0 (round half to even).
fn py_round(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// (h, w) after a resize of the shorter side to `size`: the longer side is
/// `int(size * long / short)` (torchvision's `_compute_resized_output_size`).
pub(super) fn shorter_side(h: u32, w: u32, size: u32) -> (u32, u32) {
    let (short, long) = if w <= h { (w, h) } else { (h, w) };
    if short == 0 {
        return (h, w);
    }
    let new_long = (f64::from(size) * f64::from(long) / f64::from(short)) as u32;
    if w <= h {
        (new_long, size)
    } else {
        (size, new_long)
    }
}

/// The offset of a centred crop of `crop` pixels in a side of `len`:
/// `int(round((len - crop) / 2))`, or minus the leading padding
/// (`(crop - len) // 2`) where the crop is larger (torchvision pads with
/// zeros first).
pub(super) fn center_offset(len: u32, crop: u32) -> i64 {
    if crop > len {
        -(i64::from(crop - len) / 2)
    } else {
        py_round(f64::from(len - crop) / 2.0)
    }
}

/// RandomResizedCrop's box (top, left, h, w) in an image of (h, w):
/// torchvision's 10 tries of an area uniform in `scale` and an aspect ratio
/// log-uniform in `ratio`, then the centred fallback clamped to the ratio.
pub(super) fn random_resized_crop(
    h: u32,
    w: u32,
    scale: [f64; 2],
    ratio: [f64; 2],
    rng: &mut SampleRng,
) -> (u32, u32, u32, u32) {
    let area = f64::from(h) * f64::from(w);
    let (log_lo, log_hi) = (ratio[0].ln(), ratio[1].ln());
    for _ in 0..10 {
        let target = area * rng.uniform_in(scale[0], scale[1]);
        let aspect = rng.uniform_in(log_lo, log_hi).exp();
        let cw = py_round((target * aspect).sqrt());
        let ch = py_round((target / aspect).sqrt());
        if 0 < cw && cw <= i64::from(w) && 0 < ch && ch <= i64::from(h) {
            let (ch, cw) = (ch as u32, cw as u32);
            let top = rng.below(u64::from(h - ch) + 1) as u32;
            let left = rng.below(u64::from(w - cw) + 1) as u32;
            return (top, left, ch, cw);
        }
    }
    let in_ratio = f64::from(w) / f64::from(h);
    let (lo, hi) = (ratio[0].min(ratio[1]), ratio[0].max(ratio[1]));
    let (ch, cw) = if in_ratio < lo {
        ((py_round(f64::from(w) / lo) as u32).clamp(1, h.max(1)), w)
    } else if in_ratio > hi {
        (h, (py_round(f64::from(h) * hi) as u32).clamp(1, w.max(1)))
    } else {
        (h, w)
    };
    ((h - ch.min(h)) / 2, (w - cw.min(w)) / 2, ch, cw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_side_as_torchvision() {
        assert_eq!(shorter_side(375, 500, 256), (256, 341));
        assert_eq!(shorter_side(500, 375, 256), (341, 256));
        assert_eq!(shorter_side(100, 100, 50), (50, 50));
    }

    #[test]
    fn center_offsets_round_half_to_even_and_pad() {
        assert_eq!(center_offset(10, 8), 1);
        // (11 - 8) / 2 = 1.5 -> 2; (9 - 8) / 2 = 0.5 -> 0.
        assert_eq!(center_offset(11, 8), 2);
        assert_eq!(center_offset(9, 8), 0);
        assert_eq!(center_offset(5, 8), -1);
        assert_eq!(center_offset(4, 8), -2);
    }

    #[test]
    fn crops_stay_inside_and_fall_back_when_nothing_fits() {
        let mut rng = SampleRng::new(3, 0, 0);
        let mut fractions = Vec::new();
        for (h, w) in [(100, 100), (37, 300), (300, 37), (1, 1), (2, 9)] {
            for _ in 0..500 {
                let (t, l, ch, cw) =
                    random_resized_crop(h, w, [0.08, 1.0], [0.75, 4.0 / 3.0], &mut rng);
                assert!(ch >= 1 && cw >= 1 && t + ch <= h && l + cw <= w, "{h}x{w}");
                if (h, w) == (100, 100) {
                    fractions.push(f64::from(ch * cw) / 1e4);
                }
            }
        }
        // Areas roughly within scale (rounding moves them a little); their
        // mean near the middle of [0.08, 1] (about 0.54 drawn; 0.45..0.62
        // is many standard errors wide for 500 draws).
        assert!(fractions.iter().all(|&f| (0.06..=1.0).contains(&f)));
        let mean = fractions.iter().sum::<f64>() / fractions.len() as f64;
        assert!((0.45..0.62).contains(&mean), "{mean}");

        // A ratio of 10 never fits a square: the centred fallback, full width.
        let (t, l, ch, cw) = random_resized_crop(100, 100, [0.5, 1.0], [10.0, 10.0], &mut rng);
        assert_eq!((t, l, ch, cw), (45, 0, 10, 100));
        let (t, l, ch, cw) = random_resized_crop(100, 100, [0.5, 1.0], [0.1, 0.1], &mut rng);
        assert_eq!((t, l, ch, cw), (0, 45, 100, 10));
    }
}
