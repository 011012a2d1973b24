package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/offsetspan"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Defaults of Options.
const (
	// DefaultConcurrency: lookups in progress at once.
	DefaultConcurrency = 8
	// DefaultMaxTransactions: transactions one run holds in memory (a few
	// hundred bytes each).
	DefaultMaxTransactions = 1_000_000
)

// Partner is the partner API as reconcile needs it: one read.
// *loyalty.Client is one.
type Partner interface {
	LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, loyalty.CallInfo, error)
}

// Options configures a Reconciler. Kafka, Codec and Partner are required.
type Options struct {
	// Kafka are the connection options (seeds, TLS, SASL) of the
	// reconciler's own clients. Group options do not belong here.
	Kafka []kgo.Opt
	// Codec decodes reply records and the input records they answer.
	Codec *codec.Codec
	// Partner answers the lookups.
	Partner Partner
	// Profile is how the partner names things the spec leaves open (its
	// not-found codes, transaction types, applied and failed statuses):
	// loyalty.ClassifyLookup reads every answer through it, as the
	// bridge's guard and refunds do. Zero value: partnerprofile.Default,
	// the simulator's names.
	Profile partnerprofile.Profile
	// Concurrency bounds lookups in progress (default DefaultConcurrency).
	Concurrency int
	// Rate bounds lookups started per second (0: no bound). A
	// reconciliation shares the partner API with the live bridge.
	Rate float64
	// MaxTransactions bounds the transactions of one run, held in memory
	// until they are looked up (default DefaultMaxTransactions): a window
	// that holds more fails before any lookup, asking for a narrower one.
	MaxTransactions int
	// Progress, when set, is told after each lookup how many of the
	// planned ones are done. Calls never overlap.
	Progress func(done, planned int)
}

// Request is one reconciliation: the replies to Inputs written from Since
// up to Until (zero: the end when Run starts), by record timestamp.
type Request struct {
	Inputs       []string
	Since, Until time.Time
}

// Reconciler compares the bridge's replies with the partner's records.
type Reconciler struct {
	o Options
}

// New checks o and fills its defaults. It connects to nothing.
func New(o Options) (*Reconciler, error) {
	switch {
	case o.Codec == nil:
		return nil, errors.New("reconcile: Options.Codec is required")
	case o.Partner == nil:
		return nil, errors.New("reconcile: Options.Partner is required")
	case o.Rate < 0:
		return nil, fmt.Errorf("reconcile: Options.Rate %v is negative", o.Rate)
	}
	if err := o.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("reconcile: Options.Profile: %w", err)
	}
	o.Profile = o.Profile.WithDefaults()
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxTransactions <= 0 {
		o.MaxTransactions = DefaultMaxTransactions
	}
	return &Reconciler{o: o}, nil
}

// result is what a check needs of a result.
type result struct {
	at           events.Position
	outcome      events.Outcome
	loyaltyID    string
	bitReference string
	// clawbackID is a refund result's clawbackTransactionId: the partner
	// transactionId its clawback was posted under ("" in results written
	// before the field).
	clawbackID string
	// points the result reports: points of an accrual, usedPoint (else
	// points) of a redemption or a clawback; nil when it reports none.
	points *int64
}

// failure is what a check needs of an error event.
type failure struct {
	at   events.Position
	what string // category and code, e.g. "BUSINESS INSUFFICIENT_POINT"
}

// inputRecord is what a check needs of the input record a reply answers.
type inputRecord struct {
	loyaltyID string
	amount    float64 // amount; refundAmount of a refund
	asked     int64   // usedPoint of a redemption; -1 otherwise
}

// item is one transaction of one input topic and every reply to it in
// the window.
type item struct {
	input    string
	id       string
	typ      events.EventType
	results  []result
	errors   []failure
	source   events.Position // the input record, from the first reply naming one
	original []byte          // an input record carried by an error event
	in       *inputRecord    // nil when the input record was not read
	findings []Finding
	looked   bool // answered by the partner (or not) without the run being stopped
}

// kindOf is the kind of partner transaction an event type makes, and
// whether it makes one reconcile checks (members' do not). A refund's
// clawback is a redemption on the partner's side.
func kindOf(t events.EventType) (partnerprofile.Kind, bool) {
	switch t {
	case events.TypePurchaseCompleted:
		return partnerprofile.Accrual, true
	case events.TypeRedemptionRequested, events.TypePurchaseRefunded:
		return partnerprofile.Redemption, true
	}
	return 0, false
}

// Run reads the replies of q's window, looks each accrual, redemption and
// refund transaction up at the partner once, and reports where they
// disagree. The error is for what stopped it (Kafka, the registry, ctx);
// the report holds what was found until then.
func (r *Reconciler) Run(ctx context.Context, q Request) (*Report, error) {
	rep := &Report{Since: q.Since, Topics: slices.Clone(q.Inputs), Skipped: map[string]int{}}
	if !q.Until.IsZero() {
		u := q.Until
		rep.Until = &u
	}
	cl, err := kgo.NewClient(r.o.Kafka...)
	if err != nil {
		return rep, fmt.Errorf("reconcile: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var spans []offsetspan.Span
	inputOf := map[string]string{} // reply topic → input topic
	for _, in := range q.Inputs {
		for _, t := range []string{(codec.Topics{}).ResultTopic(in), (codec.Topics{}).ErrorTopic(in)} {
			inputOf[t] = in
			s, err := r.window(ctx, adm, t, q.Since, q.Until)
			if err != nil {
				return rep, err
			}
			spans = append(spans, s...)
		}
	}
	items := map[[2]string]*item{}
	err = r.stream(ctx, spans, func(rec *kgo.Record) error {
		// Offsets by time find the span; a record stamped out of order
		// inside it is still outside the window.
		if rec.Timestamp.Before(q.Since) || (!q.Until.IsZero() && !rec.Timestamp.Before(q.Until)) {
			return nil
		}
		rep.Replies++
		return r.take(ctx, rec, inputOf[rec.Topic], items, rep)
	})
	if err != nil {
		return rep, err
	}
	list := slices.SortedFunc(maps.Values(items), func(a, b *item) int {
		return cmp.Or(cmp.Compare(a.input, b.input), cmp.Compare(a.id, b.id))
	})
	if err := r.sources(ctx, adm, list); err != nil {
		return rep, err
	}
	var limiter *rate.Limiter
	if r.o.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(r.o.Rate), 1)
	}
	err = r.lookups(ctx, list, limiter, rep)
	for _, it := range list {
		rep.Findings = append(rep.Findings, it.findings...)
		if it.looked && len(it.findings) == 0 {
			rep.Agreed++
		}
	}
	if err != nil {
		return rep, err
	}
	return rep, r.clawbacks(ctx, list, limiter, rep)
}

// take files a reply record under its transaction.
func (r *Reconciler) take(ctx context.Context, rec *kgo.Record, input string, items map[[2]string]*item, rep *Report) error {
	at := events.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	v, err := r.o.Codec.Decode(ctx, rec.Topic, rec.Value)
	if err != nil {
		var de *codec.DecodeError
		if !errors.As(err, &de) { // the registry, not the record
			return fmt.Errorf("reply %s: %w", at, err)
		}
		rep.skip("reply records that do not decode")
		return nil
	}
	var (
		id  string
		typ events.EventType
		src events.Position
		res *result
		bad *failure
		org []byte
	)
	switch v := v.(type) {
	case *events.LoyaltyResult:
		switch v.Outcome {
		case events.OutcomeApplied, events.OutcomeAlreadyApplied:
		case events.OutcomeNoOp:
			rep.skip("NO_OP results (a refund that claws back nothing writes nothing)")
			return nil
		default:
			rep.skip("results of member commands (out of scope)")
			return nil
		}
		id, typ, src = v.TransactionID, v.EventType, events.Position{Topic: v.Source.Topic, Partition: v.Source.Partition, Offset: v.Source.Offset}
		res = &result{at: at, outcome: v.Outcome, loyaltyID: deref(v.LoyaltyID), bitReference: deref(v.BitReference),
			clawbackID: deref(v.ClawbackTransactionID), points: v.Points}
		if k, _ := kindOf(typ); k == partnerprofile.Redemption && v.UsedPoint != nil {
			res.points = v.UsedPoint
		}
	case *events.LoyaltyError:
		if v.EventType == nil {
			rep.skip("error events of input records that do not decode (no transaction to look up)")
			return nil
		}
		id, typ, src = v.TransactionID, *v.EventType, events.Position{Topic: v.Source.Topic, Partition: v.Source.Partition, Offset: v.Source.Offset}
		bad, org = &failure{at: at, what: describeFailure(v)}, v.OriginalValue
	default:
		rep.skip("records that are not replies")
		return nil
	}
	if _, ok := kindOf(typ); !ok {
		rep.skip("replies to member commands (out of scope)")
		return nil
	}
	k := [2]string{input, id}
	it := items[k]
	if it == nil {
		if len(items) >= r.o.MaxTransactions {
			return fmt.Errorf("the window holds more than %d transactions: narrow it (since, until, topics) or raise the limit", r.o.MaxTransactions)
		}
		it = &item{input: input, id: id, typ: typ, source: events.Position{Offset: -1}}
		items[k] = it
	}
	if it.source.Offset < 0 && src.Topic == input && src.Offset >= 0 {
		it.source = src
	}
	if res != nil {
		it.results = append(it.results, *res)
	} else {
		it.errors = append(it.errors, *bad)
		if it.original == nil && len(org) > 0 {
			it.original = org
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readInput is what a check needs of an input event.
func readInput(ev events.Event) *inputRecord {
	switch ev := ev.(type) {
	case *events.PurchaseCompleted:
		return &inputRecord{loyaltyID: ev.LoyaltyID, amount: ev.Amount, asked: -1}
	case *events.RedemptionRequested:
		return &inputRecord{loyaltyID: ev.LoyaltyID, amount: ev.Amount, asked: ev.UsedPoint}
	case *events.PurchaseRefunded:
		return &inputRecord{loyaltyID: ev.LoyaltyID, amount: ev.RefundAmount, asked: -1}
	}
	return nil
}

// sources reads the input record of each item, for its loyaltyId and
// amounts, in one pass per partition over the span the items name. A
// record the topic no longer holds is taken from an original an error
// event carries, if any: a lookup is only a read, and the partner's record
// is compared with it, not sent anywhere.
func (r *Reconciler) sources(ctx context.Context, adm *kadm.Client, list []*item) error {
	want := map[events.Position][]*item{}
	for _, it := range list {
		if it.source.Offset >= 0 {
			want[it.source] = append(want[it.source], it)
		}
	}
	if len(want) > 0 {
		var topics []string
		for p := range want {
			if !slices.Contains(topics, p.Topic) {
				topics = append(topics, p.Topic)
			}
		}
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fmt.Errorf("start offsets of %s: %w", strings.Join(topics, ", "), err)
		}
		ends, err := adm.ListCommittedOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("end offsets of %s: %w", strings.Join(topics, ", "), err)
		}
		type tp struct {
			topic     string
			partition int32
		}
		spans := map[tp]*offsetspan.Span{}
		for _, p := range slices.SortedFunc(maps.Keys(want), events.Position.Compare) {
			st, ok1 := starts.Lookup(p.Topic, p.Partition)
			en, ok2 := ends.Lookup(p.Topic, p.Partition)
			if !ok1 || !ok2 || p.Offset < st.Offset || p.Offset >= en.Offset {
				continue // gone, or not a events.Position of the topic
			}
			k := tp{p.Topic, p.Partition}
			if s := spans[k]; s != nil {
				s.To = p.Offset + 1 // sorted
			} else {
				spans[k] = &offsetspan.Span{Topic: p.Topic, Partition: p.Partition, From: p.Offset, To: p.Offset + 1}
			}
		}
		var read []offsetspan.Span
		for _, s := range spans {
			read = append(read, *s)
		}
		err = r.stream(ctx, read, func(rec *kgo.Record) error {
			its := want[events.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}]
			if its == nil {
				return nil
			}
			ev, err := r.o.Codec.DecodeEvent(ctx, rec.Topic, rec.Value)
			var de *codec.DecodeError
			switch {
			case errors.As(err, &de):
				return nil
			case err != nil:
				return fmt.Errorf("input record %s/%d/%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
			}
			for _, it := range its {
				if ev.ID() == it.id {
					it.in = readInput(ev)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("input records: %w", err)
		}
	}
	for _, it := range list {
		if it.in == nil && it.original != nil {
			if ev, err := r.o.Codec.DecodeEvent(ctx, it.input, it.original); err == nil && ev.ID() == it.id {
				it.in = readInput(ev)
			}
		}
		it.original = nil
	}
	return nil
}

// lookups looks every item up, Options.Concurrency at once and at no more
// than limiter allows (Options.Rate; nil: no bound), and judges the
// answers.
func (r *Reconciler) lookups(ctx context.Context, list []*item, limiter *rate.Limiter, rep *Report) error {
	var todo []*item
	for _, it := range list {
		if it.loyaltyID() == "" {
			if it.in == nil {
				it.unchecked("its input record is gone (retention?) and no reply carries its loyaltyId")
			} else {
				rep.skip("transactions without a loyaltyId (refused before any call)")
			}
			continue
		}
		todo = append(todo, it)
	}
	rep.Checked = len(todo)
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.o.Concurrency)
	for _, it := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if limiter != nil {
				if err := limiter.Wait(gctx); err != nil {
					return err
				}
			}
			t, _, err := r.o.Partner.LookupTransaction(gctx, it.lookupRequest())
			if gctx.Err() != nil {
				return gctx.Err()
			}
			r.judge(it, t, err)
			it.looked = true
			mu.Lock()
			defer mu.Unlock()
			done++
			if r.o.Progress != nil {
				r.o.Progress(done, len(todo))
			}
			return nil
		})
	}
	err := g.Wait()
	if ctx.Err() != nil {
		rep.Interrupted = len(todo) - done
		return ctx.Err()
	}
	return err
}

// loyaltyID is the member of the transaction: a result's, else the input
// record's.
func (it *item) loyaltyID() string {
	for _, rp := range it.results {
		if rp.loyaltyID != "" {
			return rp.loyaltyID
		}
	}
	if it.in != nil {
		return it.in.loyaltyID
	}
	return ""
}

// lookupRequest asks for the transaction by the bridge's transactionId,
// except a refund's clawback, which is posted under an id of its own: a
// refund result's clawbackTransactionId names it; a result written before
// that field, with a bitReference, is asked for by the bitReference alone,
// the partner's own reference of what it applied; otherwise (no result,
// or neither field) by the refund's transactionId, where clawbacks made
// before the original's clawback slots were posted.
func (it *item) lookupRequest() loyalty.LookupRequest {
	req := loyalty.LookupRequest{LoyaltyID: it.loyaltyID(), TransactionID: it.id}
	if it.typ == events.TypePurchaseRefunded {
		if id := it.clawbackID(); id != "" {
			req.TransactionID = id
		} else if ref := it.bitReference(); ref != "" {
			req.TransactionID, req.BitReference = "", ref
		}
	}
	return req
}

// clawbackID is the clawbackTransactionId of the item's first result that
// names one.
func (it *item) clawbackID() string {
	for _, rp := range it.results {
		if rp.clawbackID != "" {
			return rp.clawbackID
		}
	}
	return ""
}

// asked names what was looked up when it is not the item's transactionId:
// " (clawback X)" for a refund looked up by its clawbackTransactionId.
func (it *item) asked() string {
	if id := it.clawbackID(); id != "" && it.typ == events.TypePurchaseRefunded && id != it.id {
		return " (clawback " + id + ")"
	}
	return ""
}

func (it *item) bitReference() string {
	for _, rp := range it.results {
		if rp.bitReference != "" {
			return rp.bitReference
		}
	}
	return ""
}

func (it *item) add(kind FindingKind, at events.Position, format string, args ...any) {
	it.findings = append(it.findings, Finding{Kind: kind, Topic: it.input, TransactionID: it.id, EventType: it.typ,
		Reply: at.String(), Detail: fmt.Sprintf(format, args...)})
}

func (it *item) first() events.Position {
	if len(it.results) > 0 {
		return it.results[0].at
	}
	return it.errors[0].at
}

func (it *item) unchecked(format string, args ...any) {
	it.add(Unchecked, it.first(), format, args...)
}

// judge compares the partner's answer, read by loyalty.ClassifyLookup
// through Options.Profile, with the item's replies. A transaction with a
// result is judged by its results; its error events (an attempt that
// failed before one that succeeded, a replay) then say nothing more.
//
// Verdicts: applied is compared; not found, and a record of the other
// kind (the transactionId names another transaction), are "no such
// transaction"; a member the partner does not know is Missing too, said
// so (a reconcile pointed at the wrong partner environment shows it); not applied (a failed status) is a record that took no
// effect, NotApplied against a result and agreement with error events;
// failed (no answer, or one that does not read) leaves it unchecked;
// unrecognised (a code, type or status the profile does not name) is
// reported as such, never guessed.
func (r *Reconciler) judge(it *item, t *loyalty.Transaction, lerr error) {
	kind, _ := kindOf(it.typ)
	v, err := loyalty.ClassifyLookup(r.o.Profile, kind, t, lerr)
	switch v {
	case loyalty.LookupFailed:
		it.unchecked("lookup failed: %v", err)
		return
	case loyalty.LookupUnrecognised:
		it.add(NotRecognised, it.first(), "the partner's answer is not in the partner profile (%s): not taken for applied or not found (--partner-*)",
			describe(err))
		return
	}
	if len(it.results) == 0 {
		if v == loyalty.LookupApplied {
			rp := it.errors[len(it.errors)-1]
			it.add(ErrorButApplied, rp.at, "error event %s, but the partner has it applied (%d points)", rp.what, t.TransactionPoint)
		}
		return
	}
	rp := it.results[0]
	switch v {
	case loyalty.LookupNotFound:
		it.add(Missing, rp.at, "result %s, but the partner has no such transaction%s", rp.outcome, it.asked())
	case loyalty.LookupMemberNotFound:
		code := "a member-not-found code"
		if be := (*loyalty.BusinessError)(nil); errors.As(err, &be) {
			code = fmt.Sprintf("%q", be.APICode())
		}
		it.add(Missing, rp.at, "result %s, but the partner does not know its member (answered %s): the wrong partner environment, or the member removed",
			rp.outcome, code)
	case loyalty.LookupOtherKind:
		it.add(Missing, rp.at, "result %s, but the partner has no such transaction%s (the transactionId names a %s, not this %s)",
			rp.outcome, it.asked(), t.TransactionType, kind)
	case loyalty.LookupNotApplied:
		it.add(NotApplied, rp.at, "result %s, but the partner's record%s has status %q, a failed status: it took no effect",
			rp.outcome, it.asked(), t.Status)
	case loyalty.LookupApplied:
		for _, rp := range it.results {
			if c := it.clawbackID(); rp.clawbackID != "" && rp.clawbackID != c {
				// Two results of one refund naming two clawbacks: each may
				// have been applied (copies in two processes at once).
				it.add(Differs, rp.at, "clawbackTransactionId: result %s, another result %s (looked up): the refund may have been clawed back twice",
					rp.clawbackID, c)
				continue
			}
			if d := differences(it.in, rp, t); d != "" {
				it.add(Differs, rp.at, "%s", d)
			}
		}
	}
}

// describe says what an unrecognised answer was: the field and the value
// (shortened) that the profile does not name, e.g. errorCode "TXN_GONE"
// or transactionType "EARN"; codes and names only.
func describe(err error) string {
	var ue *loyalty.UnrecognisedAnswerError
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %q", ue.Field, ue.Value)
	}
	return "an answer the profile does not name"
}

// describeFailure names an error event's category and code or reason.
func describeFailure(e *events.LoyaltyError) string {
	s := string(e.Category)
	switch {
	case e.APIErrorCode != nil:
		s += " " + *e.APIErrorCode
	case e.Reason != nil:
		s += " " + *e.Reason
	}
	return s
}

// differences lists where a result (and the input record it answers, in,
// when read) disagrees with the partner's record: points, amount,
// usedPoint asked for, bitReference.
func differences(in *inputRecord, res result, t *loyalty.Transaction) string {
	var d []string
	if res.points != nil && *res.points != t.TransactionPoint {
		d = append(d, fmt.Sprintf("points: result %d, partner %d", *res.points, t.TransactionPoint))
	}
	if in != nil {
		if math.Abs(in.amount-t.TransactionAmount) > 1e-9*max(1, math.Abs(in.amount)) {
			d = append(d, fmt.Sprintf("amount: event %v, partner %v", in.amount, t.TransactionAmount))
		}
		if in.asked >= 0 && in.asked != t.TransactionPoint && (res.points == nil || *res.points == t.TransactionPoint) {
			d = append(d, fmt.Sprintf("usedPoint: event %d, partner %d", in.asked, t.TransactionPoint))
		}
	}
	if res.bitReference != "" && t.BitReference != "" && res.bitReference != t.BitReference {
		d = append(d, fmt.Sprintf("bitReference: result %s, partner %s", res.bitReference, t.BitReference))
	}
	return strings.Join(d, "; ")
}
