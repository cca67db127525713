//! The emulated phone's mDNS announcement, as Android 11+ announces
//! wireless debugging: the service `_adb-tls-connect._tcp` under an
//! instance name like a real phone's (`adb-SERIAL-xxxxxx`), at the phone's
//! ADB address. When the phone moves to another port (the control port's
//! `{"op":"move"}`, as a phone whose wireless debugging was turned off and
//! on), the old announcement is withdrawn and the new one made, so an adb
//! server (platform-tools 30+) that follows the instance finds it again.
//!
//! The responder is the `mdns-sd` crate's, on its own thread. It announces
//! the phone's address only on the interface it belongs to: a phone on
//! 127.0.0.1 is announced on loopback alone.

use crate::error::SimError;
use mdns_sd::{Receiver, ServiceDaemon, ServiceEvent, ServiceInfo};
use std::net::SocketAddr;

/// The service type of a phone's wireless debugging connect port.
pub(crate) const CONNECT_SERVICE: &str = "_adb-tls-connect._tcp.local.";

/// One phone's announcement; withdrawn when dropped.
pub(crate) struct Announcer {
    daemon: ServiceDaemon,
    instance: String,
    /// The announced service's full name, while announced.
    announced: Option<String>,
    /// A browse of our own service type, kept running: its queries, which
    /// our responder answers on the multicast group, are what an adb server
    /// on this host hears (adb 36 sends its own queries on the network
    /// interfaces, not on loopback, and did not take the announcement made
    /// at registration). Nothing reads the events.
    _browse: Option<Receiver<ServiceEvent>>,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer")
            .field("instance", &self.instance)
            .field("announced", &self.announced)
            .finish_non_exhaustive()
    }
}

impl Announcer {
    /// A responder for `instance` on the interface of `addr`'s address,
    /// announcing `addr`.
    ///
    /// # Errors
    /// `SimError::Config` when the name is not a valid instance name or the
    /// responder cannot start.
    pub(crate) fn start(instance: &str, addr: SocketAddr) -> Result<Self, SimError> {
        if instance.is_empty()
            || instance.len() > 63
            || !instance
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(SimError::Config(format!(
                "invalid mDNS instance name {instance:?} (letters, digits, '-' and '_', at most 63)"
            )));
        }
        // Every interface, as the responder starts with (loopback
        // included): it announces the address only where it belongs (the
        // loopback address on loopback). Narrowing the interfaces after the
        // start applied only later, and the first announcement went out on
        // none (adb 36 then saw the phone only when someone else asked).
        let daemon = ServiceDaemon::new()
            .map_err(|e| SimError::Config(format!("cannot start the mDNS responder: {e}")))?;
        let mut announcer = Self {
            daemon,
            instance: instance.to_owned(),
            announced: None,
            _browse: None,
        };
        announcer.announce(addr)?;
        Ok(announcer)
    }

    /// Announce `addr` instead of whatever was announced before. The
    /// service is registered again under the same name, without a goodbye
    /// first: its SRV record is unique (cache-flush), so a listener
    /// replaces the old port with the new one, whereas a goodbye followed
    /// at once by the new record raced the listener's deletion of the
    /// goodbye's records (adb 36 then forgot the phone).
    ///
    /// # Errors
    /// `SimError::Config` when the responder refuses the service.
    pub(crate) fn announce(&mut self, addr: SocketAddr) -> Result<(), SimError> {
        let host = format!("{}.local.", self.instance);
        let info = ServiceInfo::new(
            CONNECT_SERVICE,
            &self.instance,
            &host,
            addr.ip(),
            addr.port(),
            None::<std::collections::HashMap<String, String>>,
        )
        .map_err(|e| SimError::Config(format!("mDNS service: {e}")))?;
        let fullname = info.get_fullname().to_owned();
        self.daemon
            .register(info)
            .map_err(|e| SimError::Config(format!("mDNS register: {e}")))?;
        // Queries again from the start (1 s, 2 s, 4 s …), each answered
        // with the new port.
        let _ = self.daemon.stop_browse(CONNECT_SERVICE);
        self._browse = self.daemon.browse(CONNECT_SERVICE).ok();
        tracing::info!(instance = %self.instance, %addr, "announced over mDNS");
        self.announced = Some(fullname);
        Ok(())
    }

    /// Withdraw the announcement (a goodbye packet), without waiting.
    fn withdraw(&mut self) {
        if let Some(fullname) = self.announced.take()
            && let Err(e) = self.daemon.unregister(&fullname)
        {
            tracing::warn!(error = %e, "mDNS unregister failed");
        }
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.withdraw();
        // The responder's thread ends once it has sent the goodbye.
        let _ = self.daemon.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_are_checked() {
        let addr: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        for bad in ["", "a b", "adb-X-1._tcp", &"x".repeat(64)] {
            assert!(Announcer::start(bad, addr).is_err(), "{bad:?}");
        }
    }
}
