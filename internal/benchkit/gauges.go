package benchkit

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gaugeSampler scrapes the bridge's /metrics a few times a second for its
// in-flight and held gauges: their averages over the drain tell whether
// the max-in-flight slots were busy, and so where the time goes. A scrape
// costs the bridge well under a millisecond.
type gaugeSampler struct {
	url      string
	active   func() bool // sample only while this holds (replies flowing)
	mu       sync.Mutex
	n        int
	inFlight float64
	held     float64
}

// freeAddr finds a free loopback port for the bridge's metrics listener.
// Another process could take it before the bridge does; the bench then
// only loses the gauges (the bridge reports the listen error and the run
// fails visibly).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (g *gaugeSampler) run(ctx context.Context) {
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !g.active() {
			continue
		}
		inFlight, held, ok := scrape(ctx, hc, g.url)
		if !ok {
			continue
		}
		g.mu.Lock()
		g.n++
		g.inFlight += inFlight
		g.held += held
		g.mu.Unlock()
	}
}

// averages returns the mean in-flight and held records over the samples.
func (g *gaugeSampler) averages() (inFlight, held float64, samples int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		return 0, 0, 0
	}
	return g.inFlight / float64(g.n), g.held / float64(g.n), g.n
}

func scrape(ctx context.Context, hc *http.Client, url string) (inFlight, held float64, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	var seen int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, found := strings.Cut(sc.Text(), " ")
		if !found {
			continue
		}
		var dst *float64
		switch {
		case strings.HasSuffix(name, "_in_flight_records"):
			dst = &inFlight
		case strings.HasSuffix(name, "_held_records"):
			dst = &held
		default:
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			*dst = v
			seen++
		}
	}
	return inFlight, held, seen == 2
}

// ready reports whether url (a bridge's /readyz) answers 200 within a
// second.
func ready(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
