//! Bar charts as inline SVG: a report must open with no network and no
//! script, and a chart of a few dozen bars is a few rectangles, so a
//! charting library (and its JavaScript) would be all weight. Each bar
//! carries its count in `data-count` and a `<title>` tooltip, which is how
//! a reader (or a test) recovers the figures a chart was drawn from.

use std::fmt::Write as _;

use super::text::escape;

/// One bar: its label (a class name, or a bin's range) and its count.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What the bar counts.
    pub label: String,
    /// How many.
    pub count: u64,
}

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 120.0;
/// Room above the bars for the scale's label.
const TOP: f64 = 14.0;
const AXIS: f64 = 18.0;

/// A vertical bar chart (histogram bins side by side, no gaps) or, with
/// `labelled`, bars with their label under each (class balance). Labels
/// are shown when they fit, always in each bar's tooltip.
pub fn bar_chart(bars: &[Bar], labelled: bool) -> String {
    let max = bars.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64;
    let n = bars.len().max(1) as f64;
    let label_room = if labelled { 42.0 } else { 0.0 };
    let slot = WIDTH / n;
    let gap = if labelled {
        (slot * 0.15).min(6.0)
    } else {
        0.0
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart\" width=\"{WIDTH}\" \
         height=\"{}\" viewBox=\"0 0 {WIDTH} {}\" role=\"img\">",
        TOP + HEIGHT + AXIS + label_room,
        TOP + HEIGHT + AXIS + label_room
    );
    s.push_str(&format!("<g transform=\"translate(0 {TOP})\">"));
    for (i, b) in bars.iter().enumerate() {
        let h = (b.count as f64 / max * HEIGHT).max(if b.count > 0 { 1.0 } else { 0.0 });
        let x = i as f64 * slot + gap / 2.0;
        let _ = write!(
            s,
            "<rect class=\"bar\" data-count=\"{}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" \
             height=\"{h:.1}\"><title>{}: {}</title></rect>",
            b.count,
            HEIGHT - h,
            (slot - gap).max(0.5),
            escape(&b.label),
            b.count
        );
        if labelled && slot >= 14.0 {
            let cx = x + (slot - gap) / 2.0;
            let _ = write!(
                s,
                "<text class=\"tick\" x=\"{cx:.1}\" y=\"{:.1}\" transform=\"rotate(40 {cx:.1} {:.1})\">{}</text>",
                HEIGHT + 12.0,
                HEIGHT + 12.0,
                escape(&short(&b.label, 14))
            );
        }
    }
    let _ = write!(
        s,
        "<line class=\"axis\" x1=\"0\" y1=\"{HEIGHT}\" x2=\"{WIDTH}\" y2=\"{HEIGHT}\"/>"
    );
    if !labelled {
        if let (Some(first), Some(last)) = (bars.first(), bars.last()) {
            let lo = first.label.split(" to ").next().unwrap_or("");
            let hi = last.label.rsplit(" to ").next().unwrap_or("");
            let _ = write!(
                s,
                "<text class=\"tick\" x=\"0\" y=\"{y}\">{}</text>\
                 <text class=\"tick\" x=\"{WIDTH}\" y=\"{y}\" text-anchor=\"end\">{}</text>",
                escape(lo),
                escape(hi),
                y = HEIGHT + 14.0
            );
        }
    }
    let _ = write!(
        s,
        "</g><text class=\"tick\" x=\"{WIDTH}\" y=\"10\" text-anchor=\"end\">max {}</text></svg>",
        max as u64
    );
    s
}

/// `text` cut to `n` characters with an ellipsis.
fn short(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_carry_their_counts_and_labels_are_escaped() {
        let bars = vec![
            Bar {
                label: "<cat>".into(),
                count: 3,
            },
            Bar {
                label: "dog".into(),
                count: 0,
            },
        ];
        let svg = bar_chart(&bars, true);
        assert_eq!(svg.matches("data-count=\"3\"").count(), 1);
        assert_eq!(svg.matches("data-count=\"0\"").count(), 1);
        assert!(svg.contains("&lt;cat&gt;") && !svg.contains("<cat>"));
    }
}
