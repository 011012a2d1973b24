package loyalty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The spec's "number" fields of answers (transactionPoint, usedPoint,
// transactionAmount, sponsorId) are read exactly: whole values in any
// JSON spelling, fractional points rounded or refused as the profile says,
// anything that does not fit a malformed answer — ambiguous for a write.
func TestSpecNumbers(t *testing.T) {
	refuse, round := partnerprofile.FractionsRefuse, partnerprofile.FractionsRoundHalfUp
	for _, tc := range []struct {
		name  string
		frac  partnerprofile.Fractions
		value string // transactionPoint, usedPoint and, where whole, sponsorId
		want  int64
		err   string // "" for none
	}{
		{"integer", refuse, `42`, 42, ""},
		{"whole decimal", refuse, `42.0`, 42, ""},
		{"exponent", refuse, `4.2e1`, 42, ""},
		{"negative", refuse, `-3`, -3, ""},
		{"null is malformed, not zero", refuse, `null`, 0, "is absent or null"},
		{"fraction refused", refuse, `12.5`, 0, "is fractional (12.5)"},
		{"fraction refused by default", "", `12.25`, 0, "is fractional"},
		{"half rounds up", round, `12.5`, 13, ""},
		{"below half rounds down", round, `12.49`, 12, ""},
		{"exactly, not in binary", round, `12.4999999999999999999`, 12, ""},
		{"negative half away from zero", round, `-12.5`, -13, ""},
		{"small exponent", round, `125e-1`, 13, ""},
		{"int64 limit", refuse, `9223372036854775807`, 9223372036854775807, ""},
		{"over int64", refuse, `9223372036854775808`, 0, "out of range"},
		{"huge exponent", round, `1e999999999`, 0, "out of range"},
		{"tiny exponent", round, `1e-999999999`, 0, "out of range"},
		// Read exactly, this is 42; past maxDigits it is refused before
		// it is read, so that a megabyte of digits costs nothing.
		{"more digits than are read", refuse, `42.` + strings.Repeat("0", 70), 0, "out of range"},
		{"quoted number", refuse, `"42"`, 42, ""},
		{"quoted text", refuse, `"many"`, 0, "malformed"},
		{"boolean", refuse, `true`, 0, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				switch {
				case strings.HasSuffix(path, "/lookup-transaction-id"):
					ok(w, fmt.Sprintf(`{"transactionPoint":%s,"transactionAmount":1500.25,"transactionType":"ACCRUAL","status":"SUCCESS"}`, tc.value))
				case strings.HasSuffix(path, "/point-redemption-with-token"):
					ok(w, fmt.Sprintf(`{"usedPoint":%s,"bitReference":"B"}`, tc.value))
				}
			}, func(o *loyalty.Options) { o.FractionalPoints = tc.frac })
			ctx := context.Background()
			tr, info, err := f.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: "L", TransactionID: "t"})
			check(t, "lookup", err, tc.err, info, false)
			if err == nil && (tr.TransactionPoint != tc.want || tr.TransactionAmount != 1500.25) {
				t.Errorf("lookup: %d %v, want %d", tr.TransactionPoint, tr.TransactionAmount, tc.want)
			}
			rr, info, err := f.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "t", LoyaltyID: "L",
				TransactionDate: "2026-11-23T10:00:00.000Z", UsedPoint: 5, Sign: "s"})
			check(t, "redemption", err, tc.err, info, true)
			if err == nil && rr.UsedPoint != tc.want {
				t.Errorf("redemption: usedPoint %d, want %d", rr.UsedPoint, tc.want)
			}
		})
	}
}

// check asserts a call's error: none, or a malformed answer naming want,
// ambiguous exactly for writes.
func check(t *testing.T, call string, err error, want string, info loyalty.CallInfo, write bool) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: %v", call, err)
		}
		return
	}
	var me *loyalty.MalformedResponseError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want a malformed answer with %q", call, err, want)
		return
	}
	if me.Ambiguous != write || info.Ambiguous != write || loyalty.IsAmbiguous(err) != write {
		t.Errorf("%s: ambiguous %v (info %v), want %v", call, me.Ambiguous, info.Ambiguous, write)
	}
}

// sponsorId is an id: a whole number in any spelling, never rounded.
func TestSponsorID(t *testing.T) {
	for value, want := range map[string]string{`1001`: "", `1.001e3`: "", `1001.5`: "not a whole number", `1e99`: "out of range",
		`1e30`: "out of range", `9223372036854775808`: "out of range", `-9223372036854775809`: "out of range",
		`1001.` + strings.Repeat("0", 70): "out of range"} {
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			ok(w, fmt.Sprintf(`{"sponsorId":%s,"transactionId":"t","bitReference":"B"}`, value))
		}, func(o *loyalty.Options) { o.FractionalPoints = partnerprofile.FractionsRoundHalfUp })
		res, info, err := f.client.Accrue(context.Background(), accrual)
		check(t, "accrual sponsorId "+value, err, want, info, true)
		if err == nil && res.SponsorID != 1001 {
			t.Errorf("sponsorId %s read as %d", value, res.SponsorID)
		}
	}
}

// The success envelope's statusCode must be 200 and its message SUCCESS,
// as the spec shows; anything else is a malformed answer (ambiguous for a
// write). Unlink answered data false is the partner's refusal, a
// *BusinessError carrying the answer.
func TestSuccessEnvelope(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"spec", `{"statusCode":200,"message":"SUCCESS","data":%s}`, ""},
		{"statusCode 201", `{"statusCode":201,"message":"SUCCESS","data":%s}`, "statusCode 201, not 200"},
		{"statusCode absent", `{"message":"SUCCESS","data":%s}`, "statusCode 0, not 200"},
		{"statusCode 500 in a 200", `{"statusCode":500,"message":"SUCCESS","data":%s}`, "statusCode 500"},
		{"message lower case", `{"statusCode":200,"message":"success","data":%s}`, "message is not SUCCESS"},
		{"message absent", `{"statusCode":200,"data":%s}`, "message is not SUCCESS"},
		{"data absent", `{"statusCode":200,"message":"SUCCESS"}`, "without data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				data := `{"transactionId":"t","bitReference":"B","sponsorId":1}`
				switch {
				case strings.HasSuffix(r.URL.Path, "/unlink-member"):
					data = "true"
				case strings.HasSuffix(r.URL.Path, "/lookup-transaction-id"):
					data = `{"transactionId":"t","transactionPoint":1,"transactionAmount":1000,"transactionType":"ACCRUAL","status":"SUCCESS"}`
				}
				w.Header().Set("Content-Type", "application/json")
				if strings.Contains(tc.body, "%s") {
					fmt.Fprintf(w, tc.body, data)
				} else {
					fmt.Fprint(w, tc.body)
				}
			}, nil)
			_, info, err := f.client.Accrue(context.Background(), accrual)
			check(t, "accrual", err, tc.want, info, true)
			_, info, err = f.client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: "L", TransactionID: "t"})
			check(t, "lookup", err, tc.want, info, false)
			_, info, err = f.client.Unlink(context.Background(), loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
			check(t, "unlink", err, tc.want, info, true)
		})
	}
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) { ok(w, "false") }, nil)
	unlinked, info, err := f.client.Unlink(context.Background(), loyalty.LinkRequest{LoyaltyID: "LB1", PartnerMemberID: "P1"})
	var be *loyalty.BusinessError
	if unlinked || !errors.As(err, &be) || be.Data != "false" || be.StatusCode != 200 || be.StatusMessage != "SUCCESS" ||
		info.Ambiguous || loyalty.Category(err) != loyalty.CategoryBusiness || !strings.Contains(err.Error(), "answered data: false") {
		t.Fatalf("unlink data false: %v %+v %v", unlinked, info, err)
	}
}

// ClassifyLookup is the one reading of a lookup answer: what the profile
// names is a verdict, anything else unrecognised, never guessed.
func TestClassifyLookup(t *testing.T) {
	other := partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND", "NO_TXN"}, AccrualType: "EARN", RedemptionType: "BURN",
		AppliedStatuses: []string{"COMPLETED", "POSTED"}, FailedStatuses: []string{"FAILED"}}
	otherByID := other
	otherByID.TransactionKey = partnerprofile.KeyID
	tx := func(typ, status string) *loyalty.Transaction {
		return &loyalty.Transaction{TransactionID: "t", TransactionType: typ, Status: status}
	}
	biz := func(code, errorCode, name string) error {
		return &loyalty.BusinessError{Op: "lookup-transaction", Ref: "tx=t", HTTPStatus: 400, Code: code, ErrorCode: errorCode, Name: name}
	}
	transient := &loyalty.TransientError{Op: "lookup-transaction", Status: 503}
	memberNotFound, noMember := biz("MEMBER_NOT_FOUND", "", ""), biz("", "NO_MEMBER", "")
	for _, tc := range []struct {
		name    string
		p       partnerprofile.Profile
		kind    partnerprofile.Kind
		t       *loyalty.Transaction
		err     error
		want    loyalty.LookupVerdict
		field   string // of an unrecognised answer
		errWant error  // the error passed through
	}{
		{"default applied", partnerprofile.Profile{}, partnerprofile.Accrual, tx("ACCRUAL", "SUCCESS"), nil, loyalty.LookupApplied, "", nil},
		{"default redemption", partnerprofile.Profile{}, partnerprofile.Redemption, tx("REDEMPTION", "SUCCESS"), nil, loyalty.LookupApplied, "", nil},
		{"default not found", partnerprofile.Profile{}, partnerprofile.Accrual, nil, biz("TRANSACTION_NOT_FOUND", "", ""), loyalty.LookupNotFound, "", nil},
		// Keyed by id and type (the default), the other kind under the id
		// may hide the kind asked: not understood, never "not applied".
		{"default other kind", partnerprofile.Profile{}, partnerprofile.Accrual, tx("REDEMPTION", "SUCCESS"), nil, loyalty.LookupUnrecognised, "sharedTransactionId", nil},
		{"default other kind, asked a redemption", partnerprofile.Profile{}, partnerprofile.Redemption, tx("ACCRUAL", "SUCCESS"), nil, loyalty.LookupUnrecognised, "sharedTransactionId", nil},
		// Keyed by id alone, the id is the other kind's and nothing else.
		{"id-keyed other kind", partnerprofile.Profile{TransactionKey: partnerprofile.KeyID}, partnerprofile.Redemption, tx("ACCRUAL", "SUCCESS"), nil, loyalty.LookupOtherKind, "", nil},
		{"default, another partner's type", partnerprofile.Profile{}, partnerprofile.Accrual, tx("EARN", "SUCCESS"), nil, loyalty.LookupUnrecognised, "transactionType", nil},
		{"default, empty type", partnerprofile.Profile{}, partnerprofile.Accrual, tx("", "SUCCESS"), nil, loyalty.LookupUnrecognised, "transactionType", nil},
		{"default, another status", partnerprofile.Profile{}, partnerprofile.Accrual, tx("ACCRUAL", "PENDING"), nil, loyalty.LookupUnrecognised, "status", nil},
		{"default, empty status", partnerprofile.Profile{}, partnerprofile.Accrual, tx("ACCRUAL", ""), nil, loyalty.LookupUnrecognised, "status", nil},
		{"default, another not-found code", partnerprofile.Profile{}, partnerprofile.Accrual, nil, biz("TXN_NOT_FOUND", "", ""), loyalty.LookupUnrecognised, "errorCode", nil},
		{"default member not found: nothing applied to a member that does not exist", partnerprofile.Profile{}, partnerprofile.Accrual, nil,
			memberNotFound, loyalty.LookupMemberNotFound, "", memberNotFound},
		{"another partner's member-not-found code", partnerprofile.Profile{MemberNotFoundCodes: []string{"NO_MEMBER"}}, partnerprofile.Accrual, nil,
			noMember, loyalty.LookupMemberNotFound, "", noMember},
		{"the default's member-not-found code, not this partner's", partnerprofile.Profile{MemberNotFoundCodes: []string{"NO_MEMBER"}}, partnerprofile.Accrual, nil,
			biz("MEMBER_NOT_FOUND", "", ""), loyalty.LookupUnrecognised, "errorCode", nil},
		{"other applied", other, partnerprofile.Accrual, tx("EARN", "POSTED"), nil, loyalty.LookupApplied, "", nil},
		{"other failed", other, partnerprofile.Accrual, tx("EARN", "FAILED"), nil, loyalty.LookupNotApplied, "", nil},
		{"other other kind", other, partnerprofile.Redemption, tx("EARN", "PENDING"), nil, loyalty.LookupUnrecognised, "sharedTransactionId", nil},
		{"other other kind, id-keyed", otherByID, partnerprofile.Redemption, tx("EARN", "PENDING"), nil, loyalty.LookupOtherKind, "", nil},
		{"other not found in errorCode", other, partnerprofile.Accrual, nil, biz("404", "NO_TXN", ""), loyalty.LookupNotFound, "", nil},
		{"other not found in name", other, partnerprofile.Accrual, nil, biz("", "", "TXN_NOT_FOUND"), loyalty.LookupNotFound, "", nil},
		{"other, the default's code", other, partnerprofile.Accrual, nil, biz("TRANSACTION_NOT_FOUND", "", ""), loyalty.LookupUnrecognised, "errorCode", nil},
		{"transient", other, partnerprofile.Accrual, nil, transient, loyalty.LookupFailed, "", transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := loyalty.ClassifyLookup(tc.p, tc.kind, tc.t, tc.err)
			if v != tc.want {
				t.Fatalf("verdict %s, want %s (%v)", v, tc.want, err)
			}
			var ue *loyalty.UnrecognisedAnswerError
			switch {
			case tc.field != "":
				if !errors.As(err, &ue) || ue.Field != tc.field || !loyalty.IsUnrecognised(err) {
					t.Fatalf("err %v, want unrecognised %s", err, tc.field)
				}
				if loyalty.Category(err) != loyalty.CategoryTransientExhausted || !loyalty.Retryable(err) || loyalty.IsAPIFailure(err) {
					t.Errorf("unrecognised: category %s, retryable %v, API failure %v", loyalty.Category(err), loyalty.Retryable(err), loyalty.IsAPIFailure(err))
				}
			case err != tc.errWant:
				t.Fatalf("err %v, want %v", err, tc.errWant)
			}
		})
	}
	dup := &loyalty.BusinessError{Code: "E1", ErrorCode: "TXN_DUPLICATE"}
	if !loyalty.IsDuplicate(partnerprofile.Profile{DuplicateCodes: []string{"TXN_DUPLICATE"}}, dup) || loyalty.IsDuplicate(partnerprofile.Profile{}, dup) ||
		!loyalty.IsDuplicate(partnerprofile.Profile{}, &loyalty.BusinessError{Code: partnerprofile.DefaultDuplicateCode}) ||
		loyalty.IsDuplicate(partnerprofile.Profile{}, errors.New(partnerprofile.DefaultDuplicateCode)) {
		t.Error("IsDuplicate")
	}
}

// A partner's value quoted in an UnrecognisedAnswerError is cut to 32
// bytes at most, on a character boundary: the quote stays valid UTF-8 (it
// goes into logs, metrics-adjacent warnings and error events).
func TestQuotedValuesAreCutOnACharacter(t *testing.T) {
	for _, tc := range []struct{ name, status, want string }{
		{"short", "PENDING", "PENDING"},
		{"32 bytes", strings.Repeat("a", 32), strings.Repeat("a", 32)},
		{"ascii, long", strings.Repeat("a", 40), strings.Repeat("a", 32) + "…"},
		{"two-byte character across byte 32", strings.Repeat("a", 31) + "éé", strings.Repeat("a", 31) + "…"},
		{"three-byte characters", strings.Repeat("済", 12), strings.Repeat("済", 10) + "…"},
		{"four-byte character ending at 32", strings.Repeat("a", 28) + "😀b", strings.Repeat("a", 28) + "😀…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loyalty.ClassifyLookup(partnerprofile.Profile{}, partnerprofile.Redemption,
				&loyalty.Transaction{TransactionType: partnerprofile.DefaultRedemptionType, Status: tc.status}, nil)
			var ue *loyalty.UnrecognisedAnswerError
			if !errors.As(err, &ue) {
				t.Fatalf("%v, want an UnrecognisedAnswerError", err)
			}
			if ue.Value != tc.want || !utf8.ValidString(ue.Value) {
				t.Errorf("quoted %q, want %q", ue.Value, tc.want)
			}
		})
	}
}

// An answer that leaves out a money number, or sends it null, is
// malformed, never 0 (issue 29, finding 7): ambiguous for a write, so the
// next attempt is guarded; refused for a lookup.
func TestAbsentMoneyNumbers(t *testing.T) {
	for _, tc := range []struct {
		name, lookup, redemption, want string
	}{
		{"absent", `{"transactionAmount":1500,"transactionType":"ACCRUAL","status":"SUCCESS"}`, `{"bitReference":"B"}`, "transactionPoint is absent or null"},
		{"null", `{"transactionPoint":null,"transactionAmount":1500,"transactionType":"ACCRUAL","status":"SUCCESS"}`, `{"usedPoint":null,"bitReference":"B"}`, "transactionPoint is absent or null"},
		{"amount absent", `{"transactionPoint":10,"transactionType":"ACCRUAL","status":"SUCCESS"}`, `{"bitReference":"B"}`, "transactionAmount is absent or null"},
		{"amount null", `{"transactionPoint":10,"transactionAmount":null,"transactionType":"ACCRUAL","status":"SUCCESS"}`, `{"usedPoint":null}`, "transactionAmount is absent or null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/lookup-transaction-id"):
					ok(w, tc.lookup)
				case strings.HasSuffix(r.URL.Path, "/point-redemption-with-token"):
					ok(w, tc.redemption)
				}
			}, nil)
			ctx := context.Background()
			_, info, err := f.client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: "L", TransactionID: "t"})
			check(t, "lookup", err, tc.want, info, false)
			_, info, err = f.client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "t", LoyaltyID: "L",
				TransactionDate: "2026-11-23T10:00:00.000Z", UsedPoint: 5, Sign: "s"})
			check(t, "redemption", err, "usedPoint is absent or null", info, true)
		})
	}
}

// Only a 2xx answer is a success: a 300 carrying a success envelope (a
// proxy's page, a partner's mistake) is not read as the write's result,
// however it looks.
func TestSuccessIsOnly2xx(t *testing.T) {
	for _, status := range []int{http.StatusMultipleChoices, http.StatusOK} {
		f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1001,"transactionId":"tx-1","bitReference":"B"}}`)
		}, func(o *loyalty.Options) { o.Retry.MaxAttempts = 1 })
		res, _, err := f.client.Accrue(context.Background(), accrual)
		switch {
		case status == http.StatusOK && (err != nil || res.BitReference != "B"):
			t.Errorf("200: %+v, %v", res, err)
		case status != http.StatusOK && err == nil:
			t.Errorf("HTTP %d with a success envelope read as applied: %+v", status, res)
		}
	}
}
