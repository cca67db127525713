//! Every session's subscriptions as one tree of topic levels, so that a
//! PUBLISH finds the filters that match its topic without looking at the
//! others.
//!
//! A filter `a/+/c` is the path `a` → `+` → `c` from the root; a filter
//! ending in `#` is kept on the node before it (`a/#` on `a`). Matching a
//! topic walks its levels, following at each node the child named like the
//! level and the `+` child, and collects the `#` entries on the way: its
//! cost depends on the topic's depth and on the filters that overlap it,
//! never on how many unrelated filters other clients hold. The state
//! machine ([`crate::state`]) keeps each session's options in the session;
//! this index only says which (client, filter) pairs match.

use std::collections::{HashMap, HashSet};

/// The filters of every session, by topic level.
#[derive(Debug, Default)]
pub(crate) struct FilterIndex {
    root: Node,
}

#[derive(Debug, Default)]
struct Node {
    /// Next levels, `+` included.
    children: HashMap<String, Node>,
    /// Clients with a filter ending at this node.
    here: HashSet<String>,
    /// Clients with a filter `<this node>/#`.
    rest: HashSet<String>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.children.is_empty() && self.here.is_empty() && self.rest.is_empty()
    }
}

impl FilterIndex {
    /// Records that `client` subscribes to the valid `filter`.
    pub(crate) fn insert(&mut self, filter: &str, client: &str) {
        let mut node = &mut self.root;
        let mut levels = filter.split('/').peekable();
        while let Some(level) = levels.next() {
            if level == "#" && levels.peek().is_none() {
                node.rest.insert(client.to_owned());
                return;
            }
            node = node.children.entry(level.to_owned()).or_default();
        }
        node.here.insert(client.to_owned());
    }

    /// Forgets that `client` subscribes to `filter`; nodes left empty go.
    pub(crate) fn remove(&mut self, filter: &str, client: &str) {
        let levels: Vec<&str> = filter.split('/').collect();
        remove(&mut self.root, &levels, client);
    }

    /// Calls `found(client, filter)` for every subscription whose filter
    /// matches the topic `name`. Returns the number of tree nodes visited
    /// (the work done, for tests).
    pub(crate) fn for_each_match(&self, name: &str, mut found: impl FnMut(&str, &str)) -> usize {
        let levels: Vec<&str> = name.split('/').collect();
        let mut path = Vec::with_capacity(levels.len() + 1);
        // Filters that begin with a wildcard do not match `$` topics.
        let dollar = name.starts_with('$');
        walk(&self.root, &levels, &mut path, dollar, &mut found)
    }
}

fn remove(node: &mut Node, levels: &[&str], client: &str) -> bool {
    match levels {
        [] => {
            node.here.remove(client);
        }
        ["#"] => {
            node.rest.remove(client);
        }
        [first, rest @ ..] => {
            if let Some(child) = node.children.get_mut(*first)
                && remove(child, rest, client)
            {
                node.children.remove(*first);
            }
        }
    }
    node.is_empty()
}

fn walk<'a>(
    node: &'a Node,
    levels: &[&'a str],
    path: &mut Vec<&'a str>,
    dollar: bool,
    found: &mut impl FnMut(&str, &str),
) -> usize {
    let mut visited = 1;
    // Wildcards in the first level do not match `$` topics.
    let wildcards = !(path.is_empty() && dollar);
    if wildcards && !node.rest.is_empty() {
        path.push("#");
        let filter = path.join("/");
        path.pop();
        for client in &node.rest {
            found(client.as_str(), &filter);
        }
    }
    let Some((first, rest)) = levels.split_first() else {
        if !node.here.is_empty() {
            let filter = path.join("/");
            for client in &node.here {
                found(client.as_str(), &filter);
            }
        }
        return visited;
    };
    if let Some((key, child)) = node.children.get_key_value(*first) {
        path.push(key);
        visited += walk(child, rest, path, dollar, found);
        path.pop();
    }
    if wildcards && let Some((key, child)) = node.children.get_key_value("+") {
        path.push(key);
        visited += walk(child, rest, path, dollar, found);
        path.pop();
    }
    visited
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic;

    fn pair(client: &str, filter: &str) -> (String, String) {
        (client.to_owned(), filter.to_owned())
    }

    fn matched(index: &FilterIndex, name: &str) -> Vec<(String, String)> {
        let mut all = Vec::new();
        index.for_each_match(name, |client, filter| {
            all.push((client.to_owned(), filter.to_owned()));
        });
        all.sort();
        all
    }

    #[test]
    fn agrees_with_matching_filter_by_filter() {
        let filters = [
            "a/b/c", "a/+/c", "a/+", "+/+", "+", "a/#", "#", "+/b", "$SYS/#", "/a", "a//c",
            "+/+/#", "/", "a/b/c/#",
        ];
        let names = [
            "a/b/c", "a/b", "a/x/c", "a//c", "a/x/c/d", "/x", "a", "a/", "ab", "/", "$x/b",
            "$SYS/a", "b", "a/b/c/d",
        ];
        let mut index = FilterIndex::default();
        for (i, filter) in filters.iter().enumerate() {
            index.insert(filter, &format!("c{i}"));
        }
        for name in names {
            let mut expected: Vec<(String, String)> = filters
                .iter()
                .enumerate()
                .filter(|(_, f)| topic::matches(f, name))
                .map(|(i, f)| (format!("c{i}"), (*f).to_owned()))
                .collect();
            expected.sort();
            assert_eq!(matched(&index, name), expected, "{name}");
        }
        // Removing every filter leaves nothing behind.
        for (i, filter) in filters.iter().enumerate() {
            index.remove(filter, &format!("c{i}"));
        }
        assert!(index.root.is_empty());
    }

    #[test]
    fn removing_one_client_keeps_the_others() {
        let mut index = FilterIndex::default();
        index.insert("a/#", "one");
        index.insert("a/#", "two");
        index.insert("a/b", "one");
        index.remove("a/#", "one");
        assert_eq!(
            matched(&index, "a/b"),
            [pair("one", "a/b"), pair("two", "a/#")]
        );
        index.remove("a/x", "one");
        index.remove("a/b", "one");
        assert_eq!(matched(&index, "a/b"), [pair("two", "a/#")]);
    }

    /// The load: 200 000 subscriptions of one client on unrelated
    /// topics cost a publish on another topic nothing more.
    #[test]
    fn matching_cost_does_not_depend_on_unrelated_subscriptions() {
        let mut index = FilterIndex::default();
        index.insert("droidwarden/cmd/#", "daemon");
        index.insert("droidwarden/+/call", "daemon");
        let visited = |index: &FilterIndex| index.for_each_match("droidwarden/cmd/call", |_, _| {});
        let alone = visited(&index);
        for i in 0..200_000 {
            index.insert(&format!("flood/{i}/+/x"), "flood");
            index.insert(&format!("droidwarden/devices/{i}"), "flood");
        }
        assert_eq!(visited(&index), alone);
        assert_eq!(
            matched(&index, "droidwarden/cmd/call"),
            [
                pair("daemon", "droidwarden/+/call"),
                pair("daemon", "droidwarden/cmd/#")
            ]
        );
    }
}
