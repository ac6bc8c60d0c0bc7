//! Which layout a record is in, when the records of several events share one stream
//! (a ring, a perf.data file's data section): told apart by the id each carries.

use std::collections::HashMap;

use super::abi::sample;
use super::decode::{BadRecord, Layout, Record};

/// The layouts of every event whose records share a stream (a ring, a perf.data
/// file's data section), told apart by the ids records carry.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    all: Vec<Layout>,
    by_id: HashMap<u64, usize>,
}

impl Layouts {
    /// One layout for every record.
    pub fn one(layout: Layout) -> Layouts {
        Layouts {
            all: vec![layout],
            by_id: HashMap::new(),
        }
    }

    /// Adds an event's layout and the ids its records carry; the first added is the
    /// one records without a known id are read with.
    pub fn add(&mut self, layout: Layout, ids: impl IntoIterator<Item = u64>) -> usize {
        let i = match self.all.iter().position(|l| *l == layout) {
            Some(i) => i,
            None => {
                self.all.push(layout);
                self.all.len() - 1
            }
        };
        for id in ids {
            self.by_id.insert(id, i);
        }
        i
    }

    /// The layout a record is laid out in: by its id when the events differ; None
    /// when it cannot be told (several layouts, no id that picks one).
    pub fn layout_of(&self, rec: &[u8]) -> Option<&Layout> {
        let first = self.all.first()?;
        if self.all.len() == 1 {
            return Some(first);
        }
        // Where the id sits must not depend on the layout: it is the first field of a
        // sample and the last of a trailer (IDENTIFIER), or every layout agrees.
        if !first.has(sample::IDENTIFIER)
            && self.all.iter().any(|l| l.sample_type != first.sample_type)
        {
            return None;
        }
        let id = first.id(rec)?;
        self.by_id.get(&id).map(|&i| &self.all[i]).or(Some(first))
    }

    /// Decodes a record with its own event's layout.
    pub fn decode<'a>(&self, rec: &'a [u8]) -> Result<Record<'a>, BadRecord> {
        self.layout_of(rec).ok_or(BadRecord)?.decode(rec)
    }

    /// A record's time, read without decoding it; 0 when it has none.
    pub fn time(&self, rec: &[u8]) -> u64 {
        self.layout_of(rec).and_then(|l| l.time(rec)).unwrap_or(0)
    }
}
