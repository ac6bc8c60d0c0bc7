//! OTLP Profiles export: a protobuf `ProfilesData` as OpenTelemetry's
//! `opentelemetry/proto/profiles/v1development/profiles.proto` (OTLP 1.10.0) defines
//! it, which the OpenTelemetry Collector, Pyroscope and other OTLP receivers read.
//! The same bytes are an `ExportProfilesServiceRequest` (fields 1 and 2 agree), the
//! body the push sends to `/v1development/profiles`.
//!
//! One `ResourceProfiles` per process (`service.name`, `process.pid`,
//! `process.executable.name`, `host.name`, and `container.id` when the recording
//! names one), each with one `ScopeProfiles` holding one profile per sample type:
//! `cpu/nanoseconds` (each CPU sample's exact weight with its timestamp, the
//! `[unsampled]` remainders included), `samples/count` (CPU samples per stack), and in
//! an off-CPU recording `off_cpu/nanoseconds` (each interval's time, its state in the
//! sample attribute `thread.state`, the `[off-cpu: STATE]` frame left out). Every
//! sample carries `thread.name` and `thread.id`. All profiles share one dictionary:
//! functions, locations (inlined functions as several lines, innermost first, the
//! frame's kind in `profile.frame.type`), mappings (with the GNU build-id), stacks
//! (leaf first) and attributes; entry 0 of every table is its zero value, as the
//! format requires. docs/otlp.md tells the mapping in full.

use std::collections::HashMap;
use std::io::{self, Write};

use super::pprof::plain_name;
use super::protobuf::{Pb, Strings};
use crate::profile::{FrameClass, Function, LocationIndex, Profile, ThreadIndex, ThreadState};

/// How to write the resources.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OtlpOptions {
    /// `service.name` of every resource. Default is none: each process's service
    /// (its systemd service or executable, when the recording holds workloads), else
    /// its name.
    pub service: Option<String>,
    /// Attributes added to every resource (`--tag`), replacing automatic ones of the
    /// same key. Default is none.
    pub attributes: Vec<(String, String)>,
    /// Leave source line numbers out of the locations' lines. Default is false:
    /// each line carries its line number when the symbols know it.
    pub no_lines: bool,
}

/// Writes the profile as (uncompressed) protobuf `ProfilesData`.
pub fn write(profile: &Profile, opts: &OtlpOptions, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(&encode(profile, opts))?;
    out.flush()
}

/// The semantic-convention attribute keys, and this exporter's own.
pub mod keys {
    /// Resource: the process id (int).
    pub const PID: &str = "process.pid";
    /// Resource: the executable's file name.
    pub const EXE: &str = "process.executable.name";
    /// Resource: the machine's host name.
    pub const HOST: &str = "host.name";
    /// Resource: the service.
    pub const SERVICE: &str = "service.name";
    /// Resource: the container id (64 hex digits).
    pub const CONTAINER: &str = "container.id";
    /// Sample: the thread's name.
    pub const THREAD_NAME: &str = "thread.name";
    /// Sample: the thread id (int).
    pub const THREAD_ID: &str = "thread.id";
    /// Sample of the off-CPU profile: why the thread was off the CPU (this
    /// exporter's own key; the semantic conventions have none).
    pub const THREAD_STATE: &str = "thread.state";
    /// Location: the kind of code (`native`, `kernel`, `jvm`, `cpython`, `v8js`).
    pub const FRAME_TYPE: &str = "profile.frame.type";
    /// Mapping: the file's GNU build-id, lower-case hex.
    pub const BUILD_ID: &str = "process.executable.build_id.gnu";
}

/// The uncompressed protobuf encoding.
pub fn encode(profile: &Profile, opts: &OtlpOptions) -> Vec<u8> {
    let mut d = Dictionary::default();
    tables(&mut d, profile, opts);
    // Samples, by resource and sample type.
    let resources = Resources::of(profile, opts);
    let mut sets = sample_sets(&mut d, profile, &resources);
    let start = profile.meta.start_unix_ns;
    let duration = duration_ns(profile);
    let types = [
        ("cpu", "nanoseconds"),
        ("samples", "count"),
        ("off_cpu", "nanoseconds"),
    ];
    let mut data = Pb::default();
    for (r, set) in resources.list.iter().zip(&mut sets) {
        let mut scope = Pb::default();
        let mut id = Pb::default();
        id.bytes(1, b"profile");
        id.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
        scope.message(1, &id);
        for (k, samples) in set.iter_mut().enumerate() {
            // The off-CPU profile only in an off-CPU recording; the others always.
            if k == 2 && !profile.is_wall_time() {
                continue;
            }
            samples.finish();
            let mut p = Pb::default();
            p.message(1, &value_type(&mut d.strings, types[k]));
            for s in &samples.list {
                p.message(2, s);
            }
            p.fixed64(3, start);
            p.int(4, duration);
            if k < 2 {
                p.message(5, &value_type(&mut d.strings, ("cpu", "nanoseconds")));
                p.int(6, profile.meta.sample_period_ns);
            }
            scope.message(2, &p);
        }
        let mut rp = Pb::default();
        rp.message(1, &r.encode());
        rp.message(2, &scope);
        data.message(1, &rp);
    }
    data.message(2, &d.encode());
    data.0
}

/// The dictionary's functions, mappings and locations, which keep the model's
/// indices plus one for the zero entry.
fn tables(d: &mut Dictionary, profile: &Profile, opts: &OtlpOptions) {
    for f in &profile.functions {
        let mut m = Pb::default();
        m.int(1, d.strings.id(&plain_name(f)));
        if let Some(file) = &f.file {
            m.int(3, d.strings.id(file));
        }
        d.functions.push(m);
    }
    for md in &profile.modules {
        let mut m = Pb::default();
        m.int(1, md.start);
        m.int(2, md.end);
        m.int(3, md.file_offset);
        m.int(4, d.strings.id(&md.path));
        if let Some(id) = &md.build_id {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let a = d.attribute(keys::BUILD_ID, Value::Str(hex));
            m.packed(5, &[a]);
        }
        d.mappings.push(m);
    }
    for loc in &profile.locations {
        let mut m = Pb::default();
        if let Some(md) = loc.module {
            m.int(1, md.index() as u64 + 1);
        }
        m.int(2, loc.address);
        for (j, &f) in loc.functions.iter().enumerate().rev() {
            let mut line = Pb::default();
            line.int(1, f.index() as u64 + 1);
            let n = (!opts.no_lines)
                .then(|| loc.line(j, profile.function(f)))
                .flatten();
            if let Some(n) = n {
                line.int(2, u64::from(n));
            }
            m.message(3, &line);
        }
        let compiled = loc.functions.first().map(|&f| profile.function(f));
        if let Some(kind) = compiled.and_then(frame_type) {
            let a = d.attribute(keys::FRAME_TYPE, Value::Str(kind.to_owned()));
            m.packed(4, &[a]);
        }
        d.locations.push(m);
    }
}

/// Each resource's samples of the three sample types: CPU time, sample counts and
/// off-CPU time.
fn sample_sets(d: &mut Dictionary, profile: &Profile, resources: &Resources) -> Vec<[Samples; 3]> {
    let mut sets: Vec<[Samples; 3]> = (0..resources.list.len())
        .map(|_| Default::default())
        .collect();
    let start = profile.meta.start_unix_ns;
    for s in &profile.samples {
        let r = resources.of_thread[s.thread.index()];
        let mut locs = profile.stack_locations(s.stack);
        let off_cpu = s.state != ThreadState::Running;
        if off_cpu && locs.last().is_some_and(|&l| is_off_cpu_frame(profile, l)) {
            locs = &locs[..locs.len() - 1];
        }
        let stack = d.stack(locs);
        let mut attrs = d.thread_attributes(profile, s.thread);
        let at = start.saturating_add(s.time);
        if off_cpu {
            attrs.push(d.attribute(keys::THREAD_STATE, Value::Str(s.state.name().to_owned())));
            sets[r][2].add(stack, attrs, s.weight, Some(at));
        } else {
            if !profile.is_unsampled(s.stack) {
                sets[r][1].add(stack, attrs.clone(), 1, None);
            }
            sets[r][0].add(stack, attrs, s.weight, Some(at));
        }
    }
    sets
}

/// `profile.frame.type` of a location, from the function compiled there; none for
/// markers (`[unsampled]`, `[truncated]`). A perf-map JIT frame is told by its name:
/// CPython's trampolines (`py::`), V8's tags (`JS:`, `LazyCompile:` ...), else `jit`.
fn frame_type(f: &Function) -> Option<&'static str> {
    Some(match f.class {
        FrameClass::Native | FrameClass::Inlined => "native",
        FrameClass::Kernel => "kernel",
        FrameClass::Python => "cpython",
        FrameClass::Interpreted => "jvm",
        FrameClass::Jit if f.name.starts_with("py::") => "cpython",
        FrameClass::Jit
            if [
                "JS:",
                "LazyCompile:",
                "Function:",
                "Builtin:",
                "BytecodeHandler:",
                "InterpretedFunction:",
                "Script:",
                "Eval:",
                "RegExp:",
            ]
            .iter()
            .any(|p| f.name.starts_with(p)) =>
        {
            "v8js"
        }
        FrameClass::Jit => "jit",
        FrameClass::Marker | FrameClass::OffCpu(_) => return None,
    })
}

/// Whether a location is the `[off-cpu: STATE]` frame alone.
fn is_off_cpu_frame(profile: &Profile, l: LocationIndex) -> bool {
    let fs = &profile.location(l).functions;
    !fs.is_empty()
        && fs
            .iter()
            .all(|&f| matches!(profile.function(f).class, FrameClass::OffCpu(_)))
}

/// Nanoseconds the profile spans: to the recording's end, else its last sample.
fn duration_ns(profile: &Profile) -> u64 {
    let m = &profile.meta;
    match &profile.summary {
        Some(s) if s.end_time_ns > m.start_time_ns => s.end_time_ns - m.start_time_ns,
        _ => profile.samples.iter().map(|s| s.time).max().unwrap_or(0),
    }
}

fn value_type(strings: &mut Strings, (ty, unit): (&str, &str)) -> Pb {
    let mut vt = Pb::default();
    vt.int(1, strings.id(ty));
    vt.int(2, strings.id(unit));
    vt
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Value {
    Str(String),
    Int(u64),
}

impl Value {
    /// As `AnyValue`: `string_value = 1` or `int_value = 3`.
    fn encode(&self) -> Pb {
        let mut v = Pb::default();
        match self {
            Value::Str(s) => v.bytes(1, s.as_bytes()),
            Value::Int(n) => {
                // Written even when 0: the oneof must say which value it holds.
                v.int_always(3, *n);
            }
        }
        v
    }
}

/// The samples of one profile, one per (stack, attributes) in first-seen order,
/// each with its values and (for time-weighted types) their timestamps.
#[derive(Default)]
struct Samples {
    list: Vec<Pb>,
    index: HashMap<(u64, Vec<u64>), usize>,
    values: Vec<(Vec<u64>, Vec<u64>)>,
}

impl Samples {
    /// Adds one event: with a timestamp, a value of its own; without, added to the
    /// sample's one value (a count).
    fn add(&mut self, stack: u64, attrs: Vec<u64>, value: u64, at: Option<u64>) {
        let n = self.values.len();
        let i = *self.index.entry((stack, attrs.clone())).or_insert(n);
        if i == n {
            self.values.push((Vec::new(), Vec::new()));
            let mut s = Pb::default();
            s.int(1, stack);
            s.packed(2, &attrs);
            self.list.push(s);
        }
        let (values, times) = &mut self.values[i];
        match at {
            Some(t) => {
                values.push(value);
                times.push(t);
            }
            None if values.is_empty() => values.push(value),
            None => values[0] = values[0].saturating_add(value),
        }
    }

    /// Finishes the samples: values (packed int64) and timestamps (packed fixed64).
    fn finish(&mut self) {
        for (s, (values, times)) in self.list.iter_mut().zip(&self.values) {
            let values: Vec<u64> = values.iter().map(|&v| v.min(i64::MAX as u64)).collect();
            s.packed(4, &values);
            s.packed_fixed64(5, times);
        }
    }
}

/// The shared tables, each with its zero entry first.
#[derive(Default)]
struct Dictionary {
    strings: Strings,
    mappings: Vec<Pb>,
    locations: Vec<Pb>,
    functions: Vec<Pb>,
    stacks: Vec<Vec<u64>>,
    stack_ids: HashMap<Vec<u64>, u64>,
    attributes: Vec<Pb>,
    attribute_ids: HashMap<(String, Value), u64>,
    /// Each thread's `thread.name` and `thread.id` attributes, once made.
    threads: HashMap<ThreadIndex, Vec<u64>>,
}

impl Dictionary {
    /// The stack of these locations (root first in the model): leaf first here.
    fn stack(&mut self, locs: &[LocationIndex]) -> u64 {
        let ids: Vec<u64> = locs.iter().rev().map(|l| l.index() as u64 + 1).collect();
        if let Some(&i) = self.stack_ids.get(&ids) {
            return i;
        }
        let i = self.stacks.len() as u64 + 1;
        self.stacks.push(ids.clone());
        self.stack_ids.insert(ids, i);
        i
    }

    fn attribute(&mut self, key: &str, value: Value) -> u64 {
        if let Some(&i) = self.attribute_ids.get(&(key.to_owned(), value.clone())) {
            return i;
        }
        let mut m = Pb::default();
        m.int(1, self.strings.id(key));
        m.message(2, &value.encode());
        self.attributes.push(m);
        let i = self.attributes.len() as u64;
        self.attribute_ids.insert((key.to_owned(), value), i);
        i
    }

    fn thread_attributes(&mut self, profile: &Profile, t: ThreadIndex) -> Vec<u64> {
        if let Some(v) = self.threads.get(&t) {
            return v.clone();
        }
        let th = profile.thread(t);
        let v = vec![
            self.attribute(keys::THREAD_NAME, Value::Str(th.name.clone())),
            self.attribute(keys::THREAD_ID, Value::Int(u64::from(th.tid))),
        ];
        self.threads.insert(t, v.clone());
        v
    }

    /// `ProfilesDictionary`: mapping 1, location 2, function 3, link 4, string 5,
    /// attribute 6, stack 7; each table's zero entry first.
    fn encode(&self) -> Pb {
        let zero = Pb::default();
        let mut m = Pb::default();
        for (field, table) in [
            (1, &self.mappings),
            (2, &self.locations),
            (3, &self.functions),
        ] {
            m.message(field, &zero);
            for e in table {
                m.message(field, e);
            }
        }
        m.message(4, &zero);
        for s in &self.strings.list {
            m.bytes(5, s.as_bytes());
        }
        m.message(6, &zero);
        for a in &self.attributes {
            m.message(6, a);
        }
        m.message(7, &zero);
        for s in &self.stacks {
            let mut st = Pb::default();
            st.packed(1, s);
            m.message(7, &st);
        }
        m
    }
}

/// The processes as resources, and each thread's.
struct Resources {
    list: Vec<Resource>,
    of_thread: Vec<usize>,
}

/// One process: its resource attributes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Resource {
    attributes: Vec<(String, Value)>,
}

impl Resources {
    fn of(profile: &Profile, opts: &OtlpOptions) -> Resources {
        let mut list: Vec<Resource> = Vec::new();
        let mut index: HashMap<Resource, usize> = HashMap::new();
        let mut of_thread = Vec::with_capacity(profile.threads.len());
        for t in &profile.threads {
            let service = opts
                .service
                .clone()
                .or_else(|| t.service.clone())
                .unwrap_or_else(|| crate::workload::service_name(&t.process));
            let mut a: Vec<(String, Value)> = vec![
                (keys::SERVICE.into(), Value::Str(service)),
                (keys::PID.into(), Value::Int(u64::from(t.pid))),
                (
                    keys::EXE.into(),
                    Value::Str(t.exe.clone().unwrap_or_else(|| t.process.clone())),
                ),
            ];
            if !profile.meta.hostname.is_empty() {
                a.push((keys::HOST.into(), Value::Str(profile.meta.hostname.clone())));
            }
            if let Some(c) = &t.container {
                a.push((keys::CONTAINER.into(), Value::Str(c.clone())));
            }
            for (k, v) in &opts.attributes {
                a.retain(|(key, _)| key != k);
                a.push((k.clone(), Value::Str(v.clone())));
            }
            let r = Resource { attributes: a };
            let n = list.len();
            let i = *index.entry(r.clone()).or_insert(n);
            if i == n {
                list.push(r);
            }
            of_thread.push(i);
        }
        Resources { list, of_thread }
    }
}

impl Resource {
    /// `Resource`: attributes = 1, each a `KeyValue` (key = 1, value = 2).
    fn encode(&self) -> Pb {
        let mut r = Pb::default();
        for (k, v) in &self.attributes {
            let mut kv = Pb::default();
            kv.bytes(1, k.as_bytes());
            kv.message(2, &v.encode());
            r.message(1, &kv);
        }
        r
    }
}
