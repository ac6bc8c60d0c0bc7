//! Encodes a recording as it is made. Events accumulate in the current chunk's
//! buffer; [`RecordingWriter::flush_chunk`] appends the chunk with its CRC and flushes,
//! so everything flushed so far stays readable whatever happens to the process later.
//! The writer also interns frames and stack nodes, handing out the ids samples use.

use std::collections::HashMap;
use std::io::{self, Write};

use super::codec::{put_bytes, put_i64, put_str, put_u64};
use super::*;

/// Tags of the events inside an EVENTS chunk.
pub(crate) mod tag {
    pub(crate) const SAMPLE: u8 = 1;
    pub(crate) const THREAD_NAME: u8 = 2;
    pub(crate) const THREAD_START: u8 = 3;
    pub(crate) const THREAD_EXIT: u8 = 4;
    pub(crate) const EXEC: u8 = 5;
    pub(crate) const MAPPING: u8 = 6;
    pub(crate) const FRAME: u8 = 7;
    pub(crate) const STACK_NODE: u8 = 8;
    pub(crate) const LOST: u8 = 9;
    pub(crate) const THROTTLE: u8 = 10;
    pub(crate) const OFF_CPU: u8 = 11;
}

/// Writes one recording to `W` (a file, or a `Vec<u8>` in tests).
pub struct RecordingWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// Time of the previous timed event in the current chunk (times are deltas).
    last_time: u64,
    frame_ids: HashMap<Frame, FrameId>,
    frames: Vec<Frame>,
    node_ids: HashMap<StackNode, StackId>,
    mappings: Vec<Mapping>,
    /// The ids of the first frame, stack node and mapping held in memory: ids below
    /// them were written before the last [`Self::new_generation`] and forgotten.
    frame_base: FrameId,
    node_base: StackId,
    mapping_base: MappingId,
    bytes_written: u64,
    /// Workloads read since the last chunk (see [`Self::workload`]).
    workloads: Vec<u8>,
    /// With a live consumer (`top`, `--push`): the events since it last took them.
    live: Option<Box<LiveTail>>,
}

/// What a live consumer needs that the file keeps only encoded: the stack nodes (all of
/// them, indexed by [`StackId`]) and the timed events since [`RecordingWriter::take_live`]
/// last took them.
#[derive(Debug, Default)]
struct LiveTail {
    /// Every stack node interned so far (not only the new ones).
    nodes: Vec<StackNode>,
    /// The timed events since the last take: its samples, off-CPU intervals, thread
    /// events, workloads, lost and throttle counts (nothing else is filled).
    events: Recording,
}

/// How many entries the writer's tables hold ([`RecordingWriter::table_sizes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSizes {
    /// Frames interned.
    pub frames: usize,
    /// Stack nodes interned.
    pub nodes: usize,
    /// Mappings recorded.
    pub mappings: usize,
    /// Stack nodes kept for a live consumer.
    pub live_nodes: usize,
}

impl<W: Write> RecordingWriter<W> {
    /// Writes the file header and the metadata chunk.
    pub fn new(mut out: W, meta: &Meta) -> io::Result<Self> {
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&header)?;
        let mut w = RecordingWriter {
            out,
            buf: Vec::with_capacity(1 << 16),
            last_time: 0,
            frame_ids: HashMap::new(),
            frames: Vec::new(),
            node_ids: HashMap::new(),
            mappings: Vec::new(),
            frame_base: 0,
            node_base: 0,
            mapping_base: 0,
            bytes_written: HEADER_LEN as u64,
            workloads: Vec::new(),
            live: None,
        };
        let json = serde_json::to_vec(meta).map_err(io::Error::other)?;
        w.write_chunk(chunk::META, &json)?;
        w.out.flush()?;
        Ok(w)
    }

    fn time(&mut self, t: u64) {
        put_i64(&mut self.buf, t.wrapping_sub(self.last_time) as i64);
        self.last_time = t;
    }

    /// Records a mapping and returns its id.
    pub fn mapping(&mut self, m: &Mapping) -> MappingId {
        self.buf.push(tag::MAPPING);
        self.time(m.time);
        put_u64(&mut self.buf, m.pid.into());
        put_u64(&mut self.buf, m.start);
        put_u64(&mut self.buf, m.end.saturating_sub(m.start));
        put_u64(&mut self.buf, m.file_offset);
        put_str(&mut self.buf, &m.path);
        put_bytes(&mut self.buf, m.build_id.as_deref().unwrap_or(&[]));
        self.mappings.push(m.clone());
        self.mapping_base + (self.mappings.len() - 1) as MappingId
    }

    /// Records a thread or process event.
    pub fn thread_event(&mut self, e: &ThreadEvent) {
        if let Some(live) = self.live.as_mut() {
            live.events.thread_events.push(e.clone());
        }
        match e {
            ThreadEvent::Name {
                time,
                pid,
                tid,
                name,
            } => {
                self.buf.push(tag::THREAD_NAME);
                self.time(*time);
                put_u64(&mut self.buf, (*pid).into());
                put_u64(&mut self.buf, (*tid).into());
                put_str(&mut self.buf, name);
            }
            ThreadEvent::Start {
                time,
                pid,
                ppid,
                tid,
            } => {
                self.buf.push(tag::THREAD_START);
                self.time(*time);
                put_u64(&mut self.buf, (*pid).into());
                put_u64(&mut self.buf, (*ppid).into());
                put_u64(&mut self.buf, (*tid).into());
            }
            ThreadEvent::Exit { time, pid, tid } => {
                self.buf.push(tag::THREAD_EXIT);
                self.time(*time);
                put_u64(&mut self.buf, (*pid).into());
                put_u64(&mut self.buf, (*tid).into());
            }
            ThreadEvent::Exec { time, pid } => {
                self.buf.push(tag::EXEC);
                self.time(*time);
                put_u64(&mut self.buf, (*pid).into());
            }
        }
    }

    /// Records a process's workload; it goes out in a WORKLOADS chunk before the next
    /// EVENTS chunk.
    pub fn workload(&mut self, w: &WorkloadEvent) {
        if let Some(live) = self.live.as_mut() {
            live.events.workloads.push(w.clone());
        }
        put_u64(&mut self.workloads, w.time);
        put_u64(&mut self.workloads, w.pid.into());
        put_str(&mut self.workloads, &w.cgroup);
        put_str(&mut self.workloads, &w.exe);
        self.workloads.push(u8::from(w.kernel));
        // 0: root vouches for the whole path; else depth + 1, then uid + 1 (0: unknown).
        match w.delegated {
            None => put_u64(&mut self.workloads, 0),
            Some(d) => {
                put_u64(&mut self.workloads, u64::from(d.depth) + 1);
                put_u64(&mut self.workloads, d.uid.map_or(0, |u| u64::from(u) + 1));
            }
        }
    }

    fn frame_id(&mut self, f: &Frame) -> FrameId {
        if let Some(&id) = self.frame_ids.get(f) {
            return id;
        }
        let id = self.frame_base + self.frames.len() as FrameId;
        self.buf.push(tag::FRAME);
        self.buf.push(f.kind as u8);
        put_u64(&mut self.buf, f.pid.into());
        put_u64(&mut self.buf, f.addr);
        put_u64(&mut self.buf, f.mapping.map_or(0, |m| u64::from(m) + 1));
        self.frames.push(*f);
        self.frame_ids.insert(*f, id);
        id
    }

    /// Interns a stack given leaf first and returns its leaf node (None if empty).
    pub fn intern_stack(&mut self, leaf_first: &[Frame]) -> Option<StackId> {
        let mut parent: Option<StackId> = None;
        for f in leaf_first.iter().rev() {
            let frame = self.frame_id(f);
            let node = StackNode { parent, frame };
            let id = match self.node_ids.get(&node) {
                Some(&id) => id,
                None => {
                    let id = self.node_base + self.node_ids.len() as StackId;
                    self.buf.push(tag::STACK_NODE);
                    put_u64(&mut self.buf, parent.map_or(0, |p| u64::from(p) + 1));
                    put_u64(&mut self.buf, frame.into());
                    self.node_ids.insert(node, id);
                    if let Some(live) = self.live.as_mut() {
                        live.nodes.push(node);
                    }
                    id
                }
            };
            parent = Some(id);
        }
        parent
    }

    /// Records a sample (its stack interned before with [`Self::intern_stack`]).
    pub fn sample(&mut self, s: &Sample) {
        if let Some(live) = self.live.as_mut() {
            live.events.samples.push(*s);
        }
        self.buf.push(tag::SAMPLE);
        self.time(s.time);
        put_u64(&mut self.buf, s.pid.into());
        put_u64(&mut self.buf, s.tid.into());
        put_u64(&mut self.buf, s.cpu.into());
        put_u64(&mut self.buf, s.weight);
        put_u64(&mut self.buf, s.stack.map_or(0, |p| u64::from(p) + 1));
    }

    /// An off-CPU interval (only in recordings whose meta says `off_cpu`).
    pub fn off_cpu(&mut self, o: &OffCpu) {
        if let Some(live) = self.live.as_mut() {
            live.events.off_cpu.push(*o);
        }
        self.buf.push(tag::OFF_CPU);
        self.time(o.time);
        put_u64(&mut self.buf, o.pid.into());
        put_u64(&mut self.buf, o.tid.into());
        put_u64(&mut self.buf, o.cpu.into());
        put_u64(&mut self.buf, o.duration);
        self.buf.push(o.state as u8);
        put_u64(&mut self.buf, o.weight);
        put_u64(&mut self.buf, o.stack.map_or(0, |p| u64::from(p) + 1));
    }

    /// Records `count` samples the kernel dropped.
    pub fn lost(&mut self, time: u64, count: u64) {
        if let Some(live) = self.live.as_mut() {
            live.events.lost += count;
        }
        self.buf.push(tag::LOST);
        self.time(time);
        put_u64(&mut self.buf, count);
    }

    /// Records that the kernel throttled sampling.
    pub fn throttle(&mut self, time: u64) {
        if let Some(live) = self.live.as_mut() {
            live.events.throttled += 1;
        }
        self.buf.push(tag::THROTTLE);
        self.time(time);
    }

    /// Keeps the events for a live consumer from now on (call before the first event).
    pub fn enable_live(&mut self) {
        self.live.get_or_insert_with(Default::default);
    }

    /// The events since the previous call (which this takes), as a recording of
    /// those events alone: its samples, off-CPU intervals, thread events, workloads,
    /// lost and throttle counts; its stacks' nodes are [`Self::live_nodes`], its
    /// frames and mappings the writer's. None unless [`Self::enable_live`] was called.
    pub fn take_live(&mut self) -> Option<Recording> {
        let live = self.live.as_mut()?;
        Some(std::mem::take(&mut live.events))
    }

    /// Every stack node interned since [`Self::enable_live`] (and since the last
    /// [`Self::new_generation`]), indexed by [`StackId`] less [`Self::node_base`].
    pub fn live_nodes(&self) -> &[StackNode] {
        self.live.as_ref().map_or(&[], |l| &l.nodes)
    }

    /// Every mapping recorded so far (since the last [`Self::new_generation`]),
    /// indexed by [`MappingId`] less [`Self::mapping_base`].
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// Every frame interned so far (since the last [`Self::new_generation`]),
    /// indexed by [`FrameId`] less [`Self::frame_base`].
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The id of `frames()[0]`: 0 unless a generation was forgotten.
    pub fn frame_base(&self) -> FrameId {
        self.frame_base
    }

    /// The id of `live_nodes()[0]`.
    pub fn node_base(&self) -> StackId {
        self.node_base
    }

    /// The id of `mappings()[0]`.
    pub fn mapping_base(&self) -> MappingId {
        self.mapping_base
    }

    /// Forgets every frame, stack node and mapping written so far, so that a long
    /// recording holds only what its recent events need (the host agent, whose
    /// windows took what they needed). The file stays whole and readable: ids go
    /// on from where they were, a frame or stack seen again is written again under a
    /// new id, and a mapping still in use is recorded again by the caller. Returns
    /// the forgotten mappings and the id of the first.
    pub fn new_generation(&mut self) -> (MappingId, Vec<Mapping>) {
        self.frame_base += self.frames.len() as FrameId;
        self.frames.clear();
        self.frame_ids.clear();
        self.node_base += self.node_ids.len() as StackId;
        self.node_ids.clear();
        if let Some(live) = self.live.as_mut() {
            live.nodes.clear();
        }
        let base = self.mapping_base;
        self.mapping_base += self.mappings.len() as MappingId;
        (base, std::mem::take(&mut self.mappings))
    }

    /// How many entries the writer's tables hold.
    pub fn table_sizes(&self) -> TableSizes {
        TableSizes {
            frames: self.frames.len(),
            nodes: self.node_ids.len(),
            mappings: self.mappings.len(),
            live_nodes: self.live.as_ref().map_or(0, |l| l.nodes.len()),
        }
    }

    /// Bytes buffered for the current chunk.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes written to the output so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Appends the buffered events as one chunk and flushes the output.
    pub fn flush_chunk(&mut self) -> io::Result<()> {
        if !self.workloads.is_empty() {
            // Old readers skip the kind: they read the events as before.
            let w = std::mem::take(&mut self.workloads);
            self.write_chunk(chunk::OWNED_WORKLOADS, &w)?;
            if self.buf.is_empty() {
                return self.out.flush();
            }
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let result = self.write_chunk(chunk::EVENTS, &buf);
        self.buf = buf;
        self.buf.clear();
        self.last_time = 0;
        result?;
        self.out.flush()
    }

    /// Appends names for frames (written after the events that define those frames).
    pub fn symbols(&mut self, symbols: &[FrameSymbols]) -> io::Result<()> {
        self.flush_chunk()?;
        let mut strings: HashMap<&str, u64> = HashMap::new();
        let mut table = Vec::new();
        let mut body = Vec::new();
        put_u64(&mut body, symbols.len() as u64);
        for fs in symbols {
            put_u64(&mut body, fs.frame.into());
            body.push(fs.source as u8);
            put_u64(&mut body, fs.lines.len() as u64);
            for l in &fs.lines {
                put_u64(&mut body, intern(&mut strings, &mut table, &l.function));
                let file = l
                    .file
                    .as_deref()
                    .map_or(0, |f| intern(&mut strings, &mut table, f) + 1);
                put_u64(&mut body, file);
                put_u64(&mut body, l.line.map_or(0, u64::from));
                body.push(u8::from(l.inlined));
            }
        }
        let count = strings.len() as u64;
        let mut payload = Vec::with_capacity(table.len() + body.len() + 10);
        put_u64(&mut payload, count);
        payload.extend_from_slice(&table);
        payload.extend_from_slice(&body);
        self.write_chunk(chunk::SYMBOLS, &payload)?;
        self.out.flush()
    }

    /// Writes the last events and the summary; returns the output.
    pub fn finish(mut self, summary: &Summary) -> io::Result<W> {
        self.flush_chunk()?;
        let json = serde_json::to_vec(summary).map_err(io::Error::other)?;
        self.write_chunk(chunk::END, &json)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn write_chunk(&mut self, kind: u32, payload: &[u8]) -> io::Result<()> {
        let len = u32::try_from(payload.len())
            .map_err(|_| io::Error::other("recording chunk larger than 4 GiB"))?;
        let mut header = [0u8; CHUNK_HEADER_LEN];
        header[0..4].copy_from_slice(&kind.to_le_bytes());
        header[4..8].copy_from_slice(&len.to_le_bytes());
        header[8..12].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(payload)?;
        self.bytes_written += (CHUNK_HEADER_LEN + payload.len()) as u64;
        Ok(())
    }
}

/// Index of `s` in a chunk's string table, adding it on first use.
fn intern<'a>(strings: &mut HashMap<&'a str, u64>, table: &mut Vec<u8>, s: &'a str) -> u64 {
    let next = strings.len() as u64;
    *strings.entry(s).or_insert_with(|| {
        put_str(table, s);
        next
    })
}
