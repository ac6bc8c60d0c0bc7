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
    Hidden { path: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no function symbols")]
    Empty { path: String },
}

/// The sorted text symbols of the running kernel.
#[derive(Debug)]
pub struct KernelSymbols {
    /// (address, name); names of module symbols keep no module suffix.
    syms: Vec<(u64, String)>,
}

impl KernelSymbols {
    /// Reads and parses a kallsyms file (normally `/proc/kallsyms`).
    pub fn load(path: &Path) -> Result<KernelSymbols, KernelSymbolsError> {
        let text = std::fs::read_to_string(path).map_err(|source| KernelSymbolsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses kallsyms text; `path` only names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<KernelSymbols, KernelSymbolsError> {
        let mut syms = Vec::new();
        let mut lines = 0usize;
        let mut nonzero = false;
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            lines += 1;
            nonzero |= addr != 0;
            // Text symbols only (t/T, weak w/W); data and absolute symbols would end
            // a function early.
            if addr != 0 && matches!(kind, "t" | "T" | "w" | "W") {
                syms.push((addr, name.to_owned()));
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
        syms.sort_by_key(|s| s.0);
        Ok(KernelSymbols { syms })
    }

    /// The function containing `addr`: the last symbol at or below it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        Some(self.syms[idx].1.as_str())
    }

    /// The address of a symbol by name (for tests and diagnostics).
    #[cfg(test)]
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|s| s.1 == name).map(|s| s.0)
    }
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
