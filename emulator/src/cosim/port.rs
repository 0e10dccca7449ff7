//! The host's link calls in-process: each call becomes a timed event, once the device's bounds
//! take it ("Bounds" in the parent module's docs).

use super::MAX_HOST_REQUESTS_IN_FLIGHT;
use crate::hal_impl::{Event, Hardware};
use crate::sim::time::one_way;
use crate::trace::{LinkDirection, LinkTraffic};
use cosim_link::link::{DeviceLink, LinkCall};
use firmware::hal::DeviceMemory;
use shared_abi::{DeviceAddress, Ticks};

/// The host's [`DeviceLink`] in-process: each call becomes a timed event.
pub(super) struct LinkPort<'a> {
    pub(super) hardware: &'a mut Hardware,
}

impl LinkPort<'_> {
    /// Whether the device takes one more host request carrying `bytes`: the request count and
    /// the bytes in flight stay within their bounds. A refusal is remembered (the first one)
    /// and ends the run after the host's turn; the request is dropped.
    fn admit(&mut self, now: Ticks, what: &str, bytes: u64) -> bool {
        // `what` names the bytes ("a CXL.mem load's length").
        let hw = &mut *self.hardware;
        hw.counts.link_calls += 1;
        let in_flight = &hw.host_in_flight;
        let device_bytes = hw.dram.size();
        let checked = cosim_link::limits::check(
            "the host's link requests in flight",
            in_flight.requests.saturating_add(1),
            MAX_HOST_REQUESTS_IN_FLIGHT,
            "a link has a finite number of request tags",
        )
        .and_then(|_| {
            // The reason is formatted only for a refusal (this runs for every host request).
            if bytes <= device_bytes {
                return Ok(bytes);
            }
            cosim_link::limits::check(
                what,
                bytes,
                device_bytes,
                &format!("the device has {} MiB of memory", device_bytes >> 20),
            )
        })
        .and_then(|_| {
            cosim_link::limits::check(
                "the bytes of the host's link requests in flight",
                in_flight.bytes.saturating_add(bytes),
                device_bytes,
                "no more than the device's memory may be in flight",
            )
        });
        match checked {
            Ok(_) => {
                hw.host_in_flight.requests += 1;
                hw.host_in_flight.bytes += bytes;
                true
            }
            Err(refused) => {
                if hw.host_in_flight.refusal.is_none() {
                    hw.host_in_flight.refusal =
                        Some(format!("at {} ns of virtual time, {refused}", now.as_ns()));
                }
                false
            }
        }
    }

    fn downstream(
        &mut self,
        now: Ticks,
        bytes: u64,
        round_trip_ns: u64,
        traffic: LinkTraffic,
    ) -> Ticks {
        let hw = &mut *self.hardware;
        let (wire_start, on_wire) = hw.link.downstream.send_span(
            now,
            bytes + hw.config.link_overhead_bytes,
            hw.config.link_gbps,
        );
        if let Some(trace) = hw.trace.as_deref_mut() {
            trace.link(
                LinkDirection::Downstream,
                traffic,
                bytes,
                wire_start,
                on_wire,
            );
        }
        on_wire.plus(one_way(round_trip_ns))
    }
}

impl DeviceLink for LinkPort<'_> {
    /// Each call becomes a timed event, once [`LinkPort::admit`] takes it.
    fn call(&mut self, call: LinkCall<'_>) {
        match call {
            LinkCall::MemStore { now, address, data } => self.store(now, address, &data, None),
            LinkCall::MemStoreSynchronous {
                now,
                address,
                data,
                token,
            } => self.store(now, address, &data, Some(token)),
            LinkCall::MemLoad {
                now,
                address,
                length,
                outstanding,
                token,
            } => self.load(now, address, length, outstanding, token),
            LinkCall::IoWrite {
                now,
                register,
                value,
            } => self.register_access(
                now,
                "a CXL.io register write",
                LinkTraffic::IoWrite,
                Event::IoWrite { register, value },
            ),
            LinkCall::IoRead {
                now,
                register,
                token,
            } => self.register_access(
                now,
                "a CXL.io register read",
                LinkTraffic::IoRead,
                Event::IoRead { register, token },
            ),
        }
    }
}

impl LinkPort<'_> {
    /// A CXL.mem store, posted (`token` `None`) or synchronous.
    fn store(&mut self, now: Ticks, address: DeviceAddress, data: &[u8], token: Option<u64>) {
        let (what, traffic) = match token {
            None => ("a CXL.mem store's data", LinkTraffic::MemStore),
            Some(_) => (
                "a synchronous CXL.mem store's data",
                LinkTraffic::MemStoreSynchronous,
            ),
        };
        if !self.admit(now, what, data.len() as u64) {
            return;
        }
        let rtt = self.hardware.config.cxl_mem_round_trip_ns;
        let at = self.downstream(now, data.len() as u64, rtt, traffic);
        self.hardware.queue.push(
            at,
            Event::HostStore {
                address,
                data: data.to_vec(),
                token,
            },
        );
    }

    /// CXL.mem loads: the response returns when the last line has crossed the link.
    fn load(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        length: u64,
        outstanding: u32,
        token: u64,
    ) {
        if !self.admit(now, "a CXL.mem load's length", length) {
            return;
        }
        let hw = &mut *self.hardware;
        let round_trip = Ticks::from_ns(hw.config.cxl_mem_round_trip_ns);
        let lines = length.div_ceil(64).max(1);
        // The core issues one line every round_trip / outstanding; the responses share the
        // device-to-host direction with DMA traffic.
        let issue_gap = Ticks(round_trip.0 / u64::from(outstanding.max(1)));
        let issue_bound = now
            .plus(Ticks(issue_gap.0.saturating_mul(lines - 1)))
            .plus(round_trip);
        let arrives = now.plus(one_way(hw.config.cxl_mem_round_trip_ns));
        let (wire_start, on_wire) = hw.link.upstream.send_span(
            arrives,
            length + lines * hw.config.link_overhead_bytes,
            hw.config.link_gbps,
        );
        if let Some(trace) = hw.trace.as_deref_mut() {
            trace.link(
                LinkDirection::Upstream,
                LinkTraffic::MemLoadResponse,
                length,
                wire_start,
                on_wire,
            );
        }
        let link_bound = on_wire.plus(one_way(hw.config.cxl_mem_round_trip_ns));
        let respond_at = issue_bound.max(link_bound);
        hw.queue.push(
            arrives,
            Event::HostLoad {
                address,
                length,
                token,
                respond_at,
            },
        );
    }

    /// A CXL.io register write or read (8 bytes downstream).
    fn register_access(&mut self, now: Ticks, what: &str, traffic: LinkTraffic, event: Event) {
        if !self.admit(now, what, 0) {
            return;
        }
        let rtt = self.hardware.config.cxl_io_round_trip_ns;
        let at = self.downstream(now, 8, rtt, traffic);
        self.hardware.queue.push(at, event);
    }
}
