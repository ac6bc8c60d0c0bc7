//! The inputs of a diff: a recording (told apart by its `PROFREC\0` magic) or a folded
//! file (`root;caller;leaf COUNT` per line, as `profile report --folded`, inferno or
//! flamegraph.pl's collapse scripts write), read into one [`Run`]: its unique stacks
//! with their sample counts and, for recordings, the CPU time they stand for.

use std::collections::HashMap;
use std::path::Path;

use crate::format::{MAGIC, ReadError, Recording};
use crate::output::folded::{Folded, FoldedOptions, Label, LabelId, fold_ids};
use crate::profile::{FrameClass, Profile, ProfileOptions};

/// Why an input could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    /// The recording could not be read.
    Recording(#[from] ReadError),
    #[error(
        "{path}:{line}: expected a folded stack `root;...;leaf COUNT` with a whole sample count, found `{text}`"
    )]
    /// A line of a folded file is not `STACK COUNT`.
    FoldedLine {
        /// The file.
        path: String,
        /// The line number, from 1.
        line: usize,
        /// The start of the line.
        text: String,
    },
    /// The input holds no samples.
    #[error("{path} has no samples: nothing to compare")]
    Empty {
        /// The file.
        path: String,
    },
    /// A folded file whose counts may be time weights, with no period to read them by.
    #[error(
        "{path}: the counts look like time weights, not samples (the smallest is {smallest}, and they share no sampling period); \
         pass --folded-unit samples if they are sample counts, or --folded-unit ns with --folded-period NS (the sampling period)"
    )]
    AmbiguousWeights {
        /// The folded file.
        path: String,
        /// Its smallest count.
        smallest: u64,
    },
    /// `--folded-unit ns` without a period, and none in the counts.
    #[error(
        "{path}: --folded-unit ns needs the sampling period: the counts share none (greatest common divisor {gcd}); pass --folded-period NS"
    )]
    NoPeriod {
        /// The folded file.
        path: String,
        /// The greatest common divisor of its counts.
        gcd: u64,
    },
}

/// What the counts of a folded file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FoldedUnit {
    /// Tell from the counts: all multiples of one period of at least 1,000 are
    /// nanoseconds of that period (what `perf script | inferno-collapse-perf` writes
    /// for a fixed-period event); counts all of 100,000 or more with no such period
    /// are refused as ambiguous; anything else is samples. Default.
    #[default]
    Auto,
    /// Sample counts, whatever their size.
    Samples,
    /// Nanoseconds of CPU, each sample worth `period` (or, when none is given, the
    /// greatest common divisor of the counts).
    Ns {
        /// The sampling period in nanoseconds.
        period: Option<u64>,
    },
}

/// Counts whose common divisor is at least this large are taken as time weighted by
/// a sampling period of that many nanoseconds.
const WEIGHT_PERIOD_MIN: u64 = 1000;

/// Counts all at least this large with no such period are refused as ambiguous: a file
/// of sample counts has stacks sampled a few times (a time weight of one sample at a
/// typical period is 10^5 to 10^7 ns).
const AMBIGUOUS_MIN: u64 = 100_000;

/// Folded text's frames, its stacks with their counts, and the counts' sum; an
/// error naming the first line that is not `STACK COUNT`.
#[allow(clippy::type_complexity)]
fn parse_folded(
    text: &str,
    source: &str,
) -> Result<(Folded, HashMap<Vec<LabelId>, StackWeight>, u64), InputError> {
    let mut frames = Folded::default();
    let mut stacks: HashMap<Vec<LabelId>, StackWeight> = HashMap::new();
    let mut samples = 0u64;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let bad = || InputError::FoldedLine {
            path: source.to_owned(),
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
        let ids = stack
            .split(';')
            .map(|f| frames.intern(f, class_of(f)))
            .collect();
        let w = stacks.entry(ids).or_default();
        w.samples = w.samples.checked_add(count).ok_or_else(bad)?;
        samples = samples.checked_add(count).ok_or_else(bad)?;
    }
    Ok((frames, stacks, samples))
}

/// The period of folded counts read as nanoseconds (None: counts are samples), as
/// `unit` says or, automatically, from their greatest common divisor; an error when
/// ns are asked for with no period, or when the counts could be either.
fn folded_period(
    stacks: &[(Vec<LabelId>, StackWeight)],
    unit: FoldedUnit,
    source: &str,
) -> Result<Option<u64>, InputError> {
    let common = stacks.iter().fold(0, |g, (_, w)| gcd(g, w.samples));
    let smallest = stacks.iter().map(|(_, w)| w.samples).min().unwrap_or(0);
    Ok(match unit {
        FoldedUnit::Samples => None,
        FoldedUnit::Ns { period: Some(p) } if p > 0 => Some(p),
        FoldedUnit::Ns { .. } if common >= 2 => Some(common),
        FoldedUnit::Ns { .. } => {
            return Err(InputError::NoPeriod {
                path: source.to_owned(),
                gcd: common,
            });
        }
        FoldedUnit::Auto if common >= WEIGHT_PERIOD_MIN => Some(common),
        FoldedUnit::Auto if smallest >= AMBIGUOUS_MIN => {
            return Err(InputError::AmbiguousWeights {
                path: source.to_owned(),
                smallest,
            });
        }
        FoldedUnit::Auto => None,
    })
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// What an input file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// A recording (`PROFREC` magic).
    Recording,
    /// A folded-stacks text file.
    Folded,
}

/// The samples of one unique stack in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StackWeight {
    /// Samples taken in the stack.
    pub samples: u64,
    /// CPU nanoseconds (0 for folded inputs).
    pub cpu_ns: u64,
}

/// One run: one input file.
#[derive(Debug, Clone)]
pub struct Run {
    /// The file it came from, for messages and reports.
    pub source: String,
    /// Whether it was a recording or a folded file.
    pub kind: InputKind,
    /// The frames the stacks name, by id: their folded text (with inferno's
    /// `_[k]`-style suffixes) and their kind. Texts are unique within a run.
    pub frames: Vec<Label>,
    /// Unique stacks as frame ids, root first, and what they hold.
    pub stacks: Vec<(Vec<LabelId>, StackWeight)>,
    /// Samples in the run.
    pub samples: u64,
    /// CPU nanoseconds of all samples (0 for folded inputs).
    pub cpu_ns: u64,
    /// The host the recording was made on (empty for folded inputs).
    pub hostname: String,
    /// The processor's model name (empty for folded inputs and for recordings made
    /// before it was recorded).
    pub cpu_model: String,
    /// A recording cut short, said once when read.
    pub warning: Option<String>,
    /// How a folded file's counts were read, when they were not sample counts.
    pub note: Option<String>,
}

impl Run {
    /// Reads a recording or a folded file whose counts are told apart automatically.
    pub fn read(path: &Path) -> Result<Run, InputError> {
        Run::read_with(path, FoldedUnit::Auto)
    }

    /// Reads a recording, or a folded file whose counts are in `unit`.
    pub fn read_with(path: &Path, unit: FoldedUnit) -> Result<Run, InputError> {
        let name = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| InputError::Io {
            path: name.clone(),
            source,
        })?;
        let run = if data.starts_with(&MAGIC) || crate::perfdata::is_perf_data(&data) {
            let mut rec = if data.starts_with(&MAGIC) {
                Recording::from_bytes(&data, &name)?
            } else {
                // perf's perf.data: read as report reads it (binaries found and named).
                drop(data);
                crate::input::open(path)?
            };
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
            Run::from_folded_with(&String::from_utf8_lossy(&data), name.clone(), unit)?
        };
        if run.samples == 0 {
            return Err(InputError::Empty { path: name });
        }
        Ok(run)
    }

    /// One run from a profile model, folded by the folding `profile report --folded`
    /// uses.
    ///
    /// In an off-CPU recording (wall time) an off-CPU stack counts as the number of
    /// sample periods its time spans (at least one), so that counts, the basis of the
    /// tests, stay proportional to time: a function that waits twice as long on a
    /// lock holds twice the samples. Treating measured off-CPU time as if it were
    /// sampled makes its tests conservative, never overconfident.
    pub fn from_profile(profile: &Profile, source: String) -> Run {
        let folded = fold_ids(profile, FoldedOptions::default());
        let period = profile.meta.sample_period_ns.max(1);
        let wall = profile.is_wall_time();
        let mut samples = 0;
        // A thread's `[unsampled]` remainder is no function that ran: it stays in the
        // whole run's CPU time but is neither a row nor part of the shares (how much
        // of a thread's time its samples leave over depends on how the recorder
        // opened its events, not on the program; perf's files have none).
        let unsampled = |stack: &[LabelId]| {
            matches!(stack, [l] if {
                let l = &folded.labels[*l as usize];
                l.class == FrameClass::Marker
                    && l.text == crate::format::Truncation::Unsampled.label()
            })
        };
        let stacks = folded
            .stacks
            .iter()
            .filter(|(stack, _)| !unsampled(stack))
            .map(|(stack, c)| {
                let off_cpu = stack.last().is_some_and(|&l| {
                    matches!(folded.labels[l as usize].class, FrameClass::OffCpu(_))
                });
                let n = if wall && off_cpu {
                    ((c.weight + period / 2) / period).max(1)
                } else {
                    c.samples
                };
                samples += n;
                let w = StackWeight {
                    samples: n,
                    cpu_ns: c.weight,
                };
                (stack.clone(), w)
            })
            .collect();
        Run {
            samples,
            cpu_ns: profile.total_weight(),
            source,
            kind: InputKind::Recording,
            frames: folded.labels,
            stacks,
            hostname: profile.meta.hostname.clone(),
            cpu_model: profile.meta.cpu_model.clone(),
            warning: profile.damage.clone(),
            note: None,
        }
    }

    /// One run from folded text. Blank lines are skipped; anything else that is not
    /// `STACK COUNT` is an error naming the line. A frame's kind is read from its
    /// inferno suffix (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined).
    pub fn from_folded(text: &str, source: String) -> Result<Run, InputError> {
        Run::from_folded_with(text, source, FoldedUnit::Auto)
    }

    /// One run from folded text whose counts are in `unit` (see [`FoldedUnit`]).
    pub fn from_folded_with(
        text: &str,
        source: String,
        unit: FoldedUnit,
    ) -> Result<Run, InputError> {
        let (frames, stacks, mut samples) = parse_folded(text, &source)?;
        let mut stacks: Vec<_> = stacks.into_iter().collect();
        stacks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let period = folded_period(&stacks, unit, &source)?;
        let mut note = None;
        let mut cpu_ns: u64 = 0;
        if let Some(p) = period {
            // Weights in ns: each stack holds its weight over the period in samples
            // (rounded, at least one for a stack that has any weight).
            samples = 0;
            for (_, w) in &mut stacks {
                let ns = w.samples;
                w.samples = (ns.saturating_add(p / 2) / p).max(u64::from(ns > 0));
                w.cpu_ns = ns;
                samples += w.samples;
                cpu_ns = cpu_ns.saturating_add(ns);
            }
            note = Some(format!(
                "{source}: counts read as nanoseconds of CPU ({}), compared as samples of {p} ns each",
                match unit {
                    FoldedUnit::Auto => format!("every count is a multiple of {p}"),
                    _ => "--folded-unit ns".to_owned(),
                }
            ));
        }
        Ok(Run {
            source,
            kind: InputKind::Folded,
            frames: frames.labels,
            stacks,
            samples,
            cpu_ns,
            hostname: String::new(),
            cpu_model: String::new(),
            warning: None,
            note,
        })
    }

    /// A stack as text: its frames joined by `;`, as in a folded line.
    pub fn line(&self, stack: &[LabelId]) -> String {
        let texts: Vec<&str> = stack
            .iter()
            .map(|&f| self.frames[f as usize].text.as_str())
            .collect();
        texts.join(";")
    }
}

/// The kind of a frame of a folded file, by its inferno suffix.
fn class_of(frame: &str) -> FrameClass {
    if frame.ends_with("_[k]") {
        FrameClass::Kernel
    } else if frame.ends_with("_[j]") {
        FrameClass::Jit
    } else if frame.ends_with("_[i]") {
        FrameClass::Inlined
    } else {
        FrameClass::Native
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_are_summed_per_stack() {
        let r = Run::from_folded("a;b 3\n\na;b 2\na;c  1\n", "x".into()).unwrap();
        assert_eq!(r.samples, 6);
        let lines: Vec<(String, u64)> = r
            .stacks
            .iter()
            .map(|(s, w)| (r.line(s), w.samples))
            .collect();
        assert_eq!(lines, [("a;b".to_owned(), 5), ("a;c".to_owned(), 1)]);
        assert_eq!(r.kind, InputKind::Folded);
        assert_eq!(r.frames.len(), 3);
    }

    #[test]
    fn folded_frames_carry_the_kind_of_their_suffix() {
        let r = Run::from_folded("a;sys_[k];jit_[j];inl_[i] 1\n", "x".into()).unwrap();
        let classes: Vec<FrameClass> = r.frames.iter().map(|f| f.class).collect();
        use FrameClass::*;
        assert_eq!(classes, [Native, Kernel, Jit, Inlined]);
    }

    #[test]
    fn a_sample_count_past_u64_is_an_error_not_a_wrap() {
        let text = format!("a 1\na {}\n", u64::MAX);
        let e = Run::from_folded(&text, "f.txt".into()).unwrap_err();
        assert!(e.to_string().starts_with("f.txt:2: expected"), "{e}");
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
