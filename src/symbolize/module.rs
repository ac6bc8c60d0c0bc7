//! Naming one module's addresses: its ELF file and separate debug file opened (from
//! the machine, else from debuginfod), its code ranges, then names from the names
//! kept for it, from its symbol tables alone (DWARF deferred or over budget), or
//! with its DWARF, read for these addresses or whole to be kept for later windows.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::debuginfo::{self, DebugFile};
use super::lookup::name_addresses;
use super::{ModuleSource, SymbolLine, Symbolizer, dwarf, elf_syms, kept};
use crate::elf::gopclntab::GoTable;
use crate::elf::{ElfInfo, Image};

/// A module opened for naming.
struct Opened<'a> {
    module: &'a ModuleSource,
    file: object::File<'a>,
    /// Its separate debug file, when one was found, and that file parsed.
    debug: Option<(&'a DebugFile, Option<object::File<'a>>)>,
    /// The ranges of its executable segments.
    code: Vec<(u64, u64)>,
}

impl<'a> Opened<'a> {
    fn new(
        module: &'a ModuleSource,
        file: object::File<'a>,
        debug: Option<&'a DebugFile>,
        info: Option<&ElfInfo>,
    ) -> Opened<'a> {
        let debug = debug.map(|d| (d, object::File::parse((*d.image).as_ref()).ok()));
        Opened {
            module,
            file,
            debug,
            code: code_ranges(info),
        }
    }

    fn debug_file(&self) -> Option<&object::File<'a>> {
        self.debug.as_ref().and_then(|(_, f)| f.as_ref())
    }
}

/// The symbol tables and Go table of a module.
struct Tables<'a> {
    symbols: elf_syms::SymbolTable<'a>,
    go: Option<GoTable>,
}

impl Symbolizer {
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
        let data: &[u8] = (*module.image).as_ref();
        let Ok(file) = object::File::parse(data) else {
            self.stats.unknown += svmas.len();
            return vec![Vec::new(); svmas.len()];
        };
        let info = ElfInfo::parse(data).ok();
        let debug = info
            .as_ref()
            .and_then(|info| self.local_debug_file(module, info));
        if defer_dwarf {
            let opened = Opened::new(module, file, debug.as_ref(), info.as_ref());
            let symbols = symbol_table(&opened, Some(svmas));
            let go = self.go_table(module, &opened.file, opened.debug_file().is_some());
            let tables = Tables { symbols, go };
            return self.name_without_dwarf(&opened, &tables, svmas);
        }
        // No DWARF of its own and none on the machine: ask debuginfod, if configured.
        let debug = debug.or_else(|| self.fetched_debug_file(module, &file, info.as_ref()?));
        if let Some(d) = &self.debuginfod {
            self.stats.debuginfod_notes.clone_from(&d.notes);
            self.stats.debuginfod_fetched = d.fetched;
        }
        if let Some(d) = &debug {
            self.stats.debug_files.push(d.path.clone());
        }
        let opened = Opened::new(module, file, debug.as_ref(), info.as_ref());
        self.name_with_dwarf(&opened, svmas)
    }

    /// The module's separate debug file on the machine (or in the target's root).
    fn local_debug_file(&self, module: &ModuleSource, info: &ElfInfo) -> Option<DebugFile> {
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
    }

    /// The module's debug file from debuginfod, for a module with no DWARF of its
    /// own and a build id.
    fn fetched_debug_file(
        &mut self,
        module: &ModuleSource,
        file: &object::File<'_>,
        info: &ElfInfo,
    ) -> Option<DebugFile> {
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
    }

    /// Names from the symbol tables (and a Go table), without lines or inlined
    /// frames.
    fn name_without_dwarf(
        &mut self,
        opened: &Opened<'_>,
        tables: &Tables<'_>,
        svmas: &[u64],
    ) -> Vec<Vec<SymbolLine>> {
        let mut none: Option<dwarf::Dwarf<dwarf::ArcSlice>> = None;
        let go = tables.go.as_ref();
        let stats = &mut self.stats;
        name_addresses(svmas, &opened.code, &tables.symbols, go, &mut none, stats)
    }

    /// Names with DWARF from the debug file when there is one, else from the module
    /// itself. A module to be kept has all its units parsed as needed, later
    /// windows' too, over sections read once into buffers the kept context shares;
    /// one too large to keep has only the units of these addresses parsed; one
    /// larger than a live namer's whole budget is named without its DWARF.
    fn name_with_dwarf(&mut self, opened: &Opened<'_>, svmas: &[u64]) -> Vec<Vec<SymbolLine>> {
        let stated = opened
            .debug_file()
            .map_or(0, dwarf::DwarfSections::stated_bytes)
            .max(dwarf::DwarfSections::stated_bytes(&opened.file));
        // Names that cannot be kept for later windows (a recording named once, or a
        // module too large) need only these addresses' symbols: Node's 180,000 read
        // and sorted took 35 ms of a recording (docs/runtimes.md).
        let may_keep = self.kept.fits(kept::parsed_bytes(stated, 0));
        let symbols = symbol_table(opened, (!may_keep).then_some(svmas));
        let go = self.go_table(opened.module, &opened.file, opened.debug_file().is_some());
        let tables = Tables { symbols, go };
        let keep = self
            .kept
            .fits(kept::parsed_bytes(stated, tables.symbols.approx_bytes()));
        if keep {
            self.name_kept(opened, tables, svmas)
        } else if self.kept.too_large(kept::parsed_bytes(stated, 0)) {
            // A live namer's budget holds: no DWARF larger than all of it is read.
            self.stats.dwarf_over_budget += 1;
            self.name_without_dwarf(opened, &tables, svmas)
        } else {
            self.name_unkept(opened, &tables, svmas)
        }
    }

    /// Names with the DWARF units of these addresses parsed, dropped after use. A
    /// module read for recording left its DWARF on disk: the sections used are read
    /// from the open file (`DwarfSections::read`).
    fn name_unkept(
        &mut self,
        opened: &Opened<'_>,
        tables: &Tables<'_>,
        svmas: &[u64],
    ) -> Vec<Vec<SymbolLine>> {
        let is_code = |svma: u64| {
            opened.code.is_empty() || opened.code.iter().any(|&(a, b)| (a..b).contains(&svma))
        };
        let code_svmas: Vec<u64> = svmas.iter().copied().filter(|&a| is_code(a)).collect();
        let image: &Image = &opened.module.image;
        let file = &opened.file;
        let sections = catch_unwind(AssertUnwindSafe(|| {
            let own = || {
                if image.debug_on_disk() {
                    dwarf::DwarfSections::read(file, image, &code_svmas)
                } else {
                    dwarf::DwarfSections::load(file, &code_svmas)
                }
            };
            opened
                .debug_file()
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
        let go = tables.go.as_ref();
        let stats = &mut self.stats;
        name_addresses(svmas, &opened.code, &tables.symbols, go, &mut dwarf, stats)
    }

    /// Names with the module's whole DWARF read into shared buffers, its parsed
    /// names kept for later windows when the budget takes them (`dwarf::read_shared`).
    fn name_kept(
        &mut self,
        opened: &Opened<'_>,
        tables: Tables<'_>,
        svmas: &[u64],
    ) -> Vec<Vec<SymbolLine>> {
        let image: &Image = &opened.module.image;
        let shared = catch_unwind(AssertUnwindSafe(|| {
            let debug = opened.debug.as_ref();
            debug
                .and_then(|(d, f)| Some((f.as_ref()?, &d.image)))
                .and_then(|(f, i)| dwarf::read_shared(f, i))
                .or_else(|| dwarf::read_shared(&opened.file, image))
        }))
        .unwrap_or_else(|_| {
            self.stats.dwarf_panics += 1;
            None
        });
        let (dwarf, read) = shared.map_or((None, 0), |(d, n)| (Some(d), n));
        let symbols_bytes =
            tables.symbols.approx_bytes() + tables.go.as_ref().map_or(0, GoTable::approx_bytes);
        let parsed = kept::Parsed {
            symbols: tables.symbols.into_owned(),
            go: tables.go,
            dwarf,
            code: opened.code.clone(),
            bytes: kept::parsed_bytes(read, symbols_bytes),
        };
        let mut not_kept;
        let p = match self.kept.insert(&opened.module.image, parsed) {
            kept::KeptOrNot::Kept(p) => p,
            kept::KeptOrNot::Not(p) => {
                not_kept = p;
                &mut not_kept
            }
        };
        let go = p.go.as_ref();
        name_addresses(
            svmas,
            &p.code,
            &p.symbols,
            go,
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
}

/// Code lives in executable segments; DWARF of functions the linker dropped claims
/// addresses such as 0, so nothing outside them gets a name.
fn code_ranges(info: Option<&ElfInfo>) -> Vec<(u64, u64)> {
    info.iter()
        .flat_map(|i| &i.segments)
        .filter(|s| s.executable)
        .map(|s| (s.svma, s.svma.saturating_add(s.mem_size)))
        .collect()
}

/// The symbol tables of the module and of its separate debug file; a stripped
/// module's (no `.symtab` here or in a debug file) functions as its unwind tables
/// give their starts. With `only`, just what naming those addresses needs (see
/// [`elf_syms::SymbolTable::retain_near`]).
fn symbol_table<'a>(opened: &Opened<'a>, only: Option<&[u64]>) -> elf_syms::SymbolTable<'a> {
    let (module, file, debug_file) = (opened.module, &opened.file, opened.debug_file());
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
