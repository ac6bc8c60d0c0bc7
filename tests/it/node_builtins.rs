//! Issue 47: the JavaScript caller of a frameless builtin. `mega` reads a property of
//! 64 objects of different shapes, so each read goes through V8's megamorphic inline
//! cache (`Builtins_LoadIC_Megamorphic`), a builtin that sets up no frame: the native
//! unwind steps from it straight to `mega`'s caller. Recorded without flags, the
//! builtin's samples sit under `mega`, and `mega`'s and `plain`'s shares of the
//! driver's samples are within 5 points of what the program's own CPU clock says
//! each took (before, `mega` read 6% where it spent over 20%).

use std::path::Path;

use crate::common::*;

/// Writes the program into `dir`: `driver` alternates `mega` and `plain` until the
/// process used ARGV[2] ms of CPU, timing each call with its own CPU clock, writes
/// the microseconds each took (and the driver's total) as JSON to ARGV[4], then idles
/// ARGV[3] ms.
fn program(dir: &Path) -> std::path::PathBuf {
    let loads: String = (0..40)
        .map(|k| format!("      s += objs[(i + {k}) & 63].x;\n"))
        .collect();
    let js = format!(
        "'use strict';\n\
         function make(k) {{ const o = {{}}; o['p' + k] = k; o.x = k; return o; }}\n\
         const objs = [];\n\
         for (let k = 0; k < 64; k++) objs.push(make(k));\n\
         function mega(n) {{\n  let s = 0;\n  for (let i = 0; i < n; i++) {{\n{loads}  }}\n  return s;\n}}\n\
         function plain(n) {{\n  let s = 0;\n  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;\n  return s;\n}}\n\
         const spent = {{ mega: 0, plain: 0, total: 0 }};\n\
         function timed(name, f, n) {{\n  const t = process.cpuUsage();\n  const r = f(n);\n\
         \x20 const u = process.cpuUsage(t);\n  spent[name] += u.user + u.system;\n  return r;\n}}\n\
         function driver(cpuMs) {{\n  const start = process.cpuUsage();\n  let t = 0;\n  for (;;) {{\n\
         \x20   t += timed('mega', mega, 500);\n    t += timed('plain', plain, 60000);\n\
         \x20   const u = process.cpuUsage(start);\n    spent.total = u.user + u.system;\n\
         \x20   if (spent.total / 1000 >= cpuMs) return t;\n  }}\n}}\n\
         driver(Number(process.argv[2]));\n\
         require('fs').writeFileSync(process.argv[4], JSON.stringify(spent));\n\
         setTimeout(() => {{}}, Number(process.argv[3]));\n"
    );
    let path = dir.join("mega.js");
    std::fs::write(&path, js).unwrap();
    path
}

#[test]
fn a_frameless_builtins_javascript_caller_is_in_the_stack() {
    let Some(node) = crate::node::node() else {
        return;
    };
    let dir = scratch();
    let js = program(dir.path());
    let out = dir.path().join("mega.prof");
    let clock = dir.path().join("spent.json");
    let o = run_profile(&[
        "record",
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        node.to_str().unwrap(),
        js.to_str().unwrap(),
        "3000",
        "500",
        clock.to_str().unwrap(),
    ]);
    ok(&o);
    let spent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&clock).unwrap()).unwrap();
    let us = |k: &str| spent[k].as_f64().unwrap();
    let (mut driver, mut mega, mut plain, mut in_ic, mut ic_under_mega) = (0, 0, 0, 0, 0);
    let mut shown = Vec::new();
    for (frames, count) in stacks(&out) {
        if !frames.iter().any(|f| f == "driver_[j]") {
            continue;
        }
        driver += count;
        let has = |name: &str| frames.iter().any(|f| f == name);
        mega += if has("mega_[j]") { count } else { 0 };
        plain += if has("plain_[j]") { count } else { 0 };
        let user = user_part(&frames);
        if user.last().is_some_and(|f| f.contains("IC_Megamorphic")) {
            in_ic += count;
            if user.len() >= 2 && user[user.len() - 2] == "mega_[j]" {
                ic_under_mega += count;
            } else if shown.len() < 5 {
                shown.push(user[user.len().saturating_sub(4)..].join(";"));
            }
        }
    }
    assert!(driver >= 500, "only {driver} samples in driver");
    assert!(in_ic >= 50, "only {in_ic} samples in the inline cache");
    assert!(
        ic_under_mega as f64 >= 0.9 * in_ic as f64,
        "{ic_under_mega} of {in_ic} samples in the inline cache under mega: {shown:?}"
    );
    let total = us("total");
    for (name, samples, clock) in [("mega", mega, us("mega")), ("plain", plain, us("plain"))] {
        let profiled = samples as f64 * 100.0 / driver as f64;
        let own = clock * 100.0 / total;
        assert!(
            (profiled - own).abs() <= 5.0,
            "{name}: {profiled:.1}% of driver's samples, {own:.1}% of its CPU by its own clock"
        );
    }
}
