//! The control channel between the host (`axle bench ring`) and its device process
//! (`axle bench device`), the device process itself as a child, and the watchdog of every
//! busy wait.
//!
//! The control socket is the child's standard input (one end of a `UnixStream::pair`, so no
//! descriptor is inherited by number and nothing needs `unsafe`). Messages are a 4-byte
//! little-endian length and a JSON body; the first, [`Order::Setup`], carries three
//! descriptors with SCM_RIGHTS (host memory, the ping-pong page, the data socket). The
//! protocol is lock-step: the host sends an order, both sides run the phase, the device
//! answers with a [`Reply`].

use crate::bench::Fault;
use anyhow::{bail, Context};
use cosim_link::shm::{receive_with_fds, send_with_fds};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest control message body.
const MAX_MESSAGE: u32 = 1 << 24;

/// How long the host waits for the device's answer to an order, and the longest a phase may
/// take: a bound that turns a hang into an error.
pub const PHASE_TIMEOUT: Duration = Duration::from_secs(300);

/// What the host asks of the device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Order {
    /// Map these (the descriptors come with the message: host memory, the ping-pong page, the
    /// device's end of the data socket).
    Setup {
        /// Bytes of host memory.
        memory_bytes: u64,
        /// Bytes of the ping-pong page.
        page_bytes: u64,
    },
    /// Answer `rounds` pings on the ping-pong page.
    PingPong {
        /// Round trips.
        rounds: u64,
    },
    /// Produce into a ring.
    Ring(RingPhase),
    /// Write to the data socket.
    Socket(SocketPhase),
}

/// Which ring figure a phase measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RingKind {
    /// 8-byte payloads as fast as credit allows: records/s.
    Records,
    /// One 16-byte payload (stamp, pattern) at a time: latency.
    Latency,
    /// 4 KiB payloads as fast as credit allows: GB/s.
    Payloads,
}

/// One ring phase: where the region lies and what to produce.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RingPhase {
    /// The figure.
    pub kind: RingKind,
    /// The region's frames, in region order (host physical addresses).
    pub frames: Vec<u64>,
    /// Records in the metadata ring.
    pub metadata_capacity: u32,
    /// Slots in the payload ring.
    pub payload_capacity: u32,
    /// Bytes per payload slot.
    pub slot_size: u32,
    /// The epoch in the static line.
    pub epoch: u64,
    /// Payloads to produce (warm-up included).
    pub total: u64,
    /// Payloads per payload-tail update.
    pub batch: u32,
    /// A fault to inject (records phase only).
    pub fault: Option<Fault>,
}

/// Which socket figure a phase measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SocketKind {
    /// 32-byte messages, one write each.
    Messages,
    /// One stamped 32-byte message at a time, each answered with a 1-byte acknowledgement.
    Latency,
    /// 4 KiB messages, one write each.
    Payloads,
}

/// One socket phase.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct SocketPhase {
    /// The figure.
    pub kind: SocketKind,
    /// Messages to write (warm-up included).
    pub total: u64,
}

/// What the device counted while producing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStats {
    /// Payloads (and records) published.
    pub payloads: u64,
    /// Payload-tail stores (D2).
    pub payload_tail_updates: u64,
    /// Reads of the host's heads because the cached copy said full (D5).
    pub head_reads: u64,
    /// Times the device found no credit even after reading the heads (back-pressure).
    pub credit_waits: u64,
}

/// The device's answer to an order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Set up (answer to [`Order::Setup`]).
    Ready,
    /// The phase is done.
    Done(ProducerStats),
    /// The phase failed; the device exits.
    Failed(String),
}

/// Sends `body` (with `fds`, SCM_RIGHTS, on its first byte).
pub fn send<T: Serialize>(
    socket: &UnixStream,
    body: &T,
    fds: &[BorrowedFd<'_>],
) -> anyhow::Result<()> {
    let body = serde_json::to_vec(body)?;
    let length = u32::try_from(body.len())
        .ok()
        .filter(|&length| length <= MAX_MESSAGE)
        .context("control message too long")?;
    let header = length.to_le_bytes();
    send_with_fds(socket, &[&header, &body], fds).context("sending a control message")?;
    Ok(())
}

/// Receives a message with at most `max_fds` descriptors; `None` when the peer closed the
/// socket between messages.
pub fn receive<T: DeserializeOwned>(
    socket: &UnixStream,
    max_fds: usize,
) -> anyhow::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let (received, fds) =
        receive_with_fds(socket, &mut header, max_fds).context("receiving a control message")?;
    if received == 0 {
        return Ok(None);
    }
    (&*socket)
        .read_exact(&mut header[received..])
        .context("control message cut short")?;
    let length = u32::from_le_bytes(header);
    if length > MAX_MESSAGE {
        bail!("control message of {length} bytes");
    }
    // At most MAX_MESSAGE bytes (checked above).
    let mut body = vec![0u8; length as usize];
    (&*socket)
        .read_exact(&mut body)
        .context("control message cut short")?;
    let value = serde_json::from_slice(&body).context("control message")?;
    Ok(Some((value, fds)))
}

/// Counts the spins of a busy wait and, every [`Watch::CHECK_EVERY`] of them, runs a check
/// (is the peer alive? is the phase over its time?) that can end the wait with an error, and
/// yields the CPU once.
///
/// The yield matters on a shared machine only: when a third process has taken one of two
/// CPUs, the two sides may share the other, and a side that spins through its whole time
/// slice keeps its peer from making the progress it waits for. On two idle CPUs a side waits
/// far less than `CHECK_EVERY` spins at a time, and a yield with nobody else runnable returns
/// at once.
pub struct Watch<'a> {
    spins: u64,
    check: &'a mut dyn FnMut() -> anyhow::Result<()>,
}

impl core::fmt::Debug for Watch<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Watch")
            .field("spins", &self.spins)
            .finish_non_exhaustive()
    }
}

impl<'a> Watch<'a> {
    /// Spins between two checks (a check is a system call; this keeps it far below 1% of a
    /// busy wait and still notices a dead peer within milliseconds).
    pub const CHECK_EVERY: u64 = 1 << 16;

    /// A watch that runs `check`.
    pub fn new(check: &'a mut dyn FnMut() -> anyhow::Result<()>) -> Watch<'a> {
        Watch { spins: 0, check }
    }

    /// One more spin of a busy wait.
    #[inline]
    pub fn tick(&mut self) -> anyhow::Result<()> {
        self.spins += 1;
        if self.spins % Self::CHECK_EVERY == 0 {
            (self.check)()?;
            std::thread::yield_now();
            Ok(())
        } else {
            Ok(())
        }
    }
}

/// The device process, seen from the host.
#[derive(Debug)]
pub struct Peer {
    child: Child,
    control: UnixStream,
}

impl Peer {
    /// Spawns `current_exe() bench device` with the control socket as its standard input.
    pub fn spawn() -> anyhow::Result<Peer> {
        let (ours, theirs) = UnixStream::pair()?;
        let exe = std::env::current_exe().context("finding this executable")?;
        let child = Command::new(&exe)
            .args(["bench", "device"])
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("spawning the device process {}", exe.display()))?;
        ours.set_read_timeout(Some(PHASE_TIMEOUT))?;
        Ok(Peer {
            child,
            control: ours,
        })
    }

    /// Sends `order` (with `fds`).
    pub fn order(&self, order: &Order, fds: &[BorrowedFd<'_>]) -> anyhow::Result<()> {
        send(&self.control, order, fds).context("the device process does not listen")
    }

    /// Waits for the device's answer.
    pub fn reply(&mut self) -> anyhow::Result<Reply> {
        match receive::<Reply>(&self.control, 0) {
            Ok(Some((Reply::Failed(error), _))) => bail!("device process: {error}"),
            Ok(Some((reply, _))) => Ok(reply),
            Ok(None) => bail!("device process died ({})", self.status()),
            Err(error) => Err(error.context(format!("device process ({})", self.status()))),
        }
    }

    /// Waits for [`Reply::Done`].
    pub fn done(&mut self) -> anyhow::Result<ProducerStats> {
        match self.reply()? {
            Reply::Done(stats) => Ok(stats),
            other => bail!("device process answered {other:?} where Done was due"),
        }
    }

    /// Errors when the device process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => {
                // Its last word, if it sent one before it exited (the socket holds it).
                if let Ok(Some((Reply::Failed(error), _))) = receive::<Reply>(&self.control, 0) {
                    bail!("device process: {error}");
                }
                bail!("device process exited ({status}) in the middle of a phase")
            }
        }
    }

    fn status(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => status.to_string(),
            Ok(None) => "still running".into(),
            Err(error) => error.to_string(),
        }
    }

    /// Closes the control socket (the device exits on end-of-file) and checks that the
    /// device process exits successfully.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        self.control.shutdown(std::net::Shutdown::Both)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("device process exited with {status}");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("device process did not exit after the run");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // A run that failed leaves the device spinning: stop it (only this child, by its id).
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_their_descriptors() {
        let (left, right) = UnixStream::pair().unwrap();
        let (_, fd) = cosim_link::shm::MappedWords::create("axle-bench-test", 4096).unwrap();
        let order = Order::Setup {
            memory_bytes: 4096,
            page_bytes: 4096,
        };
        send(&left, &order, &[std::os::fd::AsFd::as_fd(&fd)]).unwrap();
        send(&left, &Reply::Ready, &[]).unwrap();
        let (back, fds): (Order, _) = receive(&right, 3).unwrap().unwrap();
        assert!(matches!(
            back,
            Order::Setup {
                memory_bytes: 4096,
                ..
            }
        ));
        assert_eq!(fds.len(), 1);
        let (reply, fds): (Reply, _) = receive(&right, 0).unwrap().unwrap();
        assert!(matches!(reply, Reply::Ready));
        assert!(fds.is_empty());
        drop(left);
        assert!(receive::<Reply>(&right, 0).unwrap().is_none());
    }

    #[test]
    fn the_watch_checks_once_per_check_every_spins() {
        let mut checks = 0;
        let mut check = || {
            checks += 1;
            if checks == 2 {
                bail!("stop")
            }
            Ok(())
        };
        let mut watch = Watch::new(&mut check);
        let mut spins = 0u64;
        let error = loop {
            spins += 1;
            if let Err(error) = watch.tick() {
                break error;
            }
        };
        assert_eq!(spins, 2 * Watch::CHECK_EVERY);
        assert_eq!(error.to_string(), "stop");
    }
}
