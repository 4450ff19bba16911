//! Whole-plan tests: pixels and encoded bytes through every op to the
//! output buffer.

use super::plan::{ImagePlan, Placement};
use super::rng::SampleRng;
use super::spec::{Op, OutDtype, ResizeTo};
use crate::error::Error;
use crate::features::image as codec;
use crate::features::limits::DecodeLimits;
use crate::features::ImageFormat;
use crate::value::ImageData;

/// A smooth, photograph-like RGB image (gradients and slow waves).
fn photo(h: u32, w: u32) -> ImageData {
    let mut data = Vec::with_capacity((h * w * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let (fy, fx) = (f64::from(y) / f64::from(h), f64::from(x) / f64::from(w));
            data.push((255.0 * fx) as u8);
            data.push((127.0 + 120.0 * (6.0 * fy).sin() * (4.0 * fx).cos()) as u8);
            data.push((255.0 * fy * (1.0 - fx)) as u8);
        }
    }
    ImageData::new(h, w, 3, data).unwrap()
}

fn plan(ops: &[Op]) -> ImagePlan {
    ImagePlan::new("img", ops).unwrap()
}

fn run(plan: &ImagePlan, img: &ImageData, seed: u64) -> Vec<u8> {
    let params = plan.draw(img.height, img.width, &mut SampleRng::new(seed, 0, 0));
    let mut out = vec![0u8; plan.out_bytes()];
    plan.run_pixels(img, &params, Placement::Hwc, &mut out)
        .unwrap();
    out
}

fn rrc() -> Op {
    Op::RandomResizedCrop {
        size: [24, 24],
        scale: [0.08, 1.0],
        ratio: [0.75, 4.0 / 3.0],
    }
}

#[test]
fn same_key_same_bytes_other_position_other_params() {
    let jpeg = codec::encode(&photo(96, 128), ImageFormat::Jpeg).unwrap();
    let p = plan(&[
        rrc(),
        Op::RandomHorizontalFlip { p: 0.5 },
        Op::ToDtype {
            dtype: OutDtype::Float32,
            scale: true,
        },
    ]);
    let limits = DecodeLimits::default();
    let encoded = |position| {
        let mut out = vec![0u8; p.out_bytes()];
        let mut rng = SampleRng::new(5, 1, position);
        p.run_encoded(&jpeg, &limits, &mut rng, Placement::Hwc, &mut out)
            .unwrap();
        out
    };
    assert_eq!(encoded(3), encoded(3));
    assert_ne!(encoded(3), encoded(4));
    let draw = |position| p.draw(96, 128, &mut SampleRng::new(5, 1, position));
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

#[test]
fn flip_mirrors_exactly_and_same_size_ops_are_identity() {
    let img = photo(12, 16);
    let crop = Op::CenterCrop { size: [10, 13] };
    let plain = run(&plan(std::slice::from_ref(&crop)), &img, 0);
    let flipped = run(&plan(&[crop, Op::RandomHorizontalFlip { p: 1.0 }]), &img, 0);
    for y in 0..10 {
        for x in 0..13 {
            let a = &plain[(y * 13 + x) * 3..][..3];
            let b = &flipped[(y * 13 + 12 - x) * 3..][..3];
            assert_eq!(a, b);
        }
    }
    let never = run(
        &plan(&[
            Op::CenterCrop { size: [10, 13] },
            Op::RandomHorizontalFlip { p: 0.0 },
        ]),
        &img,
        0,
    );
    assert_eq!(never, plain);
    assert_eq!(
        run(&plan(&[Op::CenterCrop { size: [12, 16] }]), &img, 0),
        img.data
    );
    let same = Op::Resize {
        size: ResizeTo::Exact([12, 16]),
    };
    assert_eq!(run(&plan(&[same]), &img, 0), img.data);
    // Centre crop then resize reads the crop's own pixels.
    let shrunk = run(
        &plan(&[
            Op::CenterCrop { size: [12, 12] },
            Op::Resize {
                size: ResizeTo::Exact([6, 6]),
            },
        ]),
        &img,
        0,
    );
    assert_eq!(shrunk.len(), 6 * 6 * 3);
}

#[test]
fn center_crop_larger_than_the_image_pads_with_zeros() {
    let img = ImageData::new(2, 2, 3, vec![9; 12]).unwrap();
    let out = run(&plan(&[Op::CenterCrop { size: [4, 3] }]), &img, 0);
    // Padding: one row above and below; no column on the left, one on the right.
    let px = |y: usize, x: usize| out[(y * 3 + x) * 3];
    assert_eq!(
        [px(0, 0), px(1, 0), px(1, 1), px(1, 2), px(3, 0)],
        [0, 9, 9, 0, 0]
    );
}

#[test]
fn grey_and_rgba_become_three_channels() {
    let p = plan(&[Op::CenterCrop { size: [1, 2] }]);
    let grey = ImageData::new(1, 2, 1, vec![7, 8]).unwrap();
    assert_eq!(run(&p, &grey, 0), [7, 7, 7, 8, 8, 8]);
    let grey_alpha = ImageData::new(1, 2, 2, vec![7, 0, 8, 255]).unwrap();
    assert_eq!(run(&p, &grey_alpha, 0), [7, 7, 7, 8, 8, 8]);
    let rgba = ImageData::new(1, 2, 4, vec![1, 2, 3, 0, 4, 5, 6, 9]).unwrap();
    assert_eq!(run(&p, &rgba, 0), [1, 2, 3, 4, 5, 6]);
    let resized = plan(&[Op::Resize {
        size: ResizeTo::Exact([3, 3]),
    }]);
    let big_grey = ImageData::new(6, 6, 1, vec![50; 36]).unwrap();
    assert_eq!(run(&resized, &big_grey, 0), vec![50; 27]);
}

#[test]
fn float_values_into_planes_with_a_stride() {
    // One 1x2 frame of a [C, T=2, H, W] clip, frame 1: out starts at element 2.
    let img = ImageData::new(1, 2, 3, vec![0, 51, 255, 255, 102, 0]).unwrap();
    let p = plan(&[
        Op::CenterCrop { size: [1, 2] },
        Op::ToDtype {
            dtype: OutDtype::Float32,
            scale: true,
        },
        Op::Normalize {
            mean: vec![0.5],
            std: vec![0.5],
        },
    ]);
    let params = p.draw(1, 2, &mut SampleRng::new(0, 0, 0));
    let mut clip = [0u8; 3 * 2 * 2 * 4];
    p.run_pixels(
        &img,
        &params,
        Placement::Planes { stride: 4 },
        &mut clip[2 * 4..],
    )
    .unwrap();
    let got: Vec<f32> = clip
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    let v = |l: f32| (l * (1.0f64 / 255.0) as f32 - 0.5) / 0.5;
    let want = [
        0.0,
        0.0,
        v(0.0),
        v(255.0),
        0.0,
        0.0,
        v(51.0),
        v(102.0),
        0.0,
        0.0,
        v(255.0),
        v(0.0),
    ];
    assert_eq!(got, want);
}

#[test]
fn reduced_jpeg_decode_stays_close_to_a_full_one() {
    let src = photo(512, 640);
    let jpeg = codec::encode(&src, ImageFormat::Jpeg).unwrap();
    let p = plan(&[Op::Resize {
        size: ResizeTo::Exact([64, 80]),
    }]);
    let params = p.draw(512, 640, &mut SampleRng::new(0, 0, 0));
    assert_eq!(super::decode::reduction(&p, &params), Some(8));
    let mut reduced = vec![0u8; p.out_bytes()];
    p.run_encoded(
        &jpeg,
        &DecodeLimits::default(),
        &mut SampleRng::new(0, 0, 0),
        Placement::Hwc,
        &mut reduced,
    )
    .unwrap();
    let full = run(&p, &codec::decode(&jpeg).unwrap(), 0);
    let diffs: Vec<i32> = reduced
        .iter()
        .zip(&full)
        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
        .collect();
    let mean = diffs.iter().sum::<i32>() as f64 / diffs.len() as f64;
    assert!(mean < 2.0, "mean difference {mean}");
    assert!(
        diffs.iter().all(|&d| d <= 12),
        "max {:?}",
        diffs.iter().max()
    );
}

#[test]
fn a_header_above_the_limit_fails_before_decoding() {
    let jpeg = codec::encode(&photo(64, 64), ImageFormat::Jpeg).unwrap();
    // The header alone: no pixels would decode from these bytes.
    let header = &jpeg[..jpeg.len() / 3];
    let p = plan(&[Op::CenterCrop { size: [8, 8] }]);
    let mut out = vec![0u8; p.out_bytes()];
    let small = DecodeLimits::default()
        .try_with_max_image_pixels(4000)
        .unwrap();
    let err = p
        .run_encoded(
            header,
            &small,
            &mut SampleRng::new(0, 0, 0),
            Placement::Hwc,
            &mut out,
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::LimitExceeded { limit: 4000, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("64x64"), "{err}");
    let err = p
        .run_encoded(
            header,
            &DecodeLimits::default(),
            &mut SampleRng::new(0, 0, 0),
            Placement::Hwc,
            &mut out,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    let err = p
        .run_encoded(
            b"not an image",
            &DecodeLimits::default(),
            &mut SampleRng::new(0, 0, 0),
            Placement::Hwc,
            &mut out,
        )
        .unwrap_err();
    assert!(err.to_string().contains("not a recognised image"), "{err}");
}

#[test]
fn png_and_params_of_another_size() {
    let img = photo(20, 30);
    let png = codec::encode(&img, ImageFormat::Png).unwrap();
    let p = plan(&[Op::CenterCrop { size: [10, 10] }]);
    let mut out = vec![0u8; p.out_bytes()];
    p.run_encoded(
        &png,
        &DecodeLimits::default(),
        &mut SampleRng::new(0, 0, 0),
        Placement::Hwc,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, run(&p, &img, 0));
    let other = p.draw(21, 30, &mut SampleRng::new(0, 0, 0));
    let err = p
        .run_pixels(&img, &other, Placement::Hwc, &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn a_layout_places_an_image_once_for_batches_and_single_images() {
    use crate::pipeline::options::Layout;
    let p = plan(&[Op::Resize {
        size: ResizeTo::Exact([6, 10]),
    }]);
    assert_eq!(
        p.placement(Layout::Hwc).unwrap(),
        (Placement::Hwc, [6, 10, 3])
    );
    assert_eq!(
        p.placement(Layout::Chw).unwrap(),
        (Placement::Planes { stride: 60 }, [3, 6, 10])
    );
    let e = p.placement(Layout::Cthw).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("'img'") && m.contains("CTHW")),
        "{e}"
    );
}
