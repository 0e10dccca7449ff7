//! SVG bar charts of the figures (plotters' SVG backend: no fonts or native libraries).
//!
//! One chart is groups of bars (one group per workload); a bar is a stack of segments (RP and
//! BS in Figures 10 and 11: CCM, data movement, host, overhead) or a single value, coloured by
//! its position in the group. A stacked bar carries its name above it (which stack is RP and
//! which BS); a bar may carry a note written up its length (a run that deadlocked and has no
//! value says "deadlock" where its bar would be).

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
    /// Y axis label.
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

const PALETTE: [RGBColor; 16] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x39, 0x3b, 0x79),
    RGBColor(0xad, 0x49, 0x4a),
    RGBColor(0x63, 0x79, 0x39),
    RGBColor(0xe7, 0xba, 0x52),
    RGBColor(0x7b, 0x41, 0x73),
    RGBColor(0x00, 0x00, 0x00),
];

fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
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

    fn top(&self) -> f64 {
        let highest = self
            .values
            .iter()
            .flatten()
            .map(|stack| stack.iter().filter(|v| v.is_finite()).sum::<f64>())
            .fold(0.0_f64, f64::max);
        if highest > 0.0 {
            highest * 1.12
        } else {
            1.0
        }
    }

    /// Draws the chart into `path` as SVG.
    pub fn write_svg(&self, path: &Path) -> anyhow::Result<()> {
        let per_group = self.bars.len().max(1) + 1;
        let width = (140 + self.groups.len() * per_group * 14).clamp(640, 2400) as u32;
        let root = SVGBackend::new(path, (width, 460)).into_drawing_area();
        self.draw(&root)
            .map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        Ok(())
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let per_group = self.bars.len().max(1) + 1;
        let x_end = (self.groups.len() * per_group).max(1) as f64;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .margin_right(170)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_end, 0.0..self.top())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .light_line_style(WHITE)
            .y_desc(self.y_label.as_str())
            .draw()?;
        for (group_index, group) in self.values.iter().enumerate() {
            for (bar_index, stack) in group.iter().enumerate() {
                let x = (group_index * per_group + bar_index) as f64 + 0.5;
                let mut bottom = 0.0;
                for (segment_index, value) in stack.iter().enumerate() {
                    if !value.is_finite() || *value <= 0.0 {
                        continue;
                    }
                    let fill = if stack.len() > 1 {
                        colour(
                            self.segments
                                .get(segment_index)
                                .map_or(segment_index, |s| s.colour),
                        )
                    } else {
                        colour(self.segments.len() + bar_index)
                    };
                    chart.draw_series([Rectangle::new(
                        [(x, bottom), (x + 0.9, bottom + value)],
                        fill.filled(),
                    )])?;
                    bottom += value;
                }
                if stack.len() > 1 {
                    // The stack's name above it: which stacked bar is which.
                    if let Some(name) = self.bars.get(bar_index) {
                        let (px, py) = chart.backend_coord(&(x + 0.45, bottom));
                        root.draw(&Text::new(
                            name.clone(),
                            (px, py - 2),
                            TextStyle::from(("sans-serif", 10).into_font())
                                .pos(Pos::new(HPos::Center, VPos::Bottom)),
                        ))?;
                    }
                }
                let note = self
                    .notes
                    .get(group_index)
                    .and_then(|row| row.get(bar_index))
                    .and_then(Option::as_ref);
                if let Some(note) = note {
                    // Written upwards from the axis, where the bar would stand.
                    let (px, py) = chart.backend_coord(&(x + 0.45, bottom));
                    root.draw(&Text::new(
                        note.clone(),
                        (px, py - 4),
                        TextStyle::from(
                            ("sans-serif", 11)
                                .into_font()
                                .transform(FontTransform::Rotate270),
                        )
                        .color(&RGBColor(0xd6, 0x27, 0x28))
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                    ))?;
                }
            }
        }
        let label_style =
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (group_index, name) in self.groups.iter().enumerate() {
            let centre = (group_index * per_group) as f64 + (per_group as f64 - 1.0) / 2.0 + 0.5;
            let (px, py) = chart.backend_coord(&(centre, 0.0));
            root.draw(&Text::new(name.clone(), (px, py + 6), label_style.clone()))?;
        }
        // The legend: stacked segments first, then the plain bars.
        let legend_style = TextStyle::from(("sans-serif", 12).into_font());
        let (right, top) = (root.dim_in_pixel().0 as i32 - 165, 40);
        let mut entries: Vec<(String, RGBColor)> = Vec::new();
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
                    .map(|segment| (segment.name.clone(), colour(segment.colour))),
            );
        }
        for (bar_index, name) in self.bars.iter().enumerate() {
            let plain = self
                .values
                .iter()
                .any(|group| group.get(bar_index).is_some_and(|stack| stack.len() == 1));
            if plain {
                entries.push((name.clone(), colour(self.segments.len() + bar_index)));
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
        for (index, (name, fill)) in entries.iter().enumerate() {
            let y = top + index as i32 * 18;
            root.draw(&Rectangle::new(
                [(right, y), (right + 12, y + 12)],
                fill.filled(),
            ))?;
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
