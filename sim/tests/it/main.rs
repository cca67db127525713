//! The emulated phone's integration tests in one binary: the real adb
//! server against the sim, the sim binary itself, and the companion protocol
//! over a real mosquitto.

mod adb_real;
mod binary;
mod common;
mod companion_mqtt;
