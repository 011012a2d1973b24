package loyalty_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// padded is an answer of exactly size bytes: body, then spaces, which JSON
// ignores, so that only its size can make it unreadable.
func padded(body string, size int) string {
	return body + strings.Repeat(" ", size-len(body))
}

const successBody = `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"LB1"}}`

// TestLargeAnswersAreMalformedAndNotRead: an answer of 1 MiB, whatever its
// status, is a malformed answer that names the limit, and the client reads
// no more of it than the default limit (64 KiB) and a byte — none at all
// when its Content-Length says it is over. A partner or gateway answering
// large pages under load cannot make every call in flight hold a megabyte.
func TestLargeAnswersAreMalformedAndNotRead(t *testing.T) {
	const size = 1 << 20
	const limit = 64 << 10
	for _, c := range []struct {
		name          string
		status        int
		body          string
		contentLength bool
		write         bool
		ambiguous     bool
	}{
		{"200 read", 200, successBody, false, false, false},
		{"200 read, Content-Length", 200, successBody, true, false, false},
		{"200 write", 200, `{"statusCode":200,"message":"SUCCESS","data":{"transactionId":"tx-1"}}`, false, true, true},
		{"500 read", 500, "<html>gateway error</html>", false, false, false},
		{"500 read, Content-Length", 500, "<html>gateway error</html>", true, false, false},
		{"500 write", 500, "<html>gateway error</html>", false, true, true},
		{"503 write", 503, "<html>busy</html>", false, true, false},
		// Neither 2xx nor 5xx: a redirect is never followed, so the write
		// was not processed where it was sent.
		{"300 write", 300, "<html>choices</html>", false, true, false},
		{"404 read", 404, "<html>no route</html>", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			ct := &testkit.CountingTransport{RT: &http.Transport{}}
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if c.contentLength {
					w.Header().Set("Content-Length", strconv.Itoa(size))
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, padded(c.body, size))
			}, func(o *loyalty.Options) { o.HTTPClient = &http.Client{Transport: ct} })
			defer ct.RT.(*http.Transport).CloseIdleConnections()
			var err error
			var info loyalty.CallInfo
			if c.write {
				_, info, err = f.client.Accrue(context.Background(), accrual)
			} else {
				_, info, err = f.client.CustomerInfo(context.Background(), "LB1")
			}
			var me *loyalty.MalformedResponseError
			if !errors.As(err, &me) || me.HTTPStatus != c.status {
				t.Fatalf("got %v, want a malformed answer (HTTP %d)", err, c.status)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(limit)) {
				t.Errorf("%v does not name the limit", err)
			}
			if me.Ambiguous != c.ambiguous || info.Ambiguous != c.ambiguous || loyalty.IsAmbiguous(err) != c.ambiguous {
				t.Errorf("ambiguous %v (info %v), want %v", me.Ambiguous, info.Ambiguous, c.ambiguous)
			}
			if !loyalty.IsAPIFailure(err) {
				t.Errorf("%v is not an API failure", err)
			}
			if n := calls.Load(); n != 1 || info.Attempts != 1 {
				t.Errorf("%d requests, %d attempts: want 1", n, info.Attempts)
			}
			read, most := ct.Read(), int64(limit+1)
			if c.contentLength {
				most = 0
			}
			if read > most {
				t.Errorf("read %d bytes of the body, want at most %d", read, most)
			}
		})
	}
}

// TestMaxResponseBytes: the limit is the client's option; an answer at
// the limit is read, one a byte over is not, and New refuses a limit out
// of range.
func TestMaxResponseBytes(t *testing.T) {
	const limit = 1000
	for _, c := range []struct {
		size     int
		accepted bool
	}{{limit, true}, {limit + 1, false}} {
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, padded(successBody, c.size))
		}, func(o *loyalty.Options) { o.MaxResponseBytes = limit })
		info, _, err := f.client.CustomerInfo(context.Background(), "LB1")
		switch {
		case c.accepted && (err != nil || info.LoyaltyID != "LB1"):
			t.Errorf("%d bytes: %v", c.size, err)
		case !c.accepted && (!errors.Is(err, loyalty.ErrResponseTooLarge) || !strings.Contains(err.Error(), "1000 bytes")):
			t.Errorf("%d bytes: %v", c.size, err)
		}
	}
	for _, bad := range []int{-1, loyalty.MaxResponseBytesLimit + 1} {
		_, err := loyalty.New(loyalty.Options{BaseURL: "http://127.0.0.1", Tokens: &tokens{}, MaxResponseBytes: bad})
		if err == nil || !strings.Contains(err.Error(), "MaxResponseBytes") {
			t.Errorf("MaxResponseBytes %d: %v", bad, err)
		}
	}
	// The limit itself is a setting, not past it.
	if _, err := loyalty.New(loyalty.Options{BaseURL: "http://127.0.0.1", Tokens: &tokens{}, MaxResponseBytes: loyalty.MaxResponseBytesLimit}); err != nil {
		t.Errorf("MaxResponseBytes at the limit: %v", err)
	}
}
