//! The emulated phone's mDNS announcement, as Android 11+ announces
//! wireless debugging: the service `_adb-tls-connect._tcp` under an
//! instance name like a real phone's (`adb-SERIAL-xxxxxx`), at the phone's
//! ADB address. When the phone moves to another port (the control port's
//! `{"op":"move"}`, as a phone whose wireless debugging was turned off and
//! on), the old announcement is withdrawn and the new one made, so an adb
//! server (platform-tools 30+) that follows the instance finds it again.
//!
//! The responder is the `mdns-sd` crate's, on its own thread; only the
//! interface of the phone's address is used (loopback for a phone on
//! 127.0.0.1), so a test announces nothing on the machine's network.

use crate::error::SimError;
use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};
use std::net::SocketAddr;

/// The service type of a phone's wireless debugging connect port.
pub(crate) const CONNECT_SERVICE: &str = "_adb-tls-connect._tcp.local.";

/// One phone's announcement; withdrawn when dropped.
pub(crate) struct Announcer {
    daemon: ServiceDaemon,
    instance: String,
    /// The announced service's full name, while announced.
    announced: Option<String>,
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
        let daemon = ServiceDaemon::new()
            .map_err(|e| SimError::Config(format!("cannot start the mDNS responder: {e}")))?;
        let only = if addr.ip().is_loopback() {
            IfKind::LoopbackV4
        } else {
            IfKind::Addr(addr.ip())
        };
        daemon
            .disable_interface(IfKind::All)
            .and_then(|()| daemon.enable_interface(only))
            .map_err(|e| SimError::Config(format!("mDNS interfaces: {e}")))?;
        let mut announcer = Self {
            daemon,
            instance: instance.to_owned(),
            announced: None,
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
