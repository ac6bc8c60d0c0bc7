//! Keys typed into `top`, from the bytes a terminal in raw mode sends. `top` reads the
//! terminal itself (a non-blocking read of what is there) rather than through a
//! terminal library's event reader: on a terminal that hung up, a read returns nothing
//! forever, and such a reader spun on it without end (the recorder's end waited on it).

/// What the terminal on standard input sent since the last call, without waiting; None
/// once it hung up (ssh dropped, tmux killed).
pub fn read_terminal() -> std::io::Result<Option<Vec<u8>>> {
    crate::sys::read_available(0)
}

/// What a key asks of `top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `q`, Esc or Ctrl-C.
    Quit,
    /// `s`: sort by self or total time.
    Sort,
    /// `t`: functions or threads.
    View,
    /// `p` or space: pause.
    Pause,
}

/// The keys in `bytes`. Escape sequences (arrows, function keys, a terminal's replies)
/// are skipped; an Esc that starts none (the last byte, or one followed by another
/// Esc) is the Esc key.
pub fn parse_keys(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            0x1b => match bytes.get(i) {
                // CSI (ESC [) and SS3 (ESC O) sequences end at a byte in 0x40..=0x7e.
                Some(b'[') | Some(b'O') => {
                    let csi = bytes[i] == b'[';
                    i += 1;
                    if csi {
                        while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                            i += 1;
                        }
                    }
                    i += 1;
                }
                // Alt+key: skip the key.
                Some(&next) if next != 0x1b => i += 1,
                _ => keys.push(Key::Quit),
            },
            b'q' | b'Q' | 0x03 => keys.push(Key::Quit),
            b's' | b'S' => keys.push(Key::Sort),
            b't' | b'T' => keys.push(Key::View),
            b'p' | b'P' | b' ' => keys.push(Key::Pause),
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_sequences() {
        assert_eq!(parse_keys(b"q"), [Key::Quit]);
        assert_eq!(parse_keys(b"\x03"), [Key::Quit]);
        assert_eq!(parse_keys(b"\x1b"), [Key::Quit]);
        assert_eq!(parse_keys(b"\x1b\x1b"), [Key::Quit, Key::Quit]);
        assert_eq!(
            parse_keys(b"stp "),
            [Key::Sort, Key::View, Key::Pause, Key::Pause]
        );
        // Arrows, a function key, a cursor report, Alt+q: none is a key of top's.
        assert_eq!(
            parse_keys(b"\x1b[A\x1b[B\x1bOP\x1b[15~\x1b[12;40R\x1bq"),
            []
        );
        assert_eq!(parse_keys(b"\x1b[Ds"), [Key::Sort]);
        // A sequence cut at the end of what was read is dropped, not taken for Esc.
        assert_eq!(parse_keys(b"\x1b[1;"), []);
        assert_eq!(parse_keys(b"xyz"), []);
    }
}
