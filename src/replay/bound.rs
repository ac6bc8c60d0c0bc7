//! The recording's tables a stack's frames point into (each mapping's loaded module
//! and the mappings), by mapping id: what the merge of runtime frames
//! ([`super::merge`]) and the Python stage ([`super::python`]) look modules up in.

use std::sync::Arc;

use super::bind::LoadedModule;
use crate::format::{Mapping, MappingId};

/// The recording's modules and mappings that the frames point into, by mapping id
/// less `base`.
#[derive(Clone, Copy)]
pub(crate) struct Bound<'a> {
    /// Each mapping's loaded module and bias.
    pub modules: &'a [Option<(Arc<LoadedModule>, u64)>],
    /// The mappings.
    pub mappings: &'a [Mapping],
    /// The id of `mappings[0]`: 0, except in a live recorder that forgot a generation
    /// of its tables after a window (its frames keep ids that count every mapping
    /// since the start: indexing the tables with them found nothing, and every
    /// window after the first lost its Python frames).
    pub base: MappingId,
}

impl<'a> Bound<'a> {
    /// Tables whose ids start at 0.
    pub(crate) fn new(
        modules: &'a [Option<(Arc<LoadedModule>, u64)>],
        mappings: &'a [Mapping],
    ) -> Bound<'a> {
        Bound {
            modules,
            mappings,
            base: 0,
        }
    }

    /// Tables whose first mapping has id `base`.
    pub(crate) fn with_base(self, base: MappingId) -> Bound<'a> {
        Bound { base, ..self }
    }

    /// The loaded module and bias of mapping `id`, if bound.
    pub(crate) fn module(&self, id: MappingId) -> Option<&'a (Arc<LoadedModule>, u64)> {
        let i = id.checked_sub(self.base)? as usize;
        self.modules.get(i)?.as_ref()
    }

    /// Mapping `id`.
    pub(crate) fn mapping(&self, id: MappingId) -> Option<&'a Mapping> {
        let i = id.checked_sub(self.base)? as usize;
        self.mappings.get(i)
    }
}
