//! Text that other users control, made safe for the place it is shown.
//!
//! `profile` runs as root next to processes of other users, and shows text they wrote:
//! thread names (`prctl(PR_SET_NAME)`), command lines, paths, symbol and perf-map names,
//! a JVM's attach reply, a push server's error body. Each kind of destination has its
//! own hazards, and one function each:
//! - [`terminal`]: escape sequences set the window title, clear the screen or rewrite
//!   lines; every control character (C0, DEL, C1) and every bidirectional override is
//!   written as a visible escape (`\e`, `\x07`, `\u{202e}`), and the text is cut to a
//!   length (with `…`) so that a 64 KiB reply cannot flood a log line.
//! - [`xml`]: an SVG must stay well-formed XML 1.0, where C0 controls other than TAB, LF
//!   and CR cannot appear even as character references, nor U+FFFE/U+FFFF; those are
//!   written as visible escapes and `& < > " '` as entities.
//! - [`xml_chars`]: the same character rules for text that a library escapes for markup
//!   itself (inferno escapes `& < >` but passes control characters through).
//!
//! JSON needs nothing from here: serde_json escapes every control character.

use std::borrow::Cow;
use std::fmt::Write;

/// Length to which [`terminal_line`] cuts text from outside, in characters.
pub const TERMINAL_MAX: usize = 200;

/// Whether `c` must not reach a terminal as itself: C0 controls (TAB included: it
/// moves the cursor), DEL, C1 controls (0x9b is a one-byte CSI), and the Unicode
/// bidirectional controls that reorder what a reader sees ("Trojan Source").
fn terminal_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` cannot appear in XML 1.0 at all (not even as `&#N;`), or is a C1 or DEL
/// control that XML allows but that a viewer would show as garbage or act on.
fn xml_unsafe(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}')
}

/// The visible form of a character that may not be shown as itself.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` for a terminal: control and bidirectional characters escaped, cut to `max`
/// characters (the escapes count as what they replace) with `…` when longer. Borrowed
/// when nothing had to change.
pub fn terminal(s: &str, max: usize) -> Cow<'_, str> {
    let count = s.chars().count();
    if count <= max && !s.chars().any(terminal_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)) + 8);
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if terminal_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`terminal`] with the usual cut, [`TERMINAL_MAX`] characters: for names, paths and
/// replies embedded in a message.
pub fn terminal_line(s: &str) -> Cow<'_, str> {
    terminal(s, TERMINAL_MAX)
}

/// Length to which [`terminal_message`] cuts each line of a message, in characters:
/// room for the longest hint `profile` writes itself.
pub const MESSAGE_LINE_MAX: usize = 1000;

/// A whole message for a terminal (an error chain, a warning, a note), which may embed
/// text from outside: kept as lines (its own line breaks are `profile`'s), each line's
/// control characters escaped and cut at [`MESSAGE_LINE_MAX`] characters. The last
/// stop for text that was not made safe where it was embedded.
pub fn terminal_message(s: &str) -> Cow<'_, str> {
    if !s
        .split('\n')
        .any(|l| l.chars().count() > MESSAGE_LINE_MAX || l.chars().any(terminal_unsafe))
    {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<'_, str>> = s
        .split('\n')
        .map(|l| terminal(l, MESSAGE_LINE_MAX))
        .collect();
    Cow::Owned(lines.join("\n"))
}

/// Length to which [`terminal_symbol`] cuts a symbol name, in characters: longer than
/// any line cut, as C++ and Rust names of generic code often pass 200 characters.
pub const SYMBOL_MAX: usize = 2000;

/// [`terminal`] for a function or frame name: cut at [`SYMBOL_MAX`] characters, so a
/// perf-map or ELF symbol name of megabytes cannot flood the terminal.
pub fn terminal_symbol(s: &str) -> Cow<'_, str> {
    terminal(s, SYMBOL_MAX)
}

/// `s` with the characters XML cannot hold written as visible escapes; markup
/// characters left as they are, for a writer that escapes them itself.
pub fn xml_chars(s: &str) -> Cow<'_, str> {
    if !s.chars().any(xml_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if xml_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` for XML text or an attribute value: [`xml_chars`], and `& < > " '` as entities.
pub fn xml(s: &str) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| xml_unsafe(c) || matches!(c, '&' | '<' | '>' | '"' | '\''))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if xml_unsafe(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `1 thread`, `2 threads`: a count with the noun in the form it takes.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Processes in words by name, the most frequent first: `postgres ×5, bash`.
pub fn by_name(processes: &[(u32, String)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, name) in processes {
        match counts.iter_mut().find(|(n, _)| *n == name.as_str()) {
            Some(c) => c.1 += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    const SHOWN: usize = 4;
    let mut parts: Vec<String> = counts
        .iter()
        .take(SHOWN)
        .map(|&(n, k)| {
            let n = terminal_line(n);
            if k == 1 {
                n.into_owned()
            } else {
                format!("{n} ×{k}")
            }
        })
        .collect();
    if counts.len() > SHOWN {
        parts.push(format!("{} more", counts.len() - SHOWN));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(
            terminal_line("worker-1 (app.py:40)"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(xml("main;work"), Cow::Borrowed(_)));
        assert!(matches!(xml_chars("a<b>&c"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_escapes_every_control() {
        let hostile = "x\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}gpj.exe\u{7f}\ty\n";
        let out = terminal_line(hostile);
        assert!(!out.chars().any(terminal_unsafe), "{out}");
        assert_eq!(
            out,
            "x\\e]0;owned\\x07\\e[2J\\r\\x9b31m\\u{202e}gpj.exe\\x7f\\ty\\n"
        );
    }

    #[test]
    fn terminal_cuts_long_text() {
        let long = "a".repeat(70_000);
        let out = terminal(&long, 200);
        assert_eq!(out.chars().count(), 201);
        assert!(out.ends_with('…'));
        assert_eq!(terminal("abc", 3), "abc");
        assert_eq!(terminal("abcd", 3), "abc…");
    }

    #[test]
    fn xml_leaves_only_characters_xml_allows() {
        let hostile = "t\u{0}\u{1b}[31m\u{7}<b>&\"'\u{fffe}\u{85}\tok\n";
        let out = xml(hostile);
        assert_eq!(
            out,
            "t\\x00\\e[31m\\x07&lt;b&gt;&amp;&quot;&apos;\\u{fffe}\\x85\tok\n"
        );
        let chars = xml_chars(hostile);
        assert!(chars.contains("<b>&"));
        assert!(!chars.chars().any(xml_unsafe));
    }

    #[test]
    fn messages_keep_their_lines() {
        let m = "cannot read /tmp/\u{1b}[2Jx: denied\nhint: run as root";
        assert_eq!(
            terminal_message(m),
            "cannot read /tmp/\\e[2Jx: denied\nhint: run as root"
        );
        assert!(matches!(terminal_message("a\nb"), Cow::Borrowed(_)));
        let long = format!("{}\nok", "x".repeat(5000));
        let out = terminal_message(&long);
        assert!(out.ends_with("…\nok"));
        assert_eq!(
            terminal_symbol(&"y".repeat(9000)).chars().count(),
            SYMBOL_MAX + 1
        );
    }

    #[test]
    fn multibyte_text_survives() {
        assert_eq!(terminal_line("日本語スレッド"), "日本語スレッド");
        assert_eq!(xml("Ünïcødé"), "Ünïcødé");
        assert_eq!(terminal("日本語", 2), "日本…");
    }
}
