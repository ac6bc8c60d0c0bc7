//! What the unwinder knows of a range of JIT code: its kind, and for a compiled
//! method the frame its prologue sets up (see [`super::jit`] for how each is unwound).
//! Data only, so that the validated scan ([`super::scan`]) and the JIT step can both
//! use it.

/// What a range of JIT code is, from its perf-map name and its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitKind {
    /// HotSpot's template interpreter (the perf-map entry `Interpreter`).
    Interpreter,
    /// A compiled method, with the frame its prologue sets up.
    Method(JitFrame),
    /// Other generated code: call stubs, adapters, runtime stubs.
    Stub,
}

/// The fixed frame of a compiled method, as its prologue sets it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitFrame {
    /// The prologue allocates a frame: past offset `body` of the method's code, the
    /// return address is at `sp + ra`, the caller's rbp at `sp + bp`.
    Sized {
        /// Offset from sp of the return address.
        ra: u32,
        /// Offset from sp of the saved rbp.
        bp: u32,
        /// Offset into the code of the first instruction after the prologue.
        body: u32,
    },
    /// No frame: the return address stays at sp.
    Frameless,
}

/// A range of JIT code holding an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JitCode {
    /// Where the range starts.
    pub start: u64,
    /// What it is.
    pub kind: JitKind,
}
