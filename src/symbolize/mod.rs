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
pub mod perfmap;
mod unit_filter;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

pub use demangle::demangle;
pub use kernel::KernelSymbolsError;

use crate::elf::gopclntab::GoTable;
use crate::elf::{ElfInfo, Image};
/// One frame of a symbolized address: the type the recording stores, so names pass
/// from the symbolizer into the file without copying field by field.
pub use crate::format::SymbolLine;
use lookup::name_addresses;

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

    /// [`Symbolizer::symbolize_module`], from the symbol tables alone when
    /// `defer_dwarf` (a live namer's module not yet worth its DWARF: names without
    /// lines or inlined frames; the DWARF is not read, nor fetched from debuginfod,
    /// and only the symbols these addresses need are sorted; nothing is kept). A
    /// module whose names are kept already is named from them, DWARF and all.
    pub fn symbolize_module_deferring(
        &mut self,
        module: &ModuleSource,
        svmas: &[u64],
        defer_dwarf: bool,
    ) -> Vec<Vec<SymbolLine>> {
        self.stats.modules += 1;
        if let Some(p) = self.kept.get(&module.image) {
            let go = p.go.as_ref();
            return name_addresses(
                svmas,
                &p.code,
                &p.symbols,
                go,
                &mut p.dwarf,
                &mut self.stats,
            );
        }
        if defer_dwarf {
            self.stats.dwarf_deferred += 1;
        } else {
            self.stats.dwarf_reads += 1;
        }
        // A module read for recording left its DWARF on disk: the sections used are
        // read from the open file below (`dwarf::read_shared`, `DwarfSections::read`).
        let image: &Image = &module.image;
        let on_disk = image.debug_on_disk();
        let data: &[u8] = (**image).as_ref();
        let Ok(file) = object::File::parse(data) else {
            self.stats.unknown += svmas.len();
            return vec![Vec::new(); svmas.len()];
        };
        let info = ElfInfo::parse(data).ok();
        let debug = info.as_ref().and_then(|info| {
            debuginfo::find_debug_file(&debuginfo::Wanted {
                info,
                // A replaced file's debug files sit where the original did.
                path: module
                    .path
                    .strip_suffix(" (deleted)")
                    .unwrap_or(&module.path),
                root: module.root.as_deref(),
                debug_dirs: &self.opts.debug_dirs,
            })
        });
        // Code lives in executable segments; DWARF of functions the linker dropped
        // claims addresses such as 0, so nothing outside them gets a name.
        let code: Vec<(u64, u64)> = info
            .iter()
            .flat_map(|i| &i.segments)
            .filter(|s| s.executable)
            .map(|s| (s.svma, s.svma.saturating_add(s.mem_size)))
            .collect();
        let is_code =
            |svma: u64| code.is_empty() || code.iter().any(|&(a, b)| (a..b).contains(&svma));
        if defer_dwarf {
            let debug_file = debug
                .as_ref()
                .and_then(|d| object::File::parse((*d.image).as_ref()).ok());
            let symbols = symbol_table(module, &file, debug_file.as_ref(), Some(svmas));
            let go = self.go_table(module, &file, debug_file.is_some());
            let mut none: Option<dwarf::Dwarf<dwarf::ArcSlice>> = None;
            let go = go.as_ref();
            return name_addresses(svmas, &code, &symbols, go, &mut none, &mut self.stats);
        }
        // No DWARF of its own and none on the machine: ask debuginfod, if configured.
        let debug = debug.or_else(|| {
            let info = info.as_ref()?;
            use object::{Object, ObjectSection};
            let own_dwarf = file
                .section_by_name(".debug_info")
                .is_some_and(|s| s.size() > 0);
            if own_dwarf {
                return None;
            }
            let id = info.build_id.as_deref()?;
            let client = self.debuginfod.as_mut()?;
            let (path, file) = client.debuginfo(id, &module.path)?;
            let found = debuginfo::open_matching_file(file, &path, id);
            if found.is_none() {
                client.reject(id, &module.path);
            }
            found
        });
        if let Some(d) = &self.debuginfod {
            self.stats.debuginfod_notes.clone_from(&d.notes);
            self.stats.debuginfod_fetched = d.fetched;
        }
        let debug_data: Option<&[u8]> = debug.as_ref().map(|d| (*d.image).as_ref());
        let debug_file = debug_data.and_then(|d| object::File::parse(d).ok());
        if let Some(d) = &debug {
            self.stats.debug_files.push(d.path.clone());
        }

        // DWARF from the debug file when there is one, else from the module itself.
        // A module to be kept has all its units parsed as needed, later windows' too,
        // over sections read once into buffers the kept context shares; one too large
        // to keep has only the units of these addresses parsed.
        let code_svmas: Vec<u64> = svmas.iter().copied().filter(|&a| is_code(a)).collect();
        let stated = debug_file
            .as_ref()
            .map_or(0, dwarf::DwarfSections::stated_bytes)
            .max(dwarf::DwarfSections::stated_bytes(&file));
        // Names that cannot be kept for later windows (a recording named once, or a
        // module too large) need only these addresses' symbols: Node's 180,000 read
        // and sorted took 35 ms of a recording (docs/runtimes.md).
        let may_keep = self.kept.fits(kept::parsed_bytes(stated, 0));
        let only = (!may_keep).then_some(svmas);
        let symbols = symbol_table(module, &file, debug_file.as_ref(), only);
        let go = self.go_table(module, &file, debug_file.is_some());
        let symbols_bytes = symbols.approx_bytes() + go.as_ref().map_or(0, GoTable::approx_bytes);
        let keep = self
            .kept
            .fits(kept::parsed_bytes(stated, symbols.approx_bytes()));
        if !keep && self.kept.too_large(kept::parsed_bytes(stated, 0)) {
            // A live namer's budget holds: no DWARF larger than all of it is read
            // (names from the symbol table, without lines or inlined frames).
            self.stats.dwarf_over_budget += 1;
            let mut none: Option<dwarf::Dwarf<dwarf::ArcSlice>> = None;
            let go = go.as_ref();
            return name_addresses(svmas, &code, &symbols, go, &mut none, &mut self.stats);
        }
        if !keep {
            let sections = catch_unwind(AssertUnwindSafe(|| {
                let own = || {
                    if on_disk {
                        dwarf::DwarfSections::read(&file, image, &code_svmas)
                    } else {
                        dwarf::DwarfSections::load(&file, &code_svmas)
                    }
                };
                debug_file
                    .as_ref()
                    .and_then(|f| dwarf::DwarfSections::load(f, &code_svmas))
                    .or_else(own)
            }))
            .unwrap_or_else(|_| {
                self.stats.dwarf_panics += 1;
                None
            });
            self.stats.units_skipped += sections.as_ref().map_or(0, |s| s.units_skipped);
            let mut dwarf = catch_unwind(AssertUnwindSafe(|| {
                sections.as_ref().and_then(|s| s.context().ok())
            }))
            .ok()
            .flatten();
            let go = go.as_ref();
            return name_addresses(svmas, &code, &symbols, go, &mut dwarf, &mut self.stats);
        }
        let shared = catch_unwind(AssertUnwindSafe(|| {
            let debug_image = debug.as_ref().map(|d| &d.image);
            debug_file
                .as_ref()
                .zip(debug_image)
                .and_then(|(f, i)| dwarf::read_shared(f, i))
                .or_else(|| dwarf::read_shared(&file, image))
        }))
        .unwrap_or_else(|_| {
            self.stats.dwarf_panics += 1;
            None
        });
        let (dwarf, read) = shared.map_or((None, 0), |(d, n)| (Some(d), n));
        let parsed = kept::Parsed {
            symbols: symbols.into_owned(),
            go,
            dwarf,
            code,
            bytes: kept::parsed_bytes(read, symbols_bytes),
        };
        let mut not_kept;
        let p = match self.kept.insert(&module.image, parsed) {
            kept::KeptOrNot::Kept(p) => p,
            kept::KeptOrNot::Not(p) => {
                not_kept = p;
                &mut not_kept
            }
        };
        name_addresses(
            svmas,
            &p.code,
            &p.symbols,
            p.go.as_ref(),
            &mut p.dwarf,
            &mut self.stats,
        )
    }

    /// A Go module's own table, when it has no DWARF of its own nor a debug file
    /// (`go build -ldflags="-s -w"`, as Go binaries ship); a table that cannot be
    /// read leaves its frames to the symbol tables, with a note saying why.
    fn go_table(
        &mut self,
        module: &ModuleSource,
        file: &object::File<'_>,
        debug_file: bool,
    ) -> Option<GoTable> {
        use object::{Object, ObjectSection};
        let own_dwarf = file
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0);
        if debug_file || own_dwarf {
            return None;
        }
        GoTable::from_elf(&module.image).unwrap_or_else(|e| {
            let note = format!("{}: Go functions unnamed: {e}", module.path);
            if !self.stats.go_notes.contains(&note) {
                self.stats.go_notes.push(note);
            }
            None
        })
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

/// The symbol tables of `module` (parsed as `file`) and of its separate debug file;
/// a stripped module's (no `.symtab` here or in a debug file) functions as its unwind
/// tables give their starts. With `only`, just what naming those addresses needs
/// (see [`elf_syms::SymbolTable::retain_near`]).
fn symbol_table<'a>(
    module: &ModuleSource,
    file: &object::File<'a>,
    debug_file: Option<&object::File<'a>>,
    only: Option<&[u64]>,
) -> elf_syms::SymbolTable<'a> {
    let has_symtab = |f: &object::File<'_>| {
        use object::Object;
        f.symbol_table().is_some()
    };
    let stripped = !has_symtab(file) && !debug_file.is_some_and(has_symtab);
    let mut symbols = elf_syms::SymbolTable::default();
    // Node's names were left on disk (`elf::read_module_leaving_names`).
    let on_disk = match file {
        object::File::Elf64(elf) if module.image.names_on_disk() => Some(elf),
        _ => None,
    };
    let image: &dyn crate::elf::ImageData = &*module.image;
    // A stripped module's unnamed functions are found over the whole table.
    let only = only.filter(|_| !stripped);
    match (only, on_disk) {
        (Some(svmas), Some(elf)) => symbols.add_disk_near(elf, image, svmas),
        (Some(svmas), None) => symbols.add_file_near(file, svmas),
        (None, Some(elf)) => symbols.add_disk_file(elf, image),
        (None, None) => symbols.add_file(file),
    }
    match on_disk {
        Some(elf) => symbols.add_disk_plt(file, elf, image),
        None => symbols.add_plt(file),
    }
    match (only, debug_file) {
        (Some(svmas), Some(df)) => symbols.add_file_near(df, svmas),
        (None, Some(df)) => symbols.add_file(df),
        (_, None) => {}
    }
    if let Some(svmas) = only {
        // What each file gave for itself, cut to what all of them give.
        symbols.retain_near(svmas);
    }
    symbols.finish();
    if stripped {
        let cfi = crate::unwind::ModuleCfi::new(module.image.clone());
        let name = module.path.rsplit('/').next().unwrap_or(&module.path);
        let name = name.strip_suffix(" (deleted)").unwrap_or(name);
        symbols.add_unnamed_functions(&cfi.function_ranges(), name);
    }
    symbols
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
