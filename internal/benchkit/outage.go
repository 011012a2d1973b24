package benchkit

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// outage refuses the bridge's credentials for a while mid-run: the
// simulator's client secret and password are rotated (every token
// revoked with them), so token grants answer invalid_client and business
// calls 401, and later rotated back. The bridge should hold its records
// meanwhile (no error events) and resume soon after the restore.
type outage struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu                sync.Mutex
	revoked, restored time.Time
}

// The secrets of the outage: anything but the ones the bridge was given.
const (
	outageClientSecret = "bench-outage-client-secret"
	outagePassword     = "bench-outage-password"
)

// startOutage revokes the credentials once due reports true (polled every
// 20 ms), restores them d later, and logs both to log. It restores them
// early if stopped meanwhile.
func startOutage(ctx context.Context, st *stack, d time.Duration, due func() bool, log io.Writer) *outage {
	ctx, cancel := context.WithCancel(ctx)
	o := &outage{cancel: cancel}
	o.wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for !due() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		st.Sim.RotateCredentials(sim.CredentialRotation{ClientSecret: outageClientSecret, Password: outagePassword, RevokeTokens: true})
		o.mu.Lock()
		o.revoked = time.Now()
		o.mu.Unlock()
		fmt.Fprintf(log, "  credentials revoked for %s\n", d)
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
		st.Sim.RotateCredentials(sim.CredentialRotation{ClientSecret: creds.ClientSecret, Password: creds.Password})
		o.mu.Lock()
		o.restored = time.Now()
		o.mu.Unlock()
		fmt.Fprintf(log, "  credentials restored\n")
	})
	return o
}

// stop ends the outage (restoring the credentials if it is under way)
// and waits for it; safe to call more than once.
func (o *outage) stop() {
	o.cancel()
	o.wg.Wait()
}

// fill sets the outage's figures from the reply timestamps (Unix ns, 0:
// not answered): the outage's length, the records answered while it
// lasted, and the time from the restore to the first reply after it.
// Call it after stop.
func (o *outage) fill(res *Result, done []int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.revoked.IsZero() || o.restored.IsZero() {
		res.Outage = &OutageResult{Note: "the run ended before the outage was over"}
		return
	}
	r := &OutageResult{Sec: o.restored.Sub(o.revoked).Seconds()}
	from, to := o.revoked.UnixNano(), o.restored.UnixNano()
	first := int64(0)
	for _, ts := range done {
		switch {
		case ts == 0:
		case ts >= from && ts < to:
			r.AnsweredDuring++
		case ts >= to && (first == 0 || ts < first):
			first = ts
		}
	}
	if first == 0 {
		r.Note = "nothing was answered after the restore"
	} else {
		r.ResumeSec = float64(first-to) / 1e9
	}
	res.Outage = r
}

// OutageResult is what a credentials outage showed (Scenario.CredentialsOutage).
type OutageResult struct {
	// Sec is how long the credentials were refused.
	Sec float64 `json:"sec"`
	// AnsweredDuring counts replies timestamped while they were refused
	// (records already past their calls when it began).
	AnsweredDuring int `json:"answeredDuring"`
	// ResumeSec is the time from the restore to the first reply after it.
	ResumeSec float64 `json:"resumeSec"`
	// Note says why a figure is missing.
	Note string `json:"note,omitempty"`
}

// TargetResumeSec is issue 16's bound on ResumeSec.
const TargetResumeSec = 5
