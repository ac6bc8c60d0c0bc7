//! A small multi-threaded program to profile: three named threads doing different
//! CPU-bound work for about three seconds: the README's first command builds it
//! (`cargo build --release --features demo`) and runs
//! `profile record -- ./target/release/profile-demo`. Standard library only.

use std::collections::HashMap;
use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

#[inline(never)]
fn parse_numbers(text: &str) -> u64 {
    text.split(',')
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .sum()
}

#[inline(never)]
fn count_words(text: &str) -> usize {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in text.split_whitespace() {
        *counts.entry(w).or_default() += 1;
    }
    counts.len()
}

#[inline(never)]
fn sort_records(seed: u64) -> u64 {
    let mut v: Vec<u64> = (0..20_000u64)
        .map(|i| (i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

fn run_for<F: FnMut(u64) + Send + 'static>(
    name: &str,
    secs: f64,
    mut work: F,
) -> thread::JoinHandle<()> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let mut i = 0;
            while Instant::now() < end {
                work(i);
                i += 1;
            }
        })
        .expect("spawn thread")
}

fn main() {
    let numbers: String = (0..2_000).map(|i| format!("{i}, ")).collect();
    let words: String = (0..2_000).map(|i| format!("w{} ", i % 97)).collect();
    let threads = [
        run_for("parser", 3.0, move |_| {
            black_box(parse_numbers(black_box(&numbers)));
        }),
        run_for("counter", 3.0, move |_| {
            black_box(count_words(black_box(&words)));
        }),
        run_for("sorter", 1.5, |i| {
            black_box(sort_records(i));
        }),
    ];
    for t in threads {
        t.join().expect("worker panicked");
    }
}
