//! The Ruby reader on the installed Ruby: its library's symbols and layout, and a
//! running program's main thread read from outside (its frames named as Ruby names
//! them), then the same frames through a forged VM that must be refused.

use std::io::BufRead;
use std::process::{Command, Stdio};

use super::frames::{MOVED_ID, RubyFrames};
use super::layout::{self, Symbols};
use super::walk::{self, Raw};
use crate::format::{Frame, FrameKind};
use crate::interp::Memory;

/// The installed `libruby`, if any.
fn libruby() -> Option<(String, Vec<u8>)> {
    let found = std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
        .ok()?
        .find_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_owned();
            (name.starts_with("libruby") && name.contains(".so.")).then_some(p)
        });
    let Some(path) = found.and_then(|p| std::fs::canonicalize(p).ok()) else {
        assert!(
            std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
            "ruby is not installed"
        );
        eprintln!("skipped: ruby is not installed");
        return None;
    };
    let image = std::fs::read(&path).ok()?;
    Some((path.to_str()?.to_owned(), image))
}

/// A Ruby program whose main thread runs `outer` → `Array#each` → `block in outer`
/// → `inner` forever, started and read once it says it runs.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_ruby() -> Running {
    let src = "def inner\n  i = 0\n  i += 1 while i < 1000\nend\n\
               def outer\n  [1, 2].each { |_| inner }\nend\n\
               $stdout.puts 'ready'\n$stdout.flush\nloop { outer }\n";
    let mut child = Command::new("ruby")
        .args(["-e", src])
        .stdout(Stdio::piped())
        .spawn()
        .expect("ruby runs");
    let mut line = String::new();
    let out = child.stdout.take().unwrap();
    std::io::BufReader::new(out).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    Running(child)
}

/// The load bias of `path` in `pid`: the start of its first mapping less its offset.
fn bias_of(pid: u32, path: &str) -> (u64, (u64, u64)) {
    let maps = crate::process::read_maps(pid).unwrap();
    let first = maps.iter().find(|m| m.path == path).unwrap();
    let text = maps
        .iter()
        .find(|m| m.path == path && m.executable)
        .unwrap();
    (first.start - first.offset, (text.start, text.end))
}

#[test]
fn the_installed_ruby_is_read_from_outside() {
    let Some((path, image)) = libruby() else {
        return;
    };
    let syms = Symbols::from_elf(&image).unwrap();
    assert!(syms.vm_exec.1 > syms.vm_exec.0 && syms.vm_ptr != 0 && syms.id2str != 0);
    assert!(syms.classes.iter().any(|(_, n)| n == "Array"));
    let ruby = run_ruby();
    let pid = ruby.0.id();
    let mem = crate::sys::ProcessMemory::open(pid).unwrap();
    let (bias, text) = bias_of(pid, &path);
    let version = mem.c_string_at(syms.version + bias, 32).unwrap();
    let version = String::from_utf8(version).unwrap();
    let l = layout::layout_of(&version).unwrap();
    let ec = walk::thread_ec(&mem, &l, syms.vm_ptr + bias, (pid, true), 64).unwrap();
    assert_eq!(
        walk::thread_ec(&mem, &l, syms.vm_ptr + bias, (u32::MAX, false), 64),
        Err(walk::WalkError::NoThread)
    );
    // The frames, as the reader names them: the thread runs on, so a few tries.
    let mut frames = Vec::new();
    let mut labels = Vec::new();
    for _ in 0..2000 {
        std::thread::sleep(std::time::Duration::from_micros(100));
        walk::control_frames(&mem, &l, ec, None, &mut frames).unwrap();
        labels = (frames.iter())
            .filter_map(|f| match f.raw {
                Raw::Iseq { iseq, .. } => walk::iseq_info(&mem, &l, iseq).map(|i| i.label),
                Raw::Cfunc { me } => walk::method_entry(&mem, &l, me).map(|_| "cfunc".into()),
                Raw::Other => None,
            })
            .collect();
        if labels.first().is_some_and(|l| l == "inner") {
            break;
        }
    }
    let want = [
        "inner",
        "block in outer",
        "cfunc",
        "outer",
        "block in <main>",
    ];
    assert_eq!(&labels[..5], &want, "{labels:?}");
    assert_eq!(labels.last().map(String::as_str), Some("<main>"));

    // The stage: a native stack of two `rb_vm_exec` frames, each with the VM loop
    // it called, becomes the Ruby frames of each stretch.
    let mut stage = RubyFrames::default();
    let open = || crate::sys::ProcessMemory::open(pid).map(|m| Box::new(m) as _);
    stage.ruby_mapped(pid, (&path, &image), (bias, text), open);
    let native = |addr: u64| Frame {
        kind: FrameKind::Return,
        pid,
        addr,
        mapping: None,
    };
    let exec = syms.vm_exec.0 + bias + 8;
    let vm_loop = text.0 + 16;
    let mut named = Vec::new();
    for _ in 0..2000 {
        std::thread::sleep(std::time::Duration::from_micros(100));
        let mut stack = vec![native(vm_loop), native(exec), native(1), native(vm_loop)];
        stack.extend([native(exec), native(vm_loop), native(exec), native(2)]);
        stage.expand(pid, (pid, 0, None), &mut stack);
        named = (stack.iter())
            .map(|f| match f.kind {
                FrameKind::Interpreted if f.addr > MOVED_ID => {
                    let (_, lines) = stage.names(pid, f.addr).unwrap();
                    lines[0].function.clone()
                }
                FrameKind::Interpreted => "marked".into(),
                _ => format!("{:#x}", f.addr),
            })
            .collect();
        if named[0] == "Object#inner" {
            break;
        }
    }
    let want = [
        "Object#inner",
        "block in Object#outer",
        "0x1",
        "Array#each",
        "Object#outer",
        "block in <main>",
    ];
    assert_eq!(&named[..6], &want, "{named:?}");
    assert!(named.iter().any(|n| n == "Kernel#loop"), "{named:?}");
    assert_eq!(named.last().map(String::as_str), Some("0x2"), "{named:?}");
}

/// The forged process read as the recorder reads a sample whose registers point at
/// the leaf: every frame named, C method by owner and name, line by the pc; then the
/// same with its thread list looped, its strings claiming too much and its frame
/// pointing outside its stack: marked frames, never names.
#[test]
fn a_forged_process_is_named_then_refused_when_broken() {
    use super::forged::{self, LEAF_CFP, LEAF_PC, TID, VM_EXEC};
    use super::frames::{Sampled, UNREADABLE_ID};
    let run = |mem: crate::interp::Snapshot, regs: bool| {
        let mut stage = RubyFrames::default();
        let syms = Ok(std::sync::Arc::new(forged::symbols()));
        let text = (forged::LIB, forged::LIB + 0x4000);
        stage.ruby_found(7, "libruby.so.3.1", syms, (0, text), || Some(Box::new(mem)));
        let native = |addr: u64| Frame {
            kind: FrameKind::Return,
            pid: 7,
            addr,
            mapping: None,
        };
        let exec = VM_EXEC.0 + 8;
        let mut stack = vec![native(text.0 + 16), native(exec), native(0x99)];
        stack.extend([native(text.0 + 16), native(exec), native(0x42)]);
        let stack_copy = [0u8; 64];
        let at = regs.then_some(Sampled {
            pc: LEAF_PC,
            cfp: LEAF_CFP,
            stack: &stack_copy,
        });
        stage.read_ahead(7, TID, 5, at);
        stage.expand(7, (TID, 5, None), &mut stack);
        let names: Vec<String> = (stack.iter())
            .map(|f| match stage.names(7, f.addr) {
                Some((_, lines)) if f.kind == FrameKind::Interpreted => {
                    let l = &lines[0];
                    format!("{}:{}", l.function, l.line.unwrap_or(0))
                }
                _ => format!("{:#x}", f.addr),
            })
            .collect();
        (names, stage.notes(), stack)
    };
    let (names, notes, _) = run(forged::memory(), true);
    let want = [
        "block in outer:3",
        "0x99",
        "Array#each:0",
        "outer:2",
        "<main>:1",
        "0x42",
    ];
    assert_eq!(names, want, "{notes:?}");
    let (names, _, _) = run(forged::memory(), false);
    assert_eq!(names, want);

    let l = super::layout::RUBY_3_1;
    let patched = |addr: u64, v: u64| {
        let mut regions: Vec<(u64, Vec<u8>)> = forged::memory()
            .regions()
            .map(|(a, b)| (a, b.to_vec()))
            .collect();
        for (at, bytes) in &mut regions {
            if let Some(off) = addr.checked_sub(*at).map(|o| o as usize)
                && off + 8 <= bytes.len()
            {
                bytes[off..off + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        let mut snap = crate::interp::Snapshot::default();
        for (a, b) in regions {
            snap.insert(a, b);
        }
        snap
    };
    let (vm, ractor, th) = (forged::HEAP, forged::HEAP + 0x1000, forged::HEAP + 0x2000);
    let _ = vm;
    // The thread list loops on itself without the sampled thread.
    let looped = patched(th + l.th_tid, 99);
    let (_, notes, stack) = run(looped, true);
    let marked = |s: &[Frame]| {
        s.iter()
            .filter(|f| f.kind == FrameKind::Interpreted)
            .all(|f| f.addr == UNREADABLE_ID)
    };
    assert!(marked(&stack), "{notes:?}");
    // The current frame outside the stack.
    let (_, _, stack) = run(patched(forged::HEAP + 0x3000 + l.ec_cfp, 8), false);
    assert!(marked(&stack));
    // The ractor's list pointing at garbage.
    let (_, _, stack) = run(patched(ractor + l.ractor_threads, 0x1234_5678), true);
    assert!(marked(&stack));
    // A label that claims 2 GiB: the frame is unreadable, the others named.
    let block_label = forged::HEAP + 0x4800 + 0x240;
    let (names, _, _) = run(patched(block_label, T_STRING_HEAP | (1 << 13)), true);
    assert!(
        names.iter().any(|n| n.starts_with("[ruby: unreadable]")),
        "{names:?}"
    );
}

/// A heap String's flags (`RSTRING_NOEMBED` set by the caller).
const T_STRING_HEAP: u64 = 0x05;
