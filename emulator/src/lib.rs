//! emulator
