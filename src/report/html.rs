//! The page: one HTML file with its style inline, sections of tables,
//! charts and figures. No script: everything a reader sees is in the
//! markup, so the file opens offline, from a mail attachment or an
//! artifact store, and stays readable in ten years.

use std::fmt::Write as _;

use super::text::escape;

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;
 padding:0 1em;color:#1d2327;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin:1.4em 0 .3em}p.note{color:#555;margin:.2em 0 .8em}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .8em;border-bottom:1px solid #eee;
 text-align:left;vertical-align:top}th{background:#f6f7f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
svg.chart{display:block;margin:.3em 0 1em}svg.chart rect.bar{fill:#3b7ddd}svg.chart rect.bar:hover{fill:#174ea6}
svg.chart .axis{stroke:#999}svg.chart .tick{font-size:10px;fill:#555}
.grid{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0;text-align:center;font-size:12px}
figure img{display:block;border:1px solid #ddd}figcaption{max-width:140px;overflow-wrap:anywhere}
.clip{border:1px solid #ddd;background-repeat:no-repeat}
.pair{display:flex;gap:12px;align-items:flex-start}
";

/// A page being assembled, section by section.
#[derive(Debug, Default)]
pub struct Page {
    body: String,
    style: String,
}

impl Page {
    /// A page with this `<h1>` and a line under it.
    pub fn new(title: &str, subtitle: &str) -> Self {
        let mut p = Page::default();
        let _ = write!(
            p.body,
            "<h1>{}</h1><p class=\"note\">{}</p>",
            escape(title),
            escape(subtitle)
        );
        p
    }

    /// A section heading (`<h2>`, `level` 2) or a sub-heading (`<h3>`).
    pub fn heading(&mut self, level: u8, text: &str, id: &str) {
        let l = level.clamp(2, 3);
        let _ = write!(
            self.body,
            "<h{l} id=\"{}\">{}</h{l}>",
            escape(id),
            escape(text)
        );
    }

    /// A line of explanation.
    pub fn note(&mut self, text: &str) {
        let _ = write!(self.body, "<p class=\"note\">{}</p>", escape(text));
    }

    /// Markup made elsewhere (charts, figures), added as it is.
    pub fn raw(&mut self, markup: &str) {
        self.body.push_str(markup);
    }

    /// A CSS rule the page needs (the animation of a clip, say).
    #[cfg_attr(not(feature = "video"), allow(dead_code))] // video windows only
    pub fn style(&mut self, css: &str) {
        self.style.push_str(css);
    }

    /// A two-column table of names and values.
    pub fn pairs(&mut self, rows: &[(&str, String)]) {
        self.body.push_str("<table class=\"pairs\">");
        for (k, v) in rows {
            let _ = write!(
                self.body,
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(k),
                escape(v)
            );
        }
        self.body.push_str("</table>");
    }

    /// A table with a header row; cells that parse as numbers align right.
    pub fn table(&mut self, class: &str, header: &[&str], rows: &[Vec<String>]) {
        let _ = write!(self.body, "<table class=\"{}\"><tr>", escape(class));
        for h in header {
            let _ = write!(self.body, "<th>{}</th>", escape(h));
        }
        self.body.push_str("</tr>");
        for r in rows {
            self.body.push_str("<tr>");
            for c in r {
                let numeric = c
                    .trim_end_matches(|ch: char| ch.is_alphabetic() || ch == ' ')
                    .replace(',', "")
                    .parse::<f64>()
                    .is_ok();
                let cls = if numeric { " class=\"num\"" } else { "" };
                let _ = write!(self.body, "<td{cls}>{}</td>", escape(c));
            }
            self.body.push_str("</tr>");
        }
        self.body.push_str("</table>");
    }

    /// The whole document.
    pub fn finish(self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
             <title>{}</title><style>{STYLE}{}</style></head><body>{}</body></html>\n",
            escape(title),
            self.style,
            self.body
        )
    }
}

/// A figure of one image with its caption; `data-row` names the row it shows.
pub fn figure(uri: &str, row: u64, caption: &str, side: u32) -> String {
    format!(
        "<figure class=\"sample\" data-row=\"{row}\"><img src=\"{uri}\" width=\"{side}\" \
         height=\"{side}\" alt=\"row {row}\"><figcaption>{}</figcaption></figure>",
        escape(caption)
    )
}

/// An animated clip: a vertical strip of `frames` square frames shown one
/// after another by a CSS `steps()` animation. `n` makes its class unique.
#[cfg_attr(not(feature = "video"), allow(dead_code))] // video windows only
pub fn clip(
    page: &mut Page,
    uri: &str,
    frames: usize,
    side: u32,
    n: usize,
    caption: &str,
) -> String {
    let total = side as usize * frames;
    page.style(&format!(
        "@keyframes clip{n}{{from{{background-position:0 0}}to{{background-position:0 -{total}px}}}}\
         .clip{n}{{animation:clip{n} {:.2}s steps({frames}) infinite}}",
        frames as f64 / 8.0
    ));
    format!(
        "<figure class=\"window\" data-frames=\"{frames}\"><div class=\"clip clip{n}\" \
         role=\"img\" aria-label=\"{}\" style=\"width:{side}px;height:{side}px;\
         background-image:url({uri})\"></div><figcaption>{}</figcaption></figure>",
        escape(caption),
        escape(caption)
    )
}
