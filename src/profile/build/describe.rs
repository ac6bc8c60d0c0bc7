//! Each recording frame's display functions: its symbols' lines (inlined frames
//! expanded), or for an unnamed frame `module+0xoffset`, `[kernel]+0x…` or a marker.

use super::Builder;
use crate::format::{FrameKind, FrameSymbols, SymbolSource, Truncation};
use crate::profile::{FrameClass, Function};

impl Builder<'_> {
    /// The display functions of one recording frame, outermost first, each with its
    /// source line when the symbols gave one.
    pub(super) fn describe(&self, id: u32) -> Vec<(Function, Option<u32>)> {
        let named = self.describe_names(id);
        match self.rec.symbols.get(id as usize) {
            Some(Some(FrameSymbols { lines, .. })) if lines.len() == named.len() => named
                .into_iter()
                .zip(lines.iter().rev())
                .map(|(f, l)| (f, l.line))
                .collect(),
            _ => named.into_iter().map(|f| (f, None)).collect(),
        }
    }

    /// The display functions of one recording frame, outermost first.
    fn describe_names(&self, id: u32) -> Vec<Function> {
        let frame = self.rec.frames[id as usize];
        let plain = |name: String, class| Function {
            name,
            class,
            file: None,
            line: None,
        };
        if frame.kind == FrameKind::Truncated {
            let label = Truncation::from_code(frame.addr).map_or("[truncated]", Truncation::label);
            return vec![plain(label.to_owned(), FrameClass::Marker)];
        }
        if let Some(Some(FrameSymbols { source, lines, .. })) = self.rec.symbols.get(id as usize)
            && !lines.is_empty()
        {
            return self.named(*source, lines);
        }
        if frame.kind == FrameKind::Kernel {
            return vec![plain(
                format!("[kernel]+0x{:x}", frame.addr),
                FrameClass::Kernel,
            )];
        }
        self.unnamed(&frame)
    }

    /// A named frame's functions, outermost first: each line of its symbols, of the
    /// class its source and inlining give.
    fn named(&self, source: SymbolSource, lines: &[crate::format::SymbolLine]) -> Vec<Function> {
        lines
            .iter()
            .rev()
            .map(|l| {
                let class = match source {
                    SymbolSource::Kernel => FrameClass::Kernel,
                    SymbolSource::Python => FrameClass::Python,
                    SymbolSource::Native | SymbolSource::Jit if l.inlined => FrameClass::Inlined,
                    SymbolSource::Jit => FrameClass::Jit,
                    SymbolSource::JavaInterpreted => FrameClass::Interpreted,
                    SymbolSource::Native => FrameClass::Native,
                };
                let (name, line) = match (self.opts.lines, l.line) {
                    (true, Some(n)) => (format!("{}:{n}", l.function), Some(n)),
                    _ => (l.function.clone(), None),
                };
                Function {
                    name,
                    class,
                    file: l.file.clone(),
                    line,
                }
            })
            .collect()
    }

    /// An unnamed user frame: `module+0xoffset` in its mapping (JIT code in an
    /// anonymous one), or a marked frame when the mapping is unknown or does not
    /// hold it.
    fn unnamed(&self, frame: &crate::format::Frame) -> Vec<Function> {
        let plain = |name: String, class| Function {
            name,
            class,
            file: None,
            line: None,
        };
        match frame
            .mapping
            .and_then(|m| self.rec.mappings.get(m as usize))
        {
            Some(m) => {
                let module = m
                    .path
                    .rsplit('/')
                    .next()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("[anon]");
                // A hostile file may put the address outside its mapping.
                let Some(offset) = frame
                    .addr
                    .checked_sub(m.start)
                    .and_then(|o| o.checked_add(m.file_offset))
                else {
                    return vec![plain(
                        format!("[{module}: 0x{:x} outside the mapping]", frame.addr),
                        FrameClass::Native,
                    )];
                };
                let class = if m.path.is_empty()
                    || m.path.starts_with("//anon")
                    || m.path.starts_with("[anon")
                {
                    FrameClass::Jit
                } else {
                    FrameClass::Native
                };
                vec![plain(format!("{module}+0x{offset:x}"), class)]
            }
            None => vec![plain("[unknown]".to_owned(), FrameClass::Native)],
        }
    }
}
