//! The WORKLOADS chunk: each process's service or container round-trips, and older
//! files and older readers read as before.

use super::*;

#[test]
fn workloads_round_trip_and_old_readers_read_the_rest_as_before() {
    let w0 = WorkloadEvent {
        time: 7,
        pid: 42,
        cgroup: "/system.slice/nginx.service".into(),
        exe: "/usr/sbin/nginx".into(),
        kernel: false,
        delegated: Some(Delegation {
            depth: 3,
            uid: Some(1000),
        }),
    };
    let w1 = WorkloadEvent {
        time: 900,
        pid: 2,
        cgroup: "/".into(),
        exe: String::new(),
        kernel: true,
        delegated: None,
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    w.workload(&w0);
    let s = w.intern_stack(&[user(0x1100, None)]);
    w.sample(&Sample {
        time: 100,
        pid: 42,
        tid: 42,
        cpu: 0,
        weight: 1,
        stack: s,
    });
    w.flush_chunk().unwrap();
    // A workload alone still goes out at the next flush.
    w.workload(&w1);
    w.flush_chunk().unwrap();
    let bytes = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&bytes, "w").unwrap();
    assert_eq!(rec.workloads, vec![w0, w1]);
    assert!(rec.damage.is_none());
    // What a reader that does not know WORKLOADS chunks reads: the same file without
    // them (unknown kinds are skipped whole, by their length).
    let mut stripped = bytes[..HEADER_LEN].to_vec();
    let mut pos = HEADER_LEN;
    let mut kinds = Vec::new();
    while pos < bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let end = pos + CHUNK_HEADER_LEN + len;
        kinds.push(kind);
        if kind != chunk::OWNED_WORKLOADS {
            stripped.extend_from_slice(&bytes[pos..end]);
        }
        pos = end;
    }
    assert_eq!(
        kinds,
        [
            chunk::META,
            chunk::OWNED_WORKLOADS,
            chunk::EVENTS,
            chunk::OWNED_WORKLOADS,
            chunk::END
        ]
    );
    let old = Recording::from_bytes(&stripped, "old").unwrap();
    assert!(old.workloads.is_empty());
    assert_eq!(old.samples, rec.samples);
    assert_eq!(old.frames, rec.frames);
    assert_eq!(old.summary, rec.summary);
    // A damaged WORKLOADS payload ends the readable part like any chunk.
    let mut bad = bytes.clone();
    let at = HEADER_LEN
        + (CHUNK_HEADER_LEN
            + u32::from_le_bytes(bytes[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap())
                as usize);
    let len = u32::from_le_bytes(bad[at + 4..at + 8].try_into().unwrap()) as usize;
    // Cut its last string short but keep the CRC right: it does not decode.
    let payload = bad[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len - 1].to_vec();
    bad.splice(at..at + CHUNK_HEADER_LEN + len, {
        let mut c = Vec::new();
        c.extend_from_slice(&chunk::OWNED_WORKLOADS.to_le_bytes());
        c.extend_from_slice(&((len - 1) as u32).to_le_bytes());
        c.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        c.extend_from_slice(&payload);
        c
    });
    let r = Recording::from_bytes(&bad, "bad").unwrap();
    assert!(r.damage.is_some_and(|d| d.contains("does not decode")));
}

#[test]
fn workloads_of_older_files_are_read_bounded_at_a_users_manager_only() {
    use super::codec::{put_str, put_u64};
    let w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let mut bytes = w.finish(&Summary::default()).unwrap();
    // A WORKLOADS chunk as builds before issue 46 wrote it, after META.
    let mut payload = Vec::new();
    put_u64(&mut payload, 7);
    put_u64(&mut payload, 42);
    put_str(
        &mut payload,
        "/user.slice/user-1000.slice/user@1000.service/app.slice/nginx.service",
    );
    put_str(&mut payload, "/usr/sbin/nginx");
    payload.push(0);
    let meta_len =
        u32::from_le_bytes(bytes[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap()) as usize;
    let at = HEADER_LEN + CHUNK_HEADER_LEN + meta_len;
    let mut c = Vec::new();
    c.extend_from_slice(&chunk::WORKLOADS.to_le_bytes());
    c.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    c.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    c.extend_from_slice(&payload);
    bytes.splice(at..at, c);
    let rec = Recording::from_bytes(&bytes, "old").unwrap();
    assert!(rec.damage.is_none());
    assert_eq!(rec.workloads.len(), 1);
    assert_eq!(rec.workloads[0].delegated, None);
    let w = crate::workload::Workload::from_event(&rec.workloads[0]);
    assert_eq!(w.unit.as_deref(), Some("user@1000.service"));
    assert_eq!(w.service_unit(), None);
}
