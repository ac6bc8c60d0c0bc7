//! speedscope export: the JSON file format of speedscope.app
//! (<https://www.speedscope.app/file-format-schema.json>), one `sampled` profile per
//! thread with weights in CPU nanoseconds. Samples stay in time order (so
//! speedscope's time-order view is a timeline of the thread's CPU time), and runs of
//! the same stack are written once with their summed weight. In an off-CPU recording
//! the weights are wall-time nanoseconds, off-CPU stacks (ending in
//! `[off-cpu: STATE]`) included, so each thread's profile spans its wall time. Each
//! profile's name ends with its thread's counts as every output gives them (`: 136
//! samples`, and `, 40 off-CPU intervals` in an off-CPU recording).

use std::io::{self, Write};

use serde::Serialize;

use crate::profile::{Profile, StackIndex};

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared<'a>,
    profiles: Vec<Sampled>,
    name: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: String,
}

#[derive(Serialize)]
struct Shared<'a> {
    frames: Vec<Frame<'a>>,
}

#[derive(Serialize)]
struct Frame<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct Sampled {
    #[serde(rename = "type")]
    ty: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<Vec<u32>>,
    weights: Vec<u64>,
}

/// Writes one profile per thread, in the order threads first appear, the busiest
/// first as the active one.
pub fn write(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let frames = profile
        .functions
        .iter()
        .map(|f| Frame {
            name: &f.name,
            file: f.file.as_deref(),
            line: f.line,
        })
        .collect();
    // Each thread's counts in its name, as every output names them (the file format
    // has no field for them, and runs of one stack are written once).
    let mut counts = vec![crate::profile::Counts::default(); profile.threads.len()];
    for s in &profile.samples {
        counts[s.thread.index()].samples += u64::from(profile.is_cpu_sample(s));
    }
    for i in &profile.intervals {
        counts[i.thread.index()].off_cpu_intervals += 1;
    }
    let wall = profile.is_wall_time();
    let mut profiles: Vec<Sampled> = profile
        .threads
        .iter()
        .zip(&counts)
        .map(|(t, c)| Sampled {
            ty: "sampled",
            name: match t.group {
                Some(g) => format!("[{g}] {} (tid {}, pid {})", t.name, t.tid, t.pid),
                None => format!("{} (tid {}, pid {})", t.name, t.tid, t.pid),
            } + ": "
                + &c.describe(wall),
            unit: "nanoseconds",
            start_value: 0,
            end_value: 0,
            samples: Vec::new(),
            weights: Vec::new(),
        })
        .collect();
    let mut last: Vec<Option<StackIndex>> = vec![None; profile.threads.len()];
    let mut order: Vec<usize> = (0..profile.samples.len()).collect();
    order.sort_by_key(|&i| profile.samples[i].time);
    for i in order {
        let s = profile.samples[i];
        let t = s.thread.index();
        let p = &mut profiles[t];
        p.end_value = p.end_value.saturating_add(s.weight);
        if last[t] == Some(s.stack) {
            if let Some(w) = p.weights.last_mut() {
                *w = w.saturating_add(s.weight);
            }
            continue;
        }
        last[t] = Some(s.stack);
        p.samples
            .push(profile.stack(s.stack).iter().map(|f| f.0).collect());
        p.weights.push(s.weight);
    }
    let active = profiles
        .iter()
        .enumerate()
        .max_by_key(|(i, p)| (p.end_value, std::cmp::Reverse(*i)))
        .map_or(0, |(i, _)| i);
    let file = File {
        schema: "https://www.speedscope.app/file-format-schema.json",
        shared: Shared { frames },
        profiles,
        name: super::flamegraph::title(profile),
        active_profile_index: active,
        exporter: format!("profile {}", env!("CARGO_PKG_VERSION")),
    };
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &file)?;
    writeln!(out)?;
    out.flush()
}
