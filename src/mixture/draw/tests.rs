//! The draws against the first ways they were written (draw by draw, the
//! first-hit choice), at the edges of the weights; shares, schedules,
//! exhausted sources and homogeneous batches.

use super::*;

fn draws(unit: DrawUnit, ends: Vec<SourceEnd>, rows: Vec<u64>) -> Draws {
    Draws {
        rows,
        ends,
        seed: 7,
        batch_size: 64,
        unit,
    }
}

/// A step's draws as (source, the source's row count before the row).
fn step_pairs(d: &Draws, schedule: &Schedule, c: &mut Cursor) -> Vec<(usize, u64)> {
    step_pairs_with(d, schedule, c, &mut DrawMemo::default())
}

/// [`step_pairs`] with the thresholds kept from step to step.
fn step_pairs_with(
    d: &Draws,
    schedule: &Schedule,
    c: &mut Cursor,
    memo: &mut DrawMemo,
) -> Vec<(usize, u64)> {
    let mut next = c.counts.clone();
    let mut sources = Vec::new();
    d.step(schedule, c, memo, &mut sources);
    sources
        .iter()
        .map(|&s| {
            let s = s as usize;
            next[s] += 1;
            (s, next[s] - 1)
        })
        .collect()
}

/// `choose` as it was written first: a loop that stops at the first
/// hit (the reference the branchless one is held to).
fn choose_first_hit(
    weights: &[f64],
    total: f64,
    u: f64,
    live: impl Fn(usize) -> bool,
) -> Option<usize> {
    if total <= 0.0 {
        return None;
    }
    let mut at = u * total;
    let mut last = None;
    for (s, &w) in weights.iter().enumerate() {
        if w <= 0.0 || !live(s) {
            continue;
        }
        last = Some(s);
        if at < w {
            return Some(s);
        }
        at -= w;
    }
    last
}

/// What a step drew before the steady case and the branchless choice:
/// every draw through the first-hit loop over the live sources, its
/// stream key made anew.
fn step_draw_by_draw(d: &Draws, schedule: &Schedule, c: &mut Cursor) -> Vec<(usize, u64)> {
    let weights = schedule.at(c.step);
    let mut out = Vec::new();
    for i in 0..d.batch_size {
        let g = c.step * d.batch_size + i;
        let (u, counts) = (unit_f64(d.seed, 0, g), &c.counts);
        let total = d.live_total(weights, counts);
        let Some(s) = choose_first_hit(weights, total, u, |s| d.live(s, counts)) else {
            break;
        };
        out.push((s, c.counts[s]));
        c.counts[s] += 1;
    }
    c.step += 1;
    out
}

#[test]
fn steady_steps_draw_what_draw_by_draw_picks_gave() {
    // Cycling sources (steady throughout) and exhausting ones (steady
    // until a step could run one out, then draw by draw).
    for ends in [
        vec![SourceEnd::Cycle; 3],
        vec![SourceEnd::Exhaust, SourceEnd::Cycle, SourceEnd::Exhaust],
    ] {
        for weights in [
            vec![0.2, 0.5, 0.3],
            vec![1e-300, 1.0, 1e300],
            vec![0.0, 3.0, 1e-17],
        ] {
            let d = draws(DrawUnit::Sample, ends.clone(), vec![100, 700, 300]);
            // Changed at step 10, and back at 20: the thresholds kept
            // from step to step follow.
            let mut sched = Schedule::new(weights.clone());
            sched.set(10, vec![1.0, 2.0, 3.0]);
            sched.set(20, weights);
            let mut a = Cursor {
                step: 0,
                counts: vec![0; 3],
            };
            let mut b = a.clone();
            let mut memo = DrawMemo::default();
            for _ in 0..40 {
                assert_eq!(
                    step_pairs_with(&d, &sched, &mut a, &mut memo),
                    step_draw_by_draw(&d, &sched, &mut b)
                );
                assert_eq!(a, b);
            }
        }
    }
}

/// Weights at the edges of the choice: zeros among them, 1e-300 beside
/// 1e300, ten equal ones, one source.
const WEIGHT_SETS: [&[f64]; 8] = [
    &[0.4, 0.3, 0.3],
    &[0.1, 0.0, 0.2, 0.7],
    &[0.0, 1.0],
    &[1e-300, 1.0, 1e300],
    &[0.1; 10],
    &[1.0],
    &[3.0, 1e-17, 1.0],
    &[1.0, 1.0, 0.0],
];

#[test]
fn the_branchless_choice_and_the_multiplication_change_no_draw() {
    let mut r = SplitMix64::new(3);
    let sets = &WEIGHT_SETS[..5];
    for _ in 0..200_000 {
        let x = r.next_u64() >> 11;
        assert_eq!(
            (x as f64 * (1.0 / (1u64 << 53) as f64)).to_bits(),
            (x as f64 / (1u64 << 53) as f64).to_bits()
        );
    }
    for w in sets {
        let total: f64 = w.iter().sum();
        let edges = [0.0, 1.0 - f64::EPSILON / 2.0, 0.4, 0.7, 0.3];
        for i in 0..100_000 {
            let u = match edges.get(i) {
                Some(&e) => e,
                None => unit_at(11, i as u64),
            };
            assert_eq!(
                choose(w, total, u, |_| true),
                choose_first_hit(w, total, u, |_| true),
                "{w:?} {u}"
            );
            // The first source dropped out: the others' total.
            let rest: f64 = w[1..].iter().sum();
            assert_eq!(
                choose(w, rest, u, |s| s > 0),
                choose_first_hit(w, rest, u, |s| s > 0),
                "{w:?} {u} without source 0"
            );
        }
    }
    assert_eq!(choose(&[0.0, 0.0], 0.0, 0.5, |_| true), None);
}

#[test]
fn thresholds_pick_what_choose_picks_at_every_edge() {
    let mut r = SplitMix64::new(9);
    for w in WEIGHT_SETS {
        let total: f64 = w.iter().sum();
        let t = Thresholds::new(w, total).unwrap();
        let by_choose = |x: u64| choose(w, total, unit_of(x), |_| true).unwrap();
        // Both sides of every run's first draw, and the ends.
        let mut xs = vec![0, 1, DRAWS - 2, DRAWS - 1];
        for &b in &t.starts {
            xs.extend((b.saturating_sub(3)..b.saturating_add(3)).filter(|&x| x < DRAWS));
        }
        for _ in 0..100_000 {
            xs.push(r.next_u64() >> 11);
        }
        for x in xs {
            assert_eq!(t.pick(x), by_choose(x), "{w:?} at {x}");
        }
    }
    assert_eq!(Thresholds::new(&[0.0, 0.0], 0.0), None);
}

#[test]
fn shares_follow_the_weights_and_the_schedule() {
    let d = draws(
        DrawUnit::Sample,
        vec![SourceEnd::Cycle; 3],
        vec![10, 20, 30],
    );
    let mut sched = Schedule::new(vec![1.0, 2.0, 1.0]);
    sched.set(500, vec![0.0, 0.0, 1.0]);
    let mut c = Cursor {
        step: 0,
        counts: vec![0; 3],
    };
    let mut n = [0u64; 3];
    for _ in 0..500 {
        for (s, _) in step_pairs(&d, &sched, &mut c) {
            n[s] += 1;
        }
    }
    let total = 500.0 * 64.0;
    for (s, want) in [(0, 0.25), (1, 0.5), (2, 0.25)] {
        let got = n[s] as f64 / total;
        assert!((got - want).abs() < 0.01, "source {s}: {got}");
    }
    let before = c.counts.clone();
    step_pairs(&d, &sched, &mut c);
    assert_eq!(
        c.counts[2],
        before[2] + 64,
        "from step 500 on, source 2 alone"
    );
}

#[test]
fn exhausted_sources_drop_out_and_the_mixture_ends() {
    for unit in [DrawUnit::Sample, DrawUnit::Batch] {
        let d = draws(unit, vec![SourceEnd::Exhaust; 2], vec![100, 250]);
        let sched = Schedule::new(vec![3.0, 1.0]);
        let mut c = Cursor {
            step: 0,
            counts: vec![0; 2],
        };
        let mut seen = vec![Vec::new(); 2];
        loop {
            let s = step_pairs(&d, &sched, &mut c);
            if s.is_empty() {
                break;
            }
            for (src, k) in s {
                seen[src].push(k);
            }
        }
        assert_eq!(seen[0], (0..100).collect::<Vec<_>>(), "{unit}");
        assert_eq!(seen[1], (0..250).collect::<Vec<_>>(), "{unit}");
    }
}

#[test]
fn batch_draws_give_homogeneous_batches() {
    let d = draws(DrawUnit::Batch, vec![SourceEnd::Cycle; 2], vec![5, 5]);
    let sched = Schedule::new(vec![1.0, 1.0]);
    let mut c = Cursor {
        step: 0,
        counts: vec![0; 2],
    };
    let mut firsts = [0; 2];
    for _ in 0..200 {
        let s = step_pairs(&d, &sched, &mut c);
        assert!(s.iter().all(|(x, _)| *x == s[0].0));
        firsts[s[0].0] += 1;
    }
    assert!(firsts[0] > 70 && firsts[1] > 70, "{firsts:?}");
}

#[test]
fn bad_weights_are_refused_by_name() {
    assert!(check_weights(&[1.0], 2).is_err());
    assert!(check_weights(&[1.0, f64::NAN], 2).is_err());
    assert!(check_weights(&[1.0, -1.0], 2).is_err());
    assert!(check_weights(&[0.0, 0.0], 2).is_err());
    assert!(check_weights(&[0.0, 2.0], 2).is_ok());
    assert!(Schedule::from_changes(vec![(1, vec![1.0])], 1).is_err());
    assert!(Schedule::from_changes(vec![(0, vec![1.0]), (0, vec![1.0])], 1).is_err());
}

/// What a step of batch draws gave before its steady case: a source drawn
/// at the first row, and anew only when it runs out, row by row.
fn batch_step_row_by_row(d: &Draws, schedule: &Schedule, c: &mut Cursor) -> Vec<(usize, u64)> {
    let weights = schedule.at(c.step);
    let (mut out, mut current) = (Vec::new(), None);
    for i in 0..d.batch_size {
        let g = c.step * d.batch_size + i;
        let s = match current {
            Some(s) if d.live(s, &c.counts) => Some(s),
            _ => {
                let u = if i == 0 {
                    unit_f64(d.seed, 1, c.step)
                } else {
                    unit_f64(d.seed, 2, g)
                };
                current = d.pick(weights, &c.counts, u);
                current
            }
        };
        let Some(s) = s else { break };
        out.push((s, c.counts[s]));
        c.counts[s] += 1;
    }
    c.step += 1;
    out
}

#[test]
fn steady_batch_steps_draw_what_row_by_row_draws_gave() {
    // Exhausting sources: steady at first, then steps where one runs out
    // mid-batch and the rest of the batch is drawn anew.
    for ends in [
        vec![SourceEnd::Cycle; 3],
        vec![SourceEnd::Exhaust, SourceEnd::Cycle, SourceEnd::Exhaust],
        vec![SourceEnd::Exhaust; 3],
    ] {
        let d = draws(DrawUnit::Batch, ends.clone(), vec![100, 700, 300]);
        let mut sched = Schedule::new(vec![0.2, 0.5, 0.3]);
        sched.set(10, vec![1.0, 0.0, 3.0]);
        let mut a = Cursor {
            step: 0,
            counts: vec![0; 3],
        };
        let mut b = a.clone();
        let mut memo = DrawMemo::default();
        for step in 0..40 {
            assert_eq!(
                step_pairs_with(&d, &sched, &mut a, &mut memo),
                batch_step_row_by_row(&d, &sched, &mut b),
                "{ends:?} step {step}"
            );
            assert_eq!(a, b);
        }
    }
}
