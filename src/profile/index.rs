//! Typed indices into the [`Profile`](super::Profile)'s tables, so that an index into
//! one table cannot be used for another.

/// Declares an index into one table of the [`Profile`](super::Profile), a type of its own so that
/// indices into different tables cannot be mixed.
macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The index, for slices.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The index of the next entry of a table `len` long.
            ///
            /// # Panics
            /// If the table already holds 2^32 entries (a model of that size does not
            /// fit in memory).
            pub fn next(len: usize) -> Self {
                $name(u32::try_from(len).expect("a profile table holds fewer than 2^32 entries"))
            }
        }

        impl TableIndex for $name {
            fn index(self) -> usize {
                self.0 as usize
            }
            fn next(len: usize) -> Self {
                $name::next(len)
            }
        }
    };
}

/// What the index types have in common, for code generic over tables.
pub(crate) trait TableIndex: Copy {
    fn index(self) -> usize;
    fn next(len: usize) -> Self;
}

index_type!(
    /// Index into [`Profile::threads`](super::Profile::threads).
    ThreadIndex
);
index_type!(
    /// Index into [`Profile::functions`](super::Profile::functions).
    FunctionIndex
);
index_type!(
    /// Index into [`Profile::stacks`](super::Profile::stacks) and [`Profile::stack_locations`](super::Profile::stack_locations).
    StackIndex
);
index_type!(
    /// Index into [`Profile::locations`](super::Profile::locations).
    LocationIndex
);
index_type!(
    /// Index into [`Profile::modules`](super::Profile::modules).
    ModuleIndex
);
