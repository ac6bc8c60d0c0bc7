// A cgo call that spins in C (tests/it/go_frames.rs): `cgospin SECS` calls the C
// function spin (which calls spin_c) from main.callC until SECS seconds passed.
package main

/*
#include <stdint.h>
static uint64_t spin_c(uint64_t n) {
	uint64_t h = 1;
	for (uint64_t i = 0; i < n; i++) h = h * 31 + i;
	return h;
}
uint64_t spin(uint64_t n) { return spin_c(n) + 1; }
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func callC(deadline time.Time) uint64 {
	var h uint64
	for time.Now().Before(deadline) {
		h += uint64(C.spin(C.uint64_t(20000000)))
	}
	return h
}

func main() {
	secs, _ := strconv.ParseFloat(os.Args[1], 64)
	fmt.Println(callC(time.Now().Add(time.Duration(secs * float64(time.Second)))))
}
