//! A figure's numbers as a table: what the terminal shows, and what goes to CSV and JSON.

use serde::Serialize;
use std::fmt::Write;

/// One cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    /// A label.
    Text(String),
    /// A number (a percentage, a ratio, nanoseconds: the column says).
    Number(f64),
}

impl Cell {
    /// A text cell.
    pub fn text(text: impl Into<String>) -> Cell {
        Cell::Text(text.into())
    }

    /// The number, if this is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Cell::Number(value) => Some(*value),
            Cell::Text(_) => None,
        }
    }

    fn render(&self) -> String {
        match self {
            Cell::Text(text) => text.clone(),
            Cell::Number(value)
                if value.fract() == 0.0 && (1000.0..1e15).contains(&value.abs()) =>
            {
                format!("{value:.0}")
            }
            Cell::Number(value) => format!("{value:.2}"),
        }
    }

    fn csv(&self) -> String {
        match self {
            Cell::Text(text) if text.contains([',', '"', '\n']) => {
                format!("\"{}\"", text.replace('"', "\"\""))
            }
            Cell::Text(text) => text.clone(),
            Cell::Number(value) => format!("{value}"),
        }
    }
}

impl From<f64> for Cell {
    fn from(value: f64) -> Cell {
        Cell::Number(value)
    }
}

impl From<u64> for Cell {
    fn from(value: u64) -> Cell {
        Cell::Number(value as f64)
    }
}

impl From<&str> for Cell {
    fn from(value: &str) -> Cell {
        Cell::Text(value.to_owned())
    }
}

impl From<String> for Cell {
    fn from(value: String) -> Cell {
        Cell::Text(value)
    }
}

/// A table of one figure (or one panel of it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table {
    /// File-name stem (`fig10`, `fig10j`).
    pub id: String,
    /// What it shows, with units.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
    /// Remarks printed under the table (configuration, omissions).
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table.
    pub fn new(id: &str, title: &str, columns: &[&str]) -> Table {
        Table {
            id: id.to_owned(),
            title: title.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// The cell in the row whose first cell is `label`, column `column`.
    pub fn get(&self, label: &str, column: &str) -> Option<&Cell> {
        let index = self.columns.iter().position(|c| c == column)?;
        self.rows
            .iter()
            .find(|row| matches!(row.first(), Some(Cell::Text(text)) if text == label))
            .and_then(|row| row.get(index))
    }

    /// Comma-separated values, header first.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let header: Vec<String> = self
            .columns
            .iter()
            .map(|c| Cell::Text(c.clone()).csv())
            .collect();
        let _ = writeln!(out, "{}", header.join(","));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(Cell::csv).collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
        out
    }

    /// Aligned columns for the terminal.
    pub fn to_text(&self) -> String {
        let rendered: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| row.iter().map(Cell::render).collect())
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(index, header)| {
                rendered
                    .iter()
                    .filter_map(|row| row.get(index))
                    .map(|cell| cell.chars().count())
                    .chain([header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        let line = |cells: &[String]| -> String {
            cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(index, (cell, width))| {
                    if index == 0 {
                        format!("{cell:<width$}")
                    } else {
                        format!("{cell:>width$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        let _ = writeln!(out, "{}", line(&self.columns));
        for row in &rendered {
            let _ = writeln!(out, "{}", line(row));
        }
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting_and_keeps_full_precision() {
        let mut table = Table::new("t", "T", &["name", "value"]);
        table.push(vec![Cell::text("a,b"), Cell::Number(1.0 / 3.0)]);
        table.push(vec![Cell::text("say \"hi\""), Cell::Number(2.0)]);
        let csv = table.to_csv();
        assert_eq!(
            csv,
            "name,value\n\"a,b\",0.3333333333333333\n\"say \"\"hi\"\"\",2\n"
        );
    }

    #[test]
    fn text_aligns_columns_and_get_finds_by_label() {
        let mut table = Table::new("t", "Title", &["workload", "x"]);
        table.push(vec![Cell::text("knn-a"), Cell::Number(12.345)]);
        table.push(vec![Cell::text("dlrm"), Cell::Number(7.0)]);
        let text = table.to_text();
        assert!(text.contains("knn-a     12.35"), "{text}");
        assert!(text.contains("dlrm       7.00"), "{text}");
        assert_eq!(table.get("dlrm", "x"), Some(&Cell::Number(7.0)));
        assert_eq!(table.get("sssp", "x"), None);
    }
}
