//! What each device event does: the host's requests arriving, responses leaving, DMA, the CCM,
//! the firmware's turn. Both loops ([`Emulator::run`], [`Emulator::run_wall`]) process their
//! events here.

use super::Emulator;
use crate::hal_impl::{Event, MailboxEvent};
use crate::sim::time::one_way;
use crate::trace::{DeviceInstant, LinkDirection, LinkTraffic};
use cosim_link::link::LinkResponse;
use firmware::hal::{DeviceMemory, HostEvent};
use shared_abi::{device_map, mailbox, CommandDescriptor, Ticks};
use zerocopy::FromBytes;

impl Emulator {
    /// Processes one device event; returns a response for the host, if the event is one.
    pub(super) fn process(&mut self, event: Event) -> Option<LinkResponse> {
        let hw = &mut self.hardware;
        let mut step = true;
        match event {
            Event::HostStore {
                address,
                data,
                token,
            } => {
                hw.host_in_flight.release(1, data.len() as u64);
                let respond_at = hw.now.plus(one_way(hw.config.cxl_mem_round_trip_ns));
                if device_map::in_launch_window(address) {
                    // The packet filter: a launch store never reaches memory.
                    match (CommandDescriptor::read_from_bytes(&data), token) {
                        (Ok(command), Some(token)) => {
                            if let Some(trace) = hw.trace.as_deref_mut() {
                                trace.instant(
                                    hw.now,
                                    DeviceInstant::LaunchStore { tag: command.tag },
                                );
                            }
                            hw.bulk_tokens
                                .entry(command.tag)
                                .or_default()
                                .push_back(token);
                            hw.host_events.push_back(HostEvent::LaunchStore(command));
                        }
                        (Ok(command), None) => {
                            if let Some(trace) = hw.trace.as_deref_mut() {
                                trace.instant(
                                    hw.now,
                                    DeviceInstant::LaunchStore { tag: command.tag },
                                );
                            }
                            hw.host_events.push_back(HostEvent::LaunchStore(command));
                        }
                        (Err(_), Some(token)) => {
                            // Not one whole descriptor: refused by the filter itself.
                            let status = shared_abi::Status::MalformedDescriptor.code();
                            hw.respond(respond_at, LinkResponse::StoreDone { token, status });
                            step = false;
                        }
                        (Err(_), None) => {
                            log::warn!(
                                "emulator: posted launch store of {} bytes ignored (a descriptor is 64)",
                                data.len()
                            );
                            step = false;
                        }
                    }
                } else {
                    let end = address.checked_add(data.len() as u64);
                    let written = match end {
                        Some(end) if end <= hw.host_writable_end => {
                            hw.dram.write(address, &data).is_ok()
                        }
                        _ => false,
                    };
                    if !written {
                        log::warn!(
                            "emulator: host store of {} bytes at {:#x} refused (outside host-writable device memory)",
                            data.len(),
                            address.0
                        );
                    }
                    if let Some(token) = token {
                        let status = if written {
                            shared_abi::Status::Ok
                        } else {
                            shared_abi::Status::DeviceMemoryFault
                        };
                        hw.respond(
                            respond_at,
                            LinkResponse::StoreDone {
                                token,
                                status: status.code(),
                            },
                        );
                    }
                    if !written {
                        step = false;
                    } else if address == device_map::FLOW_CONTROL {
                        if let Some(trace) = hw.trace.as_deref_mut() {
                            trace.instant(hw.now, DeviceInstant::FlowControl);
                        }
                        hw.host_events.push_back(HostEvent::FlowControl);
                    } else if address == device_map::SHADOW_DESCRIPTOR {
                        if let Some(trace) = hw.trace.as_deref_mut() {
                            trace.instant(hw.now, DeviceInstant::RegionProgrammed);
                        }
                        hw.host_events.push_back(HostEvent::RegionProgrammed);
                    } else {
                        step = false;
                    }
                }
            }
            Event::HostLoad {
                address,
                length,
                token,
                respond_at,
            } => {
                hw.host_in_flight.release(1, length);
                // Allocated only for a range inside device memory (which `LinkPort::load`
                // also checked against the device's size before the request was accepted).
                let inside = address
                    .checked_add(length)
                    .is_some_and(|end| end.0 <= hw.dram.size());
                let mut data = if inside {
                    cosim_link::limits::vec_filled("a CXL.mem load's length", length, 0u8)
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                if !inside || hw.dram.read(address, &mut data).is_err() {
                    log::warn!(
                        "emulator: host load of {length} bytes at {:#x} outside device memory",
                        address.0
                    );
                    data.clear();
                }
                // The response holds its bytes until it is delivered.
                hw.host_in_flight.bytes = hw.host_in_flight.bytes.saturating_add(data.len() as u64);
                hw.respond(respond_at, LinkResponse::LoadDone { token, data });
                step = false;
            }
            Event::IoWrite { register, value } => {
                hw.host_in_flight.release(1, 0);
                let event = match register {
                    mailbox::DOORBELL => Some(MailboxEvent::Doorbell(value)),
                    mailbox::DEQUEUE => Some(MailboxEvent::Dequeue),
                    _ => None,
                };
                if let Some(trace) = hw.trace.as_deref_mut() {
                    match register {
                        mailbox::DOORBELL => trace.instant(hw.now, DeviceInstant::Doorbell),
                        mailbox::DEQUEUE => trace.instant(hw.now, DeviceInstant::Dequeue),
                        _ => {}
                    }
                }
                if let Some(event) = event {
                    let handling = Ticks::from_cycles(
                        hw.config.firmware_mailbox_cycles,
                        hw.config.firmware_mhz,
                    );
                    hw.queue.push(hw.now.plus(handling), Event::Firmware(event));
                }
                step = false;
            }
            Event::IoRead { register, token } => {
                hw.host_in_flight.release(1, 0);
                let value = hw
                    .mailbox
                    .get((register / 8) as usize)
                    .copied()
                    .unwrap_or(u64::MAX);
                let (wire_start, back) = hw.link.upstream.send_span(
                    hw.now,
                    8 + hw.config.link_overhead_bytes,
                    hw.config.link_gbps,
                );
                if let Some(trace) = hw.trace.as_deref_mut() {
                    trace.link(
                        LinkDirection::Upstream,
                        LinkTraffic::IoReadResponse,
                        8,
                        wire_start,
                        back,
                    );
                }
                let at = back.plus(one_way(hw.config.cxl_io_round_trip_ns));
                hw.respond(at, LinkResponse::IoReadDone { token, value });
                step = false;
            }
            Event::Firmware(event) => hw.host_events.push_back(event.into()),
            Event::CcmWake => step = hw.ccm_wake(),
            Event::DmaPrepared { tag, request } => {
                hw.send_request(tag, request);
                step = false;
            }
            Event::DmaLand(landing) => {
                hw.land_and_recycle(landing);
                step = false;
            }
            Event::DmaSent {
                tag,
                status,
                started,
                landed,
            } => hw.dma.finished(tag, status, started, landed),
            Event::Deliver(response) => {
                if let LinkResponse::LoadDone { data, .. } = &response {
                    hw.host_in_flight.release(0, data.len() as u64);
                }
                return Some(response);
            }
            Event::MailboxWrite { offset, value } => {
                hw.set_mailbox(offset, value);
                step = false;
            }
        }
        if step {
            self.firmware.step(&mut self.hardware);
            if let Some(trace) = self.hardware.trace.as_deref_mut() {
                trace.executor_state(
                    self.hardware.now,
                    self.firmware.waiting_for_credit(),
                    self.firmware.stream_tails(),
                );
            }
        }
        None
    }
}
