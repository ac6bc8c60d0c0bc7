//! The top table as JSON for scripts: every function's self and total CPU time,
//! shares and sample counts (the same [`rows`] the table prints),
//! plus totals, per-thread totals, lost samples and how the recording was made.
//!
//! Shape (docs/json.md, docs/report.schema.json; times in nanoseconds, percentages
//! of the total CPU time of the kept samples): `{"format_version": 1, "meta":
//! {..recording META..}, "summary": {..END..} | null,
//! "filter": "..", "totals": {"samples", "cpu_ns", "unsampled_ns", "lost", "functions"},
//! "processes": [{"name", "pids", "samples", "cpu_ns", "percent"}],
//! "threads": [{"pid", "tid", "name", "process", "samples", "cpu_ns", "percent"}],
//! "functions": [{"name", "kind", "file", "line", "self_ns", "self_percent",
//! "self_samples", "total_ns", "total_percent", "total_samples"}]}`.
//!
//! An off-CPU recording (`record --off-cpu`) measures wall time: percentages are of
//! the wall time of the kept samples, `totals` adds `wall_ns`, each thread adds
//! `wall_ns` and `states` (state name -> nanoseconds: `running`, `runnable`, `sleep`,
//! `lock`, `io`, `other`; `cpu_ns` is its running time) and each function adds
//! `states` (its total time by state). CPU-only reports are unchanged.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::top::rows;
use crate::format::{Meta, Summary};
use crate::profile::{Profile, ThreadState};

/// State name -> nanoseconds, every state present.
fn state_map(by_state: [u64; ThreadState::COUNT]) -> BTreeMap<&'static str, u64> {
    ThreadState::ALL
        .iter()
        .map(|s| (s.name(), by_state[*s as usize]))
        .collect()
}

/// The version of this JSON shape (docs/json.md): raised when a field changes meaning
/// or goes away; new fields can appear without it.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Report<'a> {
    format_version: u32,
    meta: &'a Meta,
    summary: Option<&'a Summary>,
    /// The filters applied, in words (empty: none).
    filter: &'a str,
    totals: Totals,
    /// The processes with samples, by name: a program's processes together.
    processes: Vec<ProcessRow>,
    threads: Vec<ThreadRow<'a>>,
    functions: Vec<FunctionRow<'a>>,
}

#[derive(Serialize)]
struct Totals {
    /// CPU samples ([`Profile::counts`]).
    samples: u64,
    /// Off-CPU intervals, in an off-CPU recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu_intervals: Option<u64>,
    cpu_ns: u64,
    /// CPU time no sample stands for (`[unsampled]`), part of `cpu_ns`, in no function.
    unsampled_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall_ns: Option<u64>,
    lost: u64,
    functions: usize,
}

#[derive(Serialize)]
struct ProcessRow {
    name: String,
    pids: Vec<u32>,
    samples: u64,
    cpu_ns: u64,
    percent: f64,
}

#[derive(Serialize)]
struct ThreadRow<'a> {
    pid: u32,
    tid: u32,
    name: &'a str,
    process: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    samples: u64,
    cpu_ns: u64,
    percent: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    states: Option<BTreeMap<&'static str, u64>>,
}

#[derive(Serialize)]
struct FunctionRow<'a> {
    name: &'a str,
    kind: &'static str,
    file: Option<&'a str>,
    line: Option<u32>,
    self_ns: u64,
    self_percent: f64,
    self_samples: u64,
    total_ns: u64,
    total_percent: f64,
    total_samples: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    states: Option<BTreeMap<&'static str, u64>>,
}

/// Percentage rounded to 4 decimals, so the output is stable and readable.
fn pct(part: u64, total: u64) -> f64 {
    (part as f64 * 100.0 / total.max(1) as f64 * 1e4).round() / 1e4
}

/// Writes the report; `limit` keeps only the heaviest functions (None: all).
pub fn write(
    profile: &Profile,
    filter: &str,
    limit: Option<usize>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let total = profile.total_weight();
    let wall = profile.is_wall_time();
    let threads = thread_rows(profile, total);
    let processes = process_rows(profile, &threads, total);
    let all = rows(profile);
    let functions = all
        .iter()
        .take(limit.unwrap_or(usize::MAX))
        .map(|r| {
            let f = profile.function(r.function);
            FunctionRow {
                name: &f.name,
                kind: super::kind_word(f.class),
                file: f.file.as_deref(),
                line: f.line,
                self_ns: r.self_weight,
                self_percent: pct(r.self_weight, total),
                self_samples: r.self_samples,
                total_ns: r.total_weight,
                total_percent: pct(r.total_weight, total),
                total_samples: r.total_samples,
                states: wall.then(|| state_map(r.total_by_state)),
            }
        })
        .collect();
    let counts = profile.counts();
    let report = Report {
        format_version: FORMAT_VERSION,
        meta: &profile.meta,
        summary: profile.summary.as_ref(),
        filter,
        processes,
        totals: Totals {
            samples: counts.samples,
            off_cpu_intervals: wall.then_some(counts.off_cpu_intervals),
            cpu_ns: if wall {
                profile
                    .samples
                    .iter()
                    .filter(|s| !s.state.is_off_cpu())
                    .fold(0u64, |t, s| t.saturating_add(s.weight))
            } else {
                total
            },
            unsampled_ns: profile.coverage().unsampled_ns,
            wall_ns: wall.then_some(total),
            lost: profile.lost,
            functions: all.len(),
        },
        threads,
        functions,
    };
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer_pretty(&mut out, &report)?;
    writeln!(out)?;
    out.flush()
}

/// Each thread's samples and time (by state in a wall-time profile), in the
/// profile's thread order.
fn thread_rows(profile: &Profile, total: u64) -> Vec<ThreadRow<'_>> {
    let mut per_thread = vec![(0u64, 0u64); profile.threads.len()];
    for s in &profile.samples {
        let t = &mut per_thread[s.thread.index()];
        t.0 += u64::from(profile.is_cpu_sample(s));
        t.1 = t.1.saturating_add(s.weight);
    }
    let wall = profile.is_wall_time();
    let states = profile.thread_states();
    profile
        .threads
        .iter()
        .zip(per_thread)
        .zip(states)
        .map(|((t, (samples, weight)), by_state)| ThreadRow {
            pid: t.pid,
            tid: t.tid,
            name: &t.name,
            process: &t.process,
            group: t.group.map(|g| g.to_string()),
            samples,
            cpu_ns: if wall {
                by_state[ThreadState::Running as usize]
            } else {
                weight
            },
            percent: pct(weight, total),
            wall_ns: wall.then_some(weight),
            states: wall.then(|| state_map(by_state)),
        })
        .collect()
}

/// Each process group's samples and CPU time, summed over its threads' rows.
fn process_rows(profile: &Profile, threads: &[ThreadRow], total: u64) -> Vec<ProcessRow> {
    let mut processes: Vec<ProcessRow> = profile
        .processes()
        .into_iter()
        .map(|g| ProcessRow {
            name: g.name,
            pids: g.pids,
            samples: 0,
            cpu_ns: 0,
            percent: 0.0,
        })
        .collect();
    let group_of: std::collections::HashMap<u32, usize> = processes
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.pids.iter().map(move |&pid| (pid, i)))
        .collect();
    for (t, row) in profile.threads.iter().zip(threads) {
        if let Some(p) = group_of.get(&t.pid).map(|&i| &mut processes[i]) {
            p.samples += row.samples;
            p.cpu_ns = p.cpu_ns.saturating_add(row.cpu_ns);
        }
    }
    for p in &mut processes {
        p.percent = pct(p.cpu_ns, total);
    }
    processes
}
