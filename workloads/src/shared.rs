//! Inputs shared between the runs of one process.
//!
//! `axle eval` makes dozens of runs of each workload with the same scale and seed, hence the
//! same generated input; generating it again for every run cost more than a third of an OPT
//! run (weights and reference) and a fifth of an SSB run (the lineorder columns), and reading
//! and checking a graph a fifth of an SSSP run and an eighth of a PageRank run (the graph and
//! its reference answers). A [`Shared`] slot keeps the last value it made, by key, and hands out the same
//! [`Arc`] to every run that asks for that key (runs only read it), so two runs in parallel
//! also hold one copy instead of two. A value is a pure function of its key (a generator's
//! shape and seed, or a reference computed from those), so sharing it changes no result.
//!
//! The slot keeps its value until another key replaces it or [`release`] empties it: the
//! sweep releases a workload's values after its last run ([`release`]), so that a large
//! input does not stay resident while other workloads run.

use std::sync::{Arc, Mutex, PoisonError};

/// One shared value and the key it was made for.
#[derive(Debug)]
pub struct Shared<K, V> {
    slot: Mutex<Option<(K, Arc<V>)>>,
}

impl<K: PartialEq, V> Shared<K, V> {
    /// An empty slot.
    pub const fn new() -> Shared<K, V> {
        Shared {
            slot: Mutex::new(None),
        }
    }

    /// The value for `key`: the kept one if it was made for `key`, otherwise `make()`'s,
    /// which replaces it. Callers asking at the same time wait for one `make` (so two runs
    /// starting together generate once).
    pub fn get_or_make(&self, key: K, make: impl FnOnce() -> V) -> Arc<V> {
        // A panic in another `make` leaves the slot as it was: still consistent.
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((kept, value)) = slot.as_ref() {
            if *kept == key {
                return Arc::clone(value);
            }
        }
        // Drop the old value before making the new one: never two at once.
        *slot = None;
        let value = Arc::new(make());
        *slot = Some((key, Arc::clone(&value)));
        value
    }

    /// [`Shared::get_or_make`] for a `make` that can fail: a failure is returned and nothing
    /// is kept.
    pub fn try_get_or_make<E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((kept, value)) = slot.as_ref() {
            if *kept == key {
                return Ok(Arc::clone(value));
            }
        }
        *slot = None;
        let value = Arc::new(make()?);
        *slot = Some((key, Arc::clone(&value)));
        Ok(value)
    }

    /// Forgets the kept value (runs holding it keep their `Arc`).
    pub fn clear(&self) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl<K: PartialEq, V> Default for Shared<K, V> {
    fn default() -> Self {
        Shared::new()
    }
}

/// Forgets the shared values of workload `name` (no effect for a workload that shares
/// none): called when its last run of a sweep has ended.
pub fn release(name: &str) {
    if name == crate::opt::NAME {
        crate::opt::release_shared();
    } else if name == crate::sssp::NAME {
        crate::sssp::release_shared();
    } else if name == crate::pagerank::NAME {
        crate::pagerank::release_shared();
    } else if name.starts_with("ssb-") {
        // Both queries share one data set: the other query's next run, if any, makes it
        // again (once).
        crate::ssb::release_shared();
    }
}

/// Bytes of generated input a run of workload `name` at `scale` holds resident (its device
/// memory image, plus host copies the run keeps), for the sweep to keep two large runs from
/// overlapping; 0 for the workloads whose inputs stay under about 150 MB (graphs, KNN
/// vectors, SSB columns), which it does not count.
pub fn resident_input_bytes(name: &str, scale: crate::Scale) -> u64 {
    if name == crate::opt::NAME {
        crate::opt::resident_input_bytes(scale)
    } else if name == crate::dlrm::NAME {
        let options = crate::WorkloadOptions {
            scale,
            ..crate::WorkloadOptions::default()
        };
        crate::dlrm::shape(&options).table_bytes()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_key_is_made_and_handed_out_until_the_key_changes_fails_or_is_cleared() {
        let shared: Shared<u32, Vec<u8>> = Shared::new();
        let mut made = 0;
        let a = shared.get_or_make(1, || {
            made += 1;
            vec![1]
        });
        let b = shared.get_or_make(1, || {
            made += 1;
            vec![9]
        });
        assert!(Arc::ptr_eq(&a, &b), "the same key shares one value");
        assert_eq!(made, 1);
        let failed = shared.try_get_or_make(5, || Err::<Vec<u8>, &str>("no"));
        assert_eq!(failed.err(), Some("no"), "a failed make is returned");
        let again = shared
            .try_get_or_make(1, || {
                made += 1;
                Ok::<_, &str>(vec![1])
            })
            .unwrap();
        assert!(
            !Arc::ptr_eq(&a, &again),
            "the failed make replaced the kept value, keeping nothing"
        );
        assert_eq!(made, 2);
        let c = shared.get_or_make(2, || {
            made += 1;
            vec![2]
        });
        assert_eq!((*c).clone(), vec![2], "another key makes its own value");
        shared.clear();
        let d = shared.get_or_make(2, || {
            made += 1;
            vec![2]
        });
        assert!(!Arc::ptr_eq(&c, &d), "cleared: made again");
        assert_eq!(made, 4);
        assert_eq!(
            *a,
            vec![1],
            "a holder keeps its value after the slot moved on"
        );
    }

    #[test]
    fn opt_and_dlrm_hold_about_a_gigabyte_at_paper_scale_and_little_at_small_scale() {
        for name in [crate::opt::NAME, crate::dlrm::NAME] {
            let paper = resident_input_bytes(name, crate::Scale::Paper);
            assert!((900 << 20..1200 << 20).contains(&paper), "{name}: {paper}");
            assert!(resident_input_bytes(name, crate::Scale::Small) < 64 << 20);
        }
        assert_eq!(resident_input_bytes("sssp", crate::Scale::Paper), 0);
    }
}
