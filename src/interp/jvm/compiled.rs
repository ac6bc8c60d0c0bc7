//! Compiled Java frames and the methods HotSpot inlined into them, read from outside.
//! A pc in the code cache is found in its code heap through the heap's segment map (as
//! `CodeHeap::find_blob` does: each segment's byte says how many segments back its
//! block begins), the block's blob checked to be an `nmethod` whose code holds the
//! pc, and the nmethod's debug information read once: its `PcDesc` table
//! (`scopes_pcs`: pc offset → scope decode offset), its scopes stream (`scopes_data`:
//! per scope the sender scope's offset, the method's index into the nmethod's
//! metadata, the bci; HotSpot's UNSIGNED5 numbers) and its metadata section. A pc then
//! gives the chain of (`Method*`, bci) from the innermost inlined method out to the
//! compiled one. Every size, offset and pointer is checked; anything that does not
//! check out is no answer, never a guess.

use super::vmstructs::{VmError, VmStructs};
use crate::interp::Memory;

/// Most bytes of debug information (pc descriptors, scopes, metadata) read for one
/// nmethod.
const MAX_DEBUG_INFO: u64 = 8 << 20;
/// Most scopes in one chain (C2 inlines at most `MaxInlineLevel`, 15 in JDK 17).
const MAX_DEPTH: usize = 128;
/// Most code heaps (JDK 17 has three with segmented code cache, else one).
const MAX_HEAPS: u32 = 16;
/// Most hops through a segment map to a block's start.
const MAX_HOPS: u32 = 1 << 16;
/// Most bytes of a blob's block header and blob header read to check it is unchanged.
const MAX_HEADER: u64 = 1024;
/// A segment map byte marking an unused segment.
const FREE_SEGMENT: u8 = 0xff;
/// The JDKs whose compressed streams (JDK 9 to 19's UNSIGNED5) are decoded here.
const MIN_JDK: u32 = 9;
const MAX_JDK: u32 = 19;
/// `DebugInformationRecorder::serialized_null`: no scope.
const SERIALIZED_NULL: u32 = 0;

/// The offsets of the code cache's and nmethods' fields, from the VM's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLayout {
    blob_size: u64,
    blob_name: u64,
    blob_code_begin: u64,
    blob_code_end: u64,
    cm_method: u64,
    cm_scopes_data_begin: u64,
    nm_metadata_offset: u64,
    nm_scopes_pcs_offset: u64,
    nm_dependencies_offset: u64,
    nm_compile_id: u64,
    pc_desc_size: u64,
    pc_offset: u64,
    pc_scope_offset: u64,
    heap_block_size: u64,
    block_used: u64,
    invocation_entry_bci: i32,
}

impl CodeLayout {
    /// The layout from the VM's tables (JDK 17's names); an error names what is
    /// missing.
    pub fn new(vm: &VmStructs) -> Result<CodeLayout, VmError> {
        let bci = vm.int("InvocationEntryBci")?;
        Ok(CodeLayout {
            blob_size: vm.offset("CodeBlob::_size")?,
            blob_name: vm.offset("CodeBlob::_name")?,
            blob_code_begin: vm.offset("CodeBlob::_code_begin")?,
            blob_code_end: vm.offset("CodeBlob::_code_end")?,
            cm_method: vm.offset("CompiledMethod::_method")?,
            cm_scopes_data_begin: vm.offset("CompiledMethod::_scopes_data_begin")?,
            nm_metadata_offset: vm.offset("nmethod::_metadata_offset")?,
            nm_scopes_pcs_offset: vm.offset("nmethod::_scopes_pcs_offset")?,
            nm_dependencies_offset: vm.offset("nmethod::_dependencies_offset")?,
            nm_compile_id: vm.offset("nmethod::_compile_id")?,
            pc_desc_size: vm.size("PcDesc")?,
            pc_offset: vm.offset("PcDesc::_pc_offset")?,
            pc_scope_offset: vm.offset("PcDesc::_scope_decode_offset")?,
            heap_block_size: vm.size("HeapBlock")?,
            block_used: vm
                .offset("HeapBlock::_header")?
                .wrapping_add(vm.offset("HeapBlock::Header::_used")?),
            invocation_entry_bci: i32::try_from(bci)
                .map_err(|_| VmError::Malformed("VMIntConstants", "InvocationEntryBci"))?,
        })
    }
}

/// One code heap: its memory and its segment map. `high` is the end of its reserved
/// memory, not of the part committed so far: the heap grows within its reservation as
/// code is compiled (its committed end, `VirtualSpace::_high`, moves within seconds of
/// a JVM's start), and code placed past the end read once would be found nowhere
/// (issue 48). A pc between the committed and the reserved end is in no code: its
/// segment map bytes are not committed either, and their read fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Heap {
    low: u64,
    high: u64,
    segmap: u64,
    log2_segment: u32,
}

/// The code cache's heaps, read once the VM is initialized (their reservations never
/// move; they grow inside them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeCache {
    layout: CodeLayout,
    heaps: Vec<Heap>,
    /// From the lowest heap's start to the highest's end: one comparison rejects
    /// most words of a stack copy ([`CodeCache::contains`]).
    span: (u64, u64),
}

impl CodeCache {
    /// Reads the heaps of `CodeCache::_heaps`.
    pub fn read(mem: &dyn Memory, vm: &VmStructs) -> Result<CodeCache, VmError> {
        let layout = CodeLayout::new(vm)?;
        let read = |a: u64| mem.u64_at(a).ok_or(VmError::Read(a));
        // JDK 20 moved the compressed stream to another UNSIGNED5 (its zero byte
        // excluded, every number shifted by one): only the older one is decoded here.
        let major_at = vm.static_addr("Abstract_VM_Version::_vm_major_version")?;
        let major = mem.u32_at(major_at).ok_or(VmError::Read(major_at))?;
        if !(MIN_JDK..=MAX_JDK).contains(&major) {
            return Err(VmError::Malformed("VMStructs", "JDK version for scopes"));
        }
        let array = read(vm.static_addr("CodeCache::_heaps")?)?;
        if array == 0 {
            return Err(VmError::Missing("code heaps (not initialized yet)".into()));
        }
        let len_at = array.wrapping_add(vm.offset("GrowableArrayBase::_len")?);
        let len = mem.u32_at(len_at).ok_or(VmError::Read(len_at))?;
        if len == 0 || len > MAX_HEAPS {
            return Err(VmError::Malformed("CodeCache", "number of code heaps"));
        }
        let data = read(array.wrapping_add(vm.offset("GrowableArray<int>::_data")?))?;
        let memory = vm.offset("CodeHeap::_memory")?;
        let segmap = vm.offset("CodeHeap::_segmap")?;
        let log2 = vm.offset("CodeHeap::_log2_segment_size")?;
        let (low, high) = (
            vm.offset("VirtualSpace::_low")?,
            vm.offset("VirtualSpace::_high_boundary")?,
        );
        let mut heaps = Vec::new();
        for i in 0..u64::from(len) {
            let h = read(data.wrapping_add(8 * i))?;
            let log2_at = h.wrapping_add(log2);
            let log2_segment = mem.u32_at(log2_at).ok_or(VmError::Read(log2_at))?;
            let heap = Heap {
                low: read(h.wrapping_add(memory).wrapping_add(low))?,
                high: read(h.wrapping_add(memory).wrapping_add(high))?,
                segmap: read(h.wrapping_add(segmap).wrapping_add(low))?,
                log2_segment,
            };
            if !(4..=16).contains(&heap.log2_segment) || heap.low >= heap.high {
                return Err(VmError::Malformed("CodeHeap", "segment size or bounds"));
            }
            heaps.push(heap);
        }
        let span = (
            heaps.iter().map(|h| h.low).min().unwrap_or(0),
            heaps.iter().map(|h| h.high).max().unwrap_or(0),
        );
        Ok(CodeCache {
            layout,
            heaps,
            span,
        })
    }

    /// Whether `pc` is in one of the code heaps.
    pub fn contains(&self, pc: u64) -> bool {
        (self.span.0..self.span.1).contains(&pc)
            && self.heaps.iter().any(|h| (h.low..h.high).contains(&pc))
    }

    /// The address of the code blob holding `pc`: its heap's segment map walked back
    /// to the start of its block, which must be in use.
    fn blob_at(&self, mem: &dyn Memory, pc: u64) -> Option<u64> {
        let h = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc))?;
        let mut seg = (pc - h.low) >> h.log2_segment;
        let mut window: Vec<u8> = Vec::new();
        let mut window_at = 0u64;
        for _ in 0..MAX_HOPS {
            if !(window_at..window_at + window.len() as u64).contains(&seg) {
                // The 256 bytes up to `seg`: a hop is at most 254 segments back.
                window_at = seg.saturating_sub(255);
                window.resize((seg - window_at + 1) as usize, 0);
                if !mem.read(h.segmap.wrapping_add(window_at), &mut window) {
                    return None;
                }
            }
            let v = window[(seg - window_at) as usize];
            if v == FREE_SEGMENT {
                return None;
            }
            if v == 0 {
                let block = h.low.checked_add(seg << h.log2_segment)?;
                let mut used = [0u8];
                let l = &self.layout;
                if !mem.read(block.wrapping_add(l.block_used), &mut used) || used[0] == 0 {
                    return None;
                }
                return Some(block + l.heap_block_size);
            }
            seg = seg.checked_sub(u64::from(v))?;
        }
        None
    }

    /// The code (start, end) and `Method*` of the nmethod holding `pc`, from its
    /// header alone (a few reads).
    pub fn code_of(&self, mem: &dyn Memory, pc: u64) -> Option<(u64, u64, u64)> {
        let blob = self.blob_at(mem, pc)?;
        let l = &self.layout;
        let name = mem.c_string_at(mem.u64_at(blob.checked_add(l.blob_name)?)?, 16)?;
        let start = mem.u64_at(blob.wrapping_add(l.blob_code_begin))?;
        let end = mem.u64_at(blob.wrapping_add(l.blob_code_end))?;
        (name == b"nmethod" && (start..end).contains(&pc))
            .then(|| Some((start, end, mem.u64_at(blob.wrapping_add(l.cm_method))?)))?
    }

    /// The code (start, end) of the blob holding `pc` and whether it is an nmethod,
    /// from its header alone: what an unwinder with no perf map needs of JIT code.
    pub fn blob_code(&self, mem: &dyn Memory, pc: u64) -> Option<(u64, u64, bool)> {
        let blob = self.blob_at(mem, pc)?;
        let l = &self.layout;
        // A stub's name may be longer than read here: not `nmethod` either way.
        let name = mem.c_string_at(mem.u64_at(blob.checked_add(l.blob_name)?)?, 16);
        let start = mem.u64_at(blob.wrapping_add(l.blob_code_begin))?;
        let end = mem.u64_at(blob.wrapping_add(l.blob_code_end))?;
        (start..end)
            .contains(&pc)
            .then_some((start, end, name.as_deref() == Some(b"nmethod")))
    }

    /// The blob holding `pc` as its header says now: its address, its code (start,
    /// end), and for an nmethod its compile id (None: a stub); None if the pc is in no
    /// blob's code (free space, a header, a block being filled). A few reads: what a
    /// sample's pcs are resolved by as it is drained ([`super::ahead`]).
    pub fn blob_header(&self, mem: &dyn Memory, pc: u64) -> Option<BlobHeader> {
        let blob = self.blob_at(mem, pc)?;
        let l = &self.layout;
        let name_at = mem.u64_at(blob.checked_add(l.blob_name)?)?;
        let name = mem.c_string_at(name_at, 16);
        let start = mem.u64_at(blob.wrapping_add(l.blob_code_begin))?;
        let end = mem.u64_at(blob.wrapping_add(l.blob_code_end))?;
        if !(start..end).contains(&pc) {
            return None;
        }
        let compile_id = match name.as_deref() {
            Some(b"nmethod") => Some(mem.u32_at(blob.wrapping_add(l.nm_compile_id))?),
            _ => None,
        };
        Some(BlobHeader {
            blob,
            name_at,
            code: (start, end),
            compile_id,
        })
    }

    /// Whether the blob `h` describes is still there, as it was: its block in use, its
    /// header's name (the same string), code and compile id unchanged. One read: what
    /// a blob resolved at an earlier drain is checked by at the next.
    pub fn still(&self, mem: &dyn Memory, h: &BlobHeader) -> bool {
        let (Some(at), Some(span)) = (self.header_at(h), self.header_span()) else {
            return false;
        };
        let mut b = [0u8; MAX_HEADER as usize];
        let b = &mut b[..span];
        mem.read(at, b) && self.still_in(h, b)
    }

    /// Where the bytes [`CodeCache::still`] reads of `h`'s blob start: its block.
    pub fn header_at(&self, h: &BlobHeader) -> Option<u64> {
        h.blob.checked_sub(self.layout.heap_block_size)
    }

    /// How many bytes [`CodeCache::still`] reads: the block's header and the blob's
    /// fields it checks (None past [`MAX_HEADER`]: a layout that does not check out).
    pub fn header_span(&self) -> Option<usize> {
        let l = &self.layout;
        let fields = [
            l.blob_name,
            l.blob_code_begin,
            l.blob_code_end,
            l.nm_compile_id,
        ];
        let span = fields.iter().max().map_or(0, |m| m + 8) + l.heap_block_size;
        (span <= MAX_HEADER).then_some(span as usize)
    }

    /// [`CodeCache::still`] on bytes `b` read from [`CodeCache::header_at`] (a batch
    /// of blobs checked with one read).
    pub fn still_in(&self, h: &BlobHeader, b: &[u8]) -> bool {
        let l = &self.layout;
        let word = |off: u64| {
            let at = usize::try_from(l.heap_block_size.checked_add(off)?).ok()?;
            Some(u64::from_le_bytes(
                b.get(at..at.checked_add(8)?)?.try_into().ok()?,
            ))
        };
        let used = usize::try_from(l.block_used)
            .ok()
            .and_then(|u| b.get(u))
            .is_some_and(|&u| u != 0);
        let id = word(l.nm_compile_id).map(|w| w as u32);
        used && word(l.blob_name) == Some(h.name_at)
            && word(l.blob_code_begin) == Some(h.code.0)
            && word(l.blob_code_end) == Some(h.code.1)
            && h.compile_id.is_none_or(|c| id == Some(c))
    }

    /// The layout the nmethods are read with.
    pub fn layout(&self) -> &CodeLayout {
        &self.layout
    }

    /// The nmethod whose code holds `pc`, with its debug information; None if the pc
    /// is in no nmethod (a stub, the interpreter, a freed block) or it does not check
    /// out.
    pub fn nmethod(&self, mem: &dyn Memory, pc: u64) -> Option<Nmethod> {
        let blob = self.blob_at(mem, pc)?;
        Nmethod::read(mem, &self.layout, blob, pc)
    }
}

/// A code blob's header, as [`CodeCache::blob_header`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobHeader {
    /// The blob's address.
    pub blob: u64,
    /// Where its name is (the same string for every blob of a kind).
    pub name_at: u64,
    /// Its instructions (start, end).
    pub code: (u64, u64),
    /// An nmethod's compile id; None for any other blob (a stub).
    pub compile_id: Option<u32>,
}

/// An nmethod's identity and debug information, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nmethod {
    /// Its address (the blob's).
    pub addr: u64,
    /// HotSpot's compile id.
    pub compile_id: u32,
    /// Its instructions.
    pub code: (u64, u64),
    /// The `Method*` compiled.
    pub method: u64,
    /// (pc offset, scope decode offset) of each `PcDesc`, by pc offset.
    pcs: Vec<(i32, u32)>,
    scopes: Vec<u8>,
    metadata: Vec<u64>,
    invocation_entry_bci: i32,
}

/// One level of a compiled frame's scope chain: the method and its bytecode index
/// (negative: at the method's entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// The `Method*`.
    pub method: u64,
    /// The bytecode index.
    pub bci: i32,
}

impl Nmethod {
    /// Reads the nmethod at `blob` whose code must hold `pc`.
    pub fn read(mem: &dyn Memory, l: &CodeLayout, blob: u64, pc: u64) -> Option<Nmethod> {
        let name = mem.c_string_at(mem.u64_at(blob.checked_add(l.blob_name)?)?, 16)?;
        if name != b"nmethod" {
            return None;
        }
        let code = (
            mem.u64_at(blob.wrapping_add(l.blob_code_begin))?,
            mem.u64_at(blob.wrapping_add(l.blob_code_end))?,
        );
        if !(code.0..code.1).contains(&pc) || code.0 <= blob {
            return None;
        }
        let size = u64::from(mem.u32_at(blob.wrapping_add(l.blob_size))?);
        let end = blob.checked_add(size)?;
        let int_at = |off: u64| {
            let v = mem.u32_at(blob.wrapping_add(off))?;
            blob.checked_add(u64::from(v))
        };
        let metadata_at = int_at(l.nm_metadata_offset)?;
        let scopes_at = mem.u64_at(blob.wrapping_add(l.cm_scopes_data_begin))?;
        let pcs_at = int_at(l.nm_scopes_pcs_offset)?;
        let pcs_end = int_at(l.nm_dependencies_offset)?;
        // The sections in HotSpot's order, all inside the blob, after the code.
        let ordered = [code.1, metadata_at, scopes_at, pcs_at, pcs_end, end];
        if ordered.windows(2).any(|w| w[0] > w[1])
            || pcs_end - metadata_at > MAX_DEBUG_INFO
            || !(scopes_at - metadata_at).is_multiple_of(8)
            || l.pc_desc_size < 8
            || !(pcs_end - pcs_at).is_multiple_of(l.pc_desc_size)
        {
            return None;
        }
        let bytes =
            |at: u64, to: u64| mem.bytes_at(at, (to - at) as usize, MAX_DEBUG_INFO as usize);
        let metadata: Vec<u64> = bytes(metadata_at, scopes_at)?
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
            .collect();
        let scopes = bytes(scopes_at, pcs_at)?;
        let raw = bytes(pcs_at, pcs_end)?;
        let field = |d: &[u8], off: u64| {
            let b = d.get(off as usize..off as usize + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        };
        let mut pcs = Vec::new();
        for d in raw.chunks_exact(l.pc_desc_size as usize) {
            let pc_offset = field(d, l.pc_offset)? as i32;
            let scope = field(d, l.pc_scope_offset)?;
            // Sorted by pc offset, each scope inside the stream.
            if pcs.last().is_some_and(|&(p, _)| p > pc_offset) || scope as usize > scopes.len() {
                return None;
            }
            pcs.push((pc_offset, scope));
        }
        Some(Nmethod {
            addr: blob,
            compile_id: mem.u32_at(blob.wrapping_add(l.nm_compile_id))?,
            code,
            method: mem.u64_at(blob.wrapping_add(l.cm_method))?,
            pcs,
            scopes,
            metadata,
            invocation_entry_bci: l.invocation_entry_bci,
        })
    }

    /// Bytes kept for it.
    pub fn weight(&self) -> usize {
        self.scopes.len() + 8 * (self.pcs.len() + self.metadata.len())
    }

    /// The index of the `PcDesc` for `pc`: the one with the smallest pc offset at or
    /// after the pc's (HotSpot's approximate lookup; exact for a return address, the
    /// next debug point after the pc for a sampled leaf). None outside the code.
    pub fn pc_desc(&self, pc: u64) -> Option<usize> {
        if !(self.code.0..self.code.1).contains(&pc) {
            return None;
        }
        let off = i32::try_from(pc - self.code.0).ok()?;
        let i = self.pcs.partition_point(|&(p, _)| p < off);
        (i < self.pcs.len()).then_some(i)
    }

    /// Whether `PcDesc` `i` is at `pc` exactly (a return address has one).
    pub fn desc_at(&self, i: usize, pc: u64) -> bool {
        let off = pc
            .checked_sub(self.code.0)
            .and_then(|o| i32::try_from(o).ok());
        self.pcs.get(i).is_some_and(|&(p, _)| Some(p) == off)
    }

    /// The scope decode offset of `PcDesc` `i`: what identifies its chain.
    pub fn scope_offset(&self, i: usize) -> Option<u32> {
        self.pcs.get(i).map(|&(_, s)| s)
    }

    /// The scope chain of `PcDesc` `i`, innermost first, the compiled method last;
    /// empty for a `PcDesc` with no scope (the sentinels: only the compiled method is
    /// known); None if the stream does not decode or its outermost method is not the
    /// nmethod's.
    pub fn scopes(&self, i: usize) -> Option<Vec<Scope>> {
        let mut at = self.scope_offset(i)?;
        let mut out = Vec::new();
        while at != SERIALIZED_NULL {
            if out.len() >= MAX_DEPTH {
                return None;
            }
            let mut pos = at as usize;
            let sender = unsigned5(&self.scopes, &mut pos)?;
            let index = unsigned5(&self.scopes, &mut pos)? as usize;
            let bci = (unsigned5(&self.scopes, &mut pos)? as i32)
                .checked_add(self.invocation_entry_bci)?;
            // `metadata_at(index)`: index 0 is NULL.
            let method = *self.metadata.get(index.checked_sub(1)?)?;
            out.push(Scope { method, bci });
            // A sender is written before the scopes it calls.
            if sender >= at {
                return None;
            }
            at = sender;
        }
        if out.last().is_some_and(|s| s.method != self.method) {
            return None;
        }
        Some(out)
    }
}

/// One number of HotSpot's `CompressedReadStream` (JDK 17's UNSIGNED5: a byte below
/// 192 ends the number, each earlier one adds its value shifted by 6 bits more).
pub fn unsigned5(b: &[u8], pos: &mut usize) -> Option<u32> {
    const L: u32 = 192;
    let mut sum = 0u32;
    for i in 0..5 {
        let v = u32::from(*b.get(*pos)?);
        *pos += 1;
        sum = sum.wrapping_add(v << (6 * i));
        if v < L || i == 4 {
            return Some(sum);
        }
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned5_reads_hotspots_numbers() {
        let b = [5, 192, 1, 255, 255, 255, 255, 3];
        let mut pos = 0;
        assert_eq!(unsigned5(&b, &mut pos), Some(5));
        assert_eq!(unsigned5(&b, &mut pos), Some(256));
        assert_eq!(pos, 3);
        // Five bytes at most, the last whatever its value.
        assert!(unsigned5(&b, &mut pos).is_some());
        assert_eq!(pos, 8);
        assert_eq!(unsigned5(&b, &mut pos), None, "bounded by the slice");
    }

    fn nm(pcs: Vec<(i32, u32)>, scopes: Vec<u8>, metadata: Vec<u64>) -> Nmethod {
        Nmethod {
            addr: 0x1000,
            compile_id: 1,
            code: (0x2000, 0x2100),
            method: 0xaa0,
            pcs,
            scopes,
            metadata,
            invocation_entry_bci: -1,
        }
    }

    #[test]
    fn a_chain_decodes_innermost_first_and_is_checked() {
        // Offset 1: the compiled method (metadata 1) at bci 4 (written 5); offset 4:
        // an inlined method (metadata 2) at bci 0, sent from offset 1.
        let scopes = vec![0, 0, 1, 5, 1, 2, 1];
        let n = nm(
            vec![(-1, 0), (0x10, 4), (0x40, 1), (0x101, 0)],
            scopes,
            vec![0xaa0, 0xbb0],
        );
        assert_eq!(n.pc_desc(0x2000), Some(1));
        assert_eq!(n.pc_desc(0x2010), Some(1), "exact");
        assert_eq!(n.pc_desc(0x2011), Some(2), "the next one after");
        assert_eq!(n.pc_desc(0x2100), None, "outside the code");
        let inner = Scope {
            method: 0xbb0,
            bci: 0,
        };
        let outer = Scope {
            method: 0xaa0,
            bci: 4,
        };
        assert_eq!(n.scopes(1), Some(vec![inner, outer]));
        assert_eq!(n.scopes(2), Some(vec![outer]));
        assert_eq!(n.scopes(3), Some(vec![]), "the sentinel: no scope");
        // The outermost method must be the nmethod's; a sender must come before.
        let mut wrong = n.clone();
        wrong.method = 0xcc0;
        assert_eq!(wrong.scopes(1), None);
        let looped = nm(vec![(0, 1)], vec![0, 1, 1, 1], vec![0xaa0]);
        assert_eq!(looped.scopes(0), None);
        // A method index past the metadata, or 0 (NULL).
        let bad = nm(vec![(0, 1)], vec![0, 0, 3, 1], vec![0xaa0]);
        assert_eq!(bad.scopes(0), None);
        let null = nm(vec![(0, 1)], vec![0, 0, 0, 1], vec![0xaa0]);
        assert_eq!(null.scopes(0), None);
    }
}
