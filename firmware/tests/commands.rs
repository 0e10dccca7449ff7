// The three launch paths against the fake HAL: BS (bulk synchronous launch store), RP (mailbox
// doorbell, status, dequeue) and AXLE (launch store, region, interrupts). A malformed command
// is an error completion on its own path, never a panic.
//
// This file is compiled twice (see `firmware::testing`): as a unit-test module of the firmware
// crate and, with `--features test-utils`, as an integration test. It therefore uses only
// `firmware::` paths and has no inner attributes.

use firmware::hal::HostEvent;
use firmware::testing::{
    test_firmware, AxleBench, BulkCompletion, FakeHal, KnnLaunch, TestRegion, DEVICE_MEMORY_BYTES,
};
use firmware::trace::TraceEvent;
use firmware::{Firmware, FirmwareError, StreamingFactor};
use shared_abi::command::CommandFlags;
use shared_abi::{device_map, mailbox, CommandDescriptor, LaunchMode, Status};

const TAG: u32 = 0x77;

fn setup(launch: &KnnLaunch) -> (FakeHal, Firmware) {
    let mut hal = FakeHal::new();
    launch.write_inputs(&mut hal.memory);
    (hal, test_firmware(StreamingFactor::Bytes(32), true))
}

fn small_launch() -> KnnLaunch {
    KnnLaunch::new(24, 16, 2)
}

/// [`small_launch`] with [`TAG`] in `mode`, sent as a launch store, and one firmware step.
fn launched_by_store(mode: LaunchMode) -> (KnnLaunch, FakeHal, Firmware) {
    let launch = small_launch();
    let (mut hal, mut firmware) = setup(&launch);
    hal.launch_store(launch.command(mode, TAG));
    firmware.step(&mut hal);
    (launch, hal, firmware)
}

// ---------------------------------------------------------------------------------------------
// BS
// ---------------------------------------------------------------------------------------------

#[test]
fn bs_launch_completes_with_ok_only_after_every_item_finished() {
    let (launch, mut hal, mut firmware) = launched_by_store(LaunchMode::BulkSynchronous);
    let dispatched = hal.compute.current().expect("dispatched");
    assert_eq!(dispatched.items, launch.items());
    assert_eq!(dispatched.tag, TAG);

    let mut items: Vec<u32> = (0..launch.items()).rev().collect();
    let last = items.pop().unwrap();
    hal.finish_items(items);
    firmware.step(&mut hal);
    assert!(
        hal.registers.bulk_completions().is_empty(),
        "completed before every item finished"
    );

    hal.finish_items([last]);
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.bulk_completions(),
        [BulkCompletion {
            tag: TAG,
            status: Status::Ok
        }]
    );
    assert_eq!(
        hal.memory.bytes(launch.result, launch.result_length()),
        launch.expected_result(),
        "the result space holds the kernel's answer"
    );
    assert!(hal.dma.submitted().is_empty(), "BS streams nothing");
    assert!(!firmware.step(&mut hal).busy);
}

// Sends `command` as a BS launch store and returns the bulk completions it produced; checks
// that nothing was dispatched and that the firmware still runs a valid launch afterwards.
fn refused_bulk_launch(command: CommandDescriptor) -> Vec<BulkCompletion> {
    let launch = small_launch();
    let (mut hal, mut firmware) = setup(&launch);
    hal.launch_store(command);
    firmware.step(&mut hal);
    let completions = hal.registers.bulk_completions().to_vec();
    assert!(
        hal.compute.launches().is_empty(),
        "a refused command was dispatched"
    );
    assert_eq!(firmware.counters().refused, 1);
    assert!(firmware
        .trace()
        .events()
        .any(|event| matches!(event, TraceEvent::Refused { tag, .. } if *tag == command.tag)));

    // Still alive.
    hal.launch_store(launch.command(LaunchMode::BulkSynchronous, TAG + 1));
    firmware.step(&mut hal);
    hal.finish_all_items();
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.bulk_completions().last(),
        Some(&BulkCompletion {
            tag: TAG + 1,
            status: Status::Ok
        })
    );
    completions
}

fn bulk_error(tag: u32, status: Status) -> Vec<BulkCompletion> {
    vec![BulkCompletion { tag, status }]
}

#[test]
fn bs_unknown_kernel_id_is_an_error_completion() {
    let mut command = small_launch().command(LaunchMode::BulkSynchronous, TAG);
    command.kernel = 99;
    assert_eq!(
        refused_bulk_launch(command),
        bulk_error(TAG, Status::UnknownKernel)
    );
    command.kernel = 0;
    assert_eq!(
        refused_bulk_launch(command),
        bulk_error(TAG, Status::UnknownKernel)
    );
}

#[test]
fn bs_wrong_mode_is_an_error_completion() {
    for mode in [0, 7, u32::MAX, LaunchMode::RemotePolling as u32] {
        let mut command = small_launch().command(LaunchMode::BulkSynchronous, TAG);
        command.mode = mode;
        assert_eq!(
            refused_bulk_launch(command),
            bulk_error(TAG, Status::MalformedDescriptor),
            "mode {mode}"
        );
    }
}

#[test]
fn bs_unknown_flag_bits_are_an_error_completion() {
    for flags in [1 << 1, 1 << 31, u32::MAX] {
        let mut command = small_launch().command(LaunchMode::BulkSynchronous, TAG);
        command.flags = flags;
        assert_eq!(
            refused_bulk_launch(command),
            bulk_error(TAG, Status::MalformedDescriptor),
            "flags {flags:#x}"
        );
    }
}

#[test]
fn bs_interrupt_flag_is_refused_outside_axle() {
    let mut command = small_launch().command(LaunchMode::BulkSynchronous, TAG);
    command.flags = CommandFlags::INTERRUPT.bits();
    assert_eq!(
        refused_bulk_launch(command),
        bulk_error(TAG, Status::MalformedDescriptor)
    );
}

#[test]
fn bs_result_range_outside_device_memory_is_an_error_completion() {
    let launch = small_launch();
    for result_address in [DEVICE_MEMORY_BYTES - 64, DEVICE_MEMORY_BYTES, u64::MAX - 3] {
        let mut command = launch.command(LaunchMode::BulkSynchronous, TAG);
        command.result_address = result_address;
        assert_eq!(
            refused_bulk_launch(command),
            bulk_error(TAG, Status::ArgumentOutOfRange),
            "result at {result_address:#x}"
        );
    }
}

#[test]
fn bs_failed_item_is_reported_in_the_completion() {
    let (launch, mut hal, mut firmware) = launched_by_store(LaunchMode::BulkSynchronous);
    hal.finish_items(1..launch.items());
    hal.finish_items_with_error([0], FirmwareError::AddressOverflow);
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.bulk_completions(),
        bulk_error(TAG, Status::DeviceMemoryFault)
    );
}

// ---------------------------------------------------------------------------------------------
// RP
// ---------------------------------------------------------------------------------------------

fn ring_doorbell(hal: &mut FakeHal, firmware: &mut Firmware, command: &CommandDescriptor) {
    hal.memory.put(device_map::RP_DESCRIPTOR, command);
    hal.push_event(HostEvent::Doorbell(device_map::RP_DESCRIPTOR.0));
    firmware.step(hal);
}

/// [`small_launch`] with [`TAG`], sent by the RP doorbell ([`ring_doorbell`]).
fn launched_by_doorbell() -> (KnnLaunch, FakeHal, Firmware) {
    let launch = small_launch();
    let (mut hal, mut firmware) = setup(&launch);
    ring_doorbell(
        &mut hal,
        &mut firmware,
        &launch.command(LaunchMode::RemotePolling, TAG),
    );
    (launch, hal, firmware)
}

fn complete_with(status: Status) -> u64 {
    mailbox::status::COMPLETE | (u64::from(status.code()) << 32)
}

#[test]
fn rp_doorbell_sets_status_running_and_dispatches() {
    let (launch, mut hal, mut firmware) = launched_by_doorbell();
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        mailbox::status::RUNNING
    );
    assert_eq!(hal.compute.current().map(|l| l.tag), Some(TAG));
    hal.finish_items(0..launch.items() - 1);
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        mailbox::status::RUNNING,
        "still running with one item left"
    );
}

#[test]
fn rp_completion_sets_complete_with_the_code_in_the_high_half() {
    let (launch, mut hal, mut firmware) = launched_by_doorbell();
    hal.finish_all_items();
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        complete_with(Status::Ok)
    );
    assert_eq!(hal.registers.mailbox(mailbox::COMPLETION_CODE), 0);
    assert_eq!(
        hal.registers.mailbox(mailbox::COMPLETION_TAG),
        u64::from(TAG)
    );
    assert_eq!(
        hal.memory.bytes(launch.result, launch.result_length()),
        launch.expected_result()
    );
}

#[test]
fn rp_failed_item_puts_its_code_in_the_high_half_of_status() {
    let (launch, mut hal, mut firmware) = launched_by_doorbell();
    hal.finish_items(0..5);
    hal.finish_items_with_error([5], FirmwareError::AddressOverflow);
    hal.finish_items(6..launch.items());
    firmware.step(&mut hal);
    let status = hal.registers.mailbox(mailbox::STATUS);
    assert_eq!(status & 0xffff_ffff, mailbox::status::COMPLETE);
    assert_eq!(status >> 32, u64::from(Status::DeviceMemoryFault.code()));
    assert_eq!(
        hal.registers.mailbox(mailbox::COMPLETION_CODE),
        u64::from(Status::DeviceMemoryFault.code())
    );
}

#[test]
fn rp_dequeue_returns_the_mailbox_to_idle_and_accepts_the_next_command() {
    let (launch, mut hal, mut firmware) = launched_by_doorbell();
    hal.finish_all_items();
    firmware.step(&mut hal);
    hal.push_event(HostEvent::Dequeue);
    firmware.step(&mut hal);
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        mailbox::status::IDLE
    );

    ring_doorbell(
        &mut hal,
        &mut firmware,
        &launch.command(LaunchMode::RemotePolling, TAG + 1),
    );
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        mailbox::status::RUNNING
    );
    assert_eq!(hal.compute.launches().len(), 2);
}

#[test]
fn rp_doorbell_outside_device_memory_completes_with_an_error() {
    let launch = small_launch();
    let (mut hal, mut firmware) = setup(&launch);
    for address in [
        DEVICE_MEMORY_BYTES - 32,
        DEVICE_MEMORY_BYTES,
        u64::MAX - 8,
        u64::MAX,
    ] {
        hal.push_event(HostEvent::Doorbell(address));
        firmware.step(&mut hal);
        assert_eq!(
            hal.registers.mailbox(mailbox::STATUS),
            complete_with(Status::ArgumentOutOfRange),
            "doorbell {address:#x}"
        );
        assert!(hal.compute.launches().is_empty());
        hal.push_event(HostEvent::Dequeue);
        firmware.step(&mut hal);
    }
}

#[test]
fn rp_malformed_descriptor_completes_with_its_error_code() {
    let launch = small_launch();
    let (mut hal, mut firmware) = setup(&launch);
    let mut command = launch.command(LaunchMode::RemotePolling, TAG);
    command.kernel = 42;
    ring_doorbell(&mut hal, &mut firmware, &command);
    assert_eq!(
        hal.registers.mailbox(mailbox::STATUS),
        complete_with(Status::UnknownKernel)
    );
    assert_eq!(
        hal.registers.mailbox(mailbox::COMPLETION_TAG),
        u64::from(TAG)
    );
    assert!(hal.compute.launches().is_empty());
}

// ---------------------------------------------------------------------------------------------
// AXLE
// ---------------------------------------------------------------------------------------------

#[test]
fn axle_launch_before_any_region_is_refused_with_no_region() {
    let (_, hal, firmware) = launched_by_store(LaunchMode::BackStreaming);
    assert!(hal.compute.launches().is_empty());
    assert!(
        hal.dma.submitted().is_empty(),
        "no region: nowhere to publish anything"
    );
    assert_eq!(firmware.counters().refused, 1);
    assert!(firmware.trace().events().any(|event| *event
        == TraceEvent::Refused {
            tag: TAG,
            status: Status::NoRegion
        }));
    assert!(hal.registers.bulk_completions().is_empty());
    assert!(hal.registers.mailbox_writes().is_empty());
}

#[test]
fn axle_launch_streams_once_a_region_is_programmed_after_a_refusal() {
    let (launch, mut hal, mut firmware) = launched_by_store(LaunchMode::BackStreaming);
    let region = TestRegion::new(16, 16, 32);
    region.program(&mut hal);
    firmware.step(&mut hal);
    assert_eq!(firmware.broken(), None);
    hal.launch_store(launch.command(LaunchMode::BackStreaming, TAG + 1));
    firmware.step(&mut hal);
    hal.finish_all_items();
    hal.settle(&mut firmware, 32);
    assert_eq!(
        region.metadata_tail(&hal.host),
        u64::from(launch.chunks(32))
    );
    assert_eq!(region.record(&hal.host, 0).tag, TAG + 1);
}

#[test]
fn axle_interrupt_raises_one_interrupt_per_request_with_the_tail_it_published() {
    let mut bench = AxleBench::new(
        TestRegion::new(64, 64, 32),
        KnnLaunch::new(64, 16, 1),
        StreamingFactor::Bytes(64),
        true,
    );
    bench.start(CommandFlags::INTERRUPT);
    bench.finish_chunks([0, 1, 2]);
    bench.step();
    bench.finish_chunks([3, 4, 5, 6, 7]);
    bench.step();
    let requests = bench.hal.dma.submitted().len();
    assert_eq!(requests, 4);
    for position in 0..requests {
        assert_eq!(bench.hal.registers.interrupts().len(), position);
        bench.hal.complete_dma(1);
        bench.step();
        let published = bench.hal.dma.submitted()[position]
            .published_metadata_tail()
            .unwrap();
        assert_eq!(
            bench.hal.registers.interrupts().len(),
            position + 1,
            "one per request"
        );
        assert_eq!(bench.hal.registers.interrupts()[position], published);
        assert_eq!(published, bench.region.metadata_tail(&bench.hal.host));
    }
    assert_eq!(bench.hal.registers.interrupts(), [2, 4, 6, 8]);
}

#[test]
fn axle_without_the_interrupt_flag_raises_no_interrupt() {
    let mut bench = AxleBench::new(
        TestRegion::new(64, 64, 32),
        KnnLaunch::new(64, 16, 1),
        StreamingFactor::Bytes(64),
        true,
    );
    bench.start(CommandFlags::empty());
    bench.finish_chunks(0..8);
    bench.hal.settle(&mut bench.firmware, 16);
    assert_eq!(bench.region.metadata_tail(&bench.hal.host), 8);
    assert!(bench.hal.registers.interrupts().is_empty());
}

#[test]
fn axle_malformed_launch_latches_broken_without_panicking() {
    let mut bench = AxleBench::new(
        TestRegion::new(8, 8, 32),
        KnnLaunch::new(8, 16, 1),
        StreamingFactor::Bytes(32),
        true,
    );
    let mut command = bench.command(CommandFlags::empty());
    command.flags = 1 << 9;
    bench.hal.launch_store(command);
    bench.step();
    assert!(bench.hal.compute.launches().is_empty());
    assert_eq!(bench.firmware.broken(), Some(Status::MalformedDescriptor));
    bench.hal.complete_all_dma();
    assert_eq!(
        bench.region.device_status(&bench.hal.host),
        Status::MalformedDescriptor.code()
    );
}

#[test]
fn bs_launch_with_overflowing_arguments_is_an_error_completion() {
    // Overflowing address arithmetic in every field at once.
    let mut command = small_launch().command(LaunchMode::BulkSynchronous, TAG);
    command.args = [u64::MAX, u64::MAX - 60, u64::MAX, u64::MAX];
    command.result_address = u64::MAX;
    command.result_length = u64::MAX;
    let completions = refused_bulk_launch(command);
    assert_eq!(completions.len(), 1);
    assert_ne!(completions[0].status, Status::Ok);
}
