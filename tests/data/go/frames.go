// Go's stack switches, by construction (tests/it/go_frames.rs): `frames MODE SECS`
// runs for SECS seconds one of: `stack`, goroutines that grow their stacks from the
// minimum (runtime.morestack onto the thread's own stack, newstack, copystack);
// `system`, large allocations (the heap grown on the system stack, through
// runtime.systemstack); `signal`, a spin while SIGUSR1 arrives at a high rate and
// is handled (os/signal), on top of Go's own preemption signals.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

// growStacks starts goroutines that each grow their stack from the minimum.
func growStacks(deadline time.Time) int {
	sum := 0
	for time.Now().Before(deadline) {
		done := make(chan int)
		for i := 0; i < 8; i++ {
			go func() { done <- deep(2000) }()
		}
		for i := 0; i < 8; i++ {
			sum += <-done
		}
	}
	return sum
}

var sink [][]byte

// allocLarge allocates large objects: the heap is grown on the system stack.
func allocLarge(deadline time.Time) int {
	n := 0
	for time.Now().Before(deadline) {
		b := make([]byte, 1<<20)
		b[0] = 1
		sink = append(sink, b)
		if len(sink) > 64 {
			sink = sink[:0]
		}
		n++
	}
	return n
}

//go:noinline
func spin(deadline time.Time) uint64 {
	h := uint64(1)
	for time.Now().Before(deadline) {
		for i := 0; i < 100000; i++ {
			h = h*31 + uint64(i)
		}
	}
	return h
}

// signalled spins while signals arrive at a high rate and are handled.
func signalled(deadline time.Time) uint64 {
	c := make(chan os.Signal, 1024)
	signal.Notify(c, syscall.SIGUSR1)
	got := 0
	go func() {
		for range c {
			got++
		}
	}()
	go func() {
		for time.Now().Before(deadline) {
			for i := 0; i < 50; i++ {
				syscall.Kill(os.Getpid(), syscall.SIGUSR1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return spin(deadline) + uint64(got)
}

func main() {
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	deadline := time.Now().Add(time.Duration(secs * float64(time.Second)))
	switch os.Args[1] {
	case "stack":
		fmt.Println(growStacks(deadline))
	case "system":
		fmt.Println(allocLarge(deadline))
	case "signal":
		fmt.Println(signalled(deadline))
	}
}
