//! Names for a recording that has none: one cut short by SIGKILL, a full disk or a
//! crash before the recorder wrote its names at the end. Everything needed to name it
//! later is in the events written while recording: each mapping's path, build-id,
//! load address and file offset. So a report on the machine that recorded (or one with
//! the same binaries) opens each file, checks it is the same build, and names the
//! frames as the recorder would have; what cannot be found stays `module+0x…` and the
//! report says which files were missing.
//!
//! Kernel frames are named from this machine's `/proc/kallsyms` only when the
//! recording was made on this machine since its last boot (kernel addresses are
//! randomized at each boot). JIT frames are not named: their perf maps describe
//! processes that have gone.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{ModuleSource, Symbolizer, SymbolizerOptions};
use crate::elf::{ElfInfo, build_id_hex, read_module};
use crate::format::{FrameKind, FrameSymbols, Recording, SymbolLine, SymbolSource};

/// What [`name_from_binaries`] did, for the note a report prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LateNames {
    /// Files the names came from.
    pub found: Vec<String>,
    /// Files that could not be used, each with the reason.
    pub missing: Vec<(String, String)>,
    /// Unique frames named.
    pub named: usize,
    /// Unique frames left unnamed.
    pub unnamed: usize,
    /// Why kernel frames stayed unnamed, when there were some.
    pub kernel_note: Option<String>,
}

impl LateNames {
    /// One sentence for the report.
    pub fn describe(&self) -> String {
        format!("the recording holds no names{}", self.clauses())
    }

    /// Where the names came from and what stayed unnamed: clauses each starting "; ".
    pub fn clauses(&self) -> String {
        let mut out = String::new();
        if !self.found.is_empty() {
            out.push_str(&format!(
                "; names resolved from the binaries on this machine ({} of {} frames, from {} files)",
                self.named,
                self.named + self.unnamed,
                self.found.len()
            ));
        }
        if !self.missing.is_empty() {
            let list: Vec<String> = self
                .missing
                .iter()
                .take(5)
                .map(|(p, why)| format!("{p} ({why})"))
                .collect();
            let more = self.missing.len().saturating_sub(5);
            out.push_str(&format!(
                "; unnamed: binaries not found: {}{}",
                list.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if let Some(k) = &self.kernel_note {
            out.push_str(&format!("; kernel frames unnamed: {k}"));
        }
        out
    }
}

/// Whether the recording was cut before its names (no closing chunk, and no frame
/// has a name) while it has frames that could be named. A whole recording whose
/// frames all stayed unnamed is left as it is.
pub fn needs_names(rec: &Recording) -> bool {
    rec.summary.is_none()
        && rec.symbols.iter().all(Option::is_none)
        && rec
            .frames
            .iter()
            .any(|f| f.kind.is_user() || f.kind == FrameKind::Kernel)
}

/// A mapped file: its path and build-id.
type FileKey = (String, Option<Vec<u8>>);

/// Names a recording without names, when it has none; returns the note to print.
pub fn complete_names(rec: &mut Recording) -> Option<String> {
    needs_names(rec).then(|| name_from_binaries(rec).describe())
}

/// Fills `rec.symbols` from the binaries on this machine. See the module docs.
pub fn name_from_binaries(rec: &mut Recording) -> LateNames {
    let recorded = rec.meta.start_unix_ns;
    let kernel = same_boot(rec);
    name_frames(
        rec,
        &|path: &str, build_id: Option<&[u8]>| open_same_file(path, build_id, recorded),
        kernel,
    )
}

/// Opens the file a mapping named (its path as recorded, its build-id if known), or
/// says why it cannot be used.
pub(crate) type OpenBinary<'a> =
    dyn Fn(&str, Option<&[u8]>) -> Result<crate::elf::Image, String> + 'a;

/// Fills `rec.symbols`: user frames from the files `open` finds, kernel frames from
/// this machine's kallsyms when `kernel` is Ok (else it says why not). The vdso is
/// named only when `open` finds it by its build-id.
pub(crate) fn name_frames(
    rec: &mut Recording,
    open: &OpenBinary<'_>,
    kernel_ok: Result<(), String>,
) -> LateNames {
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let mut out = LateNames::default();
    rec.symbols.resize(rec.frames.len(), None);

    // Frames by module file (path and build-id), each with the mapping it was seen in.
    let mut by_file: BTreeMap<FileKey, Vec<(usize, u32)>> = BTreeMap::new();
    let mut kernel = Vec::new();
    for (id, f) in rec.frames.iter().enumerate() {
        if f.kind == FrameKind::Kernel {
            kernel.push(id);
            continue;
        }
        if !f.kind.is_user() {
            continue;
        }
        let Some(m) = f
            .mapping
            .and_then(|m| rec.mappings.get(m as usize).map(|x| (m, x)))
        else {
            out.unnamed += 1;
            continue;
        };
        let vdso_by_id = m.1.path == "[vdso]" && m.1.build_id.is_some();
        if !m.1.path.starts_with('/') && !vdso_by_id {
            // Anonymous memory, the vdso, JIT code: nothing on disk names it.
            out.unnamed += 1;
            continue;
        }
        by_file
            .entry((m.1.path.clone(), m.1.build_id.clone()))
            .or_default()
            .push((id, m.0));
    }

    for ((path, build_id), frames) in by_file {
        let image = match open(&path, build_id.as_deref()) {
            Ok(image) => image,
            Err(why) => {
                out.unnamed += frames.len();
                out.missing.push((path, why));
                continue;
            }
        };
        let is_vdso = path == "[vdso]";
        let Ok(info) = ElfInfo::parse((*image).as_ref()) else {
            out.unnamed += frames.len();
            out.missing.push((path, "not an ELF file".into()));
            continue;
        };
        let mut ids = Vec::new();
        let mut svmas = Vec::new();
        for (id, mapping) in frames {
            let f = &rec.frames[id];
            let m = &rec.mappings[mapping as usize];
            // The vdso is an image of its own: its mapping offset is not a file offset.
            let offset = if is_vdso { 0 } else { m.file_offset };
            match info.bias_for_mapping(m.start, offset) {
                Some(bias) => {
                    ids.push(id);
                    svmas.push(f.kind.lookup_address(f.addr).wrapping_sub(bias));
                }
                None => out.unnamed += 1,
            }
        }
        let source = ModuleSource {
            image,
            path: path.clone(),
            root: None,
        };
        for (id, names) in ids.into_iter().zip(sym.symbolize_module(&source, &svmas)) {
            set(rec, &mut out, id, SymbolSource::Native, names);
        }
        out.found.push(path);
    }

    if !kernel.is_empty() {
        match kernel_ok {
            Err(why) => {
                out.unnamed += kernel.len();
                out.kernel_note = Some(why);
            }
            Ok(()) => {
                let addrs: Vec<u64> = kernel.iter().map(|&id| rec.frames[id].addr).collect();
                match sym.symbolize_kernel(&addrs) {
                    Ok(names) => {
                        for (id, name) in kernel.into_iter().zip(names) {
                            set(
                                rec,
                                &mut out,
                                id,
                                SymbolSource::Kernel,
                                name.into_iter().collect(),
                            );
                        }
                    }
                    Err(e) => {
                        out.unnamed += kernel.len();
                        out.kernel_note = Some(e.to_string());
                    }
                }
            }
        }
    }
    out
}

fn set(
    rec: &mut Recording,
    out: &mut LateNames,
    id: usize,
    source: SymbolSource,
    lines: Vec<SymbolLine>,
) {
    if lines.is_empty() {
        out.unnamed += 1;
        return;
    }
    out.named += 1;
    rec.symbols[id] = Some(FrameSymbols {
        frame: id as u32,
        source,
        lines,
    });
}

/// Opens the file a mapping named, if it is still the same file: the same build-id,
/// or (for a file without one) unchanged since the recording started.
pub(crate) fn open_same_file(
    path: &str,
    build_id: Option<&[u8]>,
    recorded_unix_ns: u64,
) -> Result<crate::elf::Image, String> {
    let clean = Path::new(path.strip_suffix(" (deleted)").unwrap_or(path));
    let meta = std::fs::metadata(clean).map_err(|e| e.to_string())?;
    let image = read_module(clean).map_err(|e| e.to_string())?;
    let found = ElfInfo::parse((*image).as_ref())
        .map_err(|e| e.to_string())?
        .build_id;
    match (build_id, found.as_deref()) {
        (Some(want), Some(got)) if want == got => Ok(image),
        (Some(want), got) => Err(format!(
            "build-id {} there, {} recorded",
            got.map_or_else(|| "none".to_owned(), build_id_hex),
            build_id_hex(want)
        )),
        (None, _) => {
            let mtime_ns = (meta.mtime() as i128) * 1_000_000_000 + meta.mtime_nsec() as i128;
            if recorded_unix_ns != 0 && mtime_ns <= recorded_unix_ns as i128 {
                Ok(image)
            } else {
                Err("no build-id, and changed since the recording".to_owned())
            }
        }
    }
}

/// Ok when the recording was made on this machine since it booted: only then do
/// kernel addresses mean what `/proc/kallsyms` says.
fn same_boot(rec: &Recording) -> Result<(), String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    if host.trim() != rec.meta.hostname {
        return Err(format!(
            "recorded on {}, not this machine",
            rec.meta.hostname
        ));
    }
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let boot_secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX);
    if rec.meta.start_unix_ns / 1_000_000_000 < boot_secs {
        return Err("recorded before this machine's last boot".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Frame, Mapping};

    /// A frame at a function of this test binary, through this process's own mapping
    /// of it, as the recorder would have written it.
    fn own_frame_and_mapping() -> (Frame, Mapping) {
        #[inline(never)]
        fn marker_function_for_late_naming() -> u64 {
            std::hint::black_box(7)
        }
        let here = marker_function_for_late_naming as fn() -> u64 as usize as u64;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                let (a, b) = l
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .split_once('-')
                    .unwrap();
                let (a, b) = (
                    u64::from_str_radix(a, 16).unwrap(),
                    u64::from_str_radix(b, 16).unwrap(),
                );
                l.ends_with(exe.to_str().unwrap()) && (a..b).contains(&here)
            })
            .unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let info = ElfInfo::parse(&std::fs::read(&exe).unwrap()).unwrap();
        let mapping = Mapping {
            pid: std::process::id(),
            start: u64::from_str_radix(a, 16).unwrap(),
            end: u64::from_str_radix(b, 16).unwrap(),
            file_offset: u64::from_str_radix(f[2], 16).unwrap(),
            path: exe.to_str().unwrap().to_owned(),
            build_id: info.build_id,
            time: 0,
        };
        let frame = Frame {
            kind: FrameKind::User,
            pid: std::process::id(),
            addr: here,
            mapping: Some(0),
        };
        (frame, mapping)
    }

    #[test]
    fn a_recording_without_names_is_named_from_the_same_build() {
        let (frame, mapping) = own_frame_and_mapping();
        let mut gone = mapping.clone();
        gone.path = "/nonexistent/libgone.so".into();
        gone.build_id = Some(vec![1, 2, 3, 4]);
        let mut rec = Recording {
            mappings: vec![mapping, gone],
            frames: vec![
                frame,
                Frame {
                    mapping: Some(1),
                    ..frame
                },
            ],
            ..Recording::default()
        };
        rec.symbols = vec![None, None];
        assert!(needs_names(&rec));
        let note = name_from_binaries(&mut rec);
        let name = &rec.symbols[0]
            .as_ref()
            .expect("named")
            .lines
            .last()
            .unwrap()
            .function;
        assert!(name.ends_with("marker_function_for_late_naming"), "{name}");
        assert_eq!(rec.symbols[1], None);
        assert_eq!((note.named, note.unnamed), (1, 1));
        let text = note.describe();
        assert!(
            text.contains("names resolved from the binaries on this machine (1 of 2 frames"),
            "{text}"
        );
        assert!(
            text.contains("unnamed: binaries not found: /nonexistent/libgone.so"),
            "{text}"
        );
        assert!(!needs_names(&rec));
    }

    #[test]
    fn another_build_at_the_same_path_is_not_used() {
        let (frame, mut mapping) = own_frame_and_mapping();
        mapping.build_id = Some(vec![0xde, 0xad, 0xbe, 0xef]);
        let mut rec = Recording {
            mappings: vec![mapping],
            frames: vec![frame],
            symbols: vec![None],
            ..Recording::default()
        };
        let note = name_from_binaries(&mut rec);
        assert_eq!(rec.symbols[0], None);
        assert!(
            note.missing[0].1.contains("deadbeef recorded"),
            "{:?}",
            note.missing
        );
    }
}
