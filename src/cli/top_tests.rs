//! `profile top`'s arguments: the recorder's options come from the `record` they
//! stand for.

use super::*;
use profile::record::{RecordOptions, Target};

fn top(args: &[&str]) -> TopArgs {
    let all = ["profile", "top"].iter().chain(args);
    let Command::Top(t) = Cli::parse_from(all).command else {
        panic!("not a top: {args:?}")
    };
    t
}

fn record(args: &[&str]) -> RecordOptions {
    let all = ["profile", "record"].iter().chain(args);
    let Command::Record(r) = Cli::parse_from(all).command else {
        panic!("not a record: {args:?}")
    };
    r.to_options().unwrap()
}

#[test]
fn top_takes_children_as_record_does() {
    let o = top(&["--children=all", "-p", "1"]).to_options().unwrap();
    assert!(o.children && o.existing_children);
    let o = top(&["--children", "-p", "1"]).to_options().unwrap();
    assert!(o.children && !o.existing_children);
    assert!(Cli::try_parse_from(["profile", "top", "--children", "--", "ls"]).is_err());
    assert!(Cli::try_parse_from(["profile", "top", "--children", "-a"]).is_err());
}

/// A top records as the quiet `record` of the same target, rate, stacks and
/// off-CPU time would, without its file.
#[test]
fn top_options_are_a_quiet_records_without_a_file() {
    for (t, r) in [
        (&["-p", "1,2"][..], &["-p", "1,2", "-q"][..]),
        (&["-a", "-F", "99"], &["-a", "-F", "99", "-q"]),
        (
            &["--off-cpu", "--call-graph", "fp", "-d", "3", "--", "ls"],
            &[
                "--off-cpu",
                "--call-graph",
                "fp",
                "-d",
                "3",
                "-q",
                "--",
                "ls",
            ],
        ),
        (
            &["--call-graph", "dwarf,4096", "--children", "-p", "7"],
            &["--call-graph", "dwarf,4096", "--children", "-p", "7", "-q"],
        ),
    ] {
        let o = top(t).to_options().unwrap();
        let mut want = record(r);
        want.output = None;
        assert_eq!(o, want, "top {t:?}");
        assert!(o.output.is_none() && !o.progress);
    }
    let o = top(&["-p", "1"]).to_options().unwrap();
    assert_eq!(o.target, Target::Pids(vec![1]));
    assert_eq!(o.frequency, RecordOptions::DEFAULT_FREQUENCY);
}
