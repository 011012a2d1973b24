package partnerprofile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DateFormat says how a transactionDate is written: the spec declares
// both transactionDates strings without a format, and its accrual example
// sends a number of epoch milliseconds.
type DateFormat string

// Date formats. A Go layout is given as "layout:" and the layout, e.g.
// layout:2006-01-02 15:04:05; it is written in UTC.
const (
	// DateEpochMillis: milliseconds since the epoch (the accrual default,
	// as in the spec's example).
	DateEpochMillis DateFormat = "epoch-millis"
	// DateEpochSeconds: seconds since the epoch.
	DateEpochSeconds DateFormat = "epoch-seconds"
	// DateISO8601: RFC 3339 in UTC with milliseconds,
	// 2026-11-23T10:00:00.000Z (the redemption default).
	DateISO8601 DateFormat = "iso8601"
)

// layoutPrefix introduces a Go layout as a DateFormat.
const layoutPrefix = "layout:"

// ISOMillis is the layout of DateISO8601.
const ISOMillis = "2006-01-02T15:04:05.000Z07:00"

// ParseDateFormat accepts epoch-millis, epoch-seconds, iso8601 and
// layout:LAYOUT ("" gives "", which WithDefaults fills).
func ParseDateFormat(s string) (DateFormat, error) {
	f := DateFormat(s)
	switch {
	case f == "", f == DateEpochMillis, f == DateEpochSeconds, f == DateISO8601:
		return f, nil
	case strings.HasPrefix(s, layoutPrefix):
		l := strings.TrimPrefix(s, layoutPrefix)
		// A layout with no element of Go's reference time writes every
		// date alike: a typo, not a format.
		if l == "" || time.Unix(0, 0).UTC().Format(l) == l {
			return "", fmt.Errorf("date format %q: the layout has no element of Go's reference time (2006-01-02T15:04:05Z07:00)", s)
		}
		return f, nil
	}
	return "", fmt.Errorf("date format %q: want epoch-millis, epoch-seconds, iso8601 or layout:LAYOUT", s)
}

// Epoch reports whether f writes a number of the epoch.
func (f DateFormat) Epoch() bool { return f == DateEpochMillis || f == DateEpochSeconds }

// naturalType is the JSON type of f when none is given: a number for an
// epoch, a string otherwise.
func (f DateFormat) naturalType() DateType {
	if f.Epoch() {
		return DateNumber
	}
	return DateString
}

// Format writes t as the text of f (an epoch as its digits).
func (f DateFormat) Format(t time.Time) string {
	switch {
	case f == DateEpochMillis:
		return strconv.FormatInt(t.UnixMilli(), 10)
	case f == DateEpochSeconds:
		return strconv.FormatInt(t.Unix(), 10)
	case strings.HasPrefix(string(f), layoutPrefix):
		return t.UTC().Format(strings.TrimPrefix(string(f), layoutPrefix))
	}
	return t.UTC().Format(ISOMillis)
}

// Parse reads text written by f.
func (f DateFormat) Parse(text string) (time.Time, error) {
	switch {
	case f.Epoch():
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("want the digits of %s", f)
		}
		if f == DateEpochSeconds {
			return time.Unix(n, 0).UTC(), nil
		}
		return time.UnixMilli(n).UTC(), nil
	case strings.HasPrefix(string(f), layoutPrefix):
		t, err := time.Parse(strings.TrimPrefix(string(f), layoutPrefix), text)
		if err != nil {
			return time.Time{}, fmt.Errorf("want the layout %s", strings.TrimPrefix(string(f), layoutPrefix))
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339")
	}
	return t, nil
}

// DateType is the JSON type a transactionDate travels as. Default: a
// number for an accrual date of an epoch format (the spec's example), a
// string otherwise (the spec's field tables).
type DateType string

// Date types.
const (
	DateNumber DateType = "number"
	DateString DateType = "string"
)

// ParseDateType accepts number and string ("" gives "").
func ParseDateType(s string) (DateType, error) {
	switch t := DateType(s); t {
	case "", DateNumber, DateString:
		return t, nil
	}
	return "", fmt.Errorf("date type %q: want number or string", s)
}

// DateEncoding is a transactionDate's format and JSON type.
type DateEncoding struct {
	Format DateFormat
	Type   DateType
}

func (d DateEncoding) String() string { return fmt.Sprintf("%s as a JSON %s", d.Format, d.Type) }

func (d DateEncoding) validate() error {
	if _, err := ParseDateFormat(string(d.Format)); err != nil {
		return err
	}
	if _, err := ParseDateType(string(d.Type)); err != nil {
		return err
	}
	if d.Type == DateNumber && !d.Format.Epoch() {
		return fmt.Errorf("date format %s cannot travel as a JSON number (only epoch-millis and epoch-seconds can)", d.Format)
	}
	return nil
}

// JSON is t as the JSON value of d.
func (d DateEncoding) JSON(t time.Time) []byte { return d.TextJSON(d.Format.Format(t)) }

// TextJSON is text (written by d.Format) as the JSON value of d: the
// digits as they are for a number, quoted for a string.
func (d DateEncoding) TextJSON(text string) []byte {
	if d.Type == DateNumber {
		return []byte(text)
	}
	b, _ := json.Marshal(text) // a string always encodes
	return b
}

// Read reads a transactionDate sent as raw JSON, requiring d's type and
// format; the error says what was expected, never quoting raw.
func (d DateEncoding) Read(raw []byte) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	isString := len(raw) > 0 && raw[0] == '"'
	switch {
	case d.Type == DateString && !isString:
		return time.Time{}, fmt.Errorf("want a JSON string (%s)", d)
	case d.Type == DateNumber && isString:
		return time.Time{}, fmt.Errorf("want a JSON number (%s)", d)
	}
	text := string(raw)
	if isString {
		if err := json.Unmarshal(raw, &text); err != nil {
			return time.Time{}, fmt.Errorf("not a JSON string")
		}
	}
	t, err := d.Format.Parse(text)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w (%s)", err, d)
	}
	return t, nil
}

// Keyed says how a field the spec marks required-when-the-other-is-null
// (idNumber, passportNumber) goes when it has no value.
type Keyed string

// Keyed encodings.
const (
	// KeyedAbsent leaves the key out (the default).
	KeyedAbsent Keyed = "absent"
	// KeyedNull sends the key with null, as the spec's wording ("required
	// when the other is null") reads for a strict partner.
	KeyedNull Keyed = "null"
)

// ParseKeyed accepts absent and null ("" gives "").
func ParseKeyed(s string) (Keyed, error) {
	switch k := Keyed(s); k {
	case "", KeyedAbsent, KeyedNull:
		return k, nil
	}
	return "", fmt.Errorf("unset keyed fields %q: want absent or null", s)
}
