//! The JVM handshake's pure parts: replies, tool options.

use super::requests::MapError;
use super::*;

#[test]
fn tool_options_keep_what_was_there() {
    use std::ffi::OsStr;
    assert_eq!(jvm_tool_options(None), JVM_FLAGS);
    assert_eq!(
        jvm_tool_options(Some(OsStr::new("-Xmx1g"))),
        OsStr::new(&format!("-Xmx1g {JVM_FLAGS}"))
    );
    // Nothing twice, order kept.
    assert_eq!(
        jvm_tool_options(Some(OsStr::new("-XX:+UnlockDiagnosticVMOptions -Xss1m"))),
        "-XX:+UnlockDiagnosticVMOptions -Xss1m -XX:+DumpPerfMapAtExit"
    );
    assert_eq!(jvm_tool_options(Some(OsStr::new(JVM_FLAGS))), JVM_FLAGS);
}

#[test]
fn own_process_facts() {
    let me = std::process::id();
    assert_eq!(crate::symbolize::perfmap::ns_pid(me), Some(me));
    // The test harness does not catch SIGQUIT: no request may signal it.
    assert!(!catches_sigquit(me));
    // It maps no libjvm.so: it is no JVM.
    assert!(JvmId::seen(me).is_none());
    assert!(start_time(me).is_some_and(|t| t > 0));
    assert!(!attach_disabled(me));
}

/// The kinds the tracker tells failures apart by: refused (never asked again),
/// abandoned (counted), gone (retired, not noted); every other failure is none.
#[test]
fn failures_by_kind() {
    let kinds = |e: MapError| (e.refused(), e.abandoned(), e.gone());
    for e in [
        JvmError::NoListener(Duration::from_secs(3)),
        JvmError::AttachDisabled,
        JvmError::Refused("no".into()),
    ] {
        assert_eq!(kinds(e.into()), (true, false, false));
    }
    let abandoned = JvmError::Abandoned(Duration::from_secs(3));
    assert_eq!(kinds(abandoned.into()), (false, true, false));
    assert_eq!(kinds(JvmError::Gone.into()), (false, false, true));
    for e in [
        MapError::Request(JvmError::Starting),
        MapError::Request(JvmError::ListenerWithoutSocket),
        MapError::Request(JvmError::NoSigquitHandler),
        MapError::NotWritten("/tmp/perf-1.map".into()),
        MapError::Open(crate::symbolize::perfmap::PerfMapSkip::NotRegular(
            "/tmp/perf-1.map".into(),
        )),
    ] {
        assert_eq!(kinds(e), (false, false, false));
    }
    // The summary's sentences are the errors' own.
    let e = MapError::NotWritten("/tmp/perf-1.map".into());
    assert_eq!(
        e.to_string(),
        "the JVM wrote no perf map at /tmp/perf-1.map"
    );
    let e = MapError::from(JvmError::Gone);
    assert_eq!(e.to_string(), JvmError::Gone.to_string());
}

/// Replies: `0` is success; anything else is refused, its text safe to print.
#[test]
fn replies() {
    assert!(parse_reply(b"0\n").is_ok());
    assert!(parse_reply(b"0\nwritten\n").is_ok());
    let e = parse_reply(b"1\n\x1b]0;owned\x07\x1b[2J").unwrap_err();
    assert!(matches!(e, JvmError::Refused(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("`jcmd Compiler.perfmap` failed") && !text.contains('\x1b'),
        "{text}"
    );
    assert!(!text.contains('\x07'), "{text}");
    let long = format!("1\n{}", "x".repeat(100_000));
    assert!(parse_reply(long.as_bytes()).unwrap_err().to_string().len() < 400);
    assert!(parse_reply(b"0\nUnknown diagnostic command").is_err());
    assert!(parse_reply(b"").is_err());
}

/// A SIGQUIT is sent only to a JVM whose Signal Dispatcher runs and whose Attach
/// Listener does not (told by its threads' names): this test process plays the JVM.
#[test]
fn sigquit_only_when_it_starts_the_listener() {
    let me = std::process::id();
    let named = |name: &str| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (up_tx, up) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // The name is the thread's own once it runs.
                let _ = up_tx.send(());
                let _ = rx.recv();
            })
            .unwrap();
        up.recv().unwrap();
        (t, tx)
    };
    assert!(matches!(
        sigquit_starts_listener(me),
        Err(JvmError::Starting)
    ));
    let dispatcher = named("Signal Dispatcher");
    assert!(sigquit_starts_listener(me).is_ok());
    let listener = named("Attach Listener");
    let err = sigquit_starts_listener(me).unwrap_err();
    assert!(matches!(err, JvmError::ListenerWithoutSocket), "{err}");
    assert!(err.to_string().contains("thread dump"));
    for (t, tx) in [dispatcher, listener] {
        drop(tx);
        t.join().unwrap();
    }
    assert!(matches!(
        sigquit_starts_listener(u32::MAX),
        Err(JvmError::Gone)
    ));
}
