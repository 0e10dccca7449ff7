//! The host's side of attaching to an emulator process (`axle emu`): what a kernel driver's
//! probe does for a real device, done over the handshake of [`cosim_link::attach`].
//!
//! [`Attachment::connect`] says hello and checks the ABI, creates host physical memory as a
//! sealed shared-memory segment (pinned page by page as it is touched, where the limit
//! allows: [`Attachment::connect`] says why) and sends it,
//! maps the device memory, the turn page and the register window the emulator sends back,
//! probes the register window's identity, and checks the announced data window. The data set
//! is then loaded into the device memory segment ([`Attachment::write_untimed`], untimed
//! set-up), and the run goes turn by turn ([`Attachment::run`]) or against the wall clock
//! ([`Attachment::run_wall`]).

use crate::mmio::{DeviceWindow, WindowFault};
use crate::registers::{ExpectedIdentity, RegisterWindow};
use cosim_link::attach::{
    receive_message, send_message, AttachError, Hello, HelloAnswer, MessageKind, SessionEnd,
    SessionReady, SessionRequest, ATTACH_TIMEOUT, EMULATOR_SILENT,
};
use cosim_link::hdm::DataAllocator;
use cosim_link::link::HostAgent;
use cosim_link::phys::PhysicalMemory;
use cosim_link::shm::MappedWords;
use cosim_link::sync::Arc;
use cosim_link::turn::{serve_host, TurnError, TurnPage};
use nix::sys::eventfd::{EfdFlags, EventFd};
use shared_abi::{DeviceAddress, Status, ABI_MAGIC};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use zerocopy::{FromZeros, IntoBytes};

/// What the host asks for when it attaches.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// The ABI version to claim: [`shared_abi::ABI_VERSION`], except in tests of the refusal.
    pub abi_version: u32,
    /// Bytes of host physical memory (a multiple of 4096).
    pub host_memory_bytes: u64,
    /// The device set-up for the emulator (JSON it defines).
    pub device_setup: String,
    /// A wall-clock run: also send an eventfd, the interrupt line the emulator writes.
    pub interrupt_line: bool,
    /// The host is one tenant of a group sharing one device (`axle emu --max-tenants`):
    /// its index, the group's size and name, the CCM's weights. The emulator answers once
    /// every tenant of the group has attached.
    pub tenant: Option<cosim_link::attach::TenantClaim>,
}

/// A host attached to an emulator process.
#[derive(Debug)]
pub struct Attachment {
    host_memory: Arc<PhysicalMemory>,
    device: DeviceWindow,
    /// The device memory segment, for the untimed set-up's bulk writes.
    device_file: OwnedFd,
    registers: RegisterWindow,
    turn_page: TurnPage,
    allocator: DataAllocator,
    data_base: DeviceAddress,
    interrupts: Option<EventFd>,
    /// The device epoch, read at attach.
    epoch: u64,
    /// Declared last, so dropped last: the emulator, which frees its session once this socket
    /// closes, still holds the shared segments while this side unmaps its own, and the
    /// pages are freed in the emulator (after this process is done with them) rather than
    /// here.
    socket: UnixStream,
}

impl Attachment {
    /// Connects to the emulator at `path`, checks the ABI, and exchanges the segments.
    ///
    /// Host memory is pinned as a driver pins DMA memory, each page as it is first touched
    /// (`mlock2` with `MLOCK_ONFAULT`): pinning the whole segment up front would populate
    /// every page of it, milliseconds of page faults (and as many to unpin them at the end)
    /// for pages most runs never touch, which an in-process run does not pay.
    pub fn connect(path: &Path, options: &AttachOptions) -> Result<Attachment, AttachError> {
        log::trace!("attach: connect");
        let socket = UnixStream::connect(path).map_err(|error| AttachError::Connect {
            path: path.to_path_buf(),
            error,
        })?;
        socket.set_read_timeout(Some(ATTACH_TIMEOUT))?;
        let hello = Hello::new(options.abi_version);
        (&socket).write_all(hello.as_bytes())?;
        // The session request follows the hello at once, before the answer: the emulator
        // finds both waiting when it accepts, and answers both in one go (one wake-up of
        // each side instead of two). If the hello is refused, the request (and the segment
        // it carries, closed by the kernel with the connection) is never read.
        let (memory, memory_fd) =
            MappedWords::create("axle-host-memory", options.host_memory_bytes)?;
        if let Err(error) = memory.lock_on_fault() {
            log::warn!("{}", memlock_advice(options.host_memory_bytes, &error));
        }
        let interrupts = if options.interrupt_line {
            Some(
                EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                    .map_err(std::io::Error::from)?,
            )
        } else {
            None
        };
        let mut fds = vec![std::os::fd::AsFd::as_fd(&memory_fd)];
        fds.extend(interrupts.as_ref().map(std::os::fd::AsFd::as_fd));
        // A refusing emulator may close before the request goes out: its answer, read
        // next, says why; the failed send is reported only if the answer was a yes.
        let requested = send_message(
            &socket,
            MessageKind::Session,
            &SessionRequest {
                host_memory_bytes: options.host_memory_bytes,
                device_setup: options.device_setup.clone(),
                turn_protocol: cosim_link::turn::PROTOCOL,
                tenant: options.tenant.clone(),
            },
            &fds,
        );
        drop(fds);
        drop(memory_fd);
        let mut answer = HelloAnswer::new_zeroed();
        (&socket).read_exact(answer.as_mut_bytes()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof
                || e.kind() == std::io::ErrorKind::ConnectionReset
            {
                AttachError::EmulatorDied("during the hello")
            } else {
                AttachError::from_io(
                    e,
                    &socket,
                    || "the emulator's answer to the hello".into(),
                    EMULATOR_SILENT,
                )
            }
        })?;
        let agreed = answer.magic == ABI_MAGIC
            && answer.version == hello.version
            && answer.layout_hash == hello.layout_hash;
        if answer.status != Status::Ok.code() || !agreed {
            return Err(AttachError::AbiMismatch {
                emulator_version: answer.version,
                host_version: hello.version,
                emulator_hash: answer.layout_hash,
                host_hash: hello.layout_hash,
            });
        }
        log::trace!("attach: answered");
        log::info!(
            "attach: emulator at {} accepted ABI version {}",
            path.display(),
            answer.version
        );
        requested?;
        let (ready, fds): (SessionReady, _) = receive_message(
            &socket,
            MessageKind::Ready,
            3,
            AttachError::EmulatorDied("before the session was ready"),
        )?;
        let [device_fd, turn_fd, register_fd] = <[OwnedFd; 3]>::try_from(fds).map_err(|_| {
            AttachError::Protocol(
                "three descriptors expected (device memory, turn page, register window)".into(),
            )
        })?;
        let registers = RegisterWindow::new(DeviceWindow::map(
            std::os::fd::AsFd::as_fd(&register_fd),
            shared_abi::registers::WINDOW_BYTES,
        )?)
        .map_err(|error| AttachError::Protocol(error.to_string()))?;
        drop(register_fd);
        registers
            .probe(&ExpectedIdentity {
                device_memory_bytes: ready.device_memory_bytes,
                data_base: ready.data_base,
                data_end: ready.data_end,
            })
            .map_err(|error| AttachError::Protocol(error.to_string()))?;
        // The device epoch: the register and the session's answer must agree, and be set.
        let epoch = registers
            .epoch()
            .map_err(|error| AttachError::Protocol(error.to_string()))?;
        if epoch != ready.epoch || epoch == 0 {
            return Err(AttachError::Protocol(format!(
                "register window: device epoch register at {:#x} reads {epoch:#x}, the session announced {:#x} (an emulator process publishes a nonzero epoch)",
                shared_abi::registers::EPOCH,
                ready.epoch
            )));
        }
        let device = DeviceWindow::map(
            std::os::fd::AsFd::as_fd(&device_fd),
            ready.device_memory_bytes,
        )?;
        let turn_page = TurnPage::map(std::os::fd::AsFd::as_fd(&turn_fd), ready.turn_page_bytes)?;
        if ready.data_end > ready.device_memory_bytes || ready.data_base > ready.data_end {
            return Err(AttachError::Protocol(format!(
                "data window {:#x}..{:#x} outside {} bytes of device memory",
                ready.data_base, ready.data_end, ready.device_memory_bytes
            )));
        }
        let host_memory = Arc::new(
            PhysicalMemory::from_store(Box::new(memory))
                .map_err(|e| AttachError::Protocol(e.to_string()))?,
        );
        socket.set_read_timeout(None)?;
        Ok(Attachment {
            host_memory,
            device,
            device_file: device_fd,
            registers,
            turn_page,
            allocator: DataAllocator::new(
                DeviceAddress(ready.data_base),
                DeviceAddress(ready.data_end),
            ),
            data_base: DeviceAddress(ready.data_base),
            interrupts,
            epoch,
            socket,
        })
    }

    /// The device epoch read from the register window at attach
    /// ([`shared_abi::registers::EPOCH`]): the same for every session of one emulator
    /// process, another after the emulator is started again.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The device's register window, mapped (probed at attach).
    pub fn registers(&self) -> &RegisterWindow {
        &self.registers
    }

    /// Host physical memory (shared with the emulator, which lands DMA writes in it).
    pub fn host_memory(&self) -> &Arc<PhysicalMemory> {
        &self.host_memory
    }

    /// Bytes of device data memory left for set-up.
    pub fn data_available(&self) -> u64 {
        self.allocator.available()
    }

    /// Untimed set-up: reserves device data memory.
    pub fn allocate(&mut self, length: u64, align: u64) -> Option<DeviceAddress> {
        self.allocator.allocate(length, align)
    }

    /// Untimed set-up: writes device data memory, within the data window. The bytes go to the
    /// device memory segment with `pwrite`, which copies them into the segment's pages
    /// without a page fault per page (the data sets fill hundreds of megabytes: DLRM's
    /// tables); where the kernel refuses, through the mapped window.
    pub fn write_untimed(&self, address: DeviceAddress, data: &[u8]) -> Result<(), WindowFault> {
        let fault = WindowFault {
            address,
            length: data.len() as u64,
        };
        let end = address.0.checked_add(data.len() as u64).ok_or(fault)?;
        if address.0 < self.data_base.0 || end > self.allocator.end().0 {
            return Err(fault);
        }
        let mut written = 0;
        while let Some(rest) = data.get(written..).filter(|rest| !rest.is_empty()) {
            let offset = i64::try_from(address.0 + written as u64).map_err(|_| fault)?;
            match nix::sys::uio::pwrite(&self.device_file, rest, offset) {
                Ok(0) | Err(_) => break,
                Ok(count) => written += count,
            }
        }
        match data.get(written..) {
            Some(rest) if !rest.is_empty() => self
                .device
                .write(DeviceAddress(address.0 + written as u64), rest),
            _ => Ok(()),
        }
    }

    /// Runs the co-simulation with `agent` as the host until the agent is done or the
    /// emulator ends the run, then receives the emulator's outcome and counters.
    pub fn run(&mut self, agent: &mut dyn HostAgent) -> Result<SessionEnd, AttachError> {
        log::trace!("attach: run");
        let served = serve_host(&self.turn_page, &self.socket, agent);
        log::debug!("attach: the host's {}", self.turn_page.wait_counts());
        match served {
            Ok(()) => {}
            Err(TurnError::PeerDied) => return Err(AttachError::EmulatorDied("during the run")),
            Err(error) => return Err(error.into()),
        }
        let (end, _): (SessionEnd, _) = receive_message(
            &self.socket,
            MessageKind::End,
            0,
            AttachError::EmulatorDied("before it sent the outcome"),
        )?;
        Ok(end)
    }

    /// Runs a wall-clock run ([`cosim_link::wall_socket`]) with `agent` as the host until it is
    /// done or the run fails, then receives the emulator's outcome and counters. Needs an
    /// attachment made with [`AttachOptions::interrupt_line`]. Returns the outcome, what the
    /// host loop did (or why it ended early), and the interrupts signalled on the eventfd.
    pub fn run_wall(
        &mut self,
        agent: &mut dyn HostAgent,
        limit: shared_abi::Ticks,
    ) -> Result<WallSessionEnd, AttachError> {
        let interrupts = self.interrupts.take().ok_or_else(|| {
            AttachError::Protocol("a wall-clock run needs the interrupt line".into())
        })?;
        let start = cosim_link::wall_socket::monotonic_now_ns();
        cosim_link::wall_socket::send_start(&self.socket, start).map_err(|error| {
            match error.kind() {
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                    AttachError::EmulatorDied("before the wall-clock run started")
                }
                _ => error.into(),
            }
        })?;
        let clock = cosim_link::wall::WallClock::from_monotonic_ns(start);
        let (port, transport) = cosim_link::wall_socket::host_side(&self.socket, interrupts)?;
        let host = cosim_link::wall::serve_host(
            agent,
            port,
            &clock,
            cosim_link::wall::HostOptions {
                limit,
                turn_jitter: None,
            },
        );
        let (end, signalled) = transport.finish()?;
        Ok(WallSessionEnd {
            end,
            host,
            signalled,
        })
    }
}

/// How an attached wall-clock run ended ([`Attachment::run_wall`]).
#[derive(Debug)]
pub struct WallSessionEnd {
    /// The emulator's outcome and counters.
    pub end: SessionEnd,
    /// What the host loop did, or why it ended early.
    pub host: Result<cosim_link::wall::HostEnd, cosim_link::wall::WallError>,
    /// Interrupts the emulator signalled on the eventfd.
    pub signalled: u64,
}

/// What an `mlock` failure means, with the limit that caused it and the way out.
///
/// Pinning is what a kernel driver does so that DMA never hits a page that was swapped out.
/// Between two processes on one machine the emulator's "DMA" writes through a shared mapping,
/// so an unpinned region still receives every write correctly; only the guarantee a real
/// device would need is missing. The run therefore continues, and says so.
pub fn memlock_advice(bytes: u64, error: &std::io::Error) -> String {
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
        .map(|(soft, _hard)| {
            if soft == nix::sys::resource::RLIM_INFINITY {
                "unlimited".to_string()
            } else {
                format!("{soft} bytes")
            }
        })
        .unwrap_or_else(|_| "unknown".to_string());
    format!(
        "attach: cannot pin (mlock) the {bytes}-byte host memory segment: {error}. \
         RLIMIT_MEMLOCK is {limit}. The run continues with the segment unpinned: the emulator's \
         DMA writes still land correctly through the shared mapping, but pages may be swapped \
         out, which a real device could not tolerate. Raise the limit (`ulimit -l` or \
         /etc/security/limits.conf) or run with CAP_IPC_LOCK to pin it."
    )
}

#[cfg(test)]
mod memlock_tests {
    use super::*;

    #[test]
    fn memlock_advice_names_the_limit_the_consequence_and_the_remedy() {
        let error = std::io::Error::from_raw_os_error(nix::libc::ENOMEM);
        let text = memlock_advice(1 << 20, &error);
        assert!(text.contains("RLIMIT_MEMLOCK is "));
        assert!(text.contains("unpinned"));
        assert!(text.contains("ulimit -l"));
        assert!(text.contains("1048576-byte"));
    }
}
