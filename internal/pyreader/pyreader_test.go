package pyreader

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

var at = time.Date(2026, 11, 27, 19, 58, 53, 209_000_000, time.UTC)

// refError is an error event as franz-go and codec read it, and errorLine
// the same record as read_replies.py prints it (shape taken from a real run).
func refError() (*kgo.Record, *events.LoyaltyError) {
	et := events.TypeRedemptionRequested
	return &kgo.Record{Topic: "refund.error", Partition: 1, Offset: 7, Key: []byte("py-r2"), Timestamp: at,
			Headers: []kgo.RecordHeader{{Key: "event-type", Value: []byte("RedemptionRequested")}, {Key: "attempts", Value: []byte("1")}}},
		&events.LoyaltyError{TransactionID: "py-r2", EventType: &et, Category: events.CategoryBusiness, HTTPStatus: ptr[int32](400),
			APIErrorCode: ptr("INSUFFICIENT_POINT"), Detail: "business error", Attempts: 1,
			Source:      events.ErrorSource{Topic: "refund", Partition: 0, Offset: 1, Timestamp: at.Add(-4 * time.Second)},
			OriginalKey: []byte("LB00000002"), OriginalValue: []byte{0, 0, 0, 0, 4, 0xde, 0xb1}, ProcessedAt: at}
}

const errorLine = `{"topic": "refund.error", "partition": 1, "offset": 7, "timestamp": 1795809533209, "headers": [{"key": "event-type", "value": "RedemptionRequested"}, {"key": "attempts", "value": "1"}], "key": "py-r2", "value": {"transactionId": "py-r2", "eventType": "RedemptionRequested", "category": "BUSINESS", "retryable": false, "reason": null, "httpStatus": 400, "apiStatusCode": null, "apiMessage": null, "apiErrorCode": "INSUFFICIENT_POINT", "apiErrorMessage": null, "apiErrorName": null, "resultUrl": null, "detail": "business error", "attempts": 1, "source": {"topic": "refund", "partition": 0, "offset": 1, "timestamp": {"$datetime": "2026-11-27T19:58:49.209000+00:00"}}, "originalKey": {"$bytes": "TEIwMDAwMDAwMg=="}, "originalValue": {"$bytes": "AAAAAATesQ=="}, "processedAt": {"$datetime": "2026-11-27T19:58:53.209000+00:00"}}}`

func refResult() (*kgo.Record, *events.LoyaltyResult) {
	return &kgo.Record{Topic: "onboard.result", Partition: 0, Offset: 1, Key: []byte("py-l2"), Timestamp: at},
		&events.LoyaltyResult{TransactionID: "py-l2", EventType: events.TypeMemberLinkRequested, LoyaltyID: ptr("LB00000003"),
			Outcome: events.OutcomeAlreadyLinked, LinkState: ptr(events.LinkStateLinked), StateChanged: ptr(false),
			APIErrorCode: ptr("MEMBER_IS_LINKED"), Attempts: 1, LatencyMs: 17, ProcessedAt: at,
			Source: events.Source{Topic: "onboard", Partition: 0, Offset: 1}}
}

const resultLine = `{"topic": "onboard.result", "partition": 0, "offset": 1, "timestamp": 1795809533209, "headers": [], "key": "py-l2", "value": {"transactionId": "py-l2", "eventType": "MemberLinkRequested", "loyaltyId": "LB00000003", "outcome": "ALREADY_LINKED", "bitReference": null, "sponsorId": null, "usedPoint": null, "points": null, "requestId": null, "memberCode": null, "createdAt": null, "apiTimestamp": null, "linkState": "LINKED", "stateChanged": false, "apiErrorCode": "MEMBER_IS_LINKED", "tierClass": null, "memberStatus": null, "eKycStatus": null, "attempts": 1, "latencyMs": 17, "processedAt": {"$datetime": "2026-11-27T19:58:53.209000+00:00"}, "source": {"topic": "onboard", "partition": 0, "offset": 1}, "clawbackTransactionId": null, "requestedPoints": null}}`

func record(t *testing.T, line string) Record {
	t.Helper()
	var r Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Every kind of difference is found and named by its field; the lines as
// printed match their references exactly.
func TestCompare(t *testing.T) {
	for name, tc := range map[string]struct {
		result    bool   // the result pair, not the error pair
		old, new  string // the edit of the line
		wantField string // "" means no difference; a trailing * any field so starting
	}{
		"error as read":               {},
		"result as read":              {result: true},
		"other key":                   {old: `"key": "py-r2"`, new: `"key": "py-r3"`, wantField: "key"},
		"null key":                    {old: `"key": "py-r2"`, new: `"key": null`, wantField: "key"},
		"other offset":                {old: `"offset": 7`, new: `"offset": 8`, wantField: "record"},
		"not decoded":                 {old: `"key": "py-r2", "value": {`, new: `"key": "py-r2", "error": "SerializationError: x", "value": {`, wantField: "record"},
		"other timestamp":             {old: `"timestamp": 1795809533209`, new: `"timestamp": 1796327933210`, wantField: "timestamp"},
		"other header value":          {old: `"value": "1"}`, new: `"value": "2"}`, wantField: "header[1] attempts"},
		"header as bytes, same value": {old: `"value": "1"}`, new: `"value_b64": "MQ=="}`},
		"null header":                 {old: `"value": "1"}`, new: `"value": null}`, wantField: "header[1] attempts"},
		"header missing":              {old: `, {"key": "attempts", "value": "1"}`, new: ``, wantField: "header[1] attempts"},
		"header extra":                {old: `"value": "1"}]`, new: `"value": "1"}, {"key": "x", "value": "y"}]`, wantField: "header[2] x"},
		"headers reordered": {old: `{"key": "event-type", "value": "RedemptionRequested"}, {"key": "attempts", "value": "1"}`,
			new: `{"key": "attempts", "value": "1"}, {"key": "event-type", "value": "RedemptionRequested"}`, wantField: "header[*"},
		"other string":         {old: `"detail": "business error"`, new: `"detail": "business"`, wantField: "value.detail"},
		"other enum":           {old: `"category": "BUSINESS"`, new: `"category": "AUTH"`, wantField: "value.category"},
		"null for a value":     {old: `"apiErrorCode": "INSUFFICIENT_POINT"`, new: `"apiErrorCode": null`, wantField: "value.apiErrorCode"},
		"a value for null":     {old: `"reason": null`, new: `"reason": "X"`, wantField: "value.reason"},
		"int as float":         {old: `"httpStatus": 400`, new: `"httpStatus": 400.0`, wantField: "value.httpStatus"},
		"int as string":        {old: `"attempts": 1,`, new: `"attempts": "1",`, wantField: "value.attempts"},
		"bool as int":          {old: `"retryable": false`, new: `"retryable": 0`, wantField: "value.retryable"},
		"nested field":         {old: `"partition": 0, "offset": 1`, new: `"partition": 0, "offset": 2`, wantField: "value.source.offset"},
		"field missing":        {old: `"resultUrl": null, `, new: ``, wantField: "value.resultUrl"},
		"field extra":          {old: `"resultUrl": null, `, new: `"resultUrl": null, "extra": 1, `, wantField: "value.extra"},
		"other bytes":          {old: `"AAAAAATesQ=="`, new: `"AAAAAATesg=="`, wantField: "value.originalValue"},
		"bytes as a string":    {old: `{"$bytes": "TEIwMDAwMDAwMg=="}`, new: `"LB00000002"`, wantField: "value.originalKey"},
		"naive datetime":       {old: `53.209000+00:00`, new: `53.209000`, wantField: "value.processedAt"},
		"other instant":        {old: `53.209000+00:00`, new: `53.209000+07:00`, wantField: "value.processedAt"},
		"same instant, +07:00": {old: `2026-11-27T19:58:53.209000+00:00`, new: `2026-11-28T02:58:53.209000+07:00`},
		"datetime as millis":   {old: `{"$datetime": "2026-11-27T19:58:53.209000+00:00"}`, new: `1795809533209`, wantField: "value.processedAt"},
		"record as a string":   {old: `"source": {"topic": "refund", "partition": 0, "offset": 1, "timestamp": {"$datetime": "2026-11-27T19:58:49.209000+00:00"}}`, new: `"source": "refund"`, wantField: "value.source"},
		"result bool":          {result: true, old: `"stateChanged": false`, new: `"stateChanged": true`, wantField: "value.stateChanged"},
		"result null enum":     {result: true, old: `"linkState": "LINKED"`, new: `"linkState": null`, wantField: "value.linkState"},
		"result int64":         {result: true, old: `"latencyMs": 17`, new: `"latencyMs": 18`, wantField: "value.latencyMs"},
	} {
		t.Run(name, func(t *testing.T) {
			line := errorLine
			rec, value := func() (*kgo.Record, any) { r, v := refError(); return r, v }()
			if tc.result {
				line = resultLine
				rec, value = func() (*kgo.Record, any) { r, v := refResult(); return r, v }()
			}
			if tc.old != "" {
				if !strings.Contains(line, tc.old) {
					t.Fatalf("the line has no %s", tc.old)
				}
				line = strings.Replace(line, tc.old, tc.new, 1)
			}
			diffs := Compare(rec, value, record(t, line))
			if tc.wantField == "" {
				if len(diffs) > 0 {
					t.Fatalf("differences: %q", diffs)
				}
				return
			}
			if len(diffs) == 0 {
				t.Fatalf("no difference found, want one for %s", tc.wantField)
			}
			for _, d := range diffs {
				prefix, wild := strings.CutSuffix(tc.wantField, "*")
				if !wild {
					prefix += ": "
				}
				if !strings.HasPrefix(d, prefix) {
					t.Errorf("difference %q, want it for %s alone", d, tc.wantField)
				}
			}
		})
	}
}

// A reference Compare cannot walk is a difference, not a silent pass.
func TestCompareUnknownKind(t *testing.T) {
	rec, _ := refResult()
	got := record(t, `{"topic": "onboard.result", "partition": 0, "offset": 1, "timestamp": 1795809533209, "headers": [], "key": "py-l2", "value": {"m": {}}}`)
	diffs := Compare(rec, &struct {
		M map[string]int `avro:"m"`
	}{}, got)
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], "value.m: the reference holds a map[string]int") {
		t.Fatalf("differences %q", diffs)
	}
}

// fakeReader writes a shell script that stands in for the Python reader:
// it prints out and exits with status code.
func fakeReader(t *testing.T, out string, code int) Options {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "reader.sh")
	body := "cat \"$(dirname \"$0\")/out\"\necho 'read_replies: reason' >&2\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{Python: sh, Script: script, Brokers: []string{"b:9092"}, Registry: "http://r", Topics: []string{"t"}, Timeout: time.Second}
}

// Read returns what the reader printed, and an error that says why for
// each way the reader can end badly.
func TestRead(t *testing.T) {
	undecoded := `{"topic": "t", "partition": 0, "offset": 3, "timestamp": 1, "headers": [], "error": "SerializationError: bad"}`
	for name, tc := range map[string]struct {
		out     string
		code    int
		n       int
		wantErr string
	}{
		"done":       {out: errorLine + "\n" + resultLine + "\n", n: 2},
		"nothing":    {n: 0},
		"timeout":    {out: errorLine + "\n", code: exitTimeout, n: 1, wantErr: "deadline 1s passed with 1 records read: read_replies: reason"},
		"undecoded":  {out: errorLine + "\n" + undecoded + "\n", code: exitUndecoded, n: 2, wantErr: "1 of 2 records not decoded, the first: t/0@3: SerializationError: bad"},
		"failed":     {out: errorLine + "\n", code: 1, n: 1, wantErr: "exit status 1 (stderr: read_replies: reason)"},
		"not JSON":   {out: errorLine + "\nTraceback\n", n: 1, wantErr: "output line 2"},
		"a cut line": {out: errorLine[:40], n: 0, wantErr: "output line 1"},
	} {
		t.Run(name, func(t *testing.T) {
			recs, err := Read(context.Background(), fakeReader(t, tc.out, tc.code))
			if len(recs) != tc.n {
				t.Errorf("%d records, want %d", len(recs), tc.n)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

func TestReadNeedsOptions(t *testing.T) {
	if _, err := Read(context.Background(), Options{Python: "python3"}); err == nil {
		t.Fatal("no error without brokers, registry and topics")
	}
}

// The script is where Script says, beside this package in the tree.
func TestScript(t *testing.T) {
	p, err := Script()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "read_replies.py" {
		t.Fatalf("script %s", p)
	}
}
