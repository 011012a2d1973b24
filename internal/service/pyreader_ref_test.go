package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pyreader"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The reference side of TestPythonReaderReadsReplies: what franz-go and our
// codec read from the reply topics, and the partner answer it needs.

// withResultURL puts a proxy in front of the simulator that adds
// data.resultUrl to the accrual's business errors, as a partner may: the
// simulator sends one only with onboarding's, whose error events drop it.
func withResultURL(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != sim.PathAccrual || resp.StatusCode != http.StatusBadRequest {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var env map[string]any
		if json.Unmarshal(b, &env) == nil && env["errors"] != nil {
			env["data"] = map[string]any{"resultUrl": "https://partner.example/accrual/result?errorCode=MEMBER_NOT_FOUND"}
			if b, err = json.Marshal(env); err != nil {
				return err
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// refRecord is a reply as franz-go read it and codec decoded it.
type refRecord struct {
	at     coord
	rec    *kgo.Record
	value  any   // *events.LoyaltyResult or *events.LoyaltyError
	source coord // the input it answers
}

// reference reads the reply topics read_committed with franz-go, decoding
// with our codec, from the test's start to its end.
type reference struct {
	mu    sync.Mutex
	byAt  map[coord]refRecord
	fails []string
}

func readReference(ctx context.Context, t *testing.T, seeds []string, cd *codec.Codec, topics []string) *reference {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	ref := &reference{byAt: map[coord]refRecord{}}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for fctx.Err() == nil {
			cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
				at := coord{r.Topic, r.Partition, r.Offset}
				v, err := cd.Decode(fctx, r.Topic, r.Value)
				ref.mu.Lock()
				defer ref.mu.Unlock()
				if err != nil {
					ref.fails = append(ref.fails, fmt.Sprintf("%s: %v", at, err))
					return
				}
				rr := refRecord{at: at, rec: r, value: v}
				switch v := v.(type) {
				case *events.LoyaltyResult:
					rr.source = coord{v.Source.Topic, v.Source.Partition, v.Source.Offset}
				case *events.LoyaltyError:
					rr.source = coord{v.Source.Topic, v.Source.Partition, v.Source.Offset}
				}
				ref.byAt[at] = rr
			})
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		cl.Close()
		ref.mu.Lock()
		defer ref.mu.Unlock()
		for _, f := range ref.fails {
			t.Errorf("reference: %s", f)
		}
	})
	return ref
}

// answers reports whether every input has a reply.
func (ref *reference) answers(ins []pyInput) bool {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	answered := map[coord]bool{}
	for _, r := range ref.byAt {
		answered[r.source] = true
	}
	for _, in := range ins {
		if !answered[in.at] {
			return false
		}
	}
	return true
}

func (ref *reference) count() int {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	return len(ref.byAt)
}

func (ref *reference) get(at coord) (refRecord, bool) {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	r, ok := ref.byAt[at]
	return r, ok
}

// hasAll reports whether the reference has read every record of got but
// except.
func (ref *reference) hasAll(got []pyreader.Record, except coord) bool {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	for _, g := range got {
		at := coord{g.Topic, g.Partition, g.Offset}
		if _, ok := ref.byAt[at]; !ok && at != except {
			return false
		}
	}
	return true
}

// all returns the records in log order.
func (ref *reference) all() []refRecord {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	out := make([]refRecord, 0, len(ref.byAt))
	for _, r := range ref.byAt {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b refRecord) int {
		return strings.Compare(a.at.String(), b.at.String())
	})
	return out
}

// neverSet lists the pointer and slice fields of LoyaltyResult and
// LoyaltyError that are nil in every reply read.
func (ref *reference) neverSet() []string {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	set := map[string]bool{}
	all := map[string]bool{}
	for _, r := range ref.byAt {
		v := reflect.ValueOf(r.value).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if k := f.Type.Kind(); k != reflect.Pointer && k != reflect.Slice {
				continue
			}
			name := v.Type().Name() + "." + f.Name
			all[name] = true
			if !v.Field(i).IsNil() {
				set[name] = true
			}
		}
	}
	var miss []string
	for name := range all {
		if !set[name] {
			miss = append(miss, name)
		}
	}
	slices.Sort(miss)
	return miss
}

// checkCases holds each input's reply to what the input was meant to come
// to, so that a change in the bridge cannot quietly shrink what this test
// compares.
func (ref *reference) checkCases(t *testing.T, ins []pyInput) {
	t.Helper()
	ref.mu.Lock()
	defer ref.mu.Unlock()
	for _, in := range ins {
		for _, r := range ref.byAt {
			if r.source != in.at {
				continue
			}
			if err := in.check(r.value); err != nil {
				t.Errorf("input %s (%s): %v", in.at, in.what, err)
			}
		}
	}
}
