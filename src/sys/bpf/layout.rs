//! The layouts the capture program shares with the recorder, each defined once: a
//! registered thread's entry in the `threads` map (written by the recorder, read by
//! the program), the record the program writes (read back by `parse_capture`), and
//! the program's own stack slots. The program's loads and stores and the recorder's
//! encoding and parsing take every offset and size from here.

use super::asm::Size;

/// Frames copied at most per sample.
pub(crate) const MAX_FRAMES: usize = 128;
/// Bytes copied of each frame, at most (the interpreter's reader sets the same bound,
/// which the recorder checks).
pub(crate) const COPY: usize = 88;

/// A field of a fixed layout: where it is and how wide.
pub(super) trait Field: Copy {
    /// Its offset from the layout's start.
    fn at(self) -> i16;
    /// Its width.
    fn size(self) -> Size;

    /// Writes `v` (little-endian, cut to the width) into `buf`.
    fn put(self, buf: &mut [u8], v: u64) {
        let at = self.at() as usize;
        match self.size() {
            Size::W => buf[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes()),
            Size::Dw => buf[at..at + 8].copy_from_slice(&v.to_le_bytes()),
        }
    }

    /// Reads the field from `buf`; None when `buf` is too short.
    fn get(self, buf: &[u8]) -> Option<u64> {
        let at = self.at() as usize;
        Some(match self.size() {
            Size::W => u64::from(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?)),
            Size::Dw => u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?),
        })
    }
}

/// A registered thread's value in the `threads` map ([`ENTRY`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    /// The thread state's address (u64).
    Tstate,
    /// The offset there of the pointer read first (u32).
    First,
    /// The offset of the innermost frame's pointer in what the first points to (u32).
    Second,
    /// The caller's frame pointer's offset in the bytes copied of a frame (u32).
    Previous,
    /// Whether there is a second pointer to follow (u32, 0 or 1).
    HasSecond,
    /// Where in a frame the bytes copied start (u32).
    Skip,
    /// How many bytes of a frame are copied (u32, at most [`COPY`]).
    Len,
}

/// The size of a [`Entry`] value.
pub(super) const ENTRY: usize = 32;

impl Field for Entry {
    fn at(self) -> i16 {
        match self {
            Entry::Tstate => 0,
            Entry::First => 8,
            Entry::Second => 12,
            Entry::Previous => 16,
            Entry::HasSecond => 20,
            Entry::Skip => 24,
            Entry::Len => 28,
        }
    }

    fn size(self) -> Size {
        match self {
            Entry::Tstate => Size::Dw,
            _ => Size::W,
        }
    }
}

/// The header of a capture record, before the frames' slots ([`HEADER`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Header {
    /// The thread's id (u32).
    Tid,
    /// How many slots follow (u32).
    Frames,
    /// The thread state's address (u64).
    Tstate,
    /// The pointer read first from the thread state (u64, 0: not read).
    First,
    /// The pointer read from what the first points to (u64, 0: none or not read).
    Second,
}

/// The size of a record's [`Header`].
pub(crate) const HEADER: usize = 32;

impl Field for Header {
    fn at(self) -> i16 {
        match self {
            Header::Tid => 0,
            Header::Frames => 4,
            Header::Tstate => 8,
            Header::First => 16,
            Header::Second => 24,
        }
    }

    fn size(self) -> Size {
        match self {
            Header::Tid | Header::Frames => Size::W,
            _ => Size::Dw,
        }
    }
}

/// A frame's slot in a record, after the header: its address (u64), then the bytes
/// copied of it, at [`SLOT_BYTES`].
pub(crate) const SLOT: usize = 8 + COPY;
/// Where in a slot the frame's bytes start.
pub(super) const SLOT_BYTES: usize = 8;

/// The program's stack slots, below r10: the sampled thread's id (the maps' key, set
/// by the filter's part), the scratch map's key, the program's context, and the
/// caller's offset in the bytes copied of a frame.
pub(super) mod stack {
    pub(in super::super) const TID: i16 = -4;
    pub(in super::super) const SCRATCH_KEY: i16 = -8;
    pub(in super::super) const CTX: i16 = -16;
    pub(in super::super) const PREVIOUS: i16 = -24;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fill_their_layouts_without_overlap() {
        let entry = [
            Entry::Tstate,
            Entry::First,
            Entry::Second,
            Entry::Previous,
            Entry::HasSecond,
            Entry::Skip,
            Entry::Len,
        ];
        let header = [
            Header::Tid,
            Header::Frames,
            Header::Tstate,
            Header::First,
            Header::Second,
        ];
        fn check<F: Field>(fields: &[F], size: usize) {
            let mut used = vec![false; size];
            for f in fields {
                let width = if f.size() == Size::W { 4 } else { 8 };
                assert_eq!(f.at() as usize % width, 0, "aligned");
                for b in &mut used[f.at() as usize..f.at() as usize + width] {
                    assert!(!*b, "overlap");
                    *b = true;
                }
            }
            assert!(used.iter().all(|&b| b), "every byte a field's");
        }
        check(&entry, ENTRY);
        check(&header, HEADER);
        let mut v = [0u8; ENTRY];
        Entry::Len.put(&mut v, 72);
        assert_eq!(Entry::Len.get(&v), Some(72));
        assert_eq!(Entry::Len.get(&v[..30]), None);
    }
}
