//! Mechanism-specific host state. RP and BS need nothing beyond the control thread's state
//! machine in [`crate::runtime`]; AXLE owns a ring.
pub mod axle;
