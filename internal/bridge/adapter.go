package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
	"github.com/loyalty-bridge/loyalty-bridge/internal/personalmatch"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// The codec adapter: a record becomes an event, an outcome becomes the
// output record that answers it.

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

// success is j's result record.
func (b *Bridge) success(j *job, r *events.LoyaltyResult) ([]*kgo.Record, error) {
	r.TransactionID = j.ev.ID()
	r.EventType = j.ev.Type()
	r.Attempts = int32(j.attempts())
	r.LatencyMs = b.now().Sub(j.start).Milliseconds()
	r.ProcessedAt = b.now().UTC()
	r.Source = events.Source{Topic: j.rec.Topic, Partition: j.rec.Partition, Offset: j.rec.Offset}
	scrubResult(r, partnerTexts(j.ev, b.o.Profile.ResultURLParams))
	out := b.resultTopic(j.replyBase())
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
		zap.Int("attempts", j.attempts()))
	traceResult(j.span, r, j.attempts())
	carried, drops := carriedHeaders(j.rec.Headers)
	return []*kgo.Record{b.output(j.rec, out, r.TransactionID, string(r.EventType), j.attempts(), v, carried, drops)}, nil
}

func (b *Bridge) failure(j *job, cat events.Category, reason string, cause error) ([]*kgo.Record, error) {
	return b.errorEvent(j, cat, reason, cause, false)
}

// errorEvent builds j's error event. Minimal leaves out the original and
// the copied headers: for an answer to a record whose outputs could not be
// produced. Whatever the input, the event fits MaxOutputBytes by
// construction: every text in it is bounded (the detail by MaxDetailBytes,
// the partner's texts, ids and topic names by their own limits), so the event
// without an original stays under ErrorEventBudget, and the original is
// carried only when it fits beside that. A record that could not be answered
// would stop the pipeline on it, for every replica that took its partition.
func (b *Bridge) errorEvent(j *job, cat events.Category, reason string, cause error, minimal bool) ([]*kgo.Record, error) {
	pt := partnerTexts(j.ev, b.o.Profile.ResultURLParams)
	// The cause's text quotes the partner's codes and answers, and may run
	// to megabytes: scrubbed once, clipped before and after. What the second
	// clip keeps lay well inside what the scrub saw, so no token or phone
	// number cut in half by the first reaches the event. The notes added
	// below are the bridge's own words.
	var detail strings.Builder
	detail.WriteString(clip(pt.Detail(clip(cause.Error(), 2*maxCauseBytes)), maxCauseBytes))
	e := &events.LoyaltyError{Category: cat, Retryable: retryable(cat, cause), Attempts: int32(j.attempts()),
		ProcessedAt: b.now().UTC(),
		Source:      events.ErrorSource{Topic: j.rec.Topic, Partition: j.rec.Partition, Offset: j.rec.Offset, Timestamp: j.rec.Timestamp}}
	evType := "unknown"
	if j.ev != nil {
		e.TransactionID = j.ev.ID()
		t := j.ev.Type()
		e.EventType = &t
		evType = string(t)
	}
	if n := len(e.TransactionID); n > events.MaxIDLen {
		// An invalid id of any size would be the key of the error event.
		fmt.Fprintf(&detail, " (transactionId of %d bytes, over %d: keyed by source position)", n, events.MaxIDLen)
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
		e.APIStatusCode = ptr(int32(be.StatusCode))
		e.APIErrorCode = optional(pt.Code(be.Code))
		name := be.ErrorCode
		if name == "" {
			name = be.Name
		}
		e.APIErrorName = optional(pt.Code(name))
		// An onboarding's answer keeps only the partner's codes: its
		// free text is where the partner echoes the person it refused,
		// in spellings no matcher can promise to know.
		if !onboarding(j.ev) {
			e.APIMessage = optional(pt.Text(be.StatusMessage))
			e.APIErrorMessage = optional(pt.Text(be.Message))
			e.ResultURL = optional(pt.URL(be.ResultURL))
		}
	}
	var carried []kgo.RecordHeader
	var drops drops
	if !minimal {
		carried, drops = carriedHeaders(j.rec.Headers)
		if drops.n > 0 {
			detail.WriteString("; input headers not copied: ")
			detail.WriteString(drops.String())
		}
	}
	original := len(j.rec.Key) + len(j.rec.Value)
	switch limit := b.maxOriginal(); {
	case minimal || !b.o.IncludeOriginal:
	case original > limit:
		// Replay reads such an original from its source position while
		// the topic retains it.
		fmt.Fprintf(&detail, " (original not carried: %d bytes, over the %d an error event carries)", original, limit)
	default:
		e.OriginalKey = j.rec.Key
		e.OriginalValue = j.rec.Value
	}
	e.Detail = clip(detail.String(), MaxDetailBytes)
	out := b.errorTopic(j.replyBase())
	v, err := b.o.Codec.EncodeError(out, e)
	if err != nil {
		return nil, fmt.Errorf("bridge: error event of %s on %s: %w", e.TransactionID, out, err)
	}
	rec := b.output(j.rec, out, e.TransactionID, evType, j.attempts(), v, carried, drops)
	if n := recordBytes(rec); n > b.o.MaxOutputBytes {
		// Unreachable while the bounds above hold (TestErrorEventBudget):
		// a bug, which the pipeline's fallback answers with a minimal event.
		return nil, fmt.Errorf("bridge: error event of %s on %s is %d bytes, over %d", e.TransactionID, out, n, b.o.MaxOutputBytes)
	}
	traceError(j.span, cat, j.attempts())
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

// maxOriginal is the largest original (key and value) an error event
// carries: what fits beside the rest of the event under MaxOutputBytes, and
// never over MaxOriginalBytes.
func (b *Bridge) maxOriginal() int {
	return min(MaxOriginalBytes, b.o.MaxOutputBytes-ErrorEventBudget)
}

// clip returns s when it is at most n bytes, and otherwise its first bytes,
// cut at a character boundary, and a note of how much was cut, n bytes at
// most in all.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf("… (cut from %d bytes)", len(s))
	keep := max(n-len(note), 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + note
}

// retryable is the error event's retryable flag: may replaying the same
// record later succeed?
func retryable(cat events.Category, cause error) bool {
	switch cat {
	case events.CategoryTransientExhausted, events.CategoryAuth:
		return true
	case events.CategoryInternal:
		return transient(cause) || errors.Is(cause, pipeline.ErrProduce)
	case events.CategoryValidation:
		// The refund is valid; its placement is not. A replay, one
		// process, handles it.
		return isRefundKeyError(cause)
	case events.CategoryBusiness:
		// A refund whose purchase the partner does not know yet, answered
		// without parking (exactly-once mode, a replay): a replay later
		// may find it.
		var rf *recordFailure
		return errors.As(cause, &rf) && rf.originalMissing
	}
	return false
}

// output is an output record with the bridge's headers, the input headers
// it carries and the names of those it dropped.
func (b *Bridge) output(in *kgo.Record, topic, key, evType string, attempts int, value []byte, carried []kgo.RecordHeader, d drops) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 9)
	// The five values share one buffer (one allocation, not five); each is
	// a full slice expression, so nothing appends into its neighbour.
	buf := make([]byte, 0, len(evType)+len(in.Topic)+3*20)
	buf = append(append(buf, evType...), in.Topic...)
	typ, src := buf[:len(evType):len(evType)], buf[len(evType):len(buf):len(buf)]
	part, buf := appendInt(buf, int64(in.Partition))
	off, buf := appendInt(buf, in.Offset)
	att, _ := appendInt(buf, int64(attempts))
	h = append(h,
		kgo.RecordHeader{Key: HeaderEventType, Value: typ},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: src},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: part},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: off},
		kgo.RecordHeader{Key: HeaderAttempts, Value: att},
	)
	h = append(h, carried...)
	if len(d.names) > 0 {
		h = append(h, kgo.RecordHeader{Key: HeaderDroppedHeaders, Value: []byte(strings.Join(d.names, ","))})
	}
	if b.o.Replay {
		h = append(h, kgo.RecordHeader{Key: HeaderReplayed, Value: []byte("true")})
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: h}
}

// appendInt appends n's digits to buf, within its capacity, and returns
// them (capped, so that an append to them copies) and buf grown.
func appendInt(buf []byte, n int64) (digits, grown []byte) {
	start := len(buf)
	buf = strconv.AppendInt(buf, n, 10)
	return buf[start:len(buf):len(buf)], buf
}

// partnerTexts is how the partner's texts answering ev are made safe to
// publish: secrets, control characters and lengths for every event, and
// for an onboarding the member's personal data in any spelling
// (personalmatch). keep are the resultUrl query parameters to keep
// (partnerprofile.Profile.ResultURLParams). Built once per output event.
func partnerTexts(ev events.Event, keep []string) partnertext.Scrubber {
	c := partnertext.Scrubber{KeepParams: keep}
	if o, ok := ev.(*events.MemberOnboardRequested); ok {
		if m := personalmatch.New(o); m != nil {
			c.Personal = m.Scrub
		}
	}
	return c
}

func onboarding(ev events.Event) bool {
	_, ok := ev.(*events.MemberOnboardRequested)
	return ok
}

// scrubResult makes the partner's words in r safe to publish: its
// identifiers and timestamps (bitReference, requestId, memberCode, the
// loyaltyId an onboarding returns, createdAt, apiTimestamp) lose secrets
// and control characters and are capped; its statuses and codes are
// scrubbed as codes. Values the spec's answers carry pass unchanged.
func scrubResult(r *events.LoyaltyResult, pt partnertext.Scrubber) {
	for _, f := range []**string{&r.LoyaltyID, &r.BitReference, &r.RequestID, &r.MemberCode, &r.CreatedAt, &r.APITimestamp} {
		scrubbed(f, pt.ID)
	}
	for _, f := range []**string{&r.TierClass, &r.MemberStatus, &r.EKYCStatus, &r.APIErrorCode} {
		scrubbed(f, pt.Code)
	}
}

// scrubbed replaces *f by scrub's text of it; a text scrub left as it was
// keeps its pointer (most do: a new one per field was 4 of a record's
// allocations).
func scrubbed(f **string, scrub func(string) string) {
	if *f == nil {
		return
	}
	if s := scrub(**f); s != **f || s == "" {
		*f = optional(s) // an empty text is absent
	}
}
