//! The device process of `axle bench ring` (`axle bench device`, spawned by the host with the
//! control socket as its standard input).
//!
//! It maps host memory and the ping-pong page it receives with the first order, then runs
//! each order the host sends and answers it, until the host closes the socket (exit 0). A
//! failed phase is answered with [`Reply::Failed`] and ends the process with an error. Every
//! busy wait checks, every [`Watch::CHECK_EVERY`] spins, that the host still holds its end
//! of the control socket, so a dead host never leaves the device spinning.

use crate::bench::baselines::socket_device;
use crate::bench::limits::pingpong_device;
use crate::bench::ring::device_phase;
use crate::bench::wire::{receive, send, Order, ProducerStats, Reply, Watch};
use anyhow::{bail, Context};
use cosim_link::shm::MappedWords;
use cosim_link::turn::peer_alive;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

/// Runs the device process.
pub fn main() -> anyhow::Result<ExitCode> {
    let control = UnixStream::from(
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("the control socket (standard input)")?,
    );
    let Some((order, fds)) = receive::<Order>(&control, 3)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let Order::Setup {
        memory_bytes,
        page_bytes,
    } = order
    else {
        bail!("the first order must be Setup, not {order:?}");
    };
    let [memory_fd, page_fd, data_fd] = <[OwnedFd; 3]>::try_from(fds)
        .map_err(|fds| anyhow::anyhow!("Setup came with {} descriptors, not 3", fds.len()))?;
    let memory = MappedWords::map(memory_fd.as_fd(), memory_bytes)?;
    if let Err(error) = memory.lock() {
        log::debug!("bench device: cannot mlock host memory ({error}); pages are touched instead");
    }
    let memory = Arc::new(PhysicalMemory::from_mapped(memory).map_err(|e| anyhow::anyhow!("{e}"))?);
    let page = MappedWords::map(page_fd.as_fd(), page_bytes)?;
    let data = UnixStream::from(data_fd);
    send(&control, &Reply::Ready, &[])?;

    let mut check = || match peer_alive(&control) {
        Ok(true) => Ok(()),
        Ok(false) => bail!("the host process closed the control socket"),
        Err(error) => Err(anyhow::anyhow!("watching the host: {error}")),
    };
    loop {
        let Some((order, _)) = receive::<Order>(&control, 0)? else {
            return Ok(ExitCode::SUCCESS);
        };
        let mut watch = Watch::new(&mut check);
        let result = match order {
            Order::Setup { .. } => Err(anyhow::anyhow!("a second Setup")),
            Order::PingPong { rounds } => {
                pingpong_device(page.words(), rounds, &mut watch).map(|()| ProducerStats::default())
            }
            Order::Ring(phase) => device_phase(&memory, &phase, &mut watch),
            Order::Socket(phase) => socket_device(&data, phase).map(|()| ProducerStats::default()),
        };
        match result {
            Ok(stats) => send(&control, &Reply::Done(stats), &[])?,
            Err(error) => {
                // The host may be gone already; the error is the device's exit reason.
                let _ = send(&control, &Reply::Failed(format!("{error:#}")), &[]);
                return Err(error);
            }
        }
    }
}
