// Stack-size sweep workload (d): JavaScript recursion of varying depth (1 to 60
// frames) in node, run with --perf-basic-prof so JIT frames have names. Runs WARMUP
// seconds, then prints "units_per_sec N" for the next MEASURE seconds (0: until killed).
//
// usage: node --perf-basic-prof recurse.js WARMUP MEASURE

function descend(n, acc) {
  if (n === 0) {
    let x = acc;
    for (let i = 0; i < 2000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
    return x;
  }
  return descend(n - 1, acc + n) | 0;
}

const [warmup, measure] = process.argv.slice(2).map(Number);
let units = 0, seed = 0, u0 = null;
let t0 = performance.now() + warmup * 1000;
for (;;) {
  descend(1 + (seed % 60), seed);
  seed++;
  units++;
  if (units % 256 === 0) {
    const now = performance.now();
    if (u0 === null && now >= t0) {
      u0 = units;
      t0 = now;
    } else if (u0 !== null && measure > 0 && now >= t0 + measure * 1000) {
      console.log(`units_per_sec ${((units - u0) * 1000 / (now - t0)).toFixed(1)}`);
      break;
    }
  }
}
