//! Off-CPU (wall-time) profiles through the model and every output, on a recording
//! built with the writer: two threads whose time per state is known by construction.

use crate::format::{
    Frame, FrameKind, FrameSymbols, Meta, OffCpu, Recording, RecordingWriter, Sample, Summary,
    SymbolLine, SymbolSource, ThreadEvent, ThreadState,
};
use crate::profile::filter::Filter;
use crate::profile::{Profile, ProfileOptions};

mod otlp;
mod outputs;
mod states;
mod timeline;

const START: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn frame(kind: FrameKind, addr: u64) -> Frame {
    Frame {
        kind,
        pid: if kind == FrameKind::Kernel { 0 } else { 10 },
        addr,
        mapping: None,
    }
}

/// Thread `main` (tid 10): 400 ms running in `compute`, 600 ms waiting on a lock in
/// `take_lock` (kernel `futex_wait`). Thread `worker` (tid 11, born at 100 ms):
/// 100 ms running in `compute`, then 800 ms asleep in `nap`. One second in all.
pub(crate) fn recording(off_cpu: bool) -> Recording {
    let meta = Meta {
        tool_version: "test".into(),
        command: vec!["app".into()],
        event: "task-clock".into(),
        sample_period_ns: 10 * MS,
        frequency_hz: 100,
        call_graph: crate::format::CallGraph::Dwarf,
        start_time_ns: START,
        off_cpu,
        ..Meta::default()
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta).unwrap();
    for (tid, name) in [(10, "main"), (11, "worker")] {
        w.thread_event(&ThreadEvent::Name {
            time: START,
            pid: 10,
            tid,
            name: name.into(),
        });
    }
    w.thread_event(&ThreadEvent::Start {
        time: START + 100 * MS,
        pid: 10,
        ppid: 10,
        tid: 11,
    });
    let (main_f, compute, take_lock, nap) = (0x1000, 0x2000, 0x3000, 0x4000);
    let (futex_wait, hrtimer_sleep) = (0xffff_0000, 0xffff_1000);
    let cpu_stack = w.intern_stack(&[
        frame(FrameKind::User, compute),
        frame(FrameKind::Return, main_f),
    ]);
    let lock_stack = w.intern_stack(&[
        frame(FrameKind::Kernel, futex_wait),
        frame(FrameKind::User, take_lock),
        frame(FrameKind::Return, main_f),
    ]);
    let sleep_stack = w.intern_stack(&[
        frame(FrameKind::Kernel, hrtimer_sleep),
        frame(FrameKind::User, nap),
        frame(FrameKind::Return, main_f),
    ]);
    // main: runs 0-400 ms (40 samples), blocked 400-1000 ms.
    for i in 0..40 {
        w.sample(&Sample {
            time: START + (i + 1) * 10 * MS,
            pid: 10,
            tid: 10,
            cpu: 0,
            weight: 10 * MS,
            stack: cpu_stack,
        });
    }
    // worker: runs 100-200 ms (10 samples), sleeps 200-1000 ms.
    for i in 0..10 {
        w.sample(&Sample {
            time: START + 100 * MS + (i + 1) * 10 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            weight: 10 * MS,
            stack: cpu_stack,
        });
    }
    if off_cpu {
        w.off_cpu(&OffCpu {
            time: START + 400 * MS,
            pid: 10,
            tid: 10,
            cpu: 0,
            duration: 600 * MS,
            state: ThreadState::Lock,
            weight: 600 * MS,
            stack: lock_stack,
        });
        // Worker sleeps in two stretches, one of them without a stack whose time the
        // other's stack carries (bounded-rate recording).
        w.off_cpu(&OffCpu {
            time: START + 200 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            duration: 400 * MS,
            state: ThreadState::Sleep,
            weight: 800 * MS,
            stack: sleep_stack,
        });
        w.off_cpu(&OffCpu {
            time: START + 600 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            duration: 400 * MS,
            state: ThreadState::Sleep,
            weight: 0,
            stack: None,
        });
    }
    let line = |f: &str| SymbolLine {
        function: f.into(),
        file: None,
        line: None,
        inlined: false,
    };
    let names = [
        (compute, "compute", SymbolSource::Native),
        (main_f - 1, "main", SymbolSource::Native),
        (take_lock, "take_lock", SymbolSource::Native),
        (nap, "nap", SymbolSource::Native),
        (futex_wait, "futex_wait", SymbolSource::Kernel),
        (hrtimer_sleep, "hrtimer_sleep", SymbolSource::Kernel),
    ];
    let symbols: Vec<FrameSymbols> = w
        .frames()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let at = f.kind.lookup_address(f.addr);
            names
                .iter()
                .find(|(a, _, _)| *a == at)
                .map(|&(_, n, source)| FrameSymbols {
                    frame: i as u32,
                    source,
                    lines: vec![line(n)],
                })
        })
        .collect();
    w.symbols(&symbols).unwrap();
    let bytes = w
        .finish(&Summary {
            end_time_ns: START + 1000 * MS,
            samples: 50,
            stop_reason: crate::format::StopReason::Duration,
            ..Summary::default()
        })
        .unwrap();
    Recording::from_bytes(&bytes, "t").unwrap()
}

fn model(off_cpu: bool) -> Profile {
    Profile::from_recording(&recording(off_cpu), ProfileOptions::default())
}

fn folded(p: &Profile, per_thread: bool) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let opts = super::folded::FoldedOptions::per_thread(per_thread);
    super::folded::write(p, opts, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_owned(), n.parse().unwrap())
        })
        .collect()
}
