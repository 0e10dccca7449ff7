//! A claim of the paper and how it is checked against ours: what a claim is ([`Claim`]), how
//! its figures are read off the evaluation ([`Ctx`]), what checking it gives ([`Verdict`]) and
//! the counts over all of them ([`Summary`]).
//!
//! Two kinds of claim. A *number* the paper gives is compared as the ratio ours / paper, and
//! said to be within 10% or 25% of it. A *statement* (an inequality or a word: "slightly
//! reduced", "single-digit", "deadlock") is checked as the inequality it states and is held
//! or not held; it is never turned into a number to compare within 10%.
//!
//! Every claim also has a *direction*: whether ours falls on the same side as the paper's of a
//! natural reference (AXLE below RP, a reduction above 1x, in-order slower than out-of-order).
//! Each claim names its reference; for a statement with no weaker reference than itself the
//! direction is the statement.
//!
//! A note explains a difference. It is a function of the evaluation, so that the figure it
//! quotes is always the current one; it is printed only where the claim misses (direction
//! opposite, statement not held, or a number outside 10%).

use super::super::sweep::{Outcome, Point};
use super::super::table::{Cell, Table};
use super::super::Evaluation;
use crate::config::AxleConfig;
use host_runtime::{Mode, RunMetrics};

/// Reads figures off an evaluation: table cells and the metrics of single runs.
#[derive(Debug)]
pub struct Ctx<'e> {
    evaluation: &'e Evaluation,
}

impl<'e> Ctx<'e> {
    /// A reader of `evaluation`.
    pub fn new(evaluation: &'e Evaluation) -> Ctx<'e> {
        Ctx { evaluation }
    }

    /// The base configuration.
    pub fn config(&self) -> &'e AxleConfig {
        &self.evaluation.config
    }

    /// The workloads that ran, in Table IV order.
    pub fn workloads(&self) -> impl Iterator<Item = &'e str> {
        self.evaluation.workloads.iter().map(String::as_str)
    }

    /// Table `id`.
    pub fn table(&self, id: &str) -> Option<&'e Table> {
        self.evaluation
            .figures
            .iter()
            .flat_map(|figure| &figure.tables)
            .find(|table| table.id == id)
    }

    /// The finite number in row `row`, column `column` of table `id`.
    pub fn cell(&self, id: &str, row: &str, column: &str) -> Option<f64> {
        self.table(id)?
            .get(row, column)?
            .number()
            .filter(|value| value.is_finite())
    }

    /// The text in row `row`, column `column` of table `id` (`deadlock`).
    pub fn text(&self, id: &str, row: &str, column: &str) -> Option<&'e str> {
        match self.table(id)?.get(row, column)? {
            Cell::Text(text) => Some(text),
            Cell::Number(_) => None,
        }
    }

    /// Figure 10's cell of workload `workload`.
    pub fn fig10(&self, workload: &str, column: &str) -> Option<f64> {
        self.cell("fig10", workload, column)
    }

    /// Every (row label, finite number) of column `column` of table `id`.
    pub fn column(&self, id: &str, column: &str) -> Vec<(&'e str, f64)> {
        let Some(table) = self.table(id) else {
            return Vec::new();
        };
        let Some(index) = table.columns.iter().position(|c| c == column) else {
            return Vec::new();
        };
        table
            .rows
            .iter()
            .filter_map(|row| match (row.first(), row.get(index)) {
                (Some(Cell::Text(label)), Some(Cell::Number(value))) if value.is_finite() => {
                    Some((label.as_str(), *value))
                }
                _ => None,
            })
            .collect()
    }

    /// Figure 10(j)'s cell for `interval` (`p1`) against `baseline` (`RP`).
    pub fn fig10j(&self, interval: &str, baseline: &str, column: &str) -> Option<f64> {
        let table = self.table("fig10j")?;
        let index = table.columns.iter().position(|c| c == column)?;
        table
            .rows
            .iter()
            .find(|row| {
                matches!((row.first(), row.get(1)), (Some(Cell::Text(i)), Some(Cell::Text(b))) if i == interval && b == baseline)
            })
            .and_then(|row| row.get(index)?.number())
            .filter(|value| value.is_finite())
    }

    /// The metrics of `workload` in `mode` with `config`, if that run was made and finished.
    pub fn run(&self, workload: &str, mode: Mode, config: &AxleConfig) -> Option<&'e RunMetrics> {
        match self
            .evaluation
            .results
            .outcome(&Point::new(workload, mode, config))
            .ok()?
        {
            Outcome::Done(report) => Some(&report.metrics),
            Outcome::Deadlock(_) | Outcome::Shared(_) => None,
        }
    }

    /// `workload` in `mode` with the base configuration.
    pub fn base(&self, workload: &str, mode: Mode) -> Option<&'e RunMetrics> {
        self.run(workload, mode, self.config())
    }

    /// `workload` under AXLE with local polling every `poll_ns`.
    pub fn axle(&self, workload: &str, poll_ns: u64) -> Option<&'e RunMetrics> {
        self.run(
            workload,
            Mode::Axle,
            &super::super::figures::with_poll(self.config(), poll_ns),
        )
    }

    /// Whether `workload` ran.
    pub fn has(&self, workload: &str) -> bool {
        self.workloads().any(|name| name == workload)
    }
}

/// A figure as a percentage, `12.34%`.
pub fn percent(value: f64) -> String {
    format!("{value:.2}%")
}

/// `part` in percent of `whole`.
pub fn share(part: u64, whole: u64) -> f64 {
    part as f64 * 100.0 / whole.max(1) as f64
}

/// A duration: `850 ns`, `41.5 µs`, `6.80 ms`, `1.25 s`.
pub fn time(ns: u64) -> String {
    let value = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", value / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", value / 1e6)
    } else {
        format!("{:.2} s", value / 1e9)
    }
}

/// `part / whole` as a plain quotient (`whole` 0 counts as 1).
pub fn per(part: u64, whole: u64) -> f64 {
    part as f64 / whole.max(1) as f64
}

/// What checking a statement gave: held or not, and ours as the table shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// Whether ours satisfies the statement.
    pub held: bool,
    /// Ours, as shown.
    pub shown: String,
}

/// A statement checked: `held`, shown as `shown`.
pub fn held(held: bool, shown: impl Into<String>) -> Option<Held> {
    Some(Held {
        held,
        shown: shown.into(),
    })
}

type NumberFn = Box<dyn Fn(&Ctx) -> Option<f64>>;
type StatementFn = Box<dyn Fn(&Ctx) -> Option<Held>>;
type DirectionFn = Box<dyn Fn(&Ctx, Option<f64>) -> Option<bool>>;
type NoteFn = Box<dyn Fn(&Ctx) -> Option<String>>;

/// What the paper states.
pub enum Kind {
    /// A number, and how to read ours.
    Number {
        /// The paper's value.
        paper: f64,
        /// Ours.
        ours: NumberFn,
    },
    /// A statement (an inequality or a word), and how to check ours against it.
    Statement {
        /// The paper's words.
        paper: &'static str,
        /// The check.
        check: StatementFn,
    },
}

/// The reference of a statement whose direction is the statement itself.
pub const STATEMENT_ITSELF: &str = "the statement itself";

/// The natural reference a claim's direction is checked against.
pub enum Direction {
    /// The statement itself (a statement with no weaker reference).
    Statement,
    /// A reference, described, and the check (given ours, for a number).
    Reference(&'static str, DirectionFn),
}

/// One claim of Section V.
pub struct Claim {
    /// The paper's figure (panel): `10(a)`.
    pub figure: &'static str,
    /// What is claimed, in our words.
    pub what: String,
    /// The number or the statement.
    pub kind: Kind,
    /// Its direction.
    pub direction: Direction,
    /// Why ours differs, as a function of the evaluation.
    pub note: Option<NoteFn>,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Number { paper, .. } => f.debug_struct("Number").field("paper", paper).finish(),
            Kind::Statement { paper, .. } => {
                f.debug_struct("Statement").field("paper", paper).finish()
            }
        }
    }
}

impl std::fmt::Debug for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Direction::Statement => f.write_str("Statement"),
            Direction::Reference(text, _) => f.debug_tuple("Reference").field(text).finish(),
        }
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("figure", &self.figure)
            .field("what", &self.what)
            .field("kind", &self.kind)
            .field("direction", &self.direction)
            .field("note", &self.note.is_some())
            .finish()
    }
}

impl Claim {
    /// A number the paper gives: `paper`, ours read by `ours`.
    pub fn number(
        figure: &'static str,
        what: impl Into<String>,
        paper: f64,
        ours: impl Fn(&Ctx) -> Option<f64> + 'static,
    ) -> Claim {
        Claim {
            figure,
            what: what.into(),
            kind: Kind::Number {
                paper,
                ours: Box::new(ours),
            },
            direction: Direction::Statement,
            note: None,
        }
    }

    /// A statement of the paper (`paper`: its words), checked by `check`.
    pub fn statement(
        figure: &'static str,
        what: impl Into<String>,
        paper: &'static str,
        check: impl Fn(&Ctx) -> Option<Held> + 'static,
    ) -> Claim {
        Claim {
            figure,
            what: what.into(),
            kind: Kind::Statement {
                paper,
                check: Box::new(check),
            },
            direction: Direction::Statement,
            note: None,
        }
    }

    /// The direction: `reference` described, checked by `check` (given ours, for a number).
    pub fn direction(
        mut self,
        reference: &'static str,
        check: impl Fn(&Ctx, Option<f64>) -> Option<bool> + 'static,
    ) -> Claim {
        self.direction = Direction::Reference(reference, Box::new(check));
        self
    }

    /// The direction of a number: ours below `reference`.
    pub fn below(self, text: &'static str, reference: f64) -> Claim {
        self.direction(text, move |_, ours| Some(ours? < reference))
    }

    /// The direction of a number: ours above `reference`.
    pub fn above(self, text: &'static str, reference: f64) -> Claim {
        self.direction(text, move |_, ours| Some(ours? > reference))
    }

    /// The note explaining a difference.
    pub fn note(mut self, note: impl Fn(&Ctx) -> Option<String> + 'static) -> Claim {
        self.note = Some(Box::new(note));
        self
    }

    /// Checks the claim against `ctx`.
    pub fn check(&self, ctx: &Ctx) -> Verdict {
        let (paper, ours, check) = match &self.kind {
            Kind::Number { paper, ours } => {
                let value = ours(ctx).filter(|value| value.is_finite());
                (
                    format!("{paper}"),
                    value.map_or_else(|| "not run".to_owned(), |value| format!("{value:.2}")),
                    Check::Number {
                        paper: *paper,
                        ours: value,
                    },
                )
            }
            Kind::Statement { paper, check } => {
                let outcome = check(ctx);
                (
                    (*paper).to_owned(),
                    outcome
                        .as_ref()
                        .map_or_else(|| "not run".to_owned(), |held| held.shown.clone()),
                    Check::Statement {
                        held: outcome.map(|held| held.held),
                    },
                )
            }
        };
        let (reference, direction) = match (&self.direction, &check) {
            (Direction::Statement, Check::Statement { held }) => (STATEMENT_ITSELF, *held),
            // A number always has a reference (a unit test checks); without one it is unknown.
            (Direction::Statement, Check::Number { .. }) => ("none", None),
            (Direction::Reference(text, check), Check::Number { ours, .. }) => {
                (*text, ours.and_then(|ours| check(ctx, Some(ours))))
            }
            (Direction::Reference(text, check), Check::Statement { held }) => {
                (*text, held.and_then(|_| check(ctx, None)))
            }
        };
        Verdict {
            figure: self.figure,
            what: self.what.clone(),
            paper,
            ours,
            check,
            reference,
            direction,
            note: self.note.as_ref().and_then(|note| note(ctx)),
        }
    }
}

/// A number compared, or a statement checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// The paper's number and ours (`None`: not run).
    Number {
        /// The paper's value.
        paper: f64,
        /// Ours.
        ours: Option<f64>,
    },
    /// Whether the statement held (`None`: not run).
    Statement {
        /// Held.
        held: Option<bool>,
    },
}

/// One claim, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The paper's figure.
    pub figure: &'static str,
    /// What is claimed.
    pub what: String,
    /// The paper's number or words.
    pub paper: String,
    /// Ours, as shown.
    pub ours: String,
    /// The comparison.
    pub check: Check,
    /// The direction's reference.
    pub reference: &'static str,
    /// Whether ours is on the paper's side of the reference (`None`: not run).
    pub direction: Option<bool>,
    /// The note, with today's figures.
    pub note: Option<String>,
}

impl Verdict {
    /// Ours / paper, for a number that ran.
    pub fn ratio(&self) -> Option<f64> {
        match self.check {
            Check::Number {
                paper,
                ours: Some(ours),
            } if paper != 0.0 => Some(ours / paper),
            _ => None,
        }
    }

    /// Whether a number is within `fraction` of the paper's (`|ours - paper| <= fraction *
    /// |paper|`); `None` for a statement or a claim that did not run.
    pub fn within(&self, fraction: f64) -> Option<bool> {
        match self.check {
            Check::Number {
                paper,
                ours: Some(ours),
            } => Some((ours - paper).abs() <= fraction * paper.abs()),
            _ => None,
        }
    }

    /// `|ln(ours / paper)|` of a number (infinite when the two have opposite signs or ours is
    /// zero).
    pub fn distance(&self) -> Option<f64> {
        let ratio = self.ratio()?;
        Some(if ratio > 0.0 {
            ratio.ln().abs()
        } else {
            f64::INFINITY
        })
    }

    /// Whether the statement held.
    pub fn held(&self) -> Option<bool> {
        match self.check {
            Check::Statement { held } => held,
            Check::Number { .. } => None,
        }
    }

    /// Whether the direction is a reference of its own (not the statement itself).
    pub fn has_reference(&self) -> bool {
        self.reference != STATEMENT_ITSELF
    }

    /// Whether the claim could be checked (its figures and workloads ran).
    pub fn ran(&self) -> bool {
        match self.check {
            Check::Number { ours, .. } => ours.is_some(),
            Check::Statement { held } => held.is_some(),
        }
    }

    /// Whether ours misses the paper: the direction opposite, the statement not held, or a
    /// number outside 10%. Its note is printed then.
    pub fn missed(&self) -> bool {
        self.direction == Some(false)
            || self.held() == Some(false)
            || self.within(0.1) == Some(false)
    }

    /// How ours compares, as the table shows it.
    pub fn comparison(&self) -> String {
        match self.check {
            Check::Statement { held: Some(true) } => "held".into(),
            Check::Statement { held: Some(false) } => "**not held**".into(),
            Check::Number { .. } => match (self.ratio(), self.within(0.1), self.within(0.25)) {
                (Some(ratio), Some(true), _) => format!("{ratio:.2} (within 10%)"),
                (Some(ratio), _, Some(true)) => format!("{ratio:.2} (within 25%)"),
                (Some(ratio), _, _) => format!("{ratio:.2}"),
                _ => String::new(),
            },
            Check::Statement { held: None } => String::new(),
        }
    }
}

/// Counts over every claim, computed from the verdicts.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Claims listed.
    pub claims: usize,
    /// Claims that could be checked.
    pub ran: usize,
    /// Claims on the paper's side of their reference.
    pub direction_held: usize,
    /// Claims whose direction could be checked.
    pub direction_checked: usize,
    /// Of them, statements whose direction is the statement itself.
    pub direction_is_statement: usize,
    /// Numbers that could be compared.
    pub numbers: usize,
    /// Of them, within 10% of the paper's.
    pub within_10: usize,
    /// Of them, within 25% of the paper's.
    pub within_25: usize,
    /// Statements that could be checked.
    pub statements: usize,
    /// Of them, held.
    pub statements_held: usize,
    /// Indices of the numbers farthest from the paper's (largest `|ln(ours / paper)|` first).
    pub largest: Vec<usize>,
    /// Indices of the statements not held.
    pub not_held: Vec<usize>,
    /// Indices of the claims on the other side of a reference of their own (statements whose
    /// direction is the statement itself are listed as not held instead).
    pub opposite: Vec<usize>,
}

/// How many of the farthest numbers the summary lists.
pub const LARGEST: usize = 5;

impl Summary {
    /// The counts of `verdicts`.
    pub fn of(verdicts: &[Verdict]) -> Summary {
        let count = |test: &dyn Fn(&Verdict) -> bool| verdicts.iter().filter(|v| test(v)).count();
        let indices = |test: &dyn Fn(&Verdict) -> bool| -> Vec<usize> {
            verdicts
                .iter()
                .enumerate()
                .filter(|(_, v)| test(v))
                .map(|(index, _)| index)
                .collect()
        };
        let mut largest: Vec<(usize, f64)> = verdicts
            .iter()
            .enumerate()
            .filter_map(|(index, v)| Some((index, v.distance()?)))
            .filter(|(_, distance)| *distance > 0.0)
            .collect();
        // Farthest first; equal distances in the claims' order (a stable sort).
        largest.sort_by(|a, b| b.1.total_cmp(&a.1));
        largest.truncate(LARGEST);
        Summary {
            claims: verdicts.len(),
            ran: count(&Verdict::ran),
            direction_held: count(&|v| v.direction == Some(true)),
            direction_checked: count(&|v| v.direction.is_some()),
            direction_is_statement: count(&|v| v.direction.is_some() && !v.has_reference()),
            numbers: count(&|v| v.within(0.1).is_some()),
            within_10: count(&|v| v.within(0.1) == Some(true)),
            within_25: count(&|v| v.within(0.25) == Some(true)),
            statements: count(&|v| v.held().is_some()),
            statements_held: count(&|v| v.held() == Some(true)),
            largest: largest.into_iter().map(|(index, _)| index).collect(),
            not_held: indices(&|v| v.held() == Some(false)),
            opposite: indices(&|v| v.direction == Some(false) && v.has_reference()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(paper: f64, ours: Option<f64>) -> Verdict {
        Verdict {
            figure: "10",
            what: "a number".into(),
            paper: format!("{paper}"),
            ours: String::new(),
            check: Check::Number { paper, ours },
            reference: "above 0",
            direction: ours.map(|ours| ours > 0.0),
            note: None,
        }
    }

    fn statement(held: Option<bool>) -> Verdict {
        Verdict {
            figure: "13",
            what: "a statement".into(),
            paper: "single-digit".into(),
            ours: String::new(),
            check: Check::Statement { held },
            reference: STATEMENT_ITSELF,
            direction: held,
            note: None,
        }
    }

    #[test]
    fn a_number_is_within_10_or_25_percent_of_the_papers_by_its_ratio() {
        let close = number(100.0, Some(109.0));
        assert_eq!(
            (close.within(0.1), close.within(0.25)),
            (Some(true), Some(true))
        );
        assert!(
            close.comparison().contains("within 10%"),
            "{}",
            close.comparison()
        );
        let near = number(100.0, Some(80.0));
        assert_eq!(
            (near.within(0.1), near.within(0.25)),
            (Some(false), Some(true))
        );
        assert_eq!(near.comparison(), "0.80 (within 25%)");
        let far = number(2.0, Some(6.0));
        assert_eq!(
            (far.within(0.1), far.within(0.25)),
            (Some(false), Some(false))
        );
        assert_eq!(far.comparison(), "3.00");
        assert!(far.missed());
        // A negative value against a positive paper is infinitely far.
        assert_eq!(number(30.0, Some(-2.0)).distance(), Some(f64::INFINITY));
        // A statement has no ratio and is never "within 10%".
        assert_eq!(statement(Some(true)).within(0.1), None);
    }

    #[test]
    fn a_statement_is_held_or_not_held_never_a_ratio() {
        assert_eq!(statement(Some(true)).comparison(), "held");
        assert_eq!(statement(Some(false)).comparison(), "**not held**");
        assert!(statement(Some(false)).missed());
        assert!(!statement(Some(true)).missed());
        assert_eq!(statement(None).comparison(), "");
        assert!(!statement(None).ran());
    }

    #[test]
    fn the_summary_counts_what_the_verdicts_say() {
        let verdicts = vec![
            number(100.0, Some(105.0)), // within 10%
            number(100.0, Some(120.0)), // within 25%
            number(10.0, Some(40.0)),   // 4x
            number(30.0, Some(-3.0)),   // opposite sign: farthest, direction opposite
            number(5.0, None),          // not run
            statement(Some(true)),
            statement(Some(false)),
            statement(None),
        ];
        let summary = Summary::of(&verdicts);
        assert_eq!(summary.claims, 8);
        assert_eq!(summary.ran, 6);
        assert_eq!(summary.numbers, 4);
        assert_eq!(summary.within_10, 1);
        assert_eq!(summary.within_25, 2);
        assert_eq!(summary.statements, 2);
        assert_eq!(summary.statements_held, 1);
        assert_eq!(summary.direction_checked, 6);
        assert_eq!(summary.direction_held, 4);
        assert_eq!(summary.direction_is_statement, 2);
        // Farthest first: the opposite sign, then 4x, then 1.2x, then 1.05x.
        assert_eq!(summary.largest, [3, 2, 1, 0]);
        assert_eq!(summary.not_held, [6]);
        // The statement not held is listed there, not again as "opposite".
        assert_eq!(summary.opposite, [3]);
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(time(850), "850 ns");
        assert_eq!(time(41_500), "41.5 µs");
        assert_eq!(time(6_800_000), "6.80 ms");
        assert_eq!(time(1_250_000_000), "1.25 s");
    }
}
