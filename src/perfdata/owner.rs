//! Whose running processes a perf.data file may have read: the frames a dwarf
//! recording cannot name by itself (Python, Java) are read from the processes
//! recorded while they run, and only from its owner's (any, for a file root owns).

/// Where a perf.data file came from, as its file system says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// When the file was written (its mtime: binaries without a build-id must be
    /// older, and the recorded processes must have started before).
    pub unix_ns: u64,
    /// The file's owner: the only user whose running processes are read for the
    /// frames a dwarf recording cannot name by itself (Python, Java); any process
    /// when root owns it. A file someone hands to root cannot make it read, and show,
    /// another user's process.
    pub owner_uid: u32,
}

/// Whether a live process may be read for a perf.data file owned by `owner`: any,
/// when root owns the file; else only a process whose every uid (real, effective,
/// saved, filesystem) is the owner's.
pub(super) fn readable_for(pid: u32, owner: u32) -> bool {
    owner == 0 || crate::symbolize::perfmap::TargetUser::of(pid).uids == [owner]
}

/// Why a process is not read for the file (see [`readable_for`]).
pub(super) const OTHER_USER: &str =
    "it runs as another user than the file's owner, and only the owner's processes are read";

#[cfg(test)]
mod tests {
    use super::readable_for;

    #[test]
    fn only_the_files_owner_s_processes_are_read_unless_root_owns_it() {
        let me = std::process::id();
        let uid = crate::symbolize::perfmap::TargetUser::of(me).uids;
        assert_eq!(uid.len(), 1, "the test runs with one uid: {uid:?}");
        assert!(readable_for(me, uid[0]));
        assert!(readable_for(me, 0));
        assert!(!readable_for(me, uid[0] + 1));
        // A process that is gone has no uid: not read for a user's file.
        assert!(!readable_for(u32::MAX - 1, 1000));
    }
}
