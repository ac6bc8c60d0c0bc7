//! Separate debug info from debuginfod servers (issue 15): a binary the test built and
//! stripped gets its names and source lines only when `DEBUGINFOD_URLS` names a
//! server that has its debug file (a local server speaking the debuginfod protocol,
//! `GET /buildid/HEX/debuginfo`, from a directory); the file lands in the cache by
//! build-id; no request is made when the variable is unset; a slow server costs the
//! time limit and a note, not an error. Run as root with a cache another user chose
//! (issue 26), the cache is refused with a note: nothing written into a directory of
//! theirs, no link followed, written through or removed.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A debuginfod-protocol server on 127.0.0.1 serving `root/buildid/HEX/debuginfo`,
/// each answer after `delay`; returns its URL and the paths it was asked for.
fn serve(root: PathBuf, delay: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::clone(&requests);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let root = root.clone();
            let asked = Arc::clone(&asked);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = request.split_whitespace().nth(1).unwrap_or("/");
                asked.lock().unwrap().push(path.to_owned());
                std::thread::sleep(delay);
                let file = root.join(path.trim_start_matches('/'));
                let _ = match std::fs::read(&file) {
                    Ok(body) if !path.contains("..") => conn
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| conn.write_all(&body)),
                    _ => conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            });
        }
    });
    (url, requests)
}

/// threads.c built with DWARF, then split: `app` stripped of every symbol and debug
/// section, `app.debug` its debug file (objcopy --only-keep-debug). Returns the
/// stripped binary, the debug file and the build-id in hex.
fn stripped_app(dir: &Path) -> (PathBuf, PathBuf, String) {
    let built = build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let app = dir.join("app");
    let debug = dir.join("app.debug");
    std::fs::copy(&built, &app).unwrap();
    let run = |cmd: &mut Command| assert!(cmd.status().unwrap().success(), "{cmd:?}");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&app)
        .arg(&debug));
    run(Command::new("strip").arg("--strip-all").arg(&app));
    let info = profile::elf::ElfInfo::parse(&std::fs::read(&app).unwrap()).unwrap();
    let id = profile::elf::build_id_hex(&info.build_id.expect("gcc writes a build-id"));
    (app, debug, id)
}

/// Records the stripped app with `env`; returns profile's stderr and the folded
/// stacks with source lines.
fn record(dir: &Path, app: &Path, env: &[(&str, &str)]) -> (String, String) {
    let out = dir.join("x.prof");
    let mut cmd = Command::new(profile_bin());
    cmd.env_remove("DEBUGINFOD_URLS")
        .env_remove("DEBUGINFOD_CACHE_PATH")
        .env_remove("XDG_CACHE_HOME")
        .args(["record", "-o", s(&out), "--", s(app)])
        .args(["--exit-after", "0.5", "alpha:50:0"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    ok(&o);
    let folded = run_profile(&["report", "-i", s(&out), "--lines", "--folded", "-"]);
    ok(&folded);
    (stderr(&o), stdout(&folded))
}

#[test]
fn debuginfod_names_a_stripped_binary_only_with_the_server() {
    let dir = scratch();
    let (app, debug, id) = stripped_app(dir.path());
    let root = dir.path().join("srv");
    let slot = root.join("buildid").join(&id);
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::copy(&debug, slot.join("debuginfo")).unwrap();
    let (url, requests) = serve(root, Duration::ZERO);
    let cache = dir.path().join("cache");

    // Unset: no request, and the stripped binary has no names for its functions.
    let (_, folded) = record(dir.path(), &app, &[("DEBUGINFOD_CACHE_PATH", s(&cache))]);
    assert!(requests.lock().unwrap().is_empty());
    assert!(!folded.contains("burn_leaf"), "{folded}");
    let app_path = format!("/buildid/{id}/debuginfo");
    let asked_for_app = |r: &Mutex<Vec<String>>| r.lock().unwrap().contains(&app_path);

    // With the server: names and file:line, and the file cached by build-id.
    let (err, folded) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", s(&cache)),
        ],
    );
    assert!(asked_for_app(&requests));
    assert!(
        folded.contains("burn_top:") && folded.contains("burn_middle:"),
        "{folded}"
    );
    assert!(
        folded
            .lines()
            .any(|l| l.contains("worker:") && l.contains("burn_leaf")),
        "{folded}"
    );
    assert!(
        err.contains("debug info of 1 modules downloaded from debuginfod"),
        "{err}"
    );
    let cached = cache.join(&id).join("debuginfo");
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(&debug).unwrap()
    );

    // Cached: a server that has nothing is not asked again, the names still come.
    let (empty_url, empty_requests) = serve(dir.path().join("empty"), Duration::ZERO);
    let (_, folded) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &empty_url),
            ("DEBUGINFOD_CACHE_PATH", s(&cache)),
        ],
    );
    assert!(!asked_for_app(&empty_requests));
    assert!(folded.contains("burn_leaf"), "{folded}");

    // A server without the file: a note naming the module, no names, success.
    std::fs::remove_dir_all(&cache).unwrap();
    let (err, folded) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &empty_url),
            ("DEBUGINFOD_CACHE_PATH", s(&cache)),
        ],
    );
    assert!(asked_for_app(&empty_requests));
    assert!(!folded.contains("burn_leaf"), "{folded}");
    assert!(
        err.contains(&format!("debuginfod: no debug info for {}", s(&app)))
            && err.contains("HTTP 404"),
        "{err}"
    );
}

/// A server slower than DEBUGINFOD_TIMEOUT: the request is given up at the limit, the
/// recording is written, and the note says why.
/// A stripped binary with no debug file anywhere: its functions have no names, but
/// its unwind tables say where each begins, so each is one row named by its start
/// (`fn_START@app`, the address its symbol had), not one row per sampled address.
#[test]
fn a_stripped_binary_names_each_function_by_its_start() {
    let dir = scratch();
    let (app, debug, _) = stripped_app(dir.path());
    let nm = Command::new("nm").arg(&debug).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let start = |f: &str| {
        nm.lines()
            .find_map(|l| l.strip_suffix(&format!(" T {f}")))
            .map(|a| format!("fn_{:x}@app", u64::from_str_radix(a, 16).unwrap()))
            .unwrap_or_else(|| panic!("{f} in the debug file's symbols"))
    };
    let chain = ["burn_top", "burn_middle", "burn_leaf"]
        .map(start)
        .join(";");
    let cache = dir.path().join("cache");
    let (_, folded) = record(dir.path(), &app, &[("DEBUGINFOD_CACHE_PATH", s(&cache))]);
    // The thread burns 50 ms of CPU in burn_leaf: at 99 Hz of CPU time, 4 or more
    // samples, each with the whole chain named by the functions' starts.
    let whole: u64 = folded
        .lines()
        .filter(|l| l.contains(&format!("{chain} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(whole >= 3, "{chain} in {whole} samples:\n{folded}");
    // No frame of app is left as a bare address.
    assert!(!folded.contains("app+0x"), "{folded}");
}

#[test]
fn debuginfod_slow_server_hits_the_time_limit() {
    let dir = scratch();
    let (app, debug, id) = stripped_app(dir.path());
    let root = dir.path().join("srv");
    let slot = root.join("buildid").join(&id);
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::copy(&debug, slot.join("debuginfo")).unwrap();
    let (url, requests) = serve(root, Duration::from_secs(120));
    let cache = dir.path().join("cache");
    let (err, folded) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", s(&cache)),
            ("DEBUGINFOD_TIMEOUT", "1"),
        ],
    );
    assert!(
        requests
            .lock()
            .unwrap()
            .contains(&format!("/buildid/{id}/debuginfo"))
    );
    assert!(err.contains("timed out after 1 s"), "{err}");
    assert!(!folded.contains("burn_leaf"), "{folded}");
    assert!(!cache.join(&id).join("debuginfo").exists());
}

/// Every entry under `dir`, recursively (links not followed).
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.symlink_metadata().unwrap().is_dir() {
            out.extend(tree(&p));
        }
        out.push(p);
    }
    out.sort();
    out
}

/// Issue 26: root run with `HOME`, `XDG_CACHE_HOME` or `DEBUGINFOD_CACHE_PATH` that
/// another user controls (`sudo -E`) wrote downloads into their directory, and
/// opened then unlinked a cache entry that was a link to a root-only file.
#[test]
fn debuginfod_refuses_a_cache_another_user_controls() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    let dir = scratch();
    let (app, debug, id) = stripped_app(dir.path());
    let root = dir.path().join("srv");
    let slot = root.join("buildid").join(&id);
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::copy(&debug, slot.join("debuginfo")).unwrap();
    let (url, requests) = serve(root, Duration::ZERO);
    let asked = || requests.lock().unwrap().len();

    // A directory of another user (nobody), e.g. their home.
    let theirs = dir.path().join("home-of-nobody");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    for env in [
        ("DEBUGINFOD_CACHE_PATH", theirs.join("cache")),
        ("XDG_CACHE_HOME", theirs.clone()),
        ("HOME", theirs.clone()),
    ] {
        let (err, folded) = record(
            dir.path(),
            &app,
            &[("DEBUGINFOD_URLS", &url), (env.0, s(&env.1))],
        );
        assert!(
            err.contains("debuginfod: cache not used, nothing downloaded")
                && err.contains("home-of-nobody is not this user's alone (owner uid 65534"),
            "{env:?}: {err}"
        );
        assert!(!folded.contains("burn_leaf"), "{folded}");
        assert_eq!(
            tree(&theirs),
            Vec::<PathBuf>::new(),
            "{env:?}: nothing written"
        );
    }
    assert_eq!(asked(), 0, "no download without a cache to keep it");

    // A cache reached through a link (placed by whoever could write there).
    let real = dir.path().join("real-cache");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link-cache");
    symlink(&real, &link).unwrap();
    let (err, _) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", s(&link)),
        ],
    );
    assert!(err.contains("link-cache is a symbolic link"), "{err}");
    assert_eq!(tree(&real), Vec::<PathBuf>::new());

    // A cache entry that is a link to a root-only file: not read, not replaced, not
    // unlinked, and the file it names unchanged.
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:SECRET\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(cache.join(&id)).unwrap();
    let entry = cache.join(&id).join("debuginfo");
    symlink(&secret, &entry).unwrap();
    let (err, folded) = record(
        dir.path(),
        &app,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", s(&cache)),
        ],
    );
    assert!(
        err.contains(&format!("{id}/debuginfo is a symbolic link")),
        "{err}"
    );
    assert!(!folded.contains("burn_leaf"), "{folded}");
    assert!(entry.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_link(&entry).unwrap(), secret);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root:SECRET\n");
    assert_eq!(secret.metadata().unwrap().mode() & 0o7777, 0o600);
    // The app's entry is not replaced by a download either (other modules without
    // DWARF, the C library, may be asked for).
    let app_path = format!("/buildid/{id}/debuginfo");
    assert!(!requests.lock().unwrap().contains(&app_path));
}
