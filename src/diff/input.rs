//! The inputs of a diff: a recording (told apart by its `PROFREC\0` magic) or a folded
//! file (`root;caller;leaf COUNT` per line, as `profile report --folded`, inferno or
//! flamegraph.pl's collapse scripts write), read into one [`Run`]: its unique stacks
//! with their sample counts and, for recordings, the CPU time they stand for.

use std::collections::BTreeMap;
use std::path::Path;

use crate::format::{MAGIC, ReadError, Recording};
use crate::output::suffixed_name;
use crate::profile::{Profile, ProfileOptions};

/// Why an input could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Recording(#[from] ReadError),
    #[error(
        "{path}:{line}: expected a folded stack `root;...;leaf COUNT` with a whole sample count, found `{text}`"
    )]
    FoldedLine {
        path: String,
        line: usize,
        text: String,
    },
    #[error("{path} has no samples: nothing to compare")]
    Empty { path: String },
}

/// What an input file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Recording,
    Folded,
}

/// The samples of one unique stack in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StackWeight {
    pub samples: u64,
    /// CPU nanoseconds (0 for folded inputs).
    pub cpu_ns: u64,
}

/// One run: one input file.
#[derive(Debug, Clone)]
pub struct Run {
    /// The file it came from, for messages and reports.
    pub source: String,
    pub kind: InputKind,
    /// Root-first folded stacks (frames joined by `;`, with inferno's `_[k]`-style
    /// suffixes) and what they hold.
    pub stacks: BTreeMap<String, StackWeight>,
    pub samples: u64,
    /// CPU nanoseconds of all samples (0 for folded inputs).
    pub cpu_ns: u64,
    /// A recording cut short, said once when read.
    pub warning: Option<String>,
}

impl Run {
    /// Reads a recording or a folded file.
    pub fn read(path: &Path) -> Result<Run, InputError> {
        let name = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| InputError::Io {
            path: name.clone(),
            source,
        })?;
        let run = if data.starts_with(&MAGIC) {
            let mut rec = Recording::from_bytes(&data, &name)?;
            // A cut recording has no names: take them from the binaries, as report does.
            let note = crate::symbolize::late::complete_names(&mut rec);
            let mut run = Run::from_profile(
                &Profile::from_recording(&rec, ProfileOptions::default()),
                name.clone(),
            );
            if let Some(note) = note {
                run.warning = Some(match run.warning {
                    Some(w) => format!("{w}; {note}"),
                    None => note,
                });
            }
            run
        } else {
            Run::from_folded(&String::from_utf8_lossy(&data), name.clone())?
        };
        if run.samples == 0 {
            return Err(InputError::Empty { path: name });
        }
        Ok(run)
    }

    /// One run from a profile model, stacks folded as `profile report --folded` does.
    pub fn from_profile(profile: &Profile, source: String) -> Run {
        let mut per_stack: BTreeMap<u32, StackWeight> = BTreeMap::new();
        for s in &profile.samples {
            let w = per_stack.entry(s.stack).or_default();
            w.samples += 1;
            w.cpu_ns += s.weight;
        }
        let mut stacks: BTreeMap<String, StackWeight> = BTreeMap::new();
        for (stack, w) in per_stack {
            let names: Vec<String> = profile.stacks[stack as usize]
                .iter()
                .map(|&f| suffixed_name(profile, f).replace(';', ":"))
                .collect();
            let key = if names.is_empty() {
                "[no stack]".to_owned()
            } else {
                names.join(";")
            };
            let e = stacks.entry(key).or_default();
            e.samples += w.samples;
            e.cpu_ns += w.cpu_ns;
        }
        Run {
            samples: profile.samples.len() as u64,
            cpu_ns: profile.total_weight(),
            source,
            kind: InputKind::Recording,
            stacks,
            warning: profile.damage.clone(),
        }
    }

    /// One run from folded text. Blank lines are skipped; anything else that is not
    /// `STACK COUNT` is an error naming the line.
    pub fn from_folded(text: &str, source: String) -> Result<Run, InputError> {
        let mut stacks: BTreeMap<String, StackWeight> = BTreeMap::new();
        let mut samples = 0u64;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.trim().is_empty() {
                continue;
            }
            let bad = || InputError::FoldedLine {
                path: source.clone(),
                line: i + 1,
                text: line.chars().take(120).collect(),
            };
            let (stack, count) = line.rsplit_once(char::is_whitespace).ok_or_else(bad)?;
            let count: u64 = count.parse().map_err(|_| bad())?;
            let stack = stack.trim();
            // Two counts: the differential format, not a profile.
            let differential = stack
                .rsplit_once(char::is_whitespace)
                .is_some_and(|(_, n)| n.parse::<u64>().is_ok());
            if stack.is_empty() || differential {
                return Err(bad());
            }
            stacks.entry(stack.to_owned()).or_default().samples += count;
            samples += count;
        }
        Ok(Run {
            source,
            kind: InputKind::Folded,
            stacks,
            samples,
            cpu_ns: 0,
            warning: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_are_summed_per_stack() {
        let r = Run::from_folded("a;b 3\n\na;b 2\na;c  1\n", "x".into()).unwrap();
        assert_eq!(r.samples, 6);
        assert_eq!(r.stacks["a;b"].samples, 5);
        assert_eq!(r.stacks["a;c"].samples, 1);
        assert_eq!(r.kind, InputKind::Folded);
    }

    #[test]
    fn bad_folded_lines_are_named() {
        for text in ["a;b\n", "a;b x\n", "a;b 1.5\n", "a;b 1 2\n", " 3\n"] {
            let e = Run::from_folded(text, "f.txt".into()).unwrap_err();
            assert!(
                e.to_string().starts_with("f.txt:1: expected"),
                "{text}: {e}"
            );
        }
    }
}
