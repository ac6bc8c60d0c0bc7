//! One binder: an executable mapping of a process bound to the file it maps, for the
//! recorder, the perf.data reader and `dump` alike. Each finds the file its own way
//! (through the target's `/proc/PID/root`, by the recorded path and build-id, or
//! from `/proc/PID/maps`); what follows from the file is decided here once: the bias
//! that turns the mapping's addresses into the file's, the build-id the mapping is
//! written with, and its entry in the process's address space for unwinding.

use std::sync::Arc;

use crate::elf::{ElfInfo, Image};
use crate::format::{Mapping, MappingId};
use crate::unwind::ModuleCfi;
use crate::unwind::addrspace::Mapped;

/// One mapped file, loaded once: its bytes, ELF facts and unwind tables.
pub(crate) struct LoadedModule {
    pub image: Image,
    pub info: ElfInfo,
    /// Unwind tables (in dwarf mode; the perf.data reader keeps a table-less one in
    /// frame-pointer mode).
    pub cfi: Option<Arc<ModuleCfi>>,
}

/// A mapping bound to its module.
pub(crate) struct Bound {
    /// The mapping as it is written: its build-id the one the kernel or perf gave,
    /// else the file's own.
    pub mapping: Mapping,
    /// The module and this mapping's bias (file address = runtime address - bias),
    /// when the file was loaded and the mapping lies in one of its segments.
    pub module: Option<(Arc<LoadedModule>, u64)>,
}

/// Binds `mapping` to `module`, the file found for it (None: not found or not ELF).
pub(crate) fn bind(mapping: Mapping, module: Option<Arc<LoadedModule>>) -> Bound {
    // The vdso is an image of its own: its mapping offset is not a file offset.
    let offset_in_image = if mapping.path == "[vdso]" {
        0
    } else {
        mapping.file_offset
    };
    let module = module.and_then(|lm| {
        let bias = lm.info.bias_for_mapping(mapping.start, offset_in_image)?;
        Some((lm, bias))
    });
    let build_id = mapping
        .build_id
        .clone()
        .or_else(|| module.as_ref().and_then(|(lm, _)| lm.info.build_id.clone()));
    Bound {
        mapping: Mapping {
            build_id,
            ..mapping
        },
        module,
    }
}

impl Bound {
    /// This mapping's entry in its process's address space, numbered `id`.
    pub(crate) fn mapped(&self, id: MappingId) -> Mapped {
        Mapped {
            end: self.mapping.end,
            id,
            module: self
                .module
                .as_ref()
                .and_then(|(lm, bias)| Some((Arc::clone(lm.cfi.as_ref()?), *bias))),
        }
    }
}
