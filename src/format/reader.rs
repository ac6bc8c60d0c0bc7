//! Decodes a recording file into memory. Chunks are read in order; the first chunk that
//! is cut short, fails its CRC or does not decode ends the reading, and everything
//! before it is kept: the reader says what was lost in [`Recording::damage`] instead of
//! failing, so a recording whose writer was killed still reports.

use std::path::Path;

use super::codec::{Decoder, Malformed};
use super::*;

mod events;

/// Why a file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the recording header.
    #[error("{0} is not a profile recording (it does not start with the recording header)")]
    NotARecording(String),
    #[error(
        "{path} was written in recording format version {found}, newer than this build of profile reads (up to {supported}); upgrade profile"
    )]
    /// Written by a newer profile in a format version this build does not read.
    NewerVersion {
        /// The file.
        path: String,
        /// Its version.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The file ends before its metadata.
    #[error("{0} is cut short before its metadata; nothing was recorded in it")]
    NoMeta(String),
    /// A perf.data file (perf record's) that could not be read.
    #[error("cannot read {path} as perf.data: {why}")]
    PerfData {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    #[error(
        "{path} holds a stack {depth} frames deep; profile reads stacks of at most {MAX_STACK_DEPTH} frames (it never records deeper ones), so the file was not written by profile or was altered"
    )]
    /// A stack deeper than [`MAX_STACK_DEPTH`].
    TooDeep {
        /// The file.
        path: String,
        /// The depth of the first stack found too deep.
        depth: usize,
    },
    #[error(
        "{path} would expand to {frames} frames in memory (its distinct sampled stacks, inlined functions included), more than the {MAX_MODEL_FRAMES} profile reads; the file was not written by profile or was altered"
    )]
    /// A model larger than [`MAX_MODEL_FRAMES`].
    TooLarge {
        /// The file.
        path: String,
        /// The frames the model would hold.
        frames: u64,
    },
}

/// The deepest stack the reader accepts, in frames (the sampled address, callers,
/// kernel frames and the truncation marker). profile never writes deeper ones: its
/// unwinder stops at 512 user frames (`UnwindOptions::max_frames`), and the kernel's
/// part is bounded by `kernel.perf_event_max_stack` (127 by default, as perf's
/// `--max-stack`) and, whatever that is set to, by a sample record's 64 KiB (about
/// 8,000 entries). A deeper stack in a file is hostile or damaged; refusing it keeps
/// the cost of a report linear in the file.
pub const MAX_STACK_DEPTH: usize = 8192;

/// The most frames the profile model may hold: the sum over distinct sampled stacks
/// of their depth, each frame counted once per function it expands to (inlined ones
/// included). A file's stacks share prefixes, so a small file can describe a model
/// quadratic in its size; this bound keeps a report of a hostile file to about a
/// gigabyte and seconds. Real recordings stay far below it (a 10-minute recording of
/// a large program holds a few million).
pub const MAX_MODEL_FRAMES: u64 = 1 << 25;

/// A whole recording in memory.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// The format version it was written in.
    pub version: u32,
    /// How it was made.
    pub meta: Meta,
    /// Present when the recording ended normally.
    pub summary: Option<Summary>,
    /// Mappings, indexed by [`MappingId`].
    pub mappings: Vec<Mapping>,
    /// Unique frames, indexed by [`FrameId`].
    pub frames: Vec<Frame>,
    /// The stack tree, indexed by [`StackId`]; a node's parent comes before it.
    pub nodes: Vec<StackNode>,
    /// Samples in file order.
    pub samples: Vec<Sample>,
    /// Off-CPU intervals in file order (version 2 `--off-cpu` recordings only).
    pub off_cpu: Vec<OffCpu>,
    /// Thread and process events in file order.
    pub thread_events: Vec<ThreadEvent>,
    /// Each process's workload, as read while recording (WORKLOADS chunks; empty in
    /// recordings made before they were written).
    pub workloads: Vec<WorkloadEvent>,
    /// Sum of PERF_RECORD_LOST counts in the events.
    pub lost: u64,
    /// Number of throttle events.
    pub throttled: u64,
    /// Names per frame id (None: not symbolized).
    pub symbols: Vec<Option<FrameSymbols>>,
    /// Set when the file ends early or is damaged: what was lost and where.
    pub damage: Option<String>,
}

impl Recording {
    /// Reads a recording file (and only that: [`crate::input::open`] reads perf.data
    /// files too).
    pub fn read_file(path: &Path) -> Result<Recording, ReadError> {
        let name = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| ReadError::Io {
            path: name.clone(),
            source,
        })?;
        Recording::from_bytes(&data, &name)
    }

    /// Decodes a recording held in memory; `name` is used in messages.
    pub fn from_bytes(data: &[u8], name: &str) -> Result<Recording, ReadError> {
        let mut rec = Recording {
            version: header_version(data, name)?,
            ..Recording::default()
        };
        let mut pos = HEADER_LEN;
        let mut saw_meta = false;
        while pos < data.len() {
            let (kind, payload) = match chunk_at(data, pos, name) {
                Ok(chunk) => chunk,
                Err(Damage(damage)) => {
                    rec.damage = Some(damage);
                    break;
                }
            };
            if rec.decode_chunk(kind, payload, &mut saw_meta).is_err() {
                rec.damage = Some(format!(
                    "{name} has a chunk at byte {pos} that does not decode; {} bytes from there on were skipped",
                    data.len() - pos
                ));
                break;
            }
            pos += CHUNK_HEADER_LEN + payload.len();
        }
        if !saw_meta {
            return Err(ReadError::NoMeta(name.to_owned()));
        }
        if rec.damage.is_none() && rec.summary.is_none() {
            rec.damage = Some(format!(
                "{name} was cut at byte {pos}, between two chunks: it has no closing chunk \
                 (the writer was killed or the disk was full)"
            ));
        }
        rec.symbols.resize(rec.frames.len(), None);
        rec.check_size(name)?;
        Ok(rec)
    }

    /// Decodes one chunk of kind `kind` into the recording; `saw_meta` is set by
    /// the meta chunk.
    fn decode_chunk(
        &mut self,
        kind: u32,
        payload: &[u8],
        saw_meta: &mut bool,
    ) -> Result<(), Malformed> {
        match kind {
            chunk::META => serde_json::from_slice(payload)
                .map(|m| {
                    self.meta = m;
                    *saw_meta = true;
                })
                .map_err(|_| Malformed),
            chunk::EVENTS => self.decode_events(payload),
            chunk::SYMBOLS => self.decode_symbols(payload),
            chunk::WORKLOADS => self.decode_workloads(payload, false),
            chunk::OWNED_WORKLOADS => self.decode_workloads(payload, true),
            chunk::END => serde_json::from_slice(payload)
                .map(|s| self.summary = Some(s))
                .map_err(|_| Malformed),
            // Chunks of kinds this version does not know are skipped: newer writers
            // may add kinds without bumping the version.
            _ => Ok(()),
        }
    }

    /// Refuses a file whose stacks are deeper than [`MAX_STACK_DEPTH`] or whose model
    /// would hold more than [`MAX_MODEL_FRAMES`] frames. Linear in the file: a node's
    /// depth and cost follow from its parent's (parents come first).
    pub(crate) fn check_size(&self, name: &str) -> Result<(), ReadError> {
        let mut depth = vec![0u32; self.nodes.len()];
        let mut cost = vec![0u64; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            let lines = self
                .symbols
                .get(n.frame as usize)
                .and_then(Option::as_ref)
                .map_or(1, |s| s.lines.len().max(1)) as u64;
            let (d, c) = n
                .parent
                .map_or((0, 0), |p| (depth[p as usize], cost[p as usize]));
            depth[i] = d + 1;
            cost[i] = c.saturating_add(lines);
            if depth[i] as usize > MAX_STACK_DEPTH {
                return Err(ReadError::TooDeep {
                    path: name.to_owned(),
                    depth: depth[i] as usize,
                });
            }
        }
        let mut sampled = vec![false; self.nodes.len()];
        let mut frames: u64 = 0;
        for s in &self.samples {
            if let Some(leaf) = s.stack
                && !std::mem::replace(&mut sampled[leaf as usize], true)
            {
                frames = frames.saturating_add(cost[leaf as usize]);
            }
        }
        if frames > MAX_MODEL_FRAMES {
            return Err(ReadError::TooLarge {
                path: name.to_owned(),
                frames,
            });
        }
        Ok(())
    }

    fn decode_workloads(&mut self, payload: &[u8], owned: bool) -> Result<(), Malformed> {
        let mut d = Decoder::new(payload);
        while !d.is_empty() {
            let time = d.u64()?;
            let pid = d.u32()?;
            let cgroup = d.string()?;
            let exe = d.string()?;
            let kernel = d.u8()? != 0;
            let delegated = match if owned { d.u64()? } else { 0 } {
                0 => None,
                depth => Some(Delegation {
                    depth: u32::try_from(depth - 1).map_err(|_| Malformed)?,
                    uid: match d.u64()? {
                        0 => None,
                        u => Some(u32::try_from(u - 1).map_err(|_| Malformed)?),
                    },
                }),
            };
            self.workloads.push(WorkloadEvent {
                time,
                pid,
                cgroup,
                exe,
                kernel,
                delegated,
            });
        }
        Ok(())
    }

    /// Decodes an optional id stored as `id + 1` (0 = none) and checks it is defined.
    fn opt_id(&self, raw: u64, defined: usize) -> Result<Option<u32>, Malformed> {
        if raw == 0 {
            return Ok(None);
        }
        let id = raw - 1;
        if id >= defined as u64 {
            return Err(Malformed);
        }
        Ok(Some(id as u32))
    }

    fn decode_symbols(&mut self, payload: &[u8]) -> Result<(), Malformed> {
        let mut d = Decoder::new(payload);
        let count = d.u64()?;
        let mut strings = Vec::new();
        for _ in 0..count {
            strings.push(d.string()?);
        }
        let string = |i: u64| strings.get(i as usize).cloned().ok_or(Malformed);
        let entries = d.u64()?;
        self.symbols.resize(self.frames.len(), None);
        for _ in 0..entries {
            let frame = d.u32()?;
            let source = match d.u8()? {
                0 => SymbolSource::Native,
                1 => SymbolSource::Kernel,
                2 => SymbolSource::Jit,
                3 => SymbolSource::Python,
                4 => SymbolSource::JavaInterpreted,
                _ => return Err(Malformed),
            };
            let n = d.u64()?;
            let mut lines = Vec::new();
            for _ in 0..n {
                let function = string(d.u64()?)?;
                let file = match d.u64()? {
                    0 => None,
                    i => Some(string(i - 1)?),
                };
                let line = match d.u32()? {
                    0 => None,
                    l => Some(l),
                };
                let inlined = d.u8()? != 0;
                lines.push(SymbolLine {
                    function,
                    file,
                    line,
                    inlined,
                });
            }
            let slot = self.symbols.get_mut(frame as usize).ok_or(Malformed)?;
            *slot = Some(FrameSymbols {
                frame,
                source,
                lines,
            });
        }
        Ok(())
    }

    /// Frames of a stack, leaf first.
    pub fn stack_frames(&self, leaf: Option<StackId>) -> impl Iterator<Item = FrameId> + '_ {
        let mut next = leaf;
        std::iter::from_fn(move || {
            let node = self.nodes.get(next? as usize)?;
            next = node.parent;
            Some(node.frame)
        })
    }

    /// The CPU samples the kernel took: the samples less the `[unsampled]`
    /// remainders (a stack of that marker alone: time no sample stands for), the
    /// count every output gives (`Profile::counts`).
    pub fn cpu_samples(&self) -> u64 {
        let marker = super::Frame::marker(super::Truncation::Unsampled);
        let is_marker = |stack: Option<StackId>| {
            let node = stack.and_then(|id| self.nodes.get(id as usize));
            node.is_some_and(|n| {
                n.parent.is_none() && self.frames.get(n.frame as usize) == Some(&marker)
            })
        };
        let unsampled = self.samples.iter().filter(|s| is_marker(s.stack)).count();
        (self.samples.len() - unsampled) as u64
    }
}

/// The version of a recording's header, checked to be one this build reads.
fn header_version(data: &[u8], name: &str) -> Result<u32, ReadError> {
    if data.len() < HEADER_LEN || data[..8] != MAGIC {
        return Err(ReadError::NotARecording(name.to_owned()));
    }
    let version = u32::from_le_bytes(data[8..12].try_into().unwrap_or_default());
    if version > VERSION {
        return Err(ReadError::NewerVersion {
            path: name.to_owned(),
            found: version,
            supported: VERSION,
        });
    }
    Ok(version)
}

/// What is damaged at a chunk, said for the reader.
struct Damage(String);

/// The kind and payload of the chunk at `pos`, its checksum checked; else what is
/// damaged there (the file's `name` in it).
fn chunk_at<'d>(data: &'d [u8], pos: usize, name: &str) -> Result<(u32, &'d [u8]), Damage> {
    let Some(header) = data.get(pos..pos + CHUNK_HEADER_LEN) else {
        return Err(Damage(format!(
            "{name} ends inside a chunk header at byte {pos}; the last {} bytes were not readable",
            data.len() - pos
        )));
    };
    let word =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (kind, len, crc) = (word(0), word(4) as usize, word(8));
    let start = pos + CHUNK_HEADER_LEN;
    let Some(payload) = start.checked_add(len).and_then(|end| data.get(start..end)) else {
        return Err(Damage(format!(
            "{name} ends inside a chunk at byte {pos} (the writer was stopped or the disk was full); the last {} bytes were not readable",
            data.len() - pos
        )));
    };
    if crc32fast::hash(payload) != crc {
        return Err(Damage(format!(
            "{name} has a damaged chunk at byte {pos} (checksum mismatch); {} bytes from there on were skipped",
            data.len() - pos
        )));
    }
    Ok((kind, payload))
}
