package service

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// metricsObserver turns pipeline events into the service's metrics and
// readiness. Outcome counts come from the bridge, which knows them.
type metricsObserver struct {
	pipeline.NopObserver
	m      *telemetry.Metrics
	joined *atomic.Bool
	// covered is closed once partitions of every one of inputs have been
	// assigned (see Service.Covered).
	inputs  []string
	covered chan struct{}

	mu    sync.Mutex
	owned map[string]map[int32]bool // partitions this member owns
}

// owns reports whether this member currently owns the partition: only its
// owner reports a partition's lag, so that summing over replicas counts
// each partition once.
func (o *metricsObserver) owns(topic string, partition int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owned[topic][partition]
}

func (o *metricsObserver) RecordStarted(topic string, _ int32, _ bool) {
	o.m.RecordsConsumed.WithLabelValues(topic).Inc()
}

func (o *metricsObserver) InFlight(inFlight, buffered int) {
	o.m.InFlight.Set(float64(inFlight))
	o.m.Held.Set(float64(buffered - inFlight))
}

func (o *metricsObserver) CommitPoint(topic string, partition int32, next int64) {
	if o.owns(topic, partition) { // a revoked partition's last commits belong to no gauge
		o.m.CommittedOffset.WithLabelValues(topic, strconv.Itoa(int(partition))).Set(float64(next))
	}
}

func (o *metricsObserver) Assigned(topic string, partitions []int32, assigned, _ bool) {
	o.joined.Store(true)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owned == nil {
		o.owned = map[string]map[int32]bool{}
	}
	if o.owned[topic] == nil {
		o.owned[topic] = map[int32]bool{}
	}
	defer o.checkCovered()
	for _, p := range partitions {
		if assigned {
			o.owned[topic][p] = true
			continue
		}
		delete(o.owned[topic], p)
		o.m.ForgetPartition(topic, p)
	}
}

// ledgerObserver lets the ledger forget the partitions the member no
// longer owns (revoked or lost), once they are released: after the drain,
// whose records still read them. Forgotten at the revocation's start, as
// it was, a draining record read its partition's ledger again from the
// start, and the tail followed it until the next revocation.
type ledgerObserver struct {
	pipeline.NopObserver
	l *ledger.Ledger
}

func (o ledgerObserver) Released(topic string, partitions []int32) {
	for _, p := range partitions {
		o.l.Forget(topic, p)
	}
}

// observers fans pipeline events out.
type observers []pipeline.Observer

func (os observers) RecordStarted(t string, p int32, fresh bool) {
	for _, o := range os {
		o.RecordStarted(t, p, fresh)
	}
}

func (os observers) RecordDone(t string, p int32, out pipeline.Outcome, d time.Duration) {
	for _, o := range os {
		o.RecordDone(t, p, out, d)
	}
}

func (os observers) InFlight(inFlight, buffered int) {
	for _, o := range os {
		o.InFlight(inFlight, buffered)
	}
}

func (os observers) CommitPoint(t string, p int32, next int64) {
	for _, o := range os {
		o.CommitPoint(t, p, next)
	}
}

func (os observers) Paused(t string, p int32, paused bool) {
	for _, o := range os {
		o.Paused(t, p, paused)
	}
}

func (os observers) Assigned(t string, ps []int32, assigned, lost bool) {
	for _, o := range os {
		o.Assigned(t, ps, assigned, lost)
	}
}

func (os observers) Released(t string, ps []int32) {
	for _, o := range os {
		o.Released(t, ps)
	}
}

// kafkaLogger writes franz-go's log lines through zap. franz-go logs no
// record contents; SASL secrets are never in its key-values. Its info lines
// (connections, metadata, group joins: about twenty at start-up) are
// written at debug: the pipeline logs what an operator needs of them, and
// they pushed dev's banner and replay's progress off the screen.
type kafkaLogger struct{ l *zap.Logger }

func (k kafkaLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Core().Enabled(zap.DebugLevel):
		return kgo.LogLevelDebug
	case k.l.Core().Enabled(zap.WarnLevel):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (k kafkaLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, _ := keyvals[i].(string)
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}

// checkCovered closes covered once every input topic has an owned
// partition. o.mu is held.
func (o *metricsObserver) checkCovered() {
	if o.covered == nil {
		return
	}
	select {
	case <-o.covered:
		return
	default:
	}
	for _, t := range o.inputs {
		owned := false
		for _, mine := range o.owned[t] {
			owned = owned || mine
		}
		if !owned {
			return
		}
	}
	close(o.covered)
}
