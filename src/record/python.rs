//! Python frames in the recorder: the shared stage ([`crate::replay::python`]) reads a
//! sample's Python frames when the sample is handled, from the process as it is then;
//! the recorder's part is to handle samples soon after they were taken.

/// How long the recorder's loop sleeps at most while a Python process is recorded:
/// a sample's Python frames are read when it is handled, and the longer after the
/// sample, the more often the thread has moved on (a loop round handles the records of
/// the round before).
pub(super) const POLL_MS: i32 = 10;
