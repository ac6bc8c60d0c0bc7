//! The live namer on a thread of its own, so that a window is handed on by its time
//! budget whatever naming costs (issue 46: six large binaries made a 6-second window
//! take 20 to 29 s to name). The window worker sends the frames it has no name for;
//! it waits for the answer until the window's deadline, and what is not named by
//! then goes out marked `[name pending: FILE]`. The answer comes in parts, the
//! kernel's and JIT code's frames first, then one file at a time, smallest first
//! (a large program holds back no other's names); a part that comes late fills the
//! worker's names, so its frames are named in the next window that holds them.
//! One request is named at a time and at most one more waits: a window whose frames
//! find the namer that busy sends nothing, and its new frames are asked for again by
//! the next window holding them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::format::{Frame, FrameId, FrameSymbols, Mapping, SymbolLine, SymbolSource};
use crate::replay::bind::LoadedModule;
use crate::symbolize::frames::{Bound, Live, Namer};
use crate::symbolize::perfmap::TargetUser;

/// What to name: a window's frames, mappings and modules, the frames wanted, and
/// how many windows ended since the last request (the namer ages its kept modules
/// by them).
pub(super) struct Request {
    pub id: u64,
    pub frames: Vec<Frame>,
    pub mappings: Vec<Mapping>,
    pub modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    pub wanted: Vec<FrameId>,
    pub uids: HashMap<u32, TargetUser>,
    pub windows_ended: u64,
    /// Modules (by the address of their [`LoadedModule`]) to name from their symbol
    /// tables alone, their DWARF not read yet (see [`super::worker`]).
    pub defer_dwarf: HashSet<usize>,
}

/// The names found for part of a request (one file's frames, or the kernel's and
/// JIT code's): the frames it covers and those of them named.
pub(super) struct Answer {
    pub id: u64,
    pub covered: Vec<FrameId>,
    pub named: Vec<FrameSymbols>,
    /// The request's last part.
    pub done: bool,
}

/// Requests queued beside the one being named.
const WAITING: usize = 1;

/// Parts of answers waiting for the worker before the naming thread waits.
const ANSWERS: usize = 256;

/// The naming thread and its two channels.
pub(super) struct NamingThread {
    tx: Option<SyncSender<Request>>,
    rx: Receiver<Answer>,
    thread: Option<JoinHandle<()>>,
    /// Requests sent and not answered yet.
    pub(super) in_flight: usize,
}

impl NamingThread {
    /// Starts naming with `namer`; gives it back if no thread can be started.
    pub(super) fn spawn(namer: Namer) -> Result<NamingThread, Box<Namer>> {
        // Room for the request being named too, before the thread has taken it.
        let (tx, requests) = sync_channel::<Request>(WAITING + 1);
        let (answers, rx) = sync_channel::<Answer>(ANSWERS);
        // The namer goes over once the thread runs, so a failed start keeps it.
        let (give, take) = sync_channel::<Namer>(1);
        let started = std::thread::Builder::new()
            .name("live-names".into())
            .spawn(move || {
                if let Ok(namer) = take.recv() {
                    serve(namer, requests, answers);
                }
            });
        let thread = match started {
            Ok(t) => t,
            Err(_) => return Err(Box::new(namer)),
        };
        if let Err(e) = give.send(namer) {
            return Err(Box::new(e.0));
        }
        Ok(NamingThread {
            tx: Some(tx),
            rx,
            thread: Some(thread),
            in_flight: 0,
        })
    }

    /// Whether a request sent now would be taken at once or after the one named.
    pub(super) fn can_take(&self) -> bool {
        self.in_flight <= WAITING
    }

    /// Sends a request (never blocks: see [`NamingThread::can_take`]); gives it
    /// back if the thread is gone or busy.
    pub(super) fn send(&mut self, r: Request) -> Option<Request> {
        let Some(tx) = &self.tx else {
            return Some(r);
        };
        if !self.can_take() {
            return Some(r);
        }
        match tx.try_send(r) {
            Ok(()) => {
                self.in_flight += 1;
                None
            }
            Err(TrySendError::Full(r) | TrySendError::Disconnected(r)) => Some(r),
        }
    }

    /// The next answer, waiting until `deadline` (None: as long as it takes).
    pub(super) fn answer(&mut self, deadline: Option<Instant>) -> Option<Answer> {
        if self.in_flight == 0 {
            return None;
        }
        let got = match deadline {
            None => self.rx.recv().ok(),
            Some(d) => self
                .rx
                .recv_timeout(d.saturating_duration_since(Instant::now()))
                .ok(),
        };
        if got.as_ref().is_some_and(|a| a.done) {
            self.in_flight -= 1;
        }
        got
    }
}

impl Drop for NamingThread {
    fn drop(&mut self) {
        self.tx = None;
        // Answers not taken would block the thread's send: drain them.
        while self.in_flight > 0 {
            match self.rx.recv() {
                Ok(a) if a.done => self.in_flight -= 1,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The naming thread: names each request, ages the kept modules by the windows
/// ended, gives freed memory back, and answers.
fn serve(mut namer: Namer, requests: Receiver<Request>, answers: SyncSender<Answer>) {
    let mut trimmed = 0;
    for r in requests {
        let parts = parts(&r);
        let n = parts.len();
        let mut gone = false;
        for (i, part) in parts.into_iter().enumerate() {
            let named = name(&mut namer, &r, &part);
            let done = i + 1 == n;
            if done {
                for _ in 0..r.windows_ended {
                    namer.end_window();
                }
            }
            let answer = Answer {
                id: r.id,
                covered: part,
                named,
                done,
            };
            if answers.send(answer).is_err() {
                gone = true;
                break;
            }
        }
        if gone {
            break;
        }
        if super::super::events::debug_tables() {
            let (kept, bytes) = namer.kept_usage();
            eprintln!(
                "profile: namer tables: parsed modules {kept} ({} MiB)",
                bytes >> 20
            );
        }
        // The request's modules go before the memory is given back.
        drop(r);
        // Naming read a module's DWARF (tens of MiB, dropped by now unless kept) or
        // dropped kept names: give the memory back. Not every window: trimming walks
        // the whole heap, and what it gives back is faulted in again on reuse.
        if namer.freed() != trimmed {
            trimmed = namer.freed();
            super::super::sys::release_free_memory();
        }
    }
}

/// A request's wanted frames in parts, each answered as soon as it is named: the
/// kernel's and JIT code's first, then each file's, smallest tables first, so a
/// large program being named holds back no other program's names.
fn parts(r: &Request) -> Vec<Vec<FrameId>> {
    let mut by_module: HashMap<usize, (usize, Vec<FrameId>)> = HashMap::new();
    let mut rest = Vec::new();
    for &id in &r.wanted {
        let module = r
            .frames
            .get(id as usize)
            .filter(|f| f.kind.is_user())
            .and_then(|f| f.mapping)
            .and_then(|m| r.modules.get(m as usize)?.as_ref());
        match module {
            Some((lm, _)) => {
                let e = by_module
                    .entry(Arc::as_ptr(lm) as usize)
                    .or_insert_with(|| (lm.image.resident_bytes(), Vec::new()));
                e.1.push(id);
            }
            None => rest.push(id),
        }
    }
    let mut modules: Vec<(usize, Vec<FrameId>)> = by_module.into_values().collect();
    modules.sort_by_key(|(bytes, ids)| (*bytes, ids.first().copied()));
    let mut out = Vec::with_capacity(modules.len() + 1);
    out.push(rest);
    out.extend(modules.into_iter().map(|(_, ids)| ids));
    out
}

/// Names the frames `ids` of request `r`.
pub(super) fn name(namer: &mut Namer, r: &Request, ids: &[FrameId]) -> Vec<FrameSymbols> {
    if ids.is_empty() {
        return Vec::new();
    }
    let jit_maps = HashMap::new();
    let bound = Bound {
        mappings: &r.mappings,
        modules: &r.modules,
        live: Some(Live {
            uids: &r.uids,
            jit_maps: &jit_maps,
            defer_dwarf: Some(&r.defer_dwarf),
        }),
        kernel: Ok(()),
    };
    namer.name(&r.frames, ids.iter().copied(), &bound).0
}

/// The name of a frame the namer has not named by the window's deadline: its file's
/// name, so a pending frame of one program stays apart from another's.
pub(super) fn pending(frame: FrameId, path: Option<&str>) -> FrameSymbols {
    let file = path
        .and_then(|p| p.rsplit('/').next())
        .filter(|f| !f.is_empty())
        .unwrap_or("?");
    FrameSymbols {
        frame,
        source: SymbolSource::Native,
        lines: vec![SymbolLine {
            function: format!("[name pending: {file}]"),
            file: None,
            line: None,
            inlined: false,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::FrameKind;
    use crate::running::modules::ModuleCache;

    fn request(id: u64, modules: Vec<Option<(Arc<LoadedModule>, u64)>>) -> Request {
        let user = |mapping| Frame {
            kind: FrameKind::User,
            pid: 1,
            addr: 0x1000,
            mapping: Some(mapping),
        };
        Request {
            id,
            frames: vec![
                user(0),
                Frame {
                    kind: FrameKind::Kernel,
                    pid: 0,
                    addr: 0xffff_ffff_8100_0000,
                    mapping: None,
                },
                user(1),
                user(0),
            ],
            mappings: vec![Mapping::default(), Mapping::default()],
            modules,
            wanted: vec![0, 1, 2, 3],
            uids: HashMap::new(),
            windows_ended: 1,
            defer_dwarf: HashSet::new(),
        }
    }

    #[test]
    fn parts_put_the_kernel_first_then_files_smallest_first() {
        let mut cache = ModuleCache::new();
        let me = std::process::id();
        let big = cache.get(me, 0x1000, 0x2000, "/bin/ls", None).unwrap();
        let small = cache.get(me, 0x3000, 0x4000, "/bin/true", None).unwrap();
        assert!(small.image.resident_bytes() < big.image.resident_bytes());
        let r = request(0, vec![Some((big, 0)), Some((small, 0))]);
        assert_eq!(parts(&r), vec![vec![1], vec![2], vec![0, 3]]);
    }

    #[test]
    fn every_request_is_answered_whole_and_at_most_two_wait() {
        let mut t =
            NamingThread::spawn(Namer::new(&[], None)).unwrap_or_else(|_| panic!("no thread"));
        assert!(t.send(request(7, vec![None, None])).is_none());
        assert!(t.send(request(8, vec![None, None])).is_none());
        // A third waits for the first two's answers.
        assert!(t.send(request(9, vec![None, None])).is_some());
        let mut done = Vec::new();
        while let Some(a) = t.answer(None) {
            assert!(a.covered.iter().all(|f| [0, 1, 2, 3].contains(f)));
            if a.done {
                done.push(a.id);
            }
        }
        assert_eq!(done, vec![7, 8]);
        assert_eq!(t.in_flight, 0);
        assert!(t.send(request(10, vec![None, None])).is_none());
        // Dropped with an answer untaken: the thread ends all the same.
        drop(t);
    }

    #[test]
    fn a_pending_frame_is_named_after_its_file() {
        let fs = pending(3, Some("/home/u/bin/big (deleted)"));
        assert_eq!(fs.frame, 3);
        assert_eq!(fs.lines[0].function, "[name pending: big (deleted)]");
        assert_eq!(
            pending(0, Some("kernel")).lines[0].function,
            "[name pending: kernel]"
        );
        assert_eq!(pending(0, None).lines[0].function, "[name pending: ?]");
    }
}
