//! What the crate's unit tests share: the registry as a test sees it, and a
//! scripted adb server's side of the smart-socket protocol on loopback.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use droidwarden_services::DeviceName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

use crate::{DeviceEvent, Registry};

/// A device name that is known to be valid.
pub(crate) fn name(n: &str) -> DeviceName {
    DeviceName::try_from(n).unwrap()
}

/// Every device in `registry`: its name and whether it is online.
pub(crate) fn names(registry: &Registry) -> Vec<(String, bool)> {
    registry
        .list()
        .into_iter()
        .map(|d| (d.name.to_string(), d.online))
        .collect()
}

/// The events sent so far and not yet received.
pub(crate) fn drain(events: &mut broadcast::Receiver<DeviceEvent>) -> Vec<DeviceEvent> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

/// The events of an online device renamed from `old` to `new`: the old name
/// goes offline saying why and is removed, the new one comes online.
pub(crate) fn renamed(old: &str, new: &str) -> Vec<DeviceEvent> {
    vec![
        DeviceEvent::Availability {
            device: name(old),
            online: false,
            detail: Some(format!("renamed to {new}")),
        },
        DeviceEvent::Removed { device: name(old) },
        DeviceEvent::Availability {
            device: name(new),
            online: true,
            detail: None,
        },
    ]
}

/// A listener on a free loopback port, with its address.
pub(crate) async fn loopback() -> (TcpListener, SocketAddrV4) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
        unreachable!("bound to IPv4")
    };
    (listener, addr)
}

/// One request's text (four hex digits of length, then the text), as the
/// adb server reads it.
pub(crate) async fn read_request(conn: &mut TcpStream) -> String {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).await.unwrap();
    let len = usize::from_str_radix(std::str::from_utf8(&len).unwrap(), 16).unwrap();
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).await.unwrap();
    String::from_utf8(body).unwrap()
}

/// Read `count` requests, whatever they say, answering each `OKAY`.
pub(crate) async fn accept_requests(conn: &mut TcpStream, count: usize) {
    for _ in 0..count {
        read_request(conn).await;
        conn.write_all(b"OKAY").await.unwrap();
    }
}
