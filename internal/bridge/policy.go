package bridge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// recordState is what the attempts at one record share.
type recordState struct {
	id       string // the event's transactionId, for logs
	attempts int    // record attempts made (reported in the output)
	guard    bool   // look the transaction up before the next write
	guarded  bool   // a guard lookup was made
	probe    bool   // the current attempt is the circuit's half-open probe
	// counted is the partner the current attempt calls through, counting
	// its calls for the circuit (kept here: no allocation per attempt).
	counted countedPartner
	// The unrecognised hold (unrecognised.go): held, the record is in it
	// now; heldSince, when its first unrecognised answer came (the hold's
	// bound runs from there); heldTries, its back-off step; free, the
	// attempts that spent no budget because they were held.
	held      bool
	heldSince time.Time
	heldTries int
	free      int
	// A refund's clawback (clawback.go): clawSlot is the slot its ambiguous
	// write went to; legacyChecked, its clawback under its own id was looked
	// for.
	clawSlot      string
	legacyChecked bool
	// wireRefused holds, per wire choice the record's calls were refused
	// for, the partner's accepted count at the first refusal
	// (wirerefusal.go).
	wireRefused map[wireChoice]uint64
	// The transaction ledger (ledger.go): lg writes the record's intents
	// (nil without a ledger); ledgerSlot is the
	// clawback slot its refund's last intent named: its own slot, known
	// exactly rather than matched by amount.
	lg         *ledgered
	ledgerSlot string
	// settleAt is when the record's last ambiguous write has been applied
	// or never will be: the moment it returned (no later than its last
	// request was sent) plus the profile's apply window. No lookup of the
	// record runs before it, since a not-found before then is no answer.
	settleAt time.Time
	// originalMissingSince is when a refund's original was first not
	// found, for Options.OriginalGrace.
	originalMissingSince time.Time
	// heeds counts the attempts that sent nothing because another
	// process's intent of the transaction came first (order.go).
	heeds int
}

// middleware wraps a handler with one concern of the attempt policy.
type middleware func(handler) handler

// policy wraps h in the attempt policy, outermost first:
//
//   - retry spends the record's budget on transient failures, with
//     back-off, and marks the next write guarded after an ambiguous one;
//     an answer the partner profile does not name it holds instead
//     (unrecognised.go), spending no budget, for at most UnrecognisedHold;
//   - the auth hold admits each attempt, or holds it while the partner
//     refuses the credentials, and makes a refused attempt again once a
//     token is obtainable, without spending the record's budget;
//   - the circuit admits each attempt, or holds it while the API is down,
//     and hears whether the attempt found the API healthy;
//   - the guard looks a write's transaction up first when it may repeat an
//     earlier one, and turns a found one (or a duplicate answer that a
//     lookup confirms) into ALREADY_APPLIED.
//
// The order is the contract: the hold sits inside retry so that a refused
// attempt is not counted, and outside the circuit so that a held record
// takes no half-open probe slot while it waits; the guard's lookups run inside the circuit's
// admission (they are calls of that attempt), and a failed lookup is an
// attempt failure that retry sees.
func (b *Bridge) policy(st *recordState, h handler) handler {
	return chain(h, b.retry(st), b.hold(st), b.circuit(st), b.guard(st))
}

// chain wraps h in ms; ms[0] ends up outermost.
func chain(h handler, ms ...middleware) handler {
	for i := len(ms) - 1; i >= 0; i-- {
		h = ms[i](h)
	}
	return h
}

// retry runs next under the record's budget: transient failures are
// retried after a back-off, others end the record.
func (b *Bridge) retry(st *recordState) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			defer b.release(st)
			for tries := 0; ; tries++ {
				st.attempts++
				st.probe = false
				actx, aspan := b.span(ctx, tracing.SpanAttempt)
				if s := recording(aspan); s != nil {
					s.SetAttributes(attribute.Int(tracing.AttrRecordAttempt, st.attempts))
				}
				r, err := next(actx, p)
				endSpan(aspan, err)
				if !loyalty.IsUnrecognised(err) || ctx.Err() != nil {
					b.release(st)
				}
				if ok, werr := b.originalGrace(ctx, st, err, tries); werr != nil {
					return nil, werr
				} else if ok {
					continue
				}
				if err == nil || !transient(err) || ctx.Err() != nil {
					return r, err
				}
				if loyalty.IsUnrecognised(err) {
					// Held, not retried: no write, no budget spent, back
					// off and ask again until the hold's time is over.
					wait, err := b.holdUnrecognised(st, err)
					if err != nil {
						return nil, err
					}
					if err := b.wait(ctx, wait); err != nil {
						return nil, err
					}
					continue
				}
				if st.probe {
					// A failed probe says the API is still down, not that
					// this record is unlucky: it does not spend the
					// record's budget, or one record per open period would
					// be exhausted while the circuit holds the rest.
					st.attempts--
				}
				if loyalty.IsAmbiguous(err) {
					st.guard = true
				}
				if heeded(st, err) {
					st.attempts-- // another process's write, not this record's failure
				}
				if st.attempts-st.free >= b.o.RecordAttempts {
					return nil, exhausted(err)
				}
				b.log.Debug("attempt failed; retrying", zap.String("transactionId", st.id), zap.Int("attempt", st.attempts), zap.Error(err))
				// After an ambiguous write the back-off lasts at least until
				// the write has settled: the next attempt starts with a
				// lookup, which must not run inside the apply window. The
				// wait is here, outside the circuit and the lanes, holding
				// no pipeline slot.
				if err := b.wait(ctx, max(b.backoff(tries), time.Until(st.settleAt))); err != nil {
					return nil, err
				}
			}
		}
	}
}

// originalGrace waits for a refund's original that was not found, when
// the bridge does not park (Options.OriginalGrace): it reports true when
// the record should look again, after a back-off (no attempt spent). It
// returns ctx's error if the wait was cut short.
func (b *Bridge) originalGrace(ctx context.Context, st *recordState, err error, tries int) (bool, error) {
	var rf *recordFailure
	if b.o.ParkedTopic != "" || !errors.As(err, &rf) || !rf.originalMissing || ctx.Err() != nil {
		return false, nil
	}
	now := time.Now()
	if st.originalMissingSince.IsZero() {
		st.originalMissingSince = now
	}
	left := b.o.OriginalGrace - now.Sub(st.originalMissingSince)
	if left <= 0 {
		return false, nil
	}
	st.attempts-- // looking again is not another attempt
	b.log.Debug("refund's original not found yet; looking again", zap.String("transactionId", st.id), zap.Duration("left", left))
	if err := b.wait(ctx, min(b.o.RetryBackoff<<min(tries, 5), left)); err != nil {
		return false, err
	}
	return true, nil
}

// hold makes each attempt wait while the partner refuses the credentials
// (without a Hold, it is next): an attempt refused for the credentials
// (loyalty.IsCredentialRefused) waits in the hold and is made again once a
// token is obtainable; it never reaches retry, so it spends no budget and
// never becomes an AUTH error event.
func (b *Bridge) hold(st *recordState) middleware {
	return func(next handler) handler {
		if b.o.Hold == nil {
			return next
		}
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			for {
				done, err := b.o.Hold.Admit(ctx)
				if err != nil {
					return nil, err
				}
				r, err := next(ctx, p)
				done(err)
				if !loyalty.IsCredentialRefused(err) || ctx.Err() != nil {
					return r, err
				}
				b.log.Debug("attempt refused for the credentials; held", zap.String("transactionId", st.id), zap.Error(err))
			}
		}
	}
}

// circuit gates each attempt on the breaker (without one, it is next).
func (b *Bridge) circuit(st *recordState) middleware {
	return func(next handler) handler {
		if b.o.Breaker == nil {
			return next
		}
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			_, cspan := b.span(ctx, tracing.SpanCircuit)
			if s := recording(cspan); s != nil {
				s.SetAttributes(attribute.String(tracing.AttrCircuitState, b.o.Breaker.State().String()))
			}
			done, err := b.o.Breaker.Acquire(ctx)
			endSpan(cspan, err)
			if err != nil {
				return nil, err
			}
			st.probe = b.o.Breaker.State() == circuit.HalfOpen
			cp := &st.counted
			cp.partner = p
			cp.calls.Store(0)
			r, err := next(ctx, cp)
			if cp.calls.Load() == 0 {
				// The attempt ended before any call (answered from the
				// ledger, another process's intent heeded, a send-by
				// passed): it says nothing of the API's health, and a
				// probe that made no call must not close the circuit.
				st.probe = false
				done(circuit.ErrNotAttempted)
				return r, err
			}
			done(healthOf(err))
			return r, err
		}
	}
}

// countedPartner counts the calls an attempt makes, for the circuit.
type countedPartner struct {
	partner
	calls atomic.Int32
}

func (c *countedPartner) Accrue(ctx context.Context, r loyalty.AccrualRequest) (*loyalty.AccrualResult, error) {
	c.calls.Add(1)
	return c.partner.Accrue(ctx, r)
}

func (c *countedPartner) Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	c.calls.Add(1)
	return c.partner.Redeem(ctx, r)
}

func (c *countedPartner) LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	c.calls.Add(1)
	return c.partner.LookupTransaction(ctx, r)
}

func (c *countedPartner) Onboard(ctx context.Context, r loyalty.OnboardRequest) (*loyalty.OnboardedMember, error) {
	c.calls.Add(1)
	return c.partner.Onboard(ctx, r)
}

func (c *countedPartner) Link(ctx context.Context, r loyalty.LinkRequest) error {
	c.calls.Add(1)
	return c.partner.Link(ctx, r)
}

func (c *countedPartner) Unlink(ctx context.Context, r loyalty.LinkRequest) error {
	c.calls.Add(1)
	return c.partner.Unlink(ctx, r)
}

func (c *countedPartner) CustomerInfo(ctx context.Context, loyaltyID string) (*loyalty.MemberProfile, error) {
	c.calls.Add(1)
	return c.partner.CustomerInfo(ctx, loyaltyID)
}

func (c *countedPartner) CustomerProfile(ctx context.Context, loyaltyID string) (*loyalty.ExtendedProfile, error) {
	c.calls.Add(1)
	return c.partner.CustomerProfile(ctx, loyaltyID)
}

// guard gives next a partner whose writes are guarded.
func (b *Bridge) guard(st *recordState) middleware {
	return func(next handler) handler {
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			r, err := next(ctx, &guardedPartner{partner: p, b: b, st: st})
			var aa *alreadyApplied
			if errors.As(err, &aa) {
				return aa.result, nil
			}
			return r, err
		}
	}
}

// alreadyApplied ends a handler whose write was found applied already; the
// guard middleware turns it into the result.
type alreadyApplied struct{ result *events.LoyaltyResult }

func (a *alreadyApplied) Error() string { return "bridge: transaction already applied" }

// guardedPartner guards accruals and redemptions: a lookup first when the
// write may repeat an earlier one, and a lookup after a duplicate answer.
type guardedPartner struct {
	partner
	b  *Bridge
	st *recordState
}

func (g *guardedPartner) Accrue(ctx context.Context, r loyalty.AccrualRequest) (*loyalty.AccrualResult, error) {
	if err := g.check(ctx, r.LoyaltyID, r.TransactionID, partnerprofile.Accrual); err != nil {
		return nil, err
	}
	res, err := sent(ctx, g, r.TransactionID, "", func(ctx context.Context) (*loyalty.AccrualResult, error) { return g.partner.Accrue(ctx, r) })
	if err != nil {
		return nil, g.writeFailed(ctx, r.LoyaltyID, r.TransactionID, partnerprofile.Accrual, err)
	}
	return res, nil
}

func (g *guardedPartner) Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	if err := g.check(ctx, r.LoyaltyID, r.TransactionID, partnerprofile.Redemption); err != nil {
		return nil, err
	}
	res, err := sent(ctx, g, r.TransactionID, "", func(ctx context.Context) (*loyalty.RedemptionResult, error) { return g.partner.Redeem(ctx, r) })
	if err != nil {
		return nil, g.writeFailed(ctx, r.LoyaltyID, r.TransactionID, partnerprofile.Redemption, err)
	}
	return res, nil
}

// intend makes the write's intent durable in the ledger before it is
// sent (nothing without a ledger). A Kafka that refuses it for good ends
// the record as an INTERNAL error event, nothing sent.
func (g *guardedPartner) intend(ctx context.Context, txID, slot string) error {
	if g.st.lg == nil {
		return nil
	}
	heed, err := g.st.lg.intend(ctx, g.b.log, slot)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &recordFailure{cat: events.CategoryInternal, err: fmt.Errorf("bridge: %s: nothing sent: %w", txID, err)}
	}
	if slot != "" {
		g.st.ledgerSlot = slot
	}
	return g.heed(txID, heed)
}

// maxLate bounds how many times one write is intended again because the
// partner client found its intent too old to send on (loyalty.ErrSendLate:
// its gate or call slot waited past ledger.SendWithin); past it, the
// record's attempt fails, retryable, nothing sent.
const maxLate = 8

// sent intends the write (intend), then makes it with call under the
// intent's send-by time (loyalty.WithSendBy: no attempt of it leaves after
// the time other processes are told it may), intending again when the
// client sent nothing for being late. txID names the transaction, slot a
// refund's clawback slot.
func sent[T any](ctx context.Context, g *guardedPartner, txID, slot string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	for late := 0; ; late++ {
		if err := g.intend(ctx, txID, slot); err != nil {
			return zero, err
		}
		cctx := ctx
		if g.st.lg != nil && g.st.lg.w != nil {
			cctx = loyalty.WithSendBy(ctx, g.st.lg.w.SendBy())
		}
		res, err := call(cctx)
		if err == nil || !errors.Is(err, loyalty.ErrSendLate) || late >= maxLate {
			return res, err
		}
		g.b.log.Debug("write not sent: its intent grew too old waiting for its turn; intending again", zap.String("transactionId", txID), zap.Int("try", late+1))
	}
}

// check runs the guard when the record needs it: an *alreadyApplied when
// the transaction exists.
func (g *guardedPartner) check(ctx context.Context, loyaltyID, txID string, kind partnerprofile.Kind) error {
	if !g.st.guard {
		return nil
	}
	g.st.guarded = true
	if err := g.settled(ctx, time.Time{}); err != nil {
		return err
	}
	if err := g.lookup(ctx, loyaltyID, txID, kind); err != nil {
		return err
	}
	g.st.guard = false
	return nil
}

// lookup asks whether txID of kind was applied: an *alreadyApplied if so,
// nil if it was not (not found, or found with a failed status), a
// BUSINESS TRANSACTION_ID_CONFLICT if a partner keyed by id alone holds
// txID as the other kind, or the lookup's failure, an answer the profile
// does not name included (the other kind, from a partner keyed by id and
// type: ours may be beside it, unseen).
func (g *guardedPartner) lookup(ctx context.Context, loyaltyID, txID string, kind partnerprofile.Kind) error {
	ctx, span := g.b.span(ctx, tracing.SpanGuardLookup)
	t, err := g.partner.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: loyaltyID, TransactionID: txID})
	v, err := loyalty.ClassifyLookup(g.b.o.Profile, kind, t, err)
	result := "error"
	switch v {
	case loyalty.LookupApplied:
		result = "found"
	case loyalty.LookupNotFound, loyalty.LookupMemberNotFound:
		// A member the partner does not know has nothing applied, and the
		// write goes ahead to be refused as an unguarded one is.
		result, err = "not_found", nil
	case loyalty.LookupOtherKind:
		// Keyed by id alone, the partner holds one transaction under txID,
		// of the other kind: this one was not applied, and can never be
		// under this id. Held, nothing would change; written, it would
		// collide with the other (refused, answered with the other's data,
		// or applied over it). The partner's own refusal, in effect.
		result = "other_kind"
		err = &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonTransactionIDConflict,
			err: fmt.Errorf("%s %s: the partner holds this transactionId as a %s and keys transactions by id alone (--partner-transaction-key id): not applied, and not written, since a write would collide with it",
				kind, txID, partnertext.Scrubber{}.Code(t.TransactionType))}
	case loyalty.LookupNotApplied:
		result = "not_applied"
	case loyalty.LookupUnrecognised:
		result = "unrecognised"
	}
	if m := g.b.o.Metrics; m != nil {
		m.GuardLookups.WithLabelValues(result).Inc()
	}
	if s := recording(span); s != nil {
		s.SetAttributes(attribute.String(tracing.AttrGuardResult, result))
	}
	endSpan(span, nil)
	if v != loyalty.LookupApplied {
		return err
	}
	r := &events.LoyaltyResult{Outcome: events.OutcomeAlreadyApplied, LoyaltyID: &loyaltyID,
		BitReference: optional(t.BitReference), Points: ptr(t.TransactionPoint), RequestID: optional(t.RequestID),
		APITimestamp: optional(t.Timestamp)}
	if kind == partnerprofile.Redemption {
		r.UsedPoint = ptr(t.TransactionPoint)
	}
	g.b.log.Debug("already applied", zap.String("transactionId", txID), zap.Stringer("kind", kind))
	return &alreadyApplied{result: r}
}

// writeFailed handles a failed accrual or redemption: a duplicate (a code
// the profile names) is looked up (ALREADY_APPLIED), an ambiguous failure
// guards the next attempt.
func (g *guardedPartner) writeFailed(ctx context.Context, loyaltyID, txID string, kind partnerprofile.Kind, err error) error {
	if loyalty.IsDuplicate(g.b.o.Profile, err) {
		g.b.log.Debug("write answered duplicate; looking it up", zap.String("transactionId", txID), zap.Stringer("kind", kind),
			zap.Bool("guarded", g.st.guarded))
		lerr := g.lookup(ctx, loyaltyID, txID, kind)
		var aa *alreadyApplied
		switch {
		case errors.As(lerr, &aa):
			return lerr
		case lerr != nil:
			g.st.guard = true
			return lerr
		}
		// Duplicate by the partner's account but not applied by lookup:
		// nothing to apply twice, and nothing to report as applied.
		return err
	}
	if loyalty.IsAmbiguous(err) {
		g.st.guard = true
		g.unsettled()
	}
	return err
}

// unsettled records that the record's write just returned ambiguous: it
// may be applied until the apply window has passed, and it returns the
// moment that happens. The write's return is taken for its sending: the
// client sends a write's last request before it returns, so this errs on
// the side of waiting longer (by the attempt's time, at most the call
// timeout).
func (g *guardedPartner) unsettled() time.Time {
	g.st.settleAt = time.Now().Add(g.b.o.Profile.Window())
	return g.st.settleAt
}

// settled waits (the record's pipeline slot given back) until the record's
// last ambiguous write and also, for a non-zero other, another write the
// caller depends on, have settled. retry already waits out the record's
// own before its next attempt, so that wait is rarely more than nothing
// here; it makes sure that no lookup reads a not-found inside the window.
func (g *guardedPartner) settled(ctx context.Context, other time.Time) error {
	if d := time.Until(later(g.st.settleAt, other)); d > 0 {
		g.b.log.Debug("waiting for an ambiguous write to settle before looking it up", zap.String("transactionId", g.st.id), zap.Duration("wait", d))
		return sleep(ctx, d)
	}
	return ctx.Err()
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// clientPartner is the partner over the loyalty client. It signs an
// unsigned redemption afresh on every call: a sign made before an outage
// may have expired after it.
type clientPartner struct {
	c      *loyalty.Client
	signer *signing.Signer
	prof   *partnerprofile.Profile // the Bridge's: a Profile is 528 bytes, and a copy per record was 1 KB of its allocations
	wire   wireCheck
}

func (p clientPartner) Accrue(ctx context.Context, r loyalty.AccrualRequest) (*loyalty.AccrualResult, error) {
	res, _, err := p.c.Accrue(ctx, r)
	return res, p.wire.after(wireAccrualDate, err, "transactionDate")
}

func (p clientPartner) Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	ours := r.Sign == "" // signed here or by the client, not passed through
	if r.Sign == "" && p.signer != nil {
		s, err := p.signer.RedemptionSign(loyalty.SignedFields(r))
		if err != nil {
			return nil, &recordFailure{cat: events.CategoryInternal, err: fmt.Errorf("bridge: sign redemption %s: %w", r.TransactionID, err)}
		}
		r.Sign = s
	}
	res, _, err := p.c.Redeem(ctx, r)
	if ours {
		err = signRefused(*p.prof, err)
	}
	return res, p.wire.after(wireRedemptionDate, err, "transactionDate")
}

// signRefused makes a refusal of a sign the bridge made a refusal of the
// credentials: the partner does not take the JWTs the bridge's settings
// or key make, which no record can fix and no retry changes. The auth
// hold then holds every record, with one log line and its metrics, until
// an attempt is taken. A passed-through sign refused stays that record's
// business error.
func signRefused(prof partnerprofile.Profile, err error) error {
	var be *loyalty.BusinessError
	if !errors.As(err, &be) || !prof.IsSignRefused(be.APICode()) {
		return err
	}
	return &loyalty.AuthError{Op: be.Op, Ref: be.Ref, HTTPStatus: be.HTTPStatus, Code: be.APICode(),
		Err: heldFor{reason: "the partner refuses the sign the bridge makes", err: fmt.Errorf("the partner refused the sign the bridge made (%q): check --partner-key and the --partner-jwt-* and --partner-sign-* settings against the partner's documentation (loyalty-bridge api sign --explain): %w",
			partnertext.Scrubber{}.Text(be.Message), be)}}
}

// heldFor is the cause of a hold that is not about credentials: its
// reason heads the hold's log line and the operator's status
// (authhold.Reason), so that nobody on call chases a password when the
// partner refuses a sign or a date encoding.
type heldFor struct {
	reason string
	err    error
}

func (h heldFor) Error() string      { return h.err.Error() }
func (h heldFor) Unwrap() error      { return h.err }
func (h heldFor) HoldReason() string { return h.reason }

func (p clientPartner) LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	t, _, err := p.c.LookupTransaction(ctx, r)
	return t, err
}

func (p clientPartner) Onboard(ctx context.Context, r loyalty.OnboardRequest) (*loyalty.OnboardedMember, error) {
	m, _, err := p.c.Onboard(ctx, r)
	return m, p.wire.after(wireUnsetKeyed, err, unsetDocuments(r)...)
}

func (p clientPartner) Link(ctx context.Context, r loyalty.LinkRequest) error {
	_, _, err := p.c.Link(ctx, r)
	return err
}

func (p clientPartner) Unlink(ctx context.Context, r loyalty.LinkRequest) error {
	_, _, err := p.c.Unlink(ctx, r)
	return err
}

func (p clientPartner) CustomerInfo(ctx context.Context, loyaltyID string) (*loyalty.MemberProfile, error) {
	m, _, err := p.c.CustomerInfo(ctx, loyaltyID)
	return m, err
}

func (p clientPartner) CustomerProfile(ctx context.Context, loyaltyID string) (*loyalty.ExtendedProfile, error) {
	m, _, err := p.c.CustomerProfile(ctx, loyaltyID)
	return m, err
}

// recordFailure ends a record with a category the bridge decides, rather
// than the one the client's error type maps to. Never retried.
type recordFailure struct {
	cat    events.Category
	reason string
	err    error
	// originalMissing: a refund whose original the partner does not know
	// (yet); with parking it is parked, not answered (park.go).
	originalMissing bool
}

func (f *recordFailure) Error() string { return f.err.Error() }
func (f *recordFailure) Unwrap() error { return f.err }

// healthOf is what an attempt's error tells the circuit: only API failures
// count; an answer of any kind (business error, refused credentials) is a
// healthy API.
func healthOf(err error) error {
	if loyalty.IsAPIFailure(err) {
		return err
	}
	return nil
}

// transient: may succeed if tried again.
func transient(err error) bool {
	var rf *recordFailure
	if errors.As(err, &rf) {
		return false
	}
	var aw *anotherWriter
	if errors.As(err, &aw) {
		return true
	}
	var me *loyalty.MalformedResponseError
	return loyalty.Category(err) == loyalty.CategoryTransientExhausted || errors.As(err, &me)
}

// backoff is full jitter over RetryBackoff × 2^n, capped at 32×.
func (b *Bridge) backoff(n int) time.Duration {
	ceil := b.o.RetryBackoff << min(max(n, 0), 5)
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// sleep frees the record's pipeline slot while it waits (pipeline.Wait).
func sleep(ctx context.Context, d time.Duration) error { return pipeline.Wait(ctx, d) }
