//! One decoder of the kernel's perf records (`PERF_RECORD_*`), for any layout an event
//! was opened with. The recorder describes the attributes it opened and decodes its
//! rings through them; the perf.data reader describes the attributes the file holds.
//! Pure: it takes bytes and returns borrowed views, never trusts a size or count it
//! reads, and is tested on hand-built records.

use super::abi::{
    BRANCH_HW_INDEX, MISC_COMM_EXEC, MISC_CPUMODE_MASK, MISC_KERNEL, MISC_MMAP_BUILD_ID,
    MISC_MMAP_DATA, MISC_SWITCH_OUT, MISC_SWITCH_OUT_PREEMPT, PROT_EXEC,
};
pub use super::abi::{
    REG_BP, REG_BX, REG_IP, REG_R12, REG_R13, REG_R14, REG_R15, REG_SP, context, kind, sample,
};
pub use super::layouts::Layouts;

/// How one event's records are laid out: the fields of its `perf_event_attr` that
/// decide it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    pub sample_type: u64,
    pub read_format: u64,
    /// Non-sample records end with the `sample_id` trailer.
    pub sample_id_all: bool,
    pub sample_regs_user: u64,
    pub branch_sample_type: u64,
}

/// A PERF_RECORD_SAMPLE, with the fields this crate uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The id of the event the sample came from (IDENTIFIER or ID; 0 without): for
    /// inherited events, the id of the event they were inherited from.
    pub id: u64,
    /// The id of the event that fired (STREAM_ID): `id` itself, or that of an
    /// inherited copy of it.
    pub stream_id: Option<u64>,
    /// The sampled instruction address (IP).
    pub ip: Option<u64>,
    /// The sample was taken in the kernel (the record's cpumode).
    pub in_kernel: bool,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// The period it stands for (the event's unit: ns for the clocks).
    pub period: Option<u64>,
    /// The thread's own count of the event (READ without a group: its value).
    pub count: Option<u64>,
    /// Raw callchain entries, [`context`] markers included (u64 little endian).
    pub callchain: &'a [u8],
    /// User ip, sp, bp, when the sample carries those registers.
    pub regs: Option<[u64; 3]>,
    /// Every user register the sample carries ([`Sample::reg`]).
    pub user_regs: UserRegs<'a>,
    /// The valid part of the user stack copy (starts at sp).
    pub stack: &'a [u8],
    /// A tracepoint's fields (RAW); empty otherwise.
    pub raw: &'a [u8],
}

/// The user registers of a sample, as the kernel wrote them: one u64 per bit of the
/// event's `sample_regs_user`, in bit order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserRegs<'a> {
    mask: u64,
    values: &'a [u8],
}

impl UserRegs<'_> {
    /// Register `r` (a `REG_*` number), if the sample carries it.
    pub fn get(&self, r: u32) -> Option<u64> {
        if r >= 64 || self.mask & (1 << r) == 0 {
            return None;
        }
        // A register's index is the number of set bits below its own.
        let i = (self.mask & ((1u64 << r) - 1)).count_ones() as usize * 8;
        Some(u64::from_le_bytes(
            self.values.get(i..i + 8)?.try_into().ok()?,
        ))
    }
}

impl Sample<'_> {
    /// User register `r` (a `REG_*` number) at the sample, if it carries it.
    pub fn reg(&self, r: u32) -> Option<u64> {
        self.user_regs.get(r)
    }

    /// The callchain's entries, markers included.
    pub fn callchain_entries(&self) -> impl Iterator<Item = u64> + '_ {
        self.callchain
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
    }
}

/// The records this crate acts on. Times are 0 where the layout carries none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    Mmap {
        pid: u32,
        tid: u32,
        time: u64,
        /// A kernel mapping (the kernel image, a module).
        kernel: bool,
        addr: u64,
        len: u64,
        pgoff: u64,
        build_id: Option<&'a [u8]>,
        executable: bool,
        filename: &'a [u8],
    },
    Comm {
        pid: u32,
        tid: u32,
        time: u64,
        name: &'a [u8],
        exec: bool,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        /// The thread that created this one.
        ptid: u32,
        time: u64,
    },
    /// PERF_RECORD_READ: an inherited event's final count, written as its thread exits
    /// (`inherit_stat`).
    Read {
        pid: u32,
        tid: u32,
        /// Id of the event the count is of (from the trailer; 0 without).
        id: u64,
        count: u64,
        time: u64,
    },
    Exit {
        pid: u32,
        tid: u32,
        time: u64,
    },
    Lost {
        time: u64,
        count: u64,
    },
    Throttle {
        time: u64,
    },
    /// PERF_RECORD_SWITCH: `tid` was switched out (`out`; `preempted` when it was
    /// still runnable) or in on `cpu`.
    Switch {
        pid: u32,
        tid: u32,
        time: u64,
        cpu: u32,
        out: bool,
        preempted: bool,
    },
    /// A record kind this crate ignores (unthrottle, ksymbol, perf's own, ...).
    Other {
        time: u64,
    },
}

impl Record<'_> {
    /// The record's time (0 where its layout carries none).
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.time,
            Record::Mmap { time, .. }
            | Record::Comm { time, .. }
            | Record::Fork { time, .. }
            | Record::Exit { time, .. }
            | Record::Read { time, .. }
            | Record::Lost { time, .. }
            | Record::Throttle { time }
            | Record::Switch { time, .. }
            | Record::Other { time } => *time,
        }
    }
}

/// A record whose size or fields do not add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRecord;

/// A little-endian reader over a byte slice; every read checks the bounds.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn at(data: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { data, pos }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], BadRecord> {
        let end = self.pos.checked_add(n).ok_or(BadRecord)?;
        let s = self.data.get(self.pos..end).ok_or(BadRecord)?;
        self.pos = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, BadRecord> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().map_err(|_| BadRecord)?,
        ))
    }
    fn u32(&mut self) -> Result<u32, BadRecord> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().map_err(|_| BadRecord)?,
        ))
    }
    fn len(&mut self, unit: usize) -> Result<&'a [u8], BadRecord> {
        let n = usize::try_from(self.u64()?).map_err(|_| BadRecord)?;
        self.take(n.checked_mul(unit).ok_or(BadRecord)?)
    }
}

/// A record's type and misc bits (header included in `rec`); None if too short.
pub fn header(rec: &[u8]) -> Option<(u32, u16)> {
    let h = rec.get(..8)?;
    Some((
        u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        u16::from_le_bytes([h[4], h[5]]),
    ))
}

/// Splits a buffer of whole records; a size field under 8 or one running past the
/// end stops the iteration.
pub fn split_records(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let header = buf.get(pos..pos + 8)?;
        let size = u16::from_le_bytes([header[6], header[7]]) as usize;
        if size < 8 {
            return None;
        }
        let rec = buf.get(pos..pos + size)?;
        pos += size;
        Some(rec)
    })
}

impl Layout {
    pub(super) fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }

    /// Bytes of the `sample_id` trailer on non-sample records.
    pub fn trailer_len(&self) -> usize {
        if !self.sample_id_all {
            return 0;
        }
        [
            sample::TID,
            sample::TIME,
            sample::ID,
            sample::STREAM_ID,
            sample::CPU,
            sample::IDENTIFIER,
        ]
        .iter()
        .filter(|&&bit| self.has(bit))
        .count()
            * 8
    }

    /// A record's time without decoding it (header included in `rec`): a sample's
    /// TIME field, another record's trailer; None when the layout or record has none.
    pub fn time(&self, rec: &[u8]) -> Option<u64> {
        if !self.has(sample::TIME) {
            return None;
        }
        let (kind, _) = header(rec)?;
        let at = if kind == kind::SAMPLE {
            8 + [sample::IDENTIFIER, sample::IP, sample::TID]
                .iter()
                .filter(|&&bit| self.has(bit))
                .count()
                * 8
        } else {
            let trailer = self.trailer_len();
            if trailer == 0 || kind >= 64 {
                return None;
            }
            rec.len().checked_sub(trailer)? + if self.has(sample::TID) { 8 } else { 0 }
        };
        Cursor::at(rec, at).u64().ok()
    }

    /// The event id a record carries (IDENTIFIER wherever it is, or a sample's ID).
    pub fn id(&self, rec: &[u8]) -> Option<u64> {
        let (kind, _) = header(rec)?;
        if kind == kind::SAMPLE {
            if self.has(sample::IDENTIFIER) {
                return Cursor::at(rec, 8).u64().ok();
            }
            if self.has(sample::ID) {
                let skip = [sample::IP, sample::TID, sample::TIME, sample::ADDR]
                    .iter()
                    .filter(|&&bit| self.has(bit))
                    .count()
                    * 8;
                return Cursor::at(rec, 8 + skip).u64().ok();
            }
            return None;
        }
        if self.sample_id_all && self.has(sample::IDENTIFIER) && kind < 64 {
            return Cursor::at(rec, rec.len().checked_sub(8)?).u64().ok();
        }
        None
    }

    /// Decodes one record (header included) laid out as `self` says.
    pub fn decode<'a>(&self, rec: &'a [u8]) -> Result<Record<'a>, BadRecord> {
        let (kind, misc) = header(rec).ok_or(BadRecord)?;
        let mut c = Cursor::at(rec, 8);
        let body_end = rec
            .len()
            .checked_sub(self.trailer_len())
            .filter(|&e| e >= 8)
            .ok_or(BadRecord);
        let trailer = self.trailer(rec, body_end);
        let c_string = |from: usize| -> Result<&'a [u8], BadRecord> {
            let rest = rec.get(from..body_end?).ok_or(BadRecord)?;
            Ok(&rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())])
        };
        let in_kernel = misc & MISC_CPUMODE_MASK == MISC_KERNEL;
        Ok(match kind {
            kind::SAMPLE => {
                let mut s = self.sample(&mut c)?;
                s.in_kernel = in_kernel;
                Record::Sample(s)
            }
            kind::MMAP | kind::MMAP2 => {
                let (pid, tid) = (c.u32()?, c.u32()?);
                let (addr, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
                let mut build_id = None;
                let mut executable = misc & MISC_MMAP_DATA == 0;
                if kind == kind::MMAP2 {
                    let ids = c.take(24)?;
                    if misc & MISC_MMAP_BUILD_ID != 0 {
                        let n = usize::from(ids[0]).min(20);
                        build_id = Some(&ids[4..4 + n]).filter(|id| !id.is_empty());
                    }
                    let prot = c.u32()?;
                    let _flags = c.u32()?;
                    executable = prot & PROT_EXEC != 0;
                }
                Record::Mmap {
                    pid,
                    tid,
                    time: trailer.time,
                    kernel: in_kernel,
                    addr,
                    len,
                    pgoff,
                    build_id,
                    executable,
                    filename: c_string(c.pos)?,
                }
            }
            kind::COMM => {
                let (pid, tid) = (c.u32()?, c.u32()?);
                Record::Comm {
                    pid,
                    tid,
                    time: trailer.time,
                    name: c_string(c.pos)?,
                    exec: misc & MISC_COMM_EXEC != 0,
                }
            }
            kind::FORK | kind::EXIT => {
                let (pid, ppid, tid, ptid) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
                let time = c.u64()?;
                if kind == kind::FORK {
                    Record::Fork {
                        pid,
                        ppid,
                        tid,
                        ptid,
                        time,
                    }
                } else {
                    Record::Exit { pid, tid, time }
                }
            }
            kind::READ => {
                let (pid, tid) = (c.u32()?, c.u32()?);
                let count = c.u64()?;
                Record::Read {
                    pid,
                    tid,
                    id: trailer.id,
                    count,
                    time: trailer.time,
                }
            }
            kind::LOST => {
                let _id = c.u64()?;
                Record::Lost {
                    time: trailer.time,
                    count: c.u64()?,
                }
            }
            kind::LOST_SAMPLES => Record::Lost {
                count: c.u64()?,
                time: trailer.time,
            },
            kind::THROTTLE => Record::Throttle { time: c.u64()? },
            kind::SWITCH => {
                // No body: everything is in the trailer.
                body_end?;
                Record::Switch {
                    pid: trailer.pid,
                    tid: trailer.tid,
                    time: trailer.time,
                    cpu: trailer.cpu,
                    out: misc & MISC_SWITCH_OUT != 0,
                    preempted: misc & MISC_SWITCH_OUT_PREEMPT != 0,
                }
            }
            _ => Record::Other { time: trailer.time },
        })
    }

    /// The `sample_id` trailer's fields (zero where absent or unreadable).
    fn trailer(&self, rec: &[u8], body_end: Result<usize, BadRecord>) -> Trailer {
        let mut t = Trailer::default();
        let Ok(end) = body_end else { return t };
        if !self.sample_id_all {
            return t;
        }
        let mut c = Cursor::at(rec, end);
        let mut word = |bit: u64| self.has(bit).then(|| c.u64().unwrap_or(0));
        if let Some(w) = word(sample::TID) {
            (t.pid, t.tid) = (w as u32, (w >> 32) as u32);
        }
        t.time = word(sample::TIME).unwrap_or(0);
        let id = word(sample::ID);
        word(sample::STREAM_ID);
        if let Some(w) = word(sample::CPU) {
            t.cpu = w as u32;
        }
        t.id = word(sample::IDENTIFIER).or(id).unwrap_or(0);
        t
    }

    /// A PERF_RECORD_SAMPLE body, field by field in the order of perf_event_open(2),
    /// up to the user stack (the fields after it are not used).
    fn sample<'a>(&self, c: &mut Cursor<'a>) -> Result<Sample<'a>, BadRecord> {
        let mut s = Sample::default();
        let word = |c: &mut Cursor, bit: u64| -> Result<Option<u64>, BadRecord> {
            if self.has(bit) {
                c.u64().map(Some)
            } else {
                Ok(None)
            }
        };
        let identifier = word(c, sample::IDENTIFIER)?;
        s.ip = word(c, sample::IP)?;
        if self.has(sample::TID) {
            s.pid = c.u32()?;
            s.tid = c.u32()?;
        }
        s.time = word(c, sample::TIME)?.unwrap_or(0);
        word(c, sample::ADDR)?;
        let id = word(c, sample::ID)?;
        s.id = identifier.or(id).unwrap_or(0);
        s.stream_id = word(c, sample::STREAM_ID)?;
        if self.has(sample::CPU) {
            s.cpu = c.u32()?;
            c.u32()?;
        }
        s.period = word(c, sample::PERIOD)?;
        if self.has(sample::READ) {
            // read_format: TOTAL_TIME_ENABLED 1, TOTAL_TIME_RUNNING 2, ID 4, GROUP 8,
            // LOST 16. Without GROUP the value comes first.
            let f = self.read_format;
            let per_value = 1 + usize::from(f & 4 != 0) + usize::from(f & 16 != 0);
            let times = usize::from(f & 1 != 0) + usize::from(f & 2 != 0);
            if f & 8 != 0 {
                let nr = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
                let words = nr
                    .checked_mul(per_value)
                    .and_then(|n| n.checked_add(times))
                    .ok_or(BadRecord)?;
                c.take(words.checked_mul(8).ok_or(BadRecord)?)?;
            } else {
                s.count = Some(c.u64()?);
                c.take((per_value - 1 + times) * 8)?;
            }
        }
        if self.has(sample::CALLCHAIN) {
            s.callchain = c.len(8)?;
        }
        if self.has(sample::RAW) {
            let n = usize::try_from(c.u32()?).map_err(|_| BadRecord)?;
            s.raw = c.take(n)?;
        }
        if self.has(sample::BRANCH_STACK) {
            let nr = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
            if self.branch_sample_type & BRANCH_HW_INDEX != 0 {
                c.u64()?;
            }
            c.take(nr.checked_mul(24).ok_or(BadRecord)?)?;
        }
        if self.has(sample::REGS_USER) {
            let abi = c.u64()?;
            if abi != 0 {
                let mask = self.sample_regs_user;
                let regs = UserRegs {
                    mask,
                    values: c.take(mask.count_ones() as usize * 8)?,
                };
                if let (Some(ip), Some(sp), Some(bp)) =
                    (regs.get(REG_IP), regs.get(REG_SP), regs.get(REG_BP))
                {
                    s.regs = Some([ip, sp, bp]);
                }
                s.user_regs = regs;
            }
        }
        if self.has(sample::STACK_USER) {
            let size = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
            if size > 0 {
                let data = c.take(size)?;
                let dyn_size = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
                s.stack = &data[..dyn_size.min(size)];
            }
        }
        Ok(s)
    }
}

#[derive(Default)]
struct Trailer {
    pid: u32,
    tid: u32,
    time: u64,
    cpu: u32,
    id: u64,
}

#[cfg(test)]
mod tests;
