//! The AXLE firmware on a RISC-V CPU: QEMU's `virt` machine (`qemu-system-riscv32 -machine
//! virt -bios none`), one hart in machine mode, no operating system.
//!
//! The firmware crate runs unchanged (command processor, result monitor, DMA executor,
//! kernels) over [`hal::QemuHal`], the port's HAL; the same program also plays the host
//! ([`host`]): it programs the DMA region, loads the inputs, launches a KNN kernel and rounds
//! of SSSP relaxation in AXLE mode, consumes the streamed records and payloads, publishes the
//! heads, and prints the results, a digest, and the instructions each work item took. The test
//! `tests/qemu_riscv.rs` at the repository root writes the input image, runs this on QEMU and
//! checks every printed result bit for bit against the `workloads` crate's references.
//!
//! | module | what |
//! |--------|------|
//! | [`board`] | memory map, start-up, traps, UART, exit, counters: every `unsafe` block |
//! | [`hal`] | the firmware's HAL on this machine (the one file a port writes) |
//! | [`image`] | the input image QEMU's loader puts in RAM |
//! | [`host`] | the host's part |
#![no_std]
#![no_main]

pub mod board;
pub mod hal;
pub mod host;
pub mod image;

/// The program: returns the exit status QEMU ends with (0: every launch streamed its whole
/// result; the test checks the values).
pub fn run() -> u32 {
    println!("axle-qemu-riscv: AXLE firmware on riscv32imac, qemu virt");
    let image = match image::Image::load() {
        Ok(image) => image,
        Err(error) => {
            println!("FAIL {error}");
            return 1;
        }
    };
    match host::run(&image) {
        Ok(()) => {
            println!("PASS");
            0
        }
        Err(error) => {
            println!("FAIL {error}");
            1
        }
    }
}
