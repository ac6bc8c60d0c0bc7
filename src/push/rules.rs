//! The rule file of `record -a --push` (`--push-rules FILE`): which service name a
//! process's samples are pushed under, by its systemd unit, container, pod,
//! executable or cgroup path. One rule a line, the first that matches wins:
//!
//! ```text
//! # KIND     PATTERN                  SERVICE
//! unit       nginx.service            web
//! unit       getty@*.service          getty
//! container  3f2a9c*                  shop-api
//! pod        1b4e2f3a-*               shop-api
//! exe        /usr/bin/python3*        batch
//! exe        java                     jvm-apps
//! cgroup     /system.slice/ci/*       ci
//! ```
//!
//! A pattern is matched whole, `*` standing for any run of characters; an `exe`
//! pattern without `/` matches the executable's file name, one with `/` its path.
//! Blank lines and `#` comments are skipped; a line that does not parse is an error
//! naming its line, and the file is refused whole (on a reload, the rules in use are
//! kept). Pure: [`Rules::parse`] takes the text.

use crate::workload::Workload;

/// What a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// The systemd unit (`nginx.service`).
    Unit,
    /// The container id (64 hex digits; a prefix pattern such as `3f2a*`).
    Container,
    /// The Kubernetes pod uid.
    Pod,
    /// The executable: its path, or its file name when the pattern has no `/`.
    Exe,
    /// The cgroup path.
    Cgroup,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What it looks at.
    pub kind: RuleKind,
    /// The pattern (`*` for any run of characters).
    pub pattern: String,
    /// The service name given to what matches.
    pub service: String,
}

/// Why a rule file gave no rules.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// A line that is not a rule, and why.
    #[error("line {line}: {why}")]
    Line {
        /// Its number, from 1.
        line: usize,
        /// Why it is not a rule.
        why: String,
    },
    /// The file could not be read.
    #[error("--push-rules {}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds a line that is not a rule.
    #[error("--push-rules {}, {source}", path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// The line that is not a rule.
        source: Box<RulesError>,
    },
}

/// The rules of a file, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The rules; the first that matches wins.
    pub rules: Vec<Rule>,
}

impl Rules {
    /// Parses a rule file's text; the error names the line.
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        let mut rules = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: String| RulesError::Line { line: n + 1, why };
            let f: Vec<&str> = line.split_whitespace().collect();
            let [kind, pattern, service] = f[..] else {
                return Err(bad(format!(
                    "expected KIND PATTERN SERVICE, found {} field{}",
                    f.len(),
                    if f.len() == 1 { "" } else { "s" }
                )));
            };
            let kind = match kind {
                "unit" => RuleKind::Unit,
                "container" => RuleKind::Container,
                "pod" => RuleKind::Pod,
                "exe" => RuleKind::Exe,
                "cgroup" => RuleKind::Cgroup,
                k => {
                    return Err(bad(format!(
                        "`{}` is not a kind (unit, container, pod, exe, cgroup)",
                        crate::text::terminal_line(k)
                    )));
                }
            };
            super::check_app(service)
                .map_err(|e| bad(crate::text::terminal_line(&e.to_string()).into()))?;
            rules.push(Rule {
                kind,
                pattern: pattern.to_owned(),
                service: service.to_owned(),
            });
        }
        Ok(rules.into())
    }

    /// Reads and parses a rule file.
    pub fn read(path: &std::path::Path) -> Result<Rules, RulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
            path: path.to_owned(),
            source,
        })?;
        Rules::parse(&text).map_err(|e| RulesError::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// The service the first matching rule gives `w`, if any.
    pub fn service(&self, w: &Workload) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.matches(w))
            .map(|r| r.service.as_str())
    }
}

impl From<Vec<Rule>> for Rules {
    fn from(rules: Vec<Rule>) -> Rules {
        Rules { rules }
    }
}

impl Rule {
    fn matches(&self, w: &Workload) -> bool {
        let p = self.pattern.as_str();
        match self.kind {
            RuleKind::Unit => w.unit.as_deref().is_some_and(|u| glob(p, u)),
            RuleKind::Container => w.container_id.as_deref().is_some_and(|c| glob(p, c)),
            RuleKind::Pod => w.pod_uid.as_deref().is_some_and(|u| glob(p, u)),
            RuleKind::Cgroup => glob(p, &w.cgroup),
            RuleKind::Exe if w.exe.is_empty() => false,
            RuleKind::Exe if p.contains('/') => glob(p, &w.exe),
            RuleKind::Exe => glob(p, w.exe.rsplit('/').next().unwrap_or("")),
        }
    }
}

/// Whether `text` matches `pattern` whole, `*` matching any run of characters.
/// Linear in practice: each `*` commits to the leftmost match of the next piece.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_whole_text() {
        assert!(glob("nginx.service", "nginx.service"));
        assert!(!glob("nginx", "nginx.service"));
        assert!(glob("getty@*.service", "getty@tty1.service"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXbY"));
        assert!(glob("ab*b", "abb"));
        assert!(!glob("ab*ab", "ab"));
        assert!(glob("3f2a*", "3f2a9c"));
    }

    #[test]
    fn first_matching_rule_wins_by_kind() {
        let r = Rules::parse(
            "# comment\n\nunit nginx.service web  # trailing\nexe python3* py\nexe /opt/*/bin/app opt-app\n\
             container 3f2a* shop\npod 1b4e* podded\ncgroup /ci/* ci\nunit *.service other\n",
        )
        .unwrap();
        assert_eq!(r.rules.len(), 7);
        let w = |cg: &str, exe: &str| Workload::new(cg, exe, false);
        assert_eq!(
            r.service(&w("/system.slice/nginx.service", "/usr/sbin/nginx")),
            Some("web")
        );
        assert_eq!(r.service(&w("/", "/usr/bin/python3.12")), Some("py"));
        assert_eq!(r.service(&w("/", "/opt/x/bin/app")), Some("opt-app"));
        assert_eq!(r.service(&w("/", "/usr/bin/app")), None);
        let id = "3f2a9c0d1e4b5a6978877665544332211ffeeddccbbaa9988776655443322110";
        assert_eq!(
            r.service(&w(&format!("/docker/{id}"), "/app")),
            Some("shop")
        );
        assert_eq!(r.service(&w("/ci/job-1", "/bin/cc")), Some("ci"));
        assert_eq!(
            r.service(&w("/system.slice/cron.service", "/usr/sbin/cron")),
            Some("other")
        );
        assert_eq!(r.service(&w("/", "")), None);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = Rules::parse("unit a.service web\nunit b.service\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 2: expected KIND PATTERN SERVICE"),
            "{e}"
        );
        let e = Rules::parse("proc x y\n").unwrap_err().to_string();
        assert!(e.contains("line 1: `proc` is not a kind"), "{e}");
        let e = Rules::parse("unit x we{b}\n").unwrap_err().to_string();
        assert!(e.contains("line 1:") && e.contains("not allowed"), "{e}");
        assert_eq!(Rules::parse("").unwrap(), Rules::default());
    }
}
