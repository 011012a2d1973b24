package lease

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// minProbeGap spaces the probes writes ask for while Kafka is unreachable.
const minProbeGap = 100 * time.Millisecond

// Probe sends heartbeats of its own for group until ctx ends, every
// heartbeat interval of cl and at once (at most every minProbeGap) when a
// write asks (Want), and turns their answers into Renewed and Revoked.
// SetTimeouts must have been called: a heartbeat waits at most the
// session timeout for its answer.
func (l *Lease) Probe(ctx context.Context, cl *kgo.Client, group string, log *zap.Logger) {
	interval, _ := cl.OptValue(kgo.HeartbeatInterval).(time.Duration)
	if interval <= 0 {
		interval = 3 * time.Second // franz-go's default, should the option not say
	}
	instance, _ := cl.OptValue(kgo.InstanceID).(string)
	l.mu.Lock()
	session := l.session
	l.mu.Unlock()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-tick.C:
		case <-l.probeNow:
			if wait := time.Until(last.Add(minProbeGap)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
		case <-ctx.Done():
			return
		}
		last = time.Now()
		member, generation := cl.GroupMetadata()
		if member == "" || generation < 0 {
			continue // not in the group yet: nothing to prove
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = group, member, generation
		if instance != "" {
			req.InstanceID = &instance
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, session)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			continue
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); err {
		case nil, kerr.RebalanceInProgress: // counted in: the session restarted
			l.Renewed(sent, member, generation, err != nil)
		case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.FencedInstanceID:
			// Out of the group, or of its generation: no write until a
			// heartbeat of the next generation is answered, rather than
			// until the last proof runs out. franz-go learns it too and
			// calls OnPartitionsLost, but only once its own revoke (a
			// drain) is over.
			l.Revoked()
		default:
			if ce := log.Check(zap.DebugLevel, "membership probe refused"); ce != nil {
				ce.Write(zap.Error(err))
			}
		}
	}
}

// Hook returns the client hook that calls Joined when the client reads a
// JoinGroup answer (kgo.HookBrokerE2E). franz-go calls it before the group
// logic sees the answer, and sends the SyncGroup only after that, so the
// time is a strict lower bound of when the coordinator received the
// SyncGroup (a time worked back from the SyncGroup's own durations is not:
// a pause between the read and the hook shifts it later). franz-go joins
// and syncs one at a time, so the last JoinGroup read before an assignment
// (OnPartitionsAssigned) is the one of its generation; a JoinGroup
// answered with an error is followed by another before any sync.
func (l *Lease) Hook() kgo.Hook { return joinHook{l} }

type joinHook struct{ l *Lease }

func (h joinHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != int16(kmsg.JoinGroup) || e.Err() != nil {
		return
	}
	h.l.Joined()
}
