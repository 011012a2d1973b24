package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// One purchase's journey, read back from an OTLP/HTTP receiver: produced
// with a traceparent, its partner call retried (503s), the record held by
// the open circuit, its write answered 500 after it was applied (so the
// next attempt's guard looks it up and finds it), and its reply, whose
// traceparent continues the trace. The spans form the tree the README
// describes, with these parent links:
//
//	producer → <topic> receive → <topic> process → decode
//	                                             → attempt → circuit admission
//	                                                       → guard lookup → partner lookup-transaction
//	                                                       → partner point-accrual (each HTTP attempt)
//	                                             → retry wait
//	                                             → <topic>.result publish  (= the reply's traceparent)
func TestTraceOfOnePurchase(t *testing.T) {
	rcv := newOTLPReceiver(t)
	s := newStack(t)
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Tracing.Exporter, c.Tracing.SampleRatio = tracing.OTLP, 0 // parent-based: the producer's sampled flag decides
		c.Processing.BreakerFailures, c.Processing.BreakerOpen = 2, time.Second
		c.Processing.RecordAttempts, c.Processing.RecordBackoff = 10, 50*time.Millisecond
		c.API.MaxAttempts = 3
		c.Partner.Profile.ApplyWindow = 200 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	waitFor(t, "group joined", 20*time.Second, svc.joined.Load)

	// Every accrual answered 503 (no Retry-After): the client retries
	// within the call, the record's attempts fail, the circuit opens.
	s.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: sim.NoRetryAfter, Endpoints: []string{sim.EndpointAccrual}})
	const producerTrace, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ev := &events.PurchaseCompleted{TransactionID: "traced-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"}
	v, err := svc.Codec.Encode(s.Topics.Purchase, ev)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	in := &kgo.Record{Topic: s.Topics.Purchase, Key: []byte(ev.LoyaltyID), Value: v,
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + producerTrace + "-" + producerSpan + "-01")}}}
	if err := cl.ProduceSync(ctx, in).FirstErr(); err != nil {
		t.Fatal(err)
	}
	circuitIs := func(st circuit.State) bool { return value(svc.Metrics.CircuitState) == float64(st) }
	waitFor(t, "the circuit to open", 30*time.Second, func() bool { return circuitIs(circuit.Open) })

	// The half-open probe's write is applied and answered 500: ambiguous,
	// so the next attempt is guarded. The circuit opens again.
	calls := s.Sim.TotalCalls(sim.EndpointAccrual)
	s.Sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual}})
	waitFor(t, "the probe's write", 30*time.Second, func() bool {
		return s.Sim.Effects(ev.TransactionID) == 1 && s.Sim.TotalCalls(sim.EndpointAccrual) > calls && circuitIs(circuit.Open)
	})
	// The token revoked: the guarded attempt's lookup is refused (401)
	// and the client gets a new token within the record's trace.
	s.Sim.RevokeTokens()
	s.Sim.SetFaults(sim.Faults{})

	rc, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics(s.Topics.ResultTopic(s.Topics.Purchase)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var reply *kgo.Record
	waitFor(t, "the reply", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { reply = r })
		return reply != nil
	})
	var tp string
	for _, h := range reply.Headers {
		if h.Key == "traceparent" {
			if tp != "" {
				t.Fatalf("reply has two traceparent headers: %v", reply.Headers)
			}
			tp = string(h.Value)
		}
	}
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[1] != producerTrace || parts[2] == producerSpan || parts[3] != "01" {
		t.Fatalf("reply traceparent %q: want the producer's trace %s, a span of the bridge's, sampled", tp, producerTrace)
	}

	resultTopic := s.Topics.ResultTopic(s.Topics.Purchase)
	publish := rcv.waitSpan(t, "the reply's publish span", 20*time.Second, func(sp *tracepb.Span) bool {
		return sp.GetName() == resultTopic+" publish" && traceIDOf(sp) == producerTrace
	})
	if spanID(publish) != parts[2] {
		t.Errorf("reply traceparent names span %s, the publish span is %s", parts[2], spanID(publish))
	}
	// The spans of the trace, by id, once the process span has arrived.
	var trace []*tracepb.Span
	rcv.waitSpan(t, "the process span", 20*time.Second, func(sp *tracepb.Span) bool {
		return sp.GetName() == s.Topics.Purchase+tracing.SpanProcess
	})
	for _, sp := range rcv.all() {
		if traceIDOf(sp) == producerTrace {
			trace = append(trace, sp)
		}
	}
	byID := map[string]*tracepb.Span{}
	for _, sp := range trace {
		byID[spanID(sp)] = sp
	}
	named := func(name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, sp := range trace {
			if sp.GetName() == name {
				out = append(out, sp)
			}
		}
		return out
	}
	one := func(name string) *tracepb.Span {
		t.Helper()
		ss := named(name)
		if len(ss) != 1 {
			t.Fatalf("%d spans %q in the trace, want 1; the trace:\n%s", len(ss), name, describe(trace, byID))
		}
		return ss[0]
	}
	parentIs := func(sp *tracepb.Span, want *tracepb.Span) {
		t.Helper()
		if parentID(sp) != spanID(want) {
			t.Errorf("span %q's parent is %q, want %q", sp.GetName(), byID[parentID(sp)].GetName(), want.GetName())
		}
	}

	receive := one(s.Topics.Purchase + " receive")
	if parentID(receive) != producerSpan {
		t.Errorf("receive span's parent %s, want the producer's span %s", parentID(receive), producerSpan)
	}
	process := one(s.Topics.Purchase + tracing.SpanProcess)
	parentIs(process, receive)
	if got := attr(process, tracing.AttrTransactionID); got != ev.TransactionID {
		t.Errorf("process span's transaction id %q", got)
	}
	if got := attr(process, tracing.AttrOutcome); got != string(events.OutcomeAlreadyApplied) {
		t.Errorf("process span's outcome %q, want ALREADY_APPLIED (the guard found the probe's write)", got)
	}
	parentIs(one(tracing.SpanDecode), process)
	parentIs(publish, process)

	attempts := named(tracing.SpanAttempt)
	if len(attempts) < 4 {
		t.Fatalf("%d attempt spans, want at least 4 (two failed, the probe, the guarded one):\n%s", len(attempts), describe(trace, byID))
	}
	for _, a := range attempts {
		parentIs(a, process)
	}
	if len(named(tracing.SpanRetryWait)) == 0 {
		t.Error("no retry wait span")
	}
	for _, w := range named(tracing.SpanRetryWait) {
		parentIs(w, process)
	}

	// The retried call: HTTP attempts 1..3 of one call under one record
	// attempt, each 503, the back-off before the next on each but the last.
	retried := false
	for _, a := range attempts {
		var calls []*tracepb.Span
		for _, sp := range named(tracing.SpanPartnerPrefix + sim.EndpointAccrual) {
			if parentID(sp) == spanID(a) {
				calls = append(calls, sp)
			}
		}
		if len(calls) == 3 && attr(calls[0], tracing.AttrHTTPStatusCode) == "503" && attr(calls[0], tracing.AttrRecordWait) != "" &&
			attr(calls[2], tracing.AttrHTTPAttempt) == "3" && attr(calls[2], tracing.AttrRecordWait) == "" {
			retried = true
		}
	}
	if !retried {
		t.Errorf("no record attempt with three 503 HTTP attempts and their waits:\n%s", describe(trace, byID))
	}

	// Held by the circuit: an admission that began open and lasted about
	// the open timeout.
	held := false
	for _, c := range named(tracing.SpanCircuit) {
		if attr(c, tracing.AttrCircuitState) == circuit.Open.String() && duration(c) >= 500*time.Millisecond {
			held = true
		}
	}
	if !held {
		t.Errorf("no circuit admission held while open:\n%s", describe(trace, byID))
	}

	// The guarded attempt looked the write up and found it.
	guard := one(tracing.SpanGuardLookup)
	if got := attr(guard, tracing.AttrGuardResult); got != "found" {
		t.Errorf("guard lookup result %q, want found", got)
	}
	lookups := named(tracing.SpanPartnerPrefix + sim.EndpointLookup)
	if len(lookups) != 2 || attr(lookups[0], tracing.AttrHTTPStatusCode) != "401" || attr(lookups[1], tracing.AttrHTTPStatusCode) != "200" {
		t.Errorf("want the guard's lookup refused 401 (revoked token), then answered 200:\n%s", describe(trace, byID))
	}
	for _, l := range lookups {
		parentIs(l, guard)
	}
	if byID[parentID(guard)].GetName() != tracing.SpanAttempt {
		t.Errorf("guard lookup's parent is %q, want an attempt", byID[parentID(guard)].GetName())
	}
	// The new token's grant, made for that lookup (the first, at start-up,
	// had no sampled parent, and the ratio is 0).
	grant := one(tracing.SpanTokenGrant)
	parentIs(grant, guard)
	if got := attr(grant, tracing.AttrTokenResult); got != "ok" {
		t.Errorf("token grant result %q", got)
	}
	svc.halt(t)
	t.Logf("trace of %d spans:\n%s", len(trace), describe(trace, byID))
}

// describe lists a trace's spans as an indented tree, for failures.
func describe(trace []*tracepb.Span, byID map[string]*tracepb.Span) string {
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, sp := range trace {
			root := byID[parentID(sp)] == nil
			if (depth == 0 && root) || (depth > 0 && parentID(sp) == parent) {
				fmt.Fprintf(&b, "%s%s %v", strings.Repeat("  ", depth), sp.GetName(), duration(sp).Round(time.Millisecond))
				for _, kv := range sp.GetAttributes() {
					if strings.HasPrefix(kv.GetKey(), "loyalty.") || strings.HasPrefix(kv.GetKey(), "http.") {
						fmt.Fprintf(&b, " %s=%s", kv.GetKey(), anyValue(kv.GetValue()))
					}
				}
				b.WriteString("\n")
				walk(spanID(sp), depth+1)
			}
		}
	}
	walk("", 0)
	return b.String()
}
