//! What `/proc` says about a process another user may control, read and parsed in one
//! place for every reader above: the recorder, `dump`, the perf.data reader and the
//! runtime readers. It hands back plain values (entries, ids, names, states, opened
//! files); what they mean for a profile is decided above it. Every parser is a pure
//! function, tested on text, that skips or refuses what it cannot read.
//!
//! - [`maps`]: `/proc/PID/maps`, the one parser of it.
//! - [`tasks`]: which processes and threads exist, their names, parents and flags,
//!   the process a thread belongs to, a command line.
//! - [`task`]: one thread without stopping it: its state, the system call it is
//!   blocked in, its kernel stack.
//! - [`state`]: the off-CPU state those say a blocked thread is in.
//! - [`locate`]: the files a process maps, opened as it sees them.

pub(crate) mod locate;
mod maps;
pub(crate) mod state;
pub(crate) mod task;
mod tasks;

pub(crate) use maps::{MapsEntry, read_maps, read_maps_at};
pub(crate) use tasks::*;
