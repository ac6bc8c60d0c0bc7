//! Decoding of the kernel's perf records, as laid out for the attributes in
//! `super::sys`. Pure: it takes bytes and returns borrowed views, so it is tested on
//! hand-built records and never trusts a size field.

use perf_event_open_sys::bindings as b;

use super::sys::REGS_MASK;

/// Bytes of the `sample_id` trailer on non-sample records: pid/tid, time, cpu, id.
const SAMPLE_ID_LEN: usize = 32;

/// A PERF_RECORD_SAMPLE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRecord<'a> {
    /// The id of the event the sample came from (PERF_SAMPLE_IDENTIFIER: of the event
    /// opened by the recorder, for the copies the kernel inherited from it).
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    /// The thread's own count of the event (CPU nanoseconds on that event's CPU),
    /// when samples carry it (PERF_SAMPLE_READ).
    pub count: Option<u64>,
    /// Raw callchain entries (u64 little endian), including PERF_CONTEXT_* markers.
    pub callchain: &'a [u8],
    /// User IP, SP, BP at the sample, when the stack was copied.
    pub regs: Option<[u64; 3]>,
    /// User R13 at the sample, when the stack was copied (HotSpot's interpreter keeps
    /// its bytecode pointer there).
    pub r13: Option<u64>,
    /// The valid part of the user stack copy (starts at SP).
    pub stack: &'a [u8],
    /// A tracepoint's fields (PERF_SAMPLE_RAW), for the events [`Layout::raw_ids`]
    /// names; empty otherwise.
    pub raw: &'a [u8],
}

impl SampleRecord<'_> {
    pub fn callchain_entries(&self) -> impl Iterator<Item = u64> + '_ {
        self.callchain
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
    }
}

/// The records the recorder acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(SampleRecord<'a>),
    Mmap {
        pid: u32,
        tid: u32,
        time: u64,
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
        /// Id of the event the count is of (the recorder's event it was inherited from).
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
    /// A record kind the recorder ignores (unthrottle, ksymbol, ...).
    Other {
        time: u64,
    },
}

impl Record<'_> {
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

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
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
}

/// Splits a buffer of whole records into `(type, misc, bytes)`; a size field of zero or
/// one running past the end stops the iteration.
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

/// A record's timestamp without decoding it: samples carry it at a fixed offset
/// (identifier, ip, pid/tid come first), every other record in its sample_id trailer.
/// Used to order records across rings; 0 when the record is too short.
pub fn record_time(rec: &[u8]) -> u64 {
    let kind = rec
        .get(0..4)
        .map_or(0, |k| u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
    let at = if kind == b::PERF_RECORD_SAMPLE {
        Some(32)
    } else {
        rec.len().checked_sub(SAMPLE_ID_LEN - 8)
    };
    at.and_then(|i| rec.get(i..i + 8))
        .map_or(0, |t| u64::from_le_bytes(t.try_into().unwrap_or_default()))
}

/// The NUL-terminated string between `from` and the sample_id trailer.
fn c_string(rec: &[u8], from: usize, to: Result<usize, BadRecord>) -> Result<&[u8], BadRecord> {
    let rest = rec.get(from..to?).ok_or(BadRecord)?;
    Ok(&rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())])
}

/// Decodes one record (header included) of events without PERF_SAMPLE_READ.
pub fn parse_record(rec: &[u8]) -> Result<Record<'_>, BadRecord> {
    parse_record_as(rec, false)
}

/// Decodes one record (header included); `sample_read` says whether samples carry
/// their count (PERF_SAMPLE_READ, one u64 after the period).
pub fn parse_record_as(rec: &[u8], sample_read: bool) -> Result<Record<'_>, BadRecord> {
    let none = std::collections::HashSet::new();
    parse_record_with(
        rec,
        &Layout {
            read: sample_read,
            raw_ids: &none,
        },
    )
}

/// How the samples in a ring are laid out.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'a> {
    /// Samples carry their count (PERF_SAMPLE_READ, one u64 after the period).
    pub read: bool,
    /// The events whose samples are tracepoint samples: identifier, ip, pid/tid, time,
    /// cpu, period, then the raw fields (PERF_SAMPLE_RAW), no callchain.
    pub raw_ids: &'a std::collections::HashSet<u64>,
}

/// Decodes one record (header included) of a ring laid out as `layout` says.
pub fn parse_record_with<'a>(rec: &'a [u8], layout: &Layout) -> Result<Record<'a>, BadRecord> {
    let sample_read = layout.read;
    let mut c = Cursor { data: rec, pos: 0 };
    let kind = c.u32()?;
    let misc = u32::from(u16::from_le_bytes(
        c.take(2)?.try_into().map_err(|_| BadRecord)?,
    ));
    c.take(2)?;
    let body_end = rec.len().checked_sub(SAMPLE_ID_LEN).ok_or(BadRecord);
    let trailer_time = || -> Result<u64, BadRecord> {
        let t = body_end? + 8;
        Ok(u64::from_le_bytes(
            rec.get(t..t + 8)
                .ok_or(BadRecord)?
                .try_into()
                .map_err(|_| BadRecord)?,
        ))
    };
    Ok(match kind {
        b::PERF_RECORD_SAMPLE => Record::Sample(parse_sample(&mut c, sample_read, layout.raw_ids)?),
        b::PERF_RECORD_READ => {
            let (pid, tid) = (c.u32()?, c.u32()?);
            let count = c.u64()?;
            let end = body_end?;
            let id = rec.get(end + 24..end + 32).ok_or(BadRecord)?;
            Record::Read {
                pid,
                tid,
                id: u64::from_le_bytes(id.try_into().map_err(|_| BadRecord)?),
                count,
                time: trailer_time()?,
            }
        }
        b::PERF_RECORD_MMAP2 => {
            let (pid, tid) = (c.u32()?, c.u32()?);
            let (addr, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
            let build_id = if misc & b::PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
                let ids = c.take(24)?;
                let n = (ids[0] as usize).min(20);
                Some(&ids[4..4 + n])
            } else {
                c.take(24)?;
                None
            };
            let prot = c.u32()?;
            let _flags = c.u32()?;
            let filename = c_string(rec, c.pos, body_end)?;
            Record::Mmap {
                pid,
                tid,
                time: trailer_time()?,
                addr,
                len,
                pgoff,
                build_id: build_id.filter(|id| !id.is_empty()),
                executable: prot & libc::PROT_EXEC as u32 != 0,
                filename,
            }
        }
        b::PERF_RECORD_MMAP => {
            let (pid, tid) = (c.u32()?, c.u32()?);
            let (addr, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
            let filename = c_string(rec, c.pos, body_end)?;
            Record::Mmap {
                pid,
                tid,
                time: trailer_time()?,
                addr,
                len,
                pgoff,
                build_id: None,
                executable: misc & b::PERF_RECORD_MISC_MMAP_DATA == 0,
                filename,
            }
        }
        b::PERF_RECORD_COMM => {
            let (pid, tid) = (c.u32()?, c.u32()?);
            let name = c_string(rec, c.pos, body_end)?;
            Record::Comm {
                pid,
                tid,
                time: trailer_time()?,
                name,
                exec: misc & b::PERF_RECORD_MISC_COMM_EXEC != 0,
            }
        }
        b::PERF_RECORD_FORK | b::PERF_RECORD_EXIT => {
            let (pid, ppid, tid, ptid) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
            let time = c.u64()?;
            if kind == b::PERF_RECORD_FORK {
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
        b::PERF_RECORD_LOST => {
            let _id = c.u64()?;
            let count = c.u64()?;
            Record::Lost {
                time: trailer_time()?,
                count,
            }
        }
        b::PERF_RECORD_LOST_SAMPLES => {
            let count = c.u64()?;
            Record::Lost {
                time: trailer_time()?,
                count,
            }
        }
        b::PERF_RECORD_THROTTLE => Record::Throttle { time: c.u64()? },
        b::PERF_RECORD_SWITCH => {
            // No body: everything is in the sample_id trailer (pid/tid, time, cpu, id).
            let mut t = Cursor {
                data: rec,
                pos: body_end?,
            };
            let (pid, tid) = (t.u32()?, t.u32()?);
            let time = t.u64()?;
            let cpu = t.u32()?;
            Record::Switch {
                pid,
                tid,
                time,
                cpu,
                out: misc & b::PERF_RECORD_MISC_SWITCH_OUT != 0,
                preempted: misc & b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0,
            }
        }
        _ => Record::Other {
            time: trailer_time().unwrap_or(0),
        },
    })
}

fn parse_sample<'a>(
    c: &mut Cursor<'a>,
    read: bool,
    raw_ids: &std::collections::HashSet<u64>,
) -> Result<SampleRecord<'a>, BadRecord> {
    // Field order for SAMPLE_TYPE (perf_event_open(2), "PERF_RECORD_SAMPLE").
    let id = c.u64()?;
    let ip = c.u64()?;
    let (pid, tid) = (c.u32()?, c.u32()?);
    let time = c.u64()?;
    let cpu = c.u32()?;
    let _res = c.u32()?;
    let period = c.u64()?;
    if raw_ids.contains(&id) {
        // A tracepoint sample: the raw fields' size (u32), then the fields.
        let size = usize::try_from(c.u32()?).map_err(|_| BadRecord)?;
        let raw = c.take(size)?;
        return Ok(SampleRecord {
            id,
            ip,
            pid,
            tid,
            time,
            cpu,
            period,
            count: None,
            callchain: &[],
            regs: None,
            r13: None,
            stack: &[],
            raw,
        });
    }
    let count = if read { Some(c.u64()?) } else { None };
    let nr = c.u64()?;
    let n = usize::try_from(nr).map_err(|_| BadRecord)?;
    let callchain = c.take(n.checked_mul(8).ok_or(BadRecord)?)?;
    let mut regs = None;
    let mut r13 = None;
    let mut stack: &[u8] = &[];
    // REGS_USER and STACK_USER follow the callchain when the recorder asked for them
    // (dwarf mode); in frame-pointer mode the record ends here.
    if c.pos < c.data.len() {
        let abi = c.u64()?;
        if abi != 0 {
            let mut r = [0u64; 4];
            for slot in r.iter_mut().take(REGS_MASK.count_ones() as usize) {
                *slot = c.u64()?;
            }
            // Registers come in bit order: BP (6), SP (7), IP (8), R13 (21).
            regs = Some([r[2], r[1], r[0]]);
            r13 = (REGS_MASK.count_ones() == 4).then_some(r[3]);
        }
        let size = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
        if size > 0 {
            let data = c.take(size)?;
            let dyn_size = usize::try_from(c.u64()?).map_err(|_| BadRecord)?;
            stack = &data[..dyn_size.min(size)];
        }
    }
    Ok(SampleRecord {
        id,
        ip,
        pid,
        tid,
        time,
        cpu,
        period,
        count,
        callchain,
        regs,
        r13,
        stack,
        raw: &[],
    })
}

#[cfg(test)]
mod tests;
