// A net/http server for benches/go/vs_pprof.sh: /work hashes the request's query
// with SHA-256 a few hundred times and answers in JSON; /sort sorts a slice of
// random strings. It serves on 127.0.0.1:PORT (first argument, 8089) for SECS
// seconds (second argument, 8), writing Go's own CPU profile (runtime/pprof) to
// the file named by HTTPSERVER_CPUPROFILE, when set, then exits.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"time"
)

func work(w http.ResponseWriter, r *http.Request) {
	sum := sha256.Sum256([]byte(r.URL.RawQuery))
	for i := 0; i < 300; i++ {
		sum = sha256.Sum256(sum[:])
	}
	json.NewEncoder(w).Encode(map[string]string{"sum": hex.EncodeToString(sum[:])})
}

func sortStrings(w http.ResponseWriter, r *http.Request) {
	words := make([]string, 2000)
	for i := range words {
		words[i] = strconv.FormatInt(rand.Int63(), 36)
	}
	sort.Strings(words)
	json.NewEncoder(w).Encode(words[:10])
}

func main() {
	port, secs := "8089", 8.0
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	if len(os.Args) > 2 {
		if s, err := strconv.ParseFloat(os.Args[2], 64); err == nil {
			secs = s
		}
	}
	if path := os.Getenv("HTTPSERVER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		defer pprof.StopCPUProfile()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/work", work)
	mux.HandleFunc("/sort", sortStrings)
	srv := &http.Server{Addr: "127.0.0.1:" + port, Handler: mux}
	go srv.ListenAndServe()
	time.Sleep(time.Duration(secs * float64(time.Second)))
	srv.Shutdown(context.Background())
}
