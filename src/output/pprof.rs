//! pprof export: a gzipped protobuf `Profile` as google/pprof's `profile.proto`
//! defines it, which `go tool pprof`, Pyroscope, Parca and Grafana read.
//!
//! Sample types are `samples/count` and `cpu/nanoseconds` (the default), plus
//! `wall/nanoseconds` (then the default) in an off-CPU recording, whose off-CPU
//! stacks count wall time only and carry a `state` label, so `go tool pprof
//! -sample_index=cpu` or `=wall` shows either; the period
//! is the recording's CPU nanoseconds per sample. One pprof sample per (stack,
//! thread) carries the labels `thread` (name), `tid`, `pid` and `process`. Each
//! sampled address is a location with its inlined functions as lines (innermost
//! first), each with its source line number when the symbols know it (by default,
//! for `go tool pprof -list`; [`PprofOptions::lines`]), in a mapping with the file's
//! path and build-id; functions carry their file names. The encoding is written by hand ([`super::protobuf`]).

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::GzEncoder;

use super::protobuf::{Pb, Strings};
use crate::profile::{Profile, StackIndex, ThreadIndex, ThreadState};

/// How to write a pprof profile.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct PprofOptions {
    /// Give each location's lines their source line numbers, when the symbols know
    /// them (`go tool pprof -list` and pprof's line granularity need them). Default
    /// is true.
    pub lines: bool,
}

impl Default for PprofOptions {
    fn default() -> Self {
        PprofOptions { lines: true }
    }
}

/// Writes the profile as gzipped protobuf, with source lines.
pub fn write(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    write_with(profile, &PprofOptions::default(), out)
}

/// Writes the profile as gzipped protobuf, as `opts` say.
pub fn write_with(profile: &Profile, opts: &PprofOptions, out: &mut dyn Write) -> io::Result<()> {
    let bytes = encode_with(profile, opts);
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?.flush()
}

/// The uncompressed protobuf encoding of the profile, with source lines.
pub fn encode(profile: &Profile) -> Vec<u8> {
    encode_with(profile, &PprofOptions::default())
}

/// The uncompressed protobuf encoding of the profile, as `opts` say.
pub fn encode_with(profile: &Profile, opts: &PprofOptions) -> Vec<u8> {
    let mut strings = Strings::default();
    let mut p = Pb::default();
    // sample_type = 1: samples/count, cpu/nanoseconds (, wall/nanoseconds).
    let wall = profile.is_wall_time();
    let mut types = vec![("samples", "count"), ("cpu", "nanoseconds")];
    if wall {
        types.push(("wall", "nanoseconds"));
    }
    for (ty, unit) in types {
        let mut vt = Pb::default();
        vt.int(1, strings.id(ty));
        vt.int(2, strings.id(unit));
        p.message(1, &vt);
    }
    samples(profile, &mut strings, &mut p);
    let line_of = |loc: &crate::profile::Location, i: usize, f| {
        opts.lines
            .then(|| loc.line(i, profile.function(f)))
            .flatten()
    };
    let lines = profile
        .locations
        .iter()
        .any(|loc| (loc.functions.iter().enumerate()).any(|(i, &f)| line_of(loc, i, f).is_some()));
    let mapping_id = mappings(profile, lines, &mut strings, &mut p);
    // location = 4: lines innermost first, the last one the compiled function.
    for (i, loc) in profile.locations.iter().enumerate() {
        let mut m = Pb::default();
        m.int(1, i as u64 + 1);
        if let Some(md) = loc.module {
            m.int(2, mapping_id[md.index()]);
        }
        m.int(3, loc.address);
        for (j, &f) in loc.functions.iter().enumerate().rev() {
            let mut line = Pb::default();
            line.int(1, u64::from(f.0) + 1);
            if let Some(n) = line_of(loc, j, f) {
                line.int(2, u64::from(n));
            }
            m.message(4, &line);
        }
        p.message(4, &m);
    }
    functions(profile, &mut strings, &mut p);
    header(profile, &mut strings, &mut p);
    // string_table = 6, written last: it is only complete now (field order is free).
    for s in &strings.list {
        p.bytes(6, s.as_bytes());
    }
    p.0
}

/// sample = 2: aggregated per (stack, thread), in first-seen order, with the
/// thread's labels (and its state in a wall-time profile).
fn samples(profile: &Profile, strings: &mut Strings, p: &mut Pb) {
    let wall = profile.is_wall_time();
    let mut order = Vec::new();
    let mut sums: HashMap<(StackIndex, ThreadIndex), (u64, u64, ThreadState)> = HashMap::new();
    for s in &profile.samples {
        let e = sums.entry((s.stack, s.thread)).or_insert_with(|| {
            order.push((s.stack, s.thread));
            (0, 0, s.state)
        });
        // `samples/count` counts CPU samples only: an `[unsampled]` remainder and an
        // off-CPU interval carry time, not a sample.
        e.0 += u64::from(profile.is_cpu_sample(s));
        e.1 = e.1.saturating_add(s.weight);
    }
    for key in order {
        let (count, weight, state) = sums[&key];
        let (stack, thread) = key;
        let mut m = Pb::default();
        let leaf_first: Vec<u64> = profile
            .stack_locations(stack)
            .iter()
            .rev()
            .map(|&l| u64::from(l.0) + 1)
            .collect();
        m.packed(1, &leaf_first);
        if wall {
            let cpu = if state.is_off_cpu() { 0 } else { weight };
            m.packed(2, &[count, cpu, weight]);
        } else {
            m.packed(2, &[count, weight]);
        }
        let t = profile.thread(thread);
        m.message(3, &label_str(strings, "thread", &t.name));
        m.message(3, &label_num(strings, "tid", t.tid));
        m.message(3, &label_num(strings, "pid", t.pid));
        m.message(3, &label_str(strings, "process", &t.process));
        if let Some(g) = t.group {
            m.message(3, &label_str(strings, "thread_group", &g.to_string()));
        }
        if wall {
            m.message(3, &label_str(strings, "state", state.name()));
        }
        p.message(2, &m);
    }
}

/// mapping = 3, the main executable first: pprof takes the first for the binary.
/// Returns each module's mapping id.
fn mappings(profile: &Profile, lines: bool, strings: &mut Strings, p: &mut Pb) -> Vec<u64> {
    let order = module_order(profile);
    let mut mapping_id = vec![0u64; profile.modules.len()];
    for (n, &i) in order.iter().enumerate() {
        mapping_id[i] = n as u64 + 1;
    }
    for &i in &order {
        let md = &profile.modules[i];
        let mut m = Pb::default();
        m.int(1, mapping_id[i]);
        m.int(2, md.start);
        m.int(3, md.end);
        m.int(4, md.file_offset);
        m.int(5, strings.id(&md.path));
        if let Some(id) = &md.build_id {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            m.int(6, strings.id(&hex));
        }
        m.int(7, 1); // has_functions
        m.int(8, 1); // has_filenames
        m.int(9, u64::from(lines)); // has_line_numbers
        m.int(10, 1); // has_inline_frames
        p.message(3, &m);
    }
    mapping_id
}

/// function = 5: names without the `:LINE` that `--lines` adds (lines are lines).
fn functions(profile: &Profile, strings: &mut Strings, p: &mut Pb) {
    for (i, f) in profile.functions.iter().enumerate() {
        let name = plain_name(f);
        let mut m = Pb::default();
        m.int(1, i as u64 + 1);
        m.int(2, strings.id(&name));
        // system_name = 3 stays empty. Recordings keep demangled names only; writing
        // the same string there makes pprof take the name for a mangled one it could
        // not demangle, and "simplify" it as C++ by cutting everything between `<`
        // and `>`: `<core::fmt::Formatter>::pad_integral` became `::pad_integral`,
        // `chains::hot::<u32>` `chains::hot`, in `go tool pprof -top`'s default view.
        if let Some(file) = &f.file {
            m.int(4, strings.id(file));
        }
        p.message(5, &m);
    }
}

/// time_nanos = 9, duration_nanos = 10, period_type = 11, period = 12, comment = 13,
/// default_sample_type = 14.
fn header(profile: &Profile, strings: &mut Strings, p: &mut Pb) {
    let meta = &profile.meta;
    let comment = strings.id(&format!("profile: {}", meta.command.join(" ")));
    let cpu = strings.id("cpu");
    let ns = strings.id("nanoseconds");
    p.int(9, meta.start_unix_ns);
    if let Some(s) = &profile.summary {
        p.int(10, s.end_time_ns.saturating_sub(meta.start_time_ns));
    }
    let mut pt = Pb::default();
    pt.int(1, cpu);
    pt.int(2, ns);
    p.message(11, &pt);
    p.int(12, meta.sample_period_ns);
    p.int(13, comment);
    let default = if profile.is_wall_time() {
        strings.id("wall")
    } else {
        cpu
    };
    p.int(14, default);
}

/// Module indices, the command's executable first (by file name), then in order.
fn module_order(profile: &Profile) -> Vec<usize> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    let exe = profile.meta.command.first().map(|c| base(c));
    let mut order: Vec<usize> = (0..profile.modules.len()).collect();
    order.sort_by_key(|&i| exe.as_deref() != Some(base(&profile.modules[i].path).as_str()));
    order
}

fn label_str(strings: &mut Strings, key: &str, value: &str) -> Pb {
    let mut l = Pb::default();
    l.int(1, strings.id(key));
    l.int(2, strings.id(value));
    l
}

fn label_num(strings: &mut Strings, key: &str, value: u32) -> Pb {
    let mut l = Pb::default();
    l.int(1, strings.id(key));
    l.int(3, u64::from(value));
    l
}

/// A function's name without the `:LINE` that `--lines` adds (lines are lines).
pub(super) fn plain_name(f: &crate::profile::Function) -> String {
    match f.line {
        Some(n) => f
            .name
            .strip_suffix(&format!(":{n}"))
            .unwrap_or(&f.name)
            .to_owned(),
        None => f.name.clone(),
    }
}
