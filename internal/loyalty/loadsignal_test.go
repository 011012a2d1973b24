package loyalty

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
)

func TestLoadSignal(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		res  attemptResult
		want callimit.Signal
	}{
		{"200", live, attemptResult{status: 200}, callimit.Success},
		{"business 400", live, attemptResult{status: 400}, callimit.Success},
		{"401", live, attemptResult{status: 401}, callimit.Success},
		{"408", live, attemptResult{status: 408}, callimit.PushBack},
		{"429", live, attemptResult{status: 429}, callimit.PushBack},
		{"503", live, attemptResult{status: 503, retryAfter: time.Second}, callimit.PushBack},
		{"500 with Retry-After", live, attemptResult{status: 500, retryAfter: time.Second}, callimit.PushBack},
		{"500", live, attemptResult{status: 500}, callimit.Failure},
		{"302", live, attemptResult{status: 302}, callimit.Failure},
		{"504", live, attemptResult{status: 504}, callimit.Timeout},
		{"attempt timeout", live, attemptResult{err: errAttemptTimeout}, callimit.Timeout},
		{"reset", live, attemptResult{err: errors.New("connection reset")}, callimit.Failure},
		{"caller gave up", gone, attemptResult{err: context.Canceled}, callimit.Ignore},
	} {
		if got := loadSignal(tc.ctx, tc.res); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
