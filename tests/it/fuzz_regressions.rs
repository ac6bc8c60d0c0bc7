//! Every input a fuzzer found a crash, hang or blow-up with (fuzz/regressions/TARGET/),
//! and the checked-in seeds, replayed through the same code the fuzz targets run
//! (fuzz/src/lib.rs, included here), so a fixed finding stays fixed.

use std::path::Path;

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod pipelines;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for dir in [
        root.join("regressions").join(target),
        root.join("seeds").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.is_file() && p.file_name().is_none_or(|n| n != ".keep"))
            .collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let started = std::time::Instant::now();
            run(&data);
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(20),
                "{} took {took:?}",
                file.display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn recording_inputs() {
    assert!(replay("recording", pipelines::recording) > 0);
}

#[test]
fn parser_inputs() {
    assert!(replay("parsers", pipelines::parsers) > 0);
}

#[test]
fn jvm_inputs() {
    assert!(replay("jvm", pipelines::jvm) > 0);
}

#[test]
fn unwind_inputs() {
    replay("unwind", pipelines::unwind);
}

#[test]
fn symbolize_inputs() {
    replay("symbolize", pipelines::symbolize);
}

#[test]
fn perfdata_inputs() {
    assert!(replay("perfdata", pipelines::perfdata) > 0);
}

#[test]
fn python_inputs() {
    assert!(replay("python", pipelines::python) > 0);
}

#[test]
fn hotspot_inputs() {
    assert!(replay("hotspot", pipelines::hotspot) > 0);
}

/// The `v8` seeds name what their frames point at (an interpreter frame of `inner`
/// under `mega`; `mega` above a frameless builtin), and are current
/// (`PROFILE_BLESS=1` writes them).
#[test]
fn v8_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/v8");
    let bless = std::env::var_os("PROFILE_BLESS").is_some();
    for (name, data) in pipelines::v8_seeds() {
        let run = pipelines::v8_run(&data).expect("a whole seed");
        let want = match name.as_str() {
            "interpreted" => (vec!["inner:/srv/app.js", "mega:/srv/app.js"], None),
            _ => (vec![], Some("mega:/srv/app.js")),
        };
        assert_eq!(
            (
                run.frames.iter().map(String::as_str).collect::<Vec<_>>(),
                run.above_leaf.as_deref()
            ),
            want,
            "{name}: {run:?}"
        );
        let path = root.join(&name);
        if bless {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(&path, &data).unwrap();
        } else {
            let kept = std::fs::read(&path).unwrap_or_default();
            assert!(kept == data, "{} is stale: PROFILE_BLESS=1", path.display());
        }
    }
    assert!(replay("v8", pipelines::v8) >= 2);
}

/// The `ruby` seeds name the forged thread's frames (from its registers and from its
/// current frame) or none (its thread gone), and are current (`PROFILE_BLESS=1`
/// writes them).
#[test]
fn ruby_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/ruby");
    let bless = std::env::var_os("PROFILE_BLESS").is_some();
    // The VM loop at the leaf goes with the `rb_vm_exec` that called it.
    let named = [
        "block in outer",
        "0x90",
        "Array#each",
        "outer",
        "<main>",
        "0x91",
    ];
    for (name, data) in pipelines::ruby_seeds() {
        let run = pipelines::ruby_run(&data).expect("a whole seed");
        let want: Vec<&str> = match name.as_str() {
            "no-thread" => vec!["[ruby: unreadable]", "0x90", "[ruby: unreadable]", "0x91"],
            _ => named.to_vec(),
        };
        assert_eq!(run.frames, want, "{name}: {run:?}");
        let path = root.join(&name);
        if bless {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(&path, &data).unwrap();
        } else {
            let kept = std::fs::read(&path).unwrap_or_default();
            assert!(kept == data, "{} is stale: PROFILE_BLESS=1", path.display());
        }
    }
    assert!(replay("ruby", pipelines::ruby) >= 3);
}

/// The `gopclntab` seeds name the forged table's two functions and are current
/// (`PROFILE_BLESS=1` writes them); a real table (Debian's go, when installed) is
/// read through the same target.
#[test]
fn gopclntab_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/gopclntab");
    let bless = std::env::var_os("PROFILE_BLESS").is_some();
    for (name, data) in pipelines::gopclntab_seeds() {
        let names = pipelines::gopclntab_run(&data).expect("a whole seed");
        assert_eq!(names, ["main.alpha", "main.beta"], "{name}");
        let path = root.join(&name);
        if bless {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(&path, &data).unwrap();
        } else {
            let kept = std::fs::read(&path).unwrap_or_default();
            assert!(kept == data, "{} is stale: PROFILE_BLESS=1", path.display());
        }
    }
    assert!(replay("gopclntab", pipelines::gopclntab) >= 1);
    let Some(go) = crate::fixture::go_toolchains().into_iter().next() else {
        eprintln!("SKIPPED the real table: no `go` on PATH");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (bin, table) = (dir.path().join("twowork"), dir.path().join("table"));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/go/twowork.go");
    crate::fixture::go_build(&go, &source, &bin, true);
    let status = std::process::Command::new("objcopy")
        .args(["-O", "binary", "--only-section=.gopclntab"])
        .arg(&bin)
        .arg(&table)
        .status()
        .unwrap();
    assert!(status.success());
    let names = pipelines::gopclntab_run(&std::fs::read(&table).unwrap()).expect("read");
    assert!(names.iter().any(|n| n.starts_with("runtime.")), "{names:?}");
}

/// The `python` and `hotspot` seeds, as made from the snapshots now: each reaches
/// the names the snapshot's process ran. `PROFILE_BLESS=1` writes them to
/// fuzz/seeds/ (the checked-in ones must be current).
#[test]
fn reader_seeds_reach_the_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = Vec::new();
    for minor in 8..=13 {
        let path = root.join(format!("tests/data/python/snap-3.{minor}.txt"));
        let text = std::fs::read_to_string(path).unwrap();
        for (name, data) in pipelines::seeds::python_seeds(&text).unwrap() {
            let run = pipelines::python_run(&data);
            assert!(
                run.samples.iter().all(|s| s.starts_with("deep:")),
                "{name}: {run:?}"
            );
            seeds.push(("python", name, data));
        }
    }
    for (name, data) in pipelines::seeds::hotspot_seeds().unwrap() {
        let run = pipelines::hotspot_run(&data);
        let want = if name.starts_with("interpreted") {
            "long Huge.huge(long):"
        } else {
            "long Inline.mix"
        };
        assert!(
            !run.frames.is_empty() && run.frames.iter().all(|f| f.starts_with(want)),
            "{name}: {run:?}"
        );
        seeds.push(("hotspot", name, data));
    }
    let bless = std::env::var_os("PROFILE_BLESS").is_some();
    for (target, name, data) in seeds {
        let path = root.join("fuzz/seeds").join(target).join(&name);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &data).unwrap();
        } else {
            let kept = std::fs::read(&path).unwrap_or_default();
            assert!(kept == data, "{} is stale: PROFILE_BLESS=1", path.display());
        }
    }
}
