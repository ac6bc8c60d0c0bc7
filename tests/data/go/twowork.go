// Two goroutines of equal work: alphaWork and betaWork each call hashLoop (which
// the compiler keeps out of line), into which mix is inlined. Runs for the seconds
// given as its first argument (6 by default), and on until each goroutine had the
// CPU seconds given as its second (0 by default: a loaded machine's tests get
// enough samples), then prints the CPU time each goroutine had, in nanoseconds
// (`alpha N beta M`; each is locked to its own thread, whose clock it reads), and a
// checksum. With TWOWORK_CPUPROFILE=FILE it also
// writes Go's own CPU profile (runtime/pprof) of the run to FILE, for
// docs/runtimes.md's comparison (`go tool pprof -top FILE`).
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// threadCPU is the calling thread's CPU time (RUSAGE_THREAD).
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// minCPU is the CPU time each goroutine runs for at least (its thread's clock).
var minCPU int64

// short says whether the calling thread ran less than minCPU.
func short() bool { return minCPU > 0 && threadCPU() < minCPU }

// timed runs work locked to a thread of its own; the CPU time it took.
func timed(work func()) int64 {
	runtime.LockOSThread()
	start := threadCPU()
	work()
	return threadCPU() - start
}

//go:noinline
func hashLoop(seed uint64, n int) uint64 {
	h := seed
	for i := 0; i < n; i++ {
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
		h += mix(uint64(i))
	}
	return h
}

// mix is small: inlined into hashLoop.
func mix(x uint64) uint64 { return x*0x9e3779b97f4a7c15 + 1 }

func alphaWork(deadline time.Time, out *uint64) (calls int) {
	for ; time.Now().Before(deadline) || short(); calls++ {
		*out += hashLoop(*out+1, 200000)
	}
	return calls
}

func betaWork(deadline time.Time, out *uint64) (calls int) {
	for ; time.Now().Before(deadline) || short(); calls++ {
		*out += hashLoop(*out+2, 200000)
	}
	return calls
}

func main() {
	secs := 6.0
	if len(os.Args) > 1 {
		if s, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = s
		}
	}
	if len(os.Args) > 2 {
		if s, err := strconv.ParseFloat(os.Args[2], 64); err == nil {
			minCPU = int64(s * float64(time.Second))
		}
	}
	if path := os.Getenv("TWOWORK_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	deadline := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var a, b uint64
	var na, nb int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); na = timed(func() { alphaWork(deadline, &a) }) }()
	go func() { defer wg.Done(); nb = timed(func() { betaWork(deadline, &b) }) }()
	wg.Wait()
	fmt.Printf("alpha %d beta %d sum %d\n", na, nb, a^b)
}
