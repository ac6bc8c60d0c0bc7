//! The live namer on a thread of its own, so that a window is handed on by its time
//! budget whatever naming costs (issue 46: six large binaries made a 6-second window
//! take 20 to 29 s to name). The window worker sends the frames it has no name for;
//! it waits for the answer until the window's deadline, and what is not named by
//! then goes out marked `[name pending: FILE]`. The answer, when it comes, fills the
//! worker's names, so the frames are named in the next window that holds them.
//! One request is named at a time and at most one more waits: a window whose frames
//! find the namer that busy sends nothing, and its new frames are asked for again by
//! the next window holding them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use super::super::modules::LoadedModule;
use crate::format::{Frame, FrameId, FrameSymbols, Mapping, SymbolLine, SymbolSource};
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
}

/// The names found for a request, sorted by frame id.
pub(super) struct Answer {
    pub id: u64,
    pub named: Vec<FrameSymbols>,
}

/// Requests queued beside the one being named.
const WAITING: usize = 1;

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
        let (tx, requests) = sync_channel::<Request>(WAITING);
        let (answers, rx) = sync_channel::<Answer>(WAITING + 1);
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
        if got.is_some() {
            self.in_flight -= 1;
        }
        got
    }
}

impl Drop for NamingThread {
    fn drop(&mut self) {
        self.tx = None;
        // Answers not taken would block the thread's send: drain them.
        while self.in_flight > 0 && self.rx.recv().is_ok() {
            self.in_flight -= 1;
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
        let named = name(&mut namer, &r);
        for _ in 0..r.windows_ended {
            namer.end_window();
        }
        if super::super::events::debug_tables() {
            let (kept, bytes) = namer.kept_usage();
            eprintln!(
                "profile: namer tables: parsed modules {kept} ({} MiB)",
                bytes >> 20
            );
        }
        // The request's modules go before the memory is given back.
        let id = r.id;
        drop(r);
        // Naming read a module's DWARF (tens of MiB, dropped by now unless kept) or
        // dropped kept names: give the memory back. Not every window: trimming walks
        // the whole heap, and what it gives back is faulted in again on reuse.
        if namer.freed() != trimmed {
            trimmed = namer.freed();
            super::super::sys::release_free_memory();
        }
        if answers.send(Answer { id, named }).is_err() {
            break;
        }
    }
}

pub(super) fn name(namer: &mut Namer, r: &Request) -> Vec<FrameSymbols> {
    if r.wanted.is_empty() {
        return Vec::new();
    }
    let jit_maps = HashMap::new();
    let bound = Bound {
        mappings: &r.mappings,
        modules: &r.modules,
        live: Some(Live {
            uids: &r.uids,
            jit_maps: &jit_maps,
        }),
        kernel: Ok(()),
    };
    namer.name(&r.frames, r.wanted.iter().copied(), &bound).0
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
