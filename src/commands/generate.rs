//! `profile generate`: shell completions and man pages from the one CLI definition.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, GenerateWhat};

pub(crate) fn generate(what: GenerateWhat, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = Cli::command();
    match what {
        GenerateWhat::Completions => {
            use clap_complete::Shell;
            for shell in [
                Shell::Bash,
                Shell::Zsh,
                Shell::Fish,
                Shell::Elvish,
                Shell::PowerShell,
            ] {
                clap_complete::generate_to(shell, &mut cmd, "profile", dir)
                    .with_context(|| format!("cannot write {shell} completions"))?;
            }
        }
        GenerateWhat::Man => {
            cmd.build();
            write_man(&cmd, "profile", dir)?;
            for sub in cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            {
                write_man(sub, &format!("profile-{}", sub.get_name()), dir)?;
            }
        }
    }
    Ok(())
}

fn write_man(cmd: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<()> {
    let cmd = cmd.clone().name(name.to_owned());
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
