//! The model on crafted recordings: what a hostile file can make it do.

use std::time::{Duration, Instant};

use super::*;
use crate::format::reader::{MAX_MODEL_FRAMES, MAX_STACK_DEPTH};
use crate::format::{Frame, FrameKind, Mapping, Recording, RecordingWriter, Sample, Summary};

fn meta() -> Meta {
    Meta {
        tool_version: "test".into(),
        event: "task-clock".into(),
        frequency_hz: 1000,
        call_graph: crate::format::CallGraph::Fp,
        ..Meta::default()
    }
}

fn ret(addr: u64, mapping: Option<u32>) -> Frame {
    Frame {
        kind: FrameKind::Return,
        pid: 1,
        addr,
        mapping,
    }
}

/// A recording with one chain of `depth` frames (node k is k + 1 deep) and one
/// sample at each of the `sampled` deepest nodes: every sample a distinct stack.
fn chain(depth: u32, sampled: u32) -> Vec<u8> {
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let m = w.mapping(&Mapping {
        pid: 1,
        start: 0x1000,
        end: 0x10_0000,
        file_offset: 0,
        path: "/bin/x".into(),
        build_id: None,
        time: 0,
    });
    let frames: Vec<Frame> = (0..depth)
        .map(|i| ret(0x1000 + u64::from(i), Some(m)))
        .collect();
    let leaf = w.intern_stack(&frames).unwrap();
    assert_eq!(leaf, depth - 1);
    for k in depth - sampled..depth {
        w.sample(&Sample {
            time: u64::from(k),
            pid: 1,
            tid: 1,
            cpu: 0,
            weight: 1_000_000,
            stack: Some(k),
        });
    }
    w.finish(&Summary::default()).unwrap()
}

/// Issue 14: a 307 KB file of one deep chain sampled at every node took 50 s and
/// 4 GB (the model is quadratic in such a file). Now a file past the bounds is
/// refused at once with a clear error.
#[test]
fn a_chain_sampled_at_every_depth_is_refused_quickly() {
    let t = Instant::now();
    let data = chain(MAX_STACK_DEPTH as u32, MAX_STACK_DEPTH as u32);
    let e = Recording::from_bytes(&data, "deep.prof").unwrap_err();
    assert!(
        matches!(e, crate::format::ReadError::TooLarge { frames, .. } if frames > MAX_MODEL_FRAMES),
        "{e}"
    );
    assert!(e.to_string().contains("not written by profile"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_stack_deeper_than_profile_records_is_refused() {
    let data = chain(MAX_STACK_DEPTH as u32 + 1, 1);
    let e = Recording::from_bytes(&data, "deep.prof").unwrap_err();
    assert!(
        matches!(e, crate::format::ReadError::TooDeep { depth, .. } if depth == MAX_STACK_DEPTH + 1),
        "{e}"
    );
    // At the bound it reads, and the model holds the whole stack.
    let data = chain(MAX_STACK_DEPTH as u32, 1);
    let rec = Recording::from_bytes(&data, "deep.prof").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    assert_eq!(p.stacks.len(), 1);
    assert_eq!(p.stack(StackIndex(0)).len(), MAX_STACK_DEPTH);
}

/// This thread's CPU time (its `sum_exec_runtime`): unlike wall time, it does not
/// grow when other work on the machine delays the test.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(text.split_whitespace().next().unwrap().parse().unwrap())
}

/// Within the bounds, a file built to be costly still gives its model in bounded
/// time: 2,000 distinct stacks 2,000 to 4,000 frames deep (6 million frames). Some
/// 3.5 s of CPU in a debug build; bounded by CPU time, not wall time.
#[test]
fn a_costly_file_within_the_bounds_builds_in_bounded_time() {
    let data = chain(4000, 2000);
    let start = thread_cpu();
    let rec = Recording::from_bytes(&data, "deep.prof").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    assert_eq!(p.stacks.len(), 2000);
    let frames: usize = p.stacks.iter().map(Vec::len).sum();
    assert_eq!(frames, (2001..=4000).sum::<usize>());
    let rows = crate::output::top::rows(&p);
    assert_eq!(rows.len(), 4000);
    let used = thread_cpu() - start;
    assert!(used < Duration::from_secs(20), "{used:?} of CPU");
}

/// Issue 14: a frame below its mapping's start underflowed `addr - start`.
#[test]
fn a_frame_outside_its_mapping_is_named_not_a_panic() {
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let m = w.mapping(&Mapping {
        pid: 1,
        start: 0x5000,
        end: 0x6000,
        file_offset: u64::MAX,
        path: "/usr/lib/libx.so".into(),
        build_id: None,
        time: 0,
    });
    // Below the start, and past the start with an offset that overflows.
    let below = w.intern_stack(&[ret(0x10, Some(m))]);
    let over = w.intern_stack(&[ret(0x5010, Some(m))]);
    for (i, stack) in [below, over].into_iter().enumerate() {
        w.sample(&Sample {
            time: i as u64,
            pid: 1,
            tid: 1,
            cpu: 0,
            weight: 1,
            stack,
        });
    }
    let data = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&data, "x.prof").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    let names: Vec<&str> = p.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "[libx.so: 0x10 outside the mapping]",
            "[libx.so: 0x5010 outside the mapping]"
        ]
    );
}

/// Weights come from the file: sums of huge ones saturate in every output, never
/// overflow (a panic in a debug build, a wrong figure in a release one).
#[test]
fn huge_weights_saturate_in_every_output() {
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let a = w.intern_stack(&[ret(0x10, None)]);
    let b = w.intern_stack(&[ret(0x20, None), ret(0x10, None)]);
    for (i, stack) in [a, a, b, b].into_iter().enumerate() {
        w.sample(&Sample {
            time: u64::MAX - i as u64,
            pid: 1,
            tid: 1 + i as u32 % 2,
            cpu: 0,
            weight: u64::MAX,
            stack,
        });
    }
    let data = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&data, "x.prof").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    assert_eq!(p.total_weight(), u64::MAX);
    let rows = crate::output::top::rows(&p);
    assert_eq!(rows[0].total_weight, u64::MAX);
    use crate::output::{flamegraph, folded, json, pprof, speedscope, top};
    let mut out = Vec::new();
    top::write(&p, 10, &mut out).unwrap();
    json::write(&p, "", None, &mut out).unwrap();
    pprof::write(&p, &mut out).unwrap();
    speedscope::write(&p, &mut out).unwrap();
    let opts = folded::FoldedOptions {
        per_thread: true,
        ..Default::default()
    };
    folded::write(&p, opts, &mut out).unwrap();
    let fg = flamegraph::FlameGraphOptions {
        per_thread: true,
        ..Default::default()
    };
    flamegraph::write(&p, &fg, &mut out).unwrap();
    let run = crate::diff::Run::from_profile(&p, "x".into());
    let c = crate::diff::compare(
        std::slice::from_ref(&run),
        std::slice::from_ref(&run),
        Default::default(),
    )
    .unwrap();
    assert!(c.regressions().next().is_none());
}

/// A process started while recording with no name of its own in the file (perf.data,
/// recordings before the recorder wrote the inherited name) is named after its parent
/// at the fork, as the kernel named it; a thread of it too; a rename after that wins.
#[test]
fn a_fork_without_a_name_takes_its_parents() {
    use crate::format::ThreadEvent;
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let stack = w.intern_stack(&[ret(0x10, None)]);
    let name = |time, pid, tid, name: &str| ThreadEvent::Name {
        time,
        pid,
        tid,
        name: name.into(),
    };
    let start = |time, pid, ppid, tid| ThreadEvent::Start {
        time,
        pid,
        ppid,
        tid,
    };
    w.thread_event(&name(0, 10, 10, "master"));
    w.thread_event(&name(5, 10, 10, "master-renamed"));
    // Forked at 3, before the parent's rename; its thread at 4; a grandchild at 6.
    w.thread_event(&start(3, 11, 10, 11));
    w.thread_event(&start(4, 11, 11, 12));
    w.thread_event(&start(6, 13, 11, 13));
    w.thread_event(&start(7, 14, 10, 14));
    w.thread_event(&name(8, 14, 14, "renamed"));
    for (pid, tid) in [(11, 11), (11, 12), (13, 13), (14, 14)] {
        w.sample(&Sample {
            time: 9,
            pid,
            tid,
            cpu: 0,
            weight: 1,
            stack,
        });
    }
    let data = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&data, "x.prof").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    let names: Vec<(u32, &str, &str)> = p
        .threads
        .iter()
        .map(|t| (t.tid, t.name.as_str(), t.process.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (11, "master", "master"),
            (12, "master", "master"),
            (13, "master", "master"),
            (14, "renamed", "renamed"),
        ]
    );
}

/// Issue 33: each process's samples belong to the service its workload names at
/// the sample's time (an exec into another unit moves the later ones), `--service`
/// keeps one service's, and explicit per-process roots start with the service.
#[test]
fn samples_take_their_process_service_at_their_time() {
    use crate::format::{ThreadEvent, WorkloadEvent};
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let s = w.intern_stack(&[ret(0x1000, None)]);
    let name = |w: &mut RecordingWriter<Vec<u8>>, pid, name: &str| {
        w.thread_event(&ThreadEvent::Name {
            time: 0,
            pid,
            tid: pid,
            name: name.into(),
        })
    };
    name(&mut w, 10, "nginx");
    name(&mut w, 20, "sh");
    let wl = |time, pid, cgroup: &str, exe: &str| WorkloadEvent {
        time,
        pid,
        cgroup: cgroup.into(),
        exe: exe.into(),
        kernel: false,
        delegated: None,
    };
    w.workload(&wl(0, 10, "/system.slice/nginx.service", "/usr/sbin/nginx"));
    w.workload(&wl(
        0,
        20,
        "/user.slice/user-0.slice/session-1.scope",
        "/bin/sh",
    ));
    // pid 20 execs into a unit's cgroup at t=50.
    w.workload(&wl(50, 20, "/system.slice/backup.service", "/usr/bin/tar"));
    for (t, pid) in [(10, 10), (20, 20), (60, 20), (70, 20), (80, 10)] {
        w.sample(&Sample {
            time: t,
            pid,
            tid: pid,
            cpu: 0,
            weight: 1_000_000,
            stack: s,
        });
    }
    let bytes = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&bytes, "w").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    let per_service = |p: &Profile, svc: &str| {
        p.samples
            .iter()
            .filter(|s| p.thread(s.thread).service.as_deref() == Some(svc))
            .count()
    };
    assert_eq!(per_service(&p, "nginx"), 2);
    assert_eq!(per_service(&p, "sh"), 1);
    assert_eq!(per_service(&p, "backup"), 2);
    let mut f = filter::Filter {
        services: vec!["backup".into()],
        ..Default::default()
    };
    let only = p.filter(&f).unwrap();
    assert_eq!(only.samples.len(), 2);
    let o = crate::output::folded::FoldedOptions {
        per_service: true,
        per_process: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    crate::output::folded::write(&only, o, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("service backup;sh;pid 20;"), "{text}");
    f.services = vec!["nope".into()];
    let e = p.filter(&f).unwrap_err().to_string();
    assert!(e.contains("backup, nginx, sh"), "{e}");
    // A recording without workloads says so.
    let old = Profile::from_recording(
        &Recording::from_bytes(&chain(3, 1), "old").unwrap(),
        ProfileOptions::default(),
    );
    assert!(matches!(
        old.filter(&f),
        Err(filter::FilterError::NoServices)
    ));
    // `--process`: by the process's name or its pid, any of several.
    let mut f = filter::Filter {
        processes: vec!["nginx".into()],
        ..Default::default()
    };
    assert_eq!(p.filter(&f).unwrap().samples.len(), 2);
    f.processes = vec!["20".into(), "nginx".into()];
    assert_eq!(p.filter(&f).unwrap().samples.len(), 5);
    assert_eq!(f.describe(), "process 20, nginx");
    f.processes = vec!["21".into()];
    let e = p.filter(&f).unwrap_err().to_string();
    assert!(e.contains("nginx (10), sh (20)"), "{e}");
}
