//! host-driver
