//! What a Ruby process's reader learns and keeps: the library's data read at the
//! first sample, instruction sequences and method entries named within the bytes
//! budget, and the check that frames read from the sample's registers are the
//! sample's.

use std::collections::HashMap;
use std::sync::Arc;

use super::{
    ENTRY_BYTES, MAX_BY_CODE, Name, OVER_BUDGET_ID, Ready, Ruby, SAVED_BYTES, UNREADABLE_ID,
};
use crate::interp::Memory;
use crate::interp::ruby::walk::{self, IseqInfo, Raw, RawFrame, WalkError};
use crate::interp::ruby::{classes, layout};

impl Ruby {
    /// What the library says, read at the first sample (its data is mapped by then).
    pub(super) fn ready<M: Memory + ?Sized>(&mut self, mem: &M) -> Result<&mut Ready, WalkError> {
        if self.ready.is_none() {
            let version = mem
                .c_string_at(self.syms.version.wrapping_add(self.bias), 32)
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .ok_or(WalkError::Read)?;
            self.ready = Some(layout::layout_of(&version).map(|layout| {
                let id2str = self.syms.id2str.wrapping_add(self.bias);
                let follow = |a: u64| mem.bytes_at(a, 128, 128);
                let table = (self.syms.id2str != 0)
                    .then(|| mem.bytes_at(id2str, 32, 32))
                    .flatten()
                    .and_then(|code| layout::symbol_table_in(id2str, &code, &follow))
                    .filter(|&t| mem.u32_at(t).is_some_and(|n| n > 0 && n < 1 << 24));
                Ready {
                    layout,
                    version,
                    vm_ptr: self.syms.vm_ptr.wrapping_add(self.bias),
                    table,
                    classes: HashMap::new(),
                    classes_at: 0,
                    ivar_ids: Default::default(),
                }
            }));
        }
        match &mut self.ready {
            Some(Ok(r)) => Ok(r),
            _ => Err(WalkError::Bad),
        }
    }

    /// The frame id of a name, new or known; [`OVER_BUDGET_ID`] past the budget.
    fn id_of(&mut self, name: Name) -> u64 {
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        let bytes = ENTRY_BYTES + name.0.len() + name.1.as_ref().map_or(0, String::len);
        if !self.meter.fits(bytes) {
            self.trips.names += 1;
            self.stats.over_budget += 1;
            return OVER_BUDGET_ID;
        }
        self.meter.add(bytes);
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert(name.clone(), id);
        self.names.insert(id, name);
        id
    }

    /// What instruction sequence `iseq` says of itself (cached).
    fn info<M: Memory + ?Sized>(&mut self, mem: &M, iseq: u64) -> Option<Arc<IseqInfo>> {
        let Some(Ok(r)) = &self.ready else {
            return None;
        };
        let l = r.layout;
        let body = mem.u64_at(iseq.wrapping_add(l.iseq_body))?;
        if let Some(i) = self.iseqs.get(&(iseq, body)) {
            return Some(i.clone());
        }
        let info = Arc::new(walk::iseq_info(mem, &l, iseq)?);
        if self.by_code.len() >= MAX_BY_CODE {
            self.by_code.clear();
        }
        let (start, len) = info.encoded;
        let end = start.saturating_add(len.saturating_mul(8));
        self.by_code.insert(start, (end, iseq));
        let bytes = ENTRY_BYTES + info.label.len() + info.path.as_ref().map_or(0, String::len);
        self.iseqs
            .insert(&mut self.meter, (iseq, body), info.clone(), bytes);
        self.trips.evicted += self.iseqs.evict(&mut self.meter, |_| {}) as u64;
        Some(info)
    }

    /// The sample's pc if `frames` (read from the control frame the sample's
    /// register gave; the thread's current frame is at `now`) are the sample's: the
    /// first runs instructions that hold the sample's `pc` (or, when a C function the
    /// VM called took that register, a word it saved on the top of the stack
    /// `stack`), and the method of every block is among its callers. Frames the
    /// thread has returned from since (below `now`) keep their words until a call
    /// reuses them: each must still read as a frame that ran something, and a block
    /// among them whose method is not among its callers had that method's frame
    /// reused by the thread's next call, at the first frame the thread still runs,
    /// which is then the block's method again (at its first line: its pc is gone).
    /// (The blocks of the method whose block a thread began with are not.) Else (or
    /// when Ruby code would run straight out of a C method's frame, which only a
    /// `vm_exec` can call) None.
    pub(super) fn at_sample<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        frames: &mut [RawFrame],
        (pc, now): (u64, u64),
        stack: &[u8],
    ) -> Option<u64> {
        // The VM loop's pc: in `r14`, or saved on the top of the stack by a C
        // function it called that took the register.
        let words: Vec<u64> = (stack[..stack.len().min(SAVED_BYTES)].chunks_exact(8))
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
            .collect();
        let pc_of = |i: &IseqInfo| {
            std::iter::once(pc)
                .chain(words.iter().copied())
                .find(|&w| i.holds(w))
        };
        let caller = match frames.get(1).map(|f| f.raw) {
            Some(Raw::Iseq { iseq, .. }) => iseq,
            Some(Raw::Cfunc { me }) => me,
            _ => 0,
        };
        let pc = match frames.first()?.raw {
            Raw::Iseq { iseq, .. }
                if let Some(pc) = self.info(mem, iseq).and_then(|i| pc_of(&i)) =>
            {
                if self.callers.len() >= MAX_BY_CODE {
                    self.callers.clear();
                }
                self.callers.insert((frames[0].at, iseq), caller);
                pc
            }
            // The frame there is another by now (the thread returned and called
            // again at the same depth): the sequence whose code holds the sample's
            // pc ran there, if its caller is the one seen calling it there before
            // (the thread may have returned further and called from elsewhere).
            _ => {
                let (_, &(end, iseq)) = self.by_code.range(..=pc).next_back()?;
                if pc > end || !self.info(mem, iseq)?.holds(pc) {
                    return None;
                }
                if self.callers.get(&(frames[0].at, iseq)) != Some(&caller) {
                    return None;
                }
                frames[0].raw = Raw::Iseq { iseq, pc, ep: 0 };
                pc
            }
        };
        if (frames.iter()).any(|f| f.at < now && f.raw == Raw::Other) {
            return None;
        }
        // A thread's first frame runs the block given to `Thread.new`, whose method
        // is in another thread's stack, as are those of the blocks within it.
        let root_home = match frames.last().map(|f| f.raw) {
            Some(Raw::Iseq { iseq, .. }) => Some(self.info(mem, iseq)?.home),
            _ => None,
        };
        for i in 0..frames.len() {
            let Raw::Iseq { iseq, .. } = frames[i].raw else {
                continue;
            };
            let home = self.info(mem, iseq)?.home;
            let found = |f: &RawFrame| matches!(f.raw, Raw::Iseq { iseq, .. } if iseq == home);
            if home == iseq || root_home == Some(home) || frames[i + 1..].iter().any(found) {
                continue;
            }
            // (Checked for frames the thread still runs too: it may have left them
            // while they were read.)
            let j = (i + 1..frames.len()).find(|&j| frames[j].at >= now && frames[i].at < now)?;
            // A block flagged FINISH was called from C (`Array#each`, `Proc#call`):
            // the frame out of it is a C method's, not its method's. The frame in
            // the method's place now is any other call's (a method's, a C method's).
            let from_c = matches!(frames[i + 1].raw, Raw::Cfunc { .. });
            if frames[i].finish && (j == i + 1 || !from_c) {
                return None;
            }
            if let Raw::Iseq { iseq: other, .. } = frames[j].raw
                && self.info(mem, other)?.home != other
            {
                return None;
            }
            frames[j].raw = Raw::Iseq {
                iseq: home,
                pc: 0,
                ep: 0,
            };
        }
        // A C method calls Ruby only through a new `vm_exec` (its first frame flagged
        // FINISH): a frame of Ruby code straight out of a C method's is one the
        // thread left, its caller's place reused (`Process.clock_gettime` over a
        // `baz` that `run` had called).
        let from_c = |w: &[RawFrame]| {
            matches!(w[1].raw, Raw::Cfunc { .. })
                && matches!(w[0].raw, Raw::Iseq { .. })
                && !w[0].finish
        };
        if frames.windows(2).any(from_c) {
            return None;
        }
        Some(pc)
    }

    /// The frame id of instruction sequence `iseq` at `pc`, its environment at `ep`
    /// (0 when not known): labelled as Ruby 3.4 shows it, with the class of its
    /// method (`block in Greeter#work`).
    pub(super) fn iseq_id<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        (iseq, pc, ep): (u64, u64, u64),
    ) -> u64 {
        let Some(info) = self.info(mem, iseq) else {
            return UNREADABLE_ID;
        };
        let home = match info.home {
            h if h == iseq => Some(info.clone()),
            h => self.info(mem, h),
        };
        let Some(Ok(r)) = &self.ready else {
            return UNREADABLE_ID;
        };
        let line = walk::line_at(mem, &r.layout, &info, pc);
        let label = match home {
            Some(h) => {
                let q = self.home_qualifier(mem, (info.home, &h), ep);
                classes::qualified(&info.label, &h.label, &q)
            }
            None => info.label.clone(),
        };
        self.id_of((label, info.path.clone(), Some(line)))
    }

    /// The frame id of the C method of method entry `me`: `Owner#name`
    /// (`Array#each`, `Process.clock_gettime`), its name alone for an anonymous
    /// owner.
    pub(super) fn cfunc_id<M: Memory + ?Sized>(&mut self, mem: &M, me: u64) -> u64 {
        if let Some(&id) = self.methods.get(&me) {
            return id;
        }
        let Some(Ok(r)) = &self.ready else {
            return UNREADABLE_ID;
        };
        let l = r.layout;
        let Some(m) = walk::method_entry(mem, &l, me) else {
            return UNREADABLE_ID;
        };
        let method = r.table.and_then(|t| walk::id_name(mem, &l, t, m.id));
        let q = self.owner_qualifier(mem, m.owner);
        let name = format!("{q}{}", method.as_deref().unwrap_or("[c method]"));
        let fid = self.id_of((name, None, None));
        self.methods.insert(&mut self.meter, me, fid, ENTRY_BYTES);
        self.trips.evicted += self.methods.evict(&mut self.meter, |_| {}) as u64;
        fid
    }
}
