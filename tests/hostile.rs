//! Hostile hosts: a client that speaks the attach protocol (`cosim_link::attach`'s framing)
//! and then lies in every field it can, against the built `axle emu` process.
//!
//! Each test starts one emulator, measures what it holds while idle (descriptors, memfd
//! mappings, shared memory), lets one or more hostile clients do their worst, and requires
//! that the emulator
//!
//! - refuses (the client gets a `Refused` message that names what was wrong, or is detached),
//! - survives (the process is still running),
//! - releases every descriptor and mapping the client made it take (back to the idle figures),
//! - and serves the next honest host: `axle run --attach ... --json` prints byte for byte what
//!   the same run prints in-process.
//!
//! Run: `cargo test --release --test hostile`.

use cosim_link::attach::{
    receive_message, send_message, AttachError, Hello, HelloAnswer, MessageKind, SessionEnd,
    SessionReady, SessionRequest, TenantClaim,
};
use cosim_link::link::Turns;
use cosim_link::link::{DeviceLink, Wake};
use cosim_link::shm::{sealed_memfd, MappedWords};
use cosim_link::turn::{host_message, RecordingLink, Turn, TurnPage, DEVICE, HOST};
use emulator::server::Setup;
use shared_abi::{DeviceAddress, Status, Ticks, ABI_VERSION};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use zerocopy::{FromZeros, IntoBytes};

mod common;
use common::{finish_axle, spawn_axle, tenant_args, EmulatorProcess, Reaped, Scratch};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");
/// Bound on any single wait for a process or a log line.
const DEADLINE: Duration = Duration::from_secs(30);
/// The honest run: small and quick (a few milliseconds).
const HONEST: [&str; 7] = ["run", "knn-a", "--mode", "axle", "--queries", "1", "--json"];
/// Host memory of a hostile session (the honest run needs less).
const HOST_MEMORY: u64 = 16 << 20;

/// What the emulator process holds, from `/proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    descriptors: usize,
    /// Mappings of memfds (`/memfd:` in `/proc/PID/maps`).
    memfd_mappings: usize,
    /// `RssShmem` of `/proc/PID/status`, in KiB.
    shmem_kib: u64,
}

impl EmulatorProcess {
    fn start(scratch: &Scratch, extra: &[&str]) -> EmulatorProcess {
        EmulatorProcess::start_with(AXLE, scratch, extra, DEADLINE)
    }

    fn alive(&mut self) -> bool {
        self.child.0.try_wait().unwrap().is_none()
    }

    fn held(&self) -> Held {
        let pid = self.child.pid();
        let descriptors = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|entries| entries.count())
            .unwrap_or(usize::MAX);
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let shmem_kib = status
            .lines()
            .find(|line| line.starts_with("RssShmem:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(u64::MAX);
        Held {
            descriptors,
            memfd_mappings: maps.matches("/memfd:").count(),
            shmem_kib,
        }
    }

    /// Waits until the emulator holds what it held at `idle` (it frees a session's resources
    /// right after the session ends, which is after the client saw the refusal).
    fn back_to(&self, idle: Held, after: &str) {
        let started = Instant::now();
        loop {
            let now = self.held();
            if now.descriptors <= idle.descriptors
                && now.memfd_mappings <= idle.memfd_mappings
                && now.shmem_kib <= idle.shmem_kib + 64
            {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "after {after}, the emulator still holds {now:?} (idle: {idle:?}); its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Requires the emulator alive, holding no more than at `idle`, and serving an honest host
    /// that prints the in-process run's JSON byte for byte.
    fn serves_an_honest_host(&mut self, idle: Held, after: &str) {
        assert!(
            self.alive(),
            "axle emu died after {after}; its log:\n{}",
            self.log()
        );
        self.back_to(idle, after);
        let in_process = axle(&HONEST);
        assert!(in_process.status.success(), "{}", text(&in_process.stderr));
        let mut attached_args = HONEST.to_vec();
        let socket = self.socket.to_str().unwrap().to_owned();
        attached_args.extend(["--attach", &socket]);
        let attached = axle(&attached_args);
        assert!(
            attached.status.success(),
            "the honest host after {after} failed: {}\nemulator log:\n{}",
            text(&attached.stderr),
            self.log()
        );
        assert_eq!(
            text(&attached.stdout),
            text(&in_process.stdout),
            "after {after}, the attached run printed other JSON than the in-process run"
        );
        self.back_to(idle, &format!("the honest host after {after}"));
    }
}

/// Runs `axle` with `args` to completion (bounded by [`DEADLINE`]).
fn axle(args: &[&str]) -> Output {
    finish_axle(spawn_axle(args), DEADLINE, &args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A device set-up as an honest host sends it.
fn honest_setup() -> Setup {
    Setup {
        device: emulator::DeviceConfig::default(),
        streaming_factor: emulator::server::StreamingSetting::Bytes(4096),
        out_of_order: false,
        limit_ns: 1_000_000_000,
        wall: None,
    }
}

fn setup_json(setup: &Setup) -> String {
    serde_json::to_string(setup).unwrap()
}

/// A client past the hello.
struct Client {
    socket: UnixStream,
}

impl Client {
    fn hello(path: &Path) -> Client {
        let socket = UnixStream::connect(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        (&socket)
            .write_all(Hello::new(ABI_VERSION).as_bytes())
            .unwrap();
        let mut answer = HelloAnswer::new_zeroed();
        (&socket).read_exact(answer.as_mut_bytes()).unwrap();
        assert_eq!(answer.status, Status::Ok.code());
        Client { socket }
    }

    fn request(&self, host_memory_bytes: u64, setup: &str, fds: &[BorrowedFd<'_>]) {
        self.request_speaking(cosim_link::turn::PROTOCOL, host_memory_bytes, setup, fds);
    }

    fn request_speaking(
        &self,
        turn_protocol: u32,
        host_memory_bytes: u64,
        setup: &str,
        fds: &[BorrowedFd<'_>],
    ) {
        send_message(
            &self.socket,
            MessageKind::Session,
            &SessionRequest {
                host_memory_bytes,
                device_setup: setup.to_owned(),
                turn_protocol,
                tenant: None,
            },
            fds,
        )
        .unwrap();
    }

    /// Asks for a session as tenant `claim` with `setup` and `HOST_MEMORY` bytes of host
    /// memory (returned: the segment lives as long as the caller keeps it).
    fn request_tenant(&self, claim: TenantClaim, setup: &Setup) -> MappedWords {
        let (memory, fd) = MappedWords::create("hostile-host-memory", HOST_MEMORY).unwrap();
        send_message(
            &self.socket,
            MessageKind::Session,
            &SessionRequest {
                host_memory_bytes: HOST_MEMORY,
                device_setup: setup_json(setup),
                turn_protocol: cosim_link::turn::PROTOCOL,
                tenant: Some(claim),
            },
            &[fd.as_fd()],
        )
        .unwrap();
        memory
    }

    fn ready(&self) -> Result<(SessionReady, Vec<OwnedFd>), AttachError> {
        receive_message(
            &self.socket,
            MessageKind::Ready,
            3,
            AttachError::EmulatorDied("before ready"),
        )
    }

    /// The session's answer, and the turn page it names mapped: the page and the descriptors.
    fn ready_page(&self) -> (TurnPage, Vec<OwnedFd>) {
        let (ready, fds) = self.ready().unwrap();
        let page = TurnPage::map(fds[1].as_fd(), ready.turn_page_bytes).unwrap();
        (page, fds)
    }

    /// The emulator's refusal of the session; panics on anything else.
    fn refused(&self) -> String {
        match self.ready() {
            Err(AttachError::Refused(reason)) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// An honest attach with `HOST_MEMORY` bytes of host memory: the turn page, mapped.
    fn attach(path: &Path) -> (Client, MappedWords, TurnPage, Vec<OwnedFd>) {
        let client = Client::hello(path);
        let (memory, fd) = MappedWords::create("hostile-host-memory", HOST_MEMORY).unwrap();
        client.request(HOST_MEMORY, &setup_json(&honest_setup()), &[fd.as_fd()]);
        let (page, fds) = client.ready_page();
        (client, memory, page, fds)
    }
}

/// The host's half of one turn (no turn of its own after it): `link`'s calls and `wake`.
fn one_turn(link: &mut RecordingLink, wake: Wake) -> Vec<u8> {
    host_message(
        link,
        &Turns {
            wake,
            taken: 1,
            latest: Ticks::ZERO,
        },
    )
}

/// `turn` with the trailer of a host that took no turn of its own (16 zero bytes).
fn with_trailer(turn: &[u8]) -> Vec<u8> {
    [turn, &[0; 16]].concat()
}

/// Waits for the host's turn on `page`.
fn take_turn(page: &TurnPage, client: &Client) {
    match page.wait_for(HOST, &client.socket, &mut || false).unwrap() {
        Turn::Mine(_) => {}
        Turn::Finished => panic!("the run finished before the host's first turn"),
    }
}

/// Why the emulator ended the session: a refusal's reason, or the error of its outcome.
fn end_reason(client: &Client) -> String {
    match receive_message::<SessionEnd>(
        &client.socket,
        MessageKind::End,
        0,
        AttachError::EmulatorDied("before the outcome"),
    ) {
        Err(AttachError::Refused(reason)) => reason,
        Ok((
            SessionEnd {
                error: Some(error), ..
            },
            _,
        )) => error,
        other => panic!("expected the emulator to end the session with a reason, got {other:?}"),
    }
}

/// Hands the turn on `page` back to the device with no link calls, to wake at `wake`.
fn hand_back(page: &TurnPage, wake: Wake) {
    let mut link = RecordingLink::default();
    page.hand_over(DEVICE, &one_turn(&mut link, wake)).unwrap();
}

/// The outcome of `client`'s session, which must carry no error.
fn outcome_without_error(client: &Client, emulator: &EmulatorProcess) -> SessionEnd {
    let (end, _) = receive_message::<SessionEnd>(
        &client.socket,
        MessageKind::End,
        0,
        AttachError::EmulatorDied("before the outcome"),
    )
    .unwrap();
    assert_eq!(end.error, None, "log:\n{}", emulator.log());
    end
}

#[test]
fn a_turn_asking_for_a_huge_load_is_refused_and_the_next_host_served() {
    let scratch = Scratch::new("hostile", "huge-load");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    for (what, length) in [("2^50 bytes", 1u64 << 50), ("u64::MAX bytes", u64::MAX)] {
        let (client, _memory, page, _fds) = Client::attach(&emulator.socket);
        take_turn(&page, &client);
        let mut link = RecordingLink::default();
        link.mem_load(Ticks(0), DeviceAddress(0x10_0000), length, 8, 1);
        page.hand_over(DEVICE, &one_turn(&mut link, Wake::OnResponse))
            .unwrap();
        let reason = end_reason(&client);
        assert!(
            reason.contains("CXL.mem load") && reason.contains(&length.to_string()),
            "{what}: {reason}"
        );
        drop(client);
        emulator.serves_an_honest_host(idle, &format!("a load of {what}"));
    }
}

/// `count` sealed memfds of `bytes` each, every page touched (so that a leak holds memory).
fn touched_segments(count: usize, bytes: u64) -> Vec<OwnedFd> {
    (0..count)
        .map(|_| {
            let (mapped, fd) = MappedWords::create("hostile-extra", bytes).unwrap();
            for word in mapped.words().iter().step_by(512) {
                word.store(0x5a5a, std::sync::atomic::Ordering::Relaxed);
            }
            fd
        })
        .collect()
}

#[test]
fn descriptors_past_the_expected_count_are_all_closed() {
    let scratch = Scratch::new("hostile", "extra-fds");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    // 3: one more than a wall-clock session takes; 8: fits the receive buffer; 9, 16 and 200:
    // do not (the kernel truncates the control message).
    for count in [3usize, 8, 9, 16, 200] {
        for _attempt in 0..3 {
            let client = Client::hello(&emulator.socket);
            let fds = touched_segments(count, 1 << 20);
            let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
            client.request(1 << 20, &setup_json(&honest_setup()), &borrowed);
            drop(fds);
            let reason = client.refused();
            assert!(
                reason.contains("descriptors"),
                "{count} descriptors: {reason}"
            );
            drop(client);
            emulator.back_to(idle, &format!("a session request with {count} descriptors"));
        }
    }
    emulator.serves_an_honest_host(idle, "session requests with too many descriptors");
}

/// A session request with `fds` and `host_memory_bytes` announced; the emulator's refusal.
fn refusal(socket: &Path, host_memory_bytes: u64, setup: &str, fds: &[BorrowedFd<'_>]) -> String {
    let client = Client::hello(socket);
    client.request(host_memory_bytes, setup, fds);
    client.refused()
}

#[test]
fn segments_of_the_wrong_kind_size_or_seals_are_refused_by_name() {
    let scratch = Scratch::new("hostile", "segments");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    let setup = setup_json(&honest_setup());
    let (pipe_read, _pipe_write) = nix::unistd::pipe().unwrap();
    let file_path = scratch.dir.join("not-a-memfd");
    let file = File::create(&file_path).unwrap();
    file.set_len(4096).unwrap();
    let unsealed = {
        let name = std::ffi::CString::new("hostile-unsealed").unwrap();
        let fd =
            nix::sys::memfd::memfd_create(&name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
                .unwrap();
        nix::unistd::ftruncate(&fd, 4096).unwrap();
        fd
    };
    let sealed = sealed_memfd("hostile-sealed", 4096).unwrap();
    let odd = sealed_memfd("hostile-odd", 4100).unwrap();
    let cases: [(&str, u64, BorrowedFd<'_>, &str); 7] = [
        ("a pipe", 4096, pipe_read.as_fd(), "a pipe"),
        ("a file on disk", 4096, file.as_fd(), "cannot be sealed"),
        ("an unsealed memfd", 4096, unsealed.as_fd(), "not sealed"),
        (
            "a smaller segment",
            8192,
            sealed.as_fd(),
            "4096 bytes where 8192 were announced",
        ),
        (
            "a size not a multiple of 8",
            4100,
            odd.as_fd(),
            "multiple of 8",
        ),
        (
            "a size beyond the machine's memory",
            1 << 50,
            sealed.as_fd(),
            "host_memory_bytes is 1125899906842624",
        ),
        ("a size of zero", 0, sealed.as_fd(), "0 were announced"),
    ];
    for (what, bytes, fd, expected) in cases {
        let reason = refusal(&emulator.socket, bytes, &setup, &[fd]);
        assert!(reason.contains(expected), "{what}: {reason}");
        emulator.back_to(idle, what);
    }
    // A wall-clock session's interrupt line must be an eventfd; and it needs one.
    let mut wall = honest_setup();
    wall.wall = Some(emulator::server::WallSetup {
        limit_ns: 1_000_000_000,
    });
    let wall = setup_json(&wall);
    let reason = refusal(
        &emulator.socket,
        4096,
        &wall,
        &[sealed.as_fd(), pipe_read.as_fd()],
    );
    assert!(reason.contains("not an eventfd"), "{reason}");
    let reason = refusal(&emulator.socket, 4096, &wall, &[sealed.as_fd()]);
    assert!(reason.contains("carried 1 descriptors"), "{reason}");
    let reason = refusal(&emulator.socket, 4096, &setup, &[]);
    assert!(reason.contains("descriptors"), "{reason}");
    emulator.serves_an_honest_host(idle, "segments of the wrong kind, size or seals");
}

#[test]
fn device_set_ups_beyond_the_models_or_the_machines_limits_are_refused() {
    let scratch = Scratch::new("hostile", "set-up");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    let segment = sealed_memfd("hostile-host-memory", 4096).unwrap();
    let with = |change: &dyn Fn(&mut Setup)| {
        let mut setup = honest_setup();
        change(&mut setup);
        setup_json(&setup)
    };
    let mut cases: Vec<(&str, String, &str)> = vec![
        (
            "4e9 CCM units",
            with(&|s| s.device.ccm_units = 4_000_000_000),
            "µthreads",
        ),
        (
            "u32::MAX µthreads per sub-core",
            with(&|s| s.device.ccm_uthreads_per_sub_core = u32::MAX),
            "µthreads",
        ),
        (
            "1 MiB of device memory",
            with(&|s| s.device.device_memory_mib = 1),
            "device_memory_mib is 1, less than",
        ),
        (
            "u64::MAX MiB of device memory",
            with(&|s| s.device.device_memory_mib = u64::MAX),
            "device_memory_mib",
        ),
        (
            "no DMA channel",
            with(&|s| s.device.dma_channels = 0),
            "dma_channels",
        ),
        (
            "not JSON",
            "{\"device\": [".to_owned(),
            "invalid device set-up",
        ),
    ];
    // 64 GiB passes the model's own limit; the machine's memory refuses it where it has less.
    if cosim_link::limits::Machine::get().memory_budget < 64 << 30 {
        cases.push((
            "64 GiB of device memory",
            with(&|s| s.device.device_memory_mib = 64 << 10),
            "memory available",
        ));
    }
    for (what, setup, expected) in cases {
        let reason = refusal(&emulator.socket, 4096, &setup, &[segment.as_fd()]);
        assert!(reason.contains(expected), "{what}: {reason}");
        emulator.back_to(idle, what);
    }
    emulator.serves_an_honest_host(idle, "device set-ups beyond the limits");
}

#[test]
fn a_host_speaking_another_turn_protocol_is_refused_by_name_and_the_next_host_served() {
    let scratch = Scratch::new("hostile", "protocol");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    let segment = sealed_memfd("hostile-host-memory", 4096).unwrap();
    let setup = setup_json(&honest_setup());
    let client = Client::hello(&emulator.socket);
    let older = cosim_link::turn::PROTOCOL - 1;
    client.request_speaking(older, 4096, &setup, &[segment.as_fd()]);
    let reason = client.refused();
    assert!(
        reason.contains(&format!("the host speaks turn protocol {older}"))
            && reason.contains("same build"),
        "{reason}"
    );
    drop(client);
    emulator.back_to(idle, "a host speaking another turn protocol");
    emulator.serves_an_honest_host(idle, "a host speaking another turn protocol");
}

/// A host of this build sends its session request right behind its hello; an emulator that
/// finds it waiting holds the hello's answer back until the session is set up, and must still
/// send that answer before anything else, a refusal included (else the host would read the
/// refusal's frame as the answer).
#[test]
fn a_request_sent_behind_the_hello_is_answered_first_and_then_refused_by_name() {
    let scratch = Scratch::new("hostile", "pipelined");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    let segment = sealed_memfd("hostile-host-memory", 4096).unwrap();
    let setup = setup_json(&honest_setup());
    let socket = UnixStream::connect(&emulator.socket).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    (&socket)
        .write_all(Hello::new(ABI_VERSION).as_bytes())
        .unwrap();
    let client = Client { socket };
    let older = cosim_link::turn::PROTOCOL - 1;
    client.request_speaking(older, 4096, &setup, &[segment.as_fd()]);
    let mut answer = HelloAnswer::new_zeroed();
    (&client.socket).read_exact(answer.as_mut_bytes()).unwrap();
    assert_eq!(
        (answer.magic, answer.status),
        (shared_abi::ABI_MAGIC, Status::Ok.code())
    );
    let reason = client.refused();
    assert!(
        reason.contains(&format!("the host speaks turn protocol {older}")),
        "{reason}"
    );
    drop(client);
    emulator.back_to(idle, "a host that asked before the answer");
    emulator.serves_an_honest_host(idle, "a host that asked before the answer");
}

/// What a lying host does to the turn page (the page, and the page mapped as raw words).
type Lie<'a> = dyn Fn(&TurnPage, &MappedWords) + 'a;

/// One hostile turn after an honest attach: `lie` writes the turn page (mapped as words)
/// instead of an honest host; the emulator's reason for ending the session.
fn lying_turn(emulator: &EmulatorProcess, lie: &Lie<'_>) -> String {
    let (client, _memory, page, fds) = Client::attach(&emulator.socket);
    let raw = MappedWords::map(fds[1].as_fd(), cosim_link::turn::TURN_PAGE_BYTES).unwrap();
    take_turn(&page, &client);
    lie(&page, &raw);
    end_reason(&client)
}

#[test]
fn turns_that_lie_are_refused_and_the_host_detached() {
    use std::sync::atomic::Ordering::Release;
    let scratch = Scratch::new("hostile", "turns");
    let mut emulator = EmulatorProcess::start(&scratch, &[]);
    let idle = emulator.held();
    let calls = |build: &dyn Fn(&mut RecordingLink)| {
        let mut link = RecordingLink::default();
        build(&mut link);
        one_turn(&mut link, Wake::OnResponse)
    };
    let data = DeviceAddress(0x10_0000);
    let many_writes = calls(&|link| {
        for _ in 0..=emulator::cosim::MAX_HOST_REQUESTS_IN_FLIGHT {
            link.io_write(Ticks(0), 0, 0);
        }
    });
    let big_loads = calls(&|link| {
        for token in 0..3 {
            link.mem_load(Ticks(0), data, 128 << 20, 8, token);
        }
    });
    let cases: Vec<(&str, Box<Lie<'_>>, &str)> = vec![
        (
            "a flag no side writes",
            Box::new(|_, raw| raw.words()[0].store(99, Release)),
            "turn flag holds 99",
        ),
        (
            "a length beyond the page",
            Box::new(|_, raw| {
                raw.words()[1].store(u64::MAX, std::sync::atomic::Ordering::Relaxed);
                raw.words()[0].store(DEVICE, Release);
            }),
            "message length beyond the page",
        ),
        (
            "an unknown call",
            Box::new(|page, _| page.hand_over(DEVICE, &with_trailer(&[0xff; 8])).unwrap()),
            "unknown link call code",
        ),
        (
            "a message cut inside a field",
            Box::new(|page, _| {
                page.hand_over(DEVICE, &with_trailer(&[3, 0, 0, 0, 0, 0, 0, 0, 1]))
                    .unwrap()
            }),
            "message ends inside a field",
        ),
        (
            "a byte string longer than the message",
            Box::new(|page, _| {
                let mut message = calls(&|link| link.mem_store(Ticks(0), data, &[1; 8]));
                message[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
                page.hand_over(DEVICE, &message).unwrap()
            }),
            "byte string longer than the message",
        ),
        (
            "a message without its trailer",
            Box::new(|page, _| page.hand_over(DEVICE, &[0; 8]).unwrap()),
            "the host's message has no trailer",
        ),
        (
            "a turn of its own past the horizon",
            Box::new(|page, _| {
                let mut message = calls(&|_| {});
                let trailer = message.len() - 16;
                message[trailer..]
                    .copy_from_slice(&[1u64.to_le_bytes(), u64::MAX.to_le_bytes()].concat());
                page.hand_over(DEVICE, &message).unwrap()
            }),
            "the host took a turn of its own at or past the horizon",
        ),
        (
            "a time in the trailer with no turn of its own",
            Box::new(|page, _| {
                let mut message = calls(&|_| {});
                let trailer = message.len() - 8;
                message[trailer..].copy_from_slice(&5u64.to_le_bytes());
                page.hand_over(DEVICE, &message).unwrap()
            }),
            "a time but no turn of its own",
        ),
        (
            "more requests in flight than a link has tags",
            Box::new(move |page, _| page.hand_over(DEVICE, &many_writes).unwrap()),
            "requests in flight is 1048577",
        ),
        (
            "more load bytes in flight than the device has memory",
            Box::new(move |page, _| page.hand_over(DEVICE, &big_loads).unwrap()),
            "bytes of the host's link requests in flight",
        ),
        (
            "a load longer than device memory",
            Box::new(|page, _| {
                page.hand_over(
                    DEVICE,
                    &calls(&|link| link.mem_load(Ticks(0), data, u64::MAX, 1, 1)),
                )
                .unwrap()
            }),
            "a CXL.mem load's length is 18446744073709551615",
        ),
    ];
    for (what, lie, expected) in cases {
        let reason = lying_turn(&emulator, &*lie);
        assert!(reason.contains(expected), "{what}: {reason}");
        assert!(emulator.alive(), "{what}: the emulator died");
        emulator.back_to(idle, what);
    }
    emulator.serves_an_honest_host(idle, "turns that lie");
}

#[test]
fn a_host_that_keeps_its_turn_is_detached_after_the_turn_timeout_and_the_next_host_served() {
    let scratch = Scratch::new("hostile", "timeout");
    let mut emulator = EmulatorProcess::start(&scratch, &["--turn-timeout", "0.5"]);
    let idle = emulator.held();
    // Never takes its first turn.
    let (client, _memory, _page, _fds) = Client::attach(&emulator.socket);
    let started = Instant::now();
    let reason = end_reason(&client);
    let waited = started.elapsed();
    assert!(
        reason.contains("kept its turn for more than 0.5 s") && reason.contains("--turn-timeout"),
        "{reason}"
    );
    assert!(waited < Duration::from_secs(5), "detached after {waited:?}");
    emulator.wait_for_log("kept its turn for more than 0.5 s", 1);
    drop(client);
    emulator.back_to(idle, "a host that never took its turn");
    // Takes one turn, then stops mid-run (holding the turn) while a host queues behind it.
    let (client, _memory, page, _fds) = Client::attach(&emulator.socket);
    take_turn(&page, &client);
    hand_back(&page, Wake::At(Ticks(1_000)));
    take_turn(&page, &client);
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let mut queued_args = HONEST.to_vec();
    queued_args.extend(["--attach", &socket]);
    let queued = axle(&queued_args);
    assert!(
        queued.status.success(),
        "the host queued behind a stalled one failed: {}",
        text(&queued.stderr)
    );
    assert!(end_reason(&client).contains("kept its turn"));
    drop(client);
    // A wall-clock host that attaches and never starts its run.
    let mut wall = honest_setup();
    wall.wall = Some(emulator::server::WallSetup {
        limit_ns: 1_000_000_000,
    });
    let client = Client::hello(&emulator.socket);
    let (_memory, segment) = MappedWords::create("hostile-host-memory", HOST_MEMORY).unwrap();
    let line = nix::sys::eventfd::EventFd::new().unwrap();
    client.request(
        HOST_MEMORY,
        &setup_json(&wall),
        &[segment.as_fd(), line.as_fd()],
    );
    let (_ready, _fds) = client.ready().unwrap();
    emulator.wait_for_log("host sent nothing for", 1);
    drop(client);
    emulator.serves_an_honest_host(idle, "hosts that kept their turn");
}

#[test]
fn a_host_that_never_finishes_is_detached_at_the_session_limit_and_the_next_host_served() {
    let scratch = Scratch::new("hostile", "session");
    let mut emulator = EmulatorProcess::start(&scratch, &["--session-limit", "0.5"]);
    let idle = emulator.held();
    // Takes its turns at once, each asking for the next a nanosecond later, forever.
    let (client, _memory, page, _fds) = Client::attach(&emulator.socket);
    let started = Instant::now();
    let mut turns = 0u64;
    while let Ok(Turn::Mine(message)) = page.wait_for(HOST, &client.socket, &mut || false) {
        let (turn, _) = cosim_link::turn::split_device_message(&message).unwrap();
        let (now, _) = cosim_link::turn::decode_device_turn(turn).unwrap();
        hand_back(&page, Wake::At(now.plus(Ticks(1))));
        turns += 1;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still served after {turns} turns"
        );
    }
    let reason = end_reason(&client);
    assert!(
        reason.contains("session limit") && reason.contains("--session-limit"),
        "{reason}"
    );
    assert!(turns > 1, "the host took {turns} turns");
    emulator.wait_for_log("session limit", 1);
    drop(client);
    emulator.serves_an_honest_host(idle, "a host that never finished");
}

#[test]
fn a_listener_that_never_accepts_does_not_hang_the_start_up() {
    use nix::sys::socket::{
        bind, connect, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
    };
    let scratch = Scratch::new("hostile", "busy-listener");
    let path = scratch.socket();
    let address = UnixAddr::new(&path).unwrap();
    let listener = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    bind(std::os::fd::AsRawFd::as_raw_fd(&listener), &address).unwrap();
    listen(&listener, Backlog::new(0).unwrap()).unwrap();
    // Fill the backlog: a blocking connect to it would now wait forever.
    let mut queued = Vec::new();
    loop {
        let client = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK,
            None,
        )
        .unwrap();
        let result = connect(std::os::fd::AsRawFd::as_raw_fd(&client), &address);
        queued.push(client);
        if result.is_err() || queued.len() > 64 {
            break;
        }
    }
    let started = Instant::now();
    let output = axle(&["emu", "--socket", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("in use"),
        "{}",
        text(&output.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(path.exists(), "axle emu removed a socket it did not create");
}

#[test]
fn an_emulator_removes_only_the_socket_it_created() {
    let scratch = Scratch::new("hostile", "inode");
    let mut first = EmulatorProcess::start(&scratch, &[]);
    std::fs::remove_file(&first.socket).unwrap();
    let second_scratch = Scratch {
        dir: scratch.dir.join("second"),
    };
    std::fs::create_dir_all(&second_scratch.dir).unwrap();
    // The second emulator binds the same path (its log goes to its own directory).
    let second_log = second_scratch.dir.join("emu.log");
    let second = Reaped(
        Command::new(AXLE)
            .args(["emu", "--socket"])
            .arg(&first.socket)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&second_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while !first.socket.exists() {
        assert!(
            started.elapsed() < DEADLINE,
            "the second emulator never bound"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    first.child.signal(nix::sys::signal::Signal::SIGTERM);
    let status = first.child.wait_for_exit(DEADLINE).unwrap();
    assert!(status.success());
    assert!(
        first.socket.exists(),
        "the first emulator deleted the second's socket"
    );
    assert!(first.log().contains("leaving it alone"), "{}", first.log());
    // The second still serves.
    let mut args = HONEST.to_vec();
    let socket = first.socket.to_str().unwrap().to_owned();
    args.extend(["--attach", &socket]);
    let attached = axle(&args);
    assert!(attached.status.success(), "{}", text(&attached.stderr));
    drop(second);
}

/// Tenant `index` of the group `group` of `count`, round-robin.
fn claim(group: &str, index: u32, count: u32) -> TenantClaim {
    TenantClaim {
        group: group.into(),
        index,
        count,
        weights: None,
    }
}

#[test]
fn tenant_claims_out_of_bounds_are_refused_by_name_and_the_next_host_served() {
    let scratch = Scratch::new("hostile", "claims");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "4"]);
    let idle = emulator.held();
    let weighted = |weights: Vec<u32>| TenantClaim {
        weights: Some(weights),
        ..claim("g", 0, 2)
    };
    let mut wall = honest_setup();
    wall.wall = Some(emulator::server::WallSetup {
        limit_ns: 1_000_000_000,
    });
    let cases: Vec<(TenantClaim, Setup, &[&str])> = vec![
        (
            claim("g", 0, 0),
            honest_setup(),
            &["a group of 0 tenants", "1 to 4"],
        ),
        (
            claim("g", 0, 5),
            honest_setup(),
            &["a group of 5 tenants", "--max-tenants"],
        ),
        (
            claim("g", 0, u32::MAX),
            honest_setup(),
            &["a group of 4294967295 tenants"],
        ),
        (
            claim("g", 2, 2),
            honest_setup(),
            &["tenant index 2 in a group of 2", "0 to 1"],
        ),
        (
            claim("g", u32::MAX, 2),
            honest_setup(),
            &["tenant index 4294967295"],
        ),
        (claim("", 0, 2), honest_setup(), &["group name of 0 bytes"]),
        (
            claim(&"x".repeat(65), 0, 2),
            honest_setup(),
            &["group name of 65 bytes", "1 to 64"],
        ),
        (claim("a b", 0, 2), honest_setup(), &["group name has ' '"]),
        (
            weighted(vec![1]),
            honest_setup(),
            &["1 weights for 2 tenants"],
        ),
        (
            weighted(vec![0, 1]),
            honest_setup(),
            &["weight is 0", "1 to 1000"],
        ),
    ];
    for (claim, setup, expected) in cases {
        let client = Client::hello(&emulator.socket);
        let _memory = client.request_tenant(claim.clone(), &setup);
        let reason = client.refused();
        for part in expected {
            assert!(reason.contains(part), "{claim:?}: {reason}");
        }
        emulator.back_to(idle, &format!("the claim {claim:?}"));
    }
    // A wall-clock run (with its interrupt line) cannot be shared.
    let client = Client::hello(&emulator.socket);
    let (_memory, segment) = MappedWords::create("hostile-host-memory", HOST_MEMORY).unwrap();
    let line = nix::sys::eventfd::EventFd::new().unwrap();
    send_message(
        &client.socket,
        MessageKind::Session,
        &SessionRequest {
            host_memory_bytes: HOST_MEMORY,
            device_setup: setup_json(&wall),
            turn_protocol: cosim_link::turn::PROTOCOL,
            tenant: Some(claim("g", 0, 2)),
        },
        &[segment.as_fd(), line.as_fd()],
    )
    .unwrap();
    let reason = client.refused();
    assert!(
        reason.contains("wall-clock run cannot be shared"),
        "{reason}"
    );
    emulator.serves_an_honest_host(idle, "claims out of bounds");
}

#[test]
fn a_group_that_never_completes_is_refused_after_its_timeout_and_everything_freed() {
    let scratch = Scratch::new("hostile", "group-timeout");
    let mut emulator =
        EmulatorProcess::start(&scratch, &["--max-tenants", "4", "--group-timeout", "5"]);
    let idle = emulator.held();
    let first = Client::hello(&emulator.socket);
    let _first_memory = first.request_tenant(claim("g", 0, 3), &honest_setup());
    emulator.wait_for_log("group g: tenant 0 of 3 attached", 1);
    // While the group gathers: two hosts cannot claim one index; a host must say what the
    // group's first tenant said; a one-host session and another group are told to wait.
    let refused = |claim: Option<TenantClaim>| {
        let client = Client::hello(&emulator.socket);
        match claim {
            Some(claim) => {
                let _memory = client.request_tenant(claim, &honest_setup());
                client.refused()
            }
            None => {
                let (_memory, fd) =
                    MappedWords::create("hostile-host-memory", HOST_MEMORY).unwrap();
                client.request(HOST_MEMORY, &setup_json(&honest_setup()), &[fd.as_fd()]);
                client.refused()
            }
        }
    };
    let twice = refused(Some(claim("g", 0, 3)));
    assert!(
        twice.contains("tenant 0 of group g is already attached")
            && twice.contains("same tenant index"),
        "{twice}"
    );
    let other_count = refused(Some(claim("g", 1, 2)));
    assert!(
        other_count.contains("group g has 3 tenants") && other_count.contains("this host says 2"),
        "{other_count}"
    );
    let mut bigger = honest_setup();
    bigger.device.ccm_units += 1;
    let client = Client::hello(&emulator.socket);
    let _memory = client.request_tenant(claim("g", 1, 3), &bigger);
    let other_device = client.refused();
    assert!(
        other_device.contains("device configuration differs"),
        "{other_device}"
    );
    let alone = refused(None);
    assert!(
        alone.contains("gathering the tenants of group g") && alone.contains("try again later"),
        "{alone}"
    );
    let other_group = refused(Some(claim("h", 0, 2)));
    assert!(
        other_group.contains("group h is served after it"),
        "{other_group}"
    );
    // A tenant that attaches and leaves frees its place.
    let leaving = Client::hello(&emulator.socket);
    let leaving_memory = leaving.request_tenant(claim("g", 2, 3), &honest_setup());
    emulator.wait_for_log("group g: tenant 2 (host pid", 1);
    drop(leaving);
    drop(leaving_memory);
    emulator.wait_for_log("left before the group's run; its place is free again", 1);
    // Then the group's time is up: the tenant still waiting is told which never came.
    let reason = first.refused();
    assert!(
        reason.contains("1 of 3 tenants attached within 5 s")
            && reason.contains("--group-timeout")
            && reason.contains("tenants 1, 2 never came"),
        "{reason}"
    );
    emulator.wait_for_log("the group is dropped", 1);
    drop(first);
    emulator.serves_an_honest_host(idle, "a group that never completed");
}

/// One tenant of a group of two, attached honestly: its client, its turn page (mapped), its
/// host memory and the descriptors of the session's answer, all held as long as it is.
struct Tenant {
    client: Client,
    page: TurnPage,
    _memory: MappedWords,
    _fds: Vec<OwnedFd>,
}

/// Tenants 0 and 1 of the group `group` of two, attached to the emulator on `socket` (both
/// ask for their session, then both read its answer).
fn two_tenants(socket: &Path, group: &str) -> (Tenant, Tenant) {
    let zero = Client::hello(socket);
    let zero_memory = zero.request_tenant(claim(group, 0, 2), &honest_setup());
    let one = Client::hello(socket);
    let one_memory = one.request_tenant(claim(group, 1, 2), &honest_setup());
    let (zero_page, zero_fds) = zero.ready_page();
    let (one_page, one_fds) = one.ready_page();
    (
        Tenant {
            client: zero,
            page: zero_page,
            _memory: zero_memory,
            _fds: zero_fds,
        },
        Tenant {
            client: one,
            page: one_page,
            _memory: one_memory,
            _fds: one_fds,
        },
    )
}

/// Tenant 1 dies before its first turn: it is detached at that turn's time (0), logged,
/// and tenant 0 runs on to its end and gets its outcome with no error.
#[test]
fn a_tenant_that_dies_mid_run_is_detached_and_the_others_run_on() {
    let scratch = Scratch::new("hostile", "tenant-dies");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "2"]);
    let idle = emulator.held();
    let (zero, one) = two_tenants(&emulator.socket, "d");
    // Tenant 0 takes its first turn; tenant 1 dies before its own.
    take_turn(&zero.page, &zero.client);
    drop(one);
    hand_back(&zero.page, Wake::At(Ticks(1_000)));
    // Tenant 0 runs on: its next turn comes, and it is done.
    take_turn(&zero.page, &zero.client);
    hand_back(&zero.page, Wake::Done);
    let end = outcome_without_error(&zero.client, &emulator);
    assert!(end.tenant.is_some());
    emulator.wait_for_log("group d: tenant 1 (host pid", 1);
    emulator.wait_for_log("detached at 0 ns of virtual time, after", 1);
    emulator.wait_for_log(
        "its host died (its session went away); the other tenants run on",
        1,
    );
    emulator.wait_for_log("1 of them detached mid-run", 1);
    drop(zero);
    emulator.serves_an_honest_host(idle, "a tenant that died mid-run");
}

/// Tenant 1 breaks the turn protocol at its first turn (a link call code no side writes): it
/// is detached at that turn's time (0) and told so, and tenant 0 runs on to its end and gets
/// its outcome with no error.
#[test]
fn a_tenant_that_breaks_the_turn_protocol_is_detached_and_the_others_run_on() {
    let scratch = Scratch::new("hostile", "tenant-lies");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "2"]);
    let idle = emulator.held();
    let (zero, one) = two_tenants(&emulator.socket, "l");
    take_turn(&zero.page, &zero.client);
    hand_back(&zero.page, Wake::At(Ticks(1_000)));
    take_turn(&one.page, &one.client);
    let running = emulator.held();
    one.page
        .hand_over(DEVICE, &with_trailer(&[0xff; 8]))
        .unwrap();
    take_turn(&zero.page, &zero.client);
    // The group still runs (the emulator waits for tenant 0's turn): tenant 1's turn page,
    // socket, memory and registers are freed already.
    freed_at_the_detach(&emulator, running, "a tenant that broke the turn protocol");
    hand_back(&zero.page, Wake::Done);
    outcome_without_error(&zero.client, &emulator);
    let reason = end_reason(&one.client);
    assert!(
        reason.contains("group l: tenant 1 was detached at 0 ns of virtual time")
            && reason.contains("broke the turn protocol")
            && reason.contains("unknown link call code")
            && reason.contains("the other tenants run on"),
        "{reason}"
    );
    emulator.wait_for_log("1 of them detached mid-run", 1);
    drop((zero, one));
    emulator.serves_an_honest_host(idle, "a tenant that broke the turn protocol");
}

/// Requires the emulator to have freed what tenant 1 of a group of two made it hold: its
/// socket, its turn page, its host memory, its device memory and its register page (three
/// descriptors and four memfd mappings, measured: 13 and 8 with both tenants, 10 and 4
/// after); `running` is what the emulator held with both tenants attached.
fn freed_at_the_detach(emulator: &EmulatorProcess, running: Held, after: &str) {
    let now = emulator.held();
    assert!(
        now.descriptors + 3 <= running.descriptors
            && now.memfd_mappings + 4 <= running.memfd_mappings,
        "after {after}, while the group still runs, the emulator holds {now:?} (with the tenant: {running:?}); its log:\n{}",
        emulator.log()
    );
}

/// Tenant 1 sends a back-streaming launch before any DMA region: the device latches its
/// ring BROKEN (`NoRegion`) and detaches it by itself at the store's arrival. Tenant 1 is
/// told so (which tenant, why, when), its turn page, socket and memory are freed while
/// tenant 0 still runs, and tenant 0 runs on to its end with no error.
#[test]
fn a_tenant_whose_ring_the_device_latches_broken_is_told_and_freed_at_once() {
    use shared_abi::command::{KernelId, LaunchMode};
    use shared_abi::{device_map, CommandDescriptor};
    let scratch = Scratch::new("hostile", "tenant-broken");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "2"]);
    let idle = emulator.held();
    let (zero, one) = two_tenants(&emulator.socket, "b");
    take_turn(&zero.page, &zero.client);
    hand_back(&zero.page, Wake::At(Ticks::from_ns(100_000)));
    take_turn(&one.page, &one.client);
    let running = emulator.held();
    let database = device_map::DATA_BASE.0;
    let launch = CommandDescriptor {
        kernel: KernelId::KnnDistance as u32,
        mode: LaunchMode::BackStreaming as u32,
        tag: 5,
        flags: 0,
        result_address: database + 4 * 64 * 4 + 64 * 4,
        result_length: 16,
        args: [database, database + 4 * 64 * 4, 4 | 64 << 32, 1],
    };
    let mut link = RecordingLink::default();
    link.mem_store(Ticks(0), device_map::LAUNCH_WINDOW, launch.as_bytes());
    one.page
        .hand_over(DEVICE, &one_turn(&mut link, Wake::OnResponse))
        .unwrap();
    let reason = end_reason(&one.client);
    assert!(
        reason.contains("group b: tenant 1 was detached at ")
            && reason.contains("its ring was latched BROKEN")
            && reason.contains("the other tenants run on"),
        "{reason}"
    );
    take_turn(&zero.page, &zero.client);
    freed_at_the_detach(&emulator, running, "a ring latched BROKEN");
    hand_back(&zero.page, Wake::Done);
    outcome_without_error(&zero.client, &emulator);
    emulator.wait_for_log("1 of them detached mid-run", 1);
    drop((zero, one));
    emulator.serves_an_honest_host(idle, "a tenant whose ring latched BROKEN");
}

/// Tenant 0 ends at its first turn; tenant 1 hands back a turn that asks for nothing and
/// waits for a response: nothing is left to happen, and since tenant 0 ran to its end the
/// deadlock is tenant 1's own: it alone is detached (at 0 ns), told so, and tenant 0 gets
/// its outcome with no error.
#[test]
fn a_tenant_that_deadlocks_alone_is_detached_and_told_and_the_other_ends_well() {
    let scratch = Scratch::new("hostile", "tenant-deadlock");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "2"]);
    let idle = emulator.held();
    let (zero, one) = two_tenants(&emulator.socket, "w");
    take_turn(&zero.page, &zero.client);
    hand_back(&zero.page, Wake::Done);
    take_turn(&one.page, &one.client);
    hand_back(&one.page, Wake::OnResponse);
    let reason = end_reason(&one.client);
    assert!(
        reason.contains("group w: tenant 1 was detached at 0 ns of virtual time")
            && reason.contains("deadlock of its own"),
        "{reason}"
    );
    outcome_without_error(&zero.client, &emulator);
    emulator.wait_for_log("1 of them detached mid-run", 1);
    drop((zero, one));
    emulator.serves_an_honest_host(idle, "a tenant that deadlocked alone");
}

/// The tenants of the process tests: a group of three at small scale; tenant 1, the one
/// killed or stopped, has the longest run.
const GROUP: [&str; 3] = ["knn-a", "pagerank", "ssb-q1.2"];

/// Starts tenant 1 of [`GROUP`] (the victim), stops it (SIGSTOP) once it attached, then
/// starts tenants 0 and 2; returns the victim and the two others once the run started (the
/// emulator then waits for the victim's first turn).
fn group_with_a_stopped_tenant(
    emulator: &EmulatorProcess,
    group: &str,
) -> (Reaped, Vec<(usize, Reaped)>) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let victim = spawn_axle(&tenant_args(&GROUP, 1, &socket, group));
    emulator.wait_for_log(&format!("group {group}: tenant 1 of 3 attached"), 1);
    kill(Pid::from_raw(victim.pid()), Signal::SIGSTOP).unwrap();
    let others = [0usize, 2]
        .into_iter()
        .map(|tenant| {
            (
                tenant,
                spawn_axle(&tenant_args(&GROUP, tenant, &socket, group)),
            )
        })
        .collect();
    emulator.wait_for_log(
        &format!("group {group}: 3 tenants; segments exchanged; the run starts"),
        1,
    );
    (victim, others)
}

/// The virtual time the emulator logged for tenant 1's detach (one group per emulator).
fn detached_at_ns(emulator: &EmulatorProcess) -> u64 {
    let pattern = "emulator: tenant 1 detached at ";
    emulator.wait_for_log(pattern, 1);
    let log = emulator.log();
    let (_, rest) = log.split_once(pattern).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// The survivors (tenants 0 and 2) verify and exit 0, and each report is the in-process
/// `axle run-many --fault 1:KIND@T`'s (`fault`; `None`: no fault) for the same tenant but
/// for the simulator's counts.
fn survivors_match_run_many(
    others: Vec<(usize, Reaped)>,
    fault: Option<&str>,
    emulator: &EmulatorProcess,
) {
    let mut many: Vec<&str> = vec!["run-many"];
    many.extend(GROUP);
    many.extend(["--mode", "axle", "--scale", "small", "--json", "--no-alone"]);
    if let Some(fault) = fault {
        many.extend(["--fault", fault]);
    }
    let in_process = axle(&many);
    assert_eq!(
        in_process.status.success(),
        fault.is_none(),
        "run-many exits non-zero when a tenant is detached"
    );
    let in_process: serde_json::Value = serde_json::from_slice(&in_process.stdout).unwrap();
    assert_eq!(
        in_process["tenants"][1]["detached"].is_object(),
        fault.is_some()
    );
    for (tenant, child) in others {
        let output = finish_axle(child, DEADLINE, &"tenant");
        assert!(
            output.status.success(),
            "tenant {tenant}: {}\nemulator log:\n{}",
            text(&output.stderr),
            emulator.log()
        );
        let mut printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let mut expected = in_process["tenants"][tenant]["shared"].clone();
        assert_eq!(printed["verified"], true, "tenant {tenant}");
        printed["simulator"] = serde_json::Value::Null;
        expected["simulator"] = serde_json::Value::Null;
        assert_eq!(
            printed, expected,
            "tenant {tenant}'s report differs from run-many --fault {fault:?}'s"
        );
    }
}

/// A group of three `axle run --attach --tenant` processes; tenant 1's process is killed
/// (SIGKILL) while the emulator waits for its turn: it is detached at that turn's virtual
/// time, logged, its segments freed; tenants 0 and 2 verify and exit 0 with the reports of
/// the in-process `run-many --fault 1:kill@T`; the emulator then serves the next host.
#[test]
fn a_tenant_process_killed_mid_run_is_detached_and_the_others_verify() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let scratch = Scratch::new("hostile", "tenant-killed");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "3"]);
    let idle = emulator.held();
    let (mut victim, others) = group_with_a_stopped_tenant(&emulator, "killed");
    kill(Pid::from_raw(victim.pid()), Signal::SIGKILL).unwrap();
    let _ = victim.wait_for_exit(DEADLINE);
    emulator.wait_for_log(
        "its host died (its session went away); the other tenants run on",
        1,
    );
    let at = detached_at_ns(&emulator);
    survivors_match_run_many(others, Some(&format!("1:kill@{at}")), &emulator);
    emulator.wait_for_log("1 of them detached mid-run", 1);
    emulator.serves_an_honest_host(idle, "a tenant process killed mid-run");
}

/// Tenant 1's process killed (SIGKILL) 40 ms of wall time after the emulator logs that the
/// run started, at whatever virtual time it has reached then (it is loading its data set or running:
/// read from the emulator's log): the survivors' reports are `run-many --fault 1:kill@T`'s
/// for that time; or, should its run have ended before the kill, the run without a fault's.
#[test]
fn a_tenant_process_killed_while_it_runs_is_detached_at_its_turns_time() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let scratch = Scratch::new("hostile", "tenant-killed-running");
    let mut emulator = EmulatorProcess::start(&scratch, &["--max-tenants", "3"]);
    let idle = emulator.held();
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let mut victim = spawn_axle(&tenant_args(&GROUP, 1, &socket, "running"));
    emulator.wait_for_log("group running: tenant 1 of 3 attached", 1);
    let others: Vec<(usize, Reaped)> = [0usize, 2]
        .into_iter()
        .map(|tenant| {
            (
                tenant,
                spawn_axle(&tenant_args(&GROUP, tenant, &socket, "running")),
            )
        })
        .collect();
    emulator.wait_for_log(
        "group running: 3 tenants; segments exchanged; the run starts",
        1,
    );
    // Some way into its run (it loads its data set, then runs: tens of milliseconds). How
    // far is not asserted: the emulator's log says.
    std::thread::sleep(Duration::from_millis(40));
    kill(Pid::from_raw(victim.pid()), Signal::SIGKILL).unwrap();
    let _ = victim.wait_for_exit(DEADLINE);
    emulator.wait_for_log("group running: 3 tenants detached after their run", 1);
    let log = emulator.log();
    let fault = log.contains("emulator: tenant 1 detached at ").then(|| {
        assert!(
            log.contains("its host died (its session went away); the other tenants run on"),
            "{log}"
        );
        format!("1:kill@{}", detached_at_ns(&emulator))
    });
    eprintln!("tenant 1 killed while it ran: run-many's fault {fault:?}");
    survivors_match_run_many(others, fault.as_deref(), &emulator);
    emulator.serves_an_honest_host(idle, "a tenant process killed while it ran");
}

/// The same group with tenant 1's process stopped (SIGSTOP) and `--turn-timeout 0.5`: it is
/// detached after the timeout, logged as stopped; the others verify; once continued
/// (SIGCONT) it learns it was detached and fails; the emulator holds what it held before and
/// serves the next host byte for byte.
#[test]
fn a_stopped_tenant_process_is_detached_after_the_turn_timeout_and_the_others_verify() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let scratch = Scratch::new("hostile", "tenant-stopped");
    let mut emulator =
        EmulatorProcess::start(&scratch, &["--max-tenants", "3", "--turn-timeout", "0.5"]);
    let idle = emulator.held();
    let (victim, others) = group_with_a_stopped_tenant(&emulator, "stopped");
    emulator.wait_for_log("its host stopped taking its turns (no turn back after", 1);
    let at = detached_at_ns(&emulator);
    survivors_match_run_many(others, Some(&format!("1:kill@{at}")), &emulator);
    emulator.wait_for_log("1 of them detached mid-run", 1);
    kill(Pid::from_raw(victim.pid()), Signal::SIGCONT).unwrap();
    let output = finish_axle(victim, DEADLINE, &"tenant");
    assert!(!output.status.success());
    let said = text(&output.stderr);
    assert!(
        said.contains("tenant 1 was detached at") && said.contains("stopped taking its turns"),
        "{said}"
    );
    emulator.serves_an_honest_host(idle, "a tenant process stopped mid-run");
}
