//! What RP and BS share once the kernel is done: the control thread loads the whole result
//! with CXL.mem loads (behind the barrier), and every task becomes ready at once.

use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, RuntimeError};
use crate::trace::HostSpanKind;
use cosim_link::link::DeviceLink;
use shared_abi::{DeviceAddress, Ticks};

/// Issues the loads of the launch's result; returns when they were issued (`None`: no
/// launch, nothing issued).
pub(crate) fn load_results(
    host: &mut Host<'_>,
    now: Ticks,
    link: &mut dyn DeviceLink,
) -> Option<Ticks> {
    let (address, length) = host
        .launch
        .as_ref()
        .map(|launch| (launch.command.result_address, launch.command.result_length))?;
    let token = host.token();
    link.mem_load(
        now,
        DeviceAddress(address),
        length,
        host.config.load_outstanding,
        token,
    );
    Some(now)
}

/// The result load issued at `issued` returned `data`: its time is stall and result load;
/// every task becomes ready. Returns whether the results were taken (not when the load came
/// back short, which fails the run, nor without a launch).
pub(crate) fn results_loaded(
    host: &mut Host<'_>,
    now: Ticks,
    issued: Ticks,
    data: Vec<u8>,
) -> bool {
    let elapsed = now.since(issued);
    host.stall(elapsed);
    host.measured.result_load = host.measured.result_load.plus(elapsed);
    let bytes = data.len() as u64;
    let tag = host.launch.as_ref().map_or(0, |launch| launch.tag);
    host.trace_span(HostSpanKind::ResultLoad { bytes, tag }, issued, now);
    let Some(launch) = host.launch.as_mut() else {
        return false;
    };
    if data.len() as u64 != launch.command.result_length {
        let error = RuntimeError::ShortLoad {
            expected: launch.command.result_length,
            got: data.len() as u64,
        };
        host.fail(now, error);
        return false;
    }
    launch.results = data;
    launch.first_result.get_or_insert(now);
    for task in launch.tracker.arrive_all() {
        host.scheduler.ready(task);
    }
    true
}

/// A task's bytes, cut from the loaded result (cached host memory) into `bytes`, and the time
/// to read them.
pub(crate) fn task_input(
    cost: &CostModel,
    launch: &Launch,
    spec: &HostTask,
    bytes: &mut Vec<u8>,
) -> Ticks {
    let start = spec.needs.start as usize;
    let end = spec.needs.end as usize;
    bytes.clear();
    if let Some(result) = launch.results.get(start..end) {
        bytes.extend_from_slice(result);
    }
    cost.cached_read(bytes.len() as u64)
}
