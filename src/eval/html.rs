//! `index.html` in `axle eval`'s output directory: the whole evaluation in one page to open
//! in a browser.
//!
//! One self-contained file: the charts are the same SVG as the `.svg` files, inline; the
//! style is an inline `<style>`; no script, no font, nothing fetched from the network. It
//! holds, per figure, every chart, every table (with its notes), the paper's claims on that
//! figure with the paper's value beside ours ([`super::reproduction::verdicts`], the data of
//! REPRODUCTION.md) and links to the figure's CSV and JSON files (relative, beside the page);
//! and once, the version and commit of the build ([`crate::provenance`]), the base
//! configuration (as `axle config` writes it) and each workload's input (its generator and
//! seed, or the data file with its size and SHA-256).
//!
//! Nothing in it depends on the machine, the time or the output directory, so an evaluation
//! merged from run files (`--merge`) writes the same bytes as one made on one machine.

use super::reproduction::{claim::Verdict, verdicts};
use super::table::{Cell, Table};
use super::Evaluation;
use crate::provenance::{InputRecord, COMMIT, VERSION};
use std::fmt::Write;

/// The page's file name in the output directory.
pub const INDEX: &str = "index.html";

/// `text` with `&`, `<`, `>` and `"` escaped for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// The inline style: system fonts only (nothing to fetch), readable tables, charts that
/// scroll sideways when wider than the window.
const STYLE: &str =
    "body{font-family:sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}
td.text{text-align:left}
.chart{overflow-x:auto;margin:1em 0}.chart svg{display:block}
.note{color:#555;font-size:.9em;margin:.2em 0}
.held{color:#006d4f}.missed{color:#b34700;font-weight:bold}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em}
nav a{margin-right:1em}
table.claims th{text-align:left}";

/// A number as the tables show it: integers of four digits and more without decimals,
/// others with two.
fn number(value: f64) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    if value.fract() == 0.0 && value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn table_html(out: &mut String, table: &Table) {
    let _ = writeln!(
        out,
        "<table id=\"table-{}\"><caption>{}</caption>",
        escape(&table.id),
        escape(&table.title)
    );
    out.push_str("<tr>");
    for column in &table.columns {
        let _ = write!(out, "<th>{}</th>", escape(column));
    }
    out.push_str("</tr>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for cell in row {
            match cell {
                Cell::Text(text) => {
                    let _ = write!(out, "<td class=\"text\">{}</td>", escape(text));
                }
                Cell::Number(value) => {
                    let _ = write!(out, "<td>{}</td>", number(*value));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for note in &table.notes {
        let _ = writeln!(out, "<p class=\"note\">Note: {}</p>", escape(note));
    }
}

/// The figure number a claim's figure names (`10(a)-(d), (i)` is 10).
fn claim_figure(figure: &str) -> Option<u32> {
    let digits: String = figure.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn verdicts_html(out: &mut String, verdicts: &[&Verdict]) {
    if verdicts.is_empty() {
        return;
    }
    out.push_str("<h3>The paper beside ours</h3>\n<table class=\"claims\"><tr><th>panel</th><th>claim</th><th>paper</th><th>ours</th><th>comparison</th><th>note</th></tr>\n");
    for v in verdicts {
        let comparison = v.comparison().replace("**", "");
        let class = if !v.ran() {
            ""
        } else if v.missed() {
            " class=\"missed\""
        } else {
            " class=\"held\""
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\"><span{class}>{}</span></td><td class=\"text\">{}</td></tr>",
            escape(v.figure),
            escape(&v.what),
            escape(&v.paper),
            escape(if v.ran() { &v.ours } else { "not run" }),
            escape(&comparison),
            escape(v.note.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>\n");
}

/// The page for `evaluation`.
pub fn render(evaluation: &Evaluation) -> anyhow::Result<String> {
    let verdicts = verdicts(evaluation);
    let scale = format!("{:?}", evaluation.config.workload.scale).to_lowercase();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>AXLE evaluation ({scale} scale)</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>"
    );
    let _ = writeln!(
        out,
        "<h1>AXLE evaluation: the paper's Figures {} ({scale} scale)</h1>",
        evaluation
            .figures
            .iter()
            .map(|figure| figure.figure.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "<p>Made by <code>axle</code> {} from commit <code id=\"commit\">{}</code>. Every figure is virtual time and deterministic: the same command gives the same numbers, byte for byte.</p>",
        escape(VERSION),
        escape(COMMIT)
    );
    out.push_str("<nav>");
    for figure in &evaluation.figures {
        let (n, heading) = (figure.figure.name(), figure.figure.heading());
        let _ = write!(out, "<a href=\"#figure-{n}\">{heading}</a>");
    }
    out.push_str(
        "<a href=\"#configuration\">configuration</a><a href=\"#inputs\">inputs</a></nav>\n",
    );

    let held = verdicts.iter().filter(|v| v.ran() && !v.missed()).count();
    let ran = verdicts.iter().filter(|v| v.ran()).count();
    let _ = writeln!(
        out,
        "<p>Of the paper's {} claims on these figures, {ran} could be checked with the figures and workloads run; {held} of them hold (on the paper's side of their reference, a statement held, a number within 10%).</p>",
        verdicts.len()
    );

    for figure in &evaluation.figures {
        let (n, heading) = (figure.figure.name(), figure.figure.heading());
        let stem = figure.figure.stem();
        let _ = writeln!(out, "<section id=\"figure-{n}\">\n<h2>{heading}</h2>");
        let mut links = vec![format!("<a href=\"{stem}.json\">{stem}.json</a>")];
        links.extend(
            figure
                .tables
                .iter()
                .map(|t| format!("<a href=\"{0}.csv\">{0}.csv</a>", escape(&t.id))),
        );
        links.extend(
            figure
                .charts
                .iter()
                .map(|c| format!("<a href=\"{0}.svg\">{0}.svg</a>", escape(&c.id))),
        );
        let _ = writeln!(out, "<p class=\"note\">Files: {}</p>", links.join(", "));
        for chart in &figure.charts {
            let svg = chart.svg()?;
            let _ = writeln!(
                out,
                "<div class=\"chart\" id=\"chart-{}\">\n{}\n</div>",
                escape(&chart.id),
                svg.trim()
            );
        }
        for table in &figure.tables {
            table_html(&mut out, table);
        }
        let own: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| claim_figure(v.figure) == Some(figure.figure.number()))
            .collect();
        verdicts_html(&mut out, &own);
        out.push_str("</section>\n");
    }

    out.push_str("<section id=\"inputs\">\n<h2>Inputs</h2>\n<table><tr><th>workload</th><th>input</th></tr>\n");
    for (name, input) in &evaluation.inputs {
        let record = InputRecord::of(input, evaluation.config.workload.seed);
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(name),
            escape(&record.describe())
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">{}</p>\n</section>",
        escape(&evaluation.data.describe())
    );

    let toml = evaluation.config.to_annotated_toml()?;
    let _ = writeln!(
        out,
        "<section id=\"configuration\">\n<h2>Configuration</h2>\n<p>The base of every run (each figure varies some keys: see its notes and the <code>config</code> of each run in its JSON file); <code>axle config</code> explains every key, <code>--config</code> reads this back.</p>\n<pre>{}</pre>\n</section>",
        escape(&toml)
    );
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("a < b & \"c\" > d"),
            "a &lt; b &amp; &quot;c&quot; &gt; d"
        );
    }

    #[test]
    fn a_claims_figure_is_its_leading_number() {
        assert_eq!(claim_figure("10(a)-(d), (i)"), Some(10));
        assert_eq!(claim_figure("12"), Some(12));
        assert_eq!(claim_figure("Table III"), None);
    }
}
