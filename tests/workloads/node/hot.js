// Counts primes for the given seconds in one hot function, which V8 compiles to machine code:
// run with `node --perf-basic-prof`, tests/e2e/test_names.py checks that its samples are
// named hotPrimeCount from V8's perf map.
function hotPrimeCount(n) {
  let count = 0;
  for (let i = 2; i < n; i++) {
    let prime = true;
    for (let j = 2; j * j <= i; j++) {
      if (i % j === 0) {
        prime = false;
        break;
      }
    }
    if (prime) count++;
  }
  return count;
}

const end = Date.now() + 1000 * parseFloat(process.argv[2] || "5");
let total = 0;
while (Date.now() < end) total += hotPrimeCount(20000);
console.log(total);
