//! SVG flame graphs through inferno, titled with what was recorded.

use std::io::Write;

use super::folded::{FoldedOptions, fold};
use crate::profile::Profile;

/// Flame graph settings.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct FlameGraphOptions {
    /// One tower per thread. Default is false.
    pub per_thread: bool,
    /// Title; default is none: `profile: COMMAND`.
    pub title: Option<String>,
}

/// The subtitle line: what, how long, how many samples, what was lost.
pub fn describe(profile: &Profile) -> String {
    let m = &profile.meta;
    let mut parts = Vec::new();
    if let Some(pid) = m.pid {
        parts.push(format!("pid {pid}"));
    }
    if let Some(s) = &profile.summary
        && s.end_time_ns > m.start_time_ns
    {
        parts.push(format!(
            "{:.1} s",
            (s.end_time_ns - m.start_time_ns) as f64 / 1e9
        ));
    }
    parts.push(format!("{} samples", profile.samples.len()));
    parts.push(format!("{} lost", profile.lost));
    parts.push(format!(
        "{} Hz of CPU time, {} stacks",
        m.frequency_hz, m.call_graph
    ));
    if profile.damage.is_some() {
        parts.push("recording cut short".into());
    }
    parts.join(" · ")
}

pub fn write(
    profile: &Profile,
    opts: &FlameGraphOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let lines = fold(profile, FoldedOptions::per_thread(opts.per_thread));
    let text: Vec<String> = lines.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut o = inferno::flamegraph::Options::default();
    o.title = opts.title.clone().unwrap_or_else(|| {
        let cmd = profile.meta.command.join(" ");
        if cmd.is_empty() {
            "profile".to_owned()
        } else {
            format!("profile: {cmd}")
        }
    });
    o.subtitle = Some(describe(profile));
    o.count_name = "samples".to_owned();
    if text.is_empty() {
        anyhow::bail!(
            "the recording has no samples: nothing to draw (did the target use any CPU?)"
        );
    }
    inferno::flamegraph::from_lines(&mut o, text.iter().map(String::as_str), out)?;
    Ok(())
}
