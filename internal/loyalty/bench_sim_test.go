// Built only with -tags sim until internal/sim lands (it is being written in
// parallel against the API these tests use); then drop the constraint.

package loyalty_test

import (
	"context"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// BenchmarkClientOverhead is benchOverhead (bench_test.go) against the
// simulator.
func BenchmarkClientOverhead(b *testing.B) {
	e := newSimEnv(b, simConfig{simOpts: sim.Options{AccessTokenTTL: time.Hour}})
	tok, err := e.cache.Token(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	benchOverhead(b, e.srv.URL, e.client, tok.AccessToken)
}
