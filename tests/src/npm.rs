//! MCP programs from npm that the end-to-end tests drive: the reference
//! server `@modelcontextprotocol/server-everything` and the MCP Inspector
//! CLI. Their pinned versions are in `tests/npm/package.json` (and every
//! dependency's in `package-lock.json`);
//! `scripts/test` installs them into `target/npm` (or wherever
//! `DROIDWARDEN_NPM_DIR` points).

use std::path::PathBuf;

/// The directory holding `node_modules` (`target/npm` by default).
pub fn npm_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DROIDWARDEN_NPM_DIR") {
        return PathBuf::from(dir);
    }
    let mut dir = crate::bin_dir();
    // target/debug → target
    dir.pop();
    dir.join("npm")
}

/// Path of an installed npm program (`node_modules/.bin/<name>`).
///
/// # Panics
/// When it is not installed: the message says how to install it. Tests
/// that need npm fail rather than skip.
pub fn npm_bin(name: &str) -> PathBuf {
    let path = npm_dir().join("node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: install the tests' npm packages (scripts/test does it: \
         node and npm, then `npm ci --prefix target/npm` with tests/npm/package*.json)",
        path.display()
    );
    path
}
