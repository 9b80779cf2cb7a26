package pyroscope

// Writes pprof profiles (profile.proto, gzipped) from stacks of program counters, for the
// profiles the runtime hands out only as records: mutex, block and heap deltas (what
// godeltaprof does for grafana/pyroscope-go).

import (
	"bytes"
	"compress/gzip"
	"runtime"

	"hotspan.test/goapp/internal/pb"
)

type frameKey struct {
	fn, file string
	line     int
}

type location struct {
	id   uint64
	fnID uint64
	line int
}

type function struct {
	id         uint64
	name, file int64
}

type sample struct {
	locs   []uint64
	values []int64
}

type builder struct {
	strings []string
	strIdx  map[string]int64
	funcs   map[string]*function
	fnOrder []*function
	locs    map[frameKey]*location
	lcOrder []*location
	samples []sample
}

func newBuilder() *builder {
	b := &builder{strIdx: map[string]int64{}, funcs: map[string]*function{}, locs: map[frameKey]*location{}}
	b.str("")
	return b
}

func (b *builder) str(s string) int64 {
	if i, ok := b.strIdx[s]; ok {
		return i
	}
	i := int64(len(b.strings))
	b.strings = append(b.strings, s)
	b.strIdx[s] = i
	return i
}

// add records one sample of the stack pcs (return addresses, leaf first, as the runtime's
// profile records hold them); inlined calls become frames of their own.
func (b *builder) add(pcs []uintptr, values []int64) {
	var locs []uint64
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" {
			k := frameKey{f.Function, f.File, f.Line}
			l := b.locs[k]
			if l == nil {
				fn := b.funcs[f.Function+"\x00"+f.File]
				if fn == nil {
					fn = &function{id: uint64(len(b.fnOrder) + 1), name: b.str(f.Function), file: b.str(f.File)}
					b.funcs[f.Function+"\x00"+f.File] = fn
					b.fnOrder = append(b.fnOrder, fn)
				}
				l = &location{id: uint64(len(b.lcOrder) + 1), fnID: fn.id, line: f.Line}
				b.locs[k] = l
				b.lcOrder = append(b.lcOrder, l)
			}
			locs = append(locs, l.id)
		}
		if !more {
			break
		}
	}
	if len(locs) > 0 {
		b.samples = append(b.samples, sample{locs, values})
	}
}

// encode returns the gzipped profile.
func (b *builder) encode(types [][2]string, periodType [2]string, period, timeNanos, durNanos int64) []byte {
	var p pb.Buf
	for _, t := range types {
		t := t
		p.Msg(1, func(m *pb.Buf) { m.Int(1, b.str(t[0])); m.Int(2, b.str(t[1])) })
	}
	for _, s := range b.samples {
		s := s
		p.Msg(2, func(m *pb.Buf) {
			m.PackedUint(1, s.locs)
			m.PackedInt(2, s.values)
		})
	}
	for _, l := range b.lcOrder {
		l := l
		p.Msg(4, func(m *pb.Buf) {
			m.Uint(1, l.id)
			m.Msg(4, func(ln *pb.Buf) { ln.Uint(1, l.fnID); ln.Int(2, int64(l.line)) })
		})
	}
	for _, f := range b.fnOrder {
		f := f
		p.Msg(5, func(m *pb.Buf) {
			m.Uint(1, f.id)
			m.Int(2, f.name)
			m.Int(3, f.name)
			m.Int(4, f.file)
		})
	}
	pt := [2]int64{b.str(periodType[0]), b.str(periodType[1])}
	for _, s := range b.strings {
		p.Bytes(6, []byte(s))
	}
	p.Int(9, timeNanos)
	p.Int(10, durNanos)
	p.Msg(11, func(m *pb.Buf) { m.Int(1, pt[0]); m.Int(2, pt[1]) })
	p.Int(12, period)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(p.B)
	zw.Close()
	return out.Bytes()
}
