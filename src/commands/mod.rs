//! The subcommands' bodies: each turns its parsed arguments into library calls and
//! writes what the user asked for.

mod diff;
mod dump;
mod generate;
mod push;
mod record;
mod report;
mod top;

pub(crate) use diff::diff;
pub(crate) use dump::dump;
pub(crate) use generate::generate;
pub(crate) use record::record;
pub(crate) use report::report;
pub(crate) use top::top;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;

/// Opens an output path; `-` is stdout.
pub(crate) fn create(path: &Path) -> anyhow::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        return Ok(Box::new(io::stdout().lock()));
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(io::BufWriter::new(f)))
}
