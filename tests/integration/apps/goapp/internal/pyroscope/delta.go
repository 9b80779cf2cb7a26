package pyroscope

// Delta profiles, as godeltaprof makes them for grafana/pyroscope-go: Go's mutex, block and heap
// (alloc_*) profiles count from the start of the process and carry no labels; each upload here
// holds what happened since the previous one (the first: since the process started), computed
// from the runtime's records, so that a profile's values belong to its [from, until] window.

import (
	"bufio"
	"bytes"
	"math"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

type countCycles struct{ count, cycles int64 }

// lockDelta is the delta state of the mutex or the block profile.
type lockDelta struct {
	mutex bool
	prev  map[[32]uintptr]countCycles
}

// cyclesPerSecond is what runtime/pprof divides the records' cycles by; it is not exported, so
// it is read from the text form of the mutex profile once.
var cyclesPerSecond = func() float64 {
	var b bytes.Buffer
	if p := pprof.Lookup("mutex"); p != nil {
		p.WriteTo(&b, 1)
	}
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		if v := sc.Text(); strings.HasPrefix(v, "cycles/second=") {
			if f, err := strconv.ParseFloat(v[len("cycles/second="):], 64); err == nil && f > 0 {
				return f
			}
		}
	}
	return 1e9
}()

func lockRecords(mutex bool) []runtime.BlockProfileRecord {
	get := runtime.BlockProfile
	if mutex {
		get = runtime.MutexProfile
	}
	n, _ := get(nil)
	for {
		recs := make([]runtime.BlockProfileRecord, n+50)
		m, ok := get(recs)
		if ok {
			return recs[:m]
		}
		n = m
	}
}

func stackOf(s *[32]uintptr) []uintptr {
	for i, pc := range s {
		if pc == 0 {
			return s[:i]
		}
	}
	return s[:]
}

// profile returns the gzipped delta profile (contentions/count, delay/nanoseconds).
func (d *lockDelta) profile(now time.Time) []byte {
	if d.prev == nil {
		d.prev = map[[32]uintptr]countCycles{}
	}
	scale := int64(1)
	if d.mutex { // runtime/pprof scales sampled mutex events by the sampling fraction
		scale = int64(runtime.SetMutexProfileFraction(-1))
		if scale < 1 {
			scale = 1
		}
	}
	// records whose stacks are deeper than Stack0 holds share a key: summed first, so that a
	// delta is never one record's count minus another's
	cur := map[[32]uintptr]countCycles{}
	var keys [][32]uintptr
	for _, r := range lockRecords(d.mutex) {
		c, seen := cur[r.StackRecord.Stack0]
		if !seen {
			keys = append(keys, r.StackRecord.Stack0)
		}
		cur[r.StackRecord.Stack0] = countCycles{c.count + r.Count, c.cycles + r.Cycles}
	}
	b := newBuilder()
	for i := range keys {
		k := &keys[i]
		c, p := cur[*k], d.prev[*k]
		dc, dy := c.count-p.count, c.cycles-p.cycles
		d.prev[*k] = c
		if dc < 0 || dy < 0 || (dc == 0 && dy == 0) {
			continue
		}
		ns := int64(float64(dy) / cyclesPerSecond * 1e9)
		b.add(stackOf(k), []int64{dc * scale, ns * scale})
	}
	return b.encode([][2]string{{"contentions", "count"}, {"delay", "nanoseconds"}},
		[2]string{"contentions", "count"}, 1, now.UnixNano(), 0)
}

// heapDelta is the delta state of the heap profile: alloc_* since the last upload, inuse_* as
// of the last GC (as runtime/pprof reports them).
type heapDelta struct {
	prev map[[32]uintptr][2]int64 // alloc objects, alloc bytes
}

// scaleHeapSample undoes the sampling of allocations, as runtime/pprof does.
func scaleHeapSample(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 {
		return 0, 0
	}
	if rate <= 1 {
		return count, size
	}
	avg := float64(size) / float64(count)
	scale := 1 / (1 - math.Exp(-avg/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

func (h *heapDelta) profile(now time.Time) []byte {
	if h.prev == nil {
		h.prev = map[[32]uintptr][2]int64{}
	}
	n, _ := runtime.MemProfile(nil, true)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		m, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:m]
			break
		}
		n = m
	}
	rate := int64(runtime.MemProfileRate)
	// records sharing a key (stacks deeper than Stack0) are summed first, as for the locks
	type heapRec struct{ allocObjects, allocBytes, inuseObjects, inuseBytes int64 }
	cur := map[[32]uintptr]heapRec{}
	var keys [][32]uintptr
	for i := range recs {
		r := &recs[i]
		c, seen := cur[r.Stack0]
		if !seen {
			keys = append(keys, r.Stack0)
		}
		cur[r.Stack0] = heapRec{c.allocObjects + r.AllocObjects, c.allocBytes + r.AllocBytes,
			c.inuseObjects + r.InUseObjects(), c.inuseBytes + r.InUseBytes()}
	}
	b := newBuilder()
	for i := range keys {
		k := &keys[i]
		c, p := cur[*k], h.prev[*k]
		h.prev[*k] = [2]int64{c.allocObjects, c.allocBytes}
		ao, ab := scaleHeapSample(c.allocObjects-p[0], c.allocBytes-p[1], rate)
		io, ib := scaleHeapSample(c.inuseObjects, c.inuseBytes, rate)
		if ao < 0 || ab < 0 {
			ao, ab = 0, 0
		}
		if ao == 0 && ab == 0 && io == 0 && ib == 0 {
			continue
		}
		b.add(stackOf(k), []int64{ao, ab, io, ib})
	}
	return b.encode([][2]string{{"alloc_objects", "count"}, {"alloc_space", "bytes"},
		{"inuse_objects", "count"}, {"inuse_space", "bytes"}},
		[2]string{"space", "bytes"}, rate, now.UnixNano(), 0)
}
