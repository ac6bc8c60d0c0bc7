//! Rust fixture for the symbolizer tests (compiled with rustc -O -g into a tempdir):
//! a generic function with two instances and a closure passed to a generic function.
use std::hint::black_box;

#[inline(never)]
fn work<T: Copy + std::ops::Add<Output = T>>(x: T, n: usize) -> T {
    let mut acc = x;
    for _ in 0..n {
        acc = black_box(acc + x);
    }
    acc
}

#[inline(never)]
fn apply<F: Fn(u64) -> u64>(f: F, n: u64) -> u64 {
    let mut sum = 0;
    for i in 0..n {
        sum += f(black_box(i));
    }
    sum
}

fn main() {
    let k = black_box(3u64);
    let closure = move |a: u64| {
        let mut v = a;
        for _ in 0..black_box(4) {
            v = black_box(v.wrapping_mul(k) ^ (v >> 3));
        }
        v
    };
    let s = apply(closure, 100);
    println!("{} {}", work(s, 10), work(1.5f64, 3));
}
