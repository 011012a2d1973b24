package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// MaxOriginalBytes bounds the original key and value an error event
// carries, leaving room for the rest of the event under Kafka's default
// 1 MB message limit.
const MaxOriginalBytes = 512 << 10

// DefaultMaxOutputBytes is the default of Options.MaxOutputBytes: below
// franz-go's default ProducerBatchMaxBytes (1,000,012) and Kafka's default
// max.message.bytes (1,048,588).
const DefaultMaxOutputBytes = 1_000_000

// MaxDetailBytes bounds an error event's detail. The detail is built from
// error texts, some of them the partner's or the input's; unbounded, a
// record could make its own error event too large to produce.
const MaxDetailBytes = 4 << 10

// maxCauseBytes bounds the part of the detail that is the cause's text,
// leaving room for the notes added after it.
const maxCauseBytes = 3 << 10

// ErrorEventBudget bounds an error event without its original: key, value
// and headers, every text in it at its limit (TestErrorEventBudget). An
// original is carried only when it fits under MaxOutputBytes beside it, and
// MaxOutputBytes may not be smaller.
const ErrorEventBudget = 16 << 10

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

// DefaultOriginalGrace is Options.OriginalGrace's default.
const DefaultOriginalGrace = 5 * time.Second

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
	// Hold, when set, holds every attempt while the partner refuses the
	// credentials (a refused grant, or a 401 to a renewed token): such an
	// attempt waits and is made again once a token is obtainable, instead
	// of ending its record as an AUTH error event. A 403 is still the
	// record's AUTH error (see loyalty.IsCredentialRefused). nil: refused
	// credentials are AUTH error events.
	Hold *authhold.Hold
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
	// Profile is what the partner answers where the spec is silent: the
	// codes, transaction types and statuses the guard and refunds read,
	// and the redemption date format. Zero value: the simulator's
	// (partnerprofile.Default). An answer it does not name holds the
	// record (never written; see UnrecognisedHold).
	Profile partnerprofile.Profile
	// Ledger, when set, is the transaction ledger (package ledger; see
	// ledger.go): a settled transaction is answered without a call, an
	// intent guards its record, and every write's intent is durable
	// before the write is sent. The pipeline's client must partition its
	// topic by Record.Partition (ledger.Partitioner). nil: none.
	Ledger *ledger.Ledger
	// CallTimeout bounds one partner call, as the Client's
	// loyalty.Options.Timeout does (default loyalty.DefaultTimeout): a
	// write the ledger shows intended at t has landed, or never will, by
	// t + CallTimeout + the profile's apply window.
	CallTimeout time.Duration
	// UnrecognisedHold bounds how long a record is held on lookup answers
	// the Profile does not name (an unknown code, transactionType or
	// status, or the transactionId found as the other kind's from a
	// partner keyed by id and type): nothing is written, the lookup is
	// asked again with back-off (doubling from RetryBackoff, capped at a
	// minute), no attempt of the record's budget is spent, and only when
	// this much time has passed since the first such answer does the
	// record end as a retryable TRANSIENT_EXHAUSTED error event, reason
	// UNRECOGNISED_ANSWER. Default DefaultUnrecognisedHold.
	UnrecognisedHold time.Duration
	// Replay guards every accrual and redemption and marks outputs
	// replayed: true.
	Replay bool
	// RefundKeyCheck is what a refund whose record key is neither its
	// loyaltyId nor its originalTransactionId gets (refundkey.go): a
	// VALIDATION error event (RefundKeyRefuse) or, with RefundKeyWarn,
	// handled with a metric and a warning. Zero value:
	// DefaultRefundKeyCheck. Not checked with Replay.
	RefundKeyCheck RefundKeyCheck
	// ParkedTopic, when set, parks a refund whose original purchase the
	// partner does not know (yet) instead of answering it (park.go): the
	// input record, unchanged, goes to this topic with the parking
	// headers (package parking), its input partition goes on, and the
	// bridge, consuming this topic too (Inputs), tries it again after
	// ParkBackoff, doubling, until OriginalWait has passed since it was
	// first parked; then it is a retryable TRANSIENT_EXHAUSTED error
	// event, reason ORIGINAL_NOT_FOUND. "": no parking; such a refund is
	// the BUSINESS error ORIGINAL_NOT_FOUND at once (replay's choice: it
	// handles records outside the group, which would not see them again).
	ParkedTopic string
	// OriginalWait is how long a parked refund keeps waiting for its
	// original, from when it was first parked. Default
	// parking.DefaultOriginalWait.
	OriginalWait time.Duration
	// OriginalGrace: without parking (no ParkedTopic: exactly-once mode,
	// a replay), a refund whose original is not found looks again, after
	// back-offs doubling from RetryBackoff, until this long has passed
	// since its first not-found, spending no attempt: a purchase sent
	// with its refund is usually applied within moments (in exactly-once
	// mode, often by a record of the same round). Then it is a retryable
	// BUSINESS error ORIGINAL_NOT_FOUND. Default DefaultOriginalGrace;
	// it holds its round that long at most.
	OriginalGrace time.Duration
	// ParkBackoff is the first delay before a parked refund is tried
	// again; it doubles, capped at parking.MaxBackoff (or ParkBackoff,
	// when longer). Default parking.DefaultBackoff.
	ParkBackoff time.Duration
	// Tracer, when set, traces each record (tracing.go): a "<topic>
	// process" span, a child of the span in the record's Context (the
	// Kafka client's receive span, package tracing) or of its
	// traceparent, with spans for decoding, each attempt's circuit
	// admission, guard lookups and retry waits; the Client's and the
	// token cache's spans are children of these. Outputs carry the
	// process span in their Context and traceparent header. nil: no
	// tracing, and no cost.
	Tracer trace.Tracer
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
	o       Options
	topics  codec.Topics
	replies map[string]replyTopics // by input topic; read-only after New
	log     *zap.Logger
	now     func() time.Time
	// lanes serialise the clawbacks of one original (clawback.go).
	lanes lanes
	// wireAccepted counts the calls accepted with each wire setting
	// (wirerefusal.go).
	wireAccepted wireAccepted
	// refundKeySeen is set by the first refund keyed otherwise
	// (refundkey.go): it alone is logged at warn level.
	refundKeySeen atomic.Bool
	// heldUnrecognised counts the records in the unrecognised hold, and
	// warned limits its warnings (unrecognised.go).
	heldUnrecognised atomic.Int64
	warned           warnLimit
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
	if err := o.Profile.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("option Profile: %w", err))
	}
	if o.RecordAttempts < 0 {
		errs = append(errs, fmt.Errorf("RecordAttempts %d: must not be negative", o.RecordAttempts))
	}
	if o.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("RetryBackoff %s: must not be negative", o.RetryBackoff))
	}
	if o.RefundKeyCheck != "" {
		if _, err := ParseRefundKeyCheck(string(o.RefundKeyCheck)); err != nil {
			errs = append(errs, fmt.Errorf("RefundKeyCheck %w", err))
		}
	}
	if o.UnrecognisedHold < 0 {
		errs = append(errs, fmt.Errorf("UnrecognisedHold %s: must not be negative", o.UnrecognisedHold))
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
	if o.OriginalWait < 0 || o.ParkBackoff < 0 {
		errs = append(errs, fmt.Errorf("OriginalWait %s, ParkBackoff %s: must not be negative", o.OriginalWait, o.ParkBackoff))
	}
	if o.ParkedTopic != "" && slices.Contains(topics.Inputs(), o.ParkedTopic) {
		errs = append(errs, fmt.Errorf("ParkedTopic %s: is an input topic", o.ParkedTopic))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("bridge: %w", errors.Join(errs...))
	}
	if o.MaxOutputBytes != 0 && o.MaxOutputBytes < ErrorEventBudget {
		return nil, fmt.Errorf("bridge: MaxOutputBytes %d: below %d, the size an error event may need without its original", o.MaxOutputBytes, ErrorEventBudget)
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
	if o.CallTimeout <= 0 {
		o.CallTimeout = loyalty.DefaultTimeout
	}
	if o.RefundKeyCheck == "" {
		o.RefundKeyCheck = DefaultRefundKeyCheck
	}
	if o.UnrecognisedHold == 0 {
		o.UnrecognisedHold = DefaultUnrecognisedHold
	}
	if o.OriginalGrace <= 0 {
		o.OriginalGrace = DefaultOriginalGrace
	}
	if o.OriginalWait == 0 {
		o.OriginalWait = parking.DefaultOriginalWait
	}
	if o.ParkBackoff == 0 {
		o.ParkBackoff = parking.DefaultBackoff
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	replies := make(map[string]replyTopics, 3)
	for _, in := range topics.Inputs() {
		replies[in] = replyTopics{topics.ResultTopic(in), topics.ErrorTopic(in)}
	}
	return &Bridge{o: o, topics: topics, replies: replies, log: o.Logger, now: o.Now}, nil
}

// replyTopics are an input topic's result and error topics.
type replyTopics struct{ result, error string }

// resultTopic is codec.Topics.ResultTopic, made once per input topic
// rather than once per record.
func (b *Bridge) resultTopic(in string) string {
	if t, ok := b.replies[in]; ok {
		return t.result
	}
	return b.topics.ResultTopic(in)
}

// errorTopic is codec.Topics.ErrorTopic, as resultTopic.
func (b *Bridge) errorTopic(in string) string {
	if t, ok := b.replies[in]; ok {
		return t.error
	}
	return b.topics.ErrorTopic(in)
}

// Inputs returns the topics the bridge answers (defaults applied): what
// the pipeline should consume. They are the input topics and, with
// Options.ParkedTopic, the parked topic.
func (b *Bridge) Inputs() []string {
	in := b.topics.Inputs()
	if b.o.ParkedTopic != "" {
		in = append(in, b.o.ParkedTopic)
	}
	return in
}

// job is one record on its way through Handle.
type job struct {
	// rec is the input record: for a parked record, its original, at
	// its original position (park.go).
	rec   *kgo.Record
	ev    events.Event // nil until decoded
	start time.Time
	st    recordState
	// parked is what a parked record's headers said; nil for an input
	// record.
	parked *parking.Parked
	// home, when set, is the input topic whose reply topics answer the
	// record instead of rec.Topic's: a parked record whose headers do
	// not say where it came from is answered on the refund topic's.
	home string
	// span is the record's process span; nil with tracing off.
	span trace.Span
}

// replyBase is the input topic whose .result and .error answer j.
func (j *job) replyBase() string {
	if j.home != "" {
		return j.home
	}
	return j.rec.Topic
}

// attempts is j's attempts in all: this handling's and, for a parked
// record, one for each earlier handling that parked it.
func (j *job) attempts() int {
	if j.parked != nil {
		return j.st.attempts + j.parked.Tries
	}
	return j.st.attempts
}

// Handle processes one record (a pipeline.Handler): it returns exactly one
// output record, a result or an error event. It returns an error only when
// ctx ended before the record reached its output (the record is then
// abandoned and redelivered), or when not even an error event can be
// encoded (a configuration bug; the pipeline's Fallback then answers).
//
// The record flows one way: decode and validate (adapter.go), the event's
// handler (handlers.go) inside the attempt policy (policy.go), then the
// outcome becomes the output record (adapter.go).
func (b *Bridge) Handle(ctx context.Context, rec *kgo.Record, m pipeline.Meta) ([]*kgo.Record, error) {
	if rec == nil {
		return nil, errors.New("bridge: nil record")
	}
	if b.o.Tracer != nil {
		return b.handleTraced(ctx, rec, m) // tracing.go
	}
	return b.handle(ctx, rec, m)
}

// handle is Handle without its process span.
func (b *Bridge) handle(ctx context.Context, rec *kgo.Record, m pipeline.Meta) ([]*kgo.Record, error) {
	j := &job{rec: rec, start: b.now(), st: recordState{guard: m.Fresh || b.o.Replay}}
	if b.o.Tracer != nil {
		j.span = trace.SpanFromContext(ctx)
	}
	if b.isParked(rec) {
		if err := b.unpark(ctx, j); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return b.failure(j, events.CategoryInternal, ReasonParkedRecordInvalid, err)
		}
	}
	dctx, dspan := b.span(ctx, tracing.SpanDecode)
	ev, err := b.decode(dctx, j.rec)
	endSpan(dspan, err)
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
	j.ev, j.st.id = ev, ev.ID()
	traceEvent(j.span, ev)
	if _, refund := ev.(*events.PurchaseRefunded); j.parked != nil && !refund {
		return b.failure(j, events.CategoryInternal, ReasonParkedRecordInvalid,
			fmt.Errorf("bridge: parked record of %s: a %s, and only refunds are parked", j.st.id, ev.Type()))
	}
	if err := ev.Validate(); err != nil {
		return b.failure(j, events.CategoryValidation, "", err)
	}
	if err := b.checkRefundKey(j); err != nil {
		return b.failure(j, events.CategoryValidation, events.ReasonRefundKey, err)
	}
	h, err := handlerFor(ev, &b.o.Profile)
	if err != nil {
		return b.failure(j, events.CategoryInternal, "", err)
	}
	lg, settled, err := b.consult(ctx, j, m)
	if err != nil {
		return nil, err // only ctx's
	}
	if lg != nil {
		defer lg.release()
		j.st.lg = lg
	}
	if settled != nil && settled.State == ledger.Settled {
		if mt := b.o.Metrics; mt != nil {
			mt.LedgerAnswered.WithLabelValues(rec.Topic).Inc()
		}
		b.log.Debug("answered from the transaction ledger", zap.String("transactionId", j.st.id))
		// Its settled entry again: in exactly-once mode the first one may
		// have been in a round that aborted after this process kept it.
		return b.succeeded(j, lg, answered(j, settled))
	}
	p := clientPartner{c: b.o.Client, signer: b.o.Signer, prof: &b.o.Profile,
		wire: wireCheck{prof: &b.o.Profile, accepted: &b.wireAccepted, st: &j.st}}
	r, err := b.policy(&j.st, h)(ctx, p)
	if ctx.Err() != nil {
		// Abandoned (revoked, lost, or shutdown past its drain): the next
		// owner redoes it, guarded by Fresh.
		return nil, ctx.Err()
	}
	if err != nil {
		var rf *recordFailure
		if errors.As(err, &rf) && rf.originalMissing && b.o.ParkedTopic != "" {
			return b.park(j, rf.err)
		}
		if errors.As(err, &rf) {
			cause := rf.err
			if rf.originalMissing {
				cause = rf // retryable: the purchase may come later (adapter.go)
			}
			return b.failure(j, rf.cat, rf.reason, cause)
		}
		cat := events.Category(loyalty.Category(err))
		if cat == "" {
			cat = events.CategoryInternal
		}
		return b.failure(j, cat, "", err)
	}
	if memberEvent(ev) {
		b.enrich(ctx, p, r)
	}
	return b.succeeded(j, lg, r)
}

// succeeded is j's result record and, with a ledger, its settled entry.
func (b *Bridge) succeeded(j *job, lg *ledgered, r *events.LoyaltyResult) ([]*kgo.Record, error) {
	outs, err := b.success(j, r)
	if err == nil && lg != nil {
		lr, lerr := lg.settle(r)
		if lerr != nil {
			// The intent stays: a later copy is guarded, never lost.
			b.log.Error("transaction ledger: settled entry not made", zap.String("transactionId", j.st.id), zap.Error(lerr))
		} else {
			outs = append(outs, lr)
		}
	}
	return outs, err
}

// enrich adds profile fields to a member result when Options.Enrich asks
// for them. It does not wait for an open or probing circuit: optional
// fields are not worth holding a command's answer.
func (b *Bridge) enrich(ctx context.Context, p partner, r *events.LoyaltyResult) {
	if !b.o.Enrich || r.LoyaltyID == nil {
		return
	}
	if b.o.Breaker != nil && b.o.Breaker.State() != circuit.Closed {
		return
	}
	for _, err := range enrich(ctx, p, r) {
		b.log.Debug("enrichment", zap.String("loyaltyId", *r.LoyaltyID), zap.Error(err))
	}
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
	if b.isParked(rec) {
		if p, err := b.parse(rec); err == nil {
			j.rec, j.parked = p.Original, p
		} else {
			j.home = b.topics.RefundRedemption
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), fallbackDecodeTimeout)
	defer cancel()
	if ev, err := b.o.Codec.DecodeEvent(ctx, j.rec.Topic, j.rec.Value); err == nil {
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
