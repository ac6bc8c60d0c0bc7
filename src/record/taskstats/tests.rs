use super::*;

const FAMILY: u16 = 31;

/// A `struct taskstats` of `version` for thread `tid` of `tgid` that ran `cpu_ns`.
fn stats(version: u16, tid: u32, tgid: u32, cpu_ns: u64) -> Vec<u8> {
    let mut s = vec![0u8; 560];
    s[0..2].copy_from_slice(&version.to_ne_bytes());
    s[24..32].copy_from_slice(&(cpu_ns / 3).to_ne_bytes()); // cpu_delay_total: run_delay
    s[64..72].copy_from_slice(&(cpu_ns / 2).to_ne_bytes()); // cpu_run_real_total: ticks
    s[72..80].copy_from_slice(&cpu_ns.to_ne_bytes());
    s[128..132].copy_from_slice(&tid.to_ne_bytes());
    s[368..372].copy_from_slice(&tgid.to_ne_bytes());
    s
}

/// One exit message as the kernel sends it: AGGR_PID { PID, STATS }, and for a
/// process's last thread AGGR_TGID { TGID, STATS } after it.
fn exit_message(family: u16, tid: u32, stats: &[u8], last_of_process: Option<u32>) -> Vec<u8> {
    let mut inner = Vec::new();
    attribute(TASKSTATS_TYPE_PID, &tid.to_ne_bytes(), &mut inner);
    attribute(TASKSTATS_TYPE_STATS, stats, &mut inner);
    let mut attrs = Vec::new();
    attribute(TASKSTATS_TYPE_AGGR_PID, &inner, &mut attrs);
    if let Some(tgid) = last_of_process {
        let mut inner = Vec::new();
        attribute(2, &tgid.to_ne_bytes(), &mut inner);
        attribute(TASKSTATS_TYPE_STATS, &stats_of_process(), &mut inner);
        attribute(5, &inner, &mut attrs);
    }
    request(family, 2, 0, 0, &attrs)
}

fn stats_of_process() -> Vec<u8> {
    // Sums over the process: must never be read as a thread.
    stats(16, 1, 1, 999_999_999)
}

#[test]
fn an_exit_message_gives_the_thread_its_process_and_its_own_clock() {
    let m = exit_message(FAMILY, 4242, &stats(16, 4242, 4200, 12_345_678), None);
    assert_eq!(
        parse_exits(FAMILY, &m),
        vec![ThreadExit {
            tid: 4242,
            tgid: Some(4200),
            cpu_ns: 12_345_678,
            run_delay_ns: 12_345_678 / 3,
        }]
    );
}

#[test]
fn a_process_aggregate_is_not_taken_for_a_thread() {
    let m = exit_message(FAMILY, 7, &stats(16, 7, 7, 500), Some(7));
    let exits = parse_exits(FAMILY, &m);
    assert_eq!(exits.len(), 1);
    assert_eq!(exits[0].cpu_ns, 500);
}

#[test]
fn several_messages_in_one_datagram_are_all_read() {
    let mut d = exit_message(FAMILY, 10, &stats(16, 10, 9, 100), None);
    d.extend(exit_message(FAMILY, 11, &stats(16, 11, 9, 200), None));
    let tids: Vec<(u32, u64)> = parse_exits(FAMILY, &d)
        .iter()
        .map(|e| (e.tid, e.cpu_ns))
        .collect();
    assert_eq!(tids, vec![(10, 100), (11, 200)]);
}

#[test]
fn before_version_12_there_is_no_process_id() {
    let m = exit_message(FAMILY, 10, &stats(11, 10, 9, 100), None);
    assert_eq!(parse_exits(FAMILY, &m)[0].tgid, None);
}

#[test]
fn other_families_and_mismatched_ids_are_skipped_and_empty_clocks_kept() {
    assert!(
        parse_exits(
            FAMILY + 1,
            &exit_message(FAMILY, 10, &stats(16, 10, 9, 100), None)
        )
        .is_empty()
    );
    // The stats name another thread than the attribute does.
    assert!(
        parse_exits(
            FAMILY,
            &exit_message(FAMILY, 10, &stats(16, 12, 9, 100), None)
        )
        .is_empty()
    );
    // A thread that ended between two updates of its clock (or a kernel that did
    // not fill the field): kept with its 0, which the accounting takes as unknown.
    let exits = parse_exits(
        FAMILY,
        &exit_message(FAMILY, 10, &stats(16, 10, 9, 0), None),
    );
    assert_eq!(exits.len(), 1);
    assert_eq!((exits[0].tid, exits[0].cpu_ns), (10, 0));
}

#[test]
fn truncated_and_lying_lengths_never_panic() {
    let m = exit_message(FAMILY, 10, &stats(16, 10, 9, 100), None);
    for cut in 0..m.len() {
        let _ = parse_exits(FAMILY, &m[..cut]);
        let _ = parse_reply(&m[..cut]);
    }
    // Stats too short to hold the clock.
    let short = exit_message(FAMILY, 10, &stats(16, 10, 9, 100)[..60], None);
    assert!(parse_exits(FAMILY, &short).is_empty());
    // Every length field set to something absurd, one at a time.
    for at in [0usize, 20, 24] {
        for bad in [0u16, 1, 3, 0xffff] {
            let mut m = m.clone();
            m[at..at + 2].copy_from_slice(&bad.to_ne_bytes());
            let _ = parse_exits(FAMILY, &m);
        }
    }
}

#[test]
fn the_family_reply_gives_its_id() {
    let mut attrs = Vec::new();
    attribute(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0", &mut attrs);
    attribute(CTRL_ATTR_FAMILY_ID, &31u16.to_ne_bytes(), &mut attrs);
    let reply = request(GENL_ID_CTRL, 1, 1, 0, &attrs);
    assert_eq!(parse_reply(&reply), Some(Reply::Family(31)));
}

fn error_message(errno: i32) -> Vec<u8> {
    let mut payload = (-errno).to_ne_bytes().to_vec();
    payload.extend_from_slice(&[0u8; 16]); // the request's header
    let len = NLMSG_HDRLEN + payload.len();
    let mut m = Vec::new();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
    m.extend_from_slice(&[0u8; 10]);
    m.extend_from_slice(&payload);
    m
}

#[test]
fn acknowledgements_and_refusals_are_told_apart_from_exits() {
    assert_eq!(parse_reply(&error_message(0)), Some(Reply::Ack));
    assert_eq!(
        parse_reply(&error_message(libc::EPERM)),
        Some(Reply::Refused(libc::EPERM))
    );
    // An exit that arrives before the acknowledgement is not an answer.
    assert_eq!(
        parse_reply(&exit_message(FAMILY, 10, &stats(16, 10, 9, 100), None)),
        None
    );
}

#[test]
fn requests_are_well_formed() {
    let r = cpumask_request(FAMILY, 7, "0-3\n", true);
    assert_eq!(u32_at(&r, 0), Some(r.len() as u32));
    assert_eq!(u16_at(&r, 4), Some(FAMILY));
    assert_eq!(u16_at(&r, 6), Some(NLM_F_REQUEST | NLM_F_ACK));
    assert_eq!(u32_at(&r, 8), Some(7));
    assert_eq!(r[16], TASKSTATS_CMD_GET);
    let attrs: Vec<(u16, &[u8])> = attributes(&r[20..]).collect();
    assert_eq!(
        attrs,
        vec![(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, &b"0-3\0"[..])]
    );
    let r = cpumask_request(FAMILY, 8, "0-3", false);
    assert_eq!(
        attributes(&r[20..]).next().map(|a| a.0),
        Some(TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK)
    );
    let f = family_request(1);
    assert_eq!(u16_at(&f, 4), Some(GENL_ID_CTRL));
    assert_eq!(
        attributes(&f[20..]).collect::<Vec<_>>(),
        vec![(CTRL_ATTR_FAMILY_NAME, &b"TASKSTATS\0"[..])]
    );
}
