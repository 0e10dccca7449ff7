//! The wall-clock mode's transport: the emulator and the host runtime free-running on two
//! threads against the real clock, over the same rings (DESIGN.md section 3, last paragraph).
//!
//! In virtual time the emulator is the time master and hands the host its turns. Here
//! nobody is: both sides read one [`WallClock`] (real time since a shared start, in
//! [`Ticks`]) and run when their own next event has come.
//!
//! - The host thread ([`serve_host`]) takes the responses that arrived, calls
//!   [`HostAgent::turn`] with the real time, and sends the turn's link calls to the device as
//!   [`HostTurn`]s, encoded by the same [`RecordingLink`] that carries them across processes
//!   in virtual time (`crate::turn`); then it waits until its wake-up time or a response.
//! - The device thread (`Emulator::run_wall` in the emulator) replays each `HostTurn` onto its
//!   link, stamped no earlier than its own clock, runs every device event whose time has
//!   come, and sends the responses back as [`ToHost::Response`]s.
//!
//! DMA writes land in the shared host memory when the device thread runs their landing
//! event, while the host thread polls that same memory: the races on the rings are real, and
//! only the protocol's Acquire/Release edges order them.
//!
//! A turn is sent only when it made link calls, or when the host waits for a response or is
//! done ([`Wake::OnResponse`], [`Wake::Done`]); each `HostTurn` says how many responses the
//! host had taken before it. The device therefore knows exactly when the host waits for a
//! response that will never come (no device event left, every response taken): that is a
//! deadlock, reported at once instead of hanging.
//!
//! The host's wait loses no wake-up ([`serve_host_with`] says how; the device's side is
//! [`HostWait`]); `host-runtime/tests/loom_wake.rs` checks both under loom, with the channels
//! of `crate::sync::mpsc` (the standard library's, or under `--cfg loom` a model of them).
//!
//! Waiting: a side whose next event is far away sleeps in a channel receive with a timeout
//! (so a message wakes it at once), and spins (with `yield_now`) for the last
//! [`SPIN_WINDOW`], because a sleeping thread wakes up to tens of microseconds late.

use crate::jitter::Jitter;
use crate::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use crate::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
#[cfg(not(loom))]
use crate::turn::RecordingLink;
use shared_abi::Ticks;
use std::time::{Duration, Instant};

/// How close to its deadline a waiting side stops sleeping and spins.
pub const SPIN_WINDOW: Duration = Duration::from_micros(150);

/// Real time since a shared start, in ticks of 1/6 ns.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    start: Instant,
}

impl WallClock {
    /// A clock whose time zero is now.
    pub fn start() -> WallClock {
        WallClock {
            start: Instant::now(),
        }
    }

    /// A clock whose time zero is `start`.
    pub fn starting_at(start: Instant) -> WallClock {
        WallClock { start }
    }

    /// The current time.
    pub fn now(&self) -> Ticks {
        let ns = self.start.elapsed().as_nanos();
        Ticks::from_ns(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The instant of time `at` (rounded up to a whole nanosecond).
    pub fn instant(&self, at: Ticks) -> Instant {
        let ns = at.0.div_ceil(Ticks::PER_NS);
        self.start
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| self.start + Duration::from_secs(1 << 32))
    }
}

/// One host turn, as the device thread receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostTurn {
    /// Responses the host had taken before this turn.
    pub delivered: u64,
    /// The turn's link calls and wake, as [`RecordingLink::finish`] encodes them
    /// (`crate::turn::replay_host_turn` decodes and replays them).
    pub message: Vec<u8>,
}

/// What the device thread sends the host thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToHost {
    /// A response, with the device time at which it reached the host.
    Response {
        /// Arrival time.
        at: Ticks,
        /// The response.
        response: LinkResponse,
    },
    /// The device ended the run with an error (deadlock, time limit); its message.
    Ended(String),
}

/// A wall-clock run that could not finish normally.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WallError {
    /// The device ended the run with this error.
    #[error("{0}")]
    Device(String),
    /// The device thread went away without a word (it panicked).
    #[error("the device thread went away before the host finished")]
    DeviceGone,
    /// The host thread went away without finishing (it failed or panicked).
    #[error("the host thread went away before it finished")]
    HostGone,
    /// The run took longer than its wall-clock limit.
    #[error("no completion within the wall-clock limit of {limit_ns} ns")]
    TimeLimit {
        /// The limit.
        limit_ns: u64,
    },
}

/// The host thread's end of the two channels.
#[derive(Debug)]
pub struct HostPort {
    pub(crate) to_device: Sender<HostTurn>,
    pub(crate) from_device: Receiver<ToHost>,
}

/// The device thread's end of the two channels.
#[derive(Debug)]
pub struct DevicePort {
    pub(crate) from_host: Receiver<HostTurn>,
    pub(crate) to_host: Sender<ToHost>,
}

/// A connected pair of ports.
pub fn ports() -> (HostPort, DevicePort) {
    let (to_device, from_host) = mpsc::channel();
    let (to_host, from_device) = mpsc::channel();
    (
        HostPort {
            to_device,
            from_device,
        },
        DevicePort { from_host, to_host },
    )
}

impl DevicePort {
    /// The next host turn if one has arrived; [`WallError::HostGone`] once the host thread
    /// dropped its port without a final turn.
    pub fn try_take(&self) -> Result<Option<HostTurn>, WallError> {
        match self.from_host.try_recv() {
            Ok(turn) => Ok(Some(turn)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(WallError::HostGone),
        }
    }

    /// Waits until `deadline` or a host turn, whichever comes first.
    pub fn wait(&self, deadline: Instant) -> Result<Option<HostTurn>, WallError> {
        wait_for(&self.from_host, deadline).map_err(|()| WallError::HostGone)
    }

    /// Sends a response that reached the host at `at`.
    pub fn respond(&self, at: Ticks, response: LinkResponse) -> Result<(), WallError> {
        self.to_host
            .send(ToHost::Response { at, response })
            .map_err(|_| WallError::HostGone)
    }

    /// Tells the host that the device ended the run with `error`.
    pub fn end(&self, error: String) {
        // A host that is gone needs no telling.
        let _ = self.to_host.send(ToHost::Ended(error));
    }
}

/// What the device thread knows of the host's wait: the wake its last turn asked for, the
/// responses the host had taken before that turn, and the responses sent. The host arms by
/// sending a turn that waits for a response; the device must re-check that no response
/// crossed that turn before it calls the host asleep for good ([`HostWait::asleep_for_good`]):
/// a response the host had not taken when it armed is a wake-up on its way, and the host's
/// next turn will say what it made of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostWait {
    wake: Wake,
    delivered: u64,
    sent: u64,
}

impl Default for HostWait {
    fn default() -> Self {
        HostWait::new()
    }
}

impl HostWait {
    /// Before the host's first turn: it wants a turn at once.
    pub fn new() -> HostWait {
        HostWait {
            wake: Wake::At(Ticks::ZERO),
            delivered: 0,
            sent: 0,
        }
    }

    /// The host's turn `turn` asked for `wake`.
    pub fn took_turn(&mut self, turn: &HostTurn, wake: Wake) {
        self.wake = wake;
        self.delivered = turn.delivered;
    }

    /// One response was sent to the host.
    pub fn responded(&mut self) {
        self.sent += 1;
    }

    /// The wake the host's last turn asked for.
    pub fn wake(&self) -> Wake {
        self.wake
    }

    /// Responses sent to the host.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether the host waits for a response that will never come, given that the device has
    /// no event left (`device_idle`): it armed (its last turn waits for a response) and had
    /// taken every response sent before it armed. That is a deadlock, reported at once.
    pub fn asleep_for_good(&self, device_idle: bool) -> bool {
        device_idle && self.wake == Wake::OnResponse && self.delivered == self.sent
    }
}

/// Waits until `deadline` or a message on `receiver`; `Err(())` when the sender is gone.
fn wait_for<T>(receiver: &Receiver<T>, deadline: Instant) -> Result<Option<T>, ()> {
    loop {
        match receiver.try_recv() {
            Ok(message) => return Ok(Some(message)),
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return Err(()),
        }
        let now = Instant::now();
        let Some(left) = deadline
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
        else {
            return Ok(None);
        };
        if left > SPIN_WINDOW {
            match receiver.recv_timeout(left - SPIN_WINDOW) {
                Ok(message) => return Ok(Some(message)),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(()),
            }
        } else if left > Duration::from_micros(5) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Holds the calling thread for `ns` nanoseconds of real time (a stress delay): sleeps for
/// long ones, spins for short ones.
pub fn pause(ns: u64) {
    if ns == 0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos(ns);
    let duration = Duration::from_nanos(ns);
    if duration > SPIN_WINDOW {
        std::thread::sleep(duration - SPIN_WINDOW);
    }
    while Instant::now() < until {
        std::thread::yield_now();
    }
}

/// How the host thread runs.
#[derive(Debug)]
pub struct HostOptions {
    /// The run fails when the host is not done at this time.
    pub limit: Ticks,
    /// Stress: a random real delay before each turn (the host thread running late).
    pub turn_jitter: Option<Jitter>,
}

/// What the host thread did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostEnd {
    /// Turns taken.
    pub turns: u64,
    /// Turns sent to the device.
    pub sent: u64,
    /// Responses taken.
    pub delivered: u64,
}

/// How the host thread encodes a turn for the device: [`RecordingLink`]'s encoding in every
/// real run ([`serve_host`]); the wake-up model (`host-runtime/tests/loom_wake.rs`) gives
/// [`serve_host_with`] its own.
pub trait TurnEncoder: DeviceLink {
    /// Whether a link call was made since the last [`TurnEncoder::finish`].
    fn has_calls(&self) -> bool;
    /// The message that ends the turn: the calls, then `wake`; starts a new turn.
    fn finish(&mut self, wake: Wake) -> Vec<u8>;
}

#[cfg(not(loom))]
impl TurnEncoder for RecordingLink {
    fn has_calls(&self) -> bool {
        RecordingLink::has_calls(self)
    }
    fn finish(&mut self, wake: Wake) -> Vec<u8> {
        RecordingLink::finish(self, wake)
    }
}

/// The host thread of a wall-clock run: runs `agent` against the real `clock` until it is
/// done, sending its link calls through `port` and delivering the device's responses. Returns
/// when the agent is done (after telling the device), or with the device's error, or at the
/// time limit. Dropping `port` on return tells a device thread that is still running that the
/// host is gone.
#[cfg(not(loom))]
pub fn serve_host(
    agent: &mut dyn HostAgent,
    port: HostPort,
    clock: &WallClock,
    options: HostOptions,
) -> Result<HostEnd, WallError> {
    serve_host_with(agent, port, clock, options, &mut RecordingLink::default())
}

/// [`serve_host`] with the turns encoded by `link`.
///
/// Waiting for the device is a check, an arming and a sleep, in that order, and it loses no
/// wake-up: every response that has arrived is delivered before the turn (the check: the
/// agent looks at the ring with everything it was told); a turn that waits for a response
/// (the arming) carries the count of responses taken before it, so the device can tell a
/// host that waits for nothing from one whose wake-up is already on its way
/// ([`HostWait`]); the sleep is a receive on the channel, which returns at once when a
/// response arrived after the check (the channel latches it: the re-check after arming).
pub fn serve_host_with<L: TurnEncoder>(
    agent: &mut dyn HostAgent,
    port: HostPort,
    clock: &WallClock,
    mut options: HostOptions,
    link: &mut L,
) -> Result<HostEnd, WallError> {
    let mut end = HostEnd::default();
    let mut arrived: Option<ToHost> = None;
    loop {
        // Everything that has arrived, in order.
        loop {
            let message = match arrived.take() {
                Some(message) => message,
                None => match port.from_device.try_recv() {
                    Ok(message) => message,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(WallError::DeviceGone),
                },
            };
            match message {
                ToHost::Response { at, response } => {
                    agent.deliver(at, response);
                    end.delivered += 1;
                }
                ToHost::Ended(error) => return Err(WallError::Device(error)),
            }
        }
        if let Some(jitter) = options.turn_jitter.as_mut() {
            pause(jitter.next_ns());
        }
        let now = clock.now();
        if now > options.limit {
            return Err(WallError::TimeLimit {
                limit_ns: options.limit.as_ns(),
            });
        }
        let wake = agent.turn(now, link);
        end.turns += 1;
        if link.has_calls() || !matches!(wake, Wake::At(_)) {
            let turn = HostTurn {
                delivered: end.delivered,
                message: link.finish(wake),
            };
            end.sent += 1;
            if port.to_device.send(turn).is_err() {
                // The device thread ended; its reason (if it gave one) is waiting.
                return match port.from_device.try_recv() {
                    Ok(ToHost::Ended(error)) => Err(WallError::Device(error)),
                    _ if wake == Wake::Done => Ok(end),
                    _ => Err(WallError::DeviceGone),
                };
            }
        } else {
            // Nothing to send: drop the encoded wake.
            let _ = link.finish(wake);
        }
        let deadline = match wake {
            Wake::Done => return Ok(end),
            Wake::At(at) => clock
                .instant(at)
                .min(clock.instant(options.limit.plus(Ticks(1)))),
            Wake::OnResponse => clock.instant(options.limit.plus(Ticks(1))),
        };
        arrived = wait_for(&port.from_device, deadline).map_err(|()| WallError::DeviceGone)?;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::link::{DeviceLink, LinkCall, Recorder};
    use crate::turn::replay_host_turn;

    /// A host that stores once, then waits for one response, then is done.
    struct Once {
        stage: u32,
        got: Vec<LinkResponse>,
    }

    impl HostAgent for Once {
        fn deliver(&mut self, _at: Ticks, response: LinkResponse) {
            self.got.push(response);
        }
        fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
            match self.stage {
                0 => {
                    self.stage = 1;
                    link.io_read(now, 8, 1);
                    Wake::OnResponse
                }
                _ if self.got.is_empty() => Wake::OnResponse,
                _ => Wake::Done,
            }
        }
    }

    #[test]
    fn the_host_thread_sends_its_calls_and_takes_the_answers() {
        let clock = WallClock::start();
        let (host, device) = ports();
        let answer = std::thread::spawn(move || {
            let first = loop {
                if let Some(turn) = device
                    .wait(Instant::now() + Duration::from_secs(5))
                    .unwrap()
                {
                    break turn;
                }
            };
            let mut reads = Recorder::default();
            assert_eq!(
                replay_host_turn(&first.message, &mut reads).unwrap(),
                Wake::OnResponse
            );
            let reads_made: Vec<(u64, u64)> = reads
                .calls
                .iter()
                .filter_map(|call| match call {
                    LinkCall::IoRead {
                        register, token, ..
                    } => Some((*register, *token)),
                    _ => None,
                })
                .collect();
            assert_eq!(reads_made, vec![(8, 1)]);
            assert_eq!(first.delivered, 0);
            device
                .respond(Ticks(1), LinkResponse::IoReadDone { token: 1, value: 9 })
                .unwrap();
            let last = device
                .wait(Instant::now() + Duration::from_secs(5))
                .unwrap();
            let last = last.expect("the final turn");
            assert_eq!(last.delivered, 1);
            assert_eq!(
                replay_host_turn(&last.message, &mut reads).unwrap(),
                Wake::Done
            );
        });
        let mut agent = Once {
            stage: 0,
            got: Vec::new(),
        };
        let options = HostOptions {
            limit: Ticks::from_ns(10_000_000_000),
            turn_jitter: None,
        };
        let end = serve_host(&mut agent, host, &clock, options).unwrap();
        answer.join().unwrap();
        assert_eq!(
            agent.got,
            vec![LinkResponse::IoReadDone { token: 1, value: 9 }]
        );
        assert_eq!((end.sent, end.delivered), (2, 1));
    }

    #[test]
    fn a_device_error_ends_the_host_thread() {
        let clock = WallClock::start();
        let (host, device) = ports();
        device.end("deadlock at 5 ns".into());
        let mut agent = Once {
            stage: 0,
            got: Vec::new(),
        };
        let options = HostOptions {
            limit: Ticks::from_ns(10_000_000_000),
            turn_jitter: None,
        };
        assert_eq!(
            serve_host(&mut agent, host, &clock, options),
            Err(WallError::Device("deadlock at 5 ns".into()))
        );
    }

    #[test]
    fn an_armed_host_is_asleep_for_good_only_when_no_response_crossed_its_turn() {
        let turn = |delivered| HostTurn {
            delivered,
            message: Vec::new(),
        };
        let mut host = HostWait::new();
        assert!(!host.asleep_for_good(true), "before the host's first turn");
        host.responded();
        host.took_turn(&turn(0), Wake::OnResponse);
        // The response crossed the turn: the host will wake up with it.
        assert!(!host.asleep_for_good(true));
        host.took_turn(&turn(1), Wake::OnResponse);
        assert!(host.asleep_for_good(true));
        assert!(!host.asleep_for_good(false), "a device event is left");
        host.took_turn(&turn(1), Wake::At(Ticks(5)));
        assert!(!host.asleep_for_good(true), "the host wakes at a time");
    }

    #[test]
    fn waiting_ends_at_the_deadline_or_with_a_message() {
        let (sender, receiver) = mpsc::channel::<u32>();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(2);
        assert_eq!(wait_for(&receiver, deadline), Ok(None));
        assert!(Instant::now() >= deadline);
        sender.send(7).unwrap();
        assert_eq!(
            wait_for(&receiver, Instant::now() + Duration::from_secs(5)),
            Ok(Some(7))
        );
        drop(sender);
        assert_eq!(
            wait_for(&receiver, Instant::now() + Duration::from_secs(5)),
            Err(())
        );
    }
}
