//! The baselines, measured the same three ways as the ring: a `crossbeam_queue::ArrayQueue`
//! between two threads of the host process, and a Unix socket pair between the two
//! processes.
//!
//! Each moves the same messages as the ring: 32 bytes (index, pattern, tag, 0) for
//! messages/s, the same with a `CLOCK_MONOTONIC` stamp for latency (one in flight; the
//! producer waits until the consumer took it), and 4 KiB payloads of the same pattern for
//! GB/s. As on the ring, the producer fills a buffer of its own and then hands the bytes
//! over, and the consumer copies them into a buffer of its own and checks them.

use crate::bench::limits::{fill, holds, now_ns, pattern};
use crate::bench::ring::{Clockwork, Timed, BENCH_TAG};
use crate::bench::wire::{SocketKind, SocketPhase, Watch};
use anyhow::{bail, Context};
use crossbeam_queue::ArrayQueue;
use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of a message.
pub const MESSAGE: usize = 32;
/// Bytes of a payload.
pub const PAYLOAD: usize = 4096;

/// The 32-byte message `index` (its second word a stamp when `stamp` is given).
fn message(index: u64, stamp: Option<u64>) -> [u64; 4] {
    [
        index,
        stamp.unwrap_or_else(|| pattern(index)),
        pattern(index),
        u64::from(BENCH_TAG),
    ]
}

fn message_bytes(words: &[u64; 4]) -> [u8; MESSAGE] {
    let mut bytes = [0u8; MESSAGE];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

fn message_words(bytes: &[u8; MESSAGE]) -> [u64; 4] {
    let mut words = [0u64; 4];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut value = [0u8; 8];
        value.copy_from_slice(chunk);
        *word = u64::from_le_bytes(value);
    }
    words
}

/// Checks that `words` is message `expected`; returns its stamp when `stamped`.
fn check_message(expected: u64, words: &[u64; 4], stamped: bool) -> anyhow::Result<u64> {
    let [index, second, third, tag] = *words;
    let stamp_ok = stamped || second == pattern(expected);
    if index != expected || !stamp_ok || third != pattern(expected) || tag != u64::from(BENCH_TAG) {
        bail!("message {expected} arrived as {words:x?}");
    }
    Ok(second)
}

/// The three figures of one channel.
#[derive(Clone, Debug, Default)]
pub struct ChannelRun {
    /// The messages/s phase.
    pub messages: Timed,
    /// One-way latencies (ns).
    pub latencies: Vec<u64>,
    /// The 4 KiB payload phase.
    pub payloads: Timed,
}

/// Sizes of a baseline run.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Messages timed (after `messages_warmup`).
    pub messages: u64,
    /// Untimed messages first.
    pub messages_warmup: u64,
    /// Latency samples kept (after `latency_warmup`).
    pub latency: u64,
    /// Untimed round trips first.
    pub latency_warmup: u64,
    /// Payloads timed (after `payloads_warmup`).
    pub payloads: u64,
    /// Untimed payloads first.
    pub payloads_warmup: u64,
    /// Capacity of the message queue.
    pub capacity: usize,
    /// Buffers in the payload pool.
    pub pool: usize,
    /// Full check of every N-th payload.
    pub verify_every: u64,
}

/// Spins until `stop` is set or `done` holds; false when stopped. Yields the CPU every
/// [`Watch::CHECK_EVERY`] spins, as [`Watch`] does.
#[inline]
fn spin_until(stop: &AtomicBool, mut done: impl FnMut() -> bool) -> bool {
    let mut spins = 0u64;
    loop {
        if done() {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        spins += 1;
        if spins % Watch::CHECK_EVERY == 0 {
            std::thread::yield_now();
        }
    }
}

/// Runs `producer` on a second thread and `consumer` here; a consumer error stops the
/// producer (through `stop`).
fn two_threads<T>(
    stop: &AtomicBool,
    producer: impl FnOnce() + Send,
    consumer: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    std::thread::scope(|scope| {
        let handle = scope.spawn(producer);
        let result = consumer();
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let joined = handle.join();
        match (result, joined) {
            (Ok(_), Err(_)) => bail!("the ArrayQueue producer thread panicked"),
            (result, _) => result,
        }
    })
}

/// The ArrayQueue baseline: three phases between this thread and a second one.
pub fn array_queue(sizes: &Sizes, watch: &mut Watch<'_>) -> anyhow::Result<ChannelRun> {
    Ok(ChannelRun {
        messages: queue_messages(sizes, watch)?,
        latencies: queue_latency(sizes, watch)?,
        payloads: queue_payloads(sizes, watch)?,
    })
}

fn queue_messages(sizes: &Sizes, watch: &mut Watch<'_>) -> anyhow::Result<Timed> {
    let queue = ArrayQueue::<[u64; 4]>::new(sizes.capacity.max(1));
    let stop = AtomicBool::new(false);
    let total = sizes.messages + sizes.messages_warmup;
    two_threads(
        &stop,
        || {
            for index in 0..total {
                let mut item = Some(message(index, None));
                let pushed = spin_until(&stop, || match item.take().map(|m| queue.push(m)) {
                    Some(Ok(())) => true,
                    Some(Err(back)) => {
                        item = Some(back);
                        false
                    }
                    None => true,
                });
                if !pushed {
                    return;
                }
            }
        },
        || {
            let mut clock = Clockwork::new(sizes.messages_warmup);
            while clock.received() < total {
                match queue.pop() {
                    Some(words) => {
                        check_message(clock.received(), &words, false)?;
                        clock.arrived(1);
                    }
                    None => watch.tick()?,
                }
            }
            Ok(clock.finish())
        },
    )
}

fn queue_latency(sizes: &Sizes, watch: &mut Watch<'_>) -> anyhow::Result<Vec<u64>> {
    let queue = ArrayQueue::<[u64; 4]>::new(sizes.capacity.max(1));
    let consumed = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let total = sizes.latency + sizes.latency_warmup;
    two_threads(
        &stop,
        || {
            for index in 0..total {
                if queue.push(message(index, Some(now_ns()))).is_err() {
                    return;
                }
                if !spin_until(&stop, || consumed.load(Ordering::Acquire) > index) {
                    return;
                }
            }
        },
        || {
            // Bounded by `Plan::check` (--latency-samples against the machine's memory).
            let mut samples = Vec::with_capacity(usize::try_from(sizes.latency)?);
            for index in 0..total {
                let words = loop {
                    if let Some(words) = queue.pop() {
                        break words;
                    }
                    watch.tick()?;
                };
                let now = now_ns();
                let stamp = check_message(index, &words, true)?;
                if index >= sizes.latency_warmup {
                    samples.push(now.saturating_sub(stamp));
                }
                consumed.store(index + 1, Ordering::Release);
            }
            Ok(samples)
        },
    )
}

fn queue_payloads(sizes: &Sizes, watch: &mut Watch<'_>) -> anyhow::Result<Timed> {
    let pool = sizes.pool.max(1);
    let free = ArrayQueue::<Box<[u8; PAYLOAD]>>::new(pool);
    for _ in 0..pool {
        let _ = free.push(Box::new([0u8; PAYLOAD]));
    }
    let full = ArrayQueue::<(u64, Box<[u8; PAYLOAD]>)>::new(pool);
    let stop = AtomicBool::new(false);
    let total = sizes.payloads + sizes.payloads_warmup;
    two_threads(
        &stop,
        || {
            let mut source = vec![0u8; PAYLOAD];
            for index in 0..total {
                fill(index, &mut source);
                let mut buffer = None;
                if !spin_until(&stop, || {
                    buffer = free.pop();
                    buffer.is_some()
                }) {
                    return;
                }
                let Some(mut buffer) = buffer else { return };
                buffer.copy_from_slice(&source);
                // The pool holds `pool` buffers and `full` has room for all of them.
                let _ = full.push((index, buffer));
            }
        },
        || {
            let mut clock = Clockwork::new(sizes.payloads_warmup);
            let mut local = vec![0u8; PAYLOAD];
            while clock.received() < total {
                match full.pop() {
                    Some((index, buffer)) => {
                        local.copy_from_slice(&buffer[..]);
                        let _ = free.push(buffer);
                        let expected = clock.received();
                        let whole = expected % sizes.verify_every == 0;
                        if index != expected || !holds(expected, &local, whole) {
                            bail!("ArrayQueue payload {expected} holds the wrong bytes");
                        }
                        clock.arrived(1);
                    }
                    None => watch.tick()?,
                }
            }
            Ok(clock.finish())
        },
    )
}

/// The host's side of a socket phase: reads what the device writes to `socket`.
pub fn socket_host(
    socket: &UnixStream,
    phase: SocketPhase,
    warmup: u64,
    verify_every: u64,
) -> anyhow::Result<SocketResult> {
    let total = phase.total;
    match phase.kind {
        SocketKind::Messages => {
            // A buffered reader: the host takes many messages per read system call.
            let mut reader = BufReader::with_capacity(1 << 16, socket);
            let mut clock = Clockwork::new(warmup);
            let mut bytes = [0u8; MESSAGE];
            while clock.received() < total {
                reader
                    .read_exact(&mut bytes)
                    .context("reading the data socket")?;
                check_message(clock.received(), &message_words(&bytes), false)?;
                clock.arrived(1);
            }
            Ok(SocketResult::Timed(clock.finish()))
        }
        SocketKind::Latency => {
            // Bounded by `Plan::check` (--socket-latency-samples against the machine's memory).
            let mut samples = Vec::with_capacity(usize::try_from(total.saturating_sub(warmup))?);
            let mut bytes = [0u8; MESSAGE];
            for index in 0..total {
                (&*socket)
                    .read_exact(&mut bytes)
                    .context("reading the data socket")?;
                let now = now_ns();
                let stamp = check_message(index, &message_words(&bytes), true)?;
                if index >= warmup {
                    samples.push(now.saturating_sub(stamp));
                }
                (&*socket)
                    .write_all(&[1])
                    .context("acknowledging on the data socket")?;
            }
            Ok(SocketResult::Latencies(samples))
        }
        SocketKind::Payloads => {
            let mut clock = Clockwork::new(warmup);
            let mut local = vec![0u8; PAYLOAD];
            while clock.received() < total {
                (&*socket)
                    .read_exact(&mut local)
                    .context("reading the data socket")?;
                let index = clock.received();
                if !holds(index, &local, index % verify_every == 0) {
                    bail!("socket payload {index} holds the wrong bytes");
                }
                clock.arrived(1);
            }
            Ok(SocketResult::Timed(clock.finish()))
        }
    }
}

/// What a socket phase measured.
#[derive(Clone, Debug)]
pub enum SocketResult {
    /// Messages or payloads, timed.
    Timed(Timed),
    /// One-way latencies (ns).
    Latencies(Vec<u64>),
}

/// The device's side of a socket phase: one `write` per message.
pub fn socket_device(socket: &UnixStream, phase: SocketPhase) -> anyhow::Result<()> {
    let mut writer = socket;
    match phase.kind {
        SocketKind::Messages => {
            for index in 0..phase.total {
                writer.write_all(&message_bytes(&message(index, None)))?;
            }
        }
        SocketKind::Latency => {
            let mut ack = [0u8; 1];
            for index in 0..phase.total {
                writer.write_all(&message_bytes(&message(index, Some(now_ns()))))?;
                (&*socket).read_exact(&mut ack)?;
            }
        }
        SocketKind::Payloads => {
            let mut source = vec![0u8; PAYLOAD];
            for index in 0..phase.total {
                fill(index, &mut source);
                writer.write_all(&source)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Sizes {
        Sizes {
            messages: 3000,
            messages_warmup: 100,
            latency: 200,
            latency_warmup: 10,
            payloads: 300,
            payloads_warmup: 10,
            capacity: 64,
            pool: 8,
            verify_every: 4,
        }
    }

    #[test]
    fn messages_round_trip_through_bytes_and_are_checked() {
        let words = message(9, None);
        assert_eq!(message_words(&message_bytes(&words)), words);
        assert!(check_message(9, &words, false).is_ok());
        assert!(check_message(10, &words, false).is_err());
        let stamped = message(9, Some(12345));
        assert_eq!(check_message(9, &stamped, true).unwrap(), 12345);
        assert!(check_message(9, &stamped, false).is_err());
    }

    #[test]
    fn the_array_queue_baseline_moves_every_message() {
        let mut check = || Ok(());
        let mut watch = Watch::new(&mut check);
        let run = array_queue(&sizes(), &mut watch).unwrap();
        assert_eq!(run.messages.items, 3000);
        assert_eq!(run.latencies.len(), 200);
        assert_eq!(run.payloads.items, 300);
    }

    #[test]
    fn every_socket_phase_moves_every_message() {
        for kind in [
            SocketKind::Messages,
            SocketKind::Latency,
            SocketKind::Payloads,
        ] {
            let (host, device) = UnixStream::pair().unwrap();
            let phase = SocketPhase { kind, total: 500 };
            let writer = std::thread::spawn(move || socket_device(&device, phase));
            let result = socket_host(&host, phase, 50, 7).unwrap();
            writer.join().unwrap().unwrap();
            match result {
                SocketResult::Timed(timed) => assert_eq!(timed.items, 450),
                SocketResult::Latencies(samples) => assert_eq!(samples.len(), 450),
            }
        }
    }
}
