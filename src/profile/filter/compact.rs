//! A filtered profile compacted: the threads, stacks, locations, functions and
//! modules no sample or interval uses dropped, and the rest renumbered in their old
//! order.

use std::marker::PhantomData;

use super::super::{FunctionIndex, ModuleIndex};
use super::super::{Location, LocationIndex, Profile, StackIndex, TableIndex, ThreadIndex};

/// Which entries of each table are used, then each used entry's new index.
struct Used<T, S, L, F, M> {
    threads: T,
    stacks: S,
    locations: L,
    functions: F,
    modules: M,
}

type Marks = Used<
    Renumber<ThreadIndex>,
    Renumber<StackIndex>,
    Renumber<LocationIndex>,
    Renumber<FunctionIndex>,
    Renumber<ModuleIndex>,
>;

type Maps = Used<
    Vec<Option<ThreadIndex>>,
    Vec<Option<StackIndex>>,
    Vec<Option<LocationIndex>>,
    Vec<Option<FunctionIndex>>,
    Vec<Option<ModuleIndex>>,
>;

impl Marks {
    /// What the profile's samples and intervals use: their threads and stacks, the
    /// stacks' locations, and the locations' functions and modules.
    fn of(p: &Profile) -> Marks {
        let mut threads = Renumber::new(p.threads.len());
        let mut stacks = Renumber::new(p.stacks.len());
        for s in &p.samples {
            threads.mark(s.thread);
            stacks.mark(s.stack);
        }
        for i in &p.intervals {
            threads.mark(i.thread);
            if let Some(st) = i.stack {
                stacks.mark(st);
            }
        }
        let mut locations = Renumber::new(p.locations.len());
        for (i, locs) in p.stack_locations.iter().enumerate() {
            if stacks.used(StackIndex::next(i)) {
                locs.iter().for_each(|&l| locations.mark(l));
            }
        }
        let mut functions = Renumber::new(p.functions.len());
        let mut modules = Renumber::new(p.modules.len());
        for (i, l) in p.locations.iter().enumerate() {
            if locations.used(LocationIndex::next(i)) {
                l.functions.iter().for_each(|&f| functions.mark(f));
                if let Some(m) = l.module {
                    modules.mark(m);
                }
            }
        }
        Used {
            threads,
            stacks,
            locations,
            functions,
            modules,
        }
    }

    fn finish(self) -> Maps {
        Used {
            threads: self.threads.finish(),
            stacks: self.stacks.finish(),
            locations: self.locations.finish(),
            functions: self.functions.finish(),
            modules: self.modules.finish(),
        }
    }
}

impl Profile {
    /// Drops threads, stacks, locations, functions and modules no sample uses and
    /// renumbers the rest in their old order.
    pub fn compact(self) -> Profile {
        let maps = Marks::of(&self).finish();
        let Profile {
            meta,
            summary,
            lost,
            damage,
            threads,
            functions,
            stacks,
            stack_locations,
            locations,
            modules,
            mut samples,
            mut intervals,
            spans,
        } = self;
        for s in &mut samples {
            s.thread = renumbered(&maps.threads, s.thread);
            s.stack = renumbered(&maps.stacks, s.stack);
        }
        fn remap<I: TableIndex>(v: &[I], map: &[Option<I>]) -> Vec<I> {
            v.iter().map(|&x| renumbered(map, x)).collect()
        }
        for i in &mut intervals {
            i.thread = renumbered(&maps.threads, i.thread);
            i.stack = i.stack.map(|st| renumbered(&maps.stacks, st));
        }
        let spans = if spans.len() == threads.len() {
            keep(spans, &maps.threads)
        } else {
            spans
        };
        Profile {
            meta,
            summary,
            lost,
            damage,
            threads: keep(threads, &maps.threads),
            functions: keep(functions, &maps.functions),
            stacks: keep(stacks, &maps.stacks)
                .iter()
                .map(|s| remap(s, &maps.functions))
                .collect(),
            stack_locations: keep(stack_locations, &maps.stacks)
                .iter()
                .map(|s| remap(s, &maps.locations))
                .collect(),
            locations: keep(locations, &maps.locations)
                .into_iter()
                .map(|l| Location {
                    module: l.module.map(|m| renumbered(&maps.modules, m)),
                    functions: remap(&l.functions, &maps.functions),
                    ..l
                })
                .collect(),
            modules: keep(modules, &maps.modules),
            samples,
            intervals,
            spans,
        }
    }
}

/// Marks used indices of one table, then maps each used one to its new index.
struct Renumber<I>(Vec<bool>, PhantomData<I>);

impl<I: TableIndex> Renumber<I> {
    fn new(n: usize) -> Self {
        Renumber(vec![false; n], PhantomData)
    }
    fn mark(&mut self, i: I) {
        self.0[i.index()] = true;
    }
    fn used(&self, i: I) -> bool {
        self.0[i.index()]
    }
    /// Old index -> new index (None: unused).
    fn finish(self) -> Vec<Option<I>> {
        let mut next = 0;
        self.0
            .into_iter()
            .map(|u| {
                u.then(|| {
                    next += 1;
                    I::next(next - 1)
                })
            })
            .collect()
    }
}

/// The new index of a used entry.
fn renumbered<I: TableIndex>(map: &[Option<I>], old: I) -> I {
    map[old.index()].expect("every index a kept entry holds was marked used")
}

fn keep<T, I>(v: Vec<T>, map: &[Option<I>]) -> Vec<T> {
    v.into_iter()
        .zip(map)
        .filter(|(_, m)| m.is_some())
        .map(|(x, _)| x)
        .collect()
}
