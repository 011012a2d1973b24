package sim

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// milli is an amount of points in thousandths of a point. The spec types
// usedPoint and transactionPoint as "number" and requires only that
// usedPoint be positive, so a partner may be sent 12.5 points; the
// simulator keeps balances and transactions exact to a thousandth, and
// answers a whole amount as a whole number. maxAmount points (1e15) are
// 1e18 thousandths, within int64.
type milli int64

const milliPerPoint = 1000

// wholePoints is n whole points.
func wholePoints(n int64) milli { return milli(n * milliPerPoint) }

// number is m as the JSON number of an answer: 40, 12.5, 0.125.
func (m milli) number() json.Number {
	whole, frac := int64(m)/milliPerPoint, int64(m)%milliPerPoint
	if frac == 0 {
		return json.Number(strconv.FormatInt(whole, 10))
	}
	sign := ""
	if m < 0 {
		sign, whole, frac = "-", -whole, -frac
	}
	return json.Number(fmt.Sprintf("%s%d.%s", sign, whole, strings.TrimRight(fmt.Sprintf("%03d", frac), "0")))
}

// float is m in points, for MemberState.
func (m milli) float() float64 { return float64(m) / milliPerPoint }

// parseMilli reads a positive point amount of at most maxAmount, exact to
// a thousandth; msg says what is wrong ("" when nothing), naming field and
// never quoting the input.
func parseMilli(field string, n json.Number) (milli, string) {
	r, ok := exactNumber(n)
	if !ok || r.Sign() <= 0 || r.Cmp(new(big.Rat).SetFloat64(maxAmount)) > 0 {
		return 0, fmt.Sprintf("%s must be a positive number (at most %g)", field, maxAmount)
	}
	r.Mul(r, big.NewRat(milliPerPoint, 1))
	if !r.IsInt() {
		return 0, fmt.Sprintf("%s has more than 3 decimal places (the simulator keeps points to a thousandth)", field)
	}
	return milli(r.Num().Int64()), ""
}

// exactNumber reads n exactly, refusing over 64 characters or an exponent
// beyond ±40, which would cost the reading far more than any point value
// needs.
func exactNumber(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if len(s) > 64 || strings.ContainsAny(s, "eE") && !smallExponent(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// smallExponent reports whether the exponent of s is within ±40, so that
// reading it exactly stays cheap.
func smallExponent(s string) bool {
	i := strings.IndexAny(s, "eE")
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err == nil && e <= 40 && e >= -40
}
