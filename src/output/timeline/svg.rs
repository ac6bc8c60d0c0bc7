//! The timeline's SVG: a title and the recording's span, a legend of the states the
//! recording can hold, a time axis at round seconds, then one row per thread (its
//! name, its runs as stacked strips with hover titles, its totals at the right end).

use std::fmt::Write as _;

use super::{Row, Run, TimelineOptions, UNITS, where_in};
use crate::output::state_colour;
use crate::profile::filter::TimeRange;
use crate::profile::{Profile, ThreadState};
use crate::text::xml;

/// Room at the left for each row's thread name.
const LABEL_W: f64 = 260.0;
/// Room at the right for each row's totals: three of them, the longest
/// ("runnable 40% · running 19% · sleep 11%") about 250 px in Verdana 11.
const TOTALS_W: f64 = 270.0;
const ROW_H: f64 = 16.0;
const TOP: f64 = 70.0;

/// The whole picture of `rows` over `(origin, end)` in `cols` columns.
pub(super) fn render(
    profile: &Profile,
    opts: &TimelineOptions,
    (origin, end): (u64, u64),
    cols: u32,
    rows: &[Row],
    svg: &mut String,
) {
    let plot_w = f64::from(opts.width.max(10));
    let width = LABEL_W + plot_w + 12.0 + TOTALS_W;
    let height = TOP + ROW_H * rows.len() as f64 + 40.0;
    header(
        profile,
        opts,
        (origin, end),
        rows.len(),
        (width, height),
        svg,
    );
    axis(
        (origin, end),
        plot_w,
        TOP + ROW_H * rows.len() as f64 + 4.0,
        svg,
    );
    let col_w = plot_w / f64::from(cols);
    for (i, r) in rows.iter().enumerate() {
        row(profile, r, TOP + ROW_H * i as f64, (col_w, plot_w), svg);
    }
    svg.push_str("</svg>\n");
}

/// The document's start, the title, the subtitle and the legend.
fn header(
    profile: &Profile,
    opts: &TimelineOptions,
    (origin, end): (u64, u64),
    rows: usize,
    (width, height): (f64, f64),
    svg: &mut String,
) {
    let title = opts
        .title
        .clone()
        .unwrap_or_else(|| crate::output::flamegraph::title(profile));
    let wall = profile.is_wall_time();
    let _ = writeln!(
        svg,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="11">"#
    );
    svg.push_str("<style>");
    for s in ThreadState::ALL {
        let _ = write!(svg, ".s{}{{fill:{}}}", s as u8, hex(state_colour(s)));
    }
    svg.push_str("text.l{dominant-baseline:middle}</style>\n");
    let _ = writeln!(
        svg,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>
<text x="{}" y="20" font-size="15" text-anchor="middle">{}</text>"##,
        width / 2.0,
        xml(&title)
    );
    let window = if opts.time == TimeRange::default() {
        String::new()
    } else {
        format!(
            " ({:.3} s to {:.3} s)",
            origin as f64 / 1e9,
            end as f64 / 1e9
        )
    };
    let sub = format!(
        "{} · {:.2} s{window}{}{}",
        crate::output::plural(rows, "thread", "threads"),
        (end - origin) as f64 / 1e9,
        if wall {
            " · every thread's wall time by state"
        } else {
            " · CPU samples only (record --off-cpu for the states)"
        },
        opts.note
            .as_ref()
            .map(|n| format!(" · {n}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="36" text-anchor="middle" fill="#555555">{}</text>"##,
        width / 2.0,
        xml(&sub)
    );
    // Legend: the states the recording can hold.
    let states: &[ThreadState] = if wall {
        &ThreadState::ALL
    } else {
        &[ThreadState::Running]
    };
    let mut x = LABEL_W;
    let _ = writeln!(svg, r#"<g class="legend">"#);
    for &s in states {
        let _ = writeln!(
            svg,
            r#"<rect class="s{}" x="{x}" y="44" width="12" height="12"/><text x="{}" y="54">{}</text>"#,
            s as u8,
            x + 16.0,
            s.name()
        );
        x += 24.0 + 7.0 * s.name().len() as f64 + 16.0;
    }
    svg.push_str("</g>\n");
}

/// The time axis: about ten ticks at round seconds, with lines down to `axis_y`.
/// Counted, not stepped until past the end: near u64::MAX (times a file can claim) a
/// step would wrap and the loop write ticks for ever.
fn axis((origin, end): (u64, u64), plot_w: f64, axis_y: f64, svg: &mut String) {
    let step = tick_step(end - origin);
    let first = origin.div_ceil(step).checked_mul(step);
    let (first, ticks) = match first {
        Some(first) if first <= end => (first, (end - first) / step + 1),
        _ => (0, 0),
    };
    svg.push_str(r##"<g class="axis" fill="#555555">"##);
    for k in 0..ticks {
        let t = first + k * step;
        let xx = LABEL_W + (t - origin) as f64 / (end - origin) as f64 * plot_w;
        let _ = write!(
            svg,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{axis_y}" stroke="#dddddd"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 14.0,
            fmt_secs(t, step)
        );
    }
    svg.push_str("</g>\n");
}

/// One thread's row at height `y`: its name (with its totals as the hover title),
/// its runs as strips stacked by state, its largest totals at the right end.
fn row(profile: &Profile, r: &Row, y: f64, (col_w, plot_w): (f64, f64), svg: &mut String) {
    let th = profile.thread(r.thread);
    let life: u64 = r.totals.iter().sum();
    let share = |v: u64| v as f64 * 100.0 / life.max(1) as f64;
    let mut summary = String::new();
    for s in ThreadState::ALL {
        let v = r.totals[s as usize];
        if v > 0 {
            let _ = write!(
                summary,
                "\n{}: {} ({:.1}%)",
                s.name(),
                crate::output::top::human_time(v),
                share(v)
            );
        }
    }
    let _ = writeln!(
        svg,
        r#"<g class="row" data-tid="{}"><title>{} (tid {}, pid {}){}</title><text class="l" x="{}" y="{}" text-anchor="end">{} {}</text>"#,
        th.tid,
        xml(&th.name),
        th.tid,
        th.pid,
        xml(&summary),
        LABEL_W - 6.0,
        y + ROW_H / 2.0,
        xml(&th.name),
        th.tid
    );
    for run in &r.runs {
        run_strips(profile, run, y, col_w, svg);
    }
    // The row's three largest totals (the name's hover title has them all); a
    // state under half a percent would read 0%.
    let mut by_size: Vec<ThreadState> = ThreadState::ALL
        .into_iter()
        .filter(|s| share(r.totals[*s as usize]) >= 0.5)
        .collect();
    by_size.sort_by_key(|s| std::cmp::Reverse(r.totals[*s as usize]));
    let totals: Vec<String> = by_size
        .iter()
        .take(3)
        .map(|s| format!("{} {:.0}%", s.name(), share(r.totals[*s as usize])))
        .collect();
    let _ = writeln!(
        svg,
        r##"<text class="l t" x="{}" y="{}" fill="#333333">{}</text>"##,
        LABEL_W + plot_w + 8.0,
        y + ROW_H / 2.0,
        totals.join(" · ")
    );
    svg.push_str("</g>\n");
}

/// One run of a row at height `y`: a strip per state, stacked from the bottom in
/// display order (running lowest), its main state's titled with where it ran.
fn run_strips(profile: &Profile, run: &Run, y: f64, col_w: f64, svg: &mut String) {
    let f = run
        .stack
        .map(|st| where_in(profile, st))
        .unwrap_or_default();
    let x = LABEL_W + f64::from(run.first) * col_w;
    let w = f64::from(run.end - run.first) * col_w;
    let mut bottom = y + ROW_H - 1.0;
    for &(state, units) in &run.mix {
        let h = f64::from(units) * (ROW_H - 2.0) / f64::from(UNITS);
        let main = state == run.state;
        let _ = writeln!(
            svg,
            r#"<rect class="s{}" x="{x:.2}" y="{:.2}" width="{w:.2}" height="{h:.2}"><title>{}: {}{}{}{}</title></rect>"#,
            state as u8,
            bottom - h,
            state.name(),
            crate::output::top::human_time(run.times[state as usize]),
            if run.mix.len() > 1 {
                format!(" ({:.0}%)", f64::from(units) * 100.0 / f64::from(UNITS))
            } else {
                String::new()
            },
            if main && !f.is_empty() { " in " } else { "" },
            if main {
                xml(&f).into_owned()
            } else {
                String::new()
            }
        );
        bottom -= h;
    }
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// A tick spacing giving about ten ticks: 1, 2 or 5 times a power of ten ns.
fn tick_step(end: u64) -> u64 {
    let target = (end / 10).max(1);
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if p * m >= target {
                return p * m;
            }
        }
        p *= 10;
    }
}

fn fmt_secs(t: u64, step: u64) -> String {
    let digits = if step >= 1_000_000_000 {
        0
    } else if step >= 100_000_000 {
        1
    } else if step >= 10_000_000 {
        2
    } else {
        3
    };
    format!("{:.*} s", digits, t as f64 / 1e9)
}
