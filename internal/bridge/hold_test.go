package bridge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// refusingPartner answers the first refusals links with refused.
type refusingPartner struct {
	*fakePartner
	refusals int
	refused  error
}

func (r *refusingPartner) Link(ctx context.Context, req loyalty.LinkRequest) error {
	if r.refusals > 0 {
		r.refusals--
		r.calls = append(r.calls, "link refused")
		return r.refused
	}
	return r.fakePartner.Link(ctx, req)
}

// tokensAfter refuses grants until ok is set.
type tokensAfter struct{ ok atomic.Bool }

func (t *tokensAfter) Token(context.Context) (tokensource.Token, error) {
	if !t.ok.Load() {
		return tokensource.Token{}, &tokensource.Error{Grant: "password", Status: 401, Code: "invalid_grant"}
	}
	return tokensource.Token{AccessToken: "t"}, nil
}

// An attempt refused for the credentials is held, not counted: the record
// waits until a token is obtainable and its attempt is accepted, with one
// attempt of its budget spent. A 403 is the record's own AUTH error.
func TestPolicyHoldsRefusedCredentials(t *testing.T) {
	grantRefused := &loyalty.AuthError{Op: "link-member", HTTPStatus: 401, Code: "invalid_grant",
		Err: &tokensource.Error{Grant: "password", Status: 401, Code: "invalid_grant"}}
	for _, tc := range []struct {
		name     string
		refused  error
		held     bool
		wantErr  bool
		wantCall int
	}{
		{name: "token grant refused", refused: grantRefused, held: true, wantCall: 4},
		{name: "401 after renewal", refused: &loyalty.AuthError{Op: "link-member", HTTPStatus: 401}, held: true, wantCall: 4},
		{name: "403 forbidden", refused: &loyalty.AuthError{Op: "link-member", HTTPStatus: 403}, wantErr: true, wantCall: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tokens := &tokensAfter{}
				var refusedCount, changes atomic.Int32
				hold, err := authhold.New(authhold.Options{Tokens: tokens, Backoff: time.Second, MaxBackoff: 4 * time.Second,
					OnRefused: func() { refusedCount.Add(1) }, OnChange: func(bool) { changes.Add(1) }})
				if err != nil {
					t.Fatal(err)
				}
				b := &Bridge{o: Options{RecordAttempts: 1, RetryBackoff: time.Millisecond, Hold: hold}, log: zap.NewNop()}
				h, err := handlerFor(&events.MemberLinkRequested{TransactionID: "K-1", LoyaltyID: "L-1", PartnerMemberID: "P-1"}, &partnerprofile.Profile{})
				if err != nil {
					t.Fatal(err)
				}
				p := &refusingPartner{fakePartner: &fakePartner{}, refusals: 3, refused: tc.refused}
				st := &recordState{}
				type answer struct {
					r   *events.LoyaltyResult
					err error
				}
				ch := make(chan answer, 1)
				go func() {
					r, err := b.policy(st, h)(t.Context(), p)
					ch <- answer{r, err}
				}()
				synctest.Wait()
				if tc.held {
					if !hold.Held() || !errors.Is(hold.Health(), authhold.ErrHeld) {
						t.Fatalf("not held after a refusal: %v", hold.Health())
					}
					select {
					case a := <-ch:
						t.Fatalf("answered while the credentials are refused: %v, %v", a.r, a.err)
					default:
					}
					// Probes while no token is obtainable call nothing.
					time.Sleep(time.Minute)
					synctest.Wait()
					if len(p.calls) != 1 {
						t.Fatalf("calls while no token is obtainable: %v", p.calls)
					}
					tokens.ok.Store(true)
				}
				// Bounded by the bubble's clock: an attempt that is held
				// for good (a 403 taken for refused credentials) fails
				// here, once the hold has probed for a while, rather than
				// hanging until the test binary's timeout.
				var a answer
				select {
				case a = <-ch:
				case <-time.After(time.Hour):
					t.Fatalf("no answer after an hour of the hold's probing: held %v, calls %v", hold.Held(), p.calls)
				}
				if tc.wantErr {
					if loyalty.Category(a.err) != loyalty.CategoryAuth {
						t.Fatalf("got %v, %v; want an AUTH error", a.r, a.err)
					}
				} else if a.err != nil || a.r.Outcome != events.OutcomeLinked {
					t.Fatalf("got %v, %v; want LINKED", a.r, a.err)
				}
				if len(p.calls) != tc.wantCall || st.attempts != 1 {
					t.Fatalf("calls %v, attempts %d", p.calls, st.attempts)
				}
				if hold.Held() || hold.Health() != nil {
					t.Fatalf("still held: %v", hold.Health())
				}
				if tc.held && changes.Load() != 2 {
					t.Fatalf("%d changes of state, want 2 (held, released)", changes.Load())
				}
				if !tc.held && (changes.Load() != 0 || refusedCount.Load() != 0) {
					t.Fatalf("a 403 changed the hold: %d changes, %d refusals", changes.Load(), refusedCount.Load())
				}
			})
		})
	}
}
