//! The generated files (completions, man pages) must match the CLI definition.

use std::path::Path;

use crate::common::*;

/// Regenerates completions/ and man/ into a scratch dir and compares them with the
/// checked-in copies. `PROFILE_BLESS=1` rewrites the checked-in copies instead.
#[test]
fn completions_and_man_pages_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for what in ["completions", "man"] {
        let dir = scratch();
        ok(&run_profile(&[
            "generate",
            what,
            dir.path().to_str().unwrap(),
        ]));
        let checked_in = root.join(what);
        if std::env::var_os("PROFILE_BLESS").is_some() {
            std::fs::create_dir_all(&checked_in).unwrap();
            for e in std::fs::read_dir(dir.path()).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), checked_in.join(e.file_name())).unwrap();
            }
            continue;
        }
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert!(names.len() >= 3, "{what}: {names:?}");
        for name in names {
            let fresh = std::fs::read(dir.path().join(&name)).unwrap();
            let old = std::fs::read(checked_in.join(&name)).unwrap_or_default();
            assert!(
                fresh == old,
                "{what}/{} is stale: run `PROFILE_BLESS=1 cargo test --test it cli` and commit",
                name.to_string_lossy()
            );
        }
    }
}

#[test]
fn version_and_help_examples() {
    let o = run_profile(&["--version"]);
    ok(&o);
    assert!(stdout(&o).starts_with("profile "));
    for sub in ["record", "report"] {
        let o = run_profile(&[sub, "--help"]);
        ok(&o);
        assert!(
            stdout(&o).contains("Examples:"),
            "{sub} --help has no examples"
        );
    }
}
