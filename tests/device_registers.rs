//! The register window an attached host maps: the identity its probe checks, read through the
//! host driver's volatile mapping of the page the emulator serves. (The mailbox mirror is
//! checked against the CXL.io reads in `device_validation.rs`.)

use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use emulator::{DeviceConfig, Emulator};
use firmware::StreamingFactor;
use host_driver::mmio::DeviceWindow;
use host_driver::registers::{ExpectedIdentity, RegisterError, RegisterWindow};
use shared_abi::registers;

fn device() -> Emulator {
    Emulator::new(
        DeviceConfig {
            device_memory_mib: 16,
            ..DeviceConfig::default()
        },
        Arc::new(PhysicalMemory::new(1 << 16).expect("host memory")),
        StreamingFactor::Bytes(32),
        true,
    )
}

fn mapped(device: &mut Emulator) -> RegisterWindow {
    let page = device.serve_registers().expect("register page");
    let fd = page.fd().expect("a shared page");
    RegisterWindow::new(DeviceWindow::map(fd, registers::WINDOW_BYTES).expect("mapping"))
        .expect("a whole page")
}

fn identity(device: &Emulator) -> ExpectedIdentity {
    let (base, end) = device.data_window();
    ExpectedIdentity {
        device_memory_bytes: 16 << 20,
        data_base: base.0,
        data_end: end.0,
    }
}

#[test]
fn the_probe_accepts_the_device_it_was_told_about() {
    let mut device = device();
    let expected = identity(&device);
    let window = mapped(&mut device);
    assert_eq!(window.probe(&expected), Ok(()));
    assert_eq!(window.read(registers::MAGIC), Ok(shared_abi::ABI_MAGIC));
    assert_eq!(
        window.read(registers::LAYOUT_HASH),
        Ok(shared_abi::LAYOUT_HASH)
    );
}

#[test]
fn the_probe_names_the_register_that_differs() {
    let mut device = device();
    let mut expected = identity(&device);
    expected.data_end -= 4096;
    let window = mapped(&mut device);
    let error = window.probe(&expected).unwrap_err();
    assert!(
        matches!(
            error,
            RegisterError::Mismatch {
                name: "data window end",
                offset: 0x28,
                ..
            }
        ),
        "{error}"
    );
    let error = error.to_string();
    assert!(
        error.contains("data window end") && error.contains("0x28"),
        "{error}"
    );
    expected = identity(&device);
    expected.device_memory_bytes *= 2;
    let error = window.probe(&expected).unwrap_err().to_string();
    assert!(error.contains("device memory size"), "{error}");
}

#[test]
fn a_page_with_another_magic_is_refused() {
    let mut device = device();
    let expected = identity(&device);
    let page = device.serve_registers().expect("register page");
    page.set(registers::MAGIC, u64::from_le_bytes(*b"NOTAXLE!"));
    let fd = page.fd().expect("a shared page");
    let window =
        RegisterWindow::new(DeviceWindow::map(fd, registers::WINDOW_BYTES).expect("mapping"))
            .expect("a whole page");
    let error = window.probe(&expected).unwrap_err().to_string();
    assert!(error.contains("magic"), "{error}");
}

#[test]
fn the_epoch_register_reads_what_the_emulator_process_publishes_and_zero_before() {
    let mut device = device();
    let window = mapped(&mut device);
    // An in-process device publishes no epoch; `axle emu` sets its own in every session.
    assert_eq!(window.epoch(), Ok(0));
    let page = device.serve_registers().expect("register page");
    let window = RegisterWindow::new(
        DeviceWindow::map(page.fd().expect("shared"), registers::WINDOW_BYTES).expect("mapping"),
    )
    .expect("a whole page");
    page.set(registers::EPOCH, emulator::server::device_epoch());
    assert_eq!(window.epoch(), Ok(emulator::server::device_epoch()));
    assert_ne!(window.epoch(), Ok(0));
}
