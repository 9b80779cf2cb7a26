// goapp: a Go service for hotspan's correlation-quality suite, instrumented the way
// grafana/otel-profiling-go + grafana/pyroscope-go instrument one, with the standard library
// only (internal/otlp stands in for the OpenTelemetry SDK and its OTLP/HTTP exporter,
// internal/pyroscope for pyroscope-go and godeltaprof).
//
// It serves HTTP on 127.0.0.1 (GET /prefs, /report, /prices; GET /truth) and exports a span per
// request: the root SERVER span carries pyroscope.profile.id and, while it runs, the goroutine's
// pprof labels span_id / span_name / trace_id (otel-profiling-go's default root-span scope, set
// with pprof.Do). For every root span it records the ground truth: the span's CPU time (the
// thread's CPU clock, the goroutine being locked to its thread), the CPU time of each function
// doing the work, the time it waited on a lock and who held it. GET /truth and, on SIGTERM after
// the last upload, stdout print it as one JSON object.
//
// Environment: SERVICE (service.name, default shop-go), OTLP_URLS and PYROSCOPE_URLS
// (comma-separated; every export and upload goes to each), UPLOAD_MS (pyroscope-go's upload
// period, default 15000), BATCH_MS (the span processor's delay, default 200), MUTEX_FRACTION
// and BLOCK_RATE (runtime.SetMutexProfileFraction / SetBlockProfileRate, default 5 and 5 as
// pyroscope-go's README suggests).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"hotspan.test/goapp/internal/otlp"
	"hotspan.test/goapp/internal/pyroscope"
)

// Truth is what the app knows about one root span.
type Truth struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Slow    bool   `json:"slow"` // what the request asked for; its duration decides
	StartNs int64  `json:"startNs"`
	EndNs   int64  `json:"endNs"`
	CPUNs   int64  `json:"cpuNs"`
	// Fns: CPU ns per function, inclusive of its callees ("crypto/sha256": the hashing).
	Fns      map[string]int64 `json:"fns"`
	WaitNs   int64            `json:"waitNs,omitempty"`
	WaitedIn string           `json:"waitedIn,omitempty"`
	Holder   string           `json:"holder,omitempty"`
	Stacks   int              `json:"stacks,omitempty"` // distinct stacks the work runs in
	Children int              `json:"children"`
}

type app struct {
	service string
	tracer  *otlp.Tracer
	session *pyroscope.Session
	repo    *UserRepository
	prices  []*PriceCache
	mu      sync.Mutex
	truths  []Truth
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

func list(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in ns.
func threadCPU() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func qint(r *http.Request, k string, def int) int {
	if n, err := strconv.Atoi(r.URL.Query().Get(k)); err == nil {
		return n
	}
	return def
}

func qms(r *http.Request, k string, def float64) time.Duration {
	if f, err := strconv.ParseFloat(r.URL.Query().Get(k), 64); err == nil {
		return time.Duration(f * float64(time.Millisecond))
	}
	return time.Duration(def * float64(time.Millisecond))
}

// serve runs one request as otel-profiling-go would see it: a root SERVER span marked with
// pyroscope.profile.id at its start, its work under pprof labels of the local root span.
func (a *app) serve(w http.ResponseWriter, r *http.Request, route, kind string,
	work func(ctx context.Context, t *Truth)) {
	runtime.LockOSThread() // the thread's CPU clock is this goroutine's
	defer runtime.UnlockOSThread()
	ctx, span := a.tracer.Start(r.Context(), "GET "+route, otlp.Server,
		otlp.S("http.request.method", "GET"), otlp.S("http.route", route))
	id := span.IDHex()
	span.SetAttr(otlp.S("pyroscope.profile.id", id))
	t := &Truth{TraceID: span.TraceHex(), SpanID: id, Name: span.Name, Kind: kind,
		Slow: r.URL.Query().Get("slow") == "1", Fns: map[string]int64{}}
	c0 := threadCPU()
	pprof.Do(ctx, pprof.Labels("span_id", id, "span_name", span.Name, "trace_id", t.TraceID),
		func(ctx context.Context) { work(ctx, t) })
	t.CPUNs = threadCPU() - c0
	for i := qint(r, "spans", 0); i > 0; i-- { // cheap children: cache lookups
		_, c := a.tracer.Start(ctx, "cache.get", otlp.Internal, otlp.S("cache.key", kind))
		c.End()
		t.Children++
	}
	span.End()
	t.StartNs, t.EndNs = span.Start.UnixNano(), span.Fin.UnixNano()
	a.mu.Lock()
	a.truths = append(a.truths, *t)
	a.mu.Unlock()
	fmt.Fprintf(w, "%s %d ms\n", id, (t.EndNs-t.StartNs)/1e6)
}

func (a *app) handlePrefs(w http.ResponseWriter, r *http.Request) {
	users, per := qint(r, "users", 3), qms(r, "per", 1)
	a.serve(w, r, "/prefs", "prefs", func(ctx context.Context, t *Truth) {
		a.repo.FindByEmail(ctx, a.tracer, users, per, t)
	})
}

func (a *app) handleReport(w http.ResponseWriter, r *http.Request) {
	rows, depths, per := qint(r, "rows", 2), qint(r, "depths", 36), qms(r, "per", 1)
	if depths < 1 {
		depths = 1
	}
	a.serve(w, r, "/report", "report", func(ctx context.Context, t *Truth) {
		var st reportStats
		buildReport(rows, depths, per, &st)
		t.Fns["main.buildReport"] = st.total
		t.Fns["main.renderSection"] = st.total
		t.Fns["main.scoreRow"] = st.score
		t.Fns["main.formatRow"] = st.format
		t.Stacks = 2 * rows
		if rows > depths {
			t.Stacks = 2 * depths
		}
	})
}

func (a *app) handlePrices(w http.ResponseWriter, r *http.Request) {
	hold, shard := qms(r, "hold", 0), qint(r, "shard", 0)
	c := a.prices[shard%len(a.prices)]
	a.serve(w, r, "/prices", "prices", func(ctx context.Context, t *Truth) {
		v, waited := c.lookup("EUR", hold)
		if hold > 0 {
			t.WaitNs = waited.Nanoseconds()
			t.WaitedIn, t.Holder = "main.(*PriceCache).Get", "main.(*PriceCache).rebuild"
		}
		c0 := threadCPU()
		formatPrice(v, 1*time.Millisecond)
		t.Fns["main.formatPrice"] = threadCPU() - c0
	})
}

// report is the ground truth so far.
type report struct {
	Service  string             `json:"service"`
	Spans    []Truth            `json:"spans"`
	Uploads  []pyroscope.Upload `json:"uploads"`
	Ended    int                `json:"ended"`
	Exported int                `json:"exported"`
	Failed   int                `json:"failedExports"`
	Dropped  int                `json:"droppedUploads"`
}

func (a *app) report() report {
	a.mu.Lock()
	spans := append([]Truth{}, a.truths...)
	a.mu.Unlock()
	ended, exp, failed := a.tracer.Counts()
	return report{Service: a.service, Spans: spans, Uploads: a.session.Uploads(),
		Ended: ended, Exported: exp, Failed: failed, Dropped: a.session.Dropped()}
}

func main() {
	runtime.SetMutexProfileFraction(envInt("MUTEX_FRACTION", 5))
	runtime.SetBlockProfileRate(envInt("BLOCK_RATE", 5))
	a := &app{service: env("SERVICE", "shop-go"), repo: newUserRepository()}
	for i := 0; i < 8; i++ {
		a.prices = append(a.prices, newPriceCache())
	}
	a.tracer = otlp.New(otlp.Config{URLs: list(os.Getenv("OTLP_URLS")),
		Resource: []otlp.Attr{otlp.S("service.name", a.service), otlp.S("service.version", "1.4.2"),
			otlp.S("telemetry.sdk.language", "go"), otlp.S("process.runtime.name", "go")},
		Scope: "hotspan.test/goapp", Version: "1.0.0",
		Delay: time.Duration(envInt("BATCH_MS", 200)) * time.Millisecond})
	a.session = pyroscope.Start(pyroscope.Config{AppName: a.service,
		URLs:       list(os.Getenv("PYROSCOPE_URLS")),
		UploadRate: time.Duration(envInt("UPLOAD_MS", 15000)) * time.Millisecond})

	mux := http.NewServeMux()
	mux.HandleFunc("/prefs", a.handlePrefs)
	mux.HandleFunc("/report", a.handleReport)
	mux.HandleFunc("/prices", a.handlePrices)
	mux.HandleFunc("/truth", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.report())
	})
	ln, err := net.Listen("tcp", env("ADDR", "127.0.0.1:0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Printf("{\"listening\":%q}\n", ln.Addr().String())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	srv.Shutdown(ctx)
	cancel()
	a.session.Stop()
	a.tracer.Shutdown()
	out, _ := json.Marshal(a.report())
	fmt.Printf("%s\n", out)
}
