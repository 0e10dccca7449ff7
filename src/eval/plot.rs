//! SVG bar charts of the figures (plotters' SVG backend: no fonts or native libraries).
//!
//! One chart is groups of bars (one group per workload, or per configuration); a bar is a
//! stack of segments (RP and BS in Figures 10 and 11: CCM, data movement, host, overhead) or a
//! single value, coloured by its position in the group from a palette that stays apart for
//! readers with colour-blindness, hatched beyond its eight colours ([`fill`]). Every chart
//! has both axis titles, with units. A stacked bar carries its name above it (which stack is
//! RP and which BS); a bar may carry a note written up its length (a run that deadlocked and
//! has no value says "deadlock" where its bar would be), and a bar without a value and
//! without a note says "no value". Negative values (a reduction that is an increase) go below
//! a zero line.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// A named, coloured part of a stacked bar.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Legend name.
    pub name: String,
    /// Palette index.
    pub colour: usize,
}

impl Segment {
    /// A segment.
    pub fn new(name: &str, colour: usize) -> Segment {
        Segment {
            name: name.to_owned(),
            colour,
        }
    }
}

/// Grouped (and possibly stacked) bars.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// File-name stem.
    pub id: String,
    /// Title.
    pub title: String,
    /// X axis title: what the groups are ("workload").
    pub x_label: String,
    /// Y axis title, with its unit.
    pub y_label: String,
    /// One group per workload.
    pub groups: Vec<String>,
    /// Bar names, in each group's order.
    pub bars: Vec<String>,
    /// Stacked bars' segments (bars with more than one value use them).
    pub segments: Vec<Segment>,
    /// `values[group][bar]`: the bar's segment values, bottom up. One value makes a plain
    /// bar, coloured by its position in the group (after the segments' colours).
    pub values: Vec<Vec<Vec<f64>>>,
    /// `notes[group][bar]`: a word written up the bar's place (e.g. "deadlock"); empty for
    /// none.
    pub notes: Vec<Vec<Option<String>>>,
}

/// The palette: Okabe and Ito's eight colours, chosen to stay distinct for readers with any of
/// the common colour-vision deficiencies (M. Okabe and K. Ito, "Color Universal Design (CUD):
/// How to make figures and presentations that are friendly to colorblind people", 2008,
/// <https://jfly.uni-koeln.de/color/>; the RGB values are theirs), in their order with black
/// last (it hides the bar labels). A chart that needs more than eight (Figure 14 has twelve
/// bars per workload) reuses them hatched ([`Fill`]): colour `i` and colour `i + 8` differ by
/// the white diagonal stripes, which read without colour at all.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0xe6, 0x9f, 0x00), // orange
    RGBColor(0x56, 0xb4, 0xe9), // sky blue
    RGBColor(0x00, 0x9e, 0x73), // bluish green
    RGBColor(0xf0, 0xe4, 0x42), // yellow
    RGBColor(0x00, 0x72, 0xb2), // blue
    RGBColor(0xd5, 0x5e, 0x00), // vermillion
    RGBColor(0xcc, 0x79, 0xa7), // reddish purple
    RGBColor(0x00, 0x00, 0x00), // black
];

/// How a bar of palette index `index` is filled: its colour, and whether it is hatched (the
/// second round of the palette).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// The colour.
    pub colour: RGBColor,
    /// White diagonal stripes over it.
    pub hatched: bool,
}

/// The fill of palette index `index`: plain for the first eight, hatched for the next eight,
/// and so on alternating.
pub fn fill(index: usize) -> Fill {
    Fill {
        colour: PALETTE[index % PALETTE.len()],
        hatched: (index / PALETTE.len()) % 2 == 1,
    }
}

/// The colour a note (a deadlock, a missing value) is written in: Okabe-Ito's vermillion.
const NOTE_COLOUR: RGBColor = RGBColor(0xd5, 0x5e, 0x00);

/// Draws `fill` into the pixel rectangle `[(x0, y0), (x1, y1)]` (`y0` above `y1` or not).
fn draw_fill<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
    fill: Fill,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (left, right) = (x0.min(x1), x0.max(x1));
    let (top, bottom) = (y0.min(y1), y0.max(y1));
    root.draw(&Rectangle::new(
        [(left, top), (right, bottom)],
        fill.colour.filled(),
    ))?;
    if !fill.hatched {
        return Ok(());
    }
    // Lines at 45 degrees, 6 px apart, clipped to the rectangle: the line through
    // (left + k, bottom) going up-right is (left + k + t, bottom - t), inside while
    // 0 <= t <= height and left <= left + k + t <= right.
    let (width, height) = (right - left, bottom - top);
    let stripe = ShapeStyle::from(&WHITE).stroke_width(2);
    let mut k = -height;
    while k < width {
        let from = 0.max(-k);
        let to = height.min(width - k);
        if from < to {
            root.draw(&PathElement::new(
                vec![
                    (left + k + from, bottom - from),
                    (left + k + to, bottom - to),
                ],
                stripe,
            ))?;
        }
        k += 6;
    }
    Ok(())
}

impl BarChart {
    /// Plain bars: `values[group][bar]` holds one value each.
    pub fn simple(
        id: &str,
        title: &str,
        y_label: &str,
        groups: &[&str],
        bars: &[&str],
        values: Vec<Vec<Vec<f64>>>,
    ) -> BarChart {
        BarChart {
            id: id.to_owned(),
            title: title.to_owned(),
            x_label: "workload".to_owned(),
            y_label: y_label.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            bars: bars.iter().map(|b| (*b).to_owned()).collect(),
            segments: Vec::new(),
            values,
            notes: Vec::new(),
        }
    }

    /// The same chart with `note` written at bar `bar` of group `group`.
    pub fn note(&mut self, group: usize, bar: usize, note: &str) {
        if self.notes.len() <= group {
            self.notes.resize(group + 1, Vec::new());
        }
        let row = &mut self.notes[group];
        if row.len() <= bar {
            row.resize(bar + 1, None);
        }
        row[bar] = Some(note.to_owned());
    }

    /// The note at bar `bar` of group `group`, if any.
    fn note_at(&self, group: usize, bar: usize) -> Option<&str> {
        self.notes
            .get(group)
            .and_then(|row| row.get(bar))
            .and_then(Option::as_deref)
    }

    /// The Y range: from the lowest stack (or 0) to the highest (or 0), with room above for
    /// the names and notes.
    fn range(&self) -> (f64, f64) {
        let (mut low, mut high) = (0.0_f64, 0.0_f64);
        for stack in self.values.iter().flatten() {
            let total: f64 = stack.iter().filter(|v| v.is_finite()).sum();
            low = low.min(total);
            high = high.max(total);
        }
        if high <= 0.0 && low >= 0.0 {
            return (0.0, 1.0);
        }
        let span = high - low;
        (
            if low < 0.0 { low - span * 0.06 } else { 0.0 },
            high + span * 0.12,
        )
    }

    /// The chart as SVG text.
    pub fn svg(&self) -> anyhow::Result<String> {
        let per_group = self.bars.len().max(1) + 1;
        // Room for the bars, and for the title (18 px type, about 9 px a character).
        let bars = 140 + self.groups.len() * per_group * 14;
        let title = 60 + self.title.chars().count() * 9;
        let width = bars.max(title).clamp(640, 2400) as u32;
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, (width, 480)).into_drawing_area();
            self.draw(&root)
                .map_err(|e| anyhow::anyhow!("drawing {}: {e}", self.id))?;
            root.present()
                .map_err(|e| anyhow::anyhow!("drawing {}: {e}", self.id))?;
        }
        Ok(text)
    }

    /// Draws the chart into `path` as SVG.
    pub fn write_svg(&self, path: &Path) -> anyhow::Result<()> {
        let text = self.svg()?;
        std::fs::write(path, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let per_group = self.bars.len().max(1) + 1;
        let x_end = (self.groups.len() * per_group).max(1) as f64;
        let (low, high) = self.range();
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .margin_right(170)
            .x_label_area_size(52)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_end, low..high)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .light_line_style(WHITE)
            .y_desc(self.y_label.as_str())
            .draw()?;
        if low < 0.0 {
            // The zero line, for bars below it.
            chart.draw_series([PathElement::new(vec![(0.0, 0.0), (x_end, 0.0)], BLACK)])?;
        }
        for (group_index, group) in self.values.iter().enumerate() {
            for (bar_index, stack) in group.iter().enumerate() {
                let x = (group_index * per_group + bar_index) as f64 + 0.5;
                let mut bottom = 0.0;
                let mut drawn = false;
                for (segment_index, value) in stack.iter().enumerate() {
                    if !value.is_finite() || *value == 0.0 {
                        continue;
                    }
                    let index = if stack.len() > 1 {
                        self.segments
                            .get(segment_index)
                            .map_or(segment_index, |s| s.colour)
                    } else {
                        self.segments.len() + bar_index
                    };
                    let from = chart.backend_coord(&(x, bottom));
                    let to = chart.backend_coord(&(x + 0.9, bottom + value));
                    draw_fill(root, from, to, fill(index))?;
                    bottom += value;
                    drawn = true;
                }
                if stack.len() > 1 {
                    // The stack's name above it: which stacked bar is which.
                    if let Some(name) = self.bars.get(bar_index) {
                        let (px, py) = chart.backend_coord(&(x + 0.45, bottom.max(0.0)));
                        root.draw(&Text::new(
                            name.clone(),
                            (px, py - 2),
                            TextStyle::from(("sans-serif", 10).into_font())
                                .pos(Pos::new(HPos::Center, VPos::Bottom)),
                        ))?;
                    }
                }
                let missing = !drawn && stack.iter().any(|v| !v.is_finite());
                let note = self
                    .note_at(group_index, bar_index)
                    .or(missing.then_some("no value"));
                if let Some(note) = note {
                    // Written upwards from the axis, where the bar would stand.
                    let (px, py) = chart.backend_coord(&(x + 0.45, bottom.max(0.0)));
                    root.draw(&Text::new(
                        note.to_owned(),
                        (px, py - 4),
                        TextStyle::from(
                            ("sans-serif", 11)
                                .into_font()
                                .transform(FontTransform::Rotate270),
                        )
                        .color(&NOTE_COLOUR)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                    ))?;
                }
            }
        }
        let label_style =
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        let mut axis_y = 0;
        for (group_index, name) in self.groups.iter().enumerate() {
            let centre = (group_index * per_group) as f64 + (per_group as f64 - 1.0) / 2.0 + 0.5;
            let (px, py) = chart.backend_coord(&(centre, low));
            axis_y = py;
            root.draw(&Text::new(name.clone(), (px, py + 6), label_style.clone()))?;
        }
        // The X axis title, under the group names.
        let (left, _) = chart.backend_coord(&(0.0, low));
        let (right_end, _) = chart.backend_coord(&(x_end, low));
        root.draw(&Text::new(
            self.x_label.clone(),
            ((left + right_end) / 2, axis_y + 26),
            TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
        // The legend: stacked segments first, then the plain bars.
        let legend_style = TextStyle::from(("sans-serif", 12).into_font());
        let (right, top) = (root.dim_in_pixel().0 as i32 - 165, 40);
        let mut entries: Vec<(String, Fill)> = Vec::new();
        let stacked = self.values.iter().flatten().any(|stack| stack.len() > 1);
        if stacked {
            let depth = self
                .values
                .iter()
                .flatten()
                .map(Vec::len)
                .max()
                .unwrap_or(0);
            entries.extend(
                self.segments
                    .iter()
                    .take(depth)
                    .map(|segment| (segment.name.clone(), fill(segment.colour))),
            );
        }
        for (bar_index, name) in self.bars.iter().enumerate() {
            let plain = self
                .values
                .iter()
                .any(|group| group.get(bar_index).is_some_and(|stack| stack.len() == 1));
            if plain {
                entries.push((name.clone(), fill(self.segments.len() + bar_index)));
            }
        }
        if stacked {
            let stacked_bars: Vec<&str> = self
                .bars
                .iter()
                .enumerate()
                .filter(|(index, _)| {
                    self.values
                        .iter()
                        .any(|group| group.get(*index).is_some_and(|stack| stack.len() > 1))
                })
                .map(|(_, name)| name.as_str())
                .collect();
            root.draw(&Text::new(
                format!("stacked: {}", stacked_bars.join(", ")),
                (right, top - 18),
                legend_style.clone(),
            ))?;
        }
        for (index, (name, entry)) in entries.iter().enumerate() {
            let y = top + index as i32 * 18;
            draw_fill(root, (right, y), (right + 12, y + 12), *entry)?;
            root.draw(&Text::new(
                name.clone(),
                (right + 18, y),
                legend_style.clone(),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_written_as_svg_with_its_labels() {
        let directory = std::env::temp_dir().join(format!("axle-plot-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("chart.svg");
        let chart = BarChart {
            id: "t".into(),
            title: "Title".into(),
            x_label: "workload".into(),
            y_label: "% of RP".into(),
            groups: vec!["knn-a".into(), "sssp".into()],
            bars: vec!["RP".into(), "AXLE".into()],
            segments: vec![Segment::new("CCM", 0), Segment::new("host", 2)],
            values: vec![
                vec![vec![40.0, 60.0], vec![70.0]],
                vec![vec![50.0, 50.0], vec![f64::NAN]],
            ],
            notes: Vec::new(),
        };
        let mut chart = chart;
        chart.note(1, 1, "deadlock");
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        for text in [
            "Title",
            "knn-a",
            "sssp",
            "CCM",
            "host",
            "AXLE",
            "stacked: RP",
            "deadlock",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        // The stacked bars' names stand above them: "RP" once per group, besides the legend.
        assert_eq!(svg.lines().filter(|line| *line == "RP").count(), 2, "{svg}");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
