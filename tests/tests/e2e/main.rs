//! The end-to-end suite in one test binary: each module drives real
//! processes (the droidwarden binary, the real adb server, mosquitto, a
//! private dbus-daemon, emulated phones, scripted model servers) on free
//! loopback ports. One binary links once; `cargo test -p droidwarden-e2e
//! --test e2e <module>::` runs one part of it.

mod adb_call;
mod agent;
mod automations;
mod companion;
mod companion_doc;
mod companion_termux;
mod dbus;
mod dbus_socket;
mod delegation;
mod docs_examples;
mod docs_shell;
mod eval;
mod first_hour;
mod mcp;
mod mcp_client;
mod metrics;
mod mqtt_api;
mod package_deb;
mod pairing;
mod phone_files;
mod phone_services;
mod readme;
mod screen;
mod skills;
mod status_health;
mod systemd;
mod trust;
mod trust_access;
mod trust_delivery;
mod trust_limits;
mod ui_server;
mod ui_trust;
