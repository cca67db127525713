//! The embedded broker's users: the password file, password hashing, the
//! daemon's own account, and `droidwarden mqtt-user add|remove|list`.
//!
//! The file is `<state dir>/mqtt-users.json`, mode 0600 (the directory
//! 0700), written whole to a temporary file and renamed into place:
//!
//! ```json
//! {"users": [
//!   {"name": "droidwarden", "role": "admin", "password": "pbkdf2-sha256$100000$<salt hex>$<hash hex>"},
//!   {"name": "ha", "role": "automation", "grants": ["approve"], "password": "pbkdf2-sha256$…"},
//!   {"name": "alice", "role": "phone", "companion_id": "alice-pixel", "password": "pbkdf2-sha256$…"}
//! ]}
//! ```
//!
//! Passwords are kept only as salted PBKDF2-HMAC-SHA256 hashes (`ring`,
//! already in the build through rustls), 100 000 iterations, compared in
//! constant time by `ring::pbkdf2::verify`. The daemon's account
//! (`droidwarden`, admin) is created at the first start with a random
//! password (32 bytes from the system's generator, hex), which is written to
//! `<state dir>/mqtt-daemon.secret` (0600) for the daemon's own client; it
//! is never logged.
//!
//! Who a connecting client is gets decided by [`Users::login`]: PBKDF2 costs
//! tens of milliseconds, so it runs on the blocking pool, one check at a
//! time, and successful checks are remembered (keyed by an HMAC of the user
//! name and password under a key drawn at start, so the cache holds no
//! password) until the file changes: a flood of bad CONNECTs then only
//! queues behind itself and never stalls the runtime or a known client's
//! reconnection.
//!
//! Guessing is slowed down per source address and user name ([`Throttle`]):
//! after [`FREE_FAILURES`] failed logins, each further failure doubles a
//! back-off (from 1 s up to 5 min) during which that source's attempts for
//! that user are refused unchecked ("connection rate exceeded"), logged at
//! `warn` when a back-off begins or grows. A pair that verified before is
//! let in all the same, so known clients are never locked out by a
//! stranger's guessing. Passwords a person chooses (`mqtt-user add
//! --password-file|--password-stdin`) have at least [`MIN_PASSWORD_LEN`]
//! characters; generated ones are 64.

use anyhow::{Context, anyhow, bail};
use droidwarden_broker::{Bytes, Login, Principal, Role};
use ring::rand::{SecureRandom, SystemRandom};
use ring::{hmac, pbkdf2};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The user file, in the state directory.
pub(crate) const USERS_FILE: &str = "mqtt-users.json";
/// The daemon's own password, in the state directory.
pub(crate) const DAEMON_SECRET_FILE: &str = "mqtt-daemon.secret";
/// The largest users file read (a million accounts' hashes fit).
const USERS_FILE_LIMIT: u64 = 256 * 1024 * 1024;
/// The daemon's own user name.
pub(crate) const DAEMON_USER: &str = "droidwarden";

/// PBKDF2 iterations: about 30 ms per check here (OWASP suggests 600 000
/// for SHA-256 against offline cracking of weak passwords; generated
/// passwords are 256 bits, and a broker that checks every CONNECT cannot
/// afford seconds).
const ITERATIONS: u32 = 100_000;
const SCHEME: &str = "pbkdf2-sha256";
const SALT_LEN: usize = 16;
const HASH_LEN: usize = 32;

/// The shortest password a person may choose: 12 characters (NIST SP
/// 800-63B asks for at least 8, 15 without other factors; 12 keeps a
/// PBKDF2-hashed password out of reach of online guessing at the
/// [`Throttle`]'s pace and of casual offline cracking).
pub(crate) const MIN_PASSWORD_LEN: usize = 12;
/// Failed logins from one source for one user before the back-off starts.
pub(crate) const FREE_FAILURES: u32 = 5;
/// The first back-off; each further failure doubles it, up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A source and user with no failure for this long start afresh.
const FORGET_FAILURES: Duration = Duration::from_secs(15 * 60);
/// (source, user) pairs remembered at most; the oldest go first.
const MAX_TRACKED: usize = 10_000;

/// The roles, as spelled on the command line and in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RoleName {
    /// Everything, including approvals.
    Admin,
    /// Home automation: commands (approvals only with `--grant approve`)
    /// and everything the daemon publishes except the phones' topics.
    Automation,
    /// One companion phone: its own topics only.
    Phone,
}

/// Extra rights beyond a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Grant {
    /// Answer the agent's approval requests (`cmd/approve`) as automation.
    Approve,
}

/// One user as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserRecord {
    pub(crate) name: String,
    pub(crate) role: RoleName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) companion_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) grants: Vec<Grant>,
    /// `pbkdf2-sha256$<iterations>$<salt hex>$<hash hex>`.
    pub(crate) password: String,
}

impl UserRecord {
    /// Who a client logged in as this user is.
    pub(crate) fn principal(&self) -> Principal {
        let role = match self.role {
            RoleName::Admin => Role::Admin,
            RoleName::Automation => Role::Automation {
                approve: self.grants.contains(&Grant::Approve),
            },
            RoleName::Phone => Role::Phone {
                companion_id: self
                    .companion_id
                    .clone()
                    .unwrap_or_else(|| self.name.clone()),
            },
        };
        Principal {
            user: Some(self.name.clone()),
            role,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    users: Vec<UserRecord>,
}

/// Every user, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UserDb {
    users: BTreeMap<String, UserRecord>,
}

impl UserDb {
    /// Parses the file's contents.
    pub(crate) fn parse(text: &str) -> anyhow::Result<UserDb> {
        let file: FileFormat = serde_json::from_str(text)?;
        let mut users = BTreeMap::new();
        for user in file.users {
            check_name("user name", &user.name)?;
            if let Some(id) = &user.companion_id {
                check_name("companion id", id)?;
            }
            if let Some(old) = users.insert(user.name.clone(), user) {
                bail!("user {:?} appears twice", old.name);
            }
        }
        Ok(UserDb { users })
    }

    /// Reads `path`; a missing file is an empty database.
    pub(crate) fn load(path: &Path) -> anyhow::Result<UserDb> {
        // Never through a link or from a FIFO: root reads this file in a
        // directory the service user controls.
        match crate::private::read_file(path, USERS_FILE_LIMIT) {
            Ok(Some(bytes)) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))?;
                UserDb::parse(&text).with_context(|| path.display().to_string())
            }
            Ok(None) => Ok(UserDb::default()),
            Err(e) => Err(e).with_context(|| path.display().to_string()),
        }
    }

    /// Writes the database to `path` (0600, its directory 0700), atomically.
    pub(crate) fn save(&self, path: &Path) -> anyhow::Result<()> {
        let file = FileFormat {
            users: self.users.values().cloned().collect(),
        };
        let mut text = serde_json::to_string_pretty(&file)?;
        text.push('\n');
        write_private(path, text.as_bytes())
    }

    /// The user called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&UserRecord> {
        self.users.get(name)
    }

    /// Every user, by name.
    pub(crate) fn users(&self) -> impl Iterator<Item = &UserRecord> {
        self.users.values()
    }

    /// Adds or replaces a user.
    pub(crate) fn insert(&mut self, user: UserRecord) {
        self.users.insert(user.name.clone(), user);
    }

    /// Removes a user; whether it was there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        self.users.remove(name).is_some()
    }

    /// Who `name` with `password` is, if the password is right. Costs one
    /// PBKDF2 computation: call it off the async runtime.
    pub(crate) fn verify(&self, name: &str, password: &[u8]) -> Option<Principal> {
        let user = self.users.get(name)?;
        verify_password(&user.password, password).then(|| user.principal())
    }

    /// Users that `newer` removed or changed (role, companion id, grants or
    /// password): their connections must end.
    pub(crate) fn changed_in(&self, newer: &UserDb) -> Vec<String> {
        self.users
            .iter()
            .filter(|(name, user)| newer.users.get(*name) != Some(user))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// User names and companion ids: 1–64 letters, digits, `.`, `_`, `-`, `:`,
/// starting with a letter or digit (the companion id rules, since a phone's
/// user name is its companion id by default).
pub(crate) fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    if droidwarden_services::CompanionId::try_from(name).is_ok() {
        Ok(())
    } else {
        bail!(
            "{what} {name:?}: 1 to 64 letters, digits, '.', '_', '-' or ':', starting with a letter or digit"
        )
    }
}

/// Hashes `password` with a fresh salt.
pub(crate) fn hash_password(password: &[u8]) -> anyhow::Result<String> {
    let mut salt = [0u8; SALT_LEN];
    SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| anyhow!("the system's random generator failed"))?;
    let mut hash = [0u8; HASH_LEN];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations(ITERATIONS),
        &salt,
        password,
        &mut hash,
    );
    Ok(format!(
        "{SCHEME}${ITERATIONS}${}${}",
        crate::private::hex(&salt),
        crate::private::hex(&hash)
    ))
}

fn iterations(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// Checks `password` against a stored hash, in constant time.
fn verify_password(stored: &str, password: &[u8]) -> bool {
    let mut parts = stored.split('$');
    let (Some(SCHEME), Some(n), Some(salt), Some(hash), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let (Some(n), Some(salt), Some(hash)) = (
        n.parse::<u32>()
            .ok()
            .filter(|n| (1..=10_000_000).contains(n)),
        unhex(salt),
        unhex(hash),
    ) else {
        return false;
    };
    pbkdf2::verify(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations(n),
        &salt,
        password,
        &hash,
    )
    .is_ok()
}

/// A new random password: 32 bytes from the system's generator, as hex.
pub(crate) fn generate_password() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow!("the system's random generator failed"))?;
    Ok(crate::private::hex(&bytes))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// Creates `dir` (and its parents) with mode 0700 when missing.
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Writes `bytes` to `path` with mode 0600 whatever the umask, created
/// exclusively and renamed into place (`crate::private::write_file`:
/// `sudo droidwarden mqtt-user add` writes in the service user's
/// directory, so nothing there is followed), owned by the directory's
/// owner so the daemon can still read it.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    crate::private::write_file(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The daemon's credentials for its embedded broker: the password in
/// `mqtt-daemon.secret` when it still matches the daemon's user, else a new
/// random one, stored hashed in the user file and in plain in the secret
/// file. Blocking (file I/O and one PBKDF2): run it on the blocking pool.
pub(crate) fn ensure_daemon_user(state_dir: &Path) -> anyhow::Result<(String, String)> {
    let users_path = state_dir.join(USERS_FILE);
    let secret_path = state_dir.join(DAEMON_SECRET_FILE);
    let mut db = UserDb::load(&users_path)?;
    let secret = crate::private::read_file(&secret_path, 4096)
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
        .filter(|s| !s.is_empty());
    if let (Some(secret), Some(user)) = (&secret, db.get(DAEMON_USER))
        && user.role == RoleName::Admin
        && verify_password(&user.password, secret.as_bytes())
    {
        return Ok((DAEMON_USER.to_owned(), secret.clone()));
    }
    let password = generate_password()?;
    db.insert(UserRecord {
        name: DAEMON_USER.to_owned(),
        role: RoleName::Admin,
        companion_id: None,
        grants: Vec::new(),
        password: hash_password(password.as_bytes())?,
    });
    // The secret first: a crash in between leaves a user file that does
    // not match, which the next start repairs.
    write_private(&secret_path, format!("{password}\n").as_bytes())?;
    db.save(&users_path)?;
    tracing::info!(
        user = DAEMON_USER,
        file = %secret_path.display(),
        "created the daemon's account on the embedded MQTT broker"
    );
    Ok((DAEMON_USER.to_owned(), password))
}

/// What identifies a version of the user file: a rewrite (rename) changes
/// the inode, an edit in place the modification time or size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().map(|m| Stamp {
        ino: m.ino(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
        len: m.len(),
    })
}

#[derive(Debug)]
struct Loaded {
    stamp: Option<Stamp>,
    db: UserDb,
    /// HMACs of (user, password) pairs that verified against `db`.
    verified: HashSet<Vec<u8>>,
}

/// Failed logins per (source address, user name), and the back-off they
/// earned. Pure: the caller passes the time.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    failures: HashMap<(IpAddr, String), Failures>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
    /// Attempts are refused unchecked until then.
    until: Option<Instant>,
}

impl Throttle {
    /// Whether an attempt from `source` as `user` is to be refused
    /// unchecked now.
    pub(crate) fn blocked(&self, source: IpAddr, user: &str, now: Instant) -> bool {
        self.failures
            .get(&(source, user.to_owned()))
            .and_then(|f| f.until)
            .is_some_and(|until| now < until)
    }

    /// Records a failed attempt; returns the back-off it starts, if any.
    pub(crate) fn failed(&mut self, source: IpAddr, user: &str, now: Instant) -> Option<Duration> {
        let key = (source, user.to_owned());
        if !self.failures.contains_key(&key) && self.failures.len() >= MAX_TRACKED {
            self.failures
                .retain(|_, f| now.duration_since(f.last) < FORGET_FAILURES);
            if self.failures.len() >= MAX_TRACKED
                && let Some(oldest) = self
                    .failures
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(k, _)| k.clone())
            {
                self.failures.remove(&oldest);
            }
        }
        let f = self.failures.entry(key).or_insert(Failures {
            count: 0,
            last: now,
            until: None,
        });
        if now.duration_since(f.last) >= FORGET_FAILURES {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        let beyond = f.count.checked_sub(FREE_FAILURES + 1)?;
        let backoff = FIRST_BACKOFF
            .checked_mul(1u32.checked_shl(beyond).unwrap_or(u32::MAX))
            .unwrap_or(MAX_BACKOFF)
            .min(MAX_BACKOFF);
        f.until = Some(now + backoff);
        Some(backoff)
    }

    /// A successful login clears the pair's record.
    pub(crate) fn succeeded(&mut self, source: IpAddr, user: &str) {
        self.failures.remove(&(source, user.to_owned()));
    }
}

/// The broker's view of the user file, reloaded when it changes (checked
/// at every login, and on `Users::reload` for SIGHUP).
#[derive(Debug)]
pub(crate) struct Users {
    path: PathBuf,
    loaded: Mutex<Loaded>,
    cache_key: hmac::Key,
    /// One password check at a time: PBKDF2 is CPU-bound, and the machine
    /// has other work to do.
    checks: tokio::sync::Semaphore,
    /// Failed logins and their back-off.
    throttle: Mutex<Throttle>,
}

impl Users {
    /// Reads the user file at `path` (which may not exist yet).
    pub(crate) fn open(path: PathBuf) -> anyhow::Result<Users> {
        let stamp = stamp(&path);
        let db = UserDb::load(&path)?;
        let cache_key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .map_err(|_| anyhow!("the system's random generator failed"))?;
        Ok(Users {
            path,
            loaded: Mutex::new(Loaded {
                stamp,
                db,
                verified: HashSet::new(),
            }),
            cache_key,
            checks: tokio::sync::Semaphore::new(1),
            throttle: Mutex::new(Throttle::default()),
        })
    }

    /// Reloads the file if it changed; returns the users removed or
    /// changed. A file that does not parse is logged and the users known
    /// so far are kept. Blocking (a `stat`, maybe a read).
    pub(crate) fn refresh(&self) -> Vec<String> {
        let now = stamp(&self.path);
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if now == loaded.stamp {
            return Vec::new();
        }
        match UserDb::load(&self.path) {
            Ok(db) => {
                let changed = loaded.db.changed_in(&db);
                tracing::info!(
                    users = db.users.len(),
                    changed = changed.len(),
                    "embedded MQTT broker: user file reloaded"
                );
                *loaded = Loaded {
                    stamp: now,
                    db,
                    verified: HashSet::new(),
                };
                changed
            }
            Err(e) => {
                tracing::error!(error = %e, "embedded MQTT broker: user file unreadable; keeping the users loaded before");
                loaded.stamp = now;
                Vec::new()
            }
        }
    }

    /// Decides who a CONNECT from `source` with these credentials is; also
    /// returns the users whose connections must end because the file
    /// changed under them. Runs the check on the blocking pool; refuses
    /// unchecked ([`Login::Throttled`]) while `source` is backing off for
    /// the user, unless the pair verified before.
    pub(crate) async fn login(
        self: &Arc<Self>,
        source: IpAddr,
        username: Option<String>,
        password: Option<Bytes>,
    ) -> (Login, Vec<String>) {
        let Some(username) = username else {
            return (Login::Anonymous, Vec::new());
        };
        let password = password.unwrap_or_default();
        // First the cheap part, outside the queue: a changed file, an
        // unknown user, a login that verified before (the daemon's own
        // reconnections never wait behind strangers' password checks).
        let users = Arc::clone(self);
        let (name, pw) = (username.clone(), password.clone());
        let quick = tokio::task::spawn_blocking(move || {
            let changed = users.refresh();
            (users.quick_check(&name, &pw), changed)
        })
        .await;
        let Ok((quick, changed)) = quick else {
            return (Login::BadCredentials, Vec::new());
        };
        if let Some(login) = quick {
            let login = self.record(source, &username, login);
            return (login, changed);
        }
        if self.throttle().blocked(source, &username, Instant::now()) {
            return (Login::Throttled, changed);
        }
        let Ok(_permit) = self.checks.acquire().await else {
            return (Login::BadCredentials, changed);
        };
        // Again after the wait: a burst of guesses queued together must
        // not all be checked.
        if self.throttle().blocked(source, &username, Instant::now()) {
            return (Login::Throttled, changed);
        }
        let users = Arc::clone(self);
        let name = username.clone();
        let checked = tokio::task::spawn_blocking(move || users.check(&name, &password)).await;
        let login = self.record(source, &username, checked.unwrap_or(Login::BadCredentials));
        (login, changed)
    }

    fn throttle(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.throttle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a verdict for the back-off; a back-off that begins or grows
    /// is logged (at most once per back-off period, so rate-limited by
    /// itself).
    fn record(&self, source: IpAddr, username: &str, login: Login) -> Login {
        match &login {
            Login::User(_) => self.throttle().succeeded(source, username),
            Login::BadCredentials => {
                let backoff = self.throttle().failed(source, username, Instant::now());
                if let Some(backoff) = backoff {
                    tracing::warn!(
                        %source,
                        user = username,
                        backoff_s = backoff.as_secs(),
                        "repeated failed MQTT logins: further attempts from this source for this \
                         user are refused unchecked for a while"
                    );
                }
            }
            Login::Anonymous | Login::Throttled => {}
        }
        login
    }

    /// The cache key of a (user, password) pair.
    fn tag(&self, username: &str, password: &[u8]) -> Vec<u8> {
        let mut tag = hmac::Context::with_key(&self.cache_key);
        tag.update(&(username.len() as u64).to_be_bytes());
        tag.update(username.as_bytes());
        tag.update(password);
        tag.sign().as_ref().to_vec()
    }

    /// The verdict when it needs no PBKDF2: an unknown user, or a pair
    /// that verified before.
    fn quick_check(&self, username: &str, password: &[u8]) -> Option<Login> {
        let tag = self.tag(username, password);
        let loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let Some(user) = loaded.db.get(username) else {
            return Some(Login::BadCredentials);
        };
        loaded
            .verified
            .contains(&tag)
            .then(|| Login::User(user.principal()))
    }

    /// Blocking: one PBKDF2 unless this pair verified before.
    fn check(&self, username: &str, password: &[u8]) -> Login {
        if let Some(login) = self.quick_check(username, password) {
            return login;
        }
        let tag = self.tag(username, password);
        let db = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .db
            .clone();
        match db.verify(username, password) {
            Some(principal) => {
                let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
                // Only if the file did not change during the check.
                if loaded.db == db {
                    loaded.verified.insert(tag);
                }
                Login::User(principal)
            }
            None => Login::BadCredentials,
        }
    }
}

/// `droidwarden mqtt-user …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum MqttUserCommand {
    /// Add a user of the embedded broker. Without a password option, one is
    /// generated and printed once.
    Add {
        /// The user name (for a phone, by default also its companion id).
        name: String,
        /// What the user may do.
        #[arg(long, value_enum)]
        role: RoleName,
        /// The phone's companion id (role phone; default: the user name).
        #[arg(long, value_name = "ID")]
        companion_id: Option<String>,
        /// Extra rights: `approve` lets an automation user answer approvals.
        #[arg(long, value_enum)]
        grant: Vec<Grant>,
        /// Read the password from this file (its first line).
        #[arg(long, value_name = "FILE", conflicts_with = "password_stdin")]
        password_file: Option<PathBuf>,
        /// Read the password from standard input (its first line).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove a user; its connections end at the broker's next check.
    Remove {
        /// The user name.
        name: String,
    },
    /// List the users: names, roles, companion ids and grants (never
    /// passwords).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an `mqtt-user` command on `<state dir>/mqtt-users.json`. The
/// running daemon notices the change at the next CONNECT or SIGHUP.
pub(crate) fn run(command: MqttUserCommand, state_dir: &Path) -> anyhow::Result<()> {
    let path = state_dir.join(USERS_FILE);
    match command {
        MqttUserCommand::Add {
            name,
            role,
            companion_id,
            grant,
            password_file,
            password_stdin,
        } => {
            check_name("user name", &name)?;
            if name == DAEMON_USER {
                bail!("{DAEMON_USER:?} is the daemon's own account; pick another name");
            }
            if let Some(id) = &companion_id {
                if role != RoleName::Phone {
                    bail!("--companion-id is for --role phone");
                }
                check_name("companion id", id)?;
            }
            if !grant.is_empty() && role != RoleName::Automation {
                bail!("--grant is for --role automation (admin may do everything already)");
            }
            let mut db = UserDb::load(&path)?;
            if db.get(&name).is_some() {
                bail!("user {name:?} exists; remove it first");
            }
            let (password, generated) = match (password_file, password_stdin) {
                (Some(file), _) => (
                    first_line(
                        &std::fs::read_to_string(&file)
                            .with_context(|| file.display().to_string())?,
                    ),
                    false,
                ),
                (None, true) => {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line)?;
                    (first_line(&line), false)
                }
                (None, false) => (generate_password()?, true),
            };
            let length = password.chars().count();
            if !generated && length < MIN_PASSWORD_LEN {
                bail!(
                    "the password has {length} characters; a chosen password needs at least \
                     {MIN_PASSWORD_LEN} (leave out --password-file and --password-stdin to have a \
                     random one generated and printed)"
                );
            }
            let mut grants = grant;
            grants.dedup();
            db.insert(UserRecord {
                name: name.clone(),
                role,
                companion_id: (role == RoleName::Phone).then(|| companion_id.unwrap_or(name)),
                grants,
                password: hash_password(password.as_bytes())?,
            });
            db.save(&path)?;
            if generated {
                outln!("{password}");
            }
            Ok(())
        }
        MqttUserCommand::Remove { name } => {
            if name == DAEMON_USER {
                bail!("{DAEMON_USER:?} is the daemon's own account; it cannot be removed");
            }
            let mut db = UserDb::load(&path)?;
            if !db.remove(&name) {
                bail!("no user {name:?}");
            }
            db.save(&path)
        }
        MqttUserCommand::List { json } => {
            let db = UserDb::load(&path)?;
            let rows: Vec<serde_json::Value> = db
                .users()
                .map(|u| {
                    serde_json::json!({
                        "name": u.name,
                        "role": u.role,
                        "companion_id": u.companion_id,
                        "grants": u.grants,
                    })
                })
                .collect();
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({ "users": rows }))?
                );
            } else {
                outln!(
                    "{:<24} {:<10} {:<16} GRANTS",
                    "NAME",
                    "ROLE",
                    "COMPANION ID"
                );
                for u in db.users() {
                    let line = format!(
                        "{:<24} {:<10} {:<16} {}",
                        u.name,
                        role_str(u.role),
                        u.companion_id.as_deref().unwrap_or("-"),
                        if u.grants.contains(&Grant::Approve) {
                            "approve"
                        } else {
                            "-"
                        }
                    );
                    outln!("{}", line.trim_end());
                }
            }
            Ok(())
        }
    }
}

fn role_str(role: RoleName) -> &'static str {
    match role {
        RoleName::Admin => "admin",
        RoleName::Automation => "automation",
        RoleName::Phone => "phone",
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    /// `mqtt-user add NAME --role automation --password-file FILE` with
    /// `password` in the file, in a fresh state directory.
    fn add_with_password(password: &str) -> anyhow::Result<()> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, format!("{password}\n")).unwrap();
        run(
            MqttUserCommand::Add {
                name: "ha".into(),
                role: RoleName::Automation,
                companion_id: None,
                grant: Vec::new(),
                password_file: Some(file),
                password_stdin: false,
            },
            &dir.path().join("state"),
        )
    }

    #[test]
    fn a_chosen_password_has_at_least_twelve_characters() {
        for short in ["x", "", "elevenchars"] {
            let refused = add_with_password(short).expect_err(short);
            assert!(
                format!("{refused:#}").contains("at least 12"),
                "{short:?}: {refused:#}"
            );
        }
        add_with_password("twelve chars").expect("12 characters are enough");
        // Characters, not bytes.
        add_with_password("ééééééééééé").expect_err("11 characters");
    }

    #[test]
    fn the_back_off_grows_per_source_and_user_and_a_success_clears_it() {
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let mut t = Throttle::default();
        let start = Instant::now();
        for i in 0..FREE_FAILURES {
            assert_eq!(t.failed(LOCAL, "ha", start), None, "failure {i} is free");
            assert!(!t.blocked(LOCAL, "ha", start));
        }
        assert_eq!(t.failed(LOCAL, "ha", start), Some(Duration::from_secs(1)));
        assert!(t.blocked(LOCAL, "ha", start));
        assert!(!t.blocked(LOCAL, "admin", start), "another user");
        assert!(!t.blocked(other, "ha", start), "another source");
        let later = start + Duration::from_secs(1);
        assert!(!t.blocked(LOCAL, "ha", later), "the back-off ends");
        assert_eq!(t.failed(LOCAL, "ha", later), Some(Duration::from_secs(2)));
        let mut now = later;
        for _ in 0..20 {
            now += Duration::from_secs(1);
            t.failed(LOCAL, "ha", now);
        }
        assert_eq!(t.failed(LOCAL, "ha", now), Some(MAX_BACKOFF));
        t.succeeded(LOCAL, "ha");
        assert!(!t.blocked(LOCAL, "ha", now));
        // Long quiet forgets the count.
        for _ in 0..FREE_FAILURES {
            t.failed(other, "ha", start);
        }
        assert_eq!(t.failed(other, "ha", start + FORGET_FAILURES), None);
    }

    #[tokio::test]
    async fn repeated_failures_are_refused_unchecked_but_known_pairs_get_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(USERS_FILE);
        let mut db = UserDb::default();
        db.insert(UserRecord {
            name: "ha".into(),
            role: RoleName::Automation,
            companion_id: None,
            grants: Vec::new(),
            password: hash_password(b"right password").unwrap(),
        });
        db.save(&path).unwrap();
        let users = Arc::new(Users::open(path).unwrap());
        let login = |pw: &'static [u8]| {
            let users = Arc::clone(&users);
            async move {
                users
                    .login(LOCAL, Some("ha".into()), Some(Bytes::from_static(pw)))
                    .await
                    .0
            }
        };
        // A known pair, verified before the guessing starts.
        assert!(matches!(login(b"right password").await, Login::User(_)));
        for _ in 0..=FREE_FAILURES {
            assert_eq!(login(b"guess").await, Login::BadCredentials);
        }
        assert_eq!(login(b"guess").await, Login::Throttled);
        assert!(matches!(login(b"right password").await, Login::User(_)));
    }

    #[test]
    fn passwords_verify_only_against_their_hash() {
        let stored = hash_password(b"right").unwrap();
        assert!(stored.starts_with("pbkdf2-sha256$100000$"));
        assert!(verify_password(&stored, b"right"));
        assert!(!verify_password(&stored, b"wrong"));
        assert!(!verify_password("pbkdf2-sha256$0$00$00", b"right"));
        assert!(!verify_password("plain", b"plain"));
        // Two hashes of one password differ by their salt.
        assert_ne!(stored, hash_password(b"right").unwrap());
    }

    #[test]
    fn the_file_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let path = state.join(USERS_FILE);
        let mut db = UserDb::default();
        db.insert(UserRecord {
            name: "alice".into(),
            role: RoleName::Phone,
            companion_id: Some("alice-pixel".into()),
            grants: Vec::new(),
            password: hash_password(b"pw").unwrap(),
        });
        db.save(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&state), 0o700);
        let back = UserDb::load(&path).unwrap();
        assert_eq!(back, db);
        let who = back.verify("alice", b"pw").unwrap();
        assert_eq!(
            who.role,
            Role::Phone {
                companion_id: "alice-pixel".into()
            }
        );
        assert!(back.verify("alice", b"nope").is_none());
        assert!(back.verify("bob", b"pw").is_none());
        assert!(
            UserDb::parse(r#"{"users":[{"name":"a/b","role":"admin","password":"x"}]}"#).is_err()
        );
    }

    /// `sudo droidwarden mqtt-user add` writes in the service user's
    /// directory: links that user plants where the temporary file (the old
    /// `.<file>.tmp-<pid>`) or the file goes are never followed, and a
    /// linked or FIFO users file is refused, not read.
    #[test]
    fn the_users_file_is_written_and_read_without_following_planted_links() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("root-owned");
        std::fs::write(&victim, "keep me").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let path = state.join(USERS_FILE);
        let planted = state.join(format!(".{USERS_FILE}.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let mut db = UserDb::default();
        db.insert(UserRecord {
            name: "alice".into(),
            role: RoleName::Automation,
            companion_id: None,
            grants: Vec::new(),
            password: hash_password(b"pw").unwrap(),
        });
        db.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(
            std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(UserDb::load(&path).unwrap(), db);
        // The users file itself a link to another file: replaced on save,
        // refused on load.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(UserDb::load(&path).is_err());
        db.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn the_daemon_account_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (user, password) = ensure_daemon_user(dir.path()).unwrap();
        assert_eq!(user, DAEMON_USER);
        assert_eq!(password.len(), 64);
        let secret = dir.path().join(DAEMON_SECRET_FILE);
        assert_eq!(
            std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (_, again) = ensure_daemon_user(dir.path()).unwrap();
        assert_eq!(again, password);
        let db = UserDb::load(&dir.path().join(USERS_FILE)).unwrap();
        assert_eq!(
            db.verify(DAEMON_USER, password.as_bytes()).unwrap().role,
            Role::Admin
        );
        // A lost secret is replaced, with a new password.
        std::fs::remove_file(&secret).unwrap();
        let (_, replaced) = ensure_daemon_user(dir.path()).unwrap();
        assert_ne!(replaced, password);
    }

    #[tokio::test]
    async fn logins_follow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(USERS_FILE);
        let users = Arc::new(Users::open(path.clone()).unwrap());
        let login = |name: &str, pw: &'static [u8]| {
            let users = Arc::clone(&users);
            let name = name.to_owned();
            async move {
                users
                    .login(LOCAL, Some(name), Some(Bytes::from_static(pw)))
                    .await
            }
        };
        assert_eq!(login("ha", b"pw").await.0, Login::BadCredentials);
        assert_eq!(users.login(LOCAL, None, None).await.0, Login::Anonymous);
        let mut db = UserDb::default();
        db.insert(UserRecord {
            name: "ha".into(),
            role: RoleName::Automation,
            companion_id: None,
            grants: vec![Grant::Approve],
            password: hash_password(b"pw").unwrap(),
        });
        db.save(&path).unwrap();
        let (who, changed) = login("ha", b"pw").await;
        assert!(changed.is_empty());
        let Login::User(who) = who else {
            panic!("{who:?}")
        };
        assert_eq!(who.role, Role::Automation { approve: true });
        // Cached now, and still refused with a wrong password.
        assert!(matches!(login("ha", b"pw").await.0, Login::User(_)));
        assert_eq!(login("ha", b"bad").await.0, Login::BadCredentials);
        db.remove("ha");
        db.save(&path).unwrap();
        let (who, changed) = login("ha", b"pw").await;
        assert_eq!(who, Login::BadCredentials);
        assert_eq!(changed, vec!["ha".to_owned()]);
    }
}
