//! The CLI definition: consistency, spellings, value checks.

use super::*;
use clap::CommandFactory;
use std::time::Duration;

#[test]
fn definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn short_and_long_spellings_agree() {
    let a = Cli::parse_from([
        "profile", "record", "-p", "1", "-d", "2.5", "-F", "999", "-o", "x", "-q",
    ]);
    let b = Cli::parse_from([
        "profile",
        "record",
        "--pid",
        "1",
        "--duration",
        "2.5",
        "--frequency",
        "999",
        "--output",
        "x",
        "--quiet",
    ]);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let Command::Record(r) = a.command else {
        panic!()
    };
    assert_eq!(r.duration, Some(Duration::from_millis(2500)));
}

#[test]
fn pid_or_command_is_required_and_exclusive() {
    assert!(Cli::try_parse_from(["profile", "record"]).is_err());
    assert!(Cli::try_parse_from(["profile", "record", "-p", "1", "--", "ls"]).is_err());
    let c = Cli::parse_from(["profile", "record", "--", "ls", "-l"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    assert_eq!(r.command, ["ls", "-l"]);
}

#[test]
fn report_spellings() {
    let parse = |args: &[&str]| {
        let mut all = vec!["profile", "report"];
        all.extend_from_slice(args);
        let Command::Report(r) = Cli::parse_from(all).command else {
            panic!()
        };
        r
    };
    assert_eq!(
        format!("{:?}", parse(&["--icicle"])),
        format!("{:?}", parse(&["--inverted"]))
    );
    assert_eq!(parse(&["--json"]).json, Some(PathBuf::from("-")));
    assert_eq!(
        parse(&["--json=t.json"]).json,
        Some(PathBuf::from("t.json"))
    );
    assert_eq!(parse(&["--json", "-i", "x"]).input, PathBuf::from("x"));
    assert_eq!(
        parse(&["--otlp", "a.pb", "--input", "x"]).otlp,
        parse(&["--otlp=a.pb", "-i", "x"]).otlp
    );
    let r = parse(&["--thread", "a", "--thread", "7", "--time", "1.5.."]);
    assert_eq!(r.thread, ["a", "7"]);
    assert_eq!(r.time.unwrap().start, Some(1_500_000_000));
    for bad in [
        &["--time", "x"][..],
        &["--include", "("],
        &["--min-width", "-1"],
    ] {
        let mut all = vec!["profile", "report"];
        all.extend_from_slice(bad);
        assert!(Cli::try_parse_from(all).is_err(), "{bad:?}");
    }
}

#[test]
fn diff_inputs_positional_and_repeated() {
    let d = |args: &[&str]| {
        let mut v = vec!["profile", "diff"];
        v.extend_from_slice(args);
        let Command::Diff(d) = Cli::try_parse_from(v).unwrap().command else {
            panic!()
        };
        d.inputs()
    };
    let p = |s: &[&str]| s.iter().map(PathBuf::from).collect::<Vec<_>>();
    assert_eq!(d(&["a", "b"]).unwrap(), (p(&["a"]), p(&["b"])));
    assert_eq!(
        d(&["--base", "a1", "--base", "a2", "--new", "b1"]).unwrap(),
        (p(&["a1", "a2"]), p(&["b1"]))
    );
    assert_eq!(
        d(&["a0", "b0", "--base", "a1", "--new", "b1"]).unwrap(),
        (p(&["a0", "a1"]), p(&["b0", "b1"]))
    );
    assert_eq!(
        d(&["--base", "a1", "b1"]).unwrap(),
        (p(&["a1"]), p(&["b1"]))
    );
    assert!(d(&["a"]).is_err());
    assert!(d(&[]).is_err());
}

#[test]
fn diff_options_are_checked() {
    let parses = |args: &[&str]| {
        let mut v = vec!["profile", "diff", "a", "b"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).is_ok()
    };
    assert!(parses(&["--fail-on-regression", "10"]));
    assert!(parses(&["--fail-on-regression", "7.5%"]));
    assert!(!parses(&["--fail-on-regression", "-1"]));
    assert!(!parses(&["--fail-on-regression", "x"]));
    assert!(!parses(&["--alpha", "0"]));
    assert!(!parses(&["--alpha", "0.7"]));
    assert!(!parses(&["--min-share", "100"]));
    assert!(!parses(&["--json", "--format", "table"]));
    let Command::Diff(d) = Cli::parse_from([
        "profile",
        "diff",
        "a",
        "b",
        "--json",
        "--fail-on-regression",
        "10",
    ])
    .command
    else {
        panic!()
    };
    assert_eq!(d.format(), DiffFormat::Json);
    assert_eq!(d.to_options().threshold, Some(0.1));
    assert_eq!(d.to_options().min_share, 0.01);
}

#[test]
fn children_needs_pid() {
    assert!(Cli::try_parse_from(["profile", "record", "--children", "--", "ls"]).is_err());
    let c = Cli::parse_from(["profile", "record", "--children", "-p", "1"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    let o = r.to_options().unwrap();
    assert!(o.children && !o.existing_children);
    let c = Cli::parse_from(["profile", "record", "--children=all", "-p", "1"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    let o = r.to_options().unwrap();
    assert!(o.children && o.existing_children);
    let c = Cli::parse_from(["profile", "record", "--children=new", "-p", "1"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    assert!(!r.to_options().unwrap().existing_children);
    assert!(Cli::try_parse_from(["profile", "record", "--children=some", "-p", "1"]).is_err());
}

#[test]
fn bad_durations_are_rejected() {
    for d in ["0", "-1", "abc", "inf"] {
        assert!(
            Cli::try_parse_from(["profile", "record", "-p", "1", "-d", d]).is_err(),
            "{d}"
        );
    }
}

/// Issue 14: `-d 1e20` panicked in `Duration::from_secs_f64`.
#[test]
fn huge_durations_are_an_error_not_a_panic() {
    for d in ["1e20", "1e300", "18446744073709551616"] {
        let err = Cli::try_parse_from(["profile", "record", "-p", "1", "-d", d])
            .expect_err(d)
            .to_string();
        assert!(err.contains("at most"), "{d}: {err}");
    }
    // A year is still fine.
    assert!(Cli::try_parse_from(["profile", "record", "-p", "1", "-d", "31536000"]).is_ok());
}

/// Issue 14: `--stack-size` outside what the kernel accepts was clamped silently.
#[test]
fn stack_sizes_outside_the_kernel_limits_are_refused() {
    for s in ["0", "7", "64513", "65528", "100000"] {
        let err = Cli::try_parse_from(["profile", "record", "-p", "1", "--stack-size", s])
            .expect_err(s)
            .to_string();
        assert!(err.contains("8..=64512"), "{s}: {err}");
    }
    for (s, want) in [("8", 8), ("9", 16), ("64512", 64512), ("32768", 32768)] {
        let c = Cli::parse_from(["profile", "record", "-p", "1", "--stack-size", s]);
        let Command::Record(r) = c.command else {
            panic!()
        };
        assert_eq!(r.to_options().unwrap().stack_size, want, "{s}");
    }
}

/// The command line takes its defaults from the library's, so the two never drift.
#[test]
fn record_defaults_are_the_library_defaults() {
    use profile::record::{RecordOptions, Target};
    let c = Cli::parse_from(["profile", "record", "--", "ls"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    let mut expected = RecordOptions::new(Target::Command(vec!["ls".into()]));
    assert_eq!(r.to_options().unwrap(), expected);
    let c = Cli::parse_from(["profile", "record", "-p", "7"]);
    let Command::Record(r) = c.command else {
        panic!()
    };
    expected.target = Target::Pids(vec![7]);
    assert_eq!(r.to_options().unwrap(), expected);
    let c = Cli::parse_from(["profile", "report"]);
    let Command::Report(r) = c.command else {
        panic!()
    };
    assert_eq!(
        r.input,
        std::path::PathBuf::from(RecordOptions::DEFAULT_OUTPUT)
    );
}

/// Every example in the help parses as the CLI defines it, as the subcommand it is
/// listed under: an example naming a flag that does not exist, or using one wrongly,
/// fails here.
#[test]
fn help_examples_parse() {
    for (sub, text) in [
        ("record", RECORD_EXAMPLES),
        ("report", REPORT_EXAMPLES),
        ("diff", DIFF_EXAMPLES),
    ] {
        // Join continued lines, then keep the command lines (without `sudo` and
        // without a description after a run of spaces).
        let joined = text.replace("\\\n", " ");
        let examples: Vec<Vec<&str>> = joined
            .lines()
            .map(|l| l.trim().trim_start_matches("sudo "))
            .filter(|l| l.starts_with("profile "))
            .map(|l| {
                l.split("   ")
                    .next()
                    .unwrap_or(l)
                    .split_whitespace()
                    .collect()
            })
            .collect();
        assert!(examples.len() >= 3, "{sub}: {examples:?}");
        for words in examples {
            let cli = Cli::try_parse_from(&words)
                .unwrap_or_else(|e| panic!("`{}` does not parse: {e}", words.join(" ")));
            let name = match cli.command {
                Command::Record(_) => "record",
                Command::Report(_) => "report",
                Command::Diff(_) => "diff",
                _ => "other",
            };
            assert_eq!(name, sub, "{}", words.join(" "));
        }
    }
}

/// perf's spellings of `record` options (issue 15): `-p A,B`, `-t TID,...`, `-c NS`,
/// `-g`, `--call-graph dwarf,SIZE` and `fp`; what cannot work is refused with the
/// alternative named.
#[test]
fn perf_spellings_of_record() {
    use profile::record::{CallGraph, RecordOptions, Target};
    let options = |args: &[&str]| -> Result<RecordOptions, String> {
        let mut all = vec!["profile", "record"];
        all.extend_from_slice(args);
        let Command::Record(r) = Cli::try_parse_from(all).map_err(|e| e.to_string())?.command
        else {
            panic!()
        };
        r.to_options()
    };
    let o = options(&["-p", "1,2"]).unwrap();
    assert_eq!(o.target, Target::Pids(vec![1, 2]));
    assert_eq!(
        options(&["-p", "1", "-p", "2"]).unwrap().target,
        Target::Pids(vec![1, 2])
    );
    assert_eq!(
        options(&["-t", "5,6"]).unwrap().target,
        Target::Threads(vec![5, 6])
    );
    assert_eq!(
        options(&["--tid", "5"]).unwrap().target,
        Target::Threads(vec![5])
    );
    // -g is the default call graph; --call-graph as perf writes it.
    assert_eq!(
        options(&["-g", "-p", "1"]).unwrap(),
        options(&["-p", "1"]).unwrap()
    );
    let o = options(&["-p", "1", "--call-graph", "dwarf,16384"]).unwrap();
    assert_eq!((o.call_graph, o.stack_size), (CallGraph::Dwarf, 16384));
    let o = options(&["-p", "1", "--call-graph", "dwarf,100"]).unwrap();
    assert_eq!(o.stack_size, 104, "rounded up to a multiple of 8");
    let o = options(&["-g", "-p", "1", "--call-graph", "fp"]).unwrap();
    assert_eq!(o.call_graph, CallGraph::Fp);
    assert_eq!(
        options(&[
            "-p",
            "1",
            "--call-graph",
            "dwarf,8192",
            "--stack-size",
            "8192"
        ])
        .unwrap()
        .stack_size,
        8192
    );
    // -c: the period in CPU nanoseconds, instead of -F.
    let o = options(&["-p", "1", "-c", "2000000"]).unwrap();
    assert_eq!(o.period_ns, Some(2_000_000));
    assert_eq!(
        options(&["-p", "1", "--count", "5000"]).unwrap().period_ns,
        Some(5000)
    );
    assert_eq!(options(&["-p", "1"]).unwrap().period_ns, None);
    // Refused, naming what to do instead.
    for (args, want) in [
        (
            &["-p", "1", "-c", "1000", "-F", "99"][..],
            "cannot be used with",
        ),
        (&["-p", "1", "--call-graph", "lbr"], "`dwarf`"),
        (&["-p", "1", "--call-graph", "fp,8192"], "dwarf,SIZE"),
        (
            &["-p", "1", "--call-graph", "dwarf,x"],
            "not a number of bytes",
        ),
        (&["-p", "1", "--call-graph", "dwarf,99999"], "8..=64512"),
        (
            &["-p", "1", "--call-graph", "frames"],
            "use `dwarf`, `dwarf,SIZE` or `fp`",
        ),
        (
            &[
                "-p",
                "1",
                "--call-graph",
                "dwarf,8192",
                "--stack-size",
                "4096",
            ],
            "give the size once",
        ),
        (&["-t", "5", "--children"], "use -p PID --children"),
        (&["-p", "1", "-t", "2"], "cannot be used with"),
        (&["-t", "2", "--", "ls"], "cannot be used with"),
        (&["-t", "2", "--user"], "cannot be used with"),
    ] {
        let err = options(args).expect_err(&format!("{args:?}"));
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn push_writes_no_file_unless_asked_and_its_options_need_it() {
    let record = |args: &[&str]| -> RecordArgs {
        let mut v = vec!["profile", "record", "-p", "1"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v).unwrap().command {
            Command::Record(r) => r,
            _ => panic!(),
        }
    };
    let out = |args: &[&str]| record(args).to_options().unwrap().output;
    assert_eq!(out(&[]), Some("profile.prof".into()));
    assert_eq!(out(&["--push", "http://h:4040"]), None);
    assert_eq!(
        out(&["--push", "http://h:4040", "-o", "a.prof"]),
        Some("a.prof".into())
    );
    let r = record(&[
        "--push",
        "http://h:4040",
        "--push-interval",
        "30",
        "--app",
        "api",
        "--tag",
        "env=prod",
        "--tag",
        "region=eu",
        "--push-header",
        "X-Scope-OrgID: t",
        "--push-buffer",
        "5",
    ]);
    assert_eq!(r.push_interval, Some(Duration::from_secs(30)));
    assert_eq!(
        r.tag,
        [
            ("env".into(), "prod".into()),
            ("region".into(), "eu".into())
        ]
    );
    assert_eq!(r.push_buffer, Some(5));
    for needs_push in [
        &["--push-interval", "5"][..],
        &["--app", "a"],
        &["--tag", "a=b"],
        &["--push-header", "A: b"],
        &["--push-buffer", "3"],
    ] {
        let mut v = vec!["profile", "record", "-p", "1"];
        v.extend_from_slice(needs_push);
        assert!(Cli::try_parse_from(v).is_err(), "{needs_push:?}");
    }
    assert!(
        Cli::try_parse_from([
            "profile",
            "record",
            "-p",
            "1",
            "--push",
            "u",
            "--push-buffer",
            "0"
        ])
        .is_err()
    );
}

/// Issue 46: `--push-format otlp` selects OTLP/HTTP; it needs --push, and takes
/// only the two protocols.
#[test]
fn push_format_selects_the_protocol_and_needs_push() {
    let parse = |args: &[&str]| {
        let mut v = vec!["profile", "record", "-p", "1"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v)
    };
    let format = |args: &[&str]| match parse(args).unwrap().command {
        Command::Record(r) => r.push_format,
        _ => panic!(),
    };
    assert_eq!(format(&["--push", "http://h:4318"]), None);
    assert_eq!(
        format(&["--push", "http://h:4318", "--push-format", "otlp"]),
        Some(PushFormatArg::Otlp)
    );
    assert_eq!(
        format(&["--push", "http://h:4318", "--push-format=otlp"]),
        Some(PushFormatArg::Otlp)
    );
    assert_eq!(
        format(&["--push", "http://h:4040", "--push-format", "pyroscope"]),
        Some(PushFormatArg::Pyroscope)
    );
    assert!(parse(&["--push-format", "otlp"]).is_err(), "needs --push");
    assert!(parse(&["--push", "http://h:1", "--push-format", "zipkin"]).is_err());
    assert_eq!(
        profile::push::PushFormat::from(PushFormatArg::Otlp).path(),
        "/v1development/profiles"
    );
}

/// Issue 33: the rule file is for `-a --push` only, where SIGHUP reloads it instead
/// of ending the recording; the dry run needs a push.
#[test]
fn push_rules_need_all_cpus_and_take_sighup() {
    let parse = |args: &[&str]| {
        let mut v = vec!["profile", "record"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v)
    };
    let Command::Record(r) = parse(&["-a", "--push", "http://h", "--push-rules", "r"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert!(!r.to_options().unwrap().hangup_stops);
    let Command::Record(r) = parse(&["-a", "--push", "http://h"]).unwrap().command else {
        panic!()
    };
    assert!(r.to_options().unwrap().hangup_stops);
    let Command::Record(r) = parse(&["-p", "1", "--push", "http://h", "--push-rules", "r"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert!(r.to_options().unwrap_err().contains("record -a --push"));
    assert!(parse(&["-a", "--push-rules", "r"]).is_err());
    assert!(parse(&["-a", "--push-dry-run", "d"]).is_err());
    assert!(parse(&["-p", "1", "--push", "http://h", "--push-dry-run", "d"]).is_ok());
}

#[test]
fn dump_takes_one_pid_short_or_long() {
    let a = Cli::parse_from(["profile", "dump", "-p", "42", "--json"]);
    let b = Cli::parse_from(["profile", "dump", "--pid", "42", "--json"]);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let Command::Dump(d) = a.command else {
        panic!()
    };
    assert_eq!(d.to_options().pid, 42);
    assert!(Cli::try_parse_from(["profile", "dump"]).is_err());
    assert!(Cli::try_parse_from(["profile", "dump", "-p", "1,2"]).is_err());
}

#[test]
fn all_cpus_is_a_target_of_its_own() {
    let a = Cli::parse_from(["profile", "record", "-a", "-d", "1"]);
    let b = Cli::parse_from(["profile", "record", "--all-cpus", "-d", "1"]);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let Command::Record(r) = a.command else {
        panic!()
    };
    assert_eq!(
        r.to_options().unwrap().target,
        profile::record::Target::AllCpus
    );
    for other in [
        &["-p", "1"][..],
        &["-t", "1"],
        &["--children"],
        &["--user"],
        &["--", "ls"],
    ] {
        let args = ["profile", "record", "-a"].iter().chain(other);
        assert!(Cli::try_parse_from(args).is_err(), "-a with {other:?}");
    }
}

#[test]
fn a_host_agent_samples_at_the_fleet_rate_unless_told() {
    let freq = |args: &[&str]| {
        let mut all = vec!["profile", "record"];
        all.extend_from_slice(args);
        let Command::Record(r) = Cli::parse_from(all).command else {
            panic!()
        };
        let o = r.to_options().unwrap();
        (o.frequency, o.period_ns)
    };
    let push = ["--push", "http://127.0.0.1:4040"];
    let fleet = profile::record::RecordOptions::FLEET_FREQUENCY;
    let default = profile::record::RecordOptions::DEFAULT_FREQUENCY;
    assert_eq!((fleet, default), (19, 99));
    assert_eq!(freq(&["-a", push[0], push[1]]), (fleet, None));
    assert_eq!(freq(&["-a", "-F", "99", push[0], push[1]]), (99, None));
    assert_eq!(
        freq(&["-a", "-c", "1000000", push[0], push[1]]).1,
        Some(1000000)
    );
    assert_eq!(
        freq(&["-a", "-d", "1"]),
        (default, None),
        "-a alone: an inquiry"
    );
    assert_eq!(
        freq(&["-p", "1", push[0], push[1]]),
        (default, None),
        "one service"
    );
    assert_eq!(freq(&["--", "ls"]), (default, None));
}
