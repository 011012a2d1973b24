package produce

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// MaxLine bounds one line (an event is far smaller).
const MaxLine = 1 << 20

// Options say where the lines go and how they are read.
type Options struct {
	Topic string       // an input topic of Codec (required)
	Codec *codec.Codec // encodes the events (required)
	// Type is the event type of lines without a "type" field; "" means the
	// topic's only type.
	Type events.EventType
	// Key is a literal record key for every line; else KeyField names the
	// field the key is taken from; else it is the first of loyaltyId,
	// externalId and transactionId.
	Key, KeyField string
	// NoValidate sends events that fail validation (to test the bridge's
	// VALIDATION path).
	NoValidate bool
	// OnError is told of every line that failed, one call at a time; nil
	// drops them (they are counted all the same).
	OnError func(*LineError)
}

// LineError is one line that was not produced.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadError is a failure to read the input after Line lines; what was read
// before it was sent.
type ReadError struct {
	Line int
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("reading after line %d: %v", e.Line, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// Result counts the records Kafka acknowledged and the lines that failed.
type Result struct{ Produced, Failed int }

// Run reads r line by line (blank lines and lines starting with # are
// skipped) and produces each event to o.Topic with cl, then flushes. Lines
// that fail are counted and reported to o.OnError. A failure to read r
// ends the reading with a *ReadError, after what was read has been
// flushed and counted; a failed flush (ctx ended) is returned as it is.
func Run(ctx context.Context, cl *kgo.Client, r io.Reader, o Options) (Result, error) {
	in := o.Codec.EventTypes(o.Topic)
	if in == nil {
		return Result{}, fmt.Errorf("produce: %s is not an input topic", o.Topic)
	}
	var (
		mu  sync.Mutex
		res Result
	)
	fail := func(line int, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Failed++
		if o.OnError != nil {
			o.OnError(&LineError{Line: line, Err: err})
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		ev, key, err := ParseLine(text, in, o.Type, o.KeyField, o.Key)
		if err == nil && !o.NoValidate {
			err = ev.Validate()
		}
		var value []byte
		if err == nil {
			value, err = o.Codec.Encode(o.Topic, ev)
		}
		if err != nil {
			fail(line, err)
			continue
		}
		n := line
		cl.Produce(ctx, &kgo.Record{Topic: o.Topic, Key: key, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail(n, fmt.Errorf("produce: %w", err))
				return
			}
			mu.Lock()
			res.Produced++
			mu.Unlock()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return res, fmt.Errorf("flush: %w", err)
	}
	if err := sc.Err(); err != nil {
		return res, &ReadError{Line: line, Err: err}
	}
	return res, nil
}

// ParseLine turns one JSON line into an event of one of the types in, and
// its record key (see Options for flagType, keyField and key). Errors name
// fields, never values.
func ParseLine(text []byte, in []events.EventType, flagType events.EventType, keyField, key string) (events.Event, []byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(text, &fields); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %v", err)
	}
	t := flagType
	if raw, ok := fields["type"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, errors.New("type: must be a string")
		}
		t = events.EventType(s)
		delete(fields, "type")
	}
	if t == "" {
		if len(in) > 1 {
			return nil, nil, fmt.Errorf("type: required on this topic (one of %s), or pass --type", joinTypes(in))
		}
		t = in[0]
	}
	ok := false
	for _, x := range in {
		ok = ok || x == t
	}
	if !ok {
		return nil, nil, fmt.Errorf("type: %q is not an event of this topic (one of %s)", t, joinTypes(in))
	}
	ev := events.New(t)
	body, _ := json.Marshal(fields)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ev); err != nil {
		return nil, nil, fmt.Errorf("%s: %s", t, jsonProblem(err))
	}
	k, err := recordKey(fields, keyField, key)
	if err != nil {
		return nil, nil, err
	}
	return ev, k, nil
}

// jsonProblem rewords encoding/json errors so that they name the field and
// never quote the offending value (which may be personal data).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: must be %s, not a JSON %s", te.Field, jsonKind(te.Type.String()), te.Value)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return "a timestamp must be an RFC 3339 string, e.g. 2026-11-20T10:30:00Z"
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return strings.TrimPrefix(msg, "json: ") + " (a typo, or a field of another event type?)"
	}
	return "invalid JSON value"
}

func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string", "events.LinkState":
		return "a string"
	case "float64":
		return "a number"
	case "int64", "int32":
		return "an integer"
	case "bool":
		return "true or false"
	case "time.Time":
		return "an RFC 3339 timestamp string"
	}
	return goType
}

func joinTypes(ts []events.EventType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// recordKey picks the key: the literal key, the named field, or the first
// of loyaltyId, externalId, transactionId (docs/events.md's keying advice).
func recordKey(fields map[string]json.RawMessage, keyField, key string) ([]byte, error) {
	if key != "" {
		return []byte(key), nil
	}
	names := []string{"loyaltyId", "externalId", "transactionId"}
	if keyField != "" {
		names = []string{keyField}
	}
	for _, n := range names {
		raw, ok := fields[n]
		if !ok || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			if s == "" {
				continue
			}
			return []byte(s), nil
		}
		return bytes.TrimSpace(raw), nil // a number or boolean: its JSON text
	}
	return nil, fmt.Errorf("key: field %s is missing or empty", strings.Join(names, ", "))
}
