package bridge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// MaxOriginalBytes bounds the original key and value an error event
// carries, leaving room for the rest of the event under Kafka's default
// 1 MB message limit.
const MaxOriginalBytes = 512 << 10

// DefaultMaxOutputBytes is the default of Options.MaxOutputBytes: below
// franz-go's default ProducerBatchMaxBytes (1,000,012) and Kafka's default
// max.message.bytes (1,048,588).
const DefaultMaxOutputBytes = 1_000_000

// Header names of output records.
const (
	HeaderEventType       = "event-type"
	HeaderSourceTopic     = "source-topic"
	HeaderSourcePartition = "source-partition"
	HeaderSourceOffset    = "source-offset"
	HeaderAttempts        = "attempts"
	HeaderReplayed        = "replayed"
	HeaderCorrelationID   = "correlation-id"
	HeaderTraceparent     = "traceparent"
	// HeaderDroppedHeaders names the input headers an output did not copy
	// because they were malformed or too large.
	HeaderDroppedHeaders = "dropped-headers"
)

// Defaults of Options.
const (
	DefaultRecordAttempts = 5
	DefaultRetryBackoff   = 200 * time.Millisecond
)

// Options configures New. Client and Codec are required; every other zero
// value is a documented default.
type Options struct {
	// Client calls the partner API. Required.
	Client *loyalty.Client
	// Codec decodes inputs and encodes outputs. Required; it must be
	// configured with the same Topics.
	Codec *codec.Codec
	// Topics names the input topics; reply topics derive from them. Zero
	// value: the default names.
	Topics codec.Topics
	// Signer signs redemptions (and refund clawbacks) that carry no sign,
	// afresh for every attempt so that a record held through an outage
	// never sends an expired sign. nil: the Client's own signer
	// (loyalty.Options.Signer) signs if it has one; with neither, such a
	// redemption is a VALIDATION error event naming sign.
	Signer *signing.Signer
	// Breaker, when set, gates every attempt: the API calls of one record
	// attempt run between Acquire and its done. The bridge reports only
	// failures that say the API is unwell (loyalty.IsAPIFailure); an answered
	// business error or a refused credential is reported as success, so
	// the breaker's default IsFailure is correct.
	Breaker *circuit.Breaker
	// RecordAttempts is the per-record budget of attempts at transient
	// failures (each after the client's own retries), counted only for
	// attempts the circuit let through while not probing. Default 5.
	RecordAttempts int
	// RetryBackoff is the base of the full-jitter back-off between a
	// record's attempts (doubling, capped at 32×). Default 200ms.
	RetryBackoff time.Duration
	// Enrich adds tierClass, memberStatus and eKycStatus to member results
	// (two profile reads while the circuit is closed; a failure only
	// leaves the fields out).
	Enrich bool
	// IncludeOriginal carries the original key and value in error events,
	// so that they can be replayed after the input topic's retention.
	// Originals may hold personal data (onboarding events, free text), and
	// every reader of the error topics sees them, so the default leaves
	// them out: replay reads an original from its source position.
	IncludeOriginal bool
	// MaxOutputBytes bounds an output record (key, value, headers and
	// framing); default DefaultMaxOutputBytes. Keep it at or below the
	// producer's ProducerBatchMaxBytes and the reply topics'
	// max.message.bytes. An error event over it leaves the original out.
	MaxOutputBytes int
	// Replay guards every accrual and redemption and marks outputs
	// replayed: true.
	Replay bool
	// Metrics, when set, counts outcomes, error events, guard lookups and
	// already-applied records.
	Metrics *telemetry.Metrics
	// Logger; nil means none. Lines carry ids and positions, never values.
	Logger *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Bridge handles records. Safe for concurrent use; build one per process
// (or per replay run) and pass Handle and Fallback to pipeline.New.
type Bridge struct {
	o      Options
	topics codec.Topics
	log    *zap.Logger
	now    func() time.Time
}

// New checks o, reporting every problem together, and returns a Bridge.
func New(o Options) (*Bridge, error) {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("option Client is required"))
	}
	if o.Codec == nil {
		errs = append(errs, errors.New("option Codec is required"))
	}
	if o.RecordAttempts < 0 {
		errs = append(errs, fmt.Errorf("RecordAttempts %d: must not be negative", o.RecordAttempts))
	}
	if o.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("RetryBackoff %s: must not be negative", o.RetryBackoff))
	}
	topics := o.Topics.WithDefaults()
	if o.Codec != nil {
		// Every output must be encodable, or Fallback could not answer.
		for _, in := range topics.Inputs() {
			for _, t := range []string{in, topics.ResultTopic(in), topics.ErrorTopic(in)} {
				if _, ok := o.Codec.SchemaID(t); !ok {
					errs = append(errs, fmt.Errorf("topic %s: %w", t, codec.ErrUnknownTopic))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("bridge: %w", errors.Join(errs...))
	}
	if o.MaxOutputBytes < 0 {
		return nil, fmt.Errorf("bridge: MaxOutputBytes %d: must not be negative", o.MaxOutputBytes)
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.RecordAttempts == 0 {
		o.RecordAttempts = DefaultRecordAttempts
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Bridge{o: o, topics: topics, log: o.Logger, now: o.Now}, nil
}

// Inputs returns the input topics the bridge answers (defaults applied):
// what the pipeline should consume.
func (b *Bridge) Inputs() []string { return b.topics.Inputs() }

// job is one record on its way through Handle.
type job struct {
	rec      *kgo.Record
	ev       events.Event
	start    time.Time
	attempts int  // record attempts made
	guard    bool // look up before the next write
	guarded  bool // a guard lookup was made
	result   *events.LoyaltyResult
}

// recordFailure ends a record with a category the bridge decides, rather
// than the one the client's error type maps to. Never retried.
type recordFailure struct {
	cat    events.Category
	reason string
	err    error
}

func (f *recordFailure) Error() string { return f.err.Error() }
func (f *recordFailure) Unwrap() error { return f.err }

// Handle processes one record (a pipeline.Handler): it returns exactly one
// output record, a result or an error event. It returns an error only when
// ctx ended before the record reached its output (the record is then
// abandoned and redelivered), or when not even an error event can be
// encoded (a configuration bug; the pipeline's Fallback then answers).
func (b *Bridge) Handle(ctx context.Context, rec *kgo.Record, m pipeline.Meta) ([]*kgo.Record, error) {
	if rec == nil {
		return nil, errors.New("bridge: nil record")
	}
	j := &job{rec: rec, start: b.now(), guard: m.Fresh || b.o.Replay}
	ev, err := b.decode(ctx, rec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var de *codec.DecodeError
		if errors.As(err, &de) {
			return b.failure(j, events.CategoryDecode, string(de.Kind), err)
		}
		return b.failure(j, events.CategoryInternal, "", err)
	}
	j.ev = ev
	if err := ev.Validate(); err != nil {
		return b.failure(j, events.CategoryValidation, "", err)
	}
	err = b.process(ctx, j)
	if ctx.Err() != nil {
		// Abandoned (revoked, lost, or shutdown past its drain): the next
		// owner redoes it, guarded by Fresh.
		return nil, ctx.Err()
	}
	if err != nil {
		var rf *recordFailure
		if errors.As(err, &rf) {
			return b.failure(j, rf.cat, rf.reason, rf.err)
		}
		cat := events.Category(loyalty.Category(err))
		if cat == "" {
			cat = events.CategoryInternal
		}
		return b.failure(j, cat, "", err)
	}
	return b.success(j)
}

// decode waits out registry outages: only a *codec.DecodeError (permanent),
// a configuration error (ErrUnknownTopic) or ctx's end comes back.
func (b *Bridge) decode(ctx context.Context, rec *kgo.Record) (events.Event, error) {
	for i := 0; ; i++ {
		ev, err := b.o.Codec.DecodeEvent(ctx, rec.Topic, rec.Value)
		var de *codec.DecodeError
		if err == nil || errors.As(err, &de) || errors.Is(err, codec.ErrUnknownTopic) || ctx.Err() != nil {
			return ev, err
		}
		if i == 0 {
			b.log.Warn("schema registry unavailable; record waits", zap.String("topic", rec.Topic),
				zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Error(err))
		}
		if err := sleep(ctx, b.backoff(i)); err != nil {
			return nil, err
		}
	}
}

func (b *Bridge) process(ctx context.Context, j *job) error {
	switch ev := j.ev.(type) {
	case *events.PurchaseCompleted:
		return b.accrue(ctx, j, ev)
	case *events.RedemptionRequested:
		return b.redeem(ctx, j, ev)
	case *events.PurchaseRefunded:
		return b.refund(ctx, j, ev)
	case *events.MemberOnboardRequested:
		return b.onboard(ctx, j, ev)
	case *events.MemberLinkRequested:
		return b.link(ctx, j, ev.LoyaltyID, ev.PartnerMemberID, false)
	case *events.MemberUnlinkRequested:
		return b.link(ctx, j, ev.LoyaltyID, ev.PartnerMemberID, true)
	}
	return fmt.Errorf("bridge: no handler for %s", j.ev.Type())
}

// retry runs attempt under the record's budget and the circuit. attempt
// returns nil when the record is done (j.result set), or an error:
// transient ones are retried, others end the record.
func (b *Bridge) retry(ctx context.Context, j *job, attempt func(context.Context) error) error {
	for tries := 0; ; tries++ {
		done, probe := func(error) {}, false
		if b.o.Breaker != nil {
			d, err := b.o.Breaker.Acquire(ctx)
			if err != nil {
				return err
			}
			done, probe = d, b.o.Breaker.State() == circuit.HalfOpen
		}
		j.attempts++
		err := attempt(ctx)
		done(healthOf(err))
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if probe {
			// A failed probe says the API is still down, not that this
			// record is unlucky: it does not spend the record's budget,
			// or one record per open period would be exhausted while the
			// circuit holds the rest.
			j.attempts--
		}
		if loyalty.IsAmbiguous(err) {
			j.guard = true
		}
		if j.attempts >= b.o.RecordAttempts {
			return err
		}
		b.log.Debug("attempt failed; retrying", zap.String("transactionId", j.ev.ID()), zap.Int("attempt", j.attempts), zap.Error(err))
		if err := sleep(ctx, b.backoff(tries)); err != nil {
			return err
		}
	}
}

// healthOf is what an attempt's error tells the circuit: only API failures
// count; an answer of any kind (business error, refused credentials) is a
// healthy API.
func healthOf(err error) error {
	if loyalty.IsAPIFailure(err) {
		return err
	}
	return nil
}

// transient: may succeed if tried again.
func transient(err error) bool {
	var rf *recordFailure
	if errors.As(err, &rf) {
		return false
	}
	var me *loyalty.MalformedResponseError
	return loyalty.Category(err) == loyalty.CategoryTransientExhausted || errors.As(err, &me)
}

// backoff is full jitter over RetryBackoff × 2^n, capped at 32×.
func (b *Bridge) backoff(n int) time.Duration {
	ceil := b.o.RetryBackoff << min(max(n, 0), 5)
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// --- outputs ---

func (b *Bridge) success(j *job) ([]*kgo.Record, error) {
	r := j.result
	r.TransactionID = j.ev.ID()
	r.EventType = j.ev.Type()
	r.Attempts = int32(j.attempts)
	r.LatencyMs = b.now().Sub(j.start).Milliseconds()
	r.ProcessedAt = b.now().UTC()
	r.Source = events.Source{Topic: j.rec.Topic, Partition: j.rec.Partition, Offset: j.rec.Offset}
	out := b.topics.ResultTopic(j.rec.Topic)
	v, err := b.o.Codec.EncodeResult(out, r)
	if err != nil {
		// The effect happened; say so on the error topic rather than lose it.
		return b.failure(j, events.CategoryInternal, "", fmt.Errorf("bridge: %s result of %s does not encode: %w", r.Outcome, r.TransactionID, err))
	}
	if m := b.o.Metrics; m != nil {
		m.RecordsCompleted.WithLabelValues(j.rec.Topic, string(r.Outcome)).Inc()
		if r.Outcome == events.OutcomeAlreadyApplied {
			m.AlreadyApplied.WithLabelValues(j.rec.Topic).Inc()
		}
	}
	b.log.Debug("result", zap.String("transactionId", r.TransactionID), zap.String("outcome", string(r.Outcome)),
		zap.Int("attempts", j.attempts))
	carried, drops := carriedHeaders(j.rec.Headers)
	return []*kgo.Record{b.output(j.rec, out, r.TransactionID, string(r.EventType), j.attempts, v, carried, drops)}, nil
}

func (b *Bridge) failure(j *job, cat events.Category, reason string, cause error) ([]*kgo.Record, error) {
	return b.errorEvent(j, cat, reason, cause, false)
}

// errorEvent builds j's error event. Minimal leaves out the original and
// the copied headers: for an answer to a record whose outputs could not be
// produced. Whatever the input, the event fits MaxOutputBytes, or the
// record could never be answered and the pipeline would stop on it.
func (b *Bridge) errorEvent(j *job, cat events.Category, reason string, cause error, minimal bool) ([]*kgo.Record, error) {
	e := &events.LoyaltyError{Category: cat, Retryable: retryable(cat, cause), Attempts: int32(j.attempts),
		Detail: telemetry.ScrubString(cause.Error()), ProcessedAt: b.now().UTC(),
		Source: events.ErrorSource{Topic: j.rec.Topic, Partition: j.rec.Partition, Offset: j.rec.Offset, Timestamp: j.rec.Timestamp}}
	evType := "unknown"
	if j.ev != nil {
		e.TransactionID = j.ev.ID()
		t := j.ev.Type()
		e.EventType = &t
		evType = string(t)
	}
	if n := len(e.TransactionID); n > events.MaxIDLen {
		// An invalid id of any size would be the key of the error event.
		e.Detail += fmt.Sprintf(" (transactionId of %d bytes, over %d: keyed by source position)", n, events.MaxIDLen)
		e.TransactionID = ""
	}
	if e.TransactionID == "" {
		e.TransactionID = events.SourceID(j.rec.Topic, j.rec.Partition, j.rec.Offset)
	}
	if reason != "" {
		e.Reason = &reason
	}
	if s := loyalty.HTTPStatus(cause); s != 0 {
		e.HTTPStatus = ptr(int32(s))
	}
	var be *loyalty.BusinessError
	if errors.As(cause, &be) {
		scrub := piiScrubber(j.ev)
		e.APIStatusCode = ptr(int32(be.StatusCode))
		e.APIMessage = optional(scrub(be.StatusMessage))
		e.APIErrorCode = optional(be.Code)
		e.APIErrorMessage = optional(scrub(be.Message))
		if be.ErrorCode != "" {
			e.APIErrorName = optional(be.ErrorCode)
		} else {
			e.APIErrorName = optional(be.Name)
		}
		e.ResultURL = optional(scrub(be.ResultURL))
	}
	var carried []kgo.RecordHeader
	var drops []dropped
	if !minimal {
		carried, drops = carriedHeaders(j.rec.Headers)
		for i, d := range drops {
			if i == 0 {
				e.Detail += "; input headers not copied: "
			} else {
				e.Detail += "; "
			}
			e.Detail += d.String()
		}
	}
	original := len(j.rec.Key) + len(j.rec.Value)
	switch {
	case minimal || !b.o.IncludeOriginal:
	case original > MaxOriginalBytes:
		// Replay reads such an original from its source position while
		// the topic retains it.
		e.Detail += fmt.Sprintf(" (original of %d bytes not carried: over %d)", original, MaxOriginalBytes)
	default:
		e.OriginalKey = j.rec.Key
		e.OriginalValue = j.rec.Value
	}
	out := b.topics.ErrorTopic(j.rec.Topic)
	v, err := b.o.Codec.EncodeError(out, e)
	if err != nil {
		return nil, fmt.Errorf("bridge: error event of %s on %s: %w", e.TransactionID, out, err)
	}
	rec := b.output(j.rec, out, e.TransactionID, evType, j.attempts, v, carried, drops)
	if n := recordBytes(rec); n > b.o.MaxOutputBytes && e.OriginalValue != nil {
		e.OriginalKey, e.OriginalValue = nil, nil
		e.Detail += fmt.Sprintf(" (original not carried: the event would be %d bytes, over %d)", n, b.o.MaxOutputBytes)
		if rec.Value, err = b.o.Codec.EncodeError(out, e); err != nil {
			return nil, fmt.Errorf("bridge: error event of %s on %s: %w", e.TransactionID, out, err)
		}
	}
	if n := recordBytes(rec); n > b.o.MaxOutputBytes {
		return nil, fmt.Errorf("bridge: error event of %s on %s is %d bytes, over %d", e.TransactionID, out, n, b.o.MaxOutputBytes)
	}
	if m := b.o.Metrics; m != nil {
		m.RecordsCompleted.WithLabelValues(j.rec.Topic, "error").Inc()
		m.ErrorEvents.WithLabelValues(j.rec.Topic, string(cat)).Inc()
	}
	// Per-record lines are debug; INTERNAL and AUTH mean something is
	// wrong with the bridge or its credentials, not with one event.
	lvl := zap.DebugLevel
	if cat == events.CategoryInternal || cat == events.CategoryAuth {
		lvl = zap.ErrorLevel
	}
	b.log.Log(lvl, "error event", zap.String("transactionId", e.TransactionID), zap.String("category", string(cat)),
		zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition), zap.Int64("offset", j.rec.Offset),
		zap.String("detail", e.Detail))
	return []*kgo.Record{rec}, nil
}

// retryable is the error event's retryable flag: may replaying the same
// record later succeed?
func retryable(cat events.Category, cause error) bool {
	switch cat {
	case events.CategoryTransientExhausted, events.CategoryAuth:
		return true
	case events.CategoryInternal:
		return transient(cause) || errors.Is(cause, pipeline.ErrProduce)
	}
	return false
}

// output is an output record with the bridge's headers, the input headers
// it carries and the names of those it dropped.
func (b *Bridge) output(in *kgo.Record, topic, key, evType string, attempts int, value []byte, carried []kgo.RecordHeader, drops []dropped) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 9)
	h = append(h,
		kgo.RecordHeader{Key: HeaderEventType, Value: []byte(evType)},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(in.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(in.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, in.Offset, 10)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	h = append(h, carried...)
	if len(drops) > 0 {
		names := make([]string, 0, len(drops))
		for _, d := range drops {
			if !slices.Contains(names, d.name) {
				names = append(names, d.name)
			}
		}
		h = append(h, kgo.RecordHeader{Key: HeaderDroppedHeaders, Value: []byte(strings.Join(names, ","))})
	}
	if b.o.Replay {
		h = append(h, kgo.RecordHeader{Key: HeaderReplayed, Value: []byte("true")})
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: h}
}

// fallbackDecodeTimeout bounds Fallback's attempt to learn the record's
// transactionId (a registry fetch at worst).
const fallbackDecodeTimeout = 5 * time.Second

// Fallback turns a record whose handling failed unexpectedly, or whose
// output could not be produced (cause matches pipeline.ErrProduce), into an
// INTERNAL error event (a pipeline.Fallback). It fails on no record content;
// only a record of a topic the bridge was not configured with (or a nil
// record) is an error, as no error topic has a schema for it.
func (b *Bridge) Fallback(rec *kgo.Record, cause error) ([]*kgo.Record, error) {
	if rec == nil {
		return nil, errors.New("bridge: fallback for a nil record")
	}
	if cause == nil {
		cause = errors.New("bridge: record failed without a cause")
	}
	j := &job{rec: rec, start: b.now()}
	ctx, cancel := context.WithTimeout(context.Background(), fallbackDecodeTimeout)
	defer cancel()
	if ev, err := b.o.Codec.DecodeEvent(ctx, rec.Topic, rec.Value); err == nil {
		j.ev = ev
	}
	// Outputs that could not be produced: answer with the smallest error
	// event (no original, no copied headers), which any topic accepts,
	// rather than fail the same way again and stop the pipeline.
	if errors.Is(cause, pipeline.ErrProduce) {
		reason := ""
		if errors.Is(cause, kerr.MessageTooLarge) || errors.Is(cause, kerr.RecordListTooLarge) {
			reason = ReasonOutputTooLarge
		}
		return b.errorEvent(j, events.CategoryInternal, reason, cause, true)
	}
	return b.failure(j, events.CategoryInternal, "", cause)
}

// ReasonOutputTooLarge is the reason of the INTERNAL error event that
// answers a record whose output Kafka refused as too large.
const ReasonOutputTooLarge = "OUTPUT_TOO_LARGE"

func ptr[T any](v T) *T { return &v }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
