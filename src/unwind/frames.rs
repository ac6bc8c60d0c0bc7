//! Unwound addresses as the recording's frames: the one place both readers of user
//! stacks (the recorder and the perf.data reader) turn them into `Frame`s.

use super::addrspace::AddressSpaces;
use super::{FrameAddress, TruncateReason};
use crate::format::{Frame, FrameKind, Truncation};

/// The truncation marker for an unwind that stopped early.
pub(crate) fn truncation(r: TruncateReason) -> Truncation {
    match r {
        TruncateReason::StackCopyExhausted => Truncation::StackCopyExhausted,
        TruncateReason::NoUnwindInfo => Truncation::NoUnwindInfo,
        TruncateReason::BadUnwindInfo => Truncation::BadUnwindInfo,
        TruncateReason::TooDeep => Truncation::TooDeep,
        TruncateReason::GoStackSwitch => Truncation::GoStackSwitch,
    }
}

/// Appends a frame for each of `addrs` (process `pid`), each with the mapping that
/// held it. A frame-pointer walk (`fp`) that left the chain, a return address in no
/// mapping, is no stack from there on: the walk stops and the answer says why.
pub(crate) fn push_user_frames(
    addrs: &[FrameAddress],
    spaces: &AddressSpaces,
    pid: u32,
    fp: bool,
    out: &mut Vec<Frame>,
) -> Option<Truncation> {
    for &address in addrs {
        let kind = match address {
            FrameAddress::InstructionPointer(_) => FrameKind::User,
            FrameAddress::ReturnAddress(_) => FrameKind::Return,
        };
        let addr = address.address();
        let mapping = spaces.lookup(pid, kind.lookup_address(addr));
        if fp && kind == FrameKind::Return && mapping.is_none() {
            return Some(Truncation::NoFramePointer);
        }
        out.push(Frame {
            kind,
            pid,
            addr,
            mapping,
        });
    }
    None
}
