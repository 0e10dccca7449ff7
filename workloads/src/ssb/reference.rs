//! The plain SSB reference: the whole query evaluated by one scan of the generated columns.
//!
//! For every lineorder row, in order: the join `lo_orderdate = d_datekey` through an ordered
//! map built from the DATE table (nothing shared with the host tasks' dense index), the
//! date predicate, the two lineorder predicates, and `sum(lo_extendedprice * lo_discount)` in
//! `u128`. Integers only: the answer must match exactly. It also counts the rows the filter
//! alone marks, which the run's bitmap must contain.

use std::collections::BTreeMap;

use super::data::{DateRow, SsbData};
use super::QuerySpec;

/// A query's answer, with the row counts that explain it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// `sum(lo_extendedprice * lo_discount)` over the selected rows.
    pub revenue: u128,
    /// Rows passing the lineorder predicates (quantity and discount).
    pub marked: u64,
    /// Rows passing every predicate, the join included.
    pub selected: u64,
}

/// Evaluates `spec` on `data`.
pub fn evaluate(data: &SsbData, spec: &QuerySpec) -> Answer {
    let date: BTreeMap<u32, &DateRow> = data.date.iter().map(|row| (row.datekey, row)).collect();
    let filter = spec.filter;
    let mut answer = Answer {
        revenue: 0,
        marked: 0,
        selected: 0,
    };
    for row in 0..data.quantity.len() {
        let quantity = u16::from(data.quantity[row]);
        let discount = u16::from(data.discount[row]);
        let lineorder_passes = quantity >= filter.quantity_low
            && quantity <= filter.quantity_high
            && discount >= filter.discount_low
            && discount <= filter.discount_high;
        if !lineorder_passes {
            continue;
        }
        answer.marked += 1;
        let Some(day) = date.get(&data.orderdate[row]) else {
            continue;
        };
        if spec.date.matches(day) {
            answer.selected += 1;
            answer.revenue += u128::from(data.extendedprice[row]) * u128::from(discount);
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssb::data::{ScaleFactor, SsbData};
    use crate::ssb::Query;

    /// Six hand-made rows.
    fn tiny() -> SsbData {
        let mut data = SsbData::generate(ScaleFactor::SMALL, 1);
        data.quantity = vec![10, 24, 25, 30, 30, 1];
        data.discount = vec![2, 1, 2, 5, 4, 3];
        data.orderdate = vec![19930301, 19931231, 19930505, 19940131, 19940201, 19921231];
        data.extendedprice = vec![1000, 2000, 3000, 4000, 5000, 6000];
        data
    }

    #[test]
    fn q1_1_on_hand_checked_rows() {
        // Rows 0, 1 pass (quantity < 25, discount 1..=3, 1993); row 2 has quantity 25;
        // row 5 passes the filter but is in 1992.
        let answer = evaluate(&tiny(), &Query::Q1_1.spec());
        assert_eq!(
            answer,
            Answer {
                revenue: 1000 * 2 + 2000,
                marked: 3,
                selected: 2
            }
        );
    }

    #[test]
    fn q1_2_on_hand_checked_rows() {
        // Rows 3 and 4 pass the filter (quantity 26..=35, discount 4..=6); only row 3 is in
        // January 1994.
        let answer = evaluate(&tiny(), &Query::Q1_2.spec());
        assert_eq!(
            answer,
            Answer {
                revenue: 4000 * 5,
                marked: 2,
                selected: 1
            }
        );
    }
}
