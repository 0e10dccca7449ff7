//! The items that ended at one wake ([`super::Ccm::on_wake`]), without a heap allocation for
//! the few a wake usually ends.

use super::Ended;
use shared_abi::Ticks;

/// Items kept inline; a wake that ends more moves them all to the heap.
const INLINE: usize = 8;

/// A placeholder for the inline entries not yet used (never read).
const UNUSED: Ended = Ended {
    unit: 0,
    item: 0,
    started: Ticks::ZERO,
    tag: 0,
};

/// The items that ended at one wake, in the order they ended: a slice (`Deref`), iterable by
/// reference.
#[derive(Clone, Debug)]
pub struct EndedItems(Store);

/// Where the items are.
#[derive(Clone, Debug)]
enum Store {
    /// Up to [`INLINE`] items: the first `len` entries.
    Inline { items: [Ended; INLINE], len: usize },
    /// More.
    Heap(Vec<Ended>),
}

impl EndedItems {
    /// No items.
    pub(super) fn new() -> EndedItems {
        EndedItems(Store::Inline {
            items: [UNUSED; INLINE],
            len: 0,
        })
    }

    /// Appends `ended`.
    pub(super) fn push(&mut self, ended: Ended) {
        match &mut self.0 {
            Store::Inline { items, len } => {
                if let Some(entry) = items.get_mut(*len) {
                    *entry = ended;
                    *len += 1;
                } else {
                    let mut heap = Vec::with_capacity(2 * INLINE);
                    heap.extend_from_slice(items);
                    heap.push(ended);
                    self.0 = Store::Heap(heap);
                }
            }
            Store::Heap(heap) => heap.push(ended),
        }
    }
}

impl core::ops::Deref for EndedItems {
    type Target = [Ended];

    fn deref(&self) -> &[Ended] {
        match &self.0 {
            Store::Inline { items, len } => items.get(..*len).unwrap_or(&[]),
            Store::Heap(heap) => heap,
        }
    }
}

impl<'a> IntoIterator for &'a EndedItems {
    type Item = &'a Ended;
    type IntoIter = core::slice::Iter<'a, Ended>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(index: u32) -> Ended {
        Ended {
            unit: index % 3,
            item: index,
            started: Ticks(u64::from(index) * 7),
            tag: 1,
        }
    }

    #[test]
    fn keeps_every_item_in_order_inline_and_beyond() {
        for count in [0, 1, INLINE - 1, INLINE, INLINE + 1, 5 * INLINE] {
            let mut ended = EndedItems::new();
            let want: Vec<Ended> = (0..count as u32).map(item).collect();
            for &entry in &want {
                ended.push(entry);
            }
            assert_eq!(&*ended, &want[..], "{count}");
            assert_eq!(ended.is_empty(), count == 0);
            assert_eq!((&ended).into_iter().count(), count);
            assert_eq!(matches!(ended.0, Store::Heap(_)), count > INLINE);
        }
    }
}
