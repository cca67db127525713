//! Injected faults: how the phone misbehaves on request.
//!
//! A delay stays until cleared and applies to every shell or exec reply; a
//! drop or a failure is one-shot and is consumed by the next shell or exec
//! request (a newer one-shot replaces an unconsumed one). Faults act on ADB
//! requests and on companion-app requests (whichever comes first consumes a
//! one-shot): a delay holds the answer, a failure is answered with
//! `device_error` without performing anything, a drop is never answered.
//! `SimHandle::execute` ignores them.

use std::time::Duration;

/// A fault to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Delay every shell reply by this long, until cleared.
    Delay(Duration),
    /// Close the ADB connection instead of answering the next shell request.
    Drop,
    /// Fail the next shell request: nothing runs, `stderr` is written and the
    /// exit status is `exit`.
    Fail {
        /// Exit status to report.
        exit: u8,
        /// Text for stderr (a newline is added if missing and non-empty).
        stderr: String,
    },
    /// Freeze, as a phone whose adbd stops answering: every shell request
    /// is held, even after its client gave up, until [`Fault::Thaw`]; then
    /// all held requests run at once (in no particular order), as adbd runs
    /// the streams it buffered. Until thawed.
    Freeze,
    /// End a freeze: the held requests run.
    Thaw,
    /// Remove every fault (a freeze too).
    Clear,
}

/// A one-shot fault waiting for the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OneShot {
    Drop,
    Fail { exit: u8, stderr: String },
}

/// The faults in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Faults {
    pub(crate) delay: Option<Duration>,
    pub(crate) next: Option<OneShot>,
}

impl Faults {
    /// Applies a fault request.
    pub(crate) fn apply(&mut self, fault: Fault) {
        match fault {
            Fault::Delay(d) => self.delay = Some(d),
            Fault::Drop => self.next = Some(OneShot::Drop),
            Fault::Fail { exit, stderr } => self.next = Some(OneShot::Fail { exit, stderr }),
            // Frozen is the shared phone's state (`Shared::frozen`), not a
            // per-request fault.
            Fault::Freeze | Fault::Thaw => {}
            Fault::Clear => *self = Self::default(),
        }
    }

    /// What the next request meets: the standing delay and the one-shot, which is consumed.
    pub(crate) fn take_for_request(&mut self) -> (Option<Duration>, Option<OneShot>) {
        (self.delay, self.next.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shots_are_consumed_and_delays_stay() {
        let mut f = Faults::default();
        f.apply(Fault::Delay(Duration::from_millis(5)));
        f.apply(Fault::Drop);
        assert_eq!(
            f.take_for_request(),
            (Some(Duration::from_millis(5)), Some(OneShot::Drop))
        );
        assert_eq!(f.take_for_request(), (Some(Duration::from_millis(5)), None));
        f.apply(Fault::Clear);
        assert_eq!(f.take_for_request(), (None, None));
    }
}
