package personalmatch

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Shortest values matched (see the package doc).
const (
	minLetters = 3
	minDigits  = 6
	// phoneDigits is how many trailing digits of a phone are matched: the
	// national significant number of a Vietnamese mobile, without the
	// country code (84) or trunk prefix (0).
	phoneDigits = 9
	// maxGap is how many separators may stand between two digits of one
	// run: "0912 - 345 - 678" is one number.
	maxGap = 3
)

// vietnamTZ is the zone of a date written as epoch time at local
// midnight (the simulator reads an onboarding date at midnight +07:00).
var vietnamTZ = time.FixedZone("ICT", 7*3600)

// Matcher replaces one member's personal data in texts. Build it once per
// event with New; it is read-only afterwards and safe for concurrent use.
// A nil *Matcher matches nothing.
type Matcher struct {
	letters []string // folded needles
	digits  []string // digit needles
}

// New is the matcher of o's personal data (events.PersonalFields), plus
// the dates of its ID document, which are not personal data by
// themselves but, echoed next to its number, describe the document. It
// returns nil when o carries nothing to match.
func New(o *events.MemberOnboardRequested) *Matcher {
	if o == nil {
		return nil
	}
	m := &Matcher{}
	for name, v := range o.PersonalData() {
		switch name {
		case "phone":
			m.addPhone(v)
		case "birthday":
			m.addDate(v)
		default:
			m.addText(v)
		}
	}
	m.addDate(o.IssueDate)
	m.addDate(o.ExpireDate)
	if len(m.letters) == 0 && len(m.digits) == 0 {
		return nil
	}
	// Longest first, and duplicates once: the order does not change the
	// result (spans are merged), only the work.
	for _, l := range []*[]string{&m.letters, &m.digits} {
		slices.SortFunc(*l, func(a, b string) int { return len(b) - len(a) })
		*l = slices.Compact(*l)
	}
	return m
}

// addText matches v in any case and with or without diacritics, and, when
// v is a number written with separators (an ID number), on its digits.
func (m *Matcher) addText(v string) {
	if f := strings.TrimSpace(string(fold(v, nil, nil))); utf8.RuneCountInString(f) >= minLetters {
		m.letters = append(m.letters, f)
	}
	if d, ok := number(v); ok && len(d) >= minDigits {
		m.digits = append(m.digits, d)
	}
}

// addPhone matches v's last phoneDigits digits wherever they appear, and
// v as a text.
func (m *Matcher) addPhone(v string) {
	m.addText(v)
	d := digitsOf(v)
	if len(d) < minDigits {
		return
	}
	m.digits = append(m.digits, d[max(0, len(d)-phoneDigits):])
}

// addDate matches the date v (yyyy-MM-dd, as the events carry it) in the
// spellings of the package doc; a v that is not such a date is a text.
func (m *Matcher) addDate(v string) {
	if v == "" {
		return
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		m.addText(v)
		return
	}
	y, mo, d := t.Date()
	for _, f := range []string{"%04[1]d%02[2]d%02[3]d", "%02[3]d%02[2]d%04[1]d", "%02[2]d%02[3]d%04[1]d",
		"%04[1]d%[2]d%[3]d", "%[3]d%[2]d%04[1]d", "%[2]d%[3]d%04[1]d"} {
		m.digits = append(m.digits, fmt.Sprintf(f, y, int(mo), d))
	}
	for _, mid := range []time.Time{t, time.Date(y, mo, d, 0, 0, 0, 0, vietnamTZ)} {
		for _, n := range []int64{mid.UnixMilli(), mid.Unix()} {
			if s := fmt.Sprint(n); len(s) >= minDigits {
				m.digits = append(m.digits, s)
			}
		}
	}
}

// Scrub is s with every match replaced by events.Redacted. Safe on a nil
// Matcher (s unchanged).
func (m *Matcher) Scrub(s string) string {
	if m == nil || s == "" {
		return s
	}
	spans := m.letterSpans(s, m.digitSpans(s, nil))
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for i := 0; i < len(spans); {
		sp := spans[i]
		for i++; i < len(spans) && spans[i].start <= sp.end; i++ {
			sp.end = max(sp.end, spans[i].end)
		}
		b.WriteString(s[at:sp.start])
		b.WriteString(events.Redacted)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// span is a byte range [start, end) of the original text.
type span struct{ start, end int }

// digitSpans appends to spans the digit runs of s that hold a digit
// needle.
func (m *Matcher) digitSpans(s string, spans []span) []span {
	if len(m.digits) == 0 {
		return spans
	}
	// digs holds s's digits, '|' between runs; runs[runOf[i]] is the
	// extent in s of the run of digs[i].
	var digs []byte
	var runs []span
	var runOf []int
	gap := -1 // separators since the last digit; -1 outside a run
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			if gap < 0 || gap > maxGap {
				if len(digs) > 0 {
					digs, runOf = append(digs, '|'), append(runOf, -1)
				}
				// A leading "+" or "(+" belongs to the number.
				start := i
				for start > 0 && (s[start-1] == '+' || s[start-1] == '(') {
					start--
				}
				runs = append(runs, span{start, i})
			}
			digs, runOf = append(digs, byte(r)), append(runOf, len(runs)-1)
			runs[len(runs)-1].end = i + 1
			gap = 0
		case gap >= 0 && separator(r):
			gap++
		default:
			gap = -1
		}
	}
	text := string(digs)
	for _, n := range m.digits {
		for from := 0; ; {
			k := strings.Index(text[from:], n)
			if k < 0 {
				break
			}
			spans = append(spans, runs[runOf[from+k]])
			from += k + 1
		}
	}
	return spans
}

func separator(r rune) bool {
	switch r {
	case ' ', '-', '.', '/', '+', '(', ')', '\u00a0':
		return true
	}
	return false
}

// letterSpans appends to spans the ranges of s whose folded form is a
// letter needle.
func (m *Matcher) letterSpans(s string, spans []span) []span {
	if len(m.letters) == 0 {
		return spans
	}
	var starts, ends []int
	folded := string(fold(s, &starts, &ends))
	for _, n := range m.letters {
		for from := 0; ; {
			k := strings.Index(folded[from:], n)
			if k < 0 {
				break
			}
			i, j := from+k, from+k+len(n)-1
			spans = append(spans, span{starts[i], ends[j]})
			from = i + 1
		}
	}
	return spans
}

// fold lower-cases s, strips Latin diacritics, drops combining marks and
// makes each run of white space one space. When starts and ends are not
// nil, they receive, for each byte of the result, the byte range in s of
// the rune it comes from (a dropped mark or space widens the range of the
// byte before it).
func fold(s string, starts, ends *[]int) []byte {
	out := make([]byte, 0, len(s))
	track := starts != nil
	widen := func(to int) {
		if track && len(*ends) > 0 {
			// Every byte of the last rune written ends at to.
			for k := len(*ends) - 1; k >= 0 && (*starts)[k] == (*starts)[len(*starts)-1]; k-- {
				(*ends)[k] = to
			}
		}
	}
	for i, r := range s {
		end := i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			end = i + 1
		}
		switch {
		case unicode.Is(unicode.Mn, r):
			widen(end)
			continue
		case unicode.IsSpace(r):
			if len(out) > 0 && out[len(out)-1] == ' ' {
				widen(end)
				continue
			}
			r = ' '
		default:
			r = base(unicode.ToLower(r))
		}
		n := len(out)
		out = utf8.AppendRune(out, r)
		if track {
			for range len(out) - n {
				*starts = append(*starts, i)
				*ends = append(*ends, end)
			}
		}
	}
	return out
}

// bases maps a lower-case Latin letter with diacritics to its base
// letter: Vietnamese in full, and the common Latin-1 and Latin Extended-A
// letters. Read-only after initialisation.
var bases = func() map[rune]rune {
	m := map[rune]rune{}
	for base, variants := range map[rune]string{
		'a': "àáâãäåāăąạảấầẩẫậắằẳẵặ",
		'c': "çćčĉċ",
		'd': "đďð",
		'e': "èéêëēĕėęěẹẻẽếềểễệ",
		'g': "ĝğġģ",
		'i': "ìíîïĩīĭįıịỉ",
		'l': "ĺļľŀł",
		'n': "ñńņňŉ",
		'o': "òóôõöøōŏőơọỏốồổỗộớờởỡợ",
		'r': "ŕŗř",
		's': "śŝşš",
		't': "ţťŧ",
		'u': "ùúûüũūŭůűųưụủứừửữự",
		'y': "ýÿŷỳỵỷỹ",
		'z': "źżž",
	} {
		for _, v := range variants {
			m[v] = base
		}
	}
	return m
}()

func base(r rune) rune {
	if r < utf8.RuneSelf {
		return r
	}
	if b, ok := bases[r]; ok {
		return b
	}
	return r
}

// number returns v's digits when v is a number written with separators
// (digits, spaces, dashes, dots, slashes, '+', parentheses) and nothing
// else.
func number(v string) (string, bool) {
	for _, r := range v {
		if (r < '0' || r > '9') && !separator(r) {
			return "", false
		}
	}
	return digitsOf(v), true
}

func digitsOf(v string) string {
	var b strings.Builder
	for _, r := range v {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
