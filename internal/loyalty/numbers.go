package loyalty

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The spec types transactionPoint, usedPoint, transactionAmount and
// sponsorId as "number", not integer. Answers are decoded into the wire
// types below, whose json.Number fields shadow the public types' fields of
// the same name, and converted with checks: a value that does not fit is a
// malformed answer, never a silent zero or overflow.

// maxExponent and maxDigits bound a number before it is read exactly:
// 1e999999999, or a megabyte of digits, would otherwise cost the decoder
// gigabytes or seconds. No point value or id comes near either.
const (
	maxExponent = 40
	maxDigits   = 64
)

// points converts a point value; a fractional one is rounded or refused as
// f says. Absent or null is a malformed answer, never 0: a redemption
// answered without usedPoint would report nothing redeemed, and a lookup
// without transactionPoint would let a refund claw back from a slot that
// counts nothing against the original's cap.
func points(field string, n json.Number, f partnerprofile.Fractions) (int64, error) {
	if n == "" {
		return 0, fmt.Errorf("%s is absent or null", field)
	}
	if v, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return v, nil
	}
	r, err := exact(field, n)
	if err != nil {
		return 0, err
	}
	if !r.IsInt() {
		if f != partnerprofile.FractionsRoundHalfUp {
			return 0, fmt.Errorf("%s is fractional (%s), and the partner profile refuses fractional points", field, short(string(n)))
		}
		r = roundHalfUp(r)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s is out of range", field)
	}
	return r.Num().Int64(), nil
}

// whole converts a number that must be a whole one (an id). Absent or
// null is 0: sponsorId is reported, never counted, and the spec's accrual
// answer table marks none of its fields required.
func whole(field string, n json.Number) (int64, error) {
	if n == "" {
		return 0, nil
	}
	if v, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return v, nil // the common case, without big.Rat's allocations
	}
	r, err := exact(field, n)
	switch {
	case err != nil:
		return 0, err
	case !r.IsInt():
		return 0, fmt.Errorf("%s is not a whole number", field)
	case !r.Num().IsInt64():
		return 0, fmt.Errorf("%s is out of range", field)
	}
	return r.Num().Int64(), nil
}

// amount converts a money amount, which may be fractional. Absent or null
// is a malformed answer, never 0: a refund's share of its original is
// computed from the original's amount.
func amount(field string, n json.Number) (float64, error) {
	if n == "" {
		return 0, fmt.Errorf("%s is absent or null", field)
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%s is not a number in range", field)
	}
	return v, nil
}

// exact reads n as an exact rational, refusing exponents beyond
// maxExponent.
func exact(field string, n json.Number) (*big.Rat, error) {
	s := string(n)
	if len(s) > maxDigits {
		return nil, fmt.Errorf("%s is out of range", field)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil, fmt.Errorf("%s is out of range", field)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%s is not a number", field)
	}
	return r, nil
}

// roundHalfUp is r rounded to the nearest integer, halves away from zero:
// sign × floor(|r| + 1/2) = sign × (2·|num| + den) div (2·den).
func roundHalfUp(r *big.Rat) *big.Rat {
	num := new(big.Int).Abs(r.Num())
	den := r.Denom()
	num.Lsh(num, 1).Add(num, den)
	q := num.Quo(num, new(big.Int).Lsh(den, 1))
	if r.Sign() < 0 {
		q.Neg(q)
	}
	return new(big.Rat).SetInt(q)
}

// accrualWire is a Point Accrual answer's data on the wire.
type accrualWire struct {
	AccrualResult
	SponsorID json.Number `json:"sponsorId"`
}

func (w *accrualWire) value() (*AccrualResult, error) {
	r := w.AccrualResult
	var err error
	if r.SponsorID, err = whole("sponsorId", w.SponsorID); err != nil {
		return nil, err
	}
	return &r, nil
}

// redemptionWire is a redemption answer's data on the wire.
type redemptionWire struct {
	RedemptionResult
	UsedPoint json.Number `json:"usedPoint"`
}

func (w *redemptionWire) value(f partnerprofile.Fractions) (*RedemptionResult, error) {
	r := w.RedemptionResult
	var err error
	if r.UsedPoint, err = points("usedPoint", w.UsedPoint, f); err != nil {
		return nil, err
	}
	return &r, nil
}

// transactionWire is a Lookup Transaction answer's data on the wire.
type transactionWire struct {
	Transaction
	TransactionPoint  json.Number `json:"transactionPoint"`
	TransactionAmount json.Number `json:"transactionAmount"`
}

func (w *transactionWire) value(f partnerprofile.Fractions) (*Transaction, error) {
	t := w.Transaction
	var err error
	if t.TransactionPoint, err = points("transactionPoint", w.TransactionPoint, f); err != nil {
		return nil, err
	}
	if t.TransactionAmount, err = amount("transactionAmount", w.TransactionAmount); err != nil {
		return nil, err
	}
	return &t, nil
}

// short bounds a partner's value quoted in an error to 32 bytes and an
// ellipsis, cut on a character boundary so that the quote stays valid
// UTF-8 in logs and error events.
func short(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
