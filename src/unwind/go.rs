//! Unwind rules of Go functions in a module without CFI (Go binaries stripped as they
//! ship have neither `.eh_frame` nor `.debug_frame`), from the module's own table
//! ([`crate::elf::gopclntab`]): each pc's frame size, from the function's `pcsp`;
//! and, in any Go module, with CFI or not, the frames Go's own tracebacks end at
//! ([`go_convention`]).

use super::cfi::{CfaRule, RegRule, RuleLookup, UnwindRule};
use crate::elf::gopclntab::GoTable;

/// The rule of a Go function's frame at `svma`, from its module's own table: the
/// return address just above the frame `sp_delta` bytes big (Go's functions keep no
/// other state between), rbp saved below it once the frame is set up (Go keeps
/// frame pointers on amd64: saved at CFA-16 in every frame but the frameless
/// leaves'); nothing to unwind above the root of a goroutine (`runtime.goexit`) or of
/// the main thread (`runtime.rt0_go`).
pub(crate) fn go_rule(go: &GoTable, svma: u64) -> RuleLookup {
    match go.frame_at(svma) {
        Ok(Some(f)) if f.switches_stack => RuleLookup::StackSwitch,
        Ok(Some(f)) if f.sp_delta >= 0 && f.sp_delta % 8 == 0 => RuleLookup::Found(UnwindRule {
            cfa: CfaRule::RegOffset {
                reg: crate::unwind::step::RSP,
                offset: i64::from(f.sp_delta) + 8,
            },
            ra: if f.outermost {
                RegRule::Undefined
            } else {
                RegRule::Offset(-8)
            },
            sp: RegRule::Default,
            bp: if f.sp_delta > 0 {
                RegRule::Offset(-16)
            } else {
                RegRule::SameValue
            },
            signal_frame: false,
        }),
        Ok(Some(_)) => RuleLookup::Bad,
        Ok(None) | Err(_) => RuleLookup::NoFde,
    }
}

/// What Go's conventions say of the frame at `svma` before its CFI is asked: its
/// function switches stacks (nothing above it is on this stack: marked, never a
/// wrong caller), or is the root of its stack (Go's TOPFRAME: `runtime.mstart`,
/// `runtime.goexit`, whose CFI, where the build kept it, goes on into garbage); None
/// for every other function, whose CFI or frame size holds.
pub(crate) fn go_convention(go: &GoTable, svma: u64) -> Option<RuleLookup> {
    match go.conventions_at(svma) {
        Ok(Some((_, true))) => Some(RuleLookup::StackSwitch),
        Ok(Some((true, false))) => Some(RuleLookup::Found(UnwindRule {
            cfa: CfaRule::RegOffset {
                reg: crate::unwind::step::RSP,
                offset: 8,
            },
            ra: RegRule::Undefined,
            sp: RegRule::Default,
            bp: RegRule::SameValue,
            signal_frame: false,
        })),
        _ => None,
    }
}
