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

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use super::frames::{Bound, ForeignKernel, Namer};
use crate::elf::{ElfError, ElfInfo, build_id_hex, read_module};
use crate::format::{FrameKind, Recording};
use crate::replay::bind::{self, LoadedModule};

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
    /// What debuginfod could not provide (`DEBUGINFOD_URLS`).
    pub debuginfod_notes: Vec<String>,
    /// What else left frames unnamed: a Go module whose `.gopclntab` cannot be read
    /// (a format not known yet), as the recorder would have said.
    pub notes: Vec<String>,
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
        for note in self.debuginfod_notes.iter().chain(&self.notes) {
            out.push_str(&format!("; {note}"));
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

/// Why the file a mapping named cannot name its frames: the note's reason for it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BinaryError {
    /// It cannot be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// It is no ELF file the parser takes.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// It is no ELF file at all.
    #[error("not an ELF file")]
    NotElf,
    /// It is another build than the one recorded.
    #[error(
        "build-id {} there, {} recorded",
        found.as_deref().map_or_else(|| "none".to_owned(), build_id_hex),
        build_id_hex(recorded)
    )]
    OtherBuild {
        /// The build-id of the file there, if it has one.
        found: Option<Vec<u8>>,
        /// The build-id recorded.
        recorded: Vec<u8>,
    },
    /// Without a build-id, it was changed since the recording started.
    #[error("no build-id, and changed since the recording")]
    Changed,
    /// Named by no path, and not in perf's build-id cache.
    #[error("not in perf's build-id cache")]
    NotCached,
}

/// Opens the file a mapping named (its path as recorded, its build-id if known), or
/// says why it cannot be used.
pub(crate) type OpenBinary<'a> =
    dyn Fn(&str, Option<&[u8]>) -> Result<crate::elf::Image, BinaryError> + 'a;

/// Fills `rec.symbols`: user frames from the files `open` finds, kernel frames from
/// this machine's kallsyms when `kernel` is Ok (else it says why not). The vdso is
/// named only when `open` finds it by its build-id. Each file is bound to its
/// mappings by [`crate::replay::bind`] and named by the one namer
/// ([`super::frames`]), as the recorder would have named it.
pub(crate) fn name_frames(
    rec: &mut Recording,
    open: &OpenBinary<'_>,
    kernel_ok: Result<(), ForeignKernel>,
) -> LateNames {
    let mut out = LateNames::default();
    // The files the user frames' mappings name, opened once each (by path and
    // build-id), in that order: the note lists them so.
    let used: BTreeSet<u32> = rec
        .frames
        .iter()
        .filter(|f| f.kind.is_user())
        .filter_map(|f| f.mapping)
        .collect();
    let mut files: BTreeMap<FileKey, Option<Arc<LoadedModule>>> = BTreeMap::new();
    for &id in &used {
        let Some(m) = rec.mappings.get(id as usize) else {
            continue;
        };
        let vdso_by_id = m.path == "[vdso]" && m.build_id.is_some();
        if m.path.starts_with('/') || vdso_by_id {
            files.insert((m.path.clone(), m.build_id.clone()), None);
        }
    }
    for ((path, build_id), module) in files.iter_mut() {
        let loaded = open(path, build_id.as_deref()).and_then(|image| {
            let info = ElfInfo::parse((*image).as_ref()).map_err(|_| BinaryError::NotElf)?;
            Ok(LoadedModule {
                image,
                info,
                cfi: None,
            })
        });
        match loaded {
            Ok(m) => {
                *module = Some(Arc::new(m));
                out.found.push(path.clone());
            }
            Err(why) => out.missing.push((path.clone(), why.to_string())),
        }
    }
    // Anonymous memory, the vdso, JIT code: nothing on disk names them.
    let modules: Vec<Option<(Arc<LoadedModule>, u64)>> = rec
        .mappings
        .iter()
        .enumerate()
        .map(|(id, m)| {
            if !used.contains(&(id as u32)) {
                return None;
            }
            let module = files.get(&(m.path.clone(), m.build_id.clone()))?.clone();
            bind::bind(m.clone(), module).module
        })
        .collect();
    let bound = Bound {
        mappings: &rec.mappings,
        modules: &modules,
        live: None,
        kernel: kernel_ok,
    };
    let mut namer = Namer::new(&[], None);
    let (symbols, stats) = namer.name(&rec.frames, 0..rec.frames.len() as u32, &bound);
    rec.symbols = vec![None; rec.frames.len()];
    for s in symbols {
        let id = s.frame as usize;
        rec.symbols[id] = Some(s);
    }
    out.named = stats.named;
    out.unnamed = stats.unnamed;
    out.kernel_note = stats.kernel_note;
    out.debuginfod_notes = stats.debuginfod_notes;
    // No perf map is read after the fact: these are the Go tables' notes.
    out.notes = stats.perf_map_notes;
    out
}

/// Opens the file a mapping named, if it is still the same file: the same build-id,
/// or (for a file without one) unchanged since the recording started.
pub(crate) fn open_same_file(
    path: &str,
    build_id: Option<&[u8]>,
    recorded_unix_ns: u64,
) -> Result<crate::elf::Image, BinaryError> {
    let clean = Path::new(path.strip_suffix(" (deleted)").unwrap_or(path));
    let meta = std::fs::metadata(clean)?;
    let image = read_module(clean)?;
    let found = ElfInfo::parse((*image).as_ref())?.build_id;
    match (build_id, found) {
        (Some(want), Some(got)) if want == got => Ok(image),
        (Some(want), found) => Err(BinaryError::OtherBuild {
            found,
            recorded: want.to_vec(),
        }),
        (None, _) => {
            let mtime_ns = (meta.mtime() as i128) * 1_000_000_000 + meta.mtime_nsec() as i128;
            if recorded_unix_ns != 0 && mtime_ns <= recorded_unix_ns as i128 {
                Ok(image)
            } else {
                Err(BinaryError::Changed)
            }
        }
    }
}

/// Ok when the recording was made on this machine since it booted: only then do
/// kernel addresses mean what `/proc/kallsyms` says.
fn same_boot(rec: &Recording) -> Result<(), ForeignKernel> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    if host.trim() != rec.meta.hostname {
        return Err(ForeignKernel::OtherHost(rec.meta.hostname.clone()));
    }
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let boot_secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX);
    if rec.meta.start_unix_ns / 1_000_000_000 < boot_secs {
        return Err(ForeignKernel::BeforeBoot);
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
        let m = (crate::process::read_maps(std::process::id()).unwrap())
            .into_iter()
            .find(|m| m.path == exe.to_str().unwrap() && (m.start..m.end).contains(&here))
            .unwrap();
        let info = ElfInfo::parse(&std::fs::read(&exe).unwrap()).unwrap();
        let mapping = Mapping {
            pid: std::process::id(),
            start: m.start,
            end: m.end,
            file_offset: m.offset,
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

    /// A stripped Go binary whose `.gopclntab` cannot be read (its magic one no Go
    /// release wrote) keeps its addresses when named after the fact too, and the
    /// report says why, as the recorder's summary would.
    #[test]
    fn an_unreadable_go_table_is_said_after_the_fact_too() {
        use object::{Object, ObjectSection};
        let Some(go) = crate::test_fixture::go_toolchains().into_iter().next() else {
            eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("twowork");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/go/twowork.go");
        crate::test_fixture::go_build(&go, &source, &bin, true);
        let mut bytes = std::fs::read(&bin).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let (table, _) = (file.section_by_name(".gopclntab").unwrap().file_range()).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let (text_offset, text_size) = text.file_range().unwrap();
        let text_addr = text.address();
        drop(file);
        let table = table as usize;
        bytes[table..table + 4].copy_from_slice(&0xffff_ff00u32.to_le_bytes());
        std::fs::write(&bin, &bytes).unwrap();
        let mut rec = Recording {
            mappings: vec![Mapping {
                pid: 1,
                start: text_addr,
                end: text_addr + text_size,
                file_offset: text_offset,
                path: bin.to_str().unwrap().to_owned(),
                build_id: None,
                time: 0,
            }],
            frames: vec![Frame {
                kind: FrameKind::User,
                pid: 1,
                addr: text_addr + 0x100,
                mapping: Some(0),
            }],
            symbols: vec![None],
            ..Recording::default()
        };
        rec.meta.start_unix_ns = u64::MAX / 2;
        let note = name_from_binaries(&mut rec);
        assert!(
            note.describe()
                .contains("Go functions unnamed: pclntab magic 0xffffff00"),
            "{note:?}"
        );
    }

    /// A recording from another machine or an earlier boot keeps its kernel frames
    /// unnamed, and says which.
    #[test]
    fn kernel_addresses_only_from_this_boot_of_this_machine() {
        let mut rec = Recording::default();
        rec.meta.hostname = "elsewhere.invalid".into();
        let e = same_boot(&rec).unwrap_err();
        assert!(matches!(e, ForeignKernel::OtherHost(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "recorded on elsewhere.invalid, not this machine"
        );
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        rec.meta.hostname = host.trim().to_owned();
        let e = same_boot(&rec).unwrap_err();
        assert_eq!(e.to_string(), "recorded before this machine's last boot");
        rec.meta.start_unix_ns = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        assert!(same_boot(&rec).is_ok());
    }
}
