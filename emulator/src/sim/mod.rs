//! The discrete-event engine.
pub mod queue;
pub mod time;
