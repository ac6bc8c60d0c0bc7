//! A dump as text (one block per thread: header with its state, then its frames leaf
//! first, as py-spy dump and jstack print them) or as JSON for scripts.
//!
//! JSON shape (docs/json.md): `{"format_version": 1, "pid", "command": [..],
//! "elapsed_ms", "stopped_threads", "threads": [{"tid", "name", "proc_state",
//! "state", "syscall", "blocked_in", "capture", "note", "kernel_stack": [..],
//! "frames": [{"address", "function", "inlined": [{"function", "location"}],
//! "location", "module"}]}]}`.

use std::io::{self, Write};

use serde::Serialize;

use super::{ProcessDump, ThreadDump};
use crate::text::{terminal, terminal_line, terminal_symbol};

/// The state as the dump says it: the off-CPU state, or `stopped`/`zombie`/`dead` from
/// the state letter.
pub(super) fn state_name(t: &ThreadDump) -> &'static str {
    match t.letter {
        'T' | 't' => "stopped",
        'Z' => "zombie",
        'X' => "dead",
        _ => t.state.name(),
    }
}

/// Writes the dump as text.
pub fn write_text(d: &ProcessDump, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "Process {} ({}): {}",
        d.pid,
        terminal(&d.command.join(" "), 100),
        crate::output::plural(d.threads.len(), "thread", "threads")
    )?;
    for t in &d.threads {
        writeln!(w)?;
        let name = terminal_line(&t.name);
        write!(w, "Thread {} \"{name}\" {}", t.tid, state_name(t))?;
        let syscall = t.syscall.as_deref().map(terminal_line);
        let blocked_in = t.blocked_in.as_deref().map(terminal_line);
        match (&syscall, &blocked_in) {
            (Some(s), Some(k)) => write!(w, " in {s}() at {k}")?,
            (Some(s), None) => write!(w, " in {s}()")?,
            (None, Some(k)) => write!(w, " at {k}")?,
            (None, None) => {}
        }
        writeln!(w)?;
        for f in &t.frames {
            for inl in &f.inlined {
                let function = terminal_symbol(&inl.function);
                match inl.location.as_deref().map(terminal_line) {
                    Some(loc) => writeln!(w, "    {function} ({loc}, inlined)")?,
                    None => writeln!(w, "    {function} (inlined)")?,
                }
            }
            let name = f.function.as_deref().map_or_else(
                || format!("{:#x}", f.addr),
                |n| terminal_symbol(n).into_owned(),
            );
            match (&f.location, &f.module) {
                (Some(loc), _) => writeln!(w, "    {name} ({})", terminal_line(loc))?,
                (None, Some(m)) => writeln!(w, "    {name} ({})", terminal_line(basename(m)))?,
                (None, None) => writeln!(w, "    {name}")?,
            }
        }
        if let Some(n) = &t.note {
            writeln!(w, "    [{}]", terminal_line(n))?;
        }
    }
    writeln!(w)?;
    let sampled = d
        .threads
        .iter()
        .filter(|t| t.capture == super::Capture::Sample)
        .count();
    writeln!(
        w,
        "Dumped {} in {} ms; no thread was stopped ({} read from /proc, {} running ones sampled).",
        crate::output::plural(d.threads.len(), "thread", "threads"),
        d.elapsed.as_millis(),
        d.threads
            .iter()
            .filter(|t| t.capture == super::Capture::Proc)
            .count(),
        sampled
    )
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[derive(Serialize)]
struct JsonDump<'a> {
    format_version: u32,
    pid: u32,
    command: &'a [String],
    elapsed_ms: f64,
    stopped_threads: usize,
    threads: Vec<JsonThread<'a>>,
}

#[derive(Serialize)]
struct JsonThread<'a> {
    tid: u32,
    name: &'a str,
    proc_state: String,
    state: &'static str,
    syscall: Option<&'a str>,
    blocked_in: Option<&'a str>,
    capture: &'static str,
    note: Option<&'a str>,
    kernel_stack: &'a [String],
    frames: Vec<JsonFrame<'a>>,
}

#[derive(Serialize)]
struct JsonFrame<'a> {
    address: String,
    function: Option<&'a str>,
    inlined: Vec<JsonInlined<'a>>,
    location: Option<&'a str>,
    module: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonInlined<'a> {
    function: &'a str,
    location: Option<&'a str>,
}

/// Writes the dump as JSON.
pub fn write_json(d: &ProcessDump, w: &mut dyn Write) -> io::Result<()> {
    let j = JsonDump {
        format_version: 1,
        pid: d.pid,
        command: &d.command,
        elapsed_ms: d.elapsed.as_secs_f64() * 1e3,
        stopped_threads: d.stopped_threads,
        threads: d
            .threads
            .iter()
            .map(|t| JsonThread {
                tid: t.tid,
                name: &t.name,
                proc_state: t.letter.to_string(),
                state: state_name(t),
                syscall: t.syscall.as_deref(),
                blocked_in: t.blocked_in.as_deref(),
                capture: t.capture.name(),
                note: t.note.as_deref(),
                kernel_stack: &t.kernel_stack,
                frames: t
                    .frames
                    .iter()
                    .map(|f| JsonFrame {
                        address: format!("{:#x}", f.addr),
                        function: f.function.as_deref(),
                        inlined: f
                            .inlined
                            .iter()
                            .map(|i| JsonInlined {
                                function: &i.function,
                                location: i.location.as_deref(),
                            })
                            .collect(),
                        location: f.location.as_deref(),
                        module: f.module.as_deref(),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *w, &j)?;
    writeln!(w)
}
