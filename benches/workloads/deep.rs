//! Stack-size sweep workload (b): a Rust release program with deep-ish stacks: a
//! recursive evaluator whose frames hold a 256-byte scratch buffer, at depths from 1
//! to 48, on two threads. Built with `rustc -C opt-level=3 -C debuginfo=2` (no frame
//! pointers). Runs WARMUP seconds, then prints "units_per_sec N" for the next MEASURE
//! seconds (0: until killed).
//!
//! usage: deep WARMUP MEASURE

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static UNITS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn leaf(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..400 {
        x ^= x >> 31;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

#[inline(never)]
fn eval(depth: u32, seed: u64) -> u64 {
    let mut scratch = [0u64; 32];
    scratch[(seed % 32) as usize] = seed;
    let scratch = black_box(scratch);
    if depth == 0 {
        return leaf(scratch.iter().sum());
    }
    eval(depth - 1, seed.wrapping_add(scratch[0])).wrapping_add(1)
}

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: deep WARMUP MEASURE"))
        .collect();
    let (warmup, measure) = (args[0], args[1]);
    let workers: Vec<_> = (0..2u64)
        .map(|id| {
            std::thread::spawn(move || {
                let mut seed = id * 7919;
                while !STOP.load(Ordering::Relaxed) {
                    black_box(eval(1 + (seed % 48) as u32, seed));
                    seed += 1;
                    UNITS.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    if measure <= 0.0 {
        loop {
            std::thread::park();
        }
    }
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let (u0, t0) = (UNITS.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(measure));
    let (u1, t1) = (UNITS.load(Ordering::Relaxed), Instant::now());
    STOP.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker panicked");
    }
    println!("units_per_sec {:.1}", (u1 - u0) as f64 / (t1 - t0).as_secs_f64());
}
