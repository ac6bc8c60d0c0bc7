//! CPython frames read from outside the process, for 3.8 to 3.13 started with no
//! flag: [`module`] recognises the interpreter in a mapped file, [`layout`] says where
//! each version keeps what is read, [`walk`] finds a thread's state and its chain of
//! frames, [`code`] names code objects and [`lines`] gives an instruction's line;
//! [`process`] ties them together for one process across samples. Everything reads
//! through [`Memory`], so it runs the same on a live process (overlaid with a sample's
//! stack copy) and on a [`crate::interp::Snapshot`].

pub mod code;
pub mod instant;
pub mod layout;
pub mod lines;
pub mod module;
pub mod process;
pub mod walk;

#[cfg(test)]
mod tests;

pub use instant::SampleInstant;
pub use layout::{Layout, Unsupported};
pub use module::PythonModule;
pub use process::{
    BUDGET, BUDGET_NAME, CHANGED, CHANGED_NAME, COPIED, ChainStart, Counts, FrameName,
    PythonProcess, copy_span,
};
pub use walk::Runtime;

use crate::interp::Memory;

/// The runtime of a process whose CPython is `module`, mapped with `bias`: its version
/// from `_Py_DebugOffsets` (3.13+), `Py_Version` (3.11+), the module's file name, or
/// `exe_version` (the process's executable's name), in that order.
pub fn runtime(
    mem: &impl Memory,
    module: &PythonModule,
    bias: u64,
    exe_version: Option<(u8, u8)>,
) -> Result<Runtime, Unsupported> {
    let runtime = module.runtime.wrapping_add(bias);
    let code_type = module.code_type.wrapping_add(bias);
    let layout = match Layout::from_debug_offsets(mem, runtime) {
        Some(l) => l?,
        None => {
            let hex = module
                .py_version
                .and_then(|a| mem.u32_at(a.wrapping_add(bias)))
                .map(|hex| ((hex >> 24) as u8, (hex >> 16) as u8));
            let (major, minor) = hex
                .or(module.name_version)
                .or(exe_version)
                .ok_or(Unsupported::UnknownVersion)?;
            Layout::for_version(major, minor)?
        }
    };
    Ok(Runtime {
        layout,
        runtime,
        code_type,
    })
}
