//! Attached tenants: several hosts attached to one `axle emu --max-tenants N` share one
//! device, and print exactly what the in-process `axle run-many` prints, byte for byte,
//! whether they attach from one command (`axle run-many --attach`) or as separate processes
//! (`axle run --attach --tenant I/N --group NAME`, in any order); and a tenant's link
//! requests cannot reach another tenant's memory across processes either.
//!
//! (The hostile side of groups, counts and indices out of bounds, a group that never
//! completes, two hosts claiming one index, a tenant dying mid-run, is in `tests/hostile.rs`.)
//!
//! Run: `cargo test --release --test tenants_attached`.

use cosim_link::attach::TenantClaim;
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use emulator::server::Setup;
use host_driver::attachment::{AttachOptions, Attachment};
use shared_abi::command::{KernelId, LaunchMode};
use shared_abi::{device_map, CommandDescriptor, DeviceAddress, Status, Ticks};
use std::time::Duration;
use zerocopy::IntoBytes;

mod common;
use common::{finish_axle, spawn_axle, tenant_args, EmulatorProcess, Scratch};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");
/// Bound on any single wait for a process or a log line.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `axle` with `args` to completion; it must succeed.
fn axle(args: &[&str]) -> String {
    let output = finish_axle(spawn_axle(args), DEADLINE, &args);
    assert!(
        output.status.success(),
        "axle {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn an_attached_group_prints_what_run_many_prints_in_process_byte_for_byte() {
    let scratch = Scratch::new("tenants-attached", "bytes");
    let emulator = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "4"], DEADLINE);
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let mix = ["knn-a", "pagerank", "ssb-q1.1", "dlrm"];
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for mode in ["rp", "bs", "axle", "axle-irq"] {
        let mut args = vec!["run-many"];
        args.extend(mix);
        args.extend(["--mode", mode, "--scale", "small", "--json"]);
        // The runs alone (attached too) once; the shared runs alone otherwise.
        if mode != "axle" {
            args.push("--no-alone");
        }
        cases.push(args);
    }
    // Weighted shares, a workload twice, and a group of one.
    cases.push(vec![
        "run-many",
        "opt-2.7b",
        "sssp",
        "opt-2.7b",
        "--mode",
        "axle",
        "--scale",
        "small",
        "--weights",
        "1,2,8",
        "--json",
        "--no-alone",
    ]);
    cases.push(vec![
        "run-many",
        "knn-b",
        "--mode",
        "axle",
        "--scale",
        "small",
        "--json",
        "--no-alone",
    ]);
    for (number, args) in cases.iter().enumerate() {
        let in_process = axle(args);
        let mut attached_args = args.clone();
        attached_args.extend(["--attach", &socket]);
        let attached = axle(&attached_args);
        assert_eq!(
            attached,
            in_process,
            "{args:?}: the attached group printed other JSON; emulator log:\n{}",
            emulator.log()
        );
        emulator.wait_for_log("tenants detached after their run", number + 1);
    }
    assert!(emulator.log().contains("group run-many-"));
}

#[test]
fn tenants_attaching_as_separate_processes_in_any_order_print_their_part_of_run_many() {
    let scratch = Scratch::new("tenants-attached", "processes");
    let emulator = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "3"], DEADLINE);
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let workloads = ["pagerank", "knn-a", "ssb-q1.2"];
    let mut many = vec!["run-many"];
    many.extend(workloads);
    many.extend(["--mode", "axle", "--scale", "small", "--json", "--no-alone"]);
    let in_process: serde_json::Value = serde_json::from_str(&axle(&many)).unwrap();
    // Tenant 2 attaches first, tenant 0 last: the order of turns is the tenants' index.
    let tenants: Vec<(usize, Vec<String>)> = [2usize, 1, 0]
        .into_iter()
        .map(|tenant| (tenant, tenant_args(&workloads, tenant, &socket, "three")))
        .collect();
    let mut children = Vec::new();
    for (number, (tenant, args)) in tenants.iter().enumerate() {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        children.push((*tenant, spawn_axle(&refs), args.clone()));
        // Each attaches before the next starts: the order is the one written above.
        if number == 0 {
            emulator.wait_for_log("group three: tenant 2 of 3 attached", 1);
        } else {
            emulator.wait_for_log(&format!("group three: tenant {tenant} (host pid"), 1);
        }
    }
    for (tenant, child, args) in children {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = finish_axle(child, DEADLINE, &refs);
        assert!(
            output.status.success(),
            "tenant {tenant}: {}\nemulator log:\n{}",
            String::from_utf8_lossy(&output.stderr),
            emulator.log()
        );
        let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            printed, in_process["tenants"][tenant]["shared"],
            "tenant {tenant}'s report differs from run-many's"
        );
    }
}

/// One scripted link call.
type Call = Box<dyn Fn(&mut dyn DeviceLink) + Send>;

/// A host that makes its calls at its first turn and is done once every response came.
struct Scripted {
    calls: Vec<Call>,
    expected: usize,
    responses: Vec<LinkResponse>,
    started: bool,
}

impl Scripted {
    fn store_status(&self, token: u64) -> Option<u32> {
        self.responses.iter().find_map(|r| match r {
            LinkResponse::StoreDone { token: t, status } if *t == token => Some(*status),
            _ => None,
        })
    }

    fn loaded(&self, token: u64) -> Option<Vec<u8>> {
        self.responses.iter().find_map(|r| match r {
            LinkResponse::LoadDone { token: t, data } if *t == token => Some(data.clone()),
            _ => None,
        })
    }
}

impl HostAgent for Scripted {
    fn deliver(&mut self, _at: Ticks, response: LinkResponse) {
        self.responses.push(response);
    }

    fn turn(&mut self, _now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        if !self.started {
            self.started = true;
            for call in &self.calls {
                call(link);
            }
        }
        if self.responses.len() >= self.expected {
            Wake::Done
        } else {
            Wake::OnResponse
        }
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// KNN shape of the isolation test: 4 rows of 64 `f32`, one query.
const ROWS: u64 = 4;
const DIM: u64 = 64;
const DATABASE: u64 = device_map::DATA_BASE.0;
const QUERIES: u64 = DATABASE + ROWS * DIM * 4;
const RESULT: u64 = QUERIES + DIM * 4;

/// Attaches as tenant `index` of the group `isolation` of two, and writes its database
/// (every element `value`) and a zero query.
fn attach_tenant(socket: &std::path::Path, index: u32, value: f32) -> Attachment {
    let setup = Setup {
        device: emulator::DeviceConfig::default(),
        streaming_factor: emulator::server::StreamingSetting::Bytes(4096),
        out_of_order: false,
        limit_ns: 1_000_000_000,
        wall: None,
    };
    let options = AttachOptions {
        abi_version: shared_abi::ABI_VERSION,
        host_memory_bytes: 1 << 20,
        device_setup: serde_json::to_string(&setup).unwrap(),
        interrupt_line: false,
        tenant: Some(TenantClaim {
            group: "isolation".into(),
            index,
            count: 2,
            weights: None,
        }),
    };
    let attachment = Attachment::connect(socket, &options).unwrap();
    let database: Vec<u8> = (0..ROWS * DIM).flat_map(|_| value.to_le_bytes()).collect();
    attachment
        .write_untimed(DeviceAddress(DATABASE), &database)
        .unwrap();
    attachment
        .write_untimed(DeviceAddress(QUERIES), &vec![0; (DIM * 4) as usize])
        .unwrap();
    attachment
}

/// Tenant 0, attached, names addresses just past the end of its logical device (where
/// tenant 1's memory would begin if the two were laid end to end): a launch whose database
/// lies there, a synchronous store and a load. The emulator refuses all three; tenant 1's
/// memory is untouched, and the same address names each tenant's own memory.
#[test]
fn an_attached_tenants_link_requests_cannot_reach_another_tenants_memory() {
    let scratch = Scratch::new("tenants-attached", "isolation");
    let emulator = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "2"], DEADLINE);
    let ld_bytes = emulator::Emulator::device_memory_bytes(&emulator::DeviceConfig::default());
    let beyond = ld_bytes + DATABASE;
    let socket = emulator.socket.clone();
    let one = {
        let socket = socket.clone();
        std::thread::spawn(move || {
            let mut attachment = attach_tenant(&socket, 1, 2.0);
            let mut host = Scripted {
                calls: vec![Box::new(|link: &mut dyn DeviceLink| {
                    link.mem_load(Ticks(0), DeviceAddress(DATABASE), 8, 8, 5)
                })],
                expected: 1,
                responses: Vec::new(),
                started: false,
            };
            let end = attachment.run(&mut host).unwrap();
            (host, end)
        })
    };
    let mut attachment = attach_tenant(&socket, 0, 1.0);
    let launch = CommandDescriptor {
        kernel: KernelId::KnnDistance as u32,
        mode: LaunchMode::BulkSynchronous as u32,
        tag: 7,
        flags: 0,
        result_address: RESULT,
        result_length: ROWS * 4,
        args: [beyond, QUERIES, ROWS | DIM << 32, 1],
    };
    let mut zero = Scripted {
        calls: vec![
            Box::new(move |link: &mut dyn DeviceLink| {
                link.mem_store_synchronous(
                    Ticks(0),
                    device_map::LAUNCH_WINDOW,
                    launch.as_bytes(),
                    1,
                )
            }),
            Box::new(move |link: &mut dyn DeviceLink| {
                link.mem_store_synchronous(Ticks(0), DeviceAddress(beyond), &[0xee; 8], 2)
            }),
            Box::new(move |link: &mut dyn DeviceLink| {
                link.mem_load(Ticks(0), DeviceAddress(beyond), 64, 8, 3)
            }),
            Box::new(|link: &mut dyn DeviceLink| {
                link.mem_load(Ticks(0), DeviceAddress(DATABASE), 8, 8, 4)
            }),
        ],
        expected: 4,
        responses: Vec::new(),
        started: false,
    };
    let end = attachment.run(&mut zero).unwrap();
    let (one, one_end) = one.join().unwrap();
    assert_eq!(end.error, None, "log:\n{}", emulator.log());
    assert_eq!(one_end.error, None);
    assert!(end.tenant.is_some() && one_end.tenant.is_some());
    assert_eq!(
        zero.store_status(1),
        Some(Status::ArgumentOutOfRange.code()),
        "a launch naming memory past its logical device is refused"
    );
    assert_eq!(
        zero.store_status(2),
        Some(Status::DeviceMemoryFault.code()),
        "a store past its logical device is refused"
    );
    assert_eq!(
        zero.loaded(3),
        Some(Vec::new()),
        "a load past it returns nothing"
    );
    assert_eq!(f32s(&zero.loaded(4).unwrap()), [1.0, 1.0]);
    assert_eq!(
        f32s(&one.loaded(5).unwrap()),
        [2.0, 2.0],
        "tenant 1's memory is untouched and its own"
    );
}
