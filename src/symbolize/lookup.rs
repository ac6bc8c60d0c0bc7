//! Naming one module's addresses from what was parsed of it: DWARF first (the
//! function, the inline chain and file:line), then a Go module's own table
//! ([`crate::elf::gopclntab`]) when it has no DWARF, then its symbol tables; names
//! demangled once each.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{SymbolLine, SymbolizerStats, demangle, dwarf, elf_syms, plain_frame};
use crate::elf::gopclntab::GoTable;

/// Names `svmas` of one module from its `dwarf`, its Go table `go` where DWARF
/// knows nothing, and its `symbols`, nothing outside `code` (when known); counts what
/// it found in `stats`. A panic of the DWARF parser (broken DWARF) drops `dwarf` and
/// names every address from the Go table and symbols alone.
pub(super) fn name_addresses<R: gimli::Reader<Offset = usize>>(
    svmas: &[u64],
    code: &[(u64, u64)],
    symbols: &elf_syms::SymbolTable<'_>,
    go: Option<&GoTable>,
    dwarf: &mut Option<dwarf::Dwarf<R>>,
    stats: &mut SymbolizerStats,
) -> Vec<Vec<SymbolLine>> {
    let is_code = |svma: u64| code.is_empty() || code.iter().any(|&(a, b)| (a..b).contains(&svma));
    let mut order: Vec<usize> = (0..svmas.len()).collect();
    order.sort_by_key(|&i| svmas[i]);
    let mut out = vec![Vec::new(); svmas.len()];
    let mut names = Names::default();

    let dwarf_ok = catch_unwind(AssertUnwindSafe(|| {
        let mut prev: Option<usize> = None;
        for &i in &order {
            if let Some(p) = prev.filter(|&p| svmas[p] == svmas[i]) {
                out[i] = out[p].clone();
                continue;
            }
            if !is_code(svmas[i]) {
                continue;
            }
            let frames = dwarf
                .as_mut()
                .map(|d| d.frames(svmas[i]))
                .unwrap_or_default();
            if frames.is_empty()
                && let Some(named) = go_frames(go, svmas[i], stats)
            {
                out[i] = named;
                prev = Some(i);
                continue;
            }
            let symbol = if frames.is_empty() {
                symbols.lookup(svmas[i])
            } else {
                symbols
                    .lookup(svmas[i])
                    .or_else(|| symbols.lookup_nearest(svmas[i]))
            };
            out[i] = combine(frames, symbol, &mut names);
            prev = Some(i);
        }
    }));
    if dwarf_ok.is_err() {
        // Broken DWARF made a parser panic: symbols alone, for every address.
        stats.dwarf_panics += 1;
        *dwarf = None;
        for (i, &svma) in svmas.iter().enumerate() {
            if let Some(named) = go_frames(go, svma, stats).filter(|_| is_code(svma)) {
                out[i] = named;
                continue;
            }
            let symbol = symbols.lookup(svma).filter(|_| is_code(svma));
            out[i] = combine(Vec::new(), symbol, &mut names);
        }
    }
    for frames in &out {
        match frames.first() {
            None => stats.unknown += 1,
            Some(f) if f.file.is_some() || frames.len() > 1 => stats.dwarf_names += 1,
            Some(_) => stats.symtab_names += 1,
        }
    }
    out
}

/// The frames a Go table gives `svma` (inlined functions first), if any.
fn go_frames(
    go: Option<&GoTable>,
    svma: u64,
    stats: &mut SymbolizerStats,
) -> Option<Vec<SymbolLine>> {
    let frames = go?.frames(svma).ok().filter(|f| !f.is_empty())?;
    stats.go_names += 1;
    Some(
        frames
            .into_iter()
            .map(|f| SymbolLine {
                function: f.function,
                file: f.file,
                line: f.line,
                inlined: f.inlined,
            })
            .collect(),
    )
}

/// Readable forms of ELF symbol names, demangled once each.
#[derive(Default)]
struct Names<'a> {
    demangled: HashMap<&'a str, String>,
}

impl<'a> Names<'a> {
    fn get(&mut self, raw: &'a str) -> String {
        self.demangled
            .entry(raw)
            .or_insert_with(|| demangle(raw))
            .clone()
    }
}

/// DWARF frames, completed by the symbol name where DWARF knows no function.
fn combine<'a>(
    frames: Vec<dwarf::DwarfFrame>,
    symbol: Option<&'a str>,
    names: &mut Names<'a>,
) -> Vec<SymbolLine> {
    let n = frames.len();
    let mut out: Vec<SymbolLine> = Vec::with_capacity(n.max(1));
    for (k, f) in frames.into_iter().enumerate() {
        let outermost = k + 1 == n;
        let function = match (f.function, outermost, symbol) {
            // DWARF without scopes (line-tables-only builds) names the function
            // `work<u64>`; its ELF symbol has the path: `fixture::work::<u64>`.
            (Some(name), true, Some(sym)) if !name.contains("::") => {
                let qualified = names.get(sym);
                let base = name.split('<').next().unwrap_or(&name);
                let last = qualified.rsplit("::").next().unwrap_or(&qualified);
                if qualified.contains("::") && last == base {
                    demangle::with_rust_generics(qualified, &name)
                } else {
                    name
                }
            }
            (Some(name), _, _) => name,
            (None, true, Some(sym)) => names.get(sym),
            (None, _, _) => "??".to_owned(),
        };
        out.push(SymbolLine {
            function,
            file: f.file,
            line: f.line,
            inlined: !outermost,
        });
    }
    if out.is_empty() {
        if let Some(sym) = symbol {
            out.push(plain_frame(names.get(sym)));
        }
    } else if out.iter().all(|f| f.function == "??" && f.file.is_none()) {
        out.clear();
    }
    out
}
