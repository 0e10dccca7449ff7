//! The host cost model: how long host work takes in virtual time. The computation itself
//! really runs; only its duration is modelled.

use crate::app::HostCost;
use crate::config::HostConfig;
use shared_abi::Ticks;

/// Durations of host work under a [`HostConfig`].
#[derive(Clone, Debug)]
pub struct CostModel {
    mhz: u64,
    ipc: f64,
    thread_gbps: f64,
    uncached_load: Ticks,
    dispatch: Ticks,
    input_store_gbps: f64,
}

impl CostModel {
    /// The model for `config`.
    pub fn new(config: &HostConfig) -> CostModel {
        // At most `MAX_HOST_UTHREADS` in a validated configuration: exact in f64.
        let threads = config.uthreads() as f64;
        CostModel {
            mhz: config.host_mhz,
            ipc: config.host_ipc,
            thread_gbps: config.host_memory_gbps / threads,
            uncached_load: Ticks::from_ns(config.uncached_load_ns),
            dispatch: Ticks::from_ns(config.task_dispatch_ns),
            input_store_gbps: config.input_store_gbps,
        }
    }

    /// A task's compute and cached-memory time: `operations / ipc` cycles, plus its memory
    /// bytes at the µthread's share of host memory bandwidth, plus the dispatch overhead.
    pub fn work(&self, cost: HostCost) -> Ticks {
        let cycles = (cost.operations as f64 / self.ipc).ceil() as u64;
        let compute = Ticks::from_cycles(cycles, self.mhz);
        compute
            .plus(self.cached_read(cost.memory_bytes))
            .plus(self.dispatch)
    }

    /// Reading `bytes` of ordinary cached host memory (results loaded by RP/BS).
    pub fn cached_read(&self, bytes: u64) -> Ticks {
        emulator_free_transfer(bytes, self.thread_gbps)
    }

    /// The control thread's time to issue `bytes` of posted stores of launch inputs.
    pub fn input_store(&self, bytes: u64) -> Ticks {
        emulator_free_transfer(bytes, self.input_store_gbps)
    }

    /// `loads` dependent uncached loads (each waits for the previous): the poller's tail load.
    pub fn uncached_loads(&self, loads: u64) -> Ticks {
        Ticks(self.uncached_load.0.saturating_mul(loads))
    }

    /// A streaming read of `bytes` from the uncached DMA region: one uncached latency, then
    /// the bytes at the µthread's bandwidth share (records, payloads).
    pub fn uncached_stream(&self, bytes: u64) -> Ticks {
        if bytes == 0 {
            return Ticks::ZERO;
        }
        self.uncached_load.plus(self.cached_read(bytes))
    }
}

/// `bytes / gbps` in ticks, rounded up.
fn emulator_free_transfer(bytes: u64, gbps: f64) -> Ticks {
    if bytes == 0 {
        return Ticks::ZERO;
    }
    Ticks((bytes as f64 * Ticks::PER_NS as f64 / gbps).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_thousand_operations_take_one_microsecond_at_3ghz_ipc_1() {
        let config = HostConfig {
            task_dispatch_ns: 0,
            host_ipc: 1.0,
            ..HostConfig::default()
        };
        let model = CostModel::new(&config);
        let cost = HostCost {
            operations: 3000,
            memory_bytes: 0,
        };
        assert_eq!(model.work(cost), Ticks::from_ns(1000));
    }

    #[test]
    fn dependent_uncached_loads_cost_one_latency_each_and_a_stream_one_in_all() {
        let model = CostModel::new(&HostConfig::default());
        assert_eq!(model.uncached_loads(3), Ticks::from_ns(240));
        let stream = model.uncached_stream(64 * 1024);
        assert!(stream > Ticks::from_ns(80) && stream < model.uncached_loads(1024));
        assert_eq!(model.uncached_stream(0), Ticks::ZERO);
    }
}
