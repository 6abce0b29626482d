//! The globs the authorization policy matches names with.

use serde::Deserialize;

/// A glob over names: `*` matches any run of characters (none included); everything else
/// matches itself.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Glob(String);

impl Glob {
    /// `*`: any name.
    pub(super) fn any_name() -> Self {
        Glob("*".to_owned())
    }

    /// True if `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        glob_match(self.0.as_bytes(), text.as_bytes())
    }
}

fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative matching with one backtrack point (the last `*`): linear in practice.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if Some(c) == text.get(t) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|c| *c == b'*')
}

/// True if any of `globs` matches `text`.
pub(super) fn any(globs: &[Glob], text: &str) -> bool {
    globs.iter().any(|g| g.matches(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let g = |p: &str, t: &str| Glob(p.to_owned()).matches(t);
        assert!(g("*", ""));
        assert!(g("*", "anything"));
        assert!(g("team-*", "team-a"));
        assert!(g("team-*", "team-"));
        assert!(!g("team-*", "team"));
        assert!(g("*-prod", "a-prod"));
        assert!(g("a*b*c", "aXXbYYc"));
        assert!(!g("a*b*c", "aXXbYY"));
        assert!(g("exact", "exact"));
        assert!(!g("exact", "exactly"));
        assert!(g("**", "x"));
    }
}
