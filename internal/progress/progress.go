package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Bar draws a bar on a terminal and a plain line every two seconds
// otherwise (logs, CI). It is not safe for concurrent use.
type Bar struct {
	w     io.Writer
	noun  string // "events answered"
	tty   bool
	start time.Time
	last  time.Time
}

// New returns a Bar writing to w, counting noun ("records replayed")
// from start. It draws a bar only when w is a terminal.
func New(w io.Writer, noun string, start time.Time) *Bar {
	f, ok := w.(*os.File)
	return &Bar{w: w, noun: noun, tty: ok && term.IsTerminal(int(f.Fd())), start: start}
}

func (p *Bar) line(done, planned int) string {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(done) / max(elapsed, 1e-3)
	eta := "?"
	if rate > 0 && planned > done {
		eta = (time.Duration(float64(planned-done)/rate) * time.Second).Round(time.Second).String()
	} else if planned <= done {
		eta = "0s"
	}
	pct := 100.0
	if planned > 0 {
		pct = 100 * float64(done) / float64(planned)
	}
	return fmt.Sprintf("%d/%d %s (%.0f%%)  %.0f/s  ETA %s", done, planned, p.noun, pct, rate, eta)
}

// Show reports done of planned; it draws at most every 100 ms on a
// terminal and every 2 s otherwise.
func (p *Bar) Show(done, planned int) {
	now := time.Now()
	if p.tty {
		if now.Sub(p.last) < 100*time.Millisecond && done < planned {
			return
		}
		p.last = now
		const width = 30
		filled := width
		if planned > 0 {
			filled = width * done / planned
		}
		fmt.Fprintf(p.w, "\r[%s%s] %s   ", strings.Repeat("#", filled), strings.Repeat("-", width-filled), p.line(done, planned))
		return
	}
	if now.Sub(p.last) >= 2*time.Second {
		p.last = now
		fmt.Fprintln(p.w, p.line(done, planned))
	}
}

// Finish draws the final state and ends the line.
func (p *Bar) Finish(done, planned int) {
	if p.tty {
		p.last = time.Time{}
		p.Show(done, planned)
		fmt.Fprintln(p.w)
		return
	}
	fmt.Fprintln(p.w, p.line(done, planned))
}
