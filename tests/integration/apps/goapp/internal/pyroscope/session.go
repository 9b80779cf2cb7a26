// Package pyroscope profiles the process and uploads like grafana/pyroscope-go (session.go,
// upstream/remote/remote.go): upload periods aligned to multiples of UploadRate; at the end of
// each, a CPU profile (runtime/pprof, stopped and started again), a goroutine snapshot, then
// block, mutex and heap profiles as deltas since the previous upload (godeltaprof's job there);
// each one a multipart POST <url>/ingest (part `profile`, file profile.pprof, gzipped pprof; part
// `sample_type_config` for the delta profiles) with name, from/until in Unix nanoseconds,
// spyName=gospy, sampleRate, units, aggregationType and no `format`. Stop uploads the last CPU
// profile. Mutex and block profiling rates are the application's to set, as with the real SDK.
package pyroscope

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config of a session.
type Config struct {
	AppName    string
	Tags       map[string]string
	URLs       []string // server addresses; every upload goes to each
	UploadRate time.Duration
}

// Upload is what the session sent once (for the app's report).
type Upload struct {
	Type     string `json:"type"`
	FromNs   int64  `json:"fromNs"`
	UntilNs  int64  `json:"untilNs"`
	SentNs   int64  `json:"sentNs"`
	Statuses []int  `json:"statuses"`
	Bytes    int    `json:"bytes"`
}

// sampleType is pyroscope-go's upstream.SampleType, as its JSON goes on the wire.
type sampleType struct {
	Units       string `json:"units,omitempty"`
	Aggregation string `json:"aggregation,omitempty"`
	DisplayName string `json:"display-name,omitempty"`
	Sampled     bool   `json:"sampled,omitempty"`
	Cumulative  bool   `json:"cumulative,omitempty"`
}

var (
	stcHeap = map[string]*sampleType{
		"alloc_objects": {Units: "objects"}, "alloc_space": {Units: "bytes"},
		"inuse_space":   {Units: "bytes", Aggregation: "average"},
		"inuse_objects": {Units: "objects", Aggregation: "average"},
	}
	stcMutex = map[string]*sampleType{
		"contentions": {DisplayName: "mutex_count", Units: "lock_samples"},
		"delay":       {DisplayName: "mutex_duration", Units: "lock_nanoseconds"},
	}
	stcBlock = map[string]*sampleType{
		"contentions": {DisplayName: "block_count", Units: "lock_samples"},
		"delay":       {DisplayName: "block_duration", Units: "lock_nanoseconds"},
	}
	stcGoroutines = map[string]*sampleType{
		"goroutine": {DisplayName: "goroutines", Units: "goroutines", Aggregation: "average"},
	}
)

type job struct {
	kind           string
	name           string
	start, end     time.Time
	sampleRate     int
	units, aggType string
	profile        []byte
	stc            map[string]*sampleType
}

// Session is one profiling session.
type Session struct {
	cfg              Config
	sdkName          string // name= of the SDK's own profiles (cpu, goroutines)
	deltaName        string // name= of the godeltaprof profiles (heap, mutex, block)
	client           *http.Client
	cpuBuf           bytes.Buffer
	startTime        time.Time
	lastGC           uint32
	mutex, block     lockDelta
	heap             heapDelta
	jobs             chan job
	stopCh, loopDone chan struct{}
	workerDone       chan struct{}
	stopOnce         sync.Once
	mu               sync.Mutex
	uploads          []Upload
	dropped          int
}

// appName is Pyroscope's `app{k=v,...}` with sorted keys (labelset.Normalized).
func appName(app string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(app + "{")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	b.WriteString("}")
	return b.String()
}

// Start begins profiling: the CPU profiler runs from now, the first upload comes at the next
// multiple of UploadRate.
func Start(cfg Config) *Session {
	sid := make([]byte, 8)
	rand.Read(sid)
	labels := map[string]string{"__session_id__": hex.EncodeToString(sid),
		"process.runtime.name": "go", "process.runtime.version": runtime.Version()}
	for k, v := range cfg.Tags {
		labels[k] = v
	}
	labels["otel.scope.name"] = "com.grafana.pyroscope/go"
	sdk := appName(cfg.AppName, labels)
	labels["otel.scope.name"] = "com.grafana.pyroscope/godeltaprof"
	s := &Session{cfg: cfg, sdkName: sdk, deltaName: appName(cfg.AppName, labels),
		client: &http.Client{Timeout: 10 * time.Second}, jobs: make(chan job, 20),
		stopCh: make(chan struct{}), loopDone: make(chan struct{}), workerDone: make(chan struct{})}
	s.mutex.mutex = true
	s.startTime = time.Now().Truncate(cfg.UploadRate)
	pprof.StartCPUProfile(&s.cpuBuf)
	go s.worker()
	go s.loop()
	return s
}

// loop is the aligned ticker: a reset at every multiple of UploadRate.
func (s *Session) loop() {
	defer close(s.loopDone)
	for {
		next := time.Now().Truncate(s.cfg.UploadRate).Add(s.cfg.UploadRate)
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
			s.uploadData(s.startTime, next)
			s.startTime = next
		case <-s.stopCh:
			t.Stop()
			return
		}
	}
}

func (s *Session) uploadData(start, end time.Time) {
	pprof.StopCPUProfile()
	cpu := append([]byte(nil), s.cpuBuf.Bytes()...)
	s.cpuBuf.Reset()
	pprof.StartCPUProfile(&s.cpuBuf)
	s.enqueue(job{kind: "cpu", name: s.sdkName, start: start, end: end, sampleRate: 100,
		units: "samples", aggType: "sum", profile: cpu})
	var g bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&g, 0)
	s.enqueue(job{kind: "goroutines", name: s.sdkName, start: start, end: end,
		units: "goroutines", aggType: "average", profile: g.Bytes(), stc: stcGoroutines})
	s.enqueue(job{kind: "block", name: s.deltaName, start: start, end: end,
		profile: s.block.profile(end), stc: stcBlock})
	s.enqueue(job{kind: "mutex", name: s.deltaName, start: start, end: end,
		profile: s.mutex.profile(end), stc: stcMutex})
	// the heap profile is as of the last GC: force one when none ran this period
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.NumGC == s.lastGC {
		runtime.GC()
		runtime.ReadMemStats(&ms)
	}
	if ms.NumGC != s.lastGC {
		s.lastGC = ms.NumGC
		s.enqueue(job{kind: "heap", name: s.deltaName, start: start, end: end, sampleRate: 100,
			profile: s.heap.profile(end), stc: stcHeap})
	}
}

// Stop uploads the last CPU profile (as the SDK's Stop does) and waits for every upload.
func (s *Session) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopCh)
		<-s.loopDone
		pprof.StopCPUProfile()
		s.enqueue(job{kind: "cpu", name: s.sdkName, start: s.startTime, end: time.Now(),
			sampleRate: 100, units: "samples", aggType: "sum",
			profile: append([]byte(nil), s.cpuBuf.Bytes()...)})
		close(s.jobs)
		<-s.workerDone
	})
}

// enqueue hands a job to the uploader; a full queue drops it, as remote.go's Upload does.
func (s *Session) enqueue(j job) {
	select {
	case s.jobs <- j:
	default:
		s.mu.Lock()
		s.dropped++
		s.mu.Unlock()
	}
}

// Dropped is how many profiles the full queue dropped.
func (s *Session) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Uploads returns what was sent so far.
func (s *Session) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload{}, s.uploads...)
}

func (s *Session) worker() {
	defer close(s.workerDone)
	for j := range s.jobs {
		u := Upload{Type: j.kind, FromNs: j.start.UnixNano(), UntilNs: j.end.UnixNano(),
			SentNs: time.Now().UnixNano(), Bytes: len(j.profile)}
		u.Statuses = make([]int, len(s.cfg.URLs))
		var wg sync.WaitGroup
		for i, addr := range s.cfg.URLs { // every server at once, as with the spans
			wg.Add(1)
			go func(i int, addr string) { defer wg.Done(); u.Statuses[i] = s.post(addr, j) }(i, addr)
		}
		wg.Wait()
		s.mu.Lock()
		s.uploads = append(s.uploads, u)
		s.mu.Unlock()
	}
}

// post is remote.go's uploadProfile; returns the HTTP status (0: no answer).
func (s *Session) post(addr string, j job) int {
	u, err := url.Parse(addr)
	if err != nil {
		return 0
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, _ := w.CreateFormFile("profile", "profile.pprof")
	fw.Write(j.profile)
	if j.stc != nil {
		fw, _ = w.CreateFormFile("sample_type_config", "sample_type_config.json")
		b, _ := json.Marshal(j.stc)
		fw.Write(b)
	}
	w.Close()
	q := u.Query()
	q.Set("name", j.name)
	q.Set("from", strconv.FormatInt(j.start.UnixNano(), 10))
	q.Set("until", strconv.FormatInt(j.end.UnixNano(), 10))
	q.Set("spyName", "gospy")
	q.Set("sampleRate", strconv.Itoa(j.sampleRate))
	q.Set("units", j.units)
	q.Set("aggregationType", j.aggType)
	u.Path = path.Join(u.Path, "ingest")
	u.RawQuery = q.Encode()
	req, err := http.NewRequest("POST", u.String(), &body)
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := s.client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
