//! Opening any input a report reads: a recording written by `profile record`, or a
//! perf.data file written by `perf record` (told apart by its magic and converted in
//! memory, see [`crate::perfdata`]). `report`, `diff` and the tests open their inputs
//! here, so the recording format knows nothing of perf's.

use std::path::Path;

use crate::format::{ReadError, Recording};

/// Reads the recording or perf.data file at `path`.
pub fn open(path: &Path) -> Result<Recording, ReadError> {
    let name = path.display().to_string();
    let io = |source| ReadError::Io {
        path: name.clone(),
        source,
    };
    let data = std::fs::read(path).map_err(io)?;
    if crate::perfdata::is_perf_data(&data) {
        // Binaries newer than the file cannot be the ones it sampled.
        let written = std::fs::metadata(path).map_err(io)?.modified().ok();
        let written_ns = written
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        return crate::perfdata::read(&data, &name, written_ns);
    }
    Recording::from_bytes(&data, &name)
}
