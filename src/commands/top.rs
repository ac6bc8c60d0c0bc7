//! `profile top`: a live recording (no file) whose windows feed [`profile::top`]; drawn
//! full screen on a terminal, or printed as one plain table per interval elsewhere.
//!
//! The terminal is restored however `top` ends: `q`/Ctrl-C (keys, as raw mode turns
//! Ctrl-C into one), SIGTERM/SIGHUP/SIGINT from outside (the recorder stops and the
//! guard's `Drop` runs), the target's exit, an error, or a panic (the panic hook).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossterm::{cursor, terminal};
use profile::record::{LiveSink, Target, Window};
use profile::top::keys::{Key, parse_keys, read_terminal};
use profile::top::{Header, Sort, Top, View, WindowStats, render};

use crate::cli::TopArgs;

/// Windows are cut at least this often on a terminal, so keys answer quickly; the
/// screen is redrawn every `--interval`.
const TICK: Duration = Duration::from_millis(250);

pub(crate) fn top(args: &TopArgs) -> anyhow::Result<ExitCode> {
    let opts = args.to_options().map_err(anyhow::Error::msg)?;
    let interactive = !args.plain && io::stdout().is_terminal() && io::stdin().is_terminal();
    let mut sink = TopSink::new(args, &opts, interactive);
    // The recorder stops on SIGHUP too; this tells the sink not to draw any more.
    let _ = signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&sink.hangup));
    if interactive {
        sink.screen = Some(Screen::enter()?);
        // Something on screen until the first window is drawn.
        let (width, _) = size();
        let line = profile::top::truncate(
            &format!("profile top: {}: attaching...", sink.header.target),
            width,
        );
        crossterm::execute!(
            io::stdout(),
            cursor::MoveTo(0, 0),
            crossterm::style::Print(line)
        )?;
    }
    let result = profile::record::record_live(&opts, &mut sink);
    sink.end(result, interactive)
}

impl TopSink {
    /// The sink of a `top` of `opts`'s target: the processes attached named, and
    /// those they started before attach watched or listed as unwatched.
    fn new(args: &TopArgs, opts: &profile::record::RecordOptions, interactive: bool) -> TopSink {
        let tick = if interactive {
            TICK.min(args.interval)
        } else {
            args.interval
        };
        let keep = ((args.window.as_secs_f64() / tick.as_secs_f64()).round() as usize).max(1);
        let mut top = Top::new(keep);
        let mut unwatched = Vec::new();
        if let profile::record::Target::Pids(pids) = &opts.target {
            for &pid in pids {
                top.attach(pid, &comm(pid));
            }
            let older = profile::record::process_descendants(pids);
            if opts.children && opts.existing_children {
                // Watched from the start: their parents read now, while they run.
                for &(pid, _) in &older {
                    top.set_parent(pid, profile::record::process_parent(pid));
                }
            } else {
                unwatched = older;
            }
        }
        TopSink {
            top,
            header: Header {
                target: describe(&opts.target),
                paused: false,
                off_cpu: args.off_cpu,
                keys: interactive,
                unwatched,
            },
            view: args.view.into(),
            sort: Sort::SelfTime,
            tick,
            refresh: args.interval,
            last_draw: None,
            rows: args.rows,
            runtime_only: args.runtime_only,
            screen: None,
            frozen: None,
            error: None,
            hangup: Arc::new(AtomicBool::new(false)),
            drawn_size: None,
        }
    }

    /// After the recording: the terminal restored, the last screen printed again,
    /// the recording's end said; the target's exit code, or the first error.
    fn end(
        mut self,
        result: Result<profile::record::RecordSummary, profile::record::RecordError>,
        interactive: bool,
    ) -> anyhow::Result<ExitCode> {
        let last = self.last_lines();
        let hung_up = self.hangup.load(Ordering::Relaxed);
        if hung_up && let Some(screen) = self.screen.as_mut() {
            screen.active = false;
        }
        let screen_error = if hung_up {
            Ok(None)
        } else {
            self.screen.take().map(Screen::leave).transpose()
        };
        let s = result?;
        if hung_up {
            // Nowhere to write to.
            return Ok(ExitCode::SUCCESS);
        }
        screen_error?;
        if let Some(e) = self.error {
            return Err(e.into());
        }
        if interactive {
            // What was on screen stays readable after the alternate screen is gone.
            let mut out = io::stdout().lock();
            for l in last {
                writeln!(out, "{l}")?;
            }
        }
        eprintln!(
            "profile top: {} ({}, {} lost)",
            s.stop_reason.describe(),
            profile::output::plural(s.samples as usize, "sample", "samples"),
            s.lost
        );
        Ok(match s.exit_code {
            Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
            None => ExitCode::SUCCESS,
        })
    }
}

/// `pid 4242 (name)`, `4 processes of postgres (pids …)`, or the command.
fn describe(target: &Target) -> String {
    match target {
        Target::Pids(pids) => {
            let names: Vec<String> = pids
                .iter()
                .map(|&p| profile::text::terminal_line(&comm(p)).into_owned())
                .collect();
            if pids.len() > 1 && names.iter().all(|n| *n == names[0]) {
                let list: Vec<String> = pids.iter().map(u32::to_string).collect();
                return format!(
                    "{} of {} (pids {})",
                    profile::output::plural(pids.len(), "process", "processes"),
                    names[0],
                    list.join(", ")
                );
            }
            pids.iter()
                .zip(&names)
                .map(|(p, name)| format!("pid {p} ({name})"))
                .collect::<Vec<_>>()
                .join(", ")
        }
        Target::Threads(tids) => format!("threads {tids:?}"),
        Target::Command(argv) => argv.join(" "),
        Target::AllCpus => "all CPUs".to_owned(),
    }
}

/// The name (comm) of process `pid`, empty when it is gone.
fn comm(pid: u32) -> String {
    let name = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    String::from_utf8_lossy(&name).trim().to_owned()
}

struct TopSink {
    top: Top,
    header: Header,
    view: View,
    sort: Sort,
    tick: Duration,
    refresh: Duration,
    last_draw: Option<Instant>,
    /// Rows of a plain table.
    rows: usize,
    /// The runtimes' view (`--runtime-only`).
    runtime_only: bool,
    screen: Option<Screen>,
    /// The sliding window as it was when the display was paused.
    frozen: Option<Top>,
    /// The first error writing to the terminal or stdout (stops `top`).
    error: Option<io::Error>,
    /// Set by SIGHUP: the terminal is gone.
    hangup: Arc<AtomicBool>,
    /// The terminal's size at the last draw.
    drawn_size: Option<(u16, u16)>,
}

impl TopSink {
    /// The lines the screen shows now.
    fn lines(&self, width: usize, height: usize) -> Vec<String> {
        let top = self.frozen.as_ref().unwrap_or(&self.top);
        render(top, &self.header, self.view, self.sort, width, height)
    }

    /// The last screen, for stdout after the alternate screen is left.
    fn last_lines(&self) -> Vec<String> {
        let (width, height) = self.screen.as_ref().map_or((200, 60), |_| size());
        let header = Header {
            keys: false,
            ..self.header.clone()
        };
        let top = self.frozen.as_ref().unwrap_or(&self.top);
        let mut lines = render(top, &header, self.view, self.sort, width, height);
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    }

    /// Reads the keys pressed since the last window; false: quit (a key, or the
    /// terminal hung up).
    fn keys(&mut self) -> io::Result<(bool, bool)> {
        // The terminal is read directly: crossterm's event reader spun forever on a
        // terminal that hung up between two reads (a read returns nothing, always).
        let Some(bytes) = read_terminal()? else {
            self.hangup.store(true, Ordering::Relaxed);
            if let Some(screen) = self.screen.as_mut() {
                screen.active = false;
            }
            return Ok((false, false));
        };
        // A resized terminal is redrawn at once.
        let now = terminal::size().ok();
        let mut changed = now != self.drawn_size && self.drawn_size.is_some();
        for key in parse_keys(&bytes) {
            match key {
                Key::Quit => return Ok((false, changed)),
                Key::Sort => {
                    self.sort = match self.sort {
                        Sort::SelfTime => Sort::Total,
                        Sort::Total => Sort::SelfTime,
                    };
                }
                Key::View => self.view = self.view.next(),
                Key::Pause => {
                    self.header.paused = !self.header.paused;
                    self.frozen = self.header.paused.then(|| self.top.clone());
                }
            }
            changed = true;
        }
        Ok((true, changed))
    }

    fn draw(&mut self) -> io::Result<()> {
        self.drawn_size = terminal::size().ok();
        let (width, height) = size();
        let lines = self.lines(width, height);
        let mut buf = Vec::with_capacity(8192);
        for (i, l) in lines.iter().enumerate() {
            crossterm::queue!(
                buf,
                cursor::MoveTo(0, i as u16),
                crossterm::style::Print(l),
                terminal::Clear(terminal::ClearType::UntilNewLine)
            )?;
        }
        if lines.len() < height {
            crossterm::queue!(
                buf,
                cursor::MoveTo(0, lines.len() as u16),
                terminal::Clear(terminal::ClearType::FromCursorDown)
            )?;
        }
        let mut out = io::stdout().lock();
        out.write_all(&buf)?;
        out.flush()
    }

    fn print_plain(&mut self, last: bool) -> io::Result<()> {
        // The header (and time by state), a blank line, the column titles, the rows.
        let height = self.rows + 3 + usize::from(self.header.off_cpu);
        let mut lines = self.lines(usize::MAX, height);
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        let mut out = io::stdout().lock();
        if last {
            writeln!(out, "(last, partial window)")?;
        }
        for l in lines {
            writeln!(out, "{l}")?;
        }
        writeln!(out)?;
        out.flush()
    }
}

impl LiveSink for TopSink {
    fn interval(&self) -> Duration {
        self.tick
    }

    fn window(&mut self, w: Window) -> bool {
        // The terminal hung up: stop, and touch it no more.
        if self.hangup.load(Ordering::Relaxed) {
            if let Some(screen) = self.screen.as_mut() {
                screen.active = false;
            }
            return false;
        }
        self.top
            .push(WindowStats::from_recording(&w.recording, self.runtime_only));
        // Processes running before attach: their parents, for the processes view.
        for pid in self.top.unknown_parents() {
            self.top
                .set_parent(pid, profile::record::process_parent(pid));
        }
        let result = if self.screen.is_some() {
            match self.keys() {
                Ok((false, _)) => return false,
                Ok((true, changed)) => {
                    let due = self.last_draw.is_none_or(|t| t.elapsed() >= self.refresh);
                    if changed || due {
                        if due {
                            self.last_draw = Some(Instant::now());
                        }
                        self.draw()
                    } else {
                        Ok(())
                    }
                }
                Err(e) => Err(e),
            }
        } else if w.last && self.top.windows_seen > 1 && w.end_ns - w.start_ns < 100_000_000 {
            // A sliver of a window at the end adds nothing to the previous table.
            Ok(())
        } else {
            self.print_plain(w.last && self.top.windows_seen > 1)
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}

fn size() -> (usize, usize) {
    terminal::size().map_or((80, 24), |(w, h)| (usize::from(w), usize::from(h)))
}

/// The terminal in full-screen mode: raw input, the alternate screen, no cursor.
/// Leaving (or dropping, or a panic) puts it back as it was.
struct Screen {
    active: bool,
}

impl Screen {
    fn enter() -> io::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        let screen = Screen { active: true };
        crossterm::execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }

    fn leave(mut self) -> io::Result<()> {
        self.active = false;
        restore_checked()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if self.active {
            restore();
        }
    }
}

fn restore_checked() -> io::Result<()> {
    crossterm::execute!(io::stdout(), cursor::Show, terminal::LeaveAlternateScreen)?;
    terminal::disable_raw_mode()
}

fn restore() {
    let _ = restore_checked();
}
