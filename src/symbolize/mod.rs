//! Turning addresses into names, once per module at the end of a recording, so that the
//! recording carries its names and reports never need the binaries. For a module: DWARF
//! (own or from a separate debug file) gives the function, the inline chain and
//! file:line; the ELF symbol tables name what DWARF does not cover. Kernel addresses
//! come from `/proc/kallsyms`, JIT frames from perf map files. Nothing here fails on bad
//! input from the target: a broken ELF or DWARF just yields fewer names.
//!
//! Submodules: [`locate`](crate::process::locate) opens the target's files as it sees them; `debuginfo` finds
//! separate debug files on the machine, [`debuginfod`] from debuginfod servers; `dwarf` wraps addr2line; `elf_syms` is the symbol-table
//! fallback; `demangle` makes names readable; `kernel` and `perfmap` read kallsyms and
//! perf maps; [`late`] names a recording cut before its names were written.

mod debuginfo;
pub mod debuginfod;
mod demangle;
mod dwarf;
mod elf_syms;
pub(crate) mod frames;
pub(crate) mod kept;
pub mod kernel;
pub mod kernel_cache;
pub mod late;
mod lookup;
mod module;
pub mod perfmap;
mod unit_filter;

use std::path::{Path, PathBuf};

pub use demangle::demangle;
pub use kernel::KernelSymbolsError;

use crate::elf::Image;
/// One frame of a symbolized address: the type the recording stores, so names pass
/// from the symbolizer into the file without copying field by field.
pub use crate::format::SymbolLine;

/// How the symbolizer looks for debug information.
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct SymbolizerOptions {
    /// Extra directories searched for separate debug files, as
    /// `DIR/.build-id/xx/yyyy.debug` and `DIR/<basename>.debug` (`--debug-dir`).
    /// Default is none.
    pub debug_dirs: Vec<PathBuf>,
}

/// One module to symbolize.
pub struct ModuleSource {
    /// The mapped file's bytes (already opened by [`locate`](crate::process::locate)).
    pub image: Image,
    /// Path as the target sees it (for messages and the debuglink directory).
    pub path: String,
    /// `/proc/PID/root`: debug files are looked for inside the target's fs too.
    pub root: Option<PathBuf>,
}

/// Counts of what the symbolizer did, for `--verbose` output and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolizerStats {
    /// Modules symbolized.
    pub modules: usize,
    /// Addresses named with their file and line or inlined frames: from DWARF, or
    /// from a Go table.
    pub dwarf_names: usize,
    /// Of those, addresses named from a Go module's own table (`.gopclntab`).
    pub go_names: usize,
    /// Addresses named from an ELF symbol table only.
    pub symtab_names: usize,
    /// Addresses left without a name.
    pub unknown: usize,
    /// Separate debug files used, in order.
    pub debug_files: Vec<PathBuf>,
    /// What debuginfod could not provide, one note each (empty when
    /// `DEBUGINFOD_URLS` is unset).
    pub debuginfod_notes: Vec<String>,
    /// Debug files downloaded from debuginfod servers.
    pub debuginfod_fetched: usize,
    /// Go modules whose own table could not be read, and why.
    pub go_notes: Vec<String>,
    /// Modules whose DWARF parser panicked (the names fell back to symbols).
    pub dwarf_panics: usize,
    /// Compilation units left unparsed because no address fell in them.
    pub units_skipped: usize,
    /// Modules whose DWARF was read (not named from names kept).
    pub dwarf_reads: usize,
    /// Modules whose DWARF was not read: larger than a live namer's whole budget.
    pub dwarf_over_budget: usize,
    /// Modules named from their symbol tables alone, their DWARF deferred (a live
    /// namer's module not yet worth it).
    pub dwarf_deferred: usize,
}

/// Names for user, kernel and JIT addresses. Keeps kallsyms once it is read.
pub struct Symbolizer {
    opts: SymbolizerOptions,
    /// Set from the environment (`DEBUGINFOD_URLS`) when it names servers.
    debuginfod: Option<debuginfod::Debuginfod>,
    kernel: Option<kernel::KernelSymbols>,
    stats: SymbolizerStats,
    /// Modules' parsed names kept between calls (none unless asked for).
    kept: kept::Kept,
}

impl Symbolizer {
    /// A symbolizer with no kernel symbols read yet.
    pub fn new(opts: SymbolizerOptions) -> Symbolizer {
        Symbolizer {
            opts,
            debuginfod: debuginfod::Debuginfod::from_env(),
            kernel: None,
            stats: SymbolizerStats::default(),
            kept: kept::Kept::new(0, 0),
        }
    }

    /// What has been done so far.
    pub fn stats(&self) -> &SymbolizerStats {
        &self.stats
    }

    /// Names for SVMAs of one module (return addresses already decremented by the
    /// caller). `result[i]` belongs to `svmas[i]`: innermost frame first, the outermost
    /// (the real function) last; every frame but the last has `inlined = true`. Empty
    /// when nothing is known. Never fails: a broken ELF or DWARF degrades to fewer
    /// names, never a panic.
    pub fn symbolize_module(
        &mut self,
        module: &ModuleSource,
        svmas: &[u64],
    ) -> Vec<Vec<SymbolLine>> {
        self.symbolize_module_deferring(module, svmas, false)
    }

    /// Keeps modules' parsed names between calls (see [`kept`]): up to `budget` bytes,
    /// each for `max_age` calls of [`Symbolizer::end_window`] after its last use.
    pub fn keep_parsed(&mut self, budget: usize, max_age: u64) {
        self.kept = kept::Kept::new(budget, max_age);
    }

    /// Ends a window of a live recording: kept modules let go by the recorder or
    /// unused for long are dropped.
    pub fn end_window(&mut self) {
        self.kept.end_window();
    }

    /// Modules whose names are kept, and about their bytes.
    pub fn kept_usage(&self) -> (usize, usize) {
        self.kept.usage()
    }

    /// A count that moves whenever naming let go of memory: a module's DWARF read
    /// and dropped after use, or kept names dropped (see
    /// [`Namer::freed`](frames::Namer::freed)).
    pub fn freed(&self) -> u64 {
        self.stats.dwarf_reads as u64 + self.kept.dropped
    }

    /// Kernel addresses via `/proc/kallsyms` (module symbols included).
    pub fn symbolize_kernel(
        &mut self,
        addrs: &[u64],
    ) -> Result<Vec<Option<SymbolLine>>, KernelSymbolsError> {
        self.symbolize_kernel_with(Path::new("/proc/kallsyms"), addrs)
    }

    /// Hands over kernel symbols read ahead of time (the recorder reads kallsyms on a
    /// background thread during its setup, before the first sample, not while it
    /// samples).
    pub fn set_kernel_symbols(&mut self, symbols: kernel::KernelSymbols) {
        self.kernel = Some(symbols);
    }

    /// [`Symbolizer::symbolize_kernel`] with another kallsyms file (a copy saved with a
    /// recording, or a test fixture). The first file read is kept for later calls.
    pub fn symbolize_kernel_with(
        &mut self,
        kallsyms: &Path,
        addrs: &[u64],
    ) -> Result<Vec<Option<SymbolLine>>, KernelSymbolsError> {
        // A copy kept between recordings that does not cover an address (a BPF
        // program loaded since it was made): the kernel's list as it is now.
        let stale = self
            .kernel
            .as_ref()
            .is_some_and(|k| addrs.iter().any(|&a| !k.covers(a)));
        if self.kernel.is_none() || stale {
            self.kernel = Some(kernel::KernelSymbols::load(kallsyms)?);
        }
        let Some(k) = self.kernel.as_ref() else {
            return Ok(vec![None; addrs.len()]);
        };
        Ok(addrs
            .iter()
            .map(|&a| k.lookup(a).map(|name| plain_frame(name.to_owned())))
            .collect())
    }

    /// JIT/interpreter frames from a perf map (read by [`perfmap::open_perf_map`]).
    pub fn symbolize_perf_map(
        &mut self,
        map: &perfmap::PerfMap,
        addrs: &[u64],
    ) -> Vec<Option<SymbolLine>> {
        addrs
            .iter()
            .map(|&a| map.lookup(a).map(|name| plain_frame(demangle(name))))
            .collect()
    }
}

fn plain_frame(function: String) -> SymbolLine {
    SymbolLine {
        function,
        file: None,
        line: None,
        inlined: false,
    }
}

#[cfg(test)]
mod tests;
