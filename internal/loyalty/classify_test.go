package loyalty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// answer is what the stand-in server says to every business request.
type answer struct {
	status      int
	contentType string
	body        string
}

var (
	callAccrue = func(c *loyalty.Client) (loyalty.CallInfo, error) {
		_, i, err := c.Accrue(context.Background(), accrual)
		return i, err
	}
	callLookup = func(c *loyalty.Client) (loyalty.CallInfo, error) {
		_, i, err := c.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: "LB1", TransactionID: "tx-1"})
		return i, err
	}
	callProfile = func(c *loyalty.Client) (loyalty.CallInfo, error) {
		_, i, err := c.CustomerInfo(context.Background(), "LB1")
		return i, err
	}
)

// serve answers every request with a, counting the requests.
func serve(a answer, n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
	}
}

// A 4xx without the API's error envelope comes from something in front of
// the API (gateway, proxy, load balancer): no route, method not allowed,
// body too large, media type refused. Sending it again cannot change the
// answer and says nothing about the API's health: it is terminal, made
// once, not an API failure, and names the status and the endpoint.
func TestUnenvelopedClientErrorIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer answer
		call   func(*loyalty.Client) (loyalty.CallInfo, error)
		op     string
	}{
		{"404 html write", answer{404, "text/html", `<html><body><h1>404 Not Found</h1>nginx</body></html>`}, callAccrue, "point-accrual tx=tx-1"},
		{"404 empty read", answer{404, "", ``}, callProfile, "user-profile member=LB1"},
		{"405 empty write", answer{405, "", ``}, callAccrue, "point-accrual tx=tx-1"},
		{"413 html write", answer{413, "text/html", `<html><head><title>413 Request Entity Too Large</title></head></html>`}, callAccrue, "point-accrual tx=tx-1"},
		{"415 gateway json read", answer{415, "application/json", `{"message":"Unsupported Media Type"}`}, callLookup, "lookup-transaction tx=tx-1"},
		{"404 envelope without errors", answer{404, "application/json", `{"statusCode":404,"message":"Not Found","errors":null}`}, callLookup, "lookup-transaction tx=tx-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			f := newFixture(t, serve(tc.answer, &n), func(o *loyalty.Options) { o.Retry.MaxAttempts = 3 })
			info, err := tc.call(f.client)
			if err == nil {
				t.Fatal("no error")
			}
			if n.Load() != 1 || info.Attempts != 1 || len(f.sleeps.All()) != 0 {
				t.Fatalf("%d requests, info %+v, waits %v: %v", n.Load(), info, f.sleeps.All(), err)
			}
			if loyalty.IsAPIFailure(err) || loyalty.IsAmbiguous(err) || info.Ambiguous || loyalty.Retryable(err) {
				t.Fatalf("API failure %v, ambiguous %v/%v, retryable %v: %v",
					loyalty.IsAPIFailure(err), loyalty.IsAmbiguous(err), info.Ambiguous, loyalty.Retryable(err), err)
			}
			if got := loyalty.Category(err); got != loyalty.CategoryInternal {
				t.Fatalf("category %s: %v", got, err)
			}
			if got := loyalty.HTTPStatus(err); got != tc.answer.status {
				t.Fatalf("HTTPStatus %d: %v", got, err)
			}
			var re *loyalty.RejectedError
			if !errors.As(err, &re) || re.HTTPStatus != tc.answer.status {
				t.Fatalf("%T %v, want *loyalty.RejectedError", err, err)
			}
			for _, want := range []string{fmt.Sprintf("HTTP %d", tc.answer.status), tc.op} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%q does not name %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "<html") || strings.Contains(err.Error(), "nginx") {
				t.Fatalf("error repeats the body: %v", err)
			}
		})
	}
}

// What stays as it was around the terminal 4xx: the envelope makes a
// business error, 401/403 are auth, 408/429/5xx are transient and retried
// (the circuit hears them), and an unreadable 2xx to a write is ambiguous.
func TestAnswerClassification(t *testing.T) {
	const maxAttempts = 3
	envelope := func(status int) string {
		return fmt.Sprintf(`{"statusCode":%d,"message":"Bad Request","errors":{"code":"INVALID_REQUEST","message":"x"}}`, status)
	}
	for _, tc := range []struct {
		name       string
		answer     answer
		call       func(*loyalty.Client) (loyalty.CallInfo, error)
		requests   int
		apiFailure bool
		ambiguous  bool
		category   loyalty.ErrorCategory
		is         func(error) bool
	}{
		{"400 envelope", answer{400, "application/json", envelope(400)}, callAccrue, 1, false, false, loyalty.CategoryBusiness, isBusiness},
		{"404 envelope", answer{404, "application/json", envelope(404)}, callLookup, 1, false, false, loyalty.CategoryBusiness, isBusiness},
		{"401 empty", answer{401, "", ``}, callAccrue, 2, false, false, loyalty.CategoryAuth, isAuth},
		{"403 html", answer{403, "text/html", `<html>Forbidden</html>`}, callProfile, 1, false, false, loyalty.CategoryAuth, isAuth},
		{"503 html read", answer{503, "text/html", `<html>Service Unavailable</html>`}, callLookup, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"500 empty read", answer{500, "", ``}, callLookup, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"502 html read", answer{502, "text/html", `<html>Bad Gateway</html>`}, callProfile, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"429 empty read", answer{429, "", ``}, callLookup, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"408 html read", answer{408, "text/html", `<html>Request Timeout</html>`}, callProfile, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"429 empty write", answer{429, "", ``}, callAccrue, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"503 empty write", answer{503, "", ``}, callAccrue, maxAttempts, true, false, loyalty.CategoryTransientExhausted, isTransient},
		{"500 empty write", answer{500, "", ``}, callAccrue, 1, true, true, loyalty.CategoryTransientExhausted, isTransient},
		{"200 garbage write", answer{200, "text/html", `<html>OK</html>`}, callAccrue, 1, true, true, loyalty.CategoryInternal, isMalformed},
		{"200 errors array write", answer{200, "application/json",
			`{"statusCode":200,"message":"SUCCESS","errors":[],"data":{"transactionId":"tx-1","bitReference":"B"}}`},
			callAccrue, 1, true, true, loyalty.CategoryInternal, isMalformed},
		{"200 garbage read", answer{200, "text/html", `<html>OK</html>`}, callLookup, 1, true, false, loyalty.CategoryInternal, isMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			f := newFixture(t, serve(tc.answer, &n), func(o *loyalty.Options) { o.Retry.MaxAttempts = maxAttempts })
			info, err := tc.call(f.client)
			if err == nil || !tc.is(err) {
				t.Fatalf("%T %v", err, err)
			}
			if n.Load() != int64(tc.requests) || info.Attempts != tc.requests {
				t.Fatalf("%d requests, %d attempts, want %d: %v", n.Load(), info.Attempts, tc.requests, err)
			}
			if loyalty.IsAPIFailure(err) != tc.apiFailure {
				t.Fatalf("IsAPIFailure %v: %v", !tc.apiFailure, err)
			}
			if loyalty.IsAmbiguous(err) != tc.ambiguous || info.Ambiguous != tc.ambiguous {
				t.Fatalf("ambiguous %v/%v, want %v: %v", loyalty.IsAmbiguous(err), info.Ambiguous, tc.ambiguous, err)
			}
			if got := loyalty.Category(err); got != tc.category {
				t.Fatalf("category %s, want %s: %v", got, tc.category, err)
			}
			if got := loyalty.HTTPStatus(err); got != tc.answer.status {
				t.Fatalf("HTTPStatus %d: %v", got, err)
			}
		})
	}
}

func isBusiness(err error) bool {
	var be *loyalty.BusinessError
	return errors.As(err, &be)
}

func isAuth(err error) bool {
	var ae *loyalty.AuthError
	return errors.As(err, &ae)
}

func isTransient(err error) bool {
	var te *loyalty.TransientError
	return errors.As(err, &te)
}

func isMalformed(err error) bool {
	var me *loyalty.MalformedResponseError
	return errors.As(err, &me)
}
