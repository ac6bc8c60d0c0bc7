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

/// Sourcing the bash completions completes subcommands and flags.
#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/profile.bash");
    // Bash calls the function with the command, the word being completed and the
    // word before it, as it does on <TAB>.
    let complete = |words: &str, cword: usize| {
        let w: Vec<&str> = words.split(' ').collect();
        let cmd = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _profile profile {} {}; echo \"${{COMPREPLY[@]}}\"",
            script.display(),
            w[cword],
            w[cword - 1]
        );
        let o = std::process::Command::new("bash")
            .args(["-c", &cmd])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(complete("profile rec", 1), ["record"]);
    assert!(complete("profile record --p", 2).contains(&"--pid".to_owned()));
}

/// The man pages render.
#[test]
fn man_pages_render() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    for page in ["profile.1", "profile-record.1", "profile-report.1"] {
        let o = std::process::Command::new("man")
            .arg("-l")
            .arg(root.join(page))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .expect("man");
        assert!(
            o.status.success(),
            "{page}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("SYNOPSIS") && text.contains("profile"),
            "{page}: {text}"
        );
    }
}
