//! The compute units double.

use super::*;

#[derive(Debug)]
pub(super) struct Running {
    pub(super) launch: KernelLaunch,
    pub(super) kernel: Option<Kernel>,
    pub(super) finished: Vec<bool>,
}

/// The CCM: records dispatched launches; the test reports item completions.
#[derive(Debug)]
pub struct FakeComputeUnits {
    pub(super) launches: Vec<KernelLaunch>,
    pub(super) running: Option<Running>,
    pub(super) completions: VecDeque<ItemCompletion>,
    /// Status [`ComputeUnits::dispatch`] answers with instead of starting (`None`: start).
    pub refuse_dispatch: Option<FirmwareError>,
    /// Whether [`FakeHal::finish_items`] runs the real kernel code of each item (default
    /// `true`), so the result space holds the real answer.
    pub execute_kernels: bool,
}

impl Default for FakeComputeUnits {
    fn default() -> Self {
        FakeComputeUnits {
            launches: Vec::new(),
            running: None,
            completions: VecDeque::new(),
            refuse_dispatch: None,
            execute_kernels: true,
        }
    }
}

impl FakeComputeUnits {
    /// Every launch dispatched so far.
    pub fn launches(&self) -> &[KernelLaunch] {
        &self.launches
    }

    /// The launch the units run now (the last dispatched).
    pub fn current(&self) -> Option<KernelLaunch> {
        self.running.as_ref().map(|running| running.launch)
    }

    /// Items of the current launch not reported yet.
    pub fn unfinished_items(&self) -> Vec<u32> {
        self.running.as_ref().map_or_else(Vec::new, |running| {
            running
                .launch
                .item_range()
                .filter(|&item| !running.finished[item as usize])
                .collect()
        })
    }

    /// Queues a raw completion (for tests of what the HAL contract forbids).
    pub fn push_completion(&mut self, completion: ItemCompletion) {
        self.completions.push_back(completion);
    }
}
