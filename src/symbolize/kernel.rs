//! Kernel function names from `/proc/kallsyms` (the core kernel and the loaded modules,
//! whose lines end in `[module]`). The file gives no sizes, so a symbol reaches up to the
//! next one. When the kernel hides addresses (`kptr_restrict`, or an unprivileged
//! reader), every line reads 0: that is reported as [`KernelSymbolsError::Hidden`]
//! with advice rather than as names that would all be wrong.

use std::path::Path;

/// Why kernel addresses cannot be named.
#[derive(Debug, thiserror::Error)]
pub enum KernelSymbolsError {
    #[error(
        "{path} shows every kernel address as 0: the kernel hides them from this user \
         (kernel.kptr_restrict). Record as root (or with CAP_SYSLOG), or run \
         `sysctl kernel.kptr_restrict=0`; unprivileged recording also needs \
         kernel.perf_event_paranoid <= 1"
    )]
    /// Every address reads as 0 (kptr_restrict).
    Hidden {
        /// The kallsyms file.
        path: String,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The kallsyms file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file lists no function.
    #[error("{path} holds no function symbols")]
    Empty {
        /// The kallsyms file.
        path: String,
    },
}

/// The sorted text symbols of the running kernel.
#[derive(Debug, Clone)]
pub struct KernelSymbols {
    /// (address, start and end of the name in `names`), sorted by address; names of
    /// module symbols keep no module suffix.
    syms: Vec<(u64, u32, u32)>,
    /// Every kept name, back to back: one allocation instead of 100,000.
    names: String,
    /// The lowest and highest address of a core kernel symbol (no module suffix).
    core: (u64, u64),
    /// Read from a copy kept between recordings (`super::kernel_cache`): what it
    /// names, the core kernel and the modules loaded now; None when read from the
    /// kernel now (it names everything the kernel listed).
    covered: Option<Vec<(u64, u64)>>,
}

/// Past the last core kernel symbol, addresses a copy still names (the last
/// function's length, at most).
const CORE_SLACK: u64 = 1 << 20;

impl KernelSymbols {
    /// Reads and parses a kallsyms file (normally `/proc/kallsyms`).
    pub fn load(path: &Path) -> Result<KernelSymbols, KernelSymbolsError> {
        let text = std::fs::read(path).map_err(|source| KernelSymbolsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_bytes(&text, &path.display().to_string())
    }

    /// [`KernelSymbols::parse`] of bytes, for the cache.
    pub(super) fn parse_bytes_for(
        text: &[u8],
        path: &str,
    ) -> Result<KernelSymbols, KernelSymbolsError> {
        Self::parse_bytes(text, path)
    }

    /// The table read from a copy, naming only the core kernel and `modules` (start,
    /// end): what the kernel runs now.
    pub(super) fn covering(mut self, modules: &[(u64, u64)]) -> KernelSymbols {
        let mut covered = vec![(self.core.0, self.core.1.saturating_add(CORE_SLACK))];
        covered.extend_from_slice(modules);
        self.covered = Some(covered);
        self
    }

    /// Whether the table was read from the kernel now (not from a copy).
    pub fn is_fresh(&self) -> bool {
        self.covered.is_none()
    }

    /// Whether the table names `addr` as the kernel lists it now: always for a
    /// table read now; for a copy, an address of the core kernel or of a module
    /// loaded now.
    pub fn covers(&self, addr: u64) -> bool {
        self.covered
            .as_ref()
            .is_none_or(|c| c.iter().any(|&(a, b)| a <= addr && addr < b))
    }

    /// Parses kallsyms text; `path` only names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<KernelSymbols, KernelSymbolsError> {
        Self::parse_bytes(text.as_bytes(), path)
    }

    /// Parses kallsyms bytes (`ADDR TYPE NAME[\t[MODULE]]` lines). This runs on every
    /// recording with kernel frames, over some 100,000 lines, so it works on bytes:
    /// no UTF-8 pass over the whole file, no allocation per line. A name that is not
    /// UTF-8 (none are, in practice) is kept lossily.
    fn parse_bytes(text: &[u8], path: &str) -> Result<KernelSymbols, KernelSymbolsError> {
        let mut syms = Vec::with_capacity(text.len() / 40);
        let mut names = String::with_capacity(text.len() / 3);
        let mut lines = 0usize;
        let mut nonzero = false;
        let mut core = (u64::MAX, 0u64);
        for line in text.split(|&b| b == b'\n') {
            let Some((addr, kind, name)) = split_line(line) else {
                continue;
            };
            lines += 1;
            nonzero |= addr != 0;
            if addr != 0 && !line.contains(&b'[') {
                core = (core.0.min(addr), core.1.max(addr));
            }
            // Text symbols only (t/T, weak w/W); data and absolute symbols would end
            // a function early.
            if addr != 0 && matches!(kind, b't' | b'T' | b'w' | b'W') {
                let start = names.len();
                names.push_str(&String::from_utf8_lossy(name));
                let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(names.len()))
                else {
                    break; // over 4 GiB of names: not a kallsyms file
                };
                syms.push((addr, start, end));
            }
        }
        if lines > 0 && !nonzero {
            return Err(KernelSymbolsError::Hidden {
                path: path.to_owned(),
            });
        }
        if syms.is_empty() {
            return Err(KernelSymbolsError::Empty {
                path: path.to_owned(),
            });
        }
        // The core kernel comes sorted, modules and BPF programs follow in load order:
        // a few sorted runs, which the stable sort merges in linear time.
        syms.sort_by_key(|s| s.0);
        Ok(KernelSymbols {
            syms,
            names,
            core,
            covered: None,
        })
    }

    /// The function containing `addr`: the last symbol at or below it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        Some(self.name(idx))
    }

    fn name(&self, idx: usize) -> &str {
        let (_, start, end) = self.syms[idx];
        &self.names[start as usize..end as usize]
    }

    /// The address of a symbol by name (for tests and diagnostics).
    #[cfg(test)]
    pub fn address_of(&self, name: &str) -> Option<u64> {
        (0..self.syms.len())
            .find(|&i| self.name(i) == name)
            .map(|i| self.syms[i].0)
    }
}

/// One kallsyms line as (address, type letter, name without the module suffix).
fn split_line(line: &[u8]) -> Option<(u64, u8, &[u8])> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let sp = line.iter().position(|&b| b == b' ')?;
    let addr = parse_hex(&line[..sp])?;
    let rest = &line[sp + 1..];
    let (&kind, rest) = rest.split_first()?;
    let name = rest.strip_prefix(b" ")?;
    let end = name
        .iter()
        .position(|&b| b == b'\t' || b == b' ')
        .unwrap_or(name.len());
    let name = &name[..end];
    (!name.is_empty()).then_some((addr, kind, name))
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | v as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_and_module_symbols() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\n\
             ffffffff81001000 t do_one\n\
             ffffffff81002000 D some_data\n\
             ffffffffc0a01000 t nft_do_chain\t[nf_tables]\n",
            "test",
        )
        .unwrap();
        assert_eq!(k.lookup(0xffffffff81001010), Some("do_one"));
        assert_eq!(
            k.lookup(0xffffffff81002010),
            Some("do_one"),
            "data is skipped"
        );
        assert_eq!(k.lookup(0xffffffffc0a01004), Some("nft_do_chain"));
        assert_eq!(k.lookup(0x1000), None);
    }

    #[test]
    fn junk_lines_are_skipped_and_module_order_is_sorted() {
        let k = KernelSymbols::parse_bytes(
            b"not a symbol line\n\
             ffffffffc0a02000 T mod_b\t[m]\n\
             zzzz T bad_address\n\
             ffffffff81000000 T _stext\n\
             ffffffffc0a01000 t mod_a\t[m]\n\
             ffffffff81000100 T\n\
             ffffffff81000200 t \xff\xfename\n",
            "test",
        )
        .unwrap();
        assert_eq!(k.lookup(0xffffffffc0a01500), Some("mod_a"));
        assert_eq!(k.lookup(0xffffffffc0a02500), Some("mod_b"));
        assert_eq!(
            k.lookup(0xffffffff81000150),
            Some("_stext"),
            "nameless line skipped"
        );
        assert_eq!(k.lookup(0xffffffff81000250), Some("\u{fffd}\u{fffd}name"));
    }

    #[test]
    fn all_zero_addresses_are_hidden() {
        let err = KernelSymbols::parse(
            "0000000000000000 T _stext\n0000000000000000 t do_one\n",
            "/proc/kallsyms",
        )
        .unwrap_err();
        assert!(matches!(err, KernelSymbolsError::Hidden { .. }));
        assert!(err.to_string().contains("kptr_restrict"));
    }

    #[test]
    fn a_syscall_resolves_from_the_live_kernel() {
        let k = KernelSymbols::load(Path::new("/proc/kallsyms")).unwrap();
        let name = ["do_sys_openat2", "__x64_sys_read", "ksys_read"]
            .into_iter()
            .find(|n| k.address_of(n).is_some())
            .expect("a well-known syscall symbol");
        let addr = k.address_of(name).unwrap();
        assert_eq!(k.lookup(addr + 4), Some(name));
    }
}
