//! Decoding of perf.data files (`perf record`'s output, "PERFILE2"): the file header,
//! the event attributes, the records of the data section and the feature sections
//! this crate uses (build-ids, host name, kernel release, perf version, command line).
//! Pure: it takes the file's bytes and returns borrowed views, never trusts a size,
//! offset or count it reads, and allocates only in proportion to the file.
//!
//! Why not the linux-perf-data crate, which the project prefers over a new parser:
//! version 0.13 allocates buffers sized by counts read from the file
//! (`Vec::with_capacity(nr)` for event descriptions, `vec![0; size]` for feature
//! sections and AUX data), divides by the file's attribute size and unwraps on
//! records it cannot attribute, so a cut or lying file can abort the process (an
//! allocation failure is not a panic that can be caught). Every report reads
//! recordings as hostile input; this reader needs only the part of the format
//! perf record writes for CPU samples, and bounds every read by the bytes present.
//!
//! Layout (tools/perf/Documentation/perf.data-file-format.txt in the kernel tree):
//! a 104-byte header with the attribute, data and event-types sections and a
//! 256-bit feature bitmap; after the data section, one section descriptor per set
//! feature bit, in bit order.

/// First eight bytes of a perf.data file written on a little-endian machine.
pub(super) const MAGIC: [u8; 8] = *b"PERFILE2";
/// The same magic as a big-endian machine writes it.
pub(super) const MAGIC_BIG_ENDIAN: [u8; 8] = *b"2ELIFREP";

const HEADER_LEN: usize = 104;

use crate::replay::decode::{BadRecord, Layout, Record};
pub(super) use crate::replay::decode::{kind as record, sample};

/// Feature bits (tools/perf/util/header.h, `HEADER_*`).
pub(super) mod feature {
    pub(crate) const BUILD_ID: usize = 2;
    pub(crate) const HOSTNAME: usize = 3;
    pub(crate) const OSRELEASE: usize = 4;
    pub(crate) const VERSION: usize = 5;
    pub(crate) const ARCH: usize = 6;
    pub(crate) const CPUDESC: usize = 8;
    pub(crate) const CMDLINE: usize = 11;
}

const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// Why a perf.data file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PerfDataError {
    /// Written on a big-endian machine.
    #[error(
        "it is a perf.data file from a big-endian machine, which profile does not read; convert it there with `perf script` or `perf report`"
    )]
    BigEndian,
    /// Not a perf.data file at all.
    #[error("it is not a perf.data file (it does not start with PERFILE2)")]
    NotPerfData,
    /// The header, a section or a record does not fit the file.
    #[error("it is cut short or damaged: {0}")]
    Damaged(String),
    /// Something perf can write that this reader does not follow.
    #[error("{0}")]
    Unsupported(String),
}

fn damaged(what: impl Into<String>) -> PerfDataError {
    PerfDataError::Damaged(what.into())
}

/// A little-endian reader over a byte slice; every read checks the bounds.
#[derive(Clone, Copy)]
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub(super) fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, pos: 0 }
    }

    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

/// A `{offset, size}` section of the file, checked to lie inside it.
fn section<'a>(file: &'a [u8], b: &mut Bytes, what: &str) -> Result<&'a [u8], PerfDataError> {
    let (offset, size) = (b.u64(), b.u64());
    let (Some(offset), Some(size)) = (offset, size) else {
        return Err(damaged(format!(
            "the file ends inside the {what} descriptor"
        )));
    };
    usize::try_from(offset)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(o, s)| file.get(o..o.checked_add(s)?))
        .ok_or_else(|| {
            damaged(format!(
                "its {what} ({size} bytes at byte {offset}) lies past the end of the file ({} bytes)",
                file.len()
            ))
        })
}

/// One event of the recording: its `perf_event_attr` fields this reader needs, and the
/// ids its records carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Attr {
    /// `PERF_TYPE_*`.
    pub kind: u32,
    pub config: u64,
    /// The period, or the frequency when `freq` is set.
    pub sample_period: u64,
    pub freq: bool,
    pub sample_type: u64,
    pub read_format: u64,
    pub sample_id_all: bool,
    pub exclude_callchain_user: bool,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    /// The most callchain entries a sample carries (`--max-stack`); 0: the kernel's
    /// `perf_event_max_stack`.
    pub sample_max_stack: u16,
    pub ids: Vec<u64>,
}

impl Attr {
    fn parse(raw: &[u8], ids: &[u8]) -> Attr {
        let mut b = Bytes::new(raw);
        let mut next = || b.u64().unwrap_or(0);
        let word0 = next();
        let config = next();
        let sample_period = next();
        let sample_type = next();
        let read_format = next();
        let flags = next();
        let _wakeup = next();
        let _config1 = next();
        let _config2 = next();
        let branch_sample_type = next();
        let sample_regs_user = next();
        let stack_and_clock = next();
        let _regs_intr = next();
        let aux_and_max_stack = next();
        Attr {
            kind: word0 as u32,
            config,
            sample_period,
            freq: flags & (1 << 10) != 0,
            sample_type,
            read_format,
            sample_id_all: flags & (1 << 18) != 0,
            exclude_callchain_user: flags & (1 << 22) != 0,
            branch_sample_type,
            sample_regs_user,
            sample_stack_user: stack_and_clock as u32,
            sample_max_stack: (aux_and_max_stack >> 32) as u16,
            ids: ids
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        }
    }

    /// perf's name for the event, for the events profile reads; None for others.
    pub(super) fn cpu_time_event(&self) -> Option<&'static str> {
        match (self.kind, self.config) {
            // PERF_TYPE_SOFTWARE: PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK.
            (1, 0) => Some("cpu-clock"),
            (1, 1) => Some("task-clock"),
            // PERF_TYPE_HARDWARE: PERF_COUNT_HW_CPU_CYCLES (the low 32 bits; hybrid
            // CPUs put the PMU type in the high ones).
            (0, c) if c & 0xffff_ffff == 0 => Some("cycles"),
            _ => None,
        }
    }

    /// How this event's records are laid out, for the decoder.
    pub(super) fn layout(&self) -> Layout {
        Layout {
            sample_type: self.sample_type,
            read_format: self.read_format,
            sample_id_all: self.sample_id_all,
            sample_regs_user: self.sample_regs_user,
            branch_sample_type: self.branch_sample_type,
        }
    }
}

/// A build-id table entry (the BUILD_ID feature): which file had which build-id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BuildIdEntry {
    /// A kernel-space entry (the kernel, its modules).
    pub kernel: bool,
    pub path: String,
    pub build_id: Vec<u8>,
}

/// A parsed perf.data file: its header facts and its records, not yet decoded.
#[derive(Debug, Clone)]
pub(super) struct PerfFile<'a> {
    /// perf record did not finish the file (it was killed): no feature sections, and
    /// the data runs to the end of the file.
    pub unfinished: bool,
    pub attrs: Vec<Attr>,
    /// The data section.
    pub data: &'a [u8],
    pub build_ids: Vec<BuildIdEntry>,
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub perf_version: Option<String>,
    pub arch: Option<String>,
    pub cmdline: Vec<String>,
    /// The CPU's model name (`/proc/cpuinfo`'s, e.g. `... @ 2.20GHz`).
    pub cpu_desc: Option<String>,
}

/// Whether `data` starts like a perf.data file (either byte order).
pub fn is_perf_data(data: &[u8]) -> bool {
    data.starts_with(&MAGIC) || data.starts_with(&MAGIC_BIG_ENDIAN)
}

impl<'a> PerfFile<'a> {
    /// Reads the header, attributes and feature sections of a whole file.
    pub(super) fn parse(file: &'a [u8]) -> Result<PerfFile<'a>, PerfDataError> {
        if file.starts_with(&MAGIC_BIG_ENDIAN) {
            return Err(PerfDataError::BigEndian);
        }
        if !file.starts_with(&MAGIC) {
            return Err(PerfDataError::NotPerfData);
        }
        let mut b = Bytes::new(file);
        b.take(8);
        let header_size = b.u64().unwrap_or(0);
        if file.len() < HEADER_LEN
            || header_size < HEADER_LEN as u64
            || header_size > file.len() as u64
        {
            return Err(damaged(format!(
                "its header is {} bytes, perf writes {HEADER_LEN}",
                file.len().min(header_size as usize)
            )));
        }
        let attr_size = b.u64().unwrap_or(0);
        let attrs_raw = section(file, &mut b, "attribute section")?;
        let data_desc = b;
        let mut data = section(file, &mut b, "data section")?;
        let _event_types = b.take(16);
        let bitmap = b.take(32).unwrap_or_default();
        let attrs = parse_attrs(file, attrs_raw, attr_size)?;
        // A perf record that was killed leaves the data size at 0 and writes no
        // feature sections: its records run to the end of the file (as perf report
        // reads it, with a warning).
        let mut desc = data_desc;
        let data_offset = desc.u64().unwrap_or(0) as usize;
        let unfinished = data.is_empty() && data_offset >= HEADER_LEN && data_offset < file.len();
        if unfinished {
            data = &file[data_offset..];
        }
        let features = if unfinished {
            Vec::new()
        } else {
            feature_sections(file, data_offset + data.len(), bitmap)?
        };
        let feature = |bit: usize| features.iter().find(|f| f.0 == bit).map(|f| f.1);
        let string = |bit: usize| feature(bit).and_then(|s| header_string(&mut Bytes::new(s)));
        let cmdline = feature(feature::CMDLINE)
            .map(|s| {
                let mut b = Bytes::new(s);
                let n = b.u32().unwrap_or(0);
                (0..n).map_while(|_| header_string(&mut b)).collect()
            })
            .unwrap_or_default();
        Ok(PerfFile {
            unfinished,
            attrs,
            data,
            build_ids: feature(feature::BUILD_ID)
                .map(parse_build_ids)
                .unwrap_or_default(),
            hostname: string(feature::HOSTNAME),
            os_release: string(feature::OSRELEASE),
            perf_version: string(feature::VERSION),
            arch: string(feature::ARCH),
            cpu_desc: string(feature::CPUDESC),
            cmdline,
        })
    }

    /// The records of the data section in file order, each whole (header included);
    /// a record whose size is impossible or runs past the section is an error.
    pub(super) fn records(
        &self,
    ) -> impl Iterator<Item = Result<RawRecord<'a>, PerfDataError>> + 'a {
        let data = self.data;
        let mut pos = 0usize;
        std::iter::from_fn(move || {
            if pos >= data.len() {
                return None;
            }
            let Some(header) = data.get(pos..pos + 8) else {
                pos = data.len();
                return Some(Err(damaged(format!(
                    "the data section ends inside a record header at byte {pos}"
                ))));
            };
            let kind = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let size = u16::from_le_bytes([header[6], header[7]]) as usize;
            let Some(rec) = (size >= 8).then(|| data.get(pos..pos + size)).flatten() else {
                let at = pos;
                pos = data.len();
                return Some(Err(damaged(format!(
                    "the record at byte {at} of the data section claims {size} bytes, {} are left",
                    data.len() - at
                ))));
            };
            pos += size;
            Some(Ok(RawRecord { kind, bytes: rec }))
        })
    }

    /// The attribute a record belongs to: by its id when there are several events.
    pub(super) fn attr_of(&self, rec: &RawRecord) -> Option<&Attr> {
        if self.attrs.len() == 1 {
            return self.attrs.first();
        }
        let first = self.attrs.first()?;
        let t = first.sample_type;
        // Where a sample's ID sits depends on its layout: only when all agree (an
        // IDENTIFIER is always first in a sample, last in a trailer).
        let same = self.attrs.iter().all(|a| a.sample_type == t);
        let id = if t & sample::IDENTIFIER != 0 || (same && rec.kind == record::SAMPLE) {
            first.layout().id(rec.bytes)
        } else {
            None
        };
        match id {
            Some(id) => self.attrs.iter().find(|a| a.ids.contains(&id)),
            // Without ids the events must share one layout: take the first.
            None => self
                .attrs
                .iter()
                .all(|a| a.sample_type == t && a.sample_id_all == first.sample_id_all)
                .then_some(first),
        }
    }
}

/// The event attributes of the attribute section (`attr_size` bytes each, the
/// attr itself, then the {offset, size} of its ids).
fn parse_attrs(file: &[u8], attrs_raw: &[u8], attr_size: u64) -> Result<Vec<Attr>, PerfDataError> {
    if !(16 + 64..=4096).contains(&attr_size) {
        return Err(damaged(format!(
            "its attribute size is {attr_size} bytes (perf writes 128 or so)"
        )));
    }
    let attr_size = attr_size as usize;
    let mut attrs = Vec::new();
    for raw in attrs_raw.chunks(attr_size) {
        if raw.len() < attr_size {
            return Err(damaged("its attribute section ends inside an attribute"));
        }
        let (attr, ids) = raw.split_at(attr_size - 16);
        let ids = section(file, &mut Bytes::new(ids), "event id list")?;
        attrs.push(Attr::parse(attr, ids));
    }
    if attrs.is_empty() {
        return Err(damaged("it describes no event"));
    }
    Ok(attrs)
}

/// The feature sections, by feature bit: one descriptor per bit set in `bitmap`,
/// after the data section (which ends at `data_end`).
fn feature_sections<'a>(
    file: &'a [u8],
    data_end: usize,
    bitmap: &[u8],
) -> Result<Vec<(usize, &'a [u8])>, PerfDataError> {
    let mut desc = Bytes::new(file.get(data_end..).unwrap_or_default());
    let mut features = Vec::new();
    for bit in 0..256 {
        if bitmap
            .get(bit / 8)
            .is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
        {
            features.push((bit, section(file, &mut desc, "feature section")?));
        }
    }
    Ok(features)
}

/// A `perf_header_string`: a u32 length, then that many bytes, NUL padded.
fn header_string(b: &mut Bytes) -> Option<String> {
    let len = b.u32()? as usize;
    let raw = b.take(len)?;
    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
    Some(String::from_utf8_lossy(&raw[..end]).into_owned())
}

/// The BUILD_ID feature: `build_id_event`s (header, pid, 24 bytes of build-id, path).
fn parse_build_ids(section: &[u8]) -> Vec<BuildIdEntry> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(header) = section.get(pos..pos + 8) {
        let misc = u16::from_le_bytes([header[4], header[5]]);
        let size = u16::from_le_bytes([header[6], header[7]]) as usize;
        let Some(ev) = (size >= 36).then(|| section.get(pos..pos + size)).flatten() else {
            break;
        };
        pos += size;
        let id = &ev[12..36];
        // Newer perf states the build-id's length; older ones write 20 bytes.
        let len = if misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(id[20]).min(20)
        } else {
            20
        };
        let path = &ev[36..];
        let path = &path[..path.iter().position(|&c| c == 0).unwrap_or(path.len())];
        out.push(BuildIdEntry {
            kernel: misc & MISC_CPUMODE_MASK == MISC_KERNEL,
            path: String::from_utf8_lossy(path).into_owned(),
            build_id: id[..len].to_vec(),
        });
    }
    out
}

/// One record of the data section, not yet decoded.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawRecord<'a> {
    pub kind: u32,
    /// The whole record, its 8-byte header included.
    pub bytes: &'a [u8],
}

impl<'a> RawRecord<'a> {
    /// The record's time: a sample's TIME field, another record's `sample_id` trailer
    /// (None when it has none).
    pub(super) fn time(&self, attr: &Attr) -> Option<u64> {
        attr.layout().time(self.bytes)
    }

    /// Decodes the record as laid out for `attr`.
    pub(super) fn decode(&self, attr: &Attr) -> Result<Record<'a>, BadRecord> {
        attr.layout().decode(self.bytes)
    }
}
