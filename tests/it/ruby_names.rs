//! Issue 49: Ruby methods named with their class as Ruby 3.4's backtraces name them,
//! read from the owner class in the process: `Greeter#work` and `block in
//! Greeter#work` (through `Array#each`), `Outer::Inner#run` (a nested constant),
//! `Foo.baz` (a method of `Foo`'s singleton class), and a method of an anonymous
//! class by its name alone. A bare label where a class was due fails the test.

use crate::common::*;

const PROGRAM: &str = "class Greeter\n  def work(n)\n    [1, 2].each do |_|\n      i = 0\n\
    \x20     i += 1 while i < n\n    end\n  end\nend\n\
    class Foo\n  def self.baz(n)\n    i = 0\n    i += 1 while i < n\n  end\nend\n\
    module Outer\n  class Inner\n    def run(n) = Foo.baz(n)\n  end\nend\n\
    g = Greeter.new\no = Outer::Inner.new\na = Class.new { def spin(n)\n i = 0\n i += 1 while i < n\n end }.new\n\
    loop do\n  g.work(20_000)\n  o.run(20_000)\n  a.spin(20_000)\n\
    \x20 break if Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :millisecond) >= 2500\nend\n";

#[test]
fn ruby_methods_are_named_with_their_class() {
    let Some(ruby) = super::ruby::ruby() else {
        return;
    };
    let _one = super::ruby::ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let rb = dir.path().join("classes.rb");
    std::fs::write(&rb, PROGRAM).unwrap();
    let out = dir.path().join("classes.prof");
    let o = run_profile(&[
        "record",
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        ruby.to_str().unwrap(),
        rb.to_str().unwrap(),
    ]);
    ok(&o);
    let all = stacks(&out);
    let ruby_of = |s: &[String]| -> Vec<String> {
        (s.iter())
            .filter_map(|x| x.strip_suffix("_[j]").map(str::to_owned))
            .filter(|x| !x.starts_with('['))
            .collect()
    };
    let count = |want: &[&str]| -> u64 {
        (all.iter())
            .filter(|(s, _)| {
                let r = ruby_of(s);
                r.len() >= want.len() && r[r.len() - want.len()..].iter().eq(want.iter())
            })
            .map(|(_, c)| c)
            .sum()
    };
    let shown: Vec<_> = all.iter().take(12).collect();
    let chains: [&[&str]; 3] = [
        &[
            "block in <main>",
            "Greeter#work",
            "Array#each",
            "block in Greeter#work",
        ],
        &["block in <main>", "Outer::Inner#run", "Foo.baz"],
        &["block in <main>", "spin"],
    ];
    for chain in chains {
        let n = count(chain);
        assert!(n >= 50, "{n} samples end in {chain:?}: {shown:?}");
    }
    // No method of a named class by its bare label.
    let bare = ["work", "block in work", "run", "baz", "each", "loop"];
    for (s, _) in &all {
        let r = ruby_of(s);
        assert!(!r.iter().any(|f| bare.contains(&f.as_str())), "{r:?}");
    }
}
