//! Topic names, topic filters and matching one against the other, as MQTT
//! 3.1.1 §4.7 and MQTT 5 §4.7 define them (the rules are the same).

/// Why a topic name or filter was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// Empty names and filters are not allowed.
    #[error("empty topic")]
    Empty,
    /// A topic name (as opposed to a filter) contains `+` or `#`.
    #[error("wildcard in a topic name")]
    WildcardInName,
    /// `+` or `#` is not a whole level, or `#` is not the last level.
    #[error("misplaced wildcard in a topic filter")]
    MisplacedWildcard,
}

/// Checks a topic name, as used in PUBLISH.
///
/// ```
/// use droidwarden_broker::topic::validate_name;
/// assert!(validate_name("home/kitchen/volume").is_ok());
/// assert!(validate_name("home/+/volume").is_err());
/// ```
///
/// # Errors
///
/// [`TopicError::Empty`] or [`TopicError::WildcardInName`].
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    if name.is_empty() {
        Err(TopicError::Empty)
    } else if name.contains(['+', '#']) {
        Err(TopicError::WildcardInName)
    } else {
        Ok(())
    }
}

/// Checks a topic filter, as used in SUBSCRIBE and UNSUBSCRIBE.
///
/// ```
/// use droidwarden_broker::topic::validate_filter;
/// assert!(validate_filter("home/+/volume/#").is_ok());
/// assert!(validate_filter("home/kit+chen").is_err());
/// ```
///
/// # Errors
///
/// [`TopicError::Empty`] or [`TopicError::MisplacedWildcard`].
pub fn validate_filter(filter: &str) -> Result<(), TopicError> {
    if filter.is_empty() {
        return Err(TopicError::Empty);
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        let is_last = levels.peek().is_none();
        match level {
            "+" => {}
            "#" if is_last => {}
            _ if level.contains(['+', '#']) => return Err(TopicError::MisplacedWildcard),
            _ => {}
        }
    }
    Ok(())
}

/// Whether a valid `filter` matches a valid topic `name`.
///
/// Filters that begin with a wildcard do not match names that begin with
/// `$` (such as `$SYS/...`), as both specifications require.
///
/// ```
/// use droidwarden_broker::topic::matches;
/// assert!(matches("home/+/volume", "home/kitchen/volume"));
/// assert!(matches("home/#", "home"));
/// assert!(!matches("#", "$SYS/uptime"));
/// ```
#[must_use]
pub fn matches(filter: &str, name: &str) -> bool {
    if name.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut names = name.split('/');
    for level in filter.split('/') {
        match (level, names.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (l, Some(n)) if l == n => {}
            _ => return false,
        }
    }
    names.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(filter: &str, name: &str, expected: bool) {
        assert_eq!(matches(filter, name), expected, "{filter} vs {name}");
    }

    #[test]
    fn matching_table() {
        check("a/b/c", "a/b/c", true);
        check("a/b/c", "a/b", false);
        check("a/b", "a/b/c", false);
        check("a/+/c", "a/x/c", true);
        check("a/+/c", "a//c", true);
        check("a/+", "a/x/c", false);
        check("+/+", "/x", true);
        check("+", "/x", false);
        check("a/#", "a", true);
        check("a/#", "a/", true);
        check("a/#", "a/b/c", true);
        check("a/#", "ab", false);
        check("#", "a/b", true);
        check("#", "/", true);
        check("+/b", "$x/b", false);
        check("#", "$SYS/a", false);
        check("$SYS/#", "$SYS/a", true);
        check("/a", "a", false);
    }

    #[test]
    fn filter_validation_table() {
        for good in ["#", "+", "a/#", "+/+/#", "/", "a//b", "$SYS/#", "a/+/b"] {
            assert_eq!(validate_filter(good), Ok(()), "{good}");
        }
        for bad in ["", "a#", "a/#/b", "a+/b", "a/b+", "##", "#/"] {
            assert!(validate_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn name_validation_table() {
        assert_eq!(validate_name("a/b"), Ok(()));
        assert_eq!(validate_name("/"), Ok(()));
        assert_eq!(validate_name(""), Err(TopicError::Empty));
        assert_eq!(validate_name("a/+"), Err(TopicError::WildcardInName));
        assert_eq!(validate_name("a#"), Err(TopicError::WildcardInName));
    }
}
