//! Who may do what on the broker: roles, and the topics each role may
//! publish to and read from.
//!
//! This is the whole access model of the embedded broker, as pure
//! functions over topic strings: the state machine asks [`Grants`] before
//! it routes a PUBLISH, stores a Will, grants a subscription and delivers a
//! message. Read permission is checked on every delivery (as mosquitto
//! does), so a wildcard subscription such as `#` never delivers a topic its
//! subscriber may not read. Who a client *is* (checking passwords) is the
//! driver's business: it hands the state machine a [`Principal`].
//!
//! The rules, with `<p>` the daemon's topic prefix and `<ha>` the Home
//! Assistant discovery prefix (`docs/mqtt-access.md` has them as a
//! mosquitto ACL file):
//!
//! | role | publish | read |
//! |---|---|---|
//! | admin | everything | everything |
//! | automation | `<p>/cmd/#` except `<p>/cmd/approve` (unless granted), `<p>/devices/+/ha/+/set`, `<p>/automations/+/set`, `<p>/automations/+/run`, `<ha>/status` | `<p>/#` except `<p>/companion/#`; `<ha>/#` |
//! | phone `<id>` | `<p>/companion/<id>/online`, `…/response`, `…/event/+` | `<p>/companion/<id>/request` |

use crate::topic;

/// What a user may do, as stored with the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Everything: the daemon's own account and its administrators.
    Admin,
    /// Home automation (Home Assistant, scripts): commands and everything
    /// the daemon publishes, never a phone's topics.
    Automation {
        /// May also answer the agent's approval requests (`cmd/approve`).
        approve: bool,
    },
    /// One companion phone: its own topics only.
    Phone {
        /// The companion id the phone speaks for.
        companion_id: String,
    },
}

/// A client the broker let in: who it is and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user name it logged in with; `None` for an anonymous client
    /// (only when anonymous access is on, and then with [`Role::Admin`]).
    pub user: Option<String>,
    /// What it may do.
    pub role: Role,
}

impl Principal {
    /// An anonymous client with every right: the broker's behaviour with
    /// anonymous access on.
    #[must_use]
    pub fn anonymous() -> Principal {
        Principal {
            user: None,
            role: Role::Admin,
        }
    }
}

/// The broker-wide access settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The daemon's topic prefix (`[mqtt] topic_prefix`, e.g. `droidwarden`).
    pub prefix: String,
    /// The Home Assistant discovery prefix (e.g. `homeassistant`).
    pub ha_prefix: String,
    /// Let clients in without credentials, with every right (the old,
    /// unauthenticated behaviour).
    pub anonymous: bool,
    /// The user (the daemon's own account) that is told who published each
    /// command: a `<prefix>/cmd/…` message delivered to its sessions over
    /// MQTT 5 carries the publisher's login in the [`PUBLISHER_PROPERTY`]
    /// user property, set by the broker, never as a client sent it.
    /// `None`: nobody is told.
    pub vouch_to: Option<String>,
}

/// The user property in which the broker tells [`Policy::vouch_to`] who
/// published a command: the login the publisher's connection was
/// authenticated as. Absent when the publisher was anonymous.
pub const PUBLISHER_PROPERTY: &str = "droidwarden-publisher";

impl Policy {
    /// Anonymous access with every right, prefix `droidwarden`: a broker
    /// without access control.
    #[must_use]
    pub fn open() -> Policy {
        Policy {
            prefix: "droidwarden".into(),
            ha_prefix: "homeassistant".into(),
            anonymous: true,
            vouch_to: None,
        }
    }

    /// Whether `topic` is a command to the daemon (`<prefix>/cmd/…`).
    #[must_use]
    pub fn is_command(&self, topic: &str) -> bool {
        topic
            .strip_prefix(self.prefix.as_str())
            .is_some_and(|rest| rest.starts_with("/cmd/"))
    }

    /// Whether `who` is told who published each command.
    #[must_use]
    pub fn is_told_publishers(&self, who: &Principal) -> bool {
        who.user.is_some() && who.user == self.vouch_to
    }

    /// The MQTT 5 Response Information the broker hands out: the topic
    /// prefix under which the daemon honours response topics,
    /// `<prefix>/responses/`.
    #[must_use]
    pub fn response_information(&self) -> String {
        format!("{}/responses/", self.prefix)
    }

    /// Who may publish on `topic`, in words for the log line of a refusal:
    /// the least of `automation`, `automation with the approve grant`,
    /// `phone <id>` and `admin` that would have been allowed.
    ///
    /// ```
    /// use droidwarden_broker::Policy;
    /// let policy = Policy::open();
    /// assert_eq!(policy.who_may_publish("droidwarden/cmd/call"), "automation");
    /// assert_eq!(policy.who_may_publish("home/scenes/movie"), "admin");
    /// ```
    #[must_use]
    pub fn who_may_publish(&self, topic: &str) -> String {
        self.least_role(topic, Grants::may_publish)
    }

    /// Who may subscribe to `filter`, in words, as [`Self::who_may_publish`].
    #[must_use]
    pub fn who_may_subscribe(&self, filter: &str) -> String {
        self.least_role(filter, Grants::may_subscribe)
    }

    fn least_role(&self, topic: &str, allows: fn(&Grants, &str) -> bool) -> String {
        let as_role = |role| self.grants(&Principal { user: None, role });
        if allows(&as_role(Role::Automation { approve: false }), topic) {
            return "automation".into();
        }
        if allows(&as_role(Role::Automation { approve: true }), topic) {
            return "automation with the approve grant".into();
        }
        // A phone's topics name its companion id: `<p>/companion/<id>/…`.
        let companion = topic
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix("/companion/"))
            .and_then(|rest| rest.split('/').next());
        if let Some(id) = companion {
            let phone = as_role(Role::Phone {
                companion_id: id.to_owned(),
            });
            if allows(&phone, topic) {
                return format!("phone {id}");
            }
        }
        "admin".into()
    }

    /// The rights of `who`, resolved into topic patterns once per
    /// connection.
    #[must_use]
    pub fn grants(&self, who: &Principal) -> Grants {
        let p = &self.prefix;
        let ha = &self.ha_prefix;
        match &who.role {
            Role::Admin => Grants {
                everything: true,
                ..Grants::default()
            },
            Role::Automation { approve } => Grants {
                everything: false,
                write: vec![
                    format!("{p}/cmd/#"),
                    format!("{p}/devices/+/ha/+/set"),
                    // Automations' Home Assistant switch and button.
                    format!("{p}/automations/+/set"),
                    format!("{p}/automations/+/run"),
                    format!("{ha}/status"),
                ],
                write_except: if *approve {
                    Vec::new()
                } else {
                    vec![format!("{p}/cmd/approve")]
                },
                read: vec![format!("{p}/#"), format!("{ha}/#")],
                read_except: vec![format!("{p}/companion/#")],
            },
            Role::Phone { companion_id } => {
                // An id that is not one plain topic level would widen or
                // break the patterns: such a phone gets nothing.
                if companion_id.is_empty() || companion_id.contains(['/', '+', '#']) {
                    return Grants::default();
                }
                let base = format!("{p}/companion/{companion_id}");
                Grants {
                    everything: false,
                    write: vec![
                        format!("{base}/online"),
                        format!("{base}/response"),
                        format!("{base}/event/+"),
                    ],
                    write_except: Vec::new(),
                    read: vec![format!("{base}/request")],
                    read_except: Vec::new(),
                }
            }
        }
    }
}

/// One client's rights as topic patterns (MQTT filters): a topic is
/// allowed when it matches an allowing pattern and no excepting one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Every topic, both ways (admin).
    everything: bool,
    write: Vec<String>,
    write_except: Vec<String>,
    read: Vec<String>,
    read_except: Vec<String>,
}

impl Grants {
    /// Rights to everything.
    #[must_use]
    pub fn everything() -> Grants {
        Grants {
            everything: true,
            ..Grants::default()
        }
    }

    /// Whether the client may publish on `topic` (a topic name).
    #[must_use]
    pub fn may_publish(&self, topic: &str) -> bool {
        self.everything || allowed(&self.write, &self.write_except, topic)
    }

    /// Whether a message on `topic` may be delivered to the client.
    #[must_use]
    pub fn may_read(&self, topic: &str) -> bool {
        self.everything || allowed(&self.read, &self.read_except, topic)
    }

    /// Whether a subscription to `filter` (a valid filter) can deliver
    /// anything: it overlaps a readable pattern and is not wholly inside an
    /// excepted one. Delivery is still checked message by message.
    #[must_use]
    pub fn may_subscribe(&self, filter: &str) -> bool {
        self.everything
            || (self.read.iter().any(|p| overlaps(filter, p))
                && !self.read_except.iter().any(|p| covers(p, filter)))
    }
}

fn allowed(allow: &[String], except: &[String], topic: &str) -> bool {
    allow.iter().any(|p| topic::matches(p, topic))
        && !except.iter().any(|p| topic::matches(p, topic))
}

/// Whether some topic name matches both filters.
fn overlaps(a: &str, b: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
    // Wildcards in the first level never match `$` topics.
    let dollar = |levels: &[&str]| levels[0].starts_with('$');
    let wild = |levels: &[&str]| matches!(levels[0], "+" | "#");
    if (dollar(&a) && wild(&b)) || (dollar(&b) && wild(&a)) {
        return false;
    }
    let mut i = 0;
    loop {
        match (a.get(i), b.get(i)) {
            (Some(&"#"), _) | (_, Some(&"#")) | (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(x), Some(y)) if *x == "+" || *y == "+" || x == y => i += 1,
            _ => return false,
        }
    }
}

/// Whether every topic `filter` matches is also matched by `pattern`.
fn covers(pattern: &str, filter: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let filter: Vec<&str> = filter.split('/').collect();
    let mut i = 0;
    loop {
        match (pattern.get(i), filter.get(i)) {
            (Some(&"#"), _) => return true,
            (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(_), Some(&"#")) => return false,
            (Some(&"+"), Some(_)) => i += 1,
            (Some(_), Some(&"+")) => return false,
            (Some(p), Some(f)) if p == f => i += 1,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            prefix: "dw".into(),
            ha_prefix: "homeassistant".into(),
            anonymous: false,
            vouch_to: None,
        }
    }

    fn grants(role: Role) -> Grants {
        policy().grants(&Principal {
            user: Some("someone".into()),
            role,
        })
    }

    /// `(topic, may publish, may read)` for each row.
    fn check(g: &Grants, table: &[(&str, bool, bool)]) {
        for &(topic, publish, read) in table {
            assert_eq!(g.may_publish(topic), publish, "publish {topic}");
            assert_eq!(g.may_read(topic), read, "read {topic}");
        }
    }

    #[test]
    fn admin_may_do_everything() {
        check(
            &grants(Role::Admin),
            &[
                ("dw/cmd/approve", true, true),
                ("dw/companion/a/response", true, true),
                ("dw/companion/a/request", true, true),
                ("dw/availability", true, true),
                ("dw/responses/x", true, true),
                ("anything/else", true, true),
            ],
        );
        assert!(grants(Role::Admin).may_subscribe("#"));
    }

    #[test]
    fn automation_commands_and_reads_but_never_companions() {
        let table = [
            ("dw/cmd/call", true, true),
            ("dw/cmd/ask", true, true),
            ("dw/cmd/skill", true, true),
            ("dw/cmd/approve", false, true),
            ("dw/devices/kitchen/ha/wifi/set", true, true),
            ("dw/devices/kitchen/ha/wifi/state", false, true),
            ("homeassistant/status", true, true),
            (
                "homeassistant/switch/droidwarden_k/wifi/config",
                false,
                true,
            ),
            ("dw/availability", false, true),
            ("dw/devices/kitchen/availability", false, true),
            ("dw/devices/kitchen/services/battery/state", false, true),
            ("dw/devices/kitchen/status", false, true),
            ("dw/reply/42", false, true),
            ("dw/errors", false, true),
            ("dw/approvals/r-1", false, true),
            ("dw/responses/mine", false, true),
            ("dw/companion/a/response", false, false),
            ("dw/companion/a/request", false, false),
            ("dw/companion/a/online", false, false),
            ("other/topic", false, false),
        ];
        check(&grants(Role::Automation { approve: false }), &table);
        let granted = grants(Role::Automation { approve: true });
        assert!(granted.may_publish("dw/cmd/approve"));
        assert!(!granted.may_publish("dw/companion/a/response"));
    }

    #[test]
    fn a_phone_speaks_only_for_itself() {
        let g = grants(Role::Phone {
            companion_id: "alice".into(),
        });
        check(
            &g,
            &[
                ("dw/companion/alice/online", true, false),
                ("dw/companion/alice/response", true, false),
                ("dw/companion/alice/event/battery", true, false),
                ("dw/companion/alice/event/a/b", false, false),
                ("dw/companion/alice/request", false, true),
                ("dw/companion/bob/response", false, false),
                ("dw/companion/bob/online", false, false),
                ("dw/companion/bob/request", false, false),
                ("dw/cmd/call", false, false),
                ("dw/cmd/approve", false, false),
                ("dw/availability", false, false),
            ],
        );
        let wild = grants(Role::Phone {
            companion_id: "+".into(),
        });
        assert!(!wild.may_publish("dw/companion/bob/response"));
        assert!(!wild.may_subscribe("#"));
    }

    #[test]
    fn subscriptions_that_can_deliver_nothing_are_refused() {
        let automation = grants(Role::Automation { approve: false });
        for (filter, ok) in [
            ("#", true),
            ("dw/#", true),
            ("dw/+/+", true),
            ("dw/responses/#", true),
            ("homeassistant/#", true),
            ("dw/companion/#", false),
            ("dw/companion/+/request", false),
            ("dw/+/alice/request", true),
            ("other/#", false),
            ("$SYS/#", false),
        ] {
            assert_eq!(automation.may_subscribe(filter), ok, "automation {filter}");
        }
        let phone = grants(Role::Phone {
            companion_id: "alice".into(),
        });
        for (filter, ok) in [
            ("dw/companion/alice/request", true),
            ("dw/companion/+/request", true),
            ("#", true),
            ("dw/companion/bob/request", false),
            ("dw/companion/bob/#", false),
            ("dw/cmd/#", false),
        ] {
            assert_eq!(phone.may_subscribe(filter), ok, "phone {filter}");
        }
    }

    #[test]
    fn filter_overlap_and_cover() {
        assert!(overlaps("a/+", "a/b"));
        assert!(overlaps("a/#", "a"));
        assert!(!overlaps("a/b", "a/c"));
        assert!(!overlaps("a/b/c", "a/b"));
        assert!(!overlaps("#", "$SYS/x"));
        assert!(covers("a/#", "a/b/+"));
        assert!(covers("a/+/c", "a/x/c"));
        assert!(!covers("a/+/c", "a/#"));
        assert!(!covers("a/b", "a/+"));
    }

    #[test]
    fn the_least_role_that_would_allow_a_refusal() {
        let p = policy();
        for (topic, who) in [
            ("dw/cmd/call", "automation"),
            ("dw/cmd/approve", "automation with the approve grant"),
            ("dw/companion/alice/response", "phone alice"),
            ("dw/companion/alice/request", "admin"),
            ("dw/availability", "admin"),
            ("home/scenes/movie_night", "admin"),
        ] {
            assert_eq!(p.who_may_publish(topic), who, "{topic}");
        }
        assert_eq!(p.who_may_subscribe("dw/#"), "automation");
        assert_eq!(
            p.who_may_subscribe("dw/companion/alice/request"),
            "phone alice"
        );
        assert_eq!(p.who_may_subscribe("$SYS/#"), "admin");
    }

    #[test]
    fn response_information_is_the_responses_prefix() {
        assert_eq!(policy().response_information(), "dw/responses/");
    }
}
