//! Tests of the unwinder on real stacks captured by a C fixture, on the test binary's
//! own stack, and on synthetic input (PLT stubs, garbage registers and bytes).

mod chains;
mod fixture;
#[allow(unsafe_code)] // inline asm capturing the test's own registers
mod synthetic;
