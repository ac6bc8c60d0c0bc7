//! `profile dump`: every thread's stack now, as text or JSON on stdout.

use std::io::{self, Write};

use crate::cli;

pub(crate) fn dump(args: &cli::DumpArgs) -> anyhow::Result<()> {
    let d = profile::dump::dump(&args.to_options())?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    if args.json {
        profile::dump::write_json(&d, &mut out)?;
    } else {
        profile::dump::write_text(&d, &mut out)?;
    }
    out.flush()?;
    Ok(())
}
