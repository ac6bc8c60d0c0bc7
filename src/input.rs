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
    // Owner and time from the file read, not from the path again (which another
    // user may point elsewhere meanwhile, at a file root owns).
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut data).map_err(io)?;
    if crate::perfdata::is_perf_data(&data) {
        // Binaries newer than the file cannot be the ones it sampled; only its
        // owner's processes are read while they run.
        let meta = file.metadata().map_err(io)?;
        let unix_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        let written = crate::perfdata::Written {
            unix_ns,
            owner_uid: std::os::unix::fs::MetadataExt::uid(&meta),
        };
        return crate::perfdata::read(&data, &name, written);
    }
    Recording::from_bytes(&data, &name)
}
