//! QEMU's `virt` machine as this port uses it: the memory map, start-up, the trap handler, and
//! the few devices (16550 UART, `sifive_test` exit, CLINT timer, the `instret` counter).
//!
//! Every `unsafe` block of the port is in this module: MMIO, linker symbols, start-up code and
//! the raw accesses of a [`Window`] of RAM. Everything else is safe code over these.
//!
//! # Memory map (RAM starts at 0x8000_0000; QEMU's default 128 MiB)
//!
//! | range | size | what |
//! |-------|------|------|
//! | `0x8000_0000` | 2 MiB | the firmware image: `.text`, `.rodata`, `.data`, `.bss`, the stack (`link.x`) |
//! | [`INPUT_BASE`] | 2 MiB | the input image, put there by QEMU's `-device loader` (see [`crate::image`]) |
//! | [`DEVICE_BASE`] | 4 MiB | device memory (the HDM range): device address 0 is this byte |
//! | [`HOST_BASE`] | 4 MiB | host memory: the DMA region's pages and the host's result copies; a host physical address is the CPU address |
//! | `0x0200_0000` | | CLINT (`mtime` at `+0xbff8`) |
//! | `0x1000_0000` | | 16550 UART |
//! | `0x0010_0000` | | `sifive_test`: a store ends QEMU with a status |

use core::fmt;
use core::ptr;
use core::sync::atomic::AtomicU32;

/// Where QEMU's loader puts the input image.
pub const INPUT_BASE: usize = 0x8020_0000;
/// Bytes of the input window.
pub const INPUT_BYTES: usize = 2 << 20;
/// First byte of device memory (device address 0).
pub const DEVICE_BASE: usize = 0x8040_0000;
/// Bytes of device memory.
pub const DEVICE_BYTES: usize = 4 << 20;
/// First byte of host memory (host physical address == CPU address).
pub const HOST_BASE: usize = 0x8080_0000;
/// Bytes of host memory.
pub const HOST_BYTES: usize = 4 << 20;

const UART: usize = 0x1000_0000;
const UART_LSR: usize = UART + 5;
const UART_LSR_THRE: u8 = 1 << 5;
const SIFIVE_TEST: usize = 0x0010_0000;
const CLINT_MTIME: usize = 0x0200_bff8;
/// The CLINT's `mtime` frequency on `virt`.
pub const MTIME_HZ: u64 = 10_000_000;

// ---------------------------------------------------------------------------------------------
// Start-up and traps
// ---------------------------------------------------------------------------------------------

// The reset path: QEMU (`-bios none -kernel`) jumps to the ELF entry in machine mode, hart 0
// only (`virt` has one hart unless `-smp` says otherwise). Set the stack, zero .bss, install
// the trap vector, call `board_main`. `.data` needs no copy: the ELF loader placed it.
core::arch::global_asm!(
    r#"
    .section .text.init, "ax"
    .global _start
_start:
    la sp, _stack_top
    la t0, _sbss
    la t1, _ebss
1:
    bgeu t0, t1, 2f
    sw zero, 0(t0)
    addi t0, t0, 4
    j 1b
2:
    la t0, _trap_entry
    csrw mtvec, t0
    call board_main
3:
    j 3b

    .align 4
_trap_entry:
    call board_trap
4:
    j 4b

    .align 4
_trap_halt:
    li t0, 0x100000
    li t1, 0x43333
    sw t1, 0(t0)
5:
    j 5b
"#
);

/// Called by the start-up code with a stack and a zeroed `.bss`.
#[no_mangle]
extern "C" fn board_main() -> ! {
    stack::paint_below_here();
    let code = crate::run();
    exit(code)
}

/// Any exception or interrupt: nothing in this port enables interrupts, so this is a fault
/// (misaligned or out-of-range access, illegal instruction). Reports it and ends QEMU with a
/// failure status.
#[no_mangle]
extern "C" fn board_trap() -> ! {
    let (cause, epc, tval): (usize, usize, usize);
    // SAFETY: reading the machine trap CSRs has no side effect; we run in machine mode. A
    // second trap (in this handler) goes to `_trap_halt`, which only exits.
    unsafe {
        core::arch::asm!(
            "la {3}, _trap_halt",
            "csrw mtvec, {3}",
            "csrr {0}, mcause",
            "csrr {1}, mepc",
            "csrr {2}, mtval",
            out(reg) cause,
            out(reg) epc,
            out(reg) tval,
            out(reg) _,
        );
    }
    // Plain digits, no formatting machinery: the trap may be a stack overflow.
    for (label, value) in [("TRAP mcause=", cause), (" mepc=", epc), (" mtval=", tval)] {
        for byte in label.bytes() {
            Uart::put(byte);
        }
        for shift in (0..8_u32).rev() {
            let nibble = (value >> shift.wrapping_mul(4)) & 0xf;
            let digit = b"0123456789abcdef".get(nibble).copied().unwrap_or(b'?');
            Uart::put(digit);
        }
    }
    Uart::put(b'\n');
    exit(3)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    crate::println!("PANIC {info}");
    exit(2)
}

/// Ends QEMU through the `sifive_test` device: status 0 is a pass (QEMU exits 0), anything else
/// a failure with that exit code.
pub fn exit(code: u32) -> ! {
    let value = if code == 0 {
        0x5555
    } else {
        (code << 16) | 0x3333
    };
    // SAFETY: `sifive_test` is a 4-byte MMIO register at this address on `virt`; a store to it
    // powers the machine off.
    unsafe { ptr::write_volatile(SIFIVE_TEST as *mut u32, value) };
    loop {
        core::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------------------------
// UART
// ---------------------------------------------------------------------------------------------

/// The 16550 UART's transmitter (QEMU needs no initialisation for it).
#[derive(Debug)]
pub struct Uart;

impl Uart {
    fn put(byte: u8) {
        // SAFETY: the 16550's line status register and transmit holding register are byte MMIO
        // registers at these addresses on `virt`; reading LSR and writing THR have no other
        // effect than transmitting.
        unsafe {
            while ptr::read_volatile(UART_LSR as *const u8) & UART_LSR_THRE == 0 {}
            ptr::write_volatile(UART as *mut u8, byte);
        }
    }
}

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            Uart::put(byte);
        }
        Ok(())
    }
}

/// Prints to the UART.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        let _ = core::fmt::Write::write_fmt(&mut $crate::board::Uart, format_args!($($arg)*));
    }};
}

/// Prints a line to the UART.
#[macro_export]
macro_rules! println {
    () => {{
        $crate::print!("\n");
    }};
    ($($arg:tt)*) => {{
        $crate::print!($($arg)*);
        $crate::print!("\n");
    }};
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

/// The CLINT's `mtime` (10 MHz), read as two halves until they agree.
pub fn mtime() -> u64 {
    loop {
        // SAFETY: `mtime` is a 64-bit MMIO register of the CLINT at this address on `virt`,
        // read as two aligned 32-bit halves; reads have no side effect.
        let (high, low, again) = unsafe {
            (
                ptr::read_volatile((CLINT_MTIME + 4) as *const u32),
                ptr::read_volatile(CLINT_MTIME as *const u32),
                ptr::read_volatile((CLINT_MTIME + 4) as *const u32),
            )
        };
        if high == again {
            return (u64::from(high) << 32) | u64::from(low);
        }
    }
}

/// Instructions retired (`rdinstret`/`rdinstreth`). QEMU counts instructions only with
/// `-icount`; without it the counter follows the host's clock.
pub fn instret() -> u64 {
    loop {
        let (high, low, again): (u32, u32, u32);
        // SAFETY: the unprivileged `instret` counter CSRs are readable in machine mode and
        // reading them has no side effect.
        unsafe {
            core::arch::asm!(
                "rdinstreth {0}",
                "rdinstret {1}",
                "rdinstreth {2}",
                out(reg) high,
                out(reg) low,
                out(reg) again,
            );
        }
        if high == again {
            return (u64::from(high) << 32) | u64::from(low);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RAM windows
// ---------------------------------------------------------------------------------------------

/// A window of RAM that no Rust object occupies (device memory, host memory, the input
/// image), accessed only with volatile loads and stores: another bus master (the host over
/// CXL.mem, the DMA engine, QEMU's loader) may change it behind the program's back, so the
/// compiler must neither cache nor elide an access.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    base: usize,
    bytes: usize,
}

/// The window of the input image.
pub const INPUT: Window = Window {
    base: INPUT_BASE,
    bytes: INPUT_BYTES,
};
/// The window of device memory.
pub const DEVICE: Window = Window {
    base: DEVICE_BASE,
    bytes: DEVICE_BYTES,
};
/// The window of host memory.
pub const HOST: Window = Window {
    base: HOST_BASE,
    bytes: HOST_BYTES,
};

impl Window {
    /// Bytes in the window.
    pub const fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the window is empty (never, for the three windows of this port).
    pub const fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The CPU address of `[offset, offset + length)`, if it lies inside the window.
    fn span(&self, offset: usize, length: usize) -> Option<usize> {
        let end = offset.checked_add(length)?;
        (end <= self.bytes).then_some(self.base.checked_add(offset)?)
    }

    /// Copies `buffer.len()` bytes at `offset` into `buffer`; `false`, touching nothing, when
    /// any byte lies outside the window. Aligned words move as words.
    #[must_use]
    pub fn read(&self, offset: usize, buffer: &mut [u8]) -> bool {
        let Some(start) = self.span(offset, buffer.len()) else {
            return false;
        };
        let mut done = 0_usize;
        while let Some(rest) = buffer.get_mut(done..) {
            let address = start.wrapping_add(done);
            let step = if rest.len() >= 4 && address % 4 == 0 {
                // SAFETY: `span` checked that [start, start + buffer.len()) lies in this
                // window, RAM that no Rust object occupies; the word is aligned.
                let word = unsafe { ptr::read_volatile(address as *const u32) };
                if let Some(out) = rest.get_mut(..4) {
                    out.copy_from_slice(&word.to_le_bytes());
                }
                4
            } else if let Some(out) = rest.first_mut() {
                // SAFETY: as above, one byte inside the window.
                *out = unsafe { ptr::read_volatile(address as *const u8) };
                1
            } else {
                break;
            };
            done = done.wrapping_add(step);
        }
        true
    }

    /// The aligned 32-bit word at `offset` as an atomic, for the HAL's device-memory atomics
    /// (rv32imac's `A` extension: `amoadd.w`, `amominu.w`, `amoswap.w`, `lr.w`/`sc.w`); `None`
    /// when the word is not 4-byte aligned or not inside the window.
    pub fn atomic_u32(&self, offset: usize) -> Option<&'static AtomicU32> {
        let address = self.span(offset, 4)?;
        if address % 4 != 0 {
            return None;
        }
        // SAFETY: `span` checked that the 4 bytes lie in this window, RAM that no Rust object
        // occupies and that stays mapped for the whole run ('static); the address is 4-byte
        // aligned, as `AtomicU32` requires. Other accesses to the word are volatile or atomic
        // word accesses of this port, never a non-atomic Rust reference.
        Some(unsafe { AtomicU32::from_ptr(address as *mut u32) })
    }

    /// Writes `data` at `offset`; `false`, touching nothing, when any byte lies outside the
    /// window. Aligned words move as words.
    #[must_use]
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        let Some(start) = self.span(offset, data.len()) else {
            return false;
        };
        let mut done = 0_usize;
        while let Some(rest) = data.get(done..) {
            let address = start.wrapping_add(done);
            let step = match (rest.get(..4), rest.first()) {
                (Some(word), _) if address % 4 == 0 => {
                    let mut bytes = [0_u8; 4];
                    bytes.copy_from_slice(word);
                    // SAFETY: `span` checked that [start, start + data.len()) lies in this
                    // window, RAM that no Rust object occupies; the word is aligned.
                    unsafe { ptr::write_volatile(address as *mut u32, u32::from_le_bytes(bytes)) };
                    4
                }
                (_, Some(byte)) => {
                    // SAFETY: as above, one byte inside the window.
                    unsafe { ptr::write_volatile(address as *mut u8, *byte) };
                    1
                }
                (_, None) => break,
            };
            done = done.wrapping_add(step);
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Stack measurement
// ---------------------------------------------------------------------------------------------

/// Stack painting: fill the unused stack with a pattern, run, and find the deepest word that
/// no longer holds it.
pub mod stack {
    use core::ptr;

    const PAINT: u32 = 0x5a5a_a5a5;
    /// Bytes left unpainted just below the current stack pointer (this function's own frame
    /// and the callee's spill area).
    const MARGIN: usize = 64;

    extern "C" {
        static _stack_bottom: u8;
        static _stack_top: u8;
    }

    fn bottom() -> usize {
        // Only the linker symbol's address is taken; nothing is read.
        ptr::addr_of!(_stack_bottom) as usize
    }

    /// Bytes of the stack (`_stack_size` of `link.x`).
    pub fn size() -> usize {
        top().saturating_sub(bottom())
    }

    /// The current stack pointer.
    #[inline(always)]
    pub fn pointer() -> usize {
        let sp: usize;
        // SAFETY: copies the stack pointer register; no memory is touched.
        unsafe { core::arch::asm!("mv {0}, sp", out(reg) sp) };
        sp
    }

    /// Paints the stack from its bottom up to a little below the caller's frame; returns the
    /// stack pointer, from which a later [`lowest_used`] gives the depth of what ran since.
    /// (Repainting forgets deeper use before it: read [`lowest_used`] first to keep it.)
    #[inline(never)]
    pub fn paint_below_here() -> usize {
        let sp = pointer();
        let mut address = bottom();
        let end = sp.saturating_sub(MARGIN);
        while address.saturating_add(4) <= end {
            // SAFETY: [bottom, sp - MARGIN) is the unused part of the one hart's stack: no
            // live frame is there (the stack grows down from sp), and the word is aligned.
            unsafe { ptr::write_volatile(address as *mut u32, PAINT) };
            address = address.wrapping_add(4);
        }
        sp
    }

    /// The lowest stack address written since the last paint (the stack's top if none).
    pub fn lowest_used() -> usize {
        let top = top();
        let mut address = bottom();
        while address < top {
            // SAFETY: an aligned word of the one hart's stack; reading it has no effect.
            if unsafe { ptr::read_volatile(address as *const u32) } != PAINT {
                return address;
            }
            address = address.wrapping_add(4);
        }
        top
    }

    /// The first byte above the stack.
    pub fn top() -> usize {
        // Only the linker symbol's address is taken; nothing is read.
        ptr::addr_of!(_stack_top) as usize
    }
}
