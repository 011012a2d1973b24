package bridge

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
)

// A partner that refuses the form of a field the bridge's wire settings
// choose (the accrual and redemption transactionDate, an unset idNumber
// or passportNumber) refuses every record alike: the settings, not the
// records, are wrong. Written as error events, that would be one BUSINESS
// event per record for a mistake in one setting, and a replay of them all
// once it is fixed. Such a refusal is made a refusal of the bridge's
// settings instead, which the auth hold holds, as it holds a refused sign
// (signRefused): one warning naming the field and the setting to check,
// the held gauge, the failures counter, and attempts again until the
// partner takes one.
//
// Why a refusal naming these fields is about their encoding and not about
// the record: the bridge, not upstream, writes them. transactionDate is
// an Avro timestamp the event's validation requires to be set, and the
// bridge writes it in the format and JSON type of its settings; no
// upstream text reaches the wire. An idNumber or passportNumber counts
// only when the record has none (validation requires the other one): no
// upstream value is sent, only the bridge's choice of an absent key or a
// null. A document that has a value, and every other field, stays the
// record's own refusal (its error event).
//
// That argument fails for a partner that refuses a date's value (one too
// old, say) with a wire-refused code and the field's name; one bad record
// must not then hold every record for ever. So a refusal holds a record
// only while the partner has accepted no call with the same wire choice
// since that record was first so refused: once another record's call got
// through, the settings are evidently the partner's, and the refusal is
// the record's (its business error). A partner that tightens its
// requirements while the bridge runs is still a held refusal, since what
// was accepted before the record's first refusal does not count.

// wireChoice is one wire setting a refusal can be about.
type wireChoice int

const (
	wireAccrualDate wireChoice = iota
	wireRedemptionDate
	wireUnsetKeyed
	wireChoices // the number of choices
)

// settings names the flags of c.
func (c wireChoice) settings() string {
	switch c {
	case wireAccrualDate:
		return "--partner-accrual-date-format and --partner-accrual-date-type"
	case wireRedemptionDate:
		return "--partner-redemption-date-format and --partner-redemption-date-type"
	}
	return "--partner-unset-keyed-fields"
}

// wireAccepted counts, per wire choice, the calls the partner accepted
// with it since the Bridge was made. Shared by every record of a Bridge.
type wireAccepted [wireChoices]atomic.Uint64

// wireCheck judges the answers to one record's calls.
type wireCheck struct {
	prof     *partnerprofile.Profile
	accepted *wireAccepted
	st       *recordState
}

// after is called with the error of a call whose fields (those the bridge
// encoded as c says) may be refused: it counts an accepted call, and
// makes a refusal that names one of fields, by a wire-refused code, a
// refusal of the settings (*loyalty.AuthError) unless another call with c
// was accepted since the record's first such refusal. Without fields, the
// call has nothing of c's and err is returned as it is.
func (w wireCheck) after(c wireChoice, err error, fields ...string) error {
	if len(fields) == 0 || w.accepted == nil || w.st == nil {
		return err
	}
	if err == nil {
		w.accepted[c].Add(1)
		return nil
	}
	var be *loyalty.BusinessError
	if loyalty.IsCredentialRefused(err) || !errors.As(err, &be) {
		return err // a refused sign is held already
	}
	code, field := refusedField(be)
	if !w.prof.IsWireRefused(code) || !slices.Contains(fields, field) {
		return err
	}
	now := w.accepted[c].Load()
	if first, seen := w.st.wireRefused[c]; seen && now > first {
		return err
	}
	if w.st.wireRefused == nil {
		w.st.wireRefused = map[wireChoice]uint64{}
	}
	if _, seen := w.st.wireRefused[c]; !seen {
		w.st.wireRefused[c] = now
	}
	return &loyalty.AuthError{Op: be.Op, Ref: be.Ref, HTTPStatus: be.HTTPStatus, Code: code,
		Err: heldFor{reason: "the partner refuses the bridge's encoding of " + field + " (check " + c.settings() + ")",
			err: fmt.Errorf("the partner refused the %s the bridge encoded (%s %q): check %s against the partner's documentation: %w",
				field, code, partnertext.Scrubber{}.Text(be.Message), c.settings(), be)}}
}

// refusedField is the code and field a refusal names: an onboarding's in
// its resultUrl (errorCode and partnerprofile.FieldParam), a point call's
// as errors.code and the start of errors.message ("transactionDate: …").
func refusedField(be *loyalty.BusinessError) (code, field string) {
	if be.ResultURL != "" {
		u, err := url.Parse(be.ResultURL)
		if err != nil {
			return "", ""
		}
		q := u.Query()
		return q.Get("errorCode"), q.Get(partnerprofile.FieldParam)
	}
	field, _, found := strings.Cut(be.Message, ":")
	if !found {
		return be.APICode(), ""
	}
	return be.APICode(), strings.TrimSpace(field)
}

// unsetDocuments are the identity documents r sends without a value.
func unsetDocuments(r loyalty.OnboardRequest) []string {
	var out []string
	if r.IDNumber == "" {
		out = append(out, "idNumber")
	}
	if r.PassportNumber == "" {
		out = append(out, "passportNumber")
	}
	return out
}
