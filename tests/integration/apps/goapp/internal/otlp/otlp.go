// Package otlp is a small tracer that behaves like the OpenTelemetry Go SDK with a
// BatchSpanProcessor and the otlptracehttp exporter: spans get random ids, finished spans are
// queued and sent every Delay as one ExportTraceServiceRequest (protobuf, POST
// application/x-protobuf) to each configured URL. Written by hand because only the standard
// library is available to the test app.
package otlp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"hotspan.test/goapp/internal/pb"
)

// Kind is the OTLP span kind.
type Kind int

// The span kinds the app uses (OTLP enum values).
const (
	Internal Kind = 1
	Server   Kind = 2
	Client   Kind = 3
)

// Attr is a string or int attribute.
type Attr struct {
	Key   string
	Str   string
	Int   int64
	IsInt bool
}

// S makes a string attribute; I an int one.
func S(k, v string) Attr       { return Attr{Key: k, Str: v} }
func I(k string, v int64) Attr { return Attr{Key: k, Int: v, IsInt: true} }

// Span is one span; End queues it for export.
type Span struct {
	TraceID    [16]byte
	SpanID     [8]byte
	Parent     [8]byte
	HasParent  bool
	Name       string
	Kind       Kind
	Start, Fin time.Time
	Attrs      []Attr
	tr         *Tracer
	ended      bool
}

// IDHex is the span id as 16 lowercase hex, as OpenTelemetry prints it.
func (s *Span) IDHex() string { return hex.EncodeToString(s.SpanID[:]) }

// TraceHex is the trace id as 32 lowercase hex.
func (s *Span) TraceHex() string { return hex.EncodeToString(s.TraceID[:]) }

// SetAttr adds an attribute.
func (s *Span) SetAttr(a Attr) { s.Attrs = append(s.Attrs, a) }

// End finishes the span now and queues it.
func (s *Span) End() {
	if s.ended {
		return
	}
	s.ended = true
	s.Fin = time.Now()
	s.tr.enqueue(s)
}

type ctxKey struct{}

// FromContext returns the active span of ctx, or nil.
func FromContext(ctx context.Context) *Span {
	s, _ := ctx.Value(ctxKey{}).(*Span)
	return s
}

// Config says where spans go.
type Config struct {
	URLs     []string
	Resource []Attr
	Scope    string
	Version  string
	Delay    time.Duration // BatchSpanProcessor's scheduled delay
}

// Tracer makes spans and exports them.
type Tracer struct {
	cfg                     Config
	client                  *http.Client
	mu                      sync.Mutex
	queue                   []*Span
	flushCh                 chan chan struct{}
	stopCh                  chan struct{}
	done                    chan struct{}
	ended, exported, failed int
}

// Counts returns the spans ended and sent so far, and the requests not answered 200 (any URL).
func (t *Tracer) Counts() (ended, exported, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended, t.exported, t.failed
}

// New starts a tracer and its export loop.
func New(cfg Config) *Tracer {
	if cfg.Delay <= 0 {
		cfg.Delay = 5 * time.Second
	}
	t := &Tracer{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second},
		flushCh: make(chan chan struct{}), stopCh: make(chan struct{}), done: make(chan struct{})}
	go t.loop()
	return t
}

func randomID(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
}

// Start begins a span under the span in ctx (if any) and returns the context holding it.
func (t *Tracer) Start(ctx context.Context, name string, kind Kind, attrs ...Attr) (context.Context, *Span) {
	s := &Span{Name: name, Kind: kind, Start: time.Now(), Attrs: attrs, tr: t}
	if p := FromContext(ctx); p != nil {
		s.TraceID = p.TraceID
		s.Parent = p.SpanID
		s.HasParent = true
	} else {
		randomID(s.TraceID[:])
	}
	randomID(s.SpanID[:])
	return context.WithValue(ctx, ctxKey{}, s), s
}

func (t *Tracer) enqueue(s *Span) {
	t.mu.Lock()
	t.queue = append(t.queue, s)
	t.ended++
	t.mu.Unlock()
}

func (t *Tracer) loop() {
	defer close(t.done)
	tick := time.NewTicker(t.cfg.Delay)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			t.export()
		case ack := <-t.flushCh:
			t.export()
			close(ack)
		case <-t.stopCh:
			t.export()
			return
		}
	}
}

// Flush exports what is queued now and returns when it was sent.
func (t *Tracer) Flush() {
	ack := make(chan struct{})
	t.flushCh <- ack
	<-ack
}

// Shutdown exports the rest and stops the loop.
func (t *Tracer) Shutdown() {
	close(t.stopCh)
	<-t.done
}

func (t *Tracer) export() {
	t.mu.Lock()
	spans := t.queue
	t.queue = nil
	t.mu.Unlock()
	if len(spans) == 0 {
		return
	}
	body := t.encode(spans)
	// every URL at once: two collectors fed the same traffic see it at the same moment
	failures := make(chan bool, len(t.cfg.URLs))
	for _, u := range t.cfg.URLs {
		go func(u string) { failures <- !t.post(u, body) }(u)
	}
	failed := 0
	for range t.cfg.URLs {
		if <-failures {
			failed++
		}
	}
	t.mu.Lock()
	t.exported += len(spans)
	t.failed += failed
	t.mu.Unlock()
}

// post sends one request; true when it was answered 200.
func (t *Tracer) post(u string, body []byte) bool {
	req, err := http.NewRequest("POST", u, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := t.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func putAttrs(m *pb.Buf, field int, attrs []Attr) {
	for _, a := range attrs {
		a := a
		m.Msg(field, func(kv *pb.Buf) {
			kv.String(1, a.Key)
			kv.Msg(2, func(v *pb.Buf) {
				if a.IsInt {
					v.Int(3, a.Int)
				} else {
					v.Bytes(1, []byte(a.Str))
				}
			})
		})
	}
}

func (t *Tracer) encode(spans []*Span) []byte {
	var req pb.Buf
	req.Msg(1, func(rs *pb.Buf) {
		rs.Msg(1, func(r *pb.Buf) { putAttrs(r, 1, t.cfg.Resource) })
		rs.Msg(2, func(ss *pb.Buf) {
			ss.Msg(1, func(sc *pb.Buf) {
				sc.String(1, t.cfg.Scope)
				sc.String(2, t.cfg.Version)
			})
			for _, s := range spans {
				s := s
				ss.Msg(2, func(m *pb.Buf) {
					m.Bytes(1, s.TraceID[:])
					m.Bytes(2, s.SpanID[:])
					if s.HasParent {
						m.Bytes(4, s.Parent[:])
					}
					m.String(5, s.Name)
					m.Uint(6, uint64(s.Kind))
					m.Fixed64(7, uint64(s.Start.UnixNano()))
					m.Fixed64(8, uint64(s.Fin.UnixNano()))
					putAttrs(m, 9, s.Attrs)
				})
			}
		})
	})
	return req.B
}
