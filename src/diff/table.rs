//! A comparison as text: an aligned table for a terminal and markdown for a pull
//! request comment. Both state the verdict first, then what was compared and what
//! the gate is, then the rows with the interval behind each verdict.

use std::io::{self, Write};

use super::compare::{Comparison, Metric, Row, Unit, Verdict};
use super::input::Run;
use super::summary::{
    deciding, inconclusive_summary, machine_note, others, pct, round_up, short_compared,
};
use crate::text::terminal_line;

/// Which runs went into each side, for the header.
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    /// BASE's runs.
    pub base: &'a [Run],
    /// NEW's runs.
    pub new: &'a [Run],
}

/// Functions the headline names; the rest are counted.
const HEADLINE_FUNCTIONS: usize = 3;

/// The verdict in one line: `REGRESSION: f2 (self +18.2%, total +18.0%)` or
/// `no regression`.
pub fn headline(c: &Comparison) -> String {
    let mut by_fn: Vec<(&str, Vec<&Row>)> = Vec::new();
    for r in c.regressions() {
        match by_fn.iter_mut().find(|(f, _)| *f == r.function) {
            Some((_, rows)) => rows.push(r),
            None => by_fn.push((&r.function, vec![r])),
        }
    }
    let named = by_fn.len();
    let mut regs: Vec<String> = by_fn
        .into_iter()
        .take(HEADLINE_FUNCTIONS)
        .map(|(f, mut rows)| {
            rows.sort_by_key(|r| r.metric);
            let what: Vec<String> = rows
                .iter()
                .map(|r| format!("{} {}", metric_name(r), pct(r.change)))
                .collect();
            if f == super::compare::WHOLE_RUN {
                format!("the whole run ({})", what.join(", "))
            } else {
                format!("{} ({})", terminal_line(f), what.join(", "))
            }
        })
        .collect();
    if named > HEADLINE_FUNCTIONS {
        regs.push(format!("{} more", named - HEADLINE_FUNCTIONS));
    }
    let inconclusive = c.count(Verdict::Inconclusive);
    match (c.options.threshold, regs.is_empty()) {
        (_, false) => format!("REGRESSION: {}", regs.join("; ")),
        (Some(_), true) if inconclusive > 0 => format!(
            "INCONCLUSIVE: no regression found, but {inconclusive} function{} could have risen by the threshold unseen",
            if inconclusive == 1 { "" } else { "s" }
        ),
        (Some(_), true) => "no regression".to_owned(),
        (None, true) => "no gate (--fail-on-regression not given)".to_owned(),
    }
}

/// The verdicts counted: `1 regression, 2 inconclusive, 14 unchanged (of 20 tested)`.
pub fn tally(c: &Comparison) -> String {
    let mut parts = Vec::new();
    for (v, one, many) in [
        (Verdict::Regression, "regression", "regressions"),
        (Verdict::Inconclusive, "inconclusive", "inconclusive"),
        (Verdict::Slower, "slower", "slower"),
        (Verdict::Faster, "faster", "faster"),
        (Verdict::Unchanged, "unchanged", "unchanged"),
    ] {
        let n = c.count(v);
        if n > 0 || matches!(v, Verdict::Regression | Verdict::Unchanged) {
            parts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    format!("{} (of {} tested rows)", parts.join(", "), c.tests)
}

/// For an inconclusive row: the smallest rise the data could have detected and what
/// would make the threshold detectable.
pub fn remedy(c: &Comparison, r: &Row) -> Option<String> {
    let (t, d) = (c.options.threshold?, r.detectable?);
    if r.verdict != Verdict::Inconclusive {
        return None;
    }
    // Variance must shrink by this factor; sampling variance falls with samples per
    // run, all of it with runs.
    let factor = ((1.0 + d).ln() / (1.0 + t).ln()).powi(2);
    let sampling = r.ratio.sampling_part;
    let more_samples = if sampling * factor > factor - 1.0 {
        // sampling / s + (1 - sampling) <= 1 / factor  =>  s >= sampling / (1/factor - 1 + sampling)
        let s = sampling / (1.0 / factor - (1.0 - sampling));
        Some(s)
    } else {
        None
    };
    let runs = factor.ceil();
    let what = match more_samples {
        Some(s) => format!(
            "about {}x the samples per side (a higher -F, longer runs) or {}x the runs",
            round_up(s),
            round_up(runs)
        ),
        None => format!(
            "about {}x the runs (run-to-run spread dominates: more samples per run alone cannot)",
            round_up(runs)
        ),
    };
    Some(format!(
        "{} ({}): a rise below {} would likely go unseen (the gate is {}); {what}",
        r.function,
        metric_name(r),
        pct(d),
        pct(t),
    ))
}

/// What was compared, in one sentence.
pub fn compared(c: &Comparison, s: Sides) -> String {
    let side = |runs: &[Run]| {
        let names: Vec<_> = runs
            .iter()
            .map(|r| crate::text::terminal_line(&r.source))
            .collect();
        let n = runs.len();
        format!(
            "{n} run{} ({})",
            if n == 1 { "" } else { "s" },
            names.join(", ")
        )
    };
    let what = match c.unit {
        Unit::Share => "each function's share of its run's CPU samples",
        Unit::Ns => "each function's CPU time per run",
        Unit::Samples => {
            "each function's samples per run (folded inputs: same sampling rate assumed)"
        }
    };
    format!(
        "NEW {} vs BASE {}: {what}, self and total (inclusive).",
        side(s.new),
        side(s.base)
    )
}

/// The gate and the method, in two sentences.
pub fn method(c: &Comparison) -> String {
    let o = &c.options;
    let quantity = if c.unit == Unit::Share {
        "share"
    } else {
        "time"
    };
    let gate = match o.threshold {
        Some(t) => format!(
            "Gate: REGRESSION when a function's self or total {quantity} rose by at least {:.1}% of its BASE value (NEW/BASE - 1 >= {:.1}%) and the rise is significant.",
            t * 100.0,
            t * 100.0
        ),
        None => "No gate: significant rises are shown as slower.".to_owned(),
    };
    let kernel = if o.threshold.is_some() && !o.gate_kernel {
        " Kernel functions (_[k]) are shown but do not gate (--gate-kernel)."
    } else {
        ""
    };
    let interrupts = if o.compare_interrupts {
        " Time under an interrupt entry is compared as the functions it passes through (--compare-interrupts)."
    } else {
        " Time under an interrupt entry (a timer, an IPI, a device, and the preemption on return from it) is the machine's: it is in no function's row and no share, and is shown on a line of its own; the whole run's CPU time still holds it."
    };
    format!(
        "{gate}{kernel}{interrupts} The whole run's CPU time gates too when the runs were recorded on one kind of machine (two runs a side or more). Significance: one-sided test of ln(NEW/BASE) on each side's runs pooled, with sampling noise and each row's own run-to-run spread (Student t, Satterthwaite degrees of freedom); the whole run by Welch's t on its runs' exact CPU times. Corrected over {} tests by a weighted Holm procedure for a {:.1}% family-wise false-alarm rate: half of it on the whole run, 35% on the self rows of functions at 5% of CPU or more, 15% on the rest, recycled as rows are found; functions under {:.1}% of CPU on both sides are not tested. Each interval is at the level its row was judged at; its lower end above 0 means a significant rise.{}",
        c.tests,
        o.alpha * 100.0,
        o.min_share * 100.0,
        if o.threshold.is_some() {
            format!(
                " A function not found to rise is inconclusive when a rise of the threshold would have been detected with less than {:.0}% probability.",
                o.power * 100.0
            )
        } else {
            String::new()
        }
    )
}

fn metric_name(r: &Row) -> &'static str {
    if r.whole_run {
        return "CPU time";
    }
    match (r.metric, r.same_total) {
        (Metric::SelfTime, true) => "self=total",
        (Metric::SelfTime, false) => "self",
        (Metric::Total, _) => "total",
    }
}

/// A value in the comparison's unit.
pub fn value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Share => format!("{:.2}%", v * 100.0),
        Unit::Ns if v >= 1e9 => format!("{:.3} s", v / 1e9),
        Unit::Ns if v >= 1e6 => format!("{:.1} ms", v / 1e6),
        Unit::Ns => format!("{:.0} µs", v / 1e3),
        Unit::Samples => format!("{v:.1}"),
    }
}

/// The interval and its confidence: `[+6.0%, +31.8%] @99.2%`, or `-` when untested.
pub fn interval(r: &Row) -> String {
    match (r.interval, r.level) {
        (Some((lo, hi)), Some(a)) => {
            format!("[{}, {}] @{}", pct(lo), pct(hi), confidence(1.0 - 2.0 * a))
        }
        _ => "-".to_owned(),
    }
}

fn confidence(c: f64) -> String {
    let p = c * 100.0;
    if p >= 99.95 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A row's verdict as the table shows it.
pub fn verdict(r: &Row, min_share: f64) -> String {
    match r.verdict {
        Verdict::Small if r.whole_run => "untested (1 run a side)".to_owned(),
        Verdict::Regression => "REGRESSION".to_owned(),
        Verdict::Slower => "slower".to_owned(),
        Verdict::Faster => "faster".to_owned(),
        Verdict::Inconclusive => "inconclusive".to_owned(),
        Verdict::Unchanged => "unchanged".to_owned(),
        Verdict::Small => format!("<{:.1}%, untested", min_share * 100.0),
    }
}

/// A row's value in its unit (the whole run is always CPU time).
fn row_value(c: &Comparison, r: &Row, v: f64) -> String {
    value(if r.whole_run { Unit::Ns } else { c.unit }, v)
}

/// The rows of the full table: every regression, then the largest changes up to `top`.
fn shown(c: &Comparison, top: usize) -> impl Iterator<Item = &Row> {
    let regs = c.regressions().count() + 1;
    c.rows.iter().take(top.max(regs))
}

/// The cells of a row: function, of, BASE, NEW, change, interval, verdict.
fn cells(c: &Comparison, r: &Row) -> [String; 7] {
    [
        // A name from a recording or a folded file: escaped for the terminal.
        crate::text::terminal_symbol(&r.function).into_owned(),
        metric_name(r).to_owned(),
        row_value(c, r, r.base),
        row_value(c, r, r.new),
        pct(r.change),
        interval(r),
        verdict(r, c.options.min_share),
    ]
}

fn aligned(rows: &[[String; 7]], out: &mut dyn Write) -> io::Result<()> {
    let head = [
        "Function", "Of", "BASE", "NEW", "Change", "Interval", "Verdict",
    ];
    let mut width = head.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // The function column goes last on a long name rather than push others off.
    width[0] = width[0].min(48);
    let line = |cells: [&str; 7]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate().skip(1) {
            let pad = width[i].saturating_sub(c.chars().count());
            if (2..=4).contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
            s.push_str("  ");
        }
        s.push_str(cells[0]);
        s.trim_end().to_owned()
    };
    writeln!(out, "{}", line(head))?;
    for r in rows {
        writeln!(
            out,
            "{}",
            line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]])
        )?;
    }
    Ok(())
}

/// Writes the terminal output: by default the verdict, the rows that decide it and
/// one line each for the rest, the machine and the inconclusive rows (under 15
/// lines); `verbose`, the full table, the method and every row's advice.
pub fn write_table(
    c: &Comparison,
    s: Sides,
    top: usize,
    verbose: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "profile diff: {}", headline(c))?;
    if !verbose {
        writeln!(out, "{}", short_compared(c))?;
        if let Some(n) = machine_note(c) {
            writeln!(out, "{n}")?;
        }
        let rows: Vec<[String; 7]> = deciding(c).into_iter().map(|r| cells(c, r)).collect();
        if !rows.is_empty() {
            aligned(&rows, out)?;
        }
        writeln!(out, "{}", others(c, "--verbose"))?;
        if let Some(i) = &c.interrupts {
            writeln!(out, "{}", super::interrupts::line(i))?;
        }
        if let Some(i) = inconclusive_summary(c) {
            writeln!(out, "{i}")?;
        }
        return Ok(());
    }
    writeln!(out, "{}", compared(c, s))?;
    writeln!(out, "{}", method(c))?;
    if let Some(n) = machine_note(c) {
        writeln!(out, "{n}")?;
    }
    writeln!(out)?;
    let rows: Vec<[String; 7]> = shown(c, top).map(|r| cells(c, r)).collect();
    aligned(&rows, out)?;
    if c.rows.len() > rows.len() {
        writeln!(out, "... {} more rows", c.rows.len() - rows.len())?;
    }
    if let Some(i) = &c.interrupts {
        writeln!(out, "{}", super::interrupts::line(i))?;
    }
    writeln!(out)?;
    writeln!(out, "{}", tally(c))?;
    for r in c.inconclusive() {
        if let Some(why) = remedy(c, r) {
            writeln!(out, "inconclusive: {}", terminal_line(&why))?;
        }
    }
    Ok(())
}

fn md_row(c: &Comparison, r: &Row, out: &mut dyn Write) -> io::Result<()> {
    let v = md(&verdict(r, c.options.min_share));
    let v = if r.verdict == Verdict::Regression {
        format!("**{v}**")
    } else {
        v
    };
    writeln!(
        out,
        "| `{}` | {} | {} | {} | {} | {} | {} |",
        crate::text::terminal_symbol(&r.function)
            .replace('`', "'")
            .replace('|', "\\|"),
        metric_name(r),
        row_value(c, r, r.base),
        row_value(c, r, r.new),
        pct(r.change),
        interval(r),
        v
    )
}

const MD_HEAD: &str = "| Function | Of | BASE | NEW | Change | Interval | Verdict |\n|---|---|---:|---:|---:|---|---|";

/// Writes markdown for a pull-request comment, in the shape of the short output: the
/// verdict, the rows that decide it, the counts and the inconclusive line; the full
/// table (up to `top` rows) and the method folded away under `<details>`.
pub fn write_markdown(c: &Comparison, s: Sides, top: usize, out: &mut dyn Write) -> io::Result<()> {
    let mark = if c.regressions().next().is_some() {
        ":x:"
    } else if c.inconclusive().next().is_some() {
        ":warning:"
    } else {
        ":white_check_mark:"
    };
    writeln!(out, "### {mark} profile diff: {}", md(&headline(c)))?;
    writeln!(out)?;
    writeln!(out, "{}", md(&short_compared(c)))?;
    if let Some(n) = machine_note(c) {
        writeln!(out, "\n{}", md(&n))?;
    }
    let rows = deciding(c);
    if !rows.is_empty() {
        writeln!(out, "\n{MD_HEAD}")?;
        for r in rows {
            md_row(c, r, out)?;
        }
    }
    writeln!(out, "\n{}", md(&others(c, "below")))?;
    if let Some(i) = &c.interrupts {
        writeln!(out, "\n{}", md(&super::interrupts::line(i)))?;
    }
    if let Some(i) = inconclusive_summary(c) {
        writeln!(out, "\n{}", md(&i))?;
    }
    writeln!(out, "\n<details><summary>Full table</summary>\n")?;
    writeln!(out, "{}\n", md(&compared(c, s)))?;
    writeln!(out, "{MD_HEAD}")?;
    for r in shown(c, top) {
        md_row(c, r, out)?;
    }
    if c.rows.len() > top {
        writeln!(out, "\n{} more rows not shown.", c.rows.len() - top)?;
    }
    writeln!(out, "\n{}", md(&tally(c)))?;
    writeln!(out, "\n</details>\n")?;
    writeln!(out, "<details><summary>Method</summary>\n")?;
    writeln!(out, "{}", md(&method(c)))?;
    writeln!(out, "\n</details>")?;
    Ok(())
}

/// Escapes what markdown would take for formatting in plain text.
fn md(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '_' | '`' | '|' | '<' | '>' | '[' | ']' | '\\') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}
