package main

// The application's own code: what its requests spend their time on.

import (
	"context"
	"crypto/sha256"
	"math"
	"sync"
	"time"

	"hotspan.test/goapp/internal/otlp"
)

// The functions below that burn CPU (d of this thread's CPU time) run the same arithmetic loop
// each in its own frame: a shared helper would be one more frame in every stack. The clock is
// read every 2000 square roots, so reading it costs well under 1%.
var sink float64

// UserRepository loads users and their preferences; each user's preferences are verified by
// hashing them (crypto/sha256), where loadPreferences spends nearly all of its time.
type UserRepository struct {
	buf  []byte
	hash byte
}

type user struct{ id int }

func newUserRepository() *UserRepository {
	r := &UserRepository{buf: make([]byte, 4096)}
	for i := range r.buf {
		r.buf[i] = byte(i * 7)
	}
	return r
}

// FindByEmail loads n users, then each one's preferences (per: CPU per user).
//
//go:noinline
func (r *UserRepository) FindByEmail(ctx context.Context, tr *otlp.Tracer, n int,
	per time.Duration, t *Truth) {
	c0 := threadCPU()
	_, q := tr.Start(ctx, "SELECT users", otlp.Client, otlp.S("db.system", "postgresql"),
		otlp.S("db.statement", "SELECT id, email FROM users WHERE email LIKE ?"))
	users := r.loadUsers(n, per*time.Duration(n)/20)
	q.End()
	c1 := threadCPU()
	var lp int64
	for _, u := range users {
		lp += r.loadPreferences(u, per)
	}
	t.Fns["main.(*UserRepository).loadUsers"] = c1 - c0
	t.Fns["main.(*UserRepository).loadPreferences"] = lp
	t.Fns["crypto/sha256"] = lp // all of loadPreferences but its clock reads
	t.Fns["main.(*UserRepository).FindByEmail"] = threadCPU() - c0
}

//go:noinline
func (r *UserRepository) loadUsers(n int, d time.Duration) []user {
	out := make([]user, n)
	for i := range out {
		out[i].id = 1000 + i
	}
	// decoding the rows
	c0 := threadCPU()
	x := 1.0001
	for threadCPU()-c0 < int64(d) {
		for i := 0; i < 2000; i++ {
			x = math.Sqrt(x*1.0001 + float64(i))
		}
	}
	sink += x
	return out
}

// loadPreferences returns the CPU ns it took.
//
//go:noinline
func (r *UserRepository) loadPreferences(u user, budget time.Duration) int64 {
	c0 := threadCPU()
	for threadCPU()-c0 < int64(budget) {
		for i := 0; i < 16; i++ {
			sum := sha256.Sum256(r.buf)
			r.hash ^= sum[u.id%32]
		}
	}
	return threadCPU() - c0
}

type reportStats struct{ total, score, format int64 }

// buildReport renders rows sections, row i at recursion depth i % depths, so that its samples
// fall into 2 x min(rows, depths) distinct stacks (scoreRow or formatRow under 1..depths
// renderSection frames). per: CPU per row, 60% scoring and 40% formatting.
//
//go:noinline
func buildReport(rows, depths int, per time.Duration, st *reportStats) {
	c0 := threadCPU()
	for i := 0; i < rows; i++ {
		renderSection(i%depths, per, st)
	}
	st.total = threadCPU() - c0
}

//go:noinline
func renderSection(depth int, per time.Duration, st *reportStats) {
	if depth > 0 {
		renderSection(depth-1, per, st)
		return
	}
	c0 := threadCPU()
	scoreRow(per * 6 / 10)
	c1 := threadCPU()
	formatRow(per * 4 / 10)
	st.score += c1 - c0
	st.format += threadCPU() - c1
}

//go:noinline
func scoreRow(d time.Duration) {
	c0 := threadCPU()
	x := 1.0001
	for threadCPU()-c0 < int64(d) {
		for i := 0; i < 2000; i++ {
			x = math.Sqrt(x*1.0001 + float64(i))
		}
	}
	sink += x
}

//go:noinline
func formatRow(d time.Duration) {
	c0 := threadCPU()
	x := 1.0001
	for threadCPU()-c0 < int64(d) {
		for i := 0; i < 2000; i++ {
			x = math.Sqrt(x*1.0001 + float64(i))
		}
	}
	sink += x
}

//go:noinline
func formatPrice(v float64, d time.Duration) {
	c0 := threadCPU()
	x := 1.0001
	for threadCPU()-c0 < int64(d) {
		for i := 0; i < 2000; i++ {
			x = math.Sqrt(x*1.0001 + float64(i))
		}
	}
	sink += x
	sink += v
}

// PriceCache is a price table behind one lock. A miss refreshes it in the background, and the
// refresh holds the lock while it fetches (hold): every reader waits that long.
type PriceCache struct {
	mu     sync.Mutex
	prices map[string]float64
}

func newPriceCache() *PriceCache { return &PriceCache{prices: map[string]float64{"EUR": 1.08}} }

// lookup starts a refresh that holds the lock for hold (when > 0), then reads; returns the
// price and how long the read waited for the lock.
func (c *PriceCache) lookup(key string, hold time.Duration) (float64, time.Duration) {
	if hold > 0 {
		locked := make(chan struct{})
		go c.rebuild(hold, locked)
		<-locked
	}
	t0 := time.Now()
	v := c.Get(key)
	return v, time.Since(t0)
}

//go:noinline
func (c *PriceCache) rebuild(hold time.Duration, locked chan<- struct{}) {
	c.mu.Lock()
	close(locked)
	time.Sleep(hold) // the upstream call, made while holding the lock
	c.prices["EUR"] += 0.0001
	c.mu.Unlock()
}

// Get reads a price under the lock.
//
//go:noinline
func (c *PriceCache) Get(key string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prices[key]
}
