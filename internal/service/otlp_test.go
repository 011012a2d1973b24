package service

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what the
// bridge's exporter sends to /v1/traces, as a collector would.
type otlpReceiver struct {
	URL string // of /v1/traces

	mu    sync.Mutex
	spans []*tracepb.Span
	raw   []string // each request as JSON, resources included (for the PII audit)
}

// newOTLPReceiver starts a receiver and points the standard variables at
// it, with a short batch delay so that spans arrive within a test's wait.
func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		body := io.Reader(req.Body)
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		js, _ := protojson.Marshal(&msg)
		r.mu.Lock()
		r.raw = append(r.raw, string(js))
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/v1/traces"
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", r.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	return r
}

// all returns the spans received so far.
func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// json returns every request received, as JSON.
func (r *otlpReceiver) json() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.raw...)
}

// waitSpan waits for a span that ok accepts, and returns it.
func (r *otlpReceiver) waitSpan(t *testing.T, what string, d time.Duration, ok func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	var found *tracepb.Span
	waitFor(t, what, d, func() bool {
		for _, s := range r.all() {
			if ok(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func spanID(s *tracepb.Span) string    { return hex.EncodeToString(s.GetSpanId()) }
func parentID(s *tracepb.Span) string  { return hex.EncodeToString(s.GetParentSpanId()) }
func traceIDOf(s *tracepb.Span) string { return hex.EncodeToString(s.GetTraceId()) }
func duration(s *tracepb.Span) time.Duration {
	return time.Duration(s.GetEndTimeUnixNano() - s.GetStartTimeUnixNano())
}

// attr returns s's attribute key as text ("" when absent).
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return anyValue(kv.GetValue())
		}
	}
	return ""
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	}
	return protojson.Format(v)
}
