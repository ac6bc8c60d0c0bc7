//! The `profile` binary: parse the command line, run the subcommand, turn errors into
//! a message and an exit status (0 ok, 2 error, 3 regression; a launched command's own
//! status for `record -- COMMAND`).

#![deny(unsafe_code)]

mod cli;
mod commands;

use std::io;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // The chain may hold paths, names or a server's words: escaped.
            let message = format!("{e:#}");
            eprintln!(
                "profile: error: {}",
                profile::text::terminal_message(&message)
            );
            ExitCode::from(2)
        }
    }
}

/// `profile report | head` closing the pipe early is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(args) => commands::record(&args),
        Command::Report(args) => commands::report(&args).map(|()| ExitCode::SUCCESS),
        Command::Diff(args) => commands::diff(&args),
        Command::Top(args) => commands::top(&args),
        Command::Dump(args) => commands::dump(&args).map(|()| ExitCode::SUCCESS),
        Command::Generate { what, dir } => {
            commands::generate(what, &dir).map(|()| ExitCode::SUCCESS)
        }
    }
}
