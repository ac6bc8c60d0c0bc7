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
    // That each example parses is checked on the CLI definition (cli::tests).
    for sub in ["record", "report", "diff"] {
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

/// Every man page renders: one for `profile` and one for each subcommand its help
/// lists, each naming its command in NAME and SYNOPSIS and with the subcommand's
/// examples.
#[test]
fn man_pages_render() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let help = stdout(&run_profile(&["--help"]));
    let subs: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    assert_eq!(subs, ["record", "report", "top", "diff", "dump"], "{help}");
    let mut pages: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = subs.iter().map(|s| format!("profile-{s}.1")).collect();
    expected.push("profile.1".into());
    expected.sort();
    assert_eq!(pages, expected);
    for page in pages {
        let o = std::process::Command::new("man")
            .arg("-l")
            .arg(root.join(&page))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "200")
            .output()
            .expect("man");
        assert!(
            o.status.success(),
            "{page}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        let name = page.trim_end_matches(".1");
        let synopsis = name.replace('-', " ");
        let section = |title: &str| {
            text.split(&format!("\n{title}\n"))
                .nth(1)
                .map(|rest| {
                    // man justifies lines with extra spaces: one space between words.
                    let para = rest.split("\n\n").next().unwrap_or("");
                    para.split_whitespace().collect::<Vec<_>>().join(" ")
                })
                .unwrap_or_else(|| panic!("{page} has no {title}: {text}"))
        };
        assert!(section("NAME").starts_with(name), "{page}: {text}");
        assert!(section("SYNOPSIS").starts_with(&synopsis), "{page}: {text}");
        if name != "profile" {
            assert!(text.contains("Examples:"), "{page} has no examples");
            assert!(text.contains(&format!("profile {}", &name[8..])), "{page}");
        }
    }
}
