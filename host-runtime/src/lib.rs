//! host-runtime
