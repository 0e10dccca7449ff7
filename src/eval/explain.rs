//! Figures that explain themselves: run on every figure after it is assembled
//! ([`super::assemble`]), this gives every chart axis titles with units and every table
//! without a chart of its own (Figure 10 (j)'s reductions, Figure 12's idle-time reductions)
//! a chart drawn from the table ([`chart_of_table`]).
//!
//! The axis titles are listed here, per chart, in one place ([`AXES`]) rather than where each
//! figure is assembled, so that a reader sees every unit at once.

use super::figures::FigureOutput;
use super::plot::BarChart;
use super::table::{Cell, Table};

/// Per chart (by id): the X axis title and the Y axis title with its unit. A chart not listed
/// keeps the titles it was made with.
pub const AXES: [(&str, &str, &str); 10] = [
    (
        "fig10",
        "workload",
        "end-to-end runtime, % of RP's (stacks: RP's and BS's parts)",
    ),
    (
        "fig10j",
        "polling interval, against baseline",
        "end-to-end runtime reduction, %",
    ),
    (
        "fig11",
        "workload (hardware)",
        "end-to-end runtime, % of RP's on the same hardware",
    ),
    (
        "fig12",
        "workload",
        "idle time, % of RP's end-to-end runtime",
    ),
    (
        "fig12-reductions",
        "workload",
        "idle-time reduction, x (baseline's idle / AXLE's)",
    ),
    (
        "fig13",
        "workload",
        "host core stall, % of the run's end-to-end",
    ),
    (
        "fig14",
        "workload",
        "end-to-end runtime, x AXLE SF1's (ratio)",
    ),
    (
        "fig15",
        "workload",
        "end-to-end runtime, x OoO streaming's (ratio)",
    ),
    (
        "fig16a",
        "workload",
        "end-to-end runtime, x 100% slot capacity's (ratio)",
    ),
    (
        "fig16b",
        "workload",
        "back-pressure, % of the run's end-to-end",
    ),
];

/// Completes `output`: a chart for every table that has none, then the axis titles of
/// [`AXES`].
pub fn complete(output: &mut FigureOutput) {
    for table in &output.tables {
        if !output.charts.iter().any(|chart| chart.id == table.id) {
            if let Some(chart) = chart_of_table(table) {
                output.charts.push(chart);
            }
        }
    }
    for chart in &mut output.charts {
        if let Some((_, x, y)) = AXES.iter().find(|(id, _, _)| *id == chart.id) {
            chart.x_label = (*x).to_owned();
            chart.y_label = (*y).to_owned();
        }
    }
}

/// A chart of `table`: one group per row, named by its leading text cells (`p1, RP`), one
/// plain bar per numeric column. A text cell in a numeric column (`deadlock`) is written on
/// the chart where its bar would be. `None` when the table has no numeric column or no row.
pub fn chart_of_table(table: &Table) -> Option<BarChart> {
    // The leading columns whose every cell is text name the groups; the others are bars.
    let labels = (0..table.columns.len())
        .take_while(|&column| {
            table
                .rows
                .iter()
                .all(|row| matches!(row.get(column), Some(Cell::Text(_))))
        })
        .count()
        .max(1);
    let bars: Vec<&str> = table
        .columns
        .iter()
        .skip(labels)
        .map(String::as_str)
        .collect();
    if bars.is_empty() || table.rows.is_empty() {
        return None;
    }
    let groups: Vec<String> = table
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .take(labels)
                .map(|cell| match cell {
                    Cell::Text(text) => text.clone(),
                    Cell::Number(value) => format!("{value}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    let values: Vec<Vec<Vec<f64>>> = table
        .rows
        .iter()
        .map(|row| {
            (labels..table.columns.len())
                .map(|column| vec![row.get(column).and_then(Cell::number).unwrap_or(f64::NAN)])
                .collect()
        })
        .collect();
    let group_names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let mut chart = BarChart::simple(&table.id, &table.title, "", &group_names, &bars, values);
    for (group, row) in table.rows.iter().enumerate() {
        for (bar, cell) in row.iter().skip(labels).enumerate() {
            if let Cell::Text(text) = cell {
                chart.note(group, bar, text);
            }
        }
    }
    chart.x_label = table
        .columns
        .iter()
        .take(labels)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    Some(chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::figures::Figure;

    #[test]
    fn a_table_without_a_chart_gets_one_with_a_bar_per_numeric_column() {
        let mut table = Table::new(
            "fig10j",
            "reductions",
            &["interval", "baseline", "average", "maximum"],
        );
        table.push(vec!["p1".into(), "RP".into(), 30.0.into(), 50.0.into()]);
        table.push(vec!["p1".into(), "BS".into(), (-5.0).into(), "n/a".into()]);
        let mut output = FigureOutput {
            figure: Figure::F10,
            tables: vec![table],
            charts: Vec::new(),
        };
        complete(&mut output);
        assert_eq!(output.charts.len(), 1);
        let chart = &output.charts[0];
        assert_eq!(chart.groups, ["p1, RP", "p1, BS"]);
        assert_eq!(chart.bars, ["average", "maximum"]);
        assert_eq!(chart.values[1][0], vec![-5.0]);
        assert!(chart.values[1][1][0].is_nan());
        assert_eq!(chart.notes[1][1].as_deref(), Some("n/a"));
        // The axis titles of AXES, with the unit.
        assert_eq!(chart.y_label, "end-to-end runtime reduction, %");
        assert_eq!(chart.x_label, "polling interval, against baseline");
        let svg = chart.svg().unwrap();
        for text in [
            "p1, RP",
            "average",
            "n/a",
            "reduction, %",
            "against baseline",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn every_chart_listed_has_a_unit_in_its_y_title() {
        for (id, x, y) in AXES {
            assert!(!x.is_empty(), "{id}");
            assert!(
                y.contains('%') || y.contains(", x "),
                "{id}: the Y title names no unit: {y}"
            );
        }
    }
}
